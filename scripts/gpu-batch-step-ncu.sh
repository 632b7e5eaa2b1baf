#!/usr/bin/env bash
# Nsight Compute (--set full) on consecutive launches of the decode kernels of `bench --parallel B` (a synthetic
# model's batched decode step, SHAPE / TYPE, default Llama-3-8B Q4_K_M), one table line a launch: grid, registers,
# duration, DRAM bytes and throughput, achieved warps an SM, L1 / L2 load and the L2 bytes the SMs read, and the
# largest warp stalls. Where the in-graph timeline
# (scripts/timeline_rows.py) says how long a launch sat in the chain, this says why. KERNELS: "regex:skip:count"
# items (the function name, as Nsight matches it), PARALLEL: B (default 4).
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh tokenizer/ggml-vocab-llama-bpe.gguf
#   there: KERNELS="i8_product_kernel:224:8 batch_mm_frag_kernel:64:4" scripts/gpu-batch-step-ncu.sh
#          (carry .device, .device-bin); PARALLEL=1 KERNELS="matvec_i16:200:6" for the one-token matvecs
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device-bins.sh"  # $out, /tmp/bin, the environment
source "$(dirname "${BASH_SOURCE[0]}")/device-model.sh"  # $model, make_model
make_model /tmp/bin/llm-run
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "no ncu on this machine" | tee -a "$out/table.txt"; exit 1; }
B=${PARALLEL:-4}
for item in ${KERNELS:-i8_product_kernel:224:8 batch_mm_frag_kernel:64:4}; do
  IFS=: read -r regex skip count <<<"$item"
  tag=${regex//[^A-Za-z0-9_]/_}-b$B
  # PARSE_ONLY=1: print the reports a call before this one left on the (warm) machine.
  [ -n "${PARSE_ONLY:-}" ] || timeout 300 "$ncu" --clock-control none --set full --kernel-name regex:"$regex" \
    --launch-skip "$skip" --launch-count "$count" -o "/tmp/ncu-$tag" -f /tmp/bin/llm-run bench -m "$model" \
    --device cuda --parallel "$B" -p 64 -n 16 >"$out/ncu-run-$tag.log" 2>&1
  echo "$regex, B = $B, launches $skip..$((skip + count - 1)):" | tee -a "$out/table.txt"
  "$ncu" -i "/tmp/ncu-$tag.ncu-rep" --page raw --csv --print-units base 2>/dev/null | python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
if len(rows) < 3:
    print("  no launches profiled"); sys.exit()
head = rows[0]
def val(r, name):
    try:
        return r[head.index(name)].replace(",", "")
    except ValueError:
        return "?"
pre, post = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
for r in rows[2:]:
    st = []
    for h, v in zip(head, r):
        v = v.replace(",", "")
        if h.startswith(pre) and h.endswith(post) and v.replace(".", "").isdigit():
            st.append((h[len(pre):-len(post)], float(v)))
    st.sort(key=lambda t: -t[1])
    us = float(val(r, "gpu__time_duration.sum") or 0) / 1e3
    mb = float(val(r, "dram__bytes_read.sum") or 0) / 1e6
    v = lambda n: val(r, n)
    # Fields the raw page may lack on another Nsight version are left out rather than printed as "?".
    # L2 -> L1 bytes against DRAM bytes: how much of what the SMs load is x (the i8 image, re-read by every tile).
    extra = [f"{label} {v(name)}" for label, name in (
        ("DRAM % of peak", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        ("issue busy %", "sm__inst_issued.avg.pct_of_peak_sustained_active"),
        ("L1 % of peak", "l1tex__throughput.avg.pct_of_peak_sustained_active"),
        ("L2 % of peak", "lts__throughput.avg.pct_of_peak_sustained_elapsed")) if v(name) != "?"]
    l2 = v("lts__t_sectors_srcunit_tex_op_read.sum")
    if l2 != "?":
        extra.append("L2 to L1 %.1f MB" % (float(l2) * 32 / 1e6))
    print("  grid %s x %s, %s regs, %.1f us, %.1f MB read (%.2f TB/s), warps/SM %s%s; stalls: " % (
          v("launch__grid_size"), v("launch__block_size"), v("launch__registers_per_thread"), us, mb,
          mb / us if us else 0, v("sm__warps_active.avg.per_cycle_active"), "".join(", " + e for e in extra))
          + ", ".join(f"{n} {v:.1f}" for n, v in st[:6]))
' | tee -a "$out/table.txt"
done
