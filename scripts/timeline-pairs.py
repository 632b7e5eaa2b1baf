#!/usr/bin/env python3
"""Consecutive kernel pairs of a kernel trace (scripts/gpu-decode-timeline.sh), for when a launch starts.

Input: the same CSV as scripts/timeline-step.py (plain or .xz). Kernels sorted by start, the trace's second half (the
decode steps, past warm-up and capture). For every pair of kernel names that follow each other: how many times, the
mean time from the first one's start to the second one's start (a programmatic dependent's blocks become resident
early: ~1 us; a launch whose blocks find no room: much later), from end to end (what the second adds to the chain)
and the second's mean duration. Session 46 found this way that the gpt-oss-20b down launch no longer started early.
  scripts/timeline-pairs.py TRACE.csv[.xz] [TOP]
"""
import collections
import csv
import lzma
import statistics
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
from timeline_rows import short  # noqa: E402  (timeline-step.py's names, shared since d68629b)


def main(path, top):
    opener = lzma.open if path.endswith(".xz") else open
    ks = []
    with opener(path, "rt") as f:
        for r in csv.DictReader(f):
            start = int(next(v for k, v in r.items() if k.startswith("Start")))
            dur = int(next(v for k, v in r.items() if k.startswith("Duration")))
            name = r.get("Name", "")
            if name and "memcpy" not in name.lower() and "memset" not in name.lower():
                ks.append((start, start + dur, short(name)))
    ks.sort()
    ks = ks[len(ks) // 2:]
    pairs = collections.defaultdict(list)
    for a, b in zip(ks, ks[1:]):
        pairs[(a[2], b[2])].append(((b[0] - a[0]) / 1e3, (b[1] - a[1]) / 1e3, (b[1] - b[0]) / 1e3))
    print(f"\n## {path}: consecutive kernels (second half of the trace)\n")
    print("| first -> second | pairs | start after its start us | end after its end us | second's duration us |")
    print("|---|---:|---:|---:|---:|")
    for (a, b), v in sorted(pairs.items(), key=lambda kv: -len(kv[1]))[:top]:
        m = [statistics.mean(x[i] for x in v) for i in range(3)]
        print(f"| {a} -> {b} | {len(v)} | {m[0]:.2f} | {m[1]:.2f} | {m[2]:.2f} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: timeline-pairs.py TRACE.csv[.xz] [TOP]")
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 12)
