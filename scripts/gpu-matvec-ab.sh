#!/usr/bin/env bash
# One device call for a change to the decode matvec (docs/kernel-notes.md): the GPU kernel tests of the build in
# .device-bin/bins.tar.xz, then the kernel lab (matvec-lab) of each build in .device-bin/labs.tar.xz on LAB_SHAPES and
# LAB_TYPES, then llm-run builds A/B (scripts/gpu-ab-bench.sh: llm-run-base against llm-run and any llm-run-NAME) on
# AB_SHAPES. The summary table is printed last and kept in $OUT/table.txt.
#   here:  scripts/pack-carry.sh BASE_LLM_RUN [NAME=LLM_RUN...]; tar cJf .device-bin/labs.tar.xz -C DIR matvec-lab-*
#   there: AB_SHAPES="llama3-8b:Q4_K_M:bpe phi4:Q4_K_M:bpe" scripts/gpu-matvec-ab.sh   (carry .device, .device-bin)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/bin /tmp/labs
rm -rf /tmp/bin/* /tmp/labs/* && tar xJf .device-bin/bins.tar.xz -C /tmp/bin
[ -f .device-bin/labs.tar.xz ] && tar xJf .device-bin/labs.tar.xz -C /tmp/labs
source .device/env.sh >/dev/null
source "$(dirname "$0")/device-libs.sh"
summary=()
if [ -z "${SKIP_TESTS:-}" ]; then
  timeout 240 /tmp/bin/cuda_kernels_test --gtest_color=no --gtest_filter="${KERNEL_TESTS:-*}" >"$out/kernels.log" 2>&1
  summary+=("kernel tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+' "$out/kernels.log" | tr '\n' ' ')")
  timeout 240 /tmp/bin/cuda_session_test --gtest_color=no --gtest_filter="${SESSION_TESTS:-*}" >"$out/session.log" 2>&1
  summary+=("session tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+' "$out/session.log" | tr '\n' ' ')")
fi
# The labs in turn, each over the same shapes; two rounds so drift shows.
for round in 1 2; do
  for lab in /tmp/labs/matvec-lab-*; do
    [ -x "$lab" ] || continue
    MATVEC_LAB_SHAPES=${LAB_SHAPES:-4096x14336,14336x4096,4096x4096,17920x5120,5120x35840,5120x7680} \
      MATVEC_LAB_TYPES=${LAB_TYPES:-Q4_K,Q6_K} timeout 120 "$lab" >"$out/$(basename "$lab")-$round.txt" 2>&1
    summary+=("== $(basename "$lab") round $round")
    while read -r line; do summary+=("$line"); done < <(grep -E '^(Q|MX)' "$out/$(basename "$lab")-$round.txt" |
      awk -F'|' '{print $1 "|" $4}')
  done
done
bins=(/tmp/bin/llm-run-base /tmp/bin/llm-run)
for b in /tmp/bin/llm-run-*; do [ "$b" = /tmp/bin/llm-run-base ] || bins+=("$b"); done
for sv in ${AB_SHAPES:-}; do
  IFS=: read -r shape type vocab <<<"$sv"
  mkdir -p "$out/ab-$shape-$type"
  OUT=$out/ab-$shape-$type SHAPE=$shape TYPE=$type VOCAB=$vocab ROUNDS=${ROUNDS:-2} DEVICE_DIR=.device \
    ARGS=${ARGS:--p 0 -n 128 -r 3} scripts/gpu-ab-bench.sh "${bins[@]}" >/dev/null 2>&1
  while read -r line; do summary+=("$shape $type $line"); done < <(sed 's|/tmp/bin/||' "$out/ab-$shape-$type/ab.txt")
  rm -f "/tmp/$shape-$type-$vocab.gguf"
done
printf '%s\n' "${summary[@]}" | tee "$out/table.txt"
