#!/usr/bin/env bash
# The newer architectures' shapes (gemma3, phi3, the mixtures of experts) beside llama.cpp on the same files, in one
# device call (issues 27, 28 and 29's benchmarks): starts llama.cpp's build detached first (.device/llama-cpp-build.sh,
# ../shared/anchors/README.md), makes the models with `llm-run synth` (random weights of the real shapes, the preset's
# tensor types; the llama-bpe vocabulary; device-model.sh's names, so later scripts of the lease reuse them) while it
# builds and the GPU tests of KERNEL_TESTS and SESSION_TESTS run, waits for the build (a build beside a bench skews
# it), then benches llm-run and llama-bench on the same files shape by shape (ROUNDS=2: llm-run again after them).
# Results under $OUT, the table last.
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh --llama-cpp tokenizer/ggml-vocab-llama-bpe.gguf
#   there: SHAPES="gemma3-12b:Q4_K_M phi4:Q4_K_M" DEPTHS=0,16384 scripts/gpu-arch-bench.sh   (carry .device, .device-bin)
# A shape may carry its own depths (gemma3-12b:Q4_K_M:0,16384); SKIP_LLAMA=1 benches llm-run only.
# KERNEL_TESTS / SESSION_TESTS: cuda_kernels_test / cuda_session_test with that gtest filter ("*" for all) while the
# models are made, 120 s each at most. LIM=S: the seconds the device call allows; a bench that would start with
# under 45 s left is skipped and says so.
set -uo pipefail
t0=$SECONDS
source "$(dirname "${BASH_SOURCE[0]}")/device-bins.sh"   # $out, /tmp/bin, the environment
source "$(dirname "${BASH_SOURCE[0]}")/device-model.sh"  # synth_model
WAIT=0 .device/llama-cpp-build.sh >/dev/null 2>&1  # detached: it builds while the models are made
shapes=${SHAPES:-gemma3-12b:Q4_K_M phi4:Q4_K_M}
args="-p 512 -n 128 -r 3"
left() { echo $(( ${LIM:-100000} - (SECONDS - t0) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader | tee "$out/clocks.txt"
table=("device: $(cat "$out/clocks.txt")")
( for st in $shapes; do  # the models on the CPU, the tests on the GPU meanwhile
    IFS=: read -r shape type _ <<<"$st"
    synth_model /tmp/bin/llm-run "$shape" "$type" 2>>"$out/synth.log" ||
      echo "$shape $type: synth failed" >>"$out/synth.log"
  done ) &
synth=$!
run_tests() {  # binary filter: one line of gtest's summary
  timeout 120 "/tmp/bin/$1" --gtest_filter="$2" >"$out/$1.log" 2>&1
  table+=("$1 '$2' rc $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$1.log" | tr -s ' ' | tr '\n' ' ')")
}
[ -n "${KERNEL_TESTS:-}" ] && run_tests cuda_kernels_test "$KERNEL_TESTS"
[ -n "${SESSION_TESTS:-}" ] && run_tests cuda_session_test "$SESSION_TESTS"
wait $synth
table+=("models made at $((SECONDS - t0)) s$(grep -h 'failed' "$out/synth.log" | tr '\n' ';')")
n_shapes=$(wc -w <<<"$shapes")  # ~80 s a shape of benches (both sides) left after the wait
wait_for=$(( $(left) - 80 * n_shapes < ${LLAMA_WAIT:-330} ? $(left) - 80 * n_shapes : ${LLAMA_WAIT:-330} ))
[ -z "${SKIP_LLAMA:-}" ] && WAIT=$(( wait_for > 5 ? wait_for : 5 )) .device/llama-cpp-build.sh | tee "$out/llama-build.txt"
model_of() { IFS=: read -r shape type depths <<<"$1"; depths=${depths:-${DEPTHS:-0}}; model_path "$shape" "$type"; }
ours() {  # st round
  model_of "$1"; [ -f "$model" ] || return 0
  [ "$(left)" -ge 45 ] || { table+=("llm-run $shape $type round $2: skipped (time)"); return 0; }
  /tmp/bin/llm-run bench -m "$model" --device cuda $args -d "$depths" -o md >"$out/llm-run-$shape-$2.md" 2>&1
  table+=("llm-run $shape $type: $(grep -E '^\| .*(pp|tg)[0-9]' "$out/llm-run-$shape-$2.md" | awk -F'|' '{print $6 $7}' | tr -s ' ' | tr '\n' ';')")
}
lb=/tmp/llama.cpp/build/bin/llama-bench
theirs() {
  model_of "$1"
  [ -z "${SKIP_LLAMA:-}" ] && [ -x "$lb" ] && [ -f "$model" ] || return 0
  [ "$(left)" -ge 45 ] || { table+=("llama.cpp $shape $type: skipped (time)"); return 0; }
  timeout $(( $(left) - 5 )) "$lb" -m "$model" -ngl 99 -fa 1 $args -d "$depths" -o md >"$out/llama-$shape.md" 2>&1
  table+=("llama.cpp $shape $type: $(grep -E '^\| .*(pp|tg)[0-9]' "$out/llama-$shape.md" | awk -F'|' '{print $(NF-2) $(NF-1)}' | tr -s ' ' | tr '\n' ';')")
}
for st in $shapes; do ours "$st" 1; theirs "$st"; done  # shape by shape: a short LIM cuts whole pairs
[ "${ROUNDS:-1}" -ge 2 ] && for st in $shapes; do ours "$st" 2; done
echo
printf '%s\n' "${table[@]}" | tee "$out/table.txt"
