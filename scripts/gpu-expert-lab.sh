#!/usr/bin/env bash
# One device call for the mixtures' decode products (issue 27, docs/moe.md): the expert kernels' tests, their kernel
# lab (KernelLab.ExpertMatvec: one launch and back to back), the dense int16 matvec on matrices of the same bytes
# (matvec-lab with MATVEC_LAB_SHAPES), and Nsight Compute on one launch of each (NCU=0 skips it).
#   here:  ninja -C build cuda_kernels_test matvec-lab; scripts/pack-lab.sh   (.device-bin/lab.tar.xz)
#   there: scripts/gpu-expert-lab.sh   (carry .device-bin; writes $OUT/summary.txt and logs)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/lab
tar xJf .device-bin/lab.tar.xz -C /tmp/lab
export LD_LIBRARY_PATH=/tmp/lab/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
sum() { echo "$*" | tee -a "$out/summary.txt"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | sed 's/^/device: /' | tee -a "$out/summary.txt"
timeout 120 /tmp/lab/cuda_kernels_test --gtest_color=no --gtest_filter="${TESTS:-ExpertMatvec.*:MoeKernels.*}" \
  >"$out/tests.log" 2>&1
sum "tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED  \]' "$out/tests.log" | tr '\n' ' ')"
# With a base build packed (pack-lab.sh BASE_DIR): base and this build, twice, interleaved.
labs=cuda_kernels_test
[ -x /tmp/lab/cuda_kernels_test-base ] && labs="cuda_kernels_test-base cuda_kernels_test cuda_kernels_test-base cuda_kernels_test"
for b in $labs; do
  sum "== $b"
  LLM_CUDA_BENCH=1 timeout 200 /tmp/lab/$b --gtest_color=no --gtest_filter=KernelLab.ExpertMatvec \
    2>&1 | grep -E '^\||device' | tee -a "$out/summary.txt"
done
# The experts' bytes as one dense matrix: qwen3-30b-a3b gate+up (8 x 2 x 768 rows of 2048), down (K = 8 x 768),
# its q and o; gpt-oss-20b gate+up (4 x 2 x 2880 rows of 2880) and down (K = 4 x 2880), Q4_0 standing in for MXFP4.
MATVEC_LAB_SHAPES=${SHAPES:-2048x12288,6144x2048,2048x4096,4096x2048,2880x23040,11520x2880} \
  MATVEC_LAB_TYPES=${TYPES:-Q4_K,Q6_K,Q4_0} timeout 200 /tmp/lab/matvec-lab >"$out/matvec-lab.log" 2>&1
sum "matvec-lab rc=$?"
sed -n '/^matvec T=1/,$p' "$out/matvec-lab.log" | tee -a "$out/summary.txt"
if [ -x /tmp/lab/matvec-lab-base ]; then
  MATVEC_LAB_SHAPES=${SHAPES:-2048x12288,6144x2048,2048x4096,4096x2048,2880x23040,11520x2880} \
    MATVEC_LAB_TYPES=${TYPES:-Q4_K,Q6_K,Q4_0} timeout 200 /tmp/lab/matvec-lab-base >"$out/matvec-lab-base.log" 2>&1
  sum "matvec-lab-base rc=$?"
  sed -n '/^matvec T=1/,$p' "$out/matvec-lab-base.log" | tee -a "$out/summary.txt"
fi
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ "${NCU:-1}" != 0 ]; then
head='^    (Duration|DRAM Throughput|Memory Throughput|Executed Ipc Active|Issue Slots Busy|Registers Per Thread'
head+='|Achieved Occupancy|Achieved Active Warps Per SM|Eligible Warps Per Scheduler|Grid Size|Block Size'
head+='|Theoretical Occupancy|Waves Per SM|L2 Hit Rate|Warp Cycles Per Issued Instruction)  '
prof() {  # tag kernel-regex skip command...
  local tag=$1 re=$2 skip=$3
  shift 3
  timeout 200 "$ncu" --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --kernel-name regex:"$re" --launch-skip "$skip" --launch-count 1 "$@" >"$out/ncu-$tag.txt" 2>&1
  sum "ncu $tag: $(grep -E "$head" "$out/ncu-$tag.txt" | sort -u | tr -s ' ' | tr '\n' ';')"
  # The warp stall reasons, largest first (WarpStateStats' breakdown).
  grep -E 'Stall|stall' "$out/ncu-$tag.txt" | head -12 >>"$out/summary.txt"
}
for shape in qwen3-30b-a3b\ Q4_K_M gpt-oss-20b; do
  tag=${shape%% *}
  for k in glu down; do
    LLM_LAB_EXPERT_SHAPE="$shape" LLM_CUDA_BENCH=1 prof "$tag-$k" "expert_${k}_kernel" 30 \
      /tmp/lab/cuda_kernels_test --gtest_color=no --gtest_filter=KernelLab.ExpertMatvec
  done
done
for s in 2048x12288:Q4_K 6144x2048:Q6_K 2880x23040:Q4_0; do
  MATVEC_LAB_SHAPES=${s%%:*} MATVEC_LAB_TYPES=${s##*:} prof "dense-${s//:/-}" "matvec_i16" 40 /tmp/lab/matvec-lab
done
fi
# SASS=1: the experts' SASS, and per-instruction executions and stall samples of one Qwen3-30B-A3B gate/up launch.
if [ -n "${SASS:-}" ]; then
  cuobjdump -sass /tmp/lab/cuda_kernels_test 2>/dev/null | awk '/Function : .*expert_(glu|down)_kernel/ {p = 1}
    /Function : / && !/expert_(glu|down)_kernel/ {p = 0} p' >"$out/expert-sass.txt"
  sum "sass lines $(wc -l <"$out/expert-sass.txt")"
  for k in glu down; do
    LLM_LAB_EXPERT_SHAPE="qwen3-30b-a3b Q4_K_M" LLM_CUDA_BENCH=1 timeout 200 "$ncu" --clock-control none \
      --section SourceCounters --section WarpStateStats --import-source no --kernel-name regex:"expert_${k}_kernel" \
      --launch-skip 30 --launch-count 1 -o "/tmp/ncu-src-$k" -f /tmp/lab/cuda_kernels_test --gtest_color=no \
      --gtest_filter=KernelLab.ExpertMatvec >/dev/null 2>&1
    "$ncu" -i "/tmp/ncu-src-$k.ncu-rep" --page source --print-source sass --csv >"$out/src-$k.csv" 2>&1
    "$ncu" -i "/tmp/ncu-src-$k.ncu-rep" --page details --print-details all >"$out/details-$k.txt" 2>&1
    sum "src $k: $(wc -l <"$out/src-$k.csv") lines"
  done
fi
