#!/usr/bin/env bash
# Configures and builds llm-run into ${BUILD_DIR:-build} (Release). Extra arguments go to CMake's configure step,
# e.g. scripts/build.sh -DLLM_CUDA=OFF.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
jobs=${JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j "$jobs"
