#!/usr/bin/env bash
# The one script run on the GPU machine (docs/gpu-validation.md): runs the carried, already-built CUDA test binaries
# and the kernel lab timings, writing full logs under $OUT (or ./gpu-logs). Build and carry first:
#   ninja -C build-cuda cuda_kernels_test cuda_session_test
#   mkdir -p build-cuda-carry && cp build-cuda/tests/cuda/{cuda_kernels_test,cuda_session_test} build-cuda-carry/
#   strip build-cuda-carry/*; ../shared/device/prepare.sh models/...   (carry [".device", "build-cuda-carry"])
# Usage: scripts/gpu-check.sh [bin-dir]   (default build-cuda-carry)
set -uo pipefail
bin=${1:-build-cuda-carry}
out=${OUT:-gpu-logs}
mkdir -p "$out"
[ -f .device/env.sh ] && source .device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
status=0
for t in cuda_kernels_test cuda_session_test; do
  [ -x "$bin/$t" ] || { echo "missing $bin/$t" | tee -a "$out/summary.txt"; continue; }
  timeout 200 "$bin/$t" --gtest_color=no >"$out/$t.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  { echo "== $t rc=$rc"; grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests ran|^  [a-zA-Z0-9_-]+ +GPU vs CPU' "$out/$t.log"; } | tee -a "$out/summary.txt"
done
LLM_CUDA_BENCH=1 timeout 120 "$bin/cuda_kernels_test" --gtest_filter=KernelLab.* 2>&1 | tee "$out/bench.txt"
exit $status
