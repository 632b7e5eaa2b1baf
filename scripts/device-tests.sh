# Sourced by the GPU-machine A/B scripts (gpu-switch-ab.sh, gpu-variants-ab.sh), which keep a `table` array of result
# lines and $out:
#   gpu_tests [VAR=VALUE...]        the carried test binaries' KERNEL_TESTS and SESSION_TESTS filters (each skipped
#                                   when unset) with those variables set; logs in $out, a result line each in `table`
#                                   (also printed at once on stderr)
#   model_outputs MODEL TAG RUN...  RUN... (a command prefix that runs llm-run) writes the logits of a long and of a
#                                   two-token prompt, a greedy generation and a greedy generation after the long
#                                   prompt (decode at ~500 positions) of MODEL to
#                                   /tmp/<name>-{long,short,gen,deepgen}-TAG.{f32,txt}
#   compare_outputs MODEL A B       echoes how model_outputs' files of tags A and B compare (byte for byte; logits
#                                   that differ with their largest difference and whether the top token agrees)
gpu_tests() {
  local bin log filter
  for bin in cuda_kernels_test cuda_session_test; do
    filter=${SESSION_TESTS:-} log=session
    [ "$bin" = cuda_kernels_test ] && filter=${KERNEL_TESTS:-} log=kernels
    [ -n "$filter" ] || continue
    timeout 240 env "$@" "/tmp/bin/$bin" --gtest_color=no --gtest_filter="$filter" >"$out/$log.log" 2>&1
    # The counts and the failed tests' names (sort -u: gtest lists them twice), so that the line says it all when
    # the log does not come back.
    table+=("${log%s} tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED  \]' "$out/$log.log" | sort -u | tr '\n' ' ')")
    echo "${table[-1]}" >&2
  done
}

check_long="$(for i in $(seq 1 40); do printf 'The river %d runs past the old mill and the bridge. ' "$i"; done)"
model_outputs() {
  local m=$1 tag=$2 name
  name=$(basename "$1" .gguf)
  shift 2
  "$@" logits -m "$m" --device cuda -p "$check_long" --top 5 --out "/tmp/$name-long-$tag.f32" >/dev/null \
    2>>"$out/check.err"
  "$@" logits -m "$m" --device cuda -p "Hi" --top 5 --out "/tmp/$name-short-$tag.f32" >/dev/null 2>>"$out/check.err"
  "$@" -m "$m" --device cuda -p "Once upon a time" -n 48 --temp 0 >"/tmp/$name-gen-$tag.txt" 2>>"$out/check.err"
  "$@" -m "$m" --device cuda -p "$check_long" -n 96 --temp 0 >"/tmp/$name-deepgen-$tag.txt" 2>>"$out/check.err"
}

logits_diff() {  # A B: two `logits --out` files of the same prompt (f32 rows of the vocabulary)
  python3 - "$1" "$2" <<'PY'
import array, sys
a, b = (array.array('f', open(f, 'rb').read()) for f in sys.argv[1:3])
d = max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else float('nan')
top = 'top-1 same' if a.index(max(a)) == b.index(max(b)) else 'top-1 differs'
print(f'max |diff| {d:.3g}, {top}')
PY
}

compare_outputs() {
  local name r="" k a b
  name=$(basename "$1" .gguf)
  for k in long.f32 short.f32 gen.txt deepgen.txt; do
    a=/tmp/$name-${k%%.*}-$2.${k##*.} b=/tmp/$name-${k%%.*}-$3.${k##*.}
    if [ ! -s "$a" ] || [ ! -s "$b" ]; then
      r+="${k%%.*} FAILED (check.err); "
    elif cmp -s "$a" "$b"; then
      r+="${k%%.*} same ($(stat -c %s "$a") bytes); "
    elif [ "${k##*.}" = f32 ]; then
      r+="${k%%.*} DIFFER ($(logits_diff "$a" "$b")); "
    else
      r+="${k%%.*} DIFFER; "
    fi
  done
  echo "$r"
}
