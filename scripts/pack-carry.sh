#!/usr/bin/env bash
# Packs the sm_90 binaries a device call needs into one xz archive (git-ignored .device-bin/bins.tar.xz): the test
# binaries and llm-run of the build here, and optionally a base build's llm-run (as llm-run-base) for an A/B. The
# binaries share most of their bytes (the kernels of libllm_cuda), which xz -9 stores once: four binaries and a base
# take ~8 MiB instead of ~80, inside the 64 MiB the device tool carries. At ~62 MB a binary, xz -9's 64 MiB
# dictionary no longer reaches from one binary back into the one before it (33 MiB); 192 MiB does (18 MiB).
#   scripts/pack-carry.sh [BASE_LLM_RUN [NAME=LLM_RUN...]]   (BUILD_DIR: the build to take them from, default build;
#                                    NAME=LLM_RUN: more builds, packed as llm-run-NAME)
#   LEAN=1: without test_runtime and the kernel timeline's library and CUPTI (~1.6 MB less packed: the carry's
#   64 MiB counts the disk blocks of the working tree, .device and the archive, and four arms left it 1.2 MiB over)
#   there: mkdir -p /tmp/bin && tar xJf .device-bin/bins.tar.xz -C /tmp/bin (lib/: scripts/device-libs.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
full=true  # test_runtime and the kernel timeline's library too (LEAN=1: not)
[ "${LEAN:-0}" = 1 ] && full=false
bins=("$build/app/llm-run" "$build/tests/cuda/cuda_kernels_test" "$build/tests/runtime/cuda_session_test")
$full && bins+=("$build/tests/runtime/test_runtime")
cmake --build "$build" -j "${JOBS:-2}" --target "${bins[@]##*/}"
# The kernel timeline's injection library, a target only where CMake found CUPTI (tests/cuda/CMakeLists.txt).
if $full && cmake --build "$build" --target help 2>/dev/null | grep -q 'kernel-trace'; then
  cmake --build "$build" -j "${JOBS:-2}" --target kernel-trace
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "${bins[@]}" "$stage/"
[ $# -ge 1 ] && cp "$1" "$stage/llm-run-base"
# More binaries for a three-way A/B: NAME=PATH packs PATH as llm-run-NAME.
for extra in "${@:2}"; do cp "${extra#*=}" "$stage/llm-run-${extra%%=*}"; done
# The kernel timeline's injection library and CUPTI (scripts/gpu-decode-timeline.sh), when this build has it.
if $full && [ -f "$build/tests/cuda/libkernel-trace.so" ]; then
  cp "$build/tests/cuda/libkernel-trace.so" "$stage/"
  mkdir -p "$stage/lib" && cp -L "$(ldd "$stage/libkernel-trace.so" | awk '/libcupti/ {print $3}')" "$stage/lib/"
fi
find "$stage" -maxdepth 1 -type f -exec strip {} +
"$root/scripts/carry-libs.sh" "$stage/lib"  # /tmp/bin/lib there (scripts/device-libs.sh)
mkdir -p "$root/.device-bin"
tar cf - -C "$stage" . | xz -T1 --lzma2=preset=9e,dict=192MiB >"$root/.device-bin/bins.tar.xz"
du -sh "$root/.device-bin/bins.tar.xz"
