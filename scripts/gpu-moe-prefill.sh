#!/usr/bin/env bash
# One device call for the MoE prefill tiles (issue 27): the expert kernels' tests, KernelLab.Moe of this build and a
# base build, the GPU sessions against the MoE test files, then pp512 of the synthetic Qwen3-30B-A3B Q4_K_M and
# gpt-oss-20b MXFP4_MOE for the base and this llm-run (interleaved), and where a Qwen3-30B-A3B pp512 goes: pp512 with
# each kind of step left out (LLM_CUDA_OMIT_STEPS; results wrong, timing only), whose speed-up is that kind's share.
#   here:  DIR/bins.tar.xz with llm-run, cuda_kernels_test, cuda_session_test, llm-run-base,
#          cuda_kernels_test-base and lib/; DIR/.device from ../shared/device/prepare.sh (the MoE test files and
#          tokenizer/ggml-vocab-llama-bpe.gguf)
#   there: scripts/gpu-moe-prefill.sh DIR    (carry DIR; writes $OUT/summary.txt and logs)
# Environment: STEPS (default "tests lab models pp ncu"; "shares" too for the omission shares, which routing
# confounds: a step left out changes the hidden state and so every later layer's choice of experts), SHARES_SHAPE
# (default qwen3-30b-a3b:Q4_K_M), ROUNDS (pp512 A/B rounds, default 1), GROUPS_OMITTED (space-separated groups of
# comma-separated node names).
set -uo pipefail
dir=$1
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/bin
tar xJf "$dir/bins.tar.xz" -C /tmp/bin
[ -e .device ] && [ ! -L .device ] && mv .device .device-old; ln -sfn "$dir/.device" .device
source .device/env.sh >/dev/null
export LD_LIBRARY_PATH=/tmp/bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
steps=${STEPS:-tests lab models pp ncu}
has() { [[ " $steps " == *" $1 "* ]]; }
sum() { echo "$*" | tee -a "$out/summary.txt"; }
result() { grep -E '^\[  PASSED|^\[  FAILED  \]' "$1" | tr '\n' ' '; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader | sed 's/^/device: /' |
  tee -a "$out/summary.txt"
if has tests; then
  timeout 120 /tmp/bin/cuda_kernels_test --gtest_color=no \
    --gtest_filter='MoeKernels.*:ExpertMatvec.*:*WeightKernels.Matvec*' >"$out/kernels.log" 2>&1
  sum "kernel tests rc=$? $(result "$out/kernels.log")"
fi
if has lab; then
  for b in cuda_kernels_test-base cuda_kernels_test; do
    LLM_CUDA_BENCH=1 timeout 60 /tmp/bin/$b --gtest_color=no --gtest_filter='KernelLab.Moe' 2>&1 |
      grep -E '^\| .*\| 512 \|' | sed "s/^/$b /" | tee -a "$out/summary.txt"
  done
fi
if has models; then
  timeout 150 /tmp/bin/cuda_session_test --gtest_color=no --gtest_filter='*GpuModels*' >"$out/session.log" 2>&1
  sum "session tests rc=$? $(result "$out/session.log")"
  grep -iE 'moe|gpt-oss' "$out/session.log" | grep -E 'OK|FAIL|rel|max' | head -20 >>"$out/summary.txt"
fi
pp() {  # BIN MODEL [OMIT]: pp512 tok/s
  LLM_CUDA_OMIT_STEPS=${3:-} timeout 60 "$1" bench -m "$2" --device cuda -p 512 -n 0 -r 3 -o md 2>/dev/null |
    awk -F'|' '$6 ~ /pp[0-9]/ {split($7, a, " "); print a[1]; exit}'
}
for sv in qwen3-30b-a3b:Q4_K_M gpt-oss-20b:MXFP4_MOE; do
  has pp || has shares || has ncu || break
  shape=${sv%%:*} type=${sv##*:} model=/tmp/$shape-$type.gguf
  t0=$(date +%s)
  timeout 200 /tmp/bin/llm-run synth --shape "$shape" --type "$type" \
    --vocab .device/tokenizer/ggml-vocab-llama-bpe.gguf -o "$model" >/dev/null 2>&1
  sum "synth $shape $type rc=$? $(($(date +%s) - t0)) s"
  if has pp; then
    for r in $(seq 1 "${ROUNDS:-1}"); do
      sum "$shape $type pp512 round $r: base $(pp /tmp/bin/llm-run-base "$model") new $(pp /tmp/bin/llm-run "$model")"
    done
  fi
  if has shares && [ "$sv" = "${SHARES_SHAPE:-qwen3-30b-a3b:Q4_K_M}" ]; then
    all=$(pp /tmp/bin/llm-run "$model")
    sum "shares $shape $type: every step $all tok/s ($(awk -v t="$all" 'BEGIN {printf "%.0f", 512e6 / t}') us a pp512)"
    for g in ${GROUPS_OMITTED:-ffn_moe_gate,ffn_moe_up ffn_moe_down ffn_moe_logits \
      ffn_moe_probs,ffn_moe_topk,ffn_moe_weights,ffn_moe_swiglu,ffn_moe_out attn_q,attn_k,attn_v,attn_output \
      attn_kqv}; do
      t=$(pp /tmp/bin/llm-run "$model" "$g")
      sum "$(awk -v a="$all" -v t="$t" -v g="$g" 'BEGIN {printf "  without %s: %.0f tok/s, share %.0f us\n", g, t,
        512e6 / a - 512e6 / t}')"
    done
  fi
  # Every kernel of one pp512 (bench's warm-up pass too) timed alone, caches and clocks left as they run:
  # $out/ncu-SHAPE.csv, summed by kernel (scripts/ncu-kernel-shares.py here).
  if has ncu && [ "$sv" = "${SHARES_SHAPE:-qwen3-30b-a3b:Q4_K_M}" ]; then
    ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
    timeout 200 "$ncu" --cache-control none --clock-control none --metrics gpu__time_duration.sum --csv \
      --print-units base \
      /tmp/bin/llm-run bench -m "$model" --device cuda -p 512 -n 0 -r 1 >"$out/ncu-$shape.csv" 2>"$out/ncu-$shape.err"
    sum "ncu $shape rc=$? $(grep -c gpu__time_duration "$out/ncu-$shape.csv") kernels"
  fi
  rm -f "$model"
done
