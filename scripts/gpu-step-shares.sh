#!/usr/bin/env bash
# Where a decode token's (or with ARGS="-p 512 -n 0", a prefill token's) time goes inside the captured graph, by
# omission: tg128 with each kind of step left out (LLM_CUDA_OMIT_STEPS, results wrong, timing only) against tg128
# with every step; the difference is that kind's share of the token as the graph runs it — programmatic launches
# and overlaps included, which Nsight Compute's one-kernel-at-a-time times (scripts/gpu-profile.sh) leave out.
# Writes $OUT/step-shares-SHAPE-TYPE.md.
#   there: SHAPE=llama3-8b TYPE=Q4_K_M scripts/gpu-step-shares.sh LLM_RUN_BINARY   (carry the binary and
#          .device-lite, or DEVICE_DIR=.device-bench)
# Environment: ARGS (bench arguments, default "-p 0 -n 128 -r 3"), GROUPS_OMITTED (space-separated groups, each a
# comma-separated list of node names).
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: $0 LLM_RUN_BINARY" >&2; exit 2; }
bin=$1
source "$(dirname "$0")/device-model.sh"
make_model "$bin" || exit 1
layers=$("$bin" info -m "$model" | awk '$1 == "block_count" {print $2}')
groups=${GROUPS_OMITTED:-"attn_q,attn_k,attn_v attn_kqv attn_output ffn_gate,ffn_up ffn_down result_output"}

tg() {  # tok/s of the first test (tg, or pp with ARGS="-p 512 -n 0"), with LLM_CUDA_OMIT_STEPS=$1 (empty: all)
  LLM_CUDA_OMIT_STEPS=$1 "$bin" bench -m "$model" --device cuda ${ARGS:--p 0 -n 128 -r 3} -o md 2>/dev/null |
    awk -F'|' '$6 ~ /(tg|pp)[0-9]/ {split($7, a, " "); print a[1]; exit}'
}
all=$(tg "")
{
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  echo "# Step shares by omission (${ARGS:--p 0 -n 128 -r 3}): $shape $type, $layers layers, $gpu, $("$bin" --version |
    head -1)"
  echo
  echo "every step: $all tok/s ($(awk -v t="$all" 'BEGIN {printf "%.1f", 1e6 / t}') us per token)"
  echo
  echo "| steps left out | tok/s without | share, us per token | us per layer |"
  echo "|---|---:|---:|---:|"
  for g in $groups; do
    t=$(tg "$g")
    awk -v a="$all" -v t="$t" -v g="$g" -v n="$layers" 'BEGIN {
      d = 1e6 / a - 1e6 / t
      per = g == "result_output" ? "" : sprintf("%.1f", d / n)
      printf "| %s | %.1f | %.0f | %s |\n", g, t, d, per }'
  done
} | tee "$out/step-shares-$shape-$type.md"
