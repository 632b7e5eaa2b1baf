#!/usr/bin/env bash
# Where a decode step's time goes inside its CUDA graph, on the GPU machine: every kernel of a few `bench` decode
# steps of each synthetic shape timed by CUPTI's concurrent-kernel records (tests/cuda/kernel_trace.cpp, loaded
# through CUDA_INJECTION64_PATH: the kernels as they overlap under programmatic launches, not serialized as Nsight
# Compute runs them; the machine has no Nsight Systems), folded by scripts/timeline-step.py into a table per kernel
# name of one step: launches, mean duration, and what each adds to the step's chain (from the previous kernel's end
# to its own end); pairs.txt has scripts/timeline-pairs.py's table (when each launch starts after the one before).
# The traces come back as trace-SHAPE-TYPE.csv.xz.
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh tokenizer/ggml-vocab-llama-bpe.gguf
#   there: SHAPES="qwen3-30b-a3b:Q4_K_M llama3-8b:Q4_K_M" scripts/gpu-decode-timeline.sh   (carry .device, .device-bin)
#          VARIANT=LLM_CUDA_X=1,LLM_CUDA_Y=0: the same with those settings; BIN=NAME: pack-carry.sh's
#          llm-run-NAME (`base`: its first argument) instead of this build's llm-run; BENCH_ARGS: bench's arguments
#          instead of `-p 0 -n TOKENS -r 1` (BENCH_ARGS="--parallel 16 -p 512 -n 16 --pipeline": a 16-sequence step)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device-bins.sh"   # $out, /tmp/bin, the environment
source "$(dirname "${BASH_SOURCE[0]}")/device-model.sh"  # synth_model
envs=()
[ -n "${VARIANT:-}" ] && IFS=, read -ra envs <<<"$VARIANT"
bin=/tmp/bin/llm-run${BIN:+-$BIN}
for st in ${SHAPES:-qwen3-30b-a3b:Q4_K_M}; do
  IFS=: read -r shape type <<<"$st"
  synth_model /tmp/bin/llm-run "$shape" "$type" 2>>"$out/synth.log"  # $model
  trace=$out/trace-$shape-$type${BIN:+-$BIN}.csv
  timeout 300 env "${envs[@]}" CUDA_INJECTION64_PATH=/tmp/bin/libkernel-trace.so KERNEL_TRACE_OUT="$trace" \
    "$bin" bench -m "$model" --device cuda ${BENCH_ARGS:--p 0 -n ${TOKENS:-32} -r 1} -o md >"$out/trace-$shape.log" 2>&1
  echo "trace $shape rc=$? ($(wc -l <"$trace") kernels)"
  python3 "$(dirname "${BASH_SOURCE[0]}")/timeline-step.py" "$trace" "$shape $type${BIN:+ ($BIN)}" |
    tee -a "$out/table.txt"
  python3 "$(dirname "${BASH_SOURCE[0]}")/timeline-pairs.py" "$trace" >>"$out/pairs.txt"  # when each launch starts
  xz -f "$trace"
done
