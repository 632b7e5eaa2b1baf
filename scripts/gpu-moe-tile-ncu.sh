#!/usr/bin/env bash
# Nsight Compute on the MoE prefill tile launches of the kernel lab (KernelLab.Moe at T = 512): for each TYPE of
# TYPES (Q4_K: Qwen3-30B-A3B ffn_up, Q6_K: its ffn_down, Q8_0, MXFP4: gpt-oss-20b ffn_up), the headline metrics and
# warp-stall reasons to stdout, the whole report to $OUT/ncu-moe-TYPE.txt (SASS=1: per-instruction executions and
# stall samples to $OUT/sass-moe-TYPE.csv); scripts/ncu-launch.sh does the profiling.
# Why: to see what bounds the tiles (issue 27's prefill: 52-90 TFLOP/s, far under the tensor cores' rate).
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh tokenizer/ggml-vocab-llama-bpe.gguf
#   there: TYPES="Q4_K MXFP4" scripts/gpu-moe-tile-ncu.sh   (carry .device, .device-bin)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/bin
[ -x /tmp/bin/cuda_kernels_test ] || tar xJf .device-bin/bins.tar.xz -C /tmp/bin
source .device/env.sh >/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/device-libs.sh"
source "$(dirname "${BASH_SOURCE[0]}")/ncu-launch.sh"
# KernelLab.Moe's shapes in order (Q4_K's 64-user tiles: the fragment kernel), 55 tile launches each (5 warm-up + 50 timed); 20 in takes a warm launch.
declare -A first=([Q4_K]=0 [Q6_K]=55 [Q8_0]=110 [MXFP4]=165)
for type in ${TYPES:-Q4_K MXFP4}; do
  LLM_CUDA_BENCH=1 ncu_launch "moe-$type" 'moe_(tile|q4k_fragment|mxfp4_fragment)_kernel' $((first[$type] + 20)) \
    /tmp/bin/cuda_kernels_test --gtest_filter=KernelLab.Moe
done
