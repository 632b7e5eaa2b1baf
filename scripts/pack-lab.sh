#!/usr/bin/env bash
# Packs the kernel-lab binaries of the build here (cuda_kernels_test, matvec-lab) and their libraries into the
# git-ignored .device-bin/lab.tar.xz for a device call (scripts/gpu-expert-lab.sh unpacks it to /tmp/lab).
#   scripts/pack-lab.sh [BASE_DIR]   (BUILD_DIR: the build to take them from, default build; BASE_DIR: a base build's
#                                     cuda_kernels_test and matvec-lab, packed with the suffix -base for an A/B)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
cmake --build "$build" -j "${JOBS:-2}" --target cuda_kernels_test matvec-lab
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "$build/tests/cuda/cuda_kernels_test" "$build/tests/cuda/matvec-lab" "$stage/"
if [ $# -ge 1 ]; then
  cp "$1/cuda_kernels_test" "$stage/cuda_kernels_test-base"
  cp "$1/matvec-lab" "$stage/matvec-lab-base"
fi
strip "$stage"/*
"$root/scripts/carry-libs.sh" "$stage/lib"
mkdir -p "$root/.device-bin"
tar cf - -C "$stage" . | xz -9e -T1 >"$root/.device-bin/lab.tar.xz"
du -sh "$root/.device-bin/lab.tar.xz"
