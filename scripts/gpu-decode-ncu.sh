#!/usr/bin/env bash
# Nsight Compute (--set full; SASS=1 adds the per-instruction SASS tables) on one launch of each decode kernel of a
# synthetic model's one-sequence decode (`bench -p 0`; SHAPE, TYPE, default Qwen3-30B-A3B Q4_K_M): launch SKIP of
# each of the KERNELS regexes. Headline metrics and stalls in $OUT/table.txt, reports in $OUT/ncu-<kernel>.txt.
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh tokenizer/ggml-vocab-llama-bpe.gguf
#   there: SASS=1 KERNELS="attention_split_tc moe_route" scripts/gpu-decode-ncu.sh   (carry .device, .device-bin)
#          BENCH_ARGS="--parallel 16 -p 512 -n 24 --pipeline": a 16-sequence step's launches instead
set -uo pipefail
export SHAPE=${SHAPE:-qwen3-30b-a3b} TYPE=${TYPE:-Q4_K_M}
source "$(dirname "${BASH_SOURCE[0]}")/device-bins.sh"  # $out, /tmp/bin, the environment
source "$(dirname "${BASH_SOURCE[0]}")/device-model.sh"  # $model, make_model
source "$(dirname "${BASH_SOURCE[0]}")/ncu-launch.sh"
make_model /tmp/bin/llm-run
for k in ${KERNELS:-attention_split_tc moe_route expert_glu expert_down}; do
  ncu_launch "$k" "$k" "${SKIP:-300}" /tmp/bin/llm-run bench -m "$model" --device cuda ${BENCH_ARGS:--p 0 -n 32 -r 1} --no-warmup \
    | tee -a "$out/table.txt"
done
# The per-instruction SASS tables in one archive (the device tool returns a few files a call).
if ls "$out"/sass-*.csv >/dev/null 2>&1; then
  tar czf "$out/sass.tar.gz" -C "$out" $(cd "$out" && ls sass-*.csv) && rm -f "$out"/sass-*.csv
fi
rm -f "$out"/ncu-run-*.log
