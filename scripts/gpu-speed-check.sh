#!/usr/bin/env bash
# One device call for speed work (issue 6), steps chosen by STEPS (default: all, in this order):
#   tests    every kernel test, the GPU session tests (correctness before any number) and, when BIN has it,
#            test_runtime (the runtime suite, with the CUDA memory footprint against a real session)
#   lab      the kernel lab timings (copy bandwidth, matvec, prefill GEMM and dequantization, attention)
#   matvec-lab  the matvec variants side by side (BIN/matvec-lab, when carried)
#   bench    8B Q4_K_M pp512 and tg128; BENCH_SHAPES (shape:type ...) to change the models, BENCH_ARGS to add
#            bench flags (e.g. "-d 0,16384" for the long-context figures)
#   profile  Nsight Compute per-kernel breakdown (scripts/gpu-profile.sh) of each phase in PROFILE_PHASES
#            (default "prefill"; "decode" for a decode step, "prefill decode" for both)
# Logs under $OUT; the summary table last.
#   here:  cmake --build build-cuda-lead --target llm-run cuda_kernels_test cuda_session_test test_runtime, then copy them
#          stripped into BIN (default build-perf-carry); assets in .device-lite
#   there: STEPS="tests lab bench profile" scripts/gpu-speed-check.sh   (carry [".device-lite", "build-perf-carry"])
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
bin=${BIN:-build-perf-carry}
steps=" ${STEPS:-tests lab bench profile} "
[ -e .device ] || ln -sfn .device-lite .device  # env.sh names .device
source .device/env.sh >/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/device-libs.sh"  # the HTTP library beside the binaries
summary=()
has() { [[ $steps == *" $1 "* ]]; }
result() { grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+' "$1" | tr '\n' ' '; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"

if has tests; then
  timeout 300 "$bin/cuda_kernels_test" --gtest_color=no >"$out/kernels.log" 2>&1
  summary+=("kernel tests rc=$? $(result "$out/kernels.log")")
  grep -E "^\[  FAILED|Failure" "$out/kernels.log" | head -20
  timeout 240 "$bin/cuda_session_test" --gtest_color=no >"$out/session.log" 2>&1
  summary+=("session tests rc=$? $(result "$out/session.log")")
  grep -E "rel-rms|^\[  FAILED|Failure" "$out/session.log" | head -30
  if [ -x "$bin/test_runtime" ]; then  # with the CUDA footprint against what a session really allocates
    timeout 180 "$bin/test_runtime" --gtest_color=no >"$out/runtime.log" 2>&1
    summary+=("runtime tests rc=$? $(result "$out/runtime.log")")
    grep -E "^\[  FAILED|Failure" "$out/runtime.log" | head -10
  fi
fi

if has lab; then
  LLM_CUDA_BENCH=1 timeout 200 "$bin/cuda_kernels_test" --gtest_color=no --gtest_filter=KernelLab.* \
    >"$out/lab.txt" 2>&1
  summary+=("kernel lab rc=$?")
  grep -vE "^\[|^Note" "$out/lab.txt" | head -60
fi

vocab=.device/tokenizer/ggml-vocab-llama-bpe.gguf
if has matvec-lab; then
  timeout 150 "$bin/matvec-lab" >"$out/matvec_lab.txt" 2>&1
  summary+=("matvec lab rc=$?")
  tail -22 "$out/matvec_lab.txt"
fi

if has bench; then
  for st in ${BENCH_SHAPES:-llama3-8b:Q4_K_M}; do
    shape=${st%%:*} type=${st##*:} model=/tmp/$shape-$type.gguf
    [ -f "$model" ] || "$bin/llm-run" synth --shape "$shape" --type "$type" --vocab "$vocab" -o "$model" >/dev/null 2>&1
    "$bin/llm-run" bench -m "$model" --device cuda -p 512 -n 128 -r 3 ${BENCH_ARGS:-} -o md 2>&1 | tee "$out/bench-$shape-$type.md"
    summary+=("bench $shape $type: $(grep -E '^\| .*(pp|tg)' "$out/bench-$shape-$type.md" | awk -F'|' '{print $6 $7}' | tr -s ' ' | tr '\n' ';')")
  done
fi

if has profile; then
  for phase in ${PROFILE_PHASES:-prefill}; do
    mkdir -p "$out/$phase"
    OUT=$out/$phase PHASE=$phase LLM_RUN_BIN="$bin/llm-run" scripts/gpu-profile.sh 2>&1 | grep -E "^\||profiled" | head -45
  done
fi
echo
printf '%s\n' "${summary[@]}"
