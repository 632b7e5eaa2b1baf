#!/usr/bin/env bash
# GPU machine: the soak run. RUNS (20) generations, each its own llm-run process, each filling the whole context
# (-c 4096 -n -1 --ignore-eos) with sampling on (temp 0.8, top-k 40, top-p 0.95, repeat penalty 1.1, seed 1001, 1002,
# ...) on a synthetic Llama-3.2-1B Q4_K_M made here with `llm-run synth`. Per run: exit code, tokens, tok/s, and the
# device memory in use (nvidia-smi: before, peak while running, after; sampled every 250 ms).
# Fails if any run errors or stops short of a full context, if the peak memory differs between runs or memory grows
# during a run by more than MEM_TOL_MIB (16), if memory is not returned after a run, or if any run's generation tok/s
# is more than DRIFT_PCT (10) % from the median. Writes $OUT/soak.md and $OUT/soak-logs.tar.gz.
#   here:  JOBS=2 nice scripts/build-carry-san.sh          (fills build-carry-san/: binaries, vocabulary, libraries)
#   there: scripts/gpu-soak.sh                             (carry ["build-carry-san"]; ~4 min on an H100)
# Environment: BIN_DIR, ASSETS, RUNS, CTX, SHAPE (llama3-1b), TYPE (Q4_K_M), MODEL (skip synth, use this file),
# SOAK_BUDGET (seconds after which no new run starts, default 330), DRIFT_PCT, MEM_TOL_MIB, REPEAT_PENALTY (1.1; 1
# turns penalties off, the path where the session queues each decode step ahead), CACHE_TYPE (f16; q8_0, q4_0).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
out=${OUT:-/tmp/gpu-soak}
mkdir -p "$out"
bin=$(cd "${BIN_DIR:-build-carry-san}" && pwd) || { echo "gpu-soak: no binary folder ${BIN_DIR:-build-carry-san}" >&2; exit 2; }
assets=${ASSETS:-$bin/assets}
[ -d "$assets" ] || assets=$root/.device
assets=$(cd "$assets" && pwd)
export LD_LIBRARY_PATH="$assets/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
runs=${RUNS:-20}
ctx=${CTX:-4096}
shape=${SHAPE:-llama3-1b}
type=${TYPE:-Q4_K_M}
vocab=${VOCAB:-$assets/tokenizer/ggml-vocab-llama-bpe.gguf}
model=${MODEL:-/tmp/$shape-$type.gguf}
budget=${SOAK_BUDGET:-330}
drift_max=${DRIFT_PCT:-10}
mem_tol=${MEM_TOL_MIB:-16}
prompt=${PROMPT:-Once upon a time, in a small town by the sea, there lived an old clockmaker who}
logs=$(mktemp -d /tmp/gpu-soak-logs.XXXXXX)
start=$(date +%s)

mem_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -dc '0-9'; }
device=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
# The binary's own commit first (the device copy's git metadata can be stale).
commit=$(cat "$bin/COMMIT" 2>/dev/null || "$bin/llm-run" --version 2>/dev/null | sed -n 's/.*(commit \([0-9a-f]*\)).*/\1/p' | grep . ||
  git rev-parse --short HEAD 2>/dev/null || echo unknown)
md=$out/soak.md

synth_s=-
if [ -z "${MODEL:-}" ] && [ ! -f "$model" ]; then
  t0=$(date +%s.%N)
  if ! "$bin/llm-run" synth --shape "$shape" --type "$type" --vocab "$vocab" -o "$model" >"$logs/synth.log" 2>&1; then
    { echo "# soak: FAIL"; echo; echo "llm-run synth failed:"; echo '```'; tail -20 "$logs/synth.log"; echo '```'; } >"$md"
    tar -czf "$out/soak-logs.tar.gz" -C "$logs" . 2>/dev/null
    cat "$md"; exit 1
  fi
  synth_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
fi

