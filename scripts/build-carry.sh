#!/usr/bin/env bash
# Builds the sm_90 binaries here (the build machine has nvcc but no GPU) and copies the ones the GPU machine needs
# into build-carry/ (git-ignored), stripped, to stay inside the 64 MiB the device tool carries.
#   scripts/build-carry.sh [extra test binaries...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build-sm90}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target llm-run "$@"
rm -rf build-carry && mkdir -p build-carry
cp "$build/app/llm-run" build-carry/
for t in "$@"; do cp "$(find "$build/tests" -name "$t" -type f | head -1)" build-carry/; done
strip build-carry/* 2>/dev/null || true
scripts/carry-libs.sh build-carry/lib  # what the GPU machine lacks (scripts/device-libs.sh)
du -sh build-carry
