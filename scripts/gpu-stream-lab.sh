#!/usr/bin/env bash
# Device-machine script for issue 29's lab (tests/cuda/stream_lab.cu, docs/kernel-notes.md "Session 26"): the
# matvec chain of an 8B decode step as a launch a product against one persistent launch streaming its weights
# through a shared-memory ring. Build and carry first:
#   cmake --build build --target stream-lab && mkdir -p .device-bin && cp build/tests/cuda/stream-lab .device-bin/ &&
#   strip .device-bin/stream-lab          (carry [".device", ".device-bin"])
# Usage: scripts/gpu-stream-lab.sh [binary]   (STREAM_LAB_CONFIGS as the lab reads it; ROUNDS: runs, default 1)
set -uo pipefail
bin=${1:-.device-bin/stream-lab}
out=${OUT:-gpu-logs}
mkdir -p "$out"
[ -f .device/env.sh ] && source .device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
rc=0
for r in $(seq 1 "${ROUNDS:-1}"); do
  echo "== round $r"
  timeout 240 "$bin" 2>&1 | tee "$out/stream_lab_$r.txt"
  rc=$((rc | ${PIPESTATUS[0]}))
done
exit $rc
