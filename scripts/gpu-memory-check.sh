#!/usr/bin/env bash
# GPU memory planning on the GPU machine (issue 8 "Resources"): a context that cannot fit is refused before any large
# allocation with one line and exit 1; the largest context that message suggests really runs; the default context is
# the training context when it fits and is capped (with a note) when another process holds most of the memory; and
# the memory-plan GPU tests of test_runtime (the plan against what a session allocates) pass.
#   here:  scripts/build-carry.sh test_runtime
#          ../shared/device/prepare.sh models/stories260K-f32.gguf tokenizer/ggml-vocab-llama-bpe.gguf
#   there: scripts/gpu-memory-check.sh         (carry: .device and build-carry)
# Prints one PASS/FAIL line per check and writes the logs under $OUT; exits 1 when any check fails.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
[ -f .device/env.sh ] && source .device/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-libs.sh"  # the HTTP library beside the binaries
bin=${LLM_RUN_BIN:-build-carry/llm-run}
vocab=.device/tokenizer/ggml-vocab-llama-bpe.gguf
model=/tmp/llama3-1b-Q4_K_M.gguf
status=0
pass() { echo "PASS $*" | tee -a "$out/summary.txt"; }
fail() { echo "FAIL $*" | tee -a "$out/summary.txt"; status=1; }

nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader | tee "$out/device.txt"
[ -f "$model" ] || "$bin" synth --shape llama3-1b --type Q4_K_M --vocab "$vocab" -o "$model" >"$out/synth.log" 2>&1 ||
  { fail "synth llama3-1b (see synth.log)"; exit 1; }

# 1. An impossible context: exit 1, exactly one stderr line, the planned message, no CUDA error text.
"$bin" -m "$model" -p "Once upon a time" -n 8 --temp 0 --device cuda -c 10000000 >"$out/huge.out" 2>"$out/huge.err"
rc=$?
cat "$out/huge.err"
if [ $rc -eq 1 ] && [ "$(wc -l <"$out/huge.err")" -eq 1 ] &&
   grep -qE '^llm-run: error: needs [0-9.]+ GiB of GPU memory \(weights .*, KV cache .* for -c 10000000, work buffers .*, headroom .*\) but [0-9.]+ GiB is free; lower -c \(at most [0-9]+ fits\)$' "$out/huge.err" &&
   ! grep -qiE 'cuda(Malloc| error)|out of memory' "$out/huge.err"; then
  pass "-c 10000000 refused before allocating (rc 1, one line)"
else
  fail "-c 10000000: rc $rc, stderr in huge.err"
fi

# 2. The largest context the message suggests runs (the estimate is an upper bound of what is allocated).
most=$(sed -nE 's/.*at most ([0-9]+) fits.*/\1/p' "$out/huge.err")
if [ -n "$most" ]; then
  "$bin" -m "$model" -p "Once upon a time" -n 8 --temp 0 --device cuda -c "$most" -v >"$out/most.out" 2>"$out/most.err"
  rc=$?
  grep -E "memory plan|context" "$out/most.err"
  [ $rc -eq 0 ] && pass "-c $most (the suggested maximum) runs" || fail "-c $most: rc $rc (most.err)"
else
  fail "no 'at most N fits' in the message"
fi

# 3. The default context when the GPU is free: the training context (no cap note).
"$bin" -m "$model" -p "Once upon a time" -n 8 --temp 0 --device cuda -v >"$out/default.out" 2>"$out/default.err"
rc=$?
grep -E "memory plan|context|note" "$out/default.err"
if [ $rc -eq 0 ] && ! grep -q "context capped" "$out/default.err"; then
  pass "default context on a free GPU: $(sed -nE 's/.*context ([0-9]+) tokens.*/\1/p' "$out/default.err") tokens"
else
  fail "default context on a free GPU: rc $rc (default.err)"
fi

# 4. The default context while another process holds most of the memory: capped with a note, and it runs. The holder
#    is a chat session at the suggested maximum minus 64k slots (2 GiB of KV cache left over), waiting on stdin.
if [ -n "$most" ]; then
  fifo=$(mktemp -u /tmp/llm-hold.XXXXXX) && mkfifo "$fifo"
  "$bin" chat -m "$model" --device cuda -c $((most - 65536)) --no-warmup -v <"$fifo" >"$out/holder.out" \
      2>"$out/holder.err" &
  holder=$!
  exec 9>"$fifo"  # opens the holder's stdin (and keeps it open: the chat waits for a line)
  for _ in $(seq 120); do  # until the holder's session exists (-v prints the context once it does)
    grep -qE "context [0-9]+ tokens|error" "$out/holder.err" 2>/dev/null && break
    kill -0 "$holder" 2>/dev/null || break
    sleep 1
  done
  grep -E "context|error" "$out/holder.err"
  nvidia-smi --query-gpu=memory.used,memory.free --format=csv,noheader | tee -a "$out/device.txt"
  "$bin" -m "$model" -p "Once upon a time" -n 8 --temp 0 --device cuda -v >"$out/capped.out" 2>"$out/capped.err"
  rc=$?
  grep -E "memory plan|context|note|error" "$out/capped.err"
  if [ $rc -eq 0 ] && grep -q "note: context capped at .* to fit in free GPU memory" "$out/capped.err"; then
    pass "default context with little free memory: capped with a note"
  elif [ $rc -eq 1 ] && [ "$(wc -l <"$out/capped.err")" -eq 1 ] && grep -q "^llm-run: error: needs" "$out/capped.err"; then
    pass "default context with too little free memory: refused with one line"
  else
    fail "default context with little free memory: rc $rc (capped.err)"
  fi
  exec 9>&-
  kill "$holder" 2>/dev/null
  wait "$holder" 2>/dev/null
  rm -f "$fifo"
fi

# 5. The unit tests that need a GPU: the plan against a session's real allocations, the refusal without allocating.
if [ -x build-carry/test_runtime ]; then
  build-carry/test_runtime --gtest_color=no --gtest_filter='MemoryPlan.*:CudaFootprint.*' >"$out/test_memory_plan.log" 2>&1
  rc=$?
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |OK \]' "$out/test_memory_plan.log"
  [ $rc -eq 0 ] && pass "test_memory_plan" || fail "test_memory_plan (test_memory_plan.log)"
else
  echo "skip: build-carry/test_runtime not carried (scripts/build-carry.sh test_runtime)" | tee -a "$out/summary.txt"
fi

cat "$out/summary.txt"
exit $status
