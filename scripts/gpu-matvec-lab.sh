#!/usr/bin/env bash
# Device-machine script for the decode matvec work (docs/kernel-notes.md): matvec correctness tests for all 13
# weight types (both kernels), then the kernel lab; logs under $OUT (or ./gpu-logs), the lab's table printed last.
# Build and carry first:
#   ninja -C build-perf tests/cuda/cuda_kernels_test tests/cuda/matvec-lab
#   mkdir -p build-perf-carry && cp build-perf/tests/cuda/{cuda_kernels_test,matvec-lab} build-perf-carry/
#   strip build-perf-carry/*            (carry ["build-perf-carry"])
# Usage: scripts/gpu-matvec-lab.sh [bin-dir]   (default build-perf-carry)
set -uo pipefail
bin=${1:-build-perf-carry}
out=${OUT:-gpu-logs}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
timeout 150 "$bin/cuda_kernels_test" --gtest_color=no --gtest_filter='*Matvec*:*Dequant*' >"$out/matvec_tests.log" 2>&1
rc=$?
grep -E '^\[  (FAILED|PASSED) |tests ran|Failure|mismatch|max err' "$out/matvec_tests.log" | head -40
echo "== matvec tests rc=$rc"
timeout 180 "$bin/matvec-lab" 2>&1 | tee "$out/matvec_lab.txt"
exit $rc
