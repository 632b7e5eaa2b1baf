#!/usr/bin/env bash
# What lies between two decode steps, on the GPU machine: CUPTI traces (kernels and copies, tests/cuda/kernel_trace.cpp)
# of a few steps of `bench --parallel 1 -p 512` with the pipeline (the served stream's path) and of the unpaged `bench
# -d 512` decode, each folded by scripts/timeline-gaps.py (the gap from a step's last kernel to the next step's first,
# with the copies in it) and scripts/timeline-step.py (the step's kernels). Table in $OUT/table.txt.
#   here:  scripts/pack-carry.sh          there: SHAPE=llama3-8b TYPE=Q4_K_M scripts/gpu-step-gaps.sh
#          VARIANT=LLM_CUDA_X=1,...: the same with those settings
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device-bins.sh"   # $out, /tmp/bin, the environment
source "$(dirname "${BASH_SOURCE[0]}")/device-model.sh"  # synth_model
envs=()
[ -n "${VARIANT:-}" ] && IFS=, read -ra envs <<<"$VARIANT"
synth_model /tmp/bin/llm-run "${SHAPE:-llama3-8b}" "${TYPE:-Q4_K_M}" 2>>"$out/synth.log"  # $model
trace_of() {  # NAME ARGS...: a trace of `llm-run bench ARGS`, folded
  local name=$1 trace=$out/gaps-$1.csv
  shift
  timeout 300 env "${envs[@]}" CUDA_INJECTION64_PATH=/tmp/bin/libkernel-trace.so KERNEL_TRACE_OUT="$trace" \
    /tmp/bin/llm-run bench -m "$model" --device cuda "$@" >"$out/gaps-$name.log" 2>&1
  echo "trace $name rc=$? ($(wc -l <"$trace") lines)" | tee -a "$out/table.txt"
  python3 "$(dirname "${BASH_SOURCE[0]}")/timeline-gaps.py" "$trace" "$name" | tee -a "$out/table.txt"
  python3 "$(dirname "${BASH_SOURCE[0]}")/timeline-step.py" "$trace" "$name" >>"$out/steps.txt"
  xz -f "$trace"
}
trace_of parallel1-pipeline --parallel 1 -p 512 -n 32 --pipeline
trace_of parallel4-pipeline --parallel 4 -p 512 -n 32 --pipeline
trace_of unpaged-d512 -p 0 -n 32 -d 512 -r 1
