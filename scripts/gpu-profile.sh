#!/usr/bin/env bash
# Where one decode step's time goes, on the GPU machine: Nsight Compute times every kernel of a few decode steps of a
# synthetic model (graph nodes profiled one by one), and the table sums them per kernel name. The sum of kernel
# times against the step time from `bench` says how much is launch gaps; the per-kernel GB/s says which kernels are
# far from the copy bandwidth. Optional: detailed sections (occupancy, stall reasons, memory) of one matvec launch.
#   here:  scripts/build-carry.sh && ../shared/device/prepare.sh tokenizer/ggml-vocab-llama-bpe.gguf
#   there: SHAPE=llama3-8b TYPE=Q4_K_M scripts/gpu-profile.sh     (carry: .device and build-carry)
#          batched decode: RUN="--parallel 4 -p 512 -n 64" SKIP=12000 COUNT=1500 scripts/gpu-profile.sh
#          (B=16: SKIP=9000 COUNT=1300, B=32: SKIP=15000: past the untimed round and the prompts; one-step.txt)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
dev=${DEVICE_DIR:-.device}
[ -f "$dev/env.sh" ] && source "$dev/env.sh" >/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/device-libs.sh"  # the HTTP library beside the binaries
bin=${LLM_RUN_BIN:-build-carry/llm-run}
shape=${SHAPE:-llama3-8b}
type=${TYPE:-Q4_K_M}
vocab=$dev/tokenizer/ggml-vocab-llama-bpe.gguf
model=/tmp/$shape-$type.gguf
ncu=${NCU:-ncu}
command -v "$ncu" >/dev/null || ncu=$(ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)

[ -f "$model" ] || "$bin" synth --shape "$shape" --type "$type" --vocab "$vocab" -o "$model" >"$out/synth.log" 2>&1

# PHASE=decode: decode steps only (skip the load, warm-up and the first steps; then a window of about three steps).
# PHASE=prefill: every kernel of one 512-token prompt evaluation (no warm-up, no decode).
if [ "${PHASE:-decode}" = prefill ]; then
  skip=${SKIP:-0} count=${COUNT:-4000} run=(-p 512 -n 0) bench=(-p 512 -n 0)
else
  skip=${SKIP:-4000} count=${COUNT:-1800} run=(-p 0 -n 64) bench=(-p 0 -n 128)
fi
# RUN="--parallel 4 -p 512 -n 64" (with SKIP past the prompts): the profiled run's arguments instead, and no bench.
if [ -n "${RUN:-}" ]; then
  read -ra run <<<"$RUN"
else
  "$bin" bench -m "$model" --device cuda "${bench[@]}" -r 3 -o md 2>&1 | tee "$out/bench-${PHASE:-decode}-$shape-$type.md"
fi
timeout 300 "$ncu" --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
  --csv --launch-skip "$skip" --launch-count "$count" \
  "$bin" bench -m "$model" --device cuda "${run[@]}" -r 1 --no-warmup -o md >"$out/ncu-step.csv" 2>"$out/ncu-step.err"
echo "ncu rc=$?"
python3 - "$out/ncu-step.csv" <<'EOF' | tee "$out/${PHASE:-decode}-breakdown.md"
import csv, sys, collections, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; rows = rows[1:]
ki, mi, vi, ui = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value"), head.index("Metric Unit")
idi = head.index("ID")
per = collections.defaultdict(dict)
for r in rows:
    v = float(r[vi].replace(",", ""))
    unit = r[ui]
    if unit in ("nsecond", "ns"): v *= 1e-3
    elif unit in ("usecond", "us"): pass
    elif unit in ("msecond", "ms"): v *= 1e3
    elif unit == "Kbyte": v *= 1e3
    elif unit == "Mbyte": v *= 1e6
    elif unit == "Gbyte": v *= 1e9
    per[r[idi]][r[mi]] = v
    per[r[idi]]["name"] = re.sub(r"\(.*", "", r[ki])[:70]
    per[r[idi]]["launch"] = r[head.index("Block Size")] + " x " + r[head.index("Grid Size")]
agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
for k in per.values():
    a = agg[k["name"]]
    a[0] += 1; a[1] += k.get("gpu__time_duration.sum", 0); a[2] += k.get("dram__bytes_read.sum", 0) + k.get("dram__bytes_write.sum", 0)
total = sum(a[1] for a in agg.values())
n = len(per)
print(f"{n} kernels profiled, {total:.1f} us of kernel time in total\n")
print("| kernel | launches | total us | % | mean us | GB/s (DRAM r+w) |\n|---|---|---|---|---|---|")
for name, (c, t, b) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    print(f"| {name} | {c} | {t:.1f} | {100*t/total:.1f}% | {t/c:.2f} | {b/t/1e3 if t else 0:.0f} |")
# The same by launch shape (block x grid): one kernel serves matrices of very different sizes.
shape = collections.defaultdict(lambda: [0, 0.0, 0.0])
for k in per.values():
    a = shape[(k["name"][:48], k["launch"])]
    a[0] += 1; a[1] += k.get("gpu__time_duration.sum", 0); a[2] += k.get("dram__bytes_read.sum", 0) + k.get("dram__bytes_write.sum", 0)
print("\n| kernel | block x grid | launches | mean us | MB per launch | GB/s |\n|---|---|---|---|---|---|")
for (name, launch), (c, t, b) in sorted(shape.items(), key=lambda kv: -kv[1][1])[:16]:
    print(f"| {name} | {launch} | {c} | {t/c:.2f} | {b/c/1e6:.1f} | {b/t/1e3 if t else 0:.0f} |")
EOF

if [ -n "${DETAIL:-}" ]; then
  # Full sections of the first few matvec launches of a decode step.
  timeout 200 "$ncu" --clock-control none --set full --kernel-name regex:"${DETAIL}" --launch-skip 200 --launch-count 4 \
    "$bin" bench -m "$model" --device cuda -p 0 -n 8 -r 1 --no-warmup -o md >"$out/ncu-detail.txt" 2>&1
  echo "detail rc=$?"
  grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Size|Grid Size|Warp Cycles Per Issued|Issue Slots Busy|Stall|L1/TEX Hit|L2 Hit|Eligible Warps|Waves Per SM" "$out/ncu-detail.txt" | head -120
fi
# One step's launches in order (batched decode: the launches between two argmax launches), when the window holds one.
python3 "$(dirname "${BASH_SOURCE[0]}")/ncu-one-step.py" "$out/ncu-step.csv" >"$out/one-step.txt" 2>&1 &&
  tail -1 "$out/one-step.txt"
