#!/usr/bin/env bash
# A base build against this one for a change to the small-batch products (issue 26) that must keep their bits, in
# one device call: this build's small-batch kernel tests and paged session tests; `llm-run logits --out` of prompts
# whose lengths take each small-batch kernel (PROMPT_WORDS) with both builds, compared byte for byte; the lab of both
# (KernelLab.BatchMm, LLM_LAB_TOKENS); then `bench --parallel NPL` of both, interleaved, ROUNDS times, and of this
# build once more per VARIANTS item ("A=0,B=1 C=1": LLM_CUDA_* settings; their logits are compared with the base's
# too, and the lab runs once more per item). Without a base build packed, the base is this build at its defaults.
# Rows go to $OUT/table.txt as they come.
#   here:  scripts/pack-carry.sh BASE/app/llm-run kt=BASE/tests/cuda/cuda_kernels_test   (or no arguments)
#          ../shared/device/prepare.sh models/stories260K-f32.gguf models/synth-llama-bpe-Q4_K_M.gguf \
#            tokenizer/ggml-vocab-llama-bpe.gguf
#   there: scripts/gpu-batch-ab.sh   (carry .device, .device-bin)
set -uo pipefail
rm -rf /tmp/bin && mkdir -p /tmp/bin && tar xJf .device-bin/bins.tar.xz -C /tmp/bin
source "$(dirname "${BASH_SOURCE[0]}")/batch-mm-lib.sh"  # the model in the background, row, passed, lab, bench
if [ "${TESTS:-1}" != 0 ]; then
  /tmp/bin/cuda_kernels_test --gtest_filter="${KERNEL_TESTS:-*BatchMm*:*MoeKernels*}" >"$out/kernels.txt" 2>&1
  row "cuda_kernels_test: $(passed "$out/kernels.txt")"
  /tmp/bin/cuda_session_test --gtest_filter="${SESSION_TESTS:-*PagedGpu*:GpuSession.Stories*}" >"$out/session.txt" 2>&1
  row "cuda_session_test: $(passed "$out/session.txt")"
fi
base=/tmp/bin/llm-run-base
[ -x "$base" ] || base=/tmp/bin/llm-run
if [ "${LAB:-1}" != 0 ]; then
  [ -x /tmp/bin/llm-run-kt ] && lab base /tmp/bin/llm-run-kt
  lab this /tmp/bin/cuda_kernels_test
  for v in ${VARIANTS:-}; do lab "${v//[=,]/_}" /tmp/bin/cuda_kernels_test ${v//,/ }; done
fi
wait "$synth"
# The same prompt through both builds: T tokens take the fragment kernel (<= 8, 17..32 without wgmma), the wide
# kernel (9..16 and with wgmma off), wgmma (33..64).
words=${PROMPT_WORDS:-3 6 12 20 28 45 60}
for n in $words; do
  "$base" logits -m "$model" --device cuda -p "$(printf 'w%d ' $(seq "$n"))" --out "$out/logits-base-$n.bin" \
    >/dev/null 2>>"$out/logits.err"
done
for v in this ${VARIANTS:-}; do
  same=0 differ=0
  settings=(); [ "$v" = this ] || settings=(${v//,/ })
  for n in $words; do
    env "${settings[@]}" /tmp/bin/llm-run logits -m "$model" --device cuda -p "$(printf 'w%d ' $(seq "$n"))" \
      --out "$out/logits-this.bin" >/dev/null 2>>"$out/logits.err"
    if cmp -s "$out/logits-base-$n.bin" "$out/logits-this.bin"; then same=$((same + 1)); else differ=$((differ + 1)); fi
  done
  row "logits, base vs $v, byte-identical: $same of $((same + differ)) prompts"
done
NPL=${NPL:-1,2,4,8,16}
for round in $(seq "${ROUNDS:-2}"); do
  bench "base-$round" "$base"
  bench "this-$round" /tmp/bin/llm-run
  for v in ${VARIANTS:-}; do bench "${v//[=,]/_}-$round" /tmp/bin/llm-run ${v//,/ }; done
done
rm -f "$out"/logits-*.bin
