#!/usr/bin/env bash
# A look inside `llm-run serve -v` on the GPU machine: starts it on the synthetic Llama-3-8B Q4_K_M that
# gpu-serve-bench.sh made (/tmp/llama3-8b-Q4_K_M.gguf on a warm machine), sends four requests (short and ~400 words,
# streamed and not) with a timeout each, prints their timing, /metrics, and the server's log: every graph built and
# its run-time kernels (compiled or loaded from the disk cache).
#   there: scripts/gpu-serve-diag.sh   (carry .device, .device-bin)
set -u
out=${OUT:-/tmp/out}; mkdir -p $out
rm -rf /tmp/bin && mkdir -p /tmp/bin && tar xJf .device-bin/bins.tar.xz -C /tmp/bin
source .device/env.sh >/dev/null; source scripts/device-libs.sh
model=/tmp/llama3-8b-Q4_K_M.gguf
ls -la $model
/tmp/bin/llm-run serve -m $model --device cuda --parallel 64 -c 65536 --port 8181 -v > $out/serve.log 2>&1 &
pid=$!
for i in $(seq 1 120); do python3 -c "import urllib.request;urllib.request.urlopen('http://127.0.0.1:8181/health')" 2>/dev/null && break; sleep 0.5; done
echo up after $i
req() { timeout 60 python3 - "$@" <<'PY'
import sys, json, time, urllib.request
body = {"prompt": sys.argv[1], "max_tokens": int(sys.argv[2]), "temperature": 0, "ignore_eos": True, "stream": sys.argv[3] == "1"}
t0 = time.time()
r = urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:8181/v1/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}), timeout=50)
data = r.read().decode()
print(f"{time.time()-t0:.2f}s", data[:200].replace("\n", " "), "...", data[-150:].replace("\n"," "))
PY
echo "rc=$?"; }
req "Hello world" 8 0
req "Hello world" 8 1
req "$(python3 -c "print(' '.join(['river stone light']*133))")" 16 1
req "$(python3 -c "print(' '.join(['river stone light']*133))")" 128 1
python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:8181/metrics').read().decode())" | grep -E "steps|tokens|running|queued|blocks"
kill -TERM $pid; sleep 2; tail -30 $out/serve.log
