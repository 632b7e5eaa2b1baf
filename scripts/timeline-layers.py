#!/usr/bin/env python3
"""One decode step of a kernel trace folded into a per-layer table (scripts/gpu-decode-timeline.sh).

Input: CSV with columns Start (ns), Duration (ns), Name (tests/cuda/kernel_trace.cpp's, and `nsys stats --report
cuda_gpu_trace`'s). The step is found as the span between two launches of the step's last kernel (the sampling's):
the last complete one in the trace, but one. Its
kernels are split into layers by the repeating sequence of names; per position of a layer, the mean duration, the
mean gap from the previous kernel's end (negative: the two overlapped, as programmatic launches do) and the mean
distance from the previous kernel's start.
"""
import collections
import csv
import re
import sys


def short(name):
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"\(.*", "", name)
    name = re.sub(r"<.*", "", name)
    return name.split("::")[-1][:40]


def main(path, title):
    rows = list(csv.DictReader(open(path)))
    ks = []
    for r in rows:
        start = next(v for k, v in r.items() if k.startswith("Start"))
        dur = next(v for k, v in r.items() if k.startswith("Duration"))
        name = r.get("Name", "")
        if not name or "memcpy" in name.lower() or "memset" in name.lower():
            continue
        ks.append((int(start), int(dur), short(name)))
    ks.sort()
    if len(ks) < 10:
        print(f"{title}: only {len(ks)} kernels traced")
        return
    last = ks[-1][2]  # the step's last kernel (sampling)
    ends = [i for i, k in enumerate(ks) if k[2] == last]
    if len(ends) < 3:
        print(f"{title}: fewer than three steps traced")
        return
    a, b = ends[-3], ends[-2]  # a whole step, away from the end of the run
    step = ks[a + 1:b + 1]
    t0, t1 = step[0][0], step[-1][0] + step[-1][1]
    print(f"\n## {title}: one decode step, {len(step)} kernels, {(t1 - t0) / 1e3:.1f} us first start to last end")
    # Layers: the smallest period p at which the names repeat (names[i] == names[i + p] for 90% of the step), the
    # first layer where a block of p names repeats p later.
    names = [k[2] for k in step]
    period, first = 0, 0
    for p in range(2, min(40, len(names) // 3)):
        same = sum(names[i] == names[i + p] for i in range(len(names) - p))
        if same >= 0.9 * (len(names) - p):
            period = p
            first = next(i for i in range(len(names) - 2 * p) if names[i:i + p] == names[i + p:i + 2 * p])
            break
    if not period:
        print("no repeating layer found; kernels in order:")
        for s, d, n in step:
            print(f"  {n} {(s - t0) / 1e3:.2f} +{d / 1e3:.2f}")
        return
    layers = [step[i:i + period] for i in range(first, len(step) - period + 1, period)
              if [k[2] for k in step[i:i + period]] == names[first:first + period]]
    print(f"{len(layers)} whole layers of {period} kernels; layer start to start "
          f"{(layers[-1][0][0] - layers[0][0][0]) / max(1, len(layers) - 1) / 1e3:.2f} us\n")
    print("| # | kernel | duration us | gap from previous end us | start to start us |\n|---|---|---:|---:|---:|")
    for p in range(period):
        dur = sum(L[p][1] for L in layers) / len(layers) / 1e3
        gaps, sts = [], []
        for li, L in enumerate(layers):
            prev = L[p - 1] if p > 0 else (layers[li - 1][-1] if li > 0 else None)
            if prev is None:
                continue
            gaps.append((L[p][0] - prev[0] - prev[1]) / 1e3)
            sts.append((L[p][0] - prev[0]) / 1e3)
        g = sum(gaps) / len(gaps) if gaps else float("nan")
        s = sum(sts) / len(sts) if sts else float("nan")
        print(f"| {p} | {layers[0][p][2]} | {dur:.2f} | {g:.2f} | {s:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
