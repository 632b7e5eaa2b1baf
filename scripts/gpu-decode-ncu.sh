#!/usr/bin/env bash
# Nsight Compute (--set full, SASS stall samples) on one launch of each decode kernel of a synthetic Qwen3-30B-A3B
# token (the one-sequence path, `bench -p 0`): KERNELS regexes, each its launch SKIP.
set -uo pipefail
export SHAPE=${SHAPE:-qwen3-30b-a3b} TYPE=${TYPE:-Q4_K_M}
source scripts/device-bins.sh
source scripts/device-model.sh
source scripts/ncu-launch.sh
make_model /tmp/bin/llm-run
for k in ${KERNELS:-attention_split_tc moe_route expert_glu expert_down}; do
  ncu_launch "$k" "$k" "${SKIP:-300}" /tmp/bin/llm-run bench -m "$model" --device cuda -p 0 -n 32 -r 1 --no-warmup \
    | tee -a "$out/table.txt"
done
# The per-instruction SASS tables in one archive (the device tool returns a few files a call).
if ls "$out"/sass-*.csv >/dev/null 2>&1; then
  tar czf "$out/sass.tar.gz" -C "$out" $(cd "$out" && ls sass-*.csv) && rm -f "$out"/sass-*.csv
fi
rm -f "$out"/ncu-run-*.log
