#!/usr/bin/env bash
# One device call for the newer architectures' decode path (issue 28): the GPU tests that cover it (the op and
# weight kernels, the norm + rope + KV launch, every GPU session against the CPU reference), then the base build's
# llm-run against this one (scripts/gpu-ab-bench.sh) on AB_SHAPES, then optionally (PROFILE=shape:type) the
# per-kernel decode breakdown of the new build (scripts/gpu-profile.sh). Summary last in $OUT/table.txt.
#   here:  scripts/pack-carry.sh BASE/app/llm-run; ../shared/device/prepare.sh <synth-gemma3-*, synth-phi3-*, ...>
#   there: AB_SHAPES="gemma3-12b:Q4_K_M:bpe phi4:Q4_K_M:bpe" scripts/gpu-arch-check.sh   (carry .device, .device-bin)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/bin
rm -rf /tmp/bin/* && tar xJf .device-bin/bins.tar.xz -C /tmp/bin
source .device/env.sh >/dev/null
source "$(dirname "$0")/device-libs.sh"
result() { grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+' "$1" | tr '\n' ' '; }
summary=()
timeout 240 /tmp/bin/cuda_kernels_test --gtest_color=no --gtest_filter="${KERNEL_TESTS:-*}" >"$out/kernels.log" 2>&1
summary+=("kernel tests rc=$? $(result "$out/kernels.log")")
timeout 240 /tmp/bin/cuda_session_test --gtest_color=no --gtest_filter="${SESSION_TESTS:-*}" >"$out/session.log" 2>&1
summary+=("session tests rc=$? $(result "$out/session.log")")
for sv in ${AB_SHAPES:-}; do
  IFS=: read -r shape type vocab <<<"$sv"
  mkdir -p "$out/ab-$shape-$type"
  OUT=$out/ab-$shape-$type SHAPE=$shape TYPE=$type VOCAB=$vocab ROUNDS=${ROUNDS:-1} DEVICE_DIR=.device \
    scripts/gpu-ab-bench.sh /tmp/bin/llm-run-base /tmp/bin/llm-run >/dev/null 2>&1
  summary+=("$(sed 's|/tmp/bin/||' "$out/ab-$shape-$type/ab.txt" | sed "s|^|$shape $type |")")
  [ "$sv" = "${PROFILE_KEEP:-}" ] || rm -f "/tmp/$shape-$type-$vocab.gguf"
done
if [ -n "${PROFILE:-}" ]; then
  mkdir -p "$out/profile"
  OUT=$out/profile SHAPE=${PROFILE%%:*} TYPE=${PROFILE##*:} LLM_RUN_BIN=/tmp/bin/llm-run DEVICE_DIR=.device \
    scripts/gpu-profile.sh >"$out/profile/log.txt" 2>&1
  summary+=("$(head -16 "$out/profile/decode-breakdown.md")")
fi
grep -E "rel-rms|^\[  FAILED|Failure" "$out/session.log" "$out/kernels.log" | head -40
printf '%s\n' "${summary[@]}" | tee "$out/table.txt"
