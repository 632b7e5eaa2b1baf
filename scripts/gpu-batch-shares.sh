#!/usr/bin/env bash
# Where a batched decode step's time goes: `llm-run bench --parallel NPL` on a synthetic Llama-3-8B Q4_K_M, whole and
# with one kind of step left out (LLM_CUDA_OMIT_STEPS: the results are wrong, only the time counts), so each kind's
# share shows as the speed-up without it. VARIANTS adds other runs, separated by ';': environment settings
# ("LLM_CUDA_X=1 LLM_LAB_Y=1") or bench flags ("--temp 1": device draws instead of the logits copied out). Results
# under $OUT, the table last.
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh tokenizer/ggml-vocab-llama-bpe.gguf
#   there: NPL=4,32 scripts/gpu-batch-shares.sh   (carry .device, .device-bin)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
rm -rf /tmp/bin && mkdir -p /tmp/bin && tar xJf .device-bin/bins.tar.xz -C /tmp/bin
source .device/env.sh >/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/device-libs.sh"
model=/tmp/llama3-8b-Q4_K_M.gguf
[ -f "$model" ] || /tmp/bin/llm-run synth --shape llama3-8b --type Q4_K_M \
  --vocab .device/tokenizer/ggml-vocab-llama-bpe.gguf -o "$model" >"$out/synth.log" 2>&1
NPL=${NPL:-${B:-32}}
omits=${OMITS-"attn_kqv attn_q,attn_k,attn_v,attn_output ffn_gate,ffn_up,ffn_down result_output"}
: >"$out/table.txt"
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/^/device: /' | tee -a "$out/table.txt"
run() {  # run LABEL [VAR=VALUE...] [-- BENCH FLAGS...]: decode tok/s per count
  local label=$1 envs=() flags=()
  shift
  for a in "$@"; do if [ ${#flags[@]} -gt 0 ] || [[ $a == --* ]]; then flags+=("$a"); else envs+=("$a"); fi; done
  env "${envs[@]}" /tmp/bin/llm-run bench -m "$model" --device cuda --parallel "$NPL" -p 512 -n 128 "${flags[@]}" \
    >"$out/par.md" 2>>"$out/bench.err"
  echo "$label: $(awk -F'|' '/^\| *512 *\|/ {gsub(/ /, "", $4); gsub(/ /, "", $9); printf "B=%s %s;  ", $4, $9}' \
    "$out/par.md")" | tee -a "$out/table.txt"
}
for round in $(seq "${ROUNDS:-1}"); do
  run "every step"
  for omit in $omits; do run "omit $omit" LLM_CUDA_OMIT_STEPS="$omit"; done
  IFS=';' read -ra variants <<<"${VARIANTS:-}"
  for v in "${variants[@]}"; do
    read -ra words <<<"$v"
    [ ${#words[@]} -gt 0 ] && run "$v" "${words[@]}"
  done
done
