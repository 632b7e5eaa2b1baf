#!/usr/bin/env bash
# The prompt kernel in one device call (docs/kernel-notes.md, sessions 63-66): KernelLab.PromptProducts a length at a
# time (one product of the 8B's gate, q and down shapes, Q4_K and Q6_Kx8, at LENGTHS tokens on the wgmma kernel and
# the dequantize + cuBLAS path: us and TFLOP/s); with NCU=1 Nsight Compute on the wgmma kernel's 512-token gate
# product (SASS=1 for its stall samples); then (AB=1, the default) the prompt kernel's tests, the outputs of a long
# prompt per variant against the default, and `bench` pp at LENGTHS of the default and cuBLAS's path
# (LLM_CUDA_PROMPT_WGMMA=0), or VARIANTS. Table last ($OUT/table.txt).
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh tokenizer/ggml-vocab-llama-bpe.gguf
#   there: scripts/gpu-prompt-lab.sh   (carry .device, .device-bin)
set -uo pipefail
rm -rf /tmp/bin  # this call's binaries, not a warm machine's
source "$(dirname "${BASH_SOURCE[0]}")/device-bins.sh"  # $out, /tmp/bin, the environment
lengths=${LENGTHS:-128,256,512,1024,2048}
: >"$out/lab-table.txt"
# The lab a length at a time (each row is flushed: what ran comes back if the call is cut short).
for n in ${lengths//,/ }; do
  timeout 60 env LLM_CUDA_BENCH=1 LLM_LAB_PROMPT_TOKENS="$n" /tmp/bin/cuda_kernels_test \
    --gtest_color=no --gtest_filter=KernelLab.PromptProducts >"$out/lab-$n.log" 2>&1
  echo "== lab $n tokens (rc $?)" >>"$out/lab-table.txt"
  grep -E '^(device|prompt products|shape|gate|q |down)' "$out/lab-$n.log" >>"$out/lab-table.txt" ||
    echo "  no lab table" >>"$out/lab-table.txt"
done
cat "$out/lab-table.txt" >&2
if [ -n "${NCU:-}" ]; then
  source "$(dirname "${BASH_SOURCE[0]}")/ncu-launch.sh"
  # The lab's first launches are the gate's at the first length: ask for 512 tokens alone; skip the warm-up.
  (
    export LLM_CUDA_BENCH=1 LLM_LAB_PROMPT_TOKENS=512
    ncu_launch wgmma512 wgmma_kernel 3 /tmp/bin/cuda_kernels_test --gtest_filter=KernelLab.PromptProducts
  ) >>"$out/lab-table.txt"
fi
if [ "${AB:-1}" = 1 ]; then
  source "$(dirname "${BASH_SOURCE[0]}")/device-model.sh"  # $model: the synthetic Llama-3-8B Q4_K_M
  make_model /tmp/bin/llm-run
  KERNEL_TESTS='*PromptProducts*' CHECK_MODELS="$model" \
    VARIANTS="${VARIANTS:-default:- off:LLM_CUDA_PROMPT_WGMMA=0}" SHAPES="llama3-8b:Q4_K_M" \
    ARGS="-p $lengths -n 0 -r 3" ROUNDS="${ROUNDS:-1}" timeout 420 "$(dirname "${BASH_SOURCE[0]}")/gpu-variants-ab.sh" \
    >/dev/null 2>&1  # writes $out/table.txt
fi
cat "$out/lab-table.txt" "$out/table.txt" 2>/dev/null >"$out/prompt-lab.txt"
mv "$out/prompt-lab.txt" "$out/table.txt"
cat "$out/table.txt"
