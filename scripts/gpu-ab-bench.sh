#!/usr/bin/env bash
# A/B of llm-run binaries on one GPU machine (builds differ, the device and model do not): for each binary, bench
# pp512 and tg128 on one synthetic shape, interleaved ROUNDS times so clock drift hits both alike; the SM clock and
# power limit are printed first (different machines of one kind can differ).
#   there: SHAPE=llama3-8b TYPE=Q4_K_M scripts/gpu-ab-bench.sh BIN_A BIN_B ...   (carry the binaries and .device-lite,
#          or DEVICE_DIR=.device-bench: env.sh, lib and tokenizer only)
# Environment: ARGS (bench arguments, default "-p 512 -n 128 -r 3"; tg128 moves with the context size the bench
# allocates, prompt + generation unless -c is given: compare builds at one -c, docs/kernel-notes.md, session 8),
# ENVS (one env assignment per binary, several joined by commas, e.g.
# "NONE=1 LLM_CUDA_GRAPH=0,LLM_CUDA_MV_SLICES=2", to A/B switches with one binary given several times), VOCAB (bpe or
# spm, device-model.sh).
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 LLM_RUN_BINARY..." >&2; exit 2; }
source "$(dirname "$0")/device-model.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv | tee "$out/clocks.txt"
make_model "$1"
read -r -a envs <<<"${ENVS:-}"
table=()
for round in $(seq 1 "${ROUNDS:-2}"); do
  i=0
  for b in "$@"; do
    e=${envs[$i]:-NONE=1}
    i=$((i + 1))
    # shellcheck disable=SC2086
    line=$(env ${e//,/ } "$b" bench -m "$model" --device cuda ${ARGS:--p 512 -n 128 -r 3} -o md 2>/dev/null |
      grep -E '^\| .*(pp|tg)[0-9]' | awk -F'|' '{printf "%s %s;", $6, $7}')
    table+=("round $round  $b $e: $line")
  done
done
printf '%s\n' "${table[@]}" | tee "$out/ab.txt"
