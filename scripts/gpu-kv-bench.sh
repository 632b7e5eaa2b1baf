#!/usr/bin/env bash
# KV cache types side by side on the GPU machine: for each shape, tg128 at each context depth with every
# --cache-type (KV_TYPES, default f16 q8_0 q4_0), one binary, one machine; a markdown table last (tok/s, and each
# depth's ratio to depth 0).
#   there: KV_SHAPES="llama3-8b llama3-1b" DEPTHS=0,16384 scripts/gpu-kv-bench.sh LLM_RUN_BINARY
#          (carry the binary and .device-lite; models are made in /tmp with `llm-run synth`, Q4_K_M)
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: $0 LLM_RUN_BINARY" >&2; exit 2; }
bin=$1
source "$(dirname "$0")/device-model.sh"  # $out, .device and its environment (its one-model variables unused)
depths=${DEPTHS:-0,16384}
rows=()
for shape in ${KV_SHAPES:-llama3-8b llama3-1b}; do
  model=/tmp/$shape-Q4_K_M.gguf
  [ -f "$model" ] || "$bin" synth --shape "$shape" --type Q4_K_M --vocab .device/tokenizer/ggml-vocab-llama-bpe.gguf \
    -o "$model" >/dev/null || continue
  for kv in ${KV_TYPES:-f16 q8_0 q4_0}; do
    "$bin" bench -m "$model" --device cuda --cache-type "$kv" -p 0 -n 128 -d "$depths" -r "${REPS:-3}" -o md \
      2>>"$out/kv-bench.log" | tee -a "$out/kv-bench.md" >"$out/kv-$shape-$kv.md"
    # "| model | size | params | backend | test | t/s | ..." rows: test name, then mean
    line=$(grep -E '^\| .*tg128' "$out/kv-$shape-$kv.md" | awk -F'|' '{gsub(/ /, "", $6); split($7, a, " "); printf "%s=%s ", $6, a[1]}')
    base=$(echo "$line" | grep -oE 'tg128=[0-9.]+' | cut -d= -f2)
    ratios=""
    for tv in $line; do
      v=${tv#*=}
      ratios+="$tv ($(awk -v a="$v" -v b="${base:-0}" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else printf "-" }')) "
    done
    rows+=("| $shape Q4_K_M | $kv | $ratios|")
  done
done
{
  echo "## KV cache types: tg128 by context depth ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $("$bin" --version 2>/dev/null | head -1))"
  echo "| shape | --cache-type | tok/s by depth (ratio to depth 0) |"
  echo "| --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
} | tee "$out/kv-table.md"
