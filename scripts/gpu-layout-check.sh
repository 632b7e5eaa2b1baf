#!/usr/bin/env bash
# The regrouped Q6_K layout (Q6_Kx8: a Q4_K_M file's v / down / output matrices, a Q4_0 file's output) on real
# model shapes: for each synthetic model, the last-position logits of a 2-token prompt (the decode matvec, one launch
# per column) and of a longer one (the prefill GEMM's dequantization), on the GPU with the layout on and off
# (LLM_CUDA_Q6_KX8=0) and on the CPU reference; prints the relative RMS differences (the kernel tests' shapes are
# small; this covers 1B-8B shapes).
#   there: scripts/gpu-layout-check.sh LLM_RUN_BINARY   (carry the binary and .device-lite; MODELS to change the list,
#          e.g. "llama3-8b:Q4_0 llama3-8b:Q4_K_M"; CPU=0 skips the CPU reference, which takes minutes on an 8B)
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: $0 LLM_RUN_BINARY" >&2; exit 2; }
bin=$1
out=${OUT:-/tmp/out}
mkdir -p "$out"
[ -e .device ] || ln -sfn "${DEVICE_DIR:-.device-lite}" .device  # env.sh names .device
source .device/env.sh >/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/device-libs.sh"  # the HTTP library beside the binaries
prompts=("Hi" "The quick brown fox jumps over the lazy dog, and then it runs back into the forest again.")
rows=()
for m in ${MODELS:-llama3-1b:Q4_0 llama3-1b:Q4_K_M llama3-8b:Q4_0 llama3-8b:Q4_K_M}; do
  shape=${m%%:*} type=${m##*:}
  model=/tmp/$shape-$type.gguf
  [ -f "$model" ] || "$bin" synth --shape "$shape" --type "$type" --vocab .device/tokenizer/ggml-vocab-llama-bpe.gguf \
    -o "$model" >/dev/null || continue
  for i in "${!prompts[@]}"; do
    base=$out/logits-$shape-$type-$i
    "$bin" logits -m "$model" --device cuda -c 256 -p "${prompts[$i]}" --top 1 --out "$base-x8.bin" >/dev/null 2>&1
    LLM_CUDA_Q6_KX8=0 "$bin" logits -m "$model" --device cuda -c 256 -p "${prompts[$i]}" --top 1 \
      --out "$base-gguf.bin" >/dev/null 2>&1
    [ "${CPU:-1}" = 0 ] || "$bin" logits -m "$model" --device cpu -c 256 -p "${prompts[$i]}" --top 1 \
      --out "$base-cpu.bin" >/dev/null 2>&1
    rows+=("$(python3 - "$base" "$shape $type prompt $i" <<'EOF'
import os, sys, array
base, what = sys.argv[1], sys.argv[2]
def load(suffix):
    p = f"{base}-{suffix}.bin"
    if not os.path.exists(p) or os.path.getsize(p) == 0: return None
    a = array.array("f"); a.frombytes(open(p, "rb").read()); return a
def rel(a, b):
    if a is None or b is None or len(a) != len(b): return "-"
    num = sum((x - y) ** 2 for x, y in zip(a, b)); den = sum(y * y for y in b) or 1e-300
    return f"{(num / den) ** 0.5:.2e}"
x8, gguf, cpu = load("x8"), load("gguf"), load("cpu")
print(f"| {what} | {rel(x8, gguf)} | {rel(x8, cpu)} | {rel(gguf, cpu)} |")
EOF
)")
    rm -f "$base"-*.bin  # 0.5 MB each for a 128k vocabulary: only the table comes back
  done
done
{
  echo "## Regrouped Q6_K layout: last-position logits, relative RMS ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $("$bin" --version | head -1))"
  echo "| model, prompt (0: 2 tokens, 1: ~20) | regrouped vs GGUF layout (GPU) | regrouped vs CPU | GGUF layout vs CPU |"
  echo "|---|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
} | tee "$out/layout-check.md"
