#!/usr/bin/env bash
# One device call for a change that must keep behaviour and speed: every GPU test of the new build
# (scripts/gpu-speed-check.sh STEPS=tests), then the base build's llm-run against the new one's
# (scripts/gpu-ab-bench.sh) on each model of AB_SHAPES, ROUNDS interleaved rounds each; the summary last.
#   here:  scripts/pack-carry.sh BASE_BUILD/app/llm-run; ../shared/device/prepare.sh <test models and vocabularies>
#   there: AB_SHAPES="llama2-7b:Q4_0:spm llama3-8b:Q4_K_M:bpe" scripts/gpu-ab-check.sh   (carry .device, .device-bin)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/bin
tar xJf .device-bin/bins.tar.xz -C /tmp/bin  # lib/ too: the scripts below put it on the library path (device-libs.sh)
OUT=$out BIN=/tmp/bin STEPS=tests scripts/gpu-speed-check.sh 2>&1 | tail -4 | tee "$out/tests-summary.txt"
for sv in ${AB_SHAPES:-llama2-7b:Q4_0:spm}; do
  IFS=: read -r shape type vocab <<<"$sv"
  mkdir -p "$out/ab-$shape-$type"
  OUT=$out/ab-$shape-$type SHAPE=$shape TYPE=$type VOCAB=$vocab ROUNDS=${ROUNDS:-2} \
    scripts/gpu-ab-bench.sh /tmp/bin/llm-run-base /tmp/bin/llm-run >/dev/null 2>&1
  rm -f "/tmp/$shape-$type-$vocab.gguf"  # room on the disk for the next model
done
echo
cat "$out/tests-summary.txt"
for f in "$out"/ab-*/ab.txt; do echo "== ${f%/ab.txt}"; sed 's|/tmp/bin/||' "$f"; done
