#!/usr/bin/env bash
# Nsight Compute on one decode matvec launch of the kernel lab (matvec-lab, the int16 kernel's Auto path): for each
# TYPE:KxN of LAUNCHES, the headline metrics and warp-stall reasons to stdout, the whole report to
# $OUT/ncu-TYPE-KxN.txt (SASS=1: per-instruction executions and stall samples to $OUT/sass-TYPE-KxN.csv).
# Why: the wide-row launches (K > 16384, e.g. Phi-4's ffn_down) stream well below the one-pass ones of similar bytes
# (docs/kernel-notes.md, "v5 on wide rows"); this compares them instruction by instruction.
#   here:  cmake --build build --target matvec-lab && mkdir -p .device-bin && strip -o .device-bin/matvec-lab \
#          build/tests/cuda/matvec-lab
#   there: LAUNCHES="Q4_K:17920x5120 Q4_K:14336x4096" scripts/gpu-matvec-ncu.sh   (carry .device, .device-bin)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
lab=${MATVEC_LAB:-.device-bin/matvec-lab}
source .device/env.sh >/dev/null
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for launch in ${LAUNCHES:-Q4_K:17920x5120 Q4_K:14336x4096}; do
  type=${launch%%:*} shape=${launch#*:} tag=${launch/:/-}
  # Skip the first launches (the generic and float kernels run before Auto in the lab; the regex picks the int16
  # kernel only, and 40 of its launches warm the clocks).
  MATVEC_LAB_TYPES=$type MATVEC_LAB_SHAPES=$shape timeout 240 "$ncu" --clock-control none --set full \
    --kernel-name regex:'matvec_i16' --launch-skip 40 --launch-count 1 -o "/tmp/ncu-$tag" -f "$lab" \
    >"$out/ncu-run-$tag.log" 2>&1
  "$ncu" -i "/tmp/ncu-$tag.ncu-rep" --print-details all >"$out/ncu-$tag.txt" 2>&1
  [ -n "${SASS:-}" ] && "$ncu" -i "/tmp/ncu-$tag.ncu-rep" --page source --print-source sass --csv \
    >"$out/sass-$tag.csv" 2>&1
  head='^    (Duration|DRAM Throughput|Executed Ipc Active|Issue Slots Busy|Executed Instructions|Registers Per Thread'
  head+='|Achieved Active Warps Per SM|Eligible Warps Per Scheduler|Block Size|Grid Size|Dynamic Shared Memory Per Block)  '
  echo "$launch: $(grep -E "$head" "$out/ncu-$tag.txt" | sort -u | tr -s ' ' | tr '\n' ';')"
  # Warp state: cycles per issued instruction by stall reason, the largest first.
  "$ncu" -i "/tmp/ncu-$tag.ncu-rep" --page raw --csv 2>/dev/null |
    python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
if len(rows) < 3: sys.exit()
head, vals = rows[0], rows[2]
st = [(h.split("smsp__average_warps_issue_stalled_")[1].split("_per_issue_active")[0], float(v.replace(",", "")))
      for h, v in zip(head, vals) if h.startswith("smsp__average_warps_issue_stalled_") and
      h.endswith("_per_issue_active.ratio") and v.replace(",", "").replace(".", "").isdigit()]
st.sort(key=lambda t: -t[1])
print("  stalls per issue:", ", ".join(f"{n} {v:.2f}" for n, v in st[:8]))'
done
