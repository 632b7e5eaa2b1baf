#!/usr/bin/env python3
"""Where one kernel's instructions and warp samples go, from the SASS table of an Nsight Compute report
(`ncu -i REPORT --page source --print-source sass --csv`, as scripts/ncu-launch.sh writes with SASS=1):
- by opcode: executed warp instructions and warp-stall samples, each as a share of the kernel's;
- by execution count: instructions that run equally often run together (the code every block runs once, a loop's
  body, a tile's epilogue), so the largest sample shares by count say which part of the kernel the warps sit in;
- with TOP, the TOP instructions with the most samples (samples, executions, address, SASS).
  scripts/ncu-sass-shares.py sass-q6.csv [TOP]"""
import csv
import sys
from collections import Counter

rows = list(csv.reader(open(sys.argv[1])))
head = next(r for r in rows if "Source" in r and "Instructions Executed" in r)
at = {h: i for i, h in enumerate(head)}
body = [r for r in rows[rows.index(head) + 1:] if len(r) >= len(head)]
src_i, exe_i, smp_i = at["Source"], at["Instructions Executed"], at["Warp Stall Sampling (All Samples)"]
addr_i = at["Address"]


def count(r, i):
    return int(r[i] or 0)


total_exe = sum(count(r, exe_i) for r in body) or 1
total_smp = sum(count(r, smp_i) for r in body) or 1
by_op_exe, by_op_smp, by_runs = Counter(), Counter(), Counter()
for r in body:
    words = r[src_i].split()
    if not words:
        continue
    op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    op = op.split(".")[0]
    by_op_exe[op] += count(r, exe_i)
    by_op_smp[op] += count(r, smp_i)
    by_runs[count(r, exe_i)] += count(r, smp_i)
print(f"{total_exe} warp instructions, {total_smp} samples")
print("opcode      instructions  samples")
for op, n in by_op_exe.most_common(20):
    print(f"{op:10s} {100 * n / total_exe:12.1f}% {100 * by_op_smp[op] / total_smp:7.1f}%")
print("executions  samples")
for runs, n in by_runs.most_common(12):
    print(f"{runs:10d} {100 * n / total_smp:7.1f}%")
if len(sys.argv) > 2:
    hot = sorted(body, key=lambda r: -count(r, smp_i))[:int(sys.argv[2])]
    for r in hot:
        print(count(r, smp_i), count(r, exe_i), r[addr_i][-5:], r[src_i].strip())
