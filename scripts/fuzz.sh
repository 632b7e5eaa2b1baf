#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan, no CUDA) into ${BUILD_DIR:-build-fuzz} and runs each for SECONDS.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#     TARGET: gguf model tokenizer chat_template api_request tool_calls json_schema
#                                                (default: all seven)
#   scripts/fuzz.sh 60                           one minute each: the quick check after touching a parser
#   JOBS=8 scripts/fuzz.sh 1800                  the release target: 30 minutes per target, 8 processes each
#   NICE=19 JOBS=1 BUILD_JOBS=1 scripts/fuzz.sh 120   on a shared machine
#   SKIP_BUILD=1 BUILD_DIR=build-fuzz-carry scripts/fuzz.sh 120   run prebuilt targets (a machine without clang, e.g.
#                                                the GPU machine's 16 cores: scripts/build-fuzz-carry.sh makes the folder)
#
# Environment: JOBS (fuzzing processes per target, default nproc/2; >1 runs libFuzzer's -fork mode), BUILD_JOBS (default
# nproc), NICE (default 0), LLM_TEST_ASSETS (default ../shared: the tokenizer target needs its vocabularies),
# FUZZ_ARGS (extra libFuzzer flags for every target).
#
# Corpora grow in $BUILD_DIR/corpus/<target> across runs (seeded from fuzz-seeds every time); anything found lands in
# $BUILD_DIR/artifacts/<target>/ (crash-*, leak-*, timeout-*, oom-*) and the log in $BUILD_DIR/logs/<target>.log.
# Reproduce one with: $BUILD_DIR/tests/fuzz/fuzz_<target> <file>; then add it to tests/fuzz/test_fuzz_regressions.cpp.
# Exits non-zero when any target found something.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-fuzz}
seconds=${1:-60}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf model tokenizer chat_template api_request tool_calls json_schema)
# Half the cores by default: libFuzzer's -fork mode keeps that many processes busy; 1 on a small shared machine.
default_jobs=$(( $(nproc) / 2 ))
jobs=${JOBS:-$(( default_jobs > 0 ? default_jobs : 1 ))}
nice_cmd=(nice -n "${NICE:-0}")
export LLM_TEST_ASSETS=${LLM_TEST_ASSETS:-$root/../shared}
# UBSan reports must stop the run (libFuzzer then saves the input); leaks are checked after every input.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

for t in "${targets[@]}"; do
  case $t in
    gguf|model|tokenizer|chat_template|api_request|tool_calls|json_schema) ;;
    *) echo "fuzz: unknown target '$t'" >&2; exit 2 ;;
  esac
done

if [ -z "${SKIP_BUILD:-}" ]; then
  "$root/scripts/setup.sh"
  if ! command -v clang++ >/dev/null; then
    echo "fuzz: clang++ not found (Debian: apt-get install clang libclang-rt-dev)" >&2
    exit 1
  fi
  "${nice_cmd[@]}" cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLM_CUDA=OFF -DLLM_SANITIZE=ON -DLLM_FUZZ=ON >/dev/null
  "${nice_cmd[@]}" cmake --build "$build" -j "${BUILD_JOBS:-$(nproc)}" --target fuzz-seeds \
    "${targets[@]/#/fuzz_}"
fi

seeds=$build/corpus-seeds
rm -rf "$seeds"
"$build/tests/fuzz/fuzz-seeds" "$seeds" "$LLM_TEST_ASSETS"

# Per target: the largest input, an absolute cap on one allocation (MB), and a dictionary. The per-input budget
# (64 x input size + 4 MiB, tests/fuzz/alloc_guard.h) is enforced inside the targets.
max_len() {
  case $1 in
    gguf) echo 16384 ;; model) echo 65536 ;; tokenizer) echo 4096 ;; chat_template) echo 8192 ;;
    api_request) echo 8192 ;; tool_calls) echo 4096 ;; json_schema) echo 4096 ;;
  esac
}
dict() { case $1 in gguf|model) echo gguf.dict ;; *) echo "$1.dict" ;; esac; }
# A template may legitimately spend the default render budget (2M steps) in ChatTemplate::parse's probe render: about
# 30 s under ASan + coverage on a slow machine. Anything beyond these is reported as a hang (timeout-*).
timeout_s() { case $1 in chat_template) echo 120 ;; *) echo 25 ;; esac; }

mkdir -p "$build/logs"
summary=()
found_any=0
for t in "${targets[@]}"; do
  corpus=$build/corpus/$t
  artifacts=$build/artifacts/$t
  log=$build/logs/$t.log
  mkdir -p "$corpus" "$artifacts"
  before=$(find "$artifacts" -type f | wc -l)
  mode=()
  [ "$jobs" -gt 1 ] && mode=(-fork="$jobs")
  echo "fuzz: $t for ${seconds}s (${jobs} process(es)), log $log"
  set +e
  # shellcheck disable=SC2086
  "${nice_cmd[@]}" "$build/tests/fuzz/fuzz_$t" "${mode[@]}" -max_total_time="$seconds" -max_len="$(max_len "$t")" \
    -timeout="$(timeout_s "$t")" -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 \
    -dict="$root/tests/fuzz/$(dict "$t")" -artifact_prefix="$artifacts/" ${FUZZ_ARGS:-} \
    "$corpus" "$seeds/$t" >"$log" 2>&1
  rc=$?
  set -e
  after=$(find "$artifacts" -type f | wc -l)
  execs=$( (grep -oE "stat::number_of_executed_units: *[0-9]+" "$log" || true) | awk '{s += $2} END {print s + 0}')
  if [ "$execs" -eq 0 ]; then  # fork mode or an early stop: the last status line has the count
    execs=$( (grep -oE "^#[0-9]+" "$log" || true) | tail -1 | tr -d '#')
  fi
  rss=$( (grep -oE "stat::peak_rss_mb: *[0-9]+" "$log" || true) | awk '{print $2}' | sort -n | tail -1)
  units=$(find "$corpus" -type f | wc -l)
  new=$((after - before))
  status=ok
  if [ "$new" -gt 0 ] || { [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; }; then
    status="FOUND $new (exit $rc)"
    found_any=1
    grep -E "^==[0-9]+==ERROR|^SUMMARY|runtime error|==fuzz==|Test unit written|terminate called|what\(\)" \
      "$log" | head -20 >&2 || true
  fi
  summary+=("$(printf "%-14s %6ss %12s execs %8s exec/s %6s corpus %6s MB  %s" "$t" "$seconds" "${execs:-?}" \
    "$(( ${execs:-0} / (seconds > 0 ? seconds : 1) ))" "$units" "${rss:-?}" "$status")")
done

echo
echo "fuzz: summary ($(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'))"
printf '  %s\n' "${summary[@]}"
exit "$found_any"
