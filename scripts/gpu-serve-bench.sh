#!/usr/bin/env bash
# The serving benchmarks of issue 26 in one device call: with TESTS=1 first the GPU tests (paged attention kernels,
# the paged session against the CPU, the batching engine); `llm-run bench --parallel` beside llama.cpp's
# llama-batched-bench (512-token prompts, 128 generated); `llm-run serve` and llama.cpp's `llama-server` on the same
# synthetic Llama-3-8B Q4_K_M, loaded by ../shared/bench/serve_load.py (streaming /v1/completions, prompts of 400
# random words, 128 tokens each) at several concurrencies, plus a shared 2000-token prefix at 8 streams (llama-server
# with its unified cache there, -kvu: its slots of -c / --parallel tokens are too short for those prompts); and
# `llm-run bench` tg128 for the one-stream reference (also at depth 512; and `bench --parallel --pipeline`, greedy
# steps queued ahead as serve runs them). llama.cpp builds while the tests run (TESTS=1: they fill the ~4 minutes), and
# nothing is timed before the build is over. SKIP_LLAMA=1 leaves llama.cpp out, SKIP_LLM=1 llm-run,
# SERVE=0 both servers (the engines' batched bench alone). BENCH=0 leaves out llm-run's benches, LOAD=0 the
# concurrency sweep (the shared-prefix load stays); PROMPT_WORDS: the sweep's prompt length (default 400 words);
# SERVE_BINS="llm-run-base llm-run" serves each build of scripts/pack-carry.sh in turn (an A/B of the serving path),
# SERVE_ENVS="LLM_PIPELINE_STEPS=0 LLM_PIPELINE_STEPS=1"
# each build with each environment setting ("A=1+B=2": both), SERVE_FLAGS="_ --batch-tokens=1024" each of those with
# each set of extra `serve` flags ("_": none; "--a=1+--b=2": both). Rows go to $OUT/table.txt as they come.
#   here:  scripts/pack-carry.sh; ../shared/device/prepare.sh --llama-cpp tokenizer/ggml-vocab-llama-bpe.gguf;
#          cp ../shared/bench/serve_load.py .device/
#   there: CONC="1 8 32 64" scripts/gpu-serve-bench.sh   (carry .device, .device-bin)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
rm -rf /tmp/bin && mkdir -p /tmp/bin && tar xJf .device-bin/bins.tar.xz -C /tmp/bin  # this call's, not a warm machine's
source "$(dirname "${BASH_SOURCE[0]}")/device-model.sh"  # the environment; $model: the synthetic Llama-3-8B Q4_K_M
[ -n "${SKIP_LLAMA:-}" ] || WAIT=0 .device/llama-cpp-build.sh >/dev/null 2>&1  # detached: builds meanwhile
make_model /tmp/bin/llm-run 2>"$out/synth.log"
: >"$out/table.txt"
row() { printf '%s\n' "$@" | tee -a "$out/table.txt"; }  # kept as it comes: a call cut short keeps its rows
passed() { grep -E '^\[  (PASSED|FAILED)|agreement|paged  ' "$1" | tr '\n' ' '; }
NPL=${NPL:-1,4,16,32,64}
PARALLEL=${PARALLEL:-64} CTX=${CTX:-65536}

if [ -z "${SKIP_LLM:-}" ]; then
  if [ -n "${TESTS:-}" ]; then
    /tmp/bin/cuda_kernels_test >"$out/kernels.txt" 2>&1
    row "cuda_kernels_test: $(passed "$out/kernels.txt")"
    /tmp/bin/cuda_session_test --gtest_filter="${SESSION_FILTER:-*}" >"$out/session.txt" 2>&1
    row "cuda_session_test: $(passed "$out/session.txt")"
  fi
  # llama.cpp's build (16 compile jobs) must be over before anything is timed: beside it llm-run's one-stream rows
  # lost 8-10% and a 32-stream p99 first token went from 406 to 1 061 ms (session 56). The tests above fill the wait.
  if [ -z "${SKIP_LLAMA:-}" ]; then
    t0=$SECONDS
    WAIT=${LLAMA_WAIT:-300} .device/llama-cpp-build.sh >"$out/llama-build.txt" 2>&1
    row "waited $((SECONDS - t0)) s for llama.cpp's build: $(head -1 "$out/llama-build.txt")"
  fi
  if [ "${BENCH:-1}" != 0 ]; then
    /tmp/bin/llm-run bench -m "$model" --device cuda --parallel "$NPL" -p 512 -n 128 >"$out/parallel.md" \
      2>"$out/parallel.err"
    row "llm-run bench --parallel:" "$(cat "$out/parallel.md")"
    # Greedy steps as serve runs them (queued ahead, argmax on the device, no logits out): the per-step wait's share.
    /tmp/bin/llm-run bench -m "$model" --device cuda --parallel "$NPL" -p 512 -n 128 --pipeline \
      >"$out/parallel-pipeline.md" 2>>"$out/parallel.err"
    row "llm-run bench --parallel --pipeline:" "$(grep -E '^\| *[0-9]' "$out/parallel-pipeline.md")"
    # tg128, and at the batched tables' depth (their decode runs at positions 512-639), in one load of the model
    /tmp/bin/llm-run bench -m "$model" --device cuda -p 0 -n 128 -d 0,512 -r 3 -o md >"$out/bench.md" 2>&1
    row "llm-run bench tg128: $(grep -E '^\| .*\| tg128 \|' "$out/bench.md" | awk -F'|' '{print $(NF-3)}' | tr -s ' ')"
    row "llm-run bench tg128 at depth 512: $(grep -E '^\| .*tg128 @ d512' "$out/bench.md" | awk -F'|' '{print $(NF-3)}' |
      tr -s ' ')"
  fi
