#!/usr/bin/env bash
# Per-sequence sampling on the device (issue 26: cuda/kernels/sample_rows.cu, PagedBatch::draws) in one device call:
# the kernel and paged-session tests, then `llm-run bench --parallel` on a synthetic Llama-3-8B Q4_K_M three ways —
# greedy on random tokens with the logits copied out (the batched-bench comparison), sampled at --temp 0.8 drawn on
# the device, and the same sampled with LLM_CUDA_DEVICE_DRAWS=0 (copied out and drawn on the host, as before).
#   here:  rm -rf .device && ../shared/device/prepare.sh models/stories260K-f32.gguf models/synth-qwen3-Q4_K_M.gguf \
#            tokenizer/ggml-vocab-llama-bpe.gguf; scripts/pack-carry.sh
#   there: NPL=1,16,64 scripts/gpu-draws-check.sh   (carry .device, .device-bin)
set -uo pipefail
rm -rf /tmp/bin && mkdir -p /tmp/bin && tar xJf .device-bin/bins.tar.xz -C /tmp/bin
DEVICE_DIR=.device source "$(dirname "${BASH_SOURCE[0]}")/device-model.sh"
: >"$out/table.txt"
row() { printf '%s\n' "$@" | tee -a "$out/table.txt"; }
passed() { grep -E '^\[  (PASSED|FAILED)|agreement|drawn  ' "$1" | tr '\n' ' '; }
export LLM_TEST_ASSETS=$PWD/.device
/tmp/bin/cuda_kernels_test --gtest_filter='*SampleRows*:*Sampling*' >"$out/kernels.txt" 2>&1
row "cuda_kernels_test: $(passed "$out/kernels.txt")"
/tmp/bin/cuda_session_test --gtest_filter="${SESSION_FILTER:-PagedGpu.Draws*:PagedGpuEngine.*}" >"$out/session.txt" 2>&1
row "cuda_session_test: $(passed "$out/session.txt")"
make_model /tmp/bin/llm-run
NPL=${NPL:-1,16,64}
bench() {  # label, then env assignments and flags
  local label=$1
  shift
  env "$@" >"$out/$label.md" 2>"$out/$label.err"
  row "$label:" "$(grep -E '^\|' "$out/$label.md")"
}
bench greedy-logits-out /tmp/bin/llm-run bench -m "$model" --device cuda --parallel "$NPL" -p 512 -n 128
bench sampled-device /tmp/bin/llm-run bench -m "$model" --device cuda --parallel "$NPL" -p 512 -n 128 --temp 0.8
bench sampled-host LLM_CUDA_DEVICE_DRAWS=0 /tmp/bin/llm-run bench -m "$model" --device cuda --parallel "$NPL" \
  -p 512 -n 128 --temp 0.8
