#!/usr/bin/env bash
# One device call for decode-speed work (issue 6): correctness first (matvec + sampling kernel tests, the GPU model
# tests on the carried models), then the matvec lab, then the per-kernel profile of an 8B decode step and its bench
# (scripts/gpu-profile.sh). Logs under $OUT; a short summary last.
#   here:  build llm-run cuda_kernels_test cuda_session_test matvec-lab, copy them stripped into BIN (default
#          build-perf-carry); assets in .device-lite (env.sh, lib, tokenizer, a few models + refs)
#   there: scripts/gpu-decode-check.sh        (carry [".device-lite", "build-perf-carry"])
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
bin=${BIN:-build-perf-carry}
[ -e .device ] || ln -sfn .device-lite .device  # env.sh names .device
source .device/env.sh >/dev/null
summary=()

timeout 240 "$bin/cuda_kernels_test" --gtest_color=no --gtest_filter="${KERNEL_FILTER:-*Matvec*:*Sampl*}" \
  >"$out/kernels.log" 2>&1
summary+=("kernel tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+' "$out/kernels.log" | tr '\n' ' ')")
grep -E "^\[  FAILED|Failure|worst" "$out/kernels.log" | head -20

timeout 240 "$bin/cuda_session_test" --gtest_color=no >"$out/session.log" 2>&1
summary+=("session tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+' "$out/session.log" | tr '\n' ' ')")
grep -E "rel-rms|^\[  FAILED|Failure" "$out/session.log" | head -30

if [ -z "${NO_LAB:-}" ]; then
  timeout 150 "$bin/matvec-lab" >"$out/matvec_lab.txt" 2>&1
  tail -22 "$out/matvec_lab.txt"
fi

LLM_RUN_BIN="$bin/llm-run" scripts/gpu-profile.sh 2>&1 | grep -v "^  *[A-Z]" | head -40
printf '%s\n' "${summary[@]}"
