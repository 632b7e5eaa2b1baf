#!/usr/bin/env bash
# Where a batched decode step's time goes: `llm-run bench --parallel B` on a synthetic Llama-3-8B Q4_K_M, whole and
# with one kind of step left out (LLM_CUDA_OMIT_STEPS: the results are wrong, only the time counts), so each kind's
# share shows as the speed-up without it. Results under $OUT, the table last.
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh tokenizer/ggml-vocab-llama-bpe.gguf
#   there: B=32 scripts/gpu-batch-shares.sh   (carry .device, .device-bin)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
rm -rf /tmp/bin && mkdir -p /tmp/bin && tar xJf .device-bin/bins.tar.xz -C /tmp/bin
source .device/env.sh >/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/device-libs.sh"
model=/tmp/llama3-8b-Q4_K_M.gguf
[ -f "$model" ] || /tmp/bin/llm-run synth --shape llama3-8b --type Q4_K_M \
  --vocab .device/tokenizer/ggml-vocab-llama-bpe.gguf -o "$model" >"$out/synth.log" 2>&1
B=${B:-32}
: >"$out/table.txt"
for omit in "" attn_kqv "attn_q,attn_k,attn_v,attn_output" "ffn_gate,ffn_up,ffn_down" result_output; do
  tps=$(LLM_CUDA_OMIT_STEPS="$omit" /tmp/bin/llm-run bench -m "$model" --device cuda --parallel "$B" -p 512 -n 64 \
    2>>"$out/bench.err" | awk -F'|' '/^\| 512/ {print $9}')
  echo "B=$B omit '${omit:-nothing}': decode $tps tok/s" | tee -a "$out/table.txt"
done
