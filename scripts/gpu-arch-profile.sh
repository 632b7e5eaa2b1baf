#!/usr/bin/env bash
# Where the decode and prefill time of the newer architectures goes (issue 28): for each SHAPE:TYPE of SHAPES, the
# per-kernel Nsight Compute breakdown of scripts/gpu-profile.sh for PHASES (decode, prefill), on the carried
# binaries. Results under $OUT/<shape>-<phase>/, the tables concatenated last in $OUT/table.txt.
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh tokenizer/ggml-vocab-llama-bpe.gguf
#   there: SHAPES="gemma3-12b:Q4_K_M phi4:Q4_K_M" PHASES="decode prefill" scripts/gpu-arch-profile.sh
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/bin
rm -rf /tmp/bin/* && tar xJf .device-bin/bins.tar.xz -C /tmp/bin
for st in ${SHAPES:-gemma3-12b:Q4_K_M phi4:Q4_K_M}; do
  for phase in ${PHASES:-decode prefill}; do
    dir=$out/${st%%:*}-$phase
    mkdir -p "$dir"
    OUT=$dir PHASE=$phase SHAPE=${st%%:*} TYPE=${st##*:} LLM_RUN_BIN=/tmp/bin/llm-run DEVICE_DIR=.device \
      scripts/gpu-profile.sh >"$dir/log.txt" 2>&1
    { echo "## $st $phase"; grep -E "tok/s|^\| llama|^\| gemma|^\| phi" "$dir"/bench-*.md | head -3
      head -24 "$dir/$phase-breakdown.md"; echo; } >>"$out/table.txt"
  done
done
cat "$out/table.txt"
