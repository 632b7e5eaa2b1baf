#!/usr/bin/env python3
# One decode step's kernels in launch order from gpu-profile.sh's ncu-step.csv (the launches between the first two
# argmax launches): name, grid, microseconds, and the step's total. Usage: ncu-one-step.py ncu-step.csv
import csv
import re
import sys

rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head, rows = rows[0], rows[1:]
ki, mi, vi, ui, ii, gi = (head.index(x) for x in
                          ("Kernel Name", "Metric Name", "Metric Value", "Metric Unit", "ID", "Grid Size"))
scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
launch = {}
for r in rows:
    if r[mi] == "gpu__time_duration.sum":
        launch[int(r[ii])] = (re.sub(r"\(.*", "", r[ki])[-48:], r[gi], float(r[vi].replace(",", "")) * scale[r[ui]])
ids = sorted(launch)
marks = [i for i in ids if "argmax" in launch[i][0]]
if len(marks) < 2:
    sys.exit("fewer than two argmax launches: no whole step in the window")
step = [launch[i] for i in ids if marks[0] < i <= marks[1]]
for name, grid, us in step:
    print(f"{us:9.2f}  {grid:>16}  {name}")
print(f"{sum(s[2] for s in step):9.2f}  total of {len(step)} launches")
