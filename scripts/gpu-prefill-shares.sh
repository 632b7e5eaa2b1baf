#!/usr/bin/env bash
# Where a pp512 goes, kernel by kernel, for each SHAPES entry (shape:type, made by `llm-run synth`): every kernel of
# one `llm-run bench -p 512 -n 0 -r 1` (bench's warm-up pass and the timed one) timed alone by Nsight Compute,
# caches and clocks left as they run, to $OUT/ncu-SHAPE.csv; sum them here with scripts/ncu-kernel-shares.py.
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh tokenizer/ggml-vocab-llama-bpe.gguf
#   there: SHAPES="qwen3-30b-a3b:Q4_K_M gpt-oss-20b:MXFP4_MOE" scripts/gpu-prefill-shares.sh   (carry .device,
#          .device-bin)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device-bins.sh"  # $out, /tmp/bin, the environment
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for st in ${SHAPES:-qwen3-30b-a3b:Q4_K_M}; do
  IFS=: read -r shape type <<<"$st"
  model=/tmp/$shape-$type.gguf
  [ -f "$model" ] || /tmp/bin/llm-run synth --shape "$shape" --type "$type" \
    --vocab .device/tokenizer/ggml-vocab-llama-bpe.gguf -o "$model" >>"$out/synth.log" 2>&1
  timeout 240 "$ncu" --cache-control none --clock-control none --metrics gpu__time_duration.sum --csv \
    --print-units base /tmp/bin/llm-run bench -m "$model" --device cuda -p 512 -n 0 -r 1 \
    >"$out/ncu-$shape.csv" 2>"$out/ncu-$shape.err"
  echo "ncu $shape rc=$? $(grep -c gpu__time_duration "$out/ncu-$shape.csv") kernels"
done
