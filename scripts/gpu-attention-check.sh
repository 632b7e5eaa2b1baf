#!/usr/bin/env bash
# Attention changes on the GPU machine: attention/matvec/rope kernel tests, the GPU model tests, then bench of the
# 8B and 1B Q4_K_M shapes at depth 0 and 16384 and one default-context generation. Carry [".device-lite",
# "build-perf-carry"] (llm-run, cuda_kernels_test, cuda_session_test; .device-lite as in gpu-decode-check.sh).
set -uo pipefail
ln -sfn .device-lite .device; source .device/env.sh >/dev/null; B=build-perf-carry
timeout 200 $B/cuda_kernels_test --gtest_color=no --gtest_filter='*Attention*:*Matvec*:*Rope*' 2>&1 | grep -E "^\[  (FAILED|PASSED)|Failure|max err" | head -20
timeout 200 $B/cuda_session_test --gtest_color=no 2>&1 | grep -E "^\[  (FAILED|PASSED)|rel-rms" | head -20
V=.device/tokenizer/ggml-vocab-llama-bpe.gguf
$B/llm-run synth --shape llama3-8b --type Q4_K_M --vocab $V -o /tmp/8b.gguf >/dev/null 2>&1
$B/llm-run synth --shape llama3-1b --type Q4_K_M --vocab $V -o /tmp/1b.gguf >/dev/null 2>&1
for m in 8b 1b; do $B/llm-run bench -m /tmp/$m.gguf --device cuda -p 512 -n 128 -d 0,16384 -r 3 2>/dev/null | grep -E "^\|"; done
$B/llm-run -m /tmp/8b.gguf -p "Once upon a time" -n 128 --temp 0 --device cuda 2>&1 >/dev/null | grep -E "context|generation"
