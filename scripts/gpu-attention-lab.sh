#!/usr/bin/env bash
# Device-machine script for the decode attention work (docs/kernel-notes.md): the attention kernel tests, then the
# attention lab (KernelLab.Attention: one layer alone per cache type and split count) of each build given, side by
# side; optionally Nsight Compute's full sections of one launch per case (NCU_CASES, NCU_KERNEL=regex).
# Build and carry first (one cuda_kernels_test per variant, e.g. A/ and B/ under a carried folder).
# Usage: scripts/gpu-attention-lab.sh DIR_A [DIR_B ...]   (each DIR holds a cuda_kernels_test)
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 DIR_WITH_cuda_kernels_test..." >&2; exit 2; }
out=${OUT:-gpu-logs}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
rc=0
for dir in "$@"; do
  tag=$(basename "$dir")
  timeout 200 "$dir/cuda_kernels_test" --gtest_color=no --gtest_filter='*Attention*:*KvWrite*:*RopeKv*:-KernelLab.*' \
    >"$out/tests-$tag.log" 2>&1
  r=$?
  echo "== $tag attention tests rc=$r: $(grep -E '^\[  PASSED' "$out/tests-$tag.log")"
  grep -E '^\[  FAILED' "$out/tests-$tag.log" | head -10
  [ $r -eq 0 ] || rc=$r
  LLM_CUDA_BENCH=1 timeout 200 "$dir/cuda_kernels_test" --gtest_color=no --gtest_filter='KernelLab.Attention' \
    >"$out/lab-$tag.log" 2>&1
  grep -E '^ *(hd|[0-9]+) ' "$out/lab-$tag.log" >"$out/lab-$tag.txt"
done
# Side by side: each build's rows in its own columns, in the order given.
paste $(for dir in "$@"; do echo "$out/lab-$(basename "$dir").txt"; done) | tee "$out/lab.txt"
# Nsight Compute: full sections and stall reasons of one launch of the first build per case (NCU_CASES="128/16384/q4_0
# ...", the lab's LLM_LAB_CASE names; the launch is one of the executor's split count, after the warm-up).
if [ -n "${NCU_CASES:-}" ]; then
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  for case in $NCU_CASES; do
    f="$out/ncu-$(echo "$case" | tr / -).txt"
    LLM_CUDA_BENCH=1 LLM_LAB_CASE=$case timeout 240 "$ncu" --clock-control none --set full \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
      --kernel-name regex:"${NCU_KERNEL:-attention}" --launch-skip "${NCU_SKIP:-60}" --launch-count 1 \
      "$1/cuda_kernels_test" --gtest_filter='KernelLab.Attention' >"$f" 2>&1
    echo "== ncu $case rc=$?"
    grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Size|Grid Size|Warp Cycles Per Issued|Issue Slots Busy|Stall|L1/TEX Hit|L2 Hit|Eligible Warps|Waves Per SM|Executed Ipc|Dynamic Shared|Block Limit|stalled" "$f" | head -80
  done
fi
# Test results last, so that they close the output.
for dir in "$@"; do echo "== $(basename "$dir") attention tests: $(grep -E '^\[  (PASSED|FAILED)' "$out/tests-$(basename "$dir").log" | tr '\n' ' ')"; done
exit $rc
