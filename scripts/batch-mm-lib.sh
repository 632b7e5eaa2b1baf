# Sourced by the small-batch device scripts (gpu-batch-mm.sh, gpu-batch-ab.sh), after /tmp/bin holds the carried
# binaries: starts the synthetic Llama-3-8B (device-model.sh's make_model, $model) in the background ($synth: wait
# for it before a bench), empties $out/table.txt and names the device there, and gives them
#   row LINE...              a line to stdout and the table, kept as it comes (a call cut short keeps its rows)
#   passed LOG               a gtest log's verdict lines (and the paged tests' agreement and error lines)
#   lab LABEL BINARY [ENV]   KernelLab.BatchMm of that test binary, its table as rows
#   bench LABEL BINARY [ENV] `llm-run bench --parallel $NPL -p 512 -n 128`: decode and prefill tok/s per count
source "$(dirname "${BASH_SOURCE[0]}")/device-model.sh"  # $out, the assets' environment, make_model
make_model /tmp/bin/llm-run &  # the synthetic Llama-3-8B Q4_K_M at $model, while the tests run
synth=$!
: >"$out/table.txt"
row() { printf '%s\n' "$@" | tee -a "$out/table.txt"; }
passed() { grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|agreement|paged  ' "$1" | tr '\n' ' '; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/^/device: /' | tee -a "$out/table.txt"
lab() {
  local label=$1 bin=$2
  shift 2
  env LLM_CUDA_BENCH=1 "$@" "$bin" --gtest_filter=KernelLab.BatchMm >"$out/lab-$label.txt" 2>&1
  row "lab, $label:" "$(sed -n '/^device/,/^\[/p' "$out/lab-$label.txt" | grep -v '^\[')"
}
bench() {
  local label=$1 bin=$2
  shift 2
  env "$@" "$bin" bench -m "$model" --device cuda --parallel "$NPL" -p 512 -n 128 >"$out/par-$label.md" \
    2>"$out/par-$label.err"
  row "$label (B: decode, prefill tok/s): $(awk -F'|' '/^\| *[0-9]+ *\|/ {gsub(/ /, "", $4); gsub(/ /, "", $7);
    gsub(/ /, "", $9); printf "%s: %s, %s;  ", $4, $9, $7}' "$out/par-$label.md")"
}
