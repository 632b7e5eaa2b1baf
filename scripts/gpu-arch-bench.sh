#!/usr/bin/env bash
# The newer architectures' shapes (gemma3, phi3, the mixtures of experts) beside llama.cpp on the same files, in one
# device call (issues 27 and 28's benchmarks): starts llama.cpp's build detached first (.device/llama-cpp-build.sh,
# ../shared/anchors/README.md), makes the models with `llm-run synth` (random weights of the real shapes, the preset's
# tensor types; the llama-bpe vocabulary) while it builds, waits for the build (a build beside a decode bench skews
# it), then benches llm-run and llama-bench on the same files. Results under $OUT, the table last.
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh --llama-cpp tokenizer/ggml-vocab-llama-bpe.gguf
#   there: SHAPES="gemma3-12b:Q4_K_M phi4:Q4_K_M" DEPTHS=0,16384 scripts/gpu-arch-bench.sh   (carry .device, .device-bin)
# A shape may carry its own depths (gemma3-12b:Q4_K_M:0,16384); SKIP_LLAMA=1 benches llm-run only.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device-bins.sh"  # $out, /tmp/bin, the environment
WAIT=0 .device/llama-cpp-build.sh >/dev/null 2>&1  # detached: it builds while the models are made
vocab=.device/tokenizer/ggml-vocab-llama-bpe.gguf
args="-p 512 -n 128 -r 3"
table=()
for st in ${SHAPES:-gemma3-12b:Q4_K_M phi4:Q4_K_M}; do
  IFS=: read -r shape type depths <<<"$st"
  model=/tmp/$shape-$type.gguf
  [ -f "$model" ] || /tmp/bin/llm-run synth --shape "$shape" --type "$type" --vocab "$vocab" -o "$model" \
    >>"$out/synth.log" 2>&1 || table+=("$shape $type: synth failed (synth.log)")
done
WAIT=${LLAMA_WAIT:-330} .device/llama-cpp-build.sh | tee "$out/llama-build.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader | tee "$out/clocks.txt"
for st in ${SHAPES:-gemma3-12b:Q4_K_M phi4:Q4_K_M}; do
  IFS=: read -r shape type depths <<<"$st"  # an optional third field: this shape's depths (else DEPTHS)
  depths=${depths:-${DEPTHS:-0}} model=/tmp/$shape-$type.gguf
  [ -f "$model" ] || continue
  /tmp/bin/llm-run bench -m "$model" --device cuda $args -d "$depths" -o md >"$out/llm-run-$shape.md" 2>&1
  table+=("llm-run $shape $type: $(grep -E '^\| .*(pp|tg)[0-9]' "$out/llm-run-$shape.md" | awk -F'|' '{print $6 $7}' | tr -s ' ' | tr '\n' ';')")
done
lb=/tmp/llama.cpp/build/bin/llama-bench
for st in ${SHAPES:-gemma3-12b:Q4_K_M phi4:Q4_K_M}; do
  IFS=: read -r shape type depths <<<"$st"
  depths=${depths:-${DEPTHS:-0}} model=/tmp/$shape-$type.gguf
  [ -x "$lb" ] && [ -f "$model" ] || continue
  [ -n "${SKIP_LLAMA:-}" ] && continue
  "$lb" -m "$model" -ngl 99 -fa 1 $args -d "$depths" -o md >"$out/llama-$shape.md" 2>&1
  table+=("llama.cpp $shape $type: $(grep -E '^\| .*(pp|tg)[0-9]' "$out/llama-$shape.md" | awk -F'|' '{print $(NF-2) $(NF-1)}' | tr -s ' ' | tr '\n' ';')")
done
echo
printf '%s\n' "${table[@]}" | tee "$out/table.txt"
