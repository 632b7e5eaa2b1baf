#!/usr/bin/env bash
# Nsight Compute on one small-batch launch of the lab (KernelLab.BatchMm, Q4_K, K = 4096, N = 14336): SKIP picks the
# launch (the lab makes 33 batch_mm launches a token count, T = 2, 4, 8, 16, 32, 64: SKIP=40 is T = 4, 173 T = 64).
# The headline metrics go to stdout, the whole report to $OUT/ncu-SKIP.txt (SASS=1: the SASS with per-instruction
# counts to $OUT/sass-SKIP.csv).
#   there: SKIPS="40 173" scripts/gpu-batch-mm-ncu.sh   (carry .device, .device-bin)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
[ -x /tmp/bin/cuda_kernels_test ] || { mkdir -p /tmp/bin && tar xJf .device-bin/bins.tar.xz -C /tmp/bin; }
source .device/env.sh >/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/device-libs.sh"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for skip in ${SKIPS:-40 173}; do
  LLM_CUDA_BENCH=1 timeout 200 "$ncu" --clock-control none --set full \
    --kernel-name regex:'batch_mm_(frag|tile)_kernel' \
    --launch-skip "$skip" --launch-count 1 -o "/tmp/ncu-$skip" -f /tmp/bin/cuda_kernels_test \
    --gtest_filter=KernelLab.BatchMm >"$out/ncu-run-$skip.log" 2>&1
  "$ncu" -i "/tmp/ncu-$skip.ncu-rep" --print-details all >"$out/ncu-$skip.txt" 2>&1
  # Per SASS instruction: executions and stall samples, for the hot spots.
  [ -n "${SASS:-}" ] && "$ncu" -i "/tmp/ncu-$skip.ncu-rep" --page source --print-source sass --csv \
    >"$out/sass-$skip.csv" 2>&1
  head='^    (Duration|DRAM Throughput|Executed Ipc Active|Issue Slots Busy|Executed Instructions|Registers Per Thread'
  head+='|Achieved Active Warps Per SM|Eligible Warps Per Scheduler)  '
  echo "launch $skip: $(grep -E "$head" "$out/ncu-$skip.txt" | sort -u | tr -s ' ' | tr '\n' ';')"
done
