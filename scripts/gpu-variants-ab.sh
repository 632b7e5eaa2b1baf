#!/usr/bin/env bash
# One device call comparing several variants of llm-run at once: VARIANTS is a list of NAME:SETTINGS, SETTINGS
# `base` (llm-run-base, scripts/pack-carry.sh's first argument), `bin=NAME` (its NAME=LLM_RUN build),
# `args=ARG,ARG` (this build's llm-run with those arguments last: `args=--half-weights=64`) or comma-separated
# LLM_CUDA_* assignments for this build's llm-run (`-` for none). The GPU tests (KERNEL_TESTS,
# SESSION_TESTS filters, run with TEST_ENV); on each model of CHECK_MODELS the logits of a long and of a two-token
# prompt and a greedy generation of every variant compared byte for byte with the first variant's; then `bench`
# (ARGS) of each SHAPES entry for every variant, ROUNDS interleaved rounds (ARGS="--parallel 1,2,4 -p 512 -n 128":
# each count's decode aggregate). Table last ($OUT/table.txt).
# gpu-switch-ab.sh is the two-variant form.
#   here:  scripts/pack-carry.sh BASE_LLM_RUN; ../shared/device/prepare.sh <models> tokenizer/ggml-vocab-llama-bpe.gguf
#   there: VARIANTS="base:base new:- pdl:LLM_CUDA_NEW_TOKEN_PDL=1" SHAPES="qwen3-30b-a3b:Q4_K_M" \
#          scripts/gpu-variants-ab.sh   (carry .device, .device-bin)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device-bins.sh"  # $out, /tmp/bin, the environment
source "$(dirname "${BASH_SOURCE[0]}")/device-model.sh"  # synth_model
source "$(dirname "${BASH_SOURCE[0]}")/device-tests.sh"  # gpu_tests, model_outputs, compare_outputs
read -ra variants <<<"${VARIANTS:?VARIANTS: NAME:SETTINGS ...}"
run_variant() {  # NAME:SETTINGS COMMAND-ARGS...: llm-run with the variant's binary and settings
  local settings=${1#*:} bin=/tmp/bin/llm-run envs=() extra=()
  shift
  if [ "$settings" = base ]; then
    bin=/tmp/bin/llm-run-base
  elif [ "${settings#bin=}" != "$settings" ]; then  # bin=NAME: pack-carry.sh's NAME=LLM_RUN build
    bin=/tmp/bin/llm-run-${settings#bin=}
  elif [ "${settings#args=}" != "$settings" ]; then  # args=ARG,ARG: after the command's own
    IFS=, read -ra extra <<<"${settings#args=}"
  elif [ "$settings" != - ]; then
    IFS=, read -ra envs <<<"$settings"
  fi
  env "${envs[@]}" "$bin" "$@" "${extra[@]}"
}
table=()
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader | tee "$out/clocks.txt"
read -ra test_env <<<"${TEST_ENV:-}"
gpu_tests "${test_env[@]}"
for m in ${CHECK_MODELS:-}; do
  for v in "${variants[@]}"; do model_outputs "$m" "${v%%:*}" run_variant "$v"; done
  first=${variants[0]%%:*}
  for v in "${variants[@]:1}"; do
    table+=("$(basename "$m" .gguf) $first vs ${v%%:*}: $(compare_outputs "$m" "$first" "${v%%:*}")")
  done
done
for st in ${SHAPES:-}; do
  IFS=: read -r shape type <<<"$st"
  synth_model /tmp/bin/llm-run "$shape" "$type" 2>>"$out/synth.log"  # $model
  for round in $(seq 1 "${ROUNDS:-2}"); do
    for v in "${variants[@]}"; do
      # bench's md rows (test, t/s), or with --parallel its batched table's (B, decode aggregate S_TG)
      line=$(run_variant "$v" bench -m "$model" --device cuda ${ARGS:--p 0 -n 128 -r 3} -o md 2>>"$out/bench.err" |
        awk -F'|' '$0 ~ /^\| .*(pp|tg)[0-9]/ {printf "%s %s;", $6, $7}
                   $0 ~ /^\| *[0-9]+ *\|/ {gsub(/ /, "", $4); gsub(/ /, "", $9); printf " B=%s %s;", $4, $9}')
      table+=("round $round $shape $type ${v%%:*}: $line")
      echo "${table[-1]}" >&2  # as it comes: a call cut off by its time limit still shows the rounds it ran
    done
  done
done
printf '%s\n' "${table[@]}" | tee "$out/table.txt"
