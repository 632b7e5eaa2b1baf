#!/usr/bin/env python3
"""One decode step of a kernel trace, per kernel name (scripts/gpu-decode-timeline.sh).

Input: CSV with columns Start (ns), Duration (ns), Name (tests/cuda/kernel_trace.cpp's, and `nsys stats --report
cuda_gpu_trace`'s). The step is the span between two launches of the trace's last kernel (the sampling's), the last
complete one but one. Per kernel name: launches, mean duration (programmatic launches start early and wait, so this
overstates their work), and the mean time from the previous kernel's end to this one's end: what the kernel adds to
the step's chain of dependent launches, which sums to the step's time.
"""
import collections
import sys

import timeline_rows


def main(path, title):
    ks = [(start, dur, name) for start, dur, name, copy in timeline_rows.rows(path) if not copy]
    ends = [i for i, k in enumerate(ks) if ks and k[2] == ks[-1][2]]
    if len(ends) < 3:
        print(f"{title}: fewer than three steps traced ({len(ks)} kernels)")
        return
    step = ks[ends[-3] + 1:ends[-2] + 1]
    t0, t1 = step[0][0], max(s + d for s, d, _ in step)
    print(f"\n## {title}: one decode step, {len(step)} kernels, {(t1 - t0) / 1e3:.1f} us first start to last end\n")
    print("| kernel | launches | mean duration us | mean end after the previous end us | total us |\n"
          "|---|---:|---:|---:|---:|")
    agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
    prev_end = step[0][0]
    for s, d, n in step:
        a = agg[n]
        a[0] += 1
        a[1] += d / 1e3
        a[2] += (s + d - prev_end) / 1e3
        prev_end = max(prev_end, s + d)
    for n, (c, d, chain) in sorted(agg.items(), key=lambda kv: -kv[1][2]):
        print(f"| {n} | {c} | {d / c:.2f} | {chain / c:.2f} | {chain:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
