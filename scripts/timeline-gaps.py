#!/usr/bin/env python3
"""What lies between two decode steps of a kernel trace (tests/cuda/kernel_trace.cpp's CSV, copies included).

A step ends with the trace's last kernel name (the sampling's or the argmax's). For the last few step boundaries:
the time from that kernel's end to the next step's first kernel start, each copy in between (start after the
step's end, duration), and the next step's first kernels' starts, so that a copy engine's round trip or a host
launch gap shows as what it is.
  scripts/timeline-gaps.py TRACE.csv [TITLE]
"""
import statistics
import sys

import timeline_rows


def main(path, title):
    rows = timeline_rows.rows(path)
    kernels = [r for r in rows if not r[3]]
    if not kernels:
        print(f"{title}: no kernels traced")
        return
    last = kernels[-1][2]
    ends = [i for i, k in enumerate(kernels) if k[2] == last]
    print(f"\n## {title}: between steps (a step ends with {last})\n")
    gaps = []
    for a in ends[-6:-1]:
        if a + 1 >= len(kernels):
            continue
        end = kernels[a][0] + kernels[a][1]
        nxt = kernels[a + 1][0]
        gaps.append(nxt - end)
        copies = [r for r in rows if r[3] and end - 5000 <= r[0] <= nxt]
        firsts = kernels[a + 1:a + 4]
        parts = [f"{c[2]} at +{(c[0] - end) / 1e3:.1f} for {c[1] / 1e3:.1f} us" for c in copies]
        parts += [f"{k[2]} at +{(k[0] - end) / 1e3:.1f} ({k[1] / 1e3:.1f} us)" for k in firsts]
        print(f"- gap {(nxt - end) / 1e3:.1f} us: " + "; ".join(parts))
    if gaps:
        print(f"\nmedian gap {statistics.median(gaps) / 1e3:.1f} us over {len(gaps)} boundaries")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else sys.argv[1])
