#!/usr/bin/env bash
# Nsight Compute on one small-batch launch of the lab (KernelLab.BatchMm, Q4_K, K = 4096, N = 14336): SKIP picks the
# launch (the lab makes 33 batch_mm launches a token count, T = 2, 4, 8, 16, 32, 64: SKIP=40 is T = 4, 173 T = 64).
# The headline metrics and warp stalls go to stdout, the whole report to $OUT/ncu-SKIP.txt (SASS=1: the SASS with
# per-instruction counts to $OUT/sass-SKIP.csv); scripts/ncu-launch.sh does the profiling. KERNEL: another kernel
# name regex (q4k_wgmma_kernel); LLM_LAB_TOKENS / LLM_LAB_BATCH_SHAPES narrow the lab (bench_kernels.cpp).
#   there: SKIPS="40 173" scripts/gpu-batch-mm-ncu.sh   (carry .device, .device-bin)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
[ -x /tmp/bin/cuda_kernels_test ] || { mkdir -p /tmp/bin && tar xJf .device-bin/bins.tar.xz -C /tmp/bin; }
source .device/env.sh >/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/device-libs.sh"
source "$(dirname "${BASH_SOURCE[0]}")/ncu-launch.sh"
export LLM_CUDA_BENCH=1
for skip in ${SKIPS:-40 173}; do
  ncu_launch "$skip" "${KERNEL:-batch_mm_(frag|tile)_kernel}" "$skip" /tmp/bin/cuda_kernels_test \
    --gtest_filter=KernelLab.BatchMm
done
