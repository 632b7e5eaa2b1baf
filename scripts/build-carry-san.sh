#!/usr/bin/env bash
# Build machine: fills build-carry-san/ (git-ignored through /build*/) with what scripts/gpu-sanitize.sh and
# scripts/gpu-soak.sh need on the GPU machine, self-contained so that nothing else has to be carried:
#   build-carry-san/{llm-run,cuda_kernels_test,cuda_session_test}   sm_90 Release binaries (device code has -lineinfo,
#                                                                    so compute-sanitizer names file:line)
#   build-carry-san/assets/{models,tokenizer,lib}                     laid out like ../shared (LLM_TEST_ASSETS)
# About 36 MiB; carry ["build-carry-san"] alone.
#   JOBS=2 nice scripts/build-carry-san.sh                 builds into $BUILD_DIR (default build-san) from $SRC (.)
#   SKIP_BUILD=1 BUILD_DIR=build-x scripts/build-carry-san.sh   only copies from an existing build
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
src=${SRC:-.}
build=${BUILD_DIR:-build-san}
shared=${LLM_TEST_ASSETS:-$root/../shared}
dest="build-carry-san"
targets=(llm-run cuda_kernels_test cuda_session_test)

if [ -z "${SKIP_BUILD:-}" ]; then
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
  cmake --build "$build" -j "${JOBS:-2}" --target "${targets[@]}"
fi
rm -rf "$dest" && mkdir -p "$dest/assets/models/refs" "$dest/assets/tokenizer" "$dest/assets/lib"
cp "$build/app/llm-run" "$dest/"
for t in cuda_kernels_test cuda_session_test; do cp "$(find "$build/tests" -name "$t" -type f | head -1)" "$dest/"; done
# Keep the symbol table (host backtraces in sanitizer reports name functions); drop only debug sections.
strip --strip-debug "$dest"/llm-run "$dest"/cuda_* 2>/dev/null || true
for m in stories260K-f32 synth-llama-tok512-Q4_K_M; do
  cp "$shared/models/$m.gguf" "$dest/assets/models/"
  cp "$shared/models/refs/$m".public.* "$dest/assets/models/refs/"
done
cp "$shared/models/stories260K-reference.txt" "$dest/assets/models/"
cp "$shared/tokenizer/ggml-vocab-llama-bpe.gguf" "$dest/assets/tokenizer/"
for lib in libsentencepiece.so.0 libpcre2-8.so.0; do
  p=$(ldconfig -p | awk -v l="$lib" '$1==l {print $NF; exit}')
  if [ -n "$p" ]; then cp -L "$p" "$dest/assets/lib/"; else echo "warning: $lib not found here" >&2; fi
done
echo "${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}" >"$dest/COMMIT"   # COMMIT=: what $SRC holds
du -sh "$dest"
echo "carry: [\"build-carry-san\"]"
