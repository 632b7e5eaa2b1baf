#!/usr/bin/env bash
# Build machine: fills build-fuzz-carry/ (git-ignored) with the libFuzzer targets built by scripts/fuzz.sh (clang,
# ASan + UBSan) and the assets they read, so the fuzzers can run on a machine without clang but with more cores
# (the GPU machine: 16). There, carrying ["build-fuzz-carry"]:
#   source build-fuzz-carry/env.sh && SKIP_BUILD=1 BUILD_DIR=build-fuzz-carry JOBS=4 scripts/fuzz.sh SECONDS
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
shared=${LLM_TEST_ASSETS:-$root/../shared}
src=${BUILD_DIR:-build-fuzz}
dest=build-fuzz-carry
[ -z "${SKIP_BUILD:-}" ] && scripts/fuzz.sh 0 >/dev/null 2>&1 || true  # builds the targets (0 s of fuzzing)
rm -rf "$dest" && mkdir -p "$dest/tests/fuzz" "$dest/assets/tokenizer" "$dest/lib"
for b in fuzz-seeds fuzz_gguf fuzz_model fuzz_tokenizer fuzz_chat_template; do cp "$src/tests/fuzz/$b" "$dest/tests/fuzz/"; done
strip --strip-debug "$dest"/tests/fuzz/* 2>/dev/null || true  # keep the symbol table: reports name functions
for v in llama-spm llama-bpe qwen2 phi-3; do cp "$shared/tokenizer/ggml-vocab-$v.gguf" "$dest/assets/tokenizer/"; done
cp "$shared/tokenizer/ggml-vocab-llama-bpe.gguf.inp" "$dest/assets/tokenizer/"
for lib in libsentencepiece.so.0 libpcre2-8.so.0; do
  cp -L "$(ldconfig -p | awk -v l="$lib" '$1==l {print $NF; exit}')" "$dest/lib/"
done
cat >"$dest/env.sh" <<'ENV'
export LD_LIBRARY_PATH="$PWD/build-fuzz-carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LLM_TEST_ASSETS="$PWD/build-fuzz-carry/assets"
ENV
du -sh "$dest"
