#!/usr/bin/env bash
# Nsight Compute on one split-attention launch of a paged decode step (`llm-run bench --parallel B -p 512 -n 64` on
# the synthetic Llama-3-8B Q4_K_M, ~600 positions a sequence): for each B of NPL, launch SKIP of the kernels matching
# KERNEL (default: the tensor-core split kernels), past the prompts. The headline metrics and warp stalls go to
# stdout and $OUT/table.txt, each whole report to $OUT/ncu-B<n>.txt (SASS=1 adds the SASS with per-instruction
# stall samples); scripts/ncu-launch.sh does the profiling. What a batched step's attention spends (issue 26).
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh tokenizer/ggml-vocab-llama-bpe.gguf
#   there: NPL="1 4 16" scripts/gpu-attention-ncu.sh   (carry .device, .device-bin)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device-bins.sh"  # $out, /tmp/bin, the environment
source "$(dirname "${BASH_SOURCE[0]}")/device-model.sh"  # $model, make_model
source "$(dirname "${BASH_SOURCE[0]}")/ncu-launch.sh"
make_model /tmp/bin/llm-run
: >"$out/table.txt"
for b in ${NPL:-1 4 16}; do
  # 32 layers a step: SKIP=1500 is ~47 steps after the first split launch, inside the decode of every B here.
  ncu_launch "B$b" "${KERNEL:-attention_split_tc}" "${SKIP:-1500}" /tmp/bin/llm-run bench -m "$model" --device cuda \
    --parallel "$b" -p 512 -n 64 | sed "s/^/B = $b, /" | tee -a "$out/table.txt"
done
