#!/usr/bin/env bash
# One device call for a switch that must change speed and not results (an LLM_CUDA_* layout or kernel choice, e.g.
# LLM_CUDA_MXFP4_RECODE=0 against the default): the GPU tests (KERNEL_TESTS, SESSION_TESTS filters); on each model of
# CHECK_MODELS (paths under .device) the logits of a long prompt (prefill products) and of a two-token prompt (decode
# products) and a greedy generation, switch off and on, compared byte for byte; then `bench` of each SHAPES entry
# (shape:type, made by `llm-run synth`) with the switch off and on, ROUNDS interleaved rounds. Table last
# ($OUT/table.txt), and with PARALLEL (e.g. 1,4,16,64) `bench --parallel PARALLEL -p 512 -n 128 $PARALLEL_ARGS`
# (e.g. --pipeline) the same way. The
# tests run with the switch on (a lab switch off by default is the path they must cover). Logits that differ get
# their largest difference and whether the top token agrees (a switch that reorders sums, e.g. a merge, may differ
# in the last bits). SWITCH=build compares two builds instead: llm-run-base (scripts/pack-carry.sh's first
# argument) as "off", this build's llm-run as "on" (a change that must keep every bit, e.g. a kernel's rewrite).
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh <models> tokenizer/ggml-vocab-llama-bpe.gguf
#   there: SWITCH=LLM_CUDA_MXFP4_RECODE CHECK_MODELS=".device/models/mxfp4/synth-gpt-oss-MXFP4_MOE.gguf" \
#          SHAPES="gpt-oss-20b:MXFP4_MOE" scripts/gpu-switch-ab.sh   (carry .device, .device-bin)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device-bins.sh"  # $out, /tmp/bin, the environment
source "$(dirname "${BASH_SOURCE[0]}")/device-model.sh"  # synth_model
source "$(dirname "${BASH_SOURCE[0]}")/device-tests.sh"  # gpu_tests, model_outputs, compare_outputs
sw=${SWITCH:?SWITCH: the LLM_CUDA_* variable to turn off, or build}
run_as() {  # V COMMAND...: the command with the switch at V (or, SWITCH=build, the base build's llm-run at 0)
  local v=$1
  shift
  if [ "$sw" = build ]; then
    local bin=/tmp/bin/llm-run
    [ "$v" = 0 ] && bin=/tmp/bin/llm-run-base
    "$bin" "${@:2}"
  else
    env "$sw=$v" "$@"
  fi
}
table=()
tests_env=()
[ "$sw" = build ] || tests_env=("$sw=1")
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader | tee "$out/clocks.txt"
gpu_tests "${tests_env[@]}"
for m in ${CHECK_MODELS:-}; do
  for v in 0 1; do model_outputs "$m" "$v" run_as "$v" /tmp/bin/llm-run; done
  table+=("$(basename "$m" .gguf) $sw off/on: $(compare_outputs "$m" 0 1)")
done
for st in ${SHAPES:-}; do
  IFS=: read -r shape type <<<"$st"
  synth_model /tmp/bin/llm-run "$shape" "$type" 2>>"$out/synth.log"  # $model
  for round in $(seq 1 "${ROUNDS:-2}"); do
    for v in 0 1; do
      line=$(run_as "$v" /tmp/bin/llm-run bench -m "$model" --device cuda ${ARGS:--p 512 -n 128 -r 3} -o md \
        2>>"$out/bench.err" | grep -E '^\| .*(pp|tg)[0-9]' | awk -F'|' '{printf "%s %s;", $6, $7}')
      table+=("round $round $shape $type $sw=$v: $line")
      [ -n "${PARALLEL:-}" ] || continue
      line=$(run_as "$v" /tmp/bin/llm-run bench -m "$model" --device cuda --parallel "$PARALLEL" -p 512 -n 128 \
        ${PARALLEL_ARGS:-} 2>>"$out/bench.err" | awk -F'|' '/^\| *[0-9]+ *\|/ {gsub(/ /, "", $4); gsub(/ /, "", $9);
          printf "%s: %s; ", $4, $9}')
      table+=("round $round $shape $type $sw=$v, B: decode tok/s: $line")
    done
  done
done
printf '%s\n' "${table[@]}" | tee "$out/table.txt"
