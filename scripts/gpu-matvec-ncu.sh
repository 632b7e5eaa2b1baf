#!/usr/bin/env bash
# Nsight Compute on one decode matvec launch of the kernel lab (matvec-lab, the int16 kernel's Auto path): for each
# TYPE:KxN of LAUNCHES, the headline metrics and warp-stall reasons to stdout, the whole report to
# $OUT/ncu-TYPE-KxN.txt (SASS=1: per-instruction executions and stall samples to $OUT/sass-TYPE-KxN.csv);
# scripts/ncu-launch.sh does the profiling.
# Why: to see where a decode matvec launch spends its instructions and stalls (docs/kernel-notes.md, session 27: the
# wide-row launches against the one-pass ones, and the loop's instruction mix).
#   here:  cmake --build build --target matvec-lab && mkdir -p .device-bin && strip -o .device-bin/matvec-lab \
#          build/tests/cuda/matvec-lab
#   there: LAUNCHES="Q4_K:17920x5120 Q4_K:14336x4096" scripts/gpu-matvec-ncu.sh   (carry .device, .device-bin)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
lab=${MATVEC_LAB:-.device-bin/matvec-lab}
source .device/env.sh >/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/ncu-launch.sh"
for launch in ${LAUNCHES:-Q4_K:17920x5120 Q4_K:14336x4096}; do
  type=${launch%%:*} shape=${launch#*:}
  # The lab runs the generic and float kernels before Auto; the regex takes the int16 kernel only, and 40 of its
  # launches warm the clocks first.
  MATVEC_LAB_TYPES=$type MATVEC_LAB_SHAPES=$shape ncu_launch "${launch/:/-}" 'matvec_i16' 40 "$lab"
done
