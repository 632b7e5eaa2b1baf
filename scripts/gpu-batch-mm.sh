#!/usr/bin/env bash
# The small-batch products (issue 26, cuda/kernels/batch_mm.cu) in one device call: their kernel tests and the MoE
# tiles that share the unpacking (TESTS=0 skips), the paged session against the CPU with the kernel's range widened,
# the lab (KernelLab.BatchMm; LAB=0 skips), then `llm-run bench --parallel` on a synthetic Llama-3-8B (TYPE, default
# Q4_K_M: device-model.sh) for each range of
# tokens the kernel takes (RANGES="min:max[:cols] ...", LLM_CUDA_BATCH_MM_MIN / _MAX; 0:0 turns it off; cols:
# LLM_CUDA_MATVEC_COLS_MAX, the few-column kernel's top, default 4, 0 off), and with a base
# build's llm-run (llm-run-base, when packed) at its defaults; VARIANTS="A=0,B=1 C=0 ..." adds one bench per item with
# those LLM_CUDA_* settings, ROUNDS times (default 2; RANGES=none leaves the ranges out). Rows go to $OUT/table.txt
# as they come.
# A base build's archive (.device-bin/base.tar.xz, an earlier pack-carry.sh's bins.tar.xz) adds its lab and its
# bench beside this build's.
#   here:  scripts/pack-carry.sh [BASE_LLM_RUN]; ../shared/device/prepare.sh models/stories260K-f32.gguf \
#            models/synth-llama-bpe-Q4_K_M.gguf models/synth-gemma3-Q4_K_M.gguf \
#            models/synth-phi3-Q4_K_M.gguf tokenizer/ggml-vocab-llama-bpe.gguf
#   there: scripts/gpu-batch-mm.sh   (carry .device, .device-bin)
set -uo pipefail
rm -rf /tmp/bin && mkdir -p /tmp/bin && tar xJf .device-bin/bins.tar.xz -C /tmp/bin
if [ -f .device-bin/base.tar.xz ]; then
  rm -rf /tmp/base && mkdir -p /tmp/base && tar xJf .device-bin/base.tar.xz -C /tmp/base
  cp /tmp/base/llm-run /tmp/bin/llm-run-base
fi
source "$(dirname "${BASH_SOURCE[0]}")/batch-mm-lib.sh"  # the model in the background, row, passed, lab, bench

if [ "${TESTS:-1}" != 0 ]; then
  /tmp/bin/cuda_kernels_test --gtest_filter='*BatchMm*:*MatvecCols*:*MoeKernels*:*Matmul*:*Gemm*:*OpKernels*' \
    >"$out/kernels.txt" 2>&1
  row "cuda_kernels_test: $(passed "$out/kernels.txt")"
  LLM_CUDA_BATCH_MM_MIN=2 LLM_CUDA_BATCH_MM_MAX=64 /tmp/bin/cuda_session_test \
    --gtest_filter='*PagedGpu*:GpuSession.Stories*' >"$out/session.txt" 2>&1
  row "cuda_session_test (batch_mm 2..64): $(passed "$out/session.txt")"
fi
if [ "${LAB:-1}" != 0 ]; then
  [ -x /tmp/base/cuda_kernels_test ] && lab base /tmp/base/cuda_kernels_test
  lab this /tmp/bin/cuda_kernels_test
fi

wait "$synth"
NPL=${NPL:-1,2,4,8,16,32,64}
[ -x /tmp/bin/llm-run-base ] && bench base /tmp/bin/llm-run-base
for round in $(seq "${ROUNDS:-2}"); do
  for v in ${VARIANTS:-}; do bench "${v//[=,]/_}-$round" /tmp/bin/llm-run ${v//,/ }; done  # names the device returns
  [ -n "${VARIANTS:-}" ] || break
done
[ "${RANGES:-}" = none ] && exit 0
for r in ${RANGES:-2:64:4 2:64:0}; do
  IFS=: read -r lo hi cols <<<"$r"
  bench "range-$r" /tmp/bin/llm-run LLM_CUDA_BATCH_MM_MIN="$lo" LLM_CUDA_BATCH_MM_MAX="$hi" \
    LLM_CUDA_MATVEC_COLS_MAX="${cols:-4}"
done
cp "$out/par-range-${RANGES:-2:64:4}.md" "$out/parallel-example.md" 2>/dev/null
