#!/usr/bin/env bash
# Decode/prefill benchmark on the GPU machine (see ../shared/device/README.md). Uses a carried build and the
# carried vocabularies in .device/, makes the four benchmark models with `llm-run synth` in /tmp (they are too big to
# carry), runs `llm-run bench` on each and writes a markdown table to $OUT/bench.md (and every log beside it).
#   here:  scripts/build-carry.sh && ../shared/device/prepare.sh tokenizer/ggml-vocab-llama-bpe.gguf tokenizer/ggml-vocab-llama-spm.gguf
#   there: scripts/gpu-bench.sh [quick]      (carry: .device and build-carry)
#   env:   REPS (3), DEPTHS (e.g. 0,16384: context depths for the Q4_K_M shapes), KV_TYPES (e.g. q8_0: those shapes
#          again with that --cache-type), LLM_RUN_BIN
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
[ -f .device/env.sh ] && source .device/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-libs.sh"  # the HTTP library beside the binaries
bin=${LLM_RUN_BIN:-build-carry/llm-run}
bpe=.device/tokenizer/ggml-vocab-llama-bpe.gguf
spm=.device/tokenizer/ggml-vocab-llama-spm.gguf
reps=${REPS:-3}
mode=${1:-full}

models=("llama3-1b Q4_K_M $bpe" "llama3-8b Q4_K_M $bpe" "llama3-8b Q4_0 $bpe" "llama2-7b Q4_0 $spm")
[ "$mode" = quick ] && models=("llama3-1b Q4_K_M $bpe")

# The binary's own commit (--version): the device copy's git metadata can be stale.
echo "# llm-run bench on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $("$bin" --version 2>/dev/null | head -1)" | tee "$out/bench.md"
for m in "${models[@]}"; do
  set -- $m
  file=/tmp/$1-$2.gguf
  if [ ! -f "$file" ]; then
    "$bin" synth --shape "$1" --type "$2" --vocab "$3" -o "$file" 2>&1 | tee -a "$out/synth.log" || continue
  fi
  extra=()
  # Long-context figures for the Q4_K_M shapes (DEPTHS=0,16384 for the issue's 16k figure).
  if [ "$2" = Q4_K_M ] && [ -n "${DEPTHS:-}" ]; then extra=(-d "$DEPTHS"); fi
  # Load time (page-cached file: the synth just wrote it) and a short generation, as a user runs it.
  "$bin" -m "$file" -p "Once upon a time" -n 32 --temp 0 -v --device cuda 2>&1 >/dev/null | grep -E "load|generation|device" | tee -a "$out/bench.md"
  echo "## $1 $2" | tee -a "$out/bench.md"
  "$bin" bench -m "$file" --device cuda -p 512 -n 128 -r "$reps" "${extra[@]}" -o md 2> >(tee -a "$out/bench.log" >&2) | tee -a "$out/bench.md"
  # The same shape with a q8_0 KV cache (KV_TYPES=q8_0, with DEPTHS: the long-context figures it is for).
  for kv in ${KV_TYPES:-}; do
    [ "$2" = Q4_K_M ] && [ -n "${DEPTHS:-}" ] || continue
    echo "## $1 $2, --cache-type $kv" | tee -a "$out/bench.md"
    "$bin" bench -m "$file" --device cuda --cache-type "$kv" -p 512 -n 128 -r "$reps" -d "$DEPTHS" -o md \
      2> >(tee -a "$out/bench.log" >&2) | tee -a "$out/bench.md"
  done
done
cat "$out/bench.md"
