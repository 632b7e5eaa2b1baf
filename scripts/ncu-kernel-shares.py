#!/usr/bin/env python3
"""Sums an `ncu --metrics gpu__time_duration.sum --csv` log (scripts/gpu-moe-prefill.sh) by kernel: total time,
launches and share, largest first. Kernel names are cut at their template arguments' first type, which keeps the
moe_tile_kernel instances apart (by quant type) but folds launches of one kernel with other shapes.
  scripts/ncu-kernel-shares.py ncu-qwen3-30b-a3b.csv [PASSES]   (PASSES: forward passes in the log, default 2: bench's
  warm-up and one timed pass)"""
import csv
import re
import sys
from collections import defaultdict

rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
name_i, metric_i, value_i = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
passes = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
tot = defaultdict(float)
cnt = defaultdict(int)
for r in rows[1:]:
    if r[metric_i] != "gpu__time_duration.sum":
        continue
    name = re.sub(r"\(.*", "", r[name_i])  # drop the argument list
    name = re.sub(r"^(void )?(cuda::)?(\(anonymous namespace\)::)?", "", name)
    tot[name] += float(r[value_i].replace(",", ""))
    cnt[name] += 1
all_ns = sum(tot.values())
print(f"| kernel | launches a pass | us a pass | share |\n|---|---:|---:|---:|")
for k, v in sorted(tot.items(), key=lambda kv: -kv[1]):
    print(f"| {k[:90]} | {cnt[k] / passes:.0f} | {v / passes / 1e3:.0f} | {100 * v / all_ns:.1f}% |")
print(f"| all | {sum(cnt.values()) / passes:.0f} | {all_ns / passes / 1e3:.0f} | |")
