#!/usr/bin/env bash
# The mixture-of-experts shapes beside llama.cpp on the same files, in one device call (issue 27's benchmarks),
# with llm-run benched only after llama.cpp's build has finished (a build beside a decode bench skews it): starts the
# build detached, makes qwen3-30b-a3b Q4_K_M and gpt-oss-20b MXFP4_MOE with `llm-run synth`, waits for the build,
# then `llm-run bench` and `llama-bench -fa 1` (pp512, tg128, 3 repetitions each). Results under $OUT.
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh --llama-cpp tokenizer/ggml-vocab-llama-bpe.gguf
#   there: scripts/gpu-moe-bench.sh   (carry .device, .device-bin)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/bin
tar xJf .device-bin/bins.tar.xz -C /tmp/bin
source .device/env.sh >/dev/null
source "$(dirname "$0")/device-libs.sh"
WAIT=0 .device/llama-cpp-build.sh >/dev/null 2>&1
vocab=.device/tokenizer/ggml-vocab-llama-bpe.gguf
shapes="qwen3-30b-a3b:Q4_K_M gpt-oss-20b:MXFP4_MOE"
for st in $shapes; do
  IFS=: read -r shape type <<<"$st"
  /tmp/bin/llm-run synth --shape "$shape" --type "$type" --vocab "$vocab" -o "/tmp/$shape.gguf" >>"$out/synth.log" 2>&1
done
WAIT=${LLAMA_WAIT:-330} .device/llama-cpp-build.sh >"$out/llama-build.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader | tee "$out/clocks.txt"
for st in $shapes; do
  shape=${st%%:*}
  /tmp/bin/llm-run bench -m "/tmp/$shape.gguf" --device cuda -p 512 -n 128 -r 3 -o md >"$out/llm-run-$shape.md" 2>&1
  grep -E 'pp512|tg128' "$out/llm-run-$shape.md"
done
for st in $shapes; do
  shape=${st%%:*}
  timeout 200 /tmp/llama.cpp/build/bin/llama-bench -m "/tmp/$shape.gguf" -ngl 99 -fa 1 -p 512 -n 128 -r 3 -o md \
    >"$out/llama-$shape.md" 2>&1
  grep -E 'pp512|tg128' "$out/llama-$shape.md"
done
