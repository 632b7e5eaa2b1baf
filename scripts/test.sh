#!/usr/bin/env bash
# Builds everything and runs the whole test suite with CTest. Tests that need the shared assets read them from
# $LLM_TEST_ASSETS (default: ../shared beside the repository); GPU tests skip with a message when no GPU is present.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/build.sh" "$@"
export LLM_TEST_ASSETS=${LLM_TEST_ASSETS:-$root/../shared}
ctest --test-dir "$build" --output-on-failure -j "${JOBS:-$(nproc)}"