base0=$(mem_used)
echo "gpu-soak: ${device:-no nvidia-smi}; $model; $runs runs to a $ctx-token context; memory in use ${base0:-?} MiB"
rows=$logs/rows
: >"$rows"
n_run=0
for i in $(seq 1 "$runs"); do
  if [ $(( $(date +%s) - start )) -ge "$budget" ]; then
    echo "gpu-soak: time budget (${budget} s) reached before run $i" | tee "$logs/budget.txt"
    break
  fi
  seed=$((1000 + i))
  before=$(mem_used)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 >"$logs/mem.$i.txt" 2>/dev/null &
  smi=$!
  t0=$(date +%s.%N)
  timeout -k 5 180 "$bin/llm-run" -m "$model" -p "$prompt" -c "$ctx" -n -1 --ignore-eos --temp 0.8 --top-k 40 \
    --top-p 0.95 --repeat-penalty "${REPEAT_PENALTY:-1.1}" -s "$seed" -v --no-display-prompt --device cuda \
    --cache-type "${CACHE_TYPE:-f16}" >"$logs/run.$i.txt" 2>"$logs/run.$i.log" </dev/null
  rc=$?
  wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
  after=$(mem_used)
  gen=$(grep -a '^llm-run: generation' "$logs/run.$i.log" | sed -E 's|.*/ *([0-9]+) tokens *\( *([0-9.]+) tok/s.*|\1 \2|')
  ptok=$(grep -a '^llm-run: prompt' "$logs/run.$i.log" | sed -E 's|.*/ *([0-9]+) tokens.*|\1|')
  stop=$(grep -a '^llm-run: stopped at' "$logs/run.$i.log" | sed -E 's/^llm-run: stopped at ([^;]*);.*/\1/')
  ntok=${gen% *}; tps=${gen#* }
  [ -n "$gen" ] || { ntok='?'; tps='?'; }
  # Peak while running, and growth during the run: the largest reading of the second half of the samples against
  # the largest of the first half (the load is over well inside the first half; teardown only lowers readings).
  read -r peak grow nsamp < <(tr -dc '0-9\n' <"$logs/mem.$i.txt" | awk 'NF {v[n++] = $1}
    END { if (n < 2) { print "? ? " n; exit }
          h = int(n / 2); a = 0; b = 0; p = 0
          for (k = 0; k < n; k++) { if (v[k] > p) p = v[k]; if (k < h) { if (v[k] > a) a = v[k] } else if (v[k] > b) b = v[k] }
          print p, b - a, n }')
  echo "$i|$seed|$rc|${ptok:-?}|$ntok|$tps|${stop:-?}|${before:-?}|$peak|$grow|${after:-?}|$wall|$nsamp" >>"$rows"
  echo "gpu-soak: run $i seed $seed: exit $rc, prompt ${ptok:-?} + $ntok tokens ($stop), $tps tok/s, memory ${before:-?} -> peak $peak (+$grow during the run) -> ${after:-?} MiB, ${wall} s"
  n_run=$i
done
total=$(( $(date +%s) - start ))

# ---------------------------------------------------------------------------------------------------------------------
problems=()
[ "$n_run" -lt "$runs" ] && problems+=("only $n_run of $runs runs started inside the ${budget} s budget")
while IFS='|' read -r i seed rc ptok ntok tps stop before peak grow after wall nsamp; do
  [ "$rc" != 0 ] && problems+=("run $i exited $rc")
  [ "$stop" != "context full" ] && problems+=("run $i stopped at '$stop', not a full context")
  if [[ "$ptok" =~ ^[0-9]+$ && "$ntok" =~ ^[0-9]+$ ]] && [ $((ptok + ntok)) -lt $((ctx - 1)) ]; then
    problems+=("run $i: prompt + generated = $((ptok + ntok)) < $ctx")
  fi
  if [[ "$grow" =~ ^-?[0-9]+$ ]] && [ "$grow" -gt "$mem_tol" ]; then problems+=("run $i: memory grew $grow MiB while running"); fi
  if [[ "$after" =~ ^[0-9]+$ && "$base0" =~ ^[0-9]+$ ]] && [ $((after - base0)) -gt "$mem_tol" ]; then
    problems+=("run $i: $((after - base0)) MiB more in use after the run than before the first")
  fi
done <"$rows"
# Across runs: peak memory spread, tok/s against the median.
stats=$(awk -F'|' -v tol="$mem_tol" -v drift="$drift_max" '
  $9 ~ /^[0-9]+$/ { pk[np++] = $9 }
  $6 ~ /^[0-9.]+$/ { t[nt++] = $6 }
  END {
    pmin = pk[0]; pmax = pk[0]; for (k = 1; k < np; k++) { if (pk[k] < pmin) pmin = pk[k]; if (pk[k] > pmax) pmax = pk[k] }
    for (a = 0; a < nt; a++) for (b = a + 1; b < nt; b++) if (t[b] < t[a]) { x = t[a]; t[a] = t[b]; t[b] = x }
    med = nt ? (nt % 2 ? t[int(nt / 2)] : (t[nt / 2 - 1] + t[nt / 2]) / 2) : 0
    dev = 0; for (k = 0; k < nt; k++) { d = (t[k] - med) / med * 100; if (d < 0) d = -d; if (d > dev) dev = d }
    printf "%s %s %s %.1f %.2f %s %s\n", (np ? pmin : "?"), (np ? pmax : "?"), nt + 0, med, dev, (nt ? t[0] : "?"), (nt ? t[nt - 1] : "?")
  }' "$rows")
read -r pmin pmax nt med dev tmin tmax <<<"$stats"
if [[ "$pmin" =~ ^[0-9]+$ ]] && [ $((pmax - pmin)) -gt "$mem_tol" ]; then
  problems+=("peak memory differs by $((pmax - pmin)) MiB between runs ($pmin..$pmax)")
fi
[[ "$pmin" =~ ^[0-9]+$ ]] || problems+=("no memory readings (nvidia-smi -lms)")
if [ "$nt" = 0 ]; then problems+=("no tok/s figures");
elif awk -v d="$dev" -v m="$drift_max" 'BEGIN {exit !(d > m)}'; then
  problems+=("tok/s: a run is ${dev}% from the median $med (limit ${drift_max}%)")
fi

verdict=PASS
[ ${#problems[@]} -gt 0 ] && verdict=FAIL
{
  echo "# soak: $verdict ($(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "- device: ${device:-unknown}; binaries of $commit"
  echo "- model: $(basename "$model") ($( [ -z "${MODEL:-}" ] && echo "llm-run synth --shape $shape --type $type, ${synth_s} s" || echo given))"
  echo "- command, seed 1001..$((1000 + runs)): \`llm-run -m $(basename "$model") -p \"$prompt\" -c $ctx -n -1 --ignore-eos --temp 0.8 --top-k 40 --top-p 0.95 --repeat-penalty ${REPEAT_PENALTY:-1.1} -s SEED -v --no-display-prompt --device cuda --cache-type ${CACHE_TYPE:-f16}\`"
  echo "- generation tok/s: median $med, range $tmin..$tmax, largest deviation from the median ${dev}% (limit ${drift_max}%)"
  echo "- peak device memory in use: $pmin..$pmax MiB over $n_run runs; before the first run ${base0:-?} MiB (limit ${mem_tol} MiB)"
  echo "- total wall time ${total} s"
  echo
  if [ ${#problems[@]} -gt 0 ]; then
    echo "Problems:"; echo; for p in "${problems[@]}"; do echo "- $p"; done; echo
  fi
  echo "| run | seed | exit | prompt | generated | stop | tok/s | MiB before | MiB peak | growth in run | MiB after | wall s |"
  echo "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"
  while IFS='|' read -r i seed rc ptok ntok tps stop before peak grow after wall nsamp; do
    echo "| $i | $seed | $rc | $ptok | $ntok | $stop | $tps | $before | $peak | $grow | $after | $wall |"
  done <"$rows"
} >"$md"
tar -czf "$out/soak-logs.tar.gz" -C "$logs" . 2>/dev/null
cat "$md"
[ "$verdict" = PASS ]
