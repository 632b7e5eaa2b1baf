#!/usr/bin/env bash
# Builds the sm_90 binaries here (the build machine has nvcc but no GPU) and copies the ones the GPU machine needs
# into build-carry/ (git-ignored), stripped, to stay inside the 64 MiB the device tool carries.
#   scripts/build-carry.sh [extra test binaries...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cmake -S . -B build-sm90 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build build-sm90 -j "${JOBS:-2}"
rm -rf build-carry && mkdir -p build-carry
cp build-sm90/app/llm-run build-carry/
for t in "$@"; do cp "$(find build-sm90/tests -name "$t" -type f | head -1)" build-carry/; done
strip build-carry/* 2>/dev/null || true
du -sh build-carry