fi

get() { python3 -c "import sys,urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())" "$1"; }
wait_health() {  # port, log
  for _ in $(seq 1 240); do
    get "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  row "server on $1 did not come up: $(tail -3 "$2")"; return 1
}
load() {  # name port: the issue's load at each concurrency
  [ "${LOAD:-1}" != 0 ] || return 0
  for c in ${CONC:-1 8 32 64}; do
    local n=$(( c * 2 < 8 ? 8 : c * 2 ))
    # A seed of its own at each concurrency: serve_load.py draws worker w's prompts from seed * 1000 + w, so with
    # one seed a sweep's later loads would find the earlier loads' prompts in the prefix cache.
    row "$1 c=$c: $(timeout 300 python3 .device/serve_load.py --url "http://127.0.0.1:$2" --concurrency "$c" \
      --requests "$n" --prompt-words "${PROMPT_WORDS:-400}" --max-tokens 128 --seed $((100 + c)) \
      2>>"$out/${1//[^A-Za-z0-9_.-]/_}-load.err")"
    # llm-run's engine: seconds busy so far, waiting for the device and on the host (cumulative over the loads).
    local split
    split=$(get "http://127.0.0.1:$2/metrics" 2>/dev/null | grep '^llmrun_engine_seconds_total' | tr '\n' ' ')
    [ -z "$split" ] || row "$1 after c=$c: $split"
  done
}
load_shared() {  # name port: 8 streams of ~2 100-token prompts, without and with a 1 500-word shared prefix
  for shared in 0 1500; do
    row "$1 c=8, 1600-word prompts, shared prefix $shared words: $(timeout 300 python3 .device/serve_load.py \
      --url "http://127.0.0.1:$2" --concurrency 8 --requests 16 --prompt-words 1600 --shared-prefix "$shared" \
      --max-tokens 128 --seed $((7 + shared)) 2>>"$out/${1//[^A-Za-z0-9_.-]/_}-load.err")"
  done
}
stop_server() {  # pid name: SIGTERM, then how long it took (or that it did not stop)
  local t0=$SECONDS
  kill -TERM "$1"
  for _ in $(seq 1 100); do
    kill -0 "$1" 2>/dev/null || { row "$2 stopped on SIGTERM in $((SECONDS - t0)) s"; return; }
    sleep 0.2
  done
  kill -KILL "$1"
  row "$2 did NOT stop within 20 s of SIGTERM (killed)"
}

if [ -z "${SKIP_LLM:-}" ] && [ "${SERVE:-1}" != 0 ]; then
  for bin in ${SERVE_BINS:-llm-run}; do
    for assign in ${SERVE_ENVS:-_}; do  # SERVE_ENVS="LLM_X=0 LLM_X=1": each build with each setting
      for flagset in ${SERVE_FLAGS:-_}; do  # SERVE_FLAGS="_ --batch-tokens=1024": each with each set of flags
        name=$bin; [ "$assign" = _ ] || name="$name[$assign]"; [ "$flagset" = _ ] || name="$name[$flagset]"
        file=${name//[^A-Za-z0-9_.-]/_}  # plain file names come back from the device
        vars=${assign//+/ }; [ "$assign" = _ ] && vars=
        flags=${flagset//+/ }; [ "$flagset" = _ ] && flags=
        # shellcheck disable=SC2086  # $vars and $flags: words on purpose
        env $vars /tmp/bin/$bin serve -m "$model" --device cuda --parallel "$PARALLEL" -c "$CTX" --port 8181 $flags \
          >"$out/$file-serve.log" 2>&1 &
        pid=$!
        wait_health 8181 "$out/$file-serve.log" && load "$name" 8181 && load_shared "$name" 8181
        get http://127.0.0.1:8181/metrics >"$out/$file-metrics.txt" 2>&1
        stop_server $pid "$name"
      done
    done
  done
fi

if [ -z "${SKIP_LLAMA:-}" ]; then
  WAIT=${LLAMA_WAIT:-300} .device/llama-cpp-build.sh >"$out/llama-build.txt" 2>&1
  lbb=/tmp/llama.cpp/build/bin/llama-batched-bench
  [ -x "$lbb" ] && "$lbb" -m "$model" -ngl 99 -fa on -c $((64 * 640)) -b 2048 -ub 512 -npp 512 -ntg 128 \
    -npl "$NPL" >"$out/llama-batched.txt" 2>&1
  row "llama-batched-bench:" "$(grep -E '^\|' "$out/llama-batched.txt")"
  ls=/tmp/llama.cpp/build/bin/llama-server
  if [ "${SERVE:-1}" != 0 ] && [ -x "$ls" ]; then
    "$ls" -m "$model" -ngl 99 -fa on --parallel "$PARALLEL" -c "$CTX" --port 8182 >"$out/llama-server.log" 2>&1 &
    pid=$!
    wait_health 8182 "$out/llama-server.log" && load llama-server 8182
    stop_server $pid llama-server
    # Its -c is split into --parallel slots of 1 024 tokens, too short for these prompts: the unified cache (-kvu)
    # lets any slot use the whole context.
    "$ls" -m "$model" -ngl 99 -fa on --parallel "$PARALLEL" -c "$CTX" -kvu --port 8183 >"$out/llama-server-kvu.log" 2>&1 &
    pid=$!
    wait_health 8183 "$out/llama-server-kvu.log" && load_shared llama-server-kvu 8183
    stop_server $pid llama-server-kvu
  elif [ "${SERVE:-1}" != 0 ]; then
    row "llama-server: not built (llama-build.txt)"
  fi
fi
