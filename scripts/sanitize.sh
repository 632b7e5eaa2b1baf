#!/usr/bin/env bash
# Builds the whole CPU test suite with AddressSanitizer + UndefinedBehaviorSanitizer (-DLLM_SANITIZE=ON, no CUDA)
# into ${BUILD_DIR:-build-asan} and runs it with CTest. Any ASan report, leak or UBSan report fails the test that
# triggered it (UBSan is made fatal below). Extra arguments go to ctest, e.g. scripts/sanitize.sh -R test_gguf.
#
#   scripts/sanitize.sh                      build (RelWithDebInfo) and run everything
#   BUILD_TYPE=Debug scripts/sanitize.sh     -O0 build: better stacks, several times slower tests
#   JOBS=1 NICE=19 scripts/sanitize.sh       on a shared machine
#   CXX=clang++ CC=clang BUILD_DIR=build-asan-clang scripts/sanitize.sh   the same with clang
#   KEEP_GOING=1 scripts/sanitize.sh         test whatever builds when some target does not (work in progress)
#
# Prints a summary line "sanitize: N tests, F failed, T s" and exits non-zero when a test fails or the build fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-asan}
build_type=${BUILD_TYPE:-RelWithDebInfo}
jobs=${JOBS:-$(nproc)}
nice_cmd=(nice -n "${NICE:-0}")

"$root/scripts/setup.sh"
export LLM_TEST_ASSETS=${LLM_TEST_ASSETS:-$root/../shared}
# halt_on_error: a UBSan finding must fail the test instead of printing and carrying on.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# detect_leaks is on by default on x86-64 Linux; strict_string_checks and the init-order check catch a little more.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:check_initialization_order=1}

start=$(date +%s)
"${nice_cmd[@]}" cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DLLM_CUDA=OFF \
  -DLLM_SANITIZE=ON >/dev/null
build_ok=1
keep_going=()
[ "${KEEP_GOING:-0}" = 1 ] && keep_going=(-- -k 0)
"${nice_cmd[@]}" cmake --build "$build" -j "$jobs" "${keep_going[@]}" || build_ok=0
built=$(date +%s)
echo "sanitize: build $((built - start)) s (${build_type}, -j${jobs})$([ $build_ok = 1 ] || echo ', FAILED')"
# KEEP_GOING=1: build what builds and test it anyway (tests whose binary failed to link show as "Not Run").
[ $build_ok = 1 ] || [ "${KEEP_GOING:-0}" = 1 ] || exit 1

log=$build/sanitize-ctest.log
set +e
"${nice_cmd[@]}" ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
end=$(date +%s)
summary=$(grep -E "tests passed|tests failed" "$log" | tail -1)
echo "sanitize: ${summary:-no tests ran}; tests $((end - built)) s, total $((end - start)) s"
[ $build_ok = 1 ] || rc=1
exit "$rc"
