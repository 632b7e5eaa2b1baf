# Sourced by the Nsight Compute scripts of single lab launches (gpu-batch-mm-ncu.sh, gpu-matvec-ncu.sh):
# `ncu_launch TAG KERNEL_REGEX SKIP COMMAND...` profiles launch SKIP of the kernels matching KERNEL_REGEX in COMMAND
# (`--set full`, clocks left alone), writes the whole report to $out/ncu-TAG.txt (SASS=1: the SASS with
# per-instruction executions and stall samples to $out/sass-TAG.csv) and prints the headline metrics as one line,
# the warp-stall reasons (cycles an issued instruction, the largest first) as another.
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
ncu_launch() {
  local tag=$1 regex=$2 skip=$3
  shift 3
  timeout 240 "$ncu" --clock-control none --set full --kernel-name regex:"$regex" --launch-skip "$skip" \
    --launch-count 1 -o "/tmp/ncu-$tag" -f "$@" >"$out/ncu-run-$tag.log" 2>&1
  "$ncu" -i "/tmp/ncu-$tag.ncu-rep" --print-details all >"$out/ncu-$tag.txt" 2>&1
  [ -n "${SASS:-}" ] && "$ncu" -i "/tmp/ncu-$tag.ncu-rep" --page source --print-source sass --csv \
    >"$out/sass-$tag.csv" 2>&1
  local head='^    (Duration|DRAM Throughput|Executed Ipc Active|Issue Slots Busy|Executed Instructions'
  head+='|Registers Per Thread|Achieved Active Warps Per SM|Eligible Warps Per Scheduler|Block Size|Grid Size'
  head+='|Dynamic Shared Memory Per Block|L2 Cache Throughput|Memory Throughput|L1/TEX Cache Throughput)  '
  echo "$tag: $(grep -E "$head" "$out/ncu-$tag.txt" | sort -u | tr -s ' ' | tr '\n' ';')"
  "$ncu" -i "/tmp/ncu-$tag.ncu-rep" --page raw --csv 2>/dev/null | python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
if len(rows) < 3: sys.exit()
pre, post = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
st = []
for h, v in zip(rows[0], rows[2]):
    v = v.replace(",", "")
    if h.startswith(pre) and h.endswith(post) and v.replace(".", "").isdigit():
        st.append((h[len(pre):-len(post)], float(v)))
st.sort(key=lambda t: -t[1])
print("  stalls per issue:", ", ".join(f"{n} {v:.2f}" for n, v in st[:8]))'
}
