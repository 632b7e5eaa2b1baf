"""Rows of a kernel trace CSV (tests/cuda/kernel_trace.cpp's, or `nsys stats --report cuda_gpu_trace`'s), shared by
scripts/timeline-step.py, scripts/timeline-gaps.py and scripts/timeline-pairs.py."""
import csv
import re


def short(name):
    """A kernel's demangled name without namespaces, template arguments or parameters, at most 40 characters."""
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"\(.*", "", name)
    name = re.sub(r"<.*", "", name)
    return name.split("::")[-1][:40]


def rows(path):
    """(start ns, duration ns, name, is_copy) for every line, sorted by start; kernels' names shortened."""
    out = []
    for r in csv.DictReader(open(path)):
        start = int(next(v for k, v in r.items() if k.startswith("Start")))
        dur = int(next(v for k, v in r.items() if k.startswith("Duration")))
        name = r.get("Name", "")
        copy = "memcpy" in name.lower() or "memset" in name.lower()
        if name:
            out.append((start, dur, name.strip("[]") if copy else short(name), copy))
    out.sort()
    return out
