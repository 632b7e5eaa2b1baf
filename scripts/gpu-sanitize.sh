#!/usr/bin/env bash
# GPU machine: compute-sanitizer over the CUDA code, in lanes that run side by side (one GPU, 16 cores), each a list
# of TOOL:TARGET steps inside a time budget. Tools: memcheck (with --leak-check full), racecheck, initcheck,
# synccheck; memcheck-noleak (memcheck without the leak check); "none" runs the target plainly. Targets:
#   kernels[=FILTER]  cuda_kernels_test (every kernel family against its reference), gtest filter FILTER
#                     (default: all but the KernelLab timings and the host-only DeviceDequantOnHost)
#   session[=FILTER]  cuda_session_test (GPU vs CPU reference per carried model, stories260K greedy continuations,
#                     captured graph vs plain launches with sampling on)
#   gen-stories       llm-run, stories260K-f32, 5-token prompt (cuBLAS GEMM prefill), 64 sampled tokens through the
#                     captured decode graph
#   gen-matvec        the same with a 4-token prompt: prefill through the matvec kernels, no cuBLAS anywhere
#   gen-synth         llm-run, synth-llama-tok512-Q4_K_M (Q4_K/Q6_K matvec), 70-token prompt, 64 sampled tokens
# Writes $OUT/sanitize.md (one row per step: errors, wall time, exit code, what the program said; distinct findings
# with kernel and file:line) and every log in $OUT/sanitize-logs.tar.gz. Exits 1 if a step failed: errors in
# project code, a timeout, no sanitizer summary, or the program failing. Racecheck hazards that lie entirely inside
# cuBLAS's own kernels (nvjet_*, cutlass_*) are listed but do not fail the run (see docs/robustness.md).
#   here:  JOBS=2 nice scripts/build-carry-san.sh                        (fills build-carry-san/, ~36 MiB)
#   there: scripts/gpu-sanitize.sh                                       (carry ["build-carry-san"]; ~5 min)
# Environment: BIN_DIR (build-carry-san), ASSETS ($BIN_DIR/assets, else .device), SAN_BUDGET (seconds per lane,
# default 300), LANES (lanes separated by ';', steps by spaces; default below), COMPUTE_SANITIZER (path).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
out=${OUT:-/tmp/gpu-sanitize}
mkdir -p "$out"
bin=$(cd "${BIN_DIR:-build-carry-san}" && pwd) || { echo "gpu-sanitize: no binary folder ${BIN_DIR:-build-carry-san}" >&2; exit 2; }
assets=${ASSETS:-$bin/assets}
[ -d "$assets" ] || assets=$root/.device
assets=$(cd "$assets" && pwd)
export LD_LIBRARY_PATH="$assets/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LLM_TEST_ASSETS="$assets"
budget=${SAN_BUDGET:-300}
kfilter='-KernelLab.*:DeviceDequantOnHost.*'
# Six lanes of about 2-3.5 minutes each on an H100 (timings in docs/robustness.md). Racecheck spends ~160 s on
# Sampling.* and ~0.7 s per decode step, and the stories260K greedy-continuation test would take many minutes under
# it, hence the splits and filters. The kernel tests run under memcheck without --leak-check: with it, the process
# once ended with status 11 after every test had passed (llm-run and the session test keep the leak check).
# initcheck runs where no cuBLAS kernel writes the data read (gen-matvec, the kernel tests but the GEMM ones):
# it does not see the stores of cuBLAS's sm90 GEMM kernels and flags every later read of a GEMM output.
default_lanes="memcheck:gen-stories memcheck:gen-matvec memcheck:gen-synth memcheck-noleak:kernels memcheck:session;
racecheck:gen-stories racecheck:gen-synth racecheck:kernels=$kfilter:Sampling.*;
racecheck:kernels=Sampling.* racecheck:session=Models/*;
racecheck:session=GpuSession.CapturedAndPlainDecodingPickSameTokens initcheck:gen-matvec;
synccheck:gen-stories synccheck:gen-synth synccheck:kernels synccheck:session=GpuSession.CapturedAndPlainDecodingPickSameTokens:Models/*;
initcheck:kernels=$kfilter:*GemmMatchesReference*"
lanes_spec=${LANES:-$default_lanes}
logs=$(mktemp -d /tmp/gpu-sanitize-logs.XXXXXX)
min_step=20   # a step is not started with less time than this left in its lane
lib_kernels='nvjet|cutlass|cublas|xmma|gemv2|gemmk|splitKreduce'

cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || true)}
if [ -z "$cs" ]; then
  for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer \
           /usr/local/cuda/compute-sanitizer/compute-sanitizer /opt/nvidia/*/compute-sanitizer; do
    [ -x "$c" ] && { cs=$c; break; }
  done
fi
[ -n "$cs" ] || { echo "gpu-sanitize: compute-sanitizer not found" >&2; exit 2; }

target_cmd() {  # TARGET[=FILTER]: sets the array cmd
  local name=${1%%=*} filter=
  [ "$name" != "$1" ] && filter=${1#*=}
  case $name in
    kernels) cmd=("$bin/cuda_kernels_test" --gtest_color=no "--gtest_filter=${filter:-$kfilter}");;
    session) cmd=("$bin/cuda_session_test" --gtest_color=no "--gtest_filter=${filter:-*}");;
    gen-stories|gen-matvec)
      local prompt="Once upon a time"
      [ "$name" = gen-matvec ] && prompt="Once upon a"   # 4 tokens: the executor's matvec limit, no GEMM
      cmd=("$bin/llm-run" -m "$assets/models/stories260K-f32.gguf" -p "$prompt" -n 64 --temp 0.8 --top-k 40
           --top-p 0.95 --min-p 0.05 --repeat-penalty 1.1 -s 42 --ignore-eos -v --device cuda);;
    gen-synth) cmd=("$bin/llm-run" -m "$assets/models/synth-llama-tok512-Q4_K_M.gguf"
                    -p "The quick brown fox jumps over the lazy dog while the cat sleeps by the warm fire and the rain falls on the old roof of the house"
                    -n 64 --temp 0.8 --top-k 40 --top-p 0.95 --repeat-penalty 1.1 -s 7 --ignore-eos -v --device cuda);;
    *) echo "gpu-sanitize: unknown target $1" >&2; return 1;;
  esac
}

tool_opts() {  # sets the array opts for a tool
  case $1 in
    memcheck) opts=(--tool memcheck --leak-check full --print-limit 1000);;
    memcheck-noleak) opts=(--tool memcheck --print-limit 1000);;
    # initcheck can report one error per element read; print enough to see every kernel, without backtraces.
    initcheck) opts=(--tool initcheck --print-limit 20000 --show-backtrace no);;
    *) opts=(--tool "$1" --print-limit 1000);;
  esac
}

# The counts a sanitizer summary reports, summed over processes: "ERROR SUMMARY: N errors" (not the "N errors were
# not printed" line), "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)". Prints "errors warnings", or
# "? ?" without a summary.
summary_counts() {
  local log=$1 tool=$2
  if [ "$tool" = racecheck ] && grep -aq 'RACECHECK SUMMARY:' "$log"; then
    grep -a 'RACECHECK SUMMARY:' "$log" | sed -E 's/.*\(([0-9]+) errors?, ([0-9]+) warnings?\).*/\1 \2/' |
      awk '{e += $1; w += $2} END {print e + 0, w + 0}'
  elif grep -a 'ERROR SUMMARY:' "$log" | grep -vq 'not printed'; then
    grep -a 'ERROR SUMMARY:' "$log" | grep -v 'not printed' | sed -E 's/.*ERROR SUMMARY: ([0-9]+) errors?.*/\1/' |
      awk '{e += $1} END {print e + 0, 0}'
  else
    echo "? ?"
  fi
}

# What the program itself said: gtest totals, or llm-run's generated tokens and stop reason.
target_outcome() {
  local log=$1 target=$2 p f s n
  case $target in
    kernels*|session*)
      p=$(grep -aE '^\[  PASSED  \] [0-9]+ test' "$log" | tail -1 | awk '{print $4}')
      f=$(grep -aE '^\[  FAILED  \] [0-9]+ test' "$log" | tail -1 | awk '{print $4}')
      s=$(grep -aE '^\[  SKIPPED \] [0-9]+ test' "$log" | tail -1 | awk '{print $4}')
      if [ -z "$p$f$s" ]; then
        n=$(grep -acE '^\[       OK \]' "$log")
        echo "unfinished: $n tests passed before the end"
      else
        echo "${p:-0} passed, ${f:-0} failed, ${s:-0} skipped"
      fi;;
    *)
      n=$(grep -a '^llm-run: generation' "$log" | sed -E 's|.*/ *([0-9]+) tokens.*|\1|')
      s=$(grep -a '^llm-run: stopped at' "$log" | sed -E 's/^llm-run: stopped at ([^;]*);.*/\1/')
      if [ -n "$n" ]; then echo "$n tokens generated ($s)"
      else echo "no generation line: $(grep -a -m1 -iE 'error' "$log" | cut -c1-120 | tr '|' '/')"; fi;;
  esac
}

# One line per report: its first line plus the line naming the code (memcheck/initcheck "at kernel+0x.. in
# file.cu:line", racecheck's second access), prefixed with the gtest test that was running, addresses masked.
reports() {
  awk '
    function flush() { if (hdr != "") { print (test != "" ? "[" test "] " : "") hdr (loc != "" ? "  @ " loc : "") }; hdr = ""; loc = "" }
    /^\[ RUN      \]/ { flush(); test = $4; next }
    /^\[----------\] Global test environment tear-down/ { flush(); test = "after the tests"; next }
    hdr != "" && loc == "" && /^========= +(at|and|Uninitialized access) / { loc = $0; flush(); next }
    /^========= +(Invalid|Error|Warning|Uninitialized|Barrier|Program hit|Leaked|Race|Malloc|Misaligned|Out[ -]of|Hardware|Unspecified|Potential|Host API|Cuda|CUDA)/ {
      flush(); hdr = $0; n = 4; next }
    hdr != "" { if (--n <= 0) flush() }
    END { flush() }' "$1" |
    sed -E 's/=========//g; s/0x[0-9a-fA-F]+/0x_/g; s/by thread \([0-9,]+\) in block \([0-9,]+\)//; s/\[[0-9]+ hazards?\]/[N hazards]/; s/[[:space:]]+/ /g; s/^ //'
}
findings() { reports "$1" | sort | uniq -c | sort -rn | head -"${2:-25}"; }

# run_step ORDER TOOL TARGET DEADLINE ROWFILE
run_step() {
  local order=$1 tool=$2 target=$3 deadline=$4 rows=$5
  local name=${target%%=*} tag=$3 now left t t0 t1 rc wall counts errs warns outcome result tmax
  [ "$name" != "$target" ] && tag="$name (${target#*=})"
  local log="$logs/$order.$tool.$name.log"
  case $tool:$name in none:*) tmax=60;; *:gen-*) tmax=120;; *) tmax=240;; esac
  now=$(date +%s)
  left=$((deadline - now))
  if [ "$left" -lt "$min_step" ]; then
    printf '%s|%s|%s|-|-|-|-|skipped (time budget)|-\n' "$order" "$tool" "$tag" >>"$rows"
    return 0
  fi
  t=$((tmax < left ? tmax : left))
  local cmd opts
  target_cmd "$target" || return 0
  t0=$(date +%s.%N)
  if [ "$tool" = none ]; then
    timeout -k 10 "$t" "${cmd[@]}" >"$log" 2>&1 </dev/null
  else
    tool_opts "$tool"
    timeout -k 10 "$t" "$cs" "${opts[@]}" "${cmd[@]}" >"$log" 2>&1 </dev/null
  fi
  rc=$?
  t1=$(date +%s.%N)
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
  if [ "$tool" = none ]; then counts="- -"; else counts=$(summary_counts "$log" "${tool%-*}"); fi
  errs=${counts% *}
  warns=${counts#* }
  if [ "${tool%-*}" = memcheck ]; then
    local leak
    leak=$(grep -a 'LEAK SUMMARY:' "$log" | tail -1 | sed -E 's/.*LEAK SUMMARY: //')
    [ -n "$leak" ] && warns="leaks: $leak"
  fi
  outcome=$(target_outcome "$log" "$name")
  # Racecheck reports that all lie inside cuBLAS's own kernels: listed, not failed.
  local n_rep n_lib
  n_rep=$(grep -acE '^========= +(Error|Warning): Race' "$log")
  n_lib=$(grep -a -A1 -E '^========= +(Error|Warning): Race' "$log" | grep -aE '^========= +(Error|Warning): Race' |
          grep -acE "$lib_kernels")
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then result="TIMEOUT after ${t} s"
  elif [ "$errs" = "?" ]; then result="FAIL (no sanitizer summary)"
  elif [ "$tool" = racecheck ] && [ "$errs" -gt 0 ] && [ "$n_rep" -gt 0 ] && [ "$n_rep" = "$n_lib" ] && [ "$rc" = 0 ]; then
    result="ok: $n_lib hazard reports, all inside cuBLAS kernels"
  elif [ "$errs" != "-" ] && [ "$errs" -gt 0 ]; then result="FAIL ($errs errors)"
  elif [ "$rc" != 0 ]; then result="FAIL (exit $rc)"
  else result=ok; fi
  printf '%s|%s|%s|%s|%s|%s|%s|%s|%s\n' "$order" "$tool" "$tag" "$errs" "$warns" "$wall" "$rc" "$result" \
    "$outcome" >>"$rows"
  echo "gpu-sanitize: $tool $tag: $result, errors $errs, ${wall} s ($outcome)"
}

show_cmd() {  # the command as one line, paths relative to the repository, arguments with spaces quoted
  local a line=
  for a in "$@"; do
    a=${a#"$root/"}
    case $a in *" "*) a="\"$a\"";; esac
    line+="${line:+ }$a"
  done
  printf '%s' "$line"
}

rank() {  # position of a tool or target name in the table's order
  case $1 in
    none) echo 0;; memcheck) echo 1;; memcheck-noleak) echo 2;; racecheck) echo 3;; initcheck) echo 4;; synccheck) echo 5;;
    gen-stories) echo 1;; gen-matvec) echo 2;; gen-synth) echo 3;; kernels*) echo 4;; session*) echo 5;; *) echo 9;;
  esac
}

lane() {  # lane NUMBER STEP...: runs the steps in turn inside this lane's time budget
  local n=$1; shift
  local deadline=$(( $(date +%s) + budget )) rows="$logs/rows.$n" step tool target i=0
  : >"$rows"
  for step in "$@"; do
    i=$((i + 1))
    tool=${step%%:*}; target=${step#*:}
    run_step "$(rank "$tool")$(rank "${target%%=*}")-$n$i" "$tool" "$target" "$deadline" "$rows"
  done
}

# ---------------------------------------------------------------------------------------------------------------------
start=$(date +%s)
device=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
csver=$("$cs" --version 2>&1 | grep -iE 'version' | head -1)
commit=$(cat "$bin/COMMIT" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
IFS=';' read -r -a lane_list <<<"$(printf '%s' "$lanes_spec" | tr '\n' ' ')"
echo "gpu-sanitize: ${device:-no nvidia-smi}; $csver; binaries of $commit; ${#lane_list[@]} lanes, ${budget} s each"

# The unsanitized generation first: proves the binaries run here and warms the NVRTC disk cache.
: >"$logs/rows.0"
run_step 00-00 none gen-stories $((start + 60)) "$logs/rows.0"
ln=0
for spec in "${lane_list[@]}"; do
  ln=$((ln + 1))
  read -r -a steps <<<"$spec"
  [ ${#steps[@]} -gt 0 ] && lane "$ln" "${steps[@]}" &
done
wait
total=$(( $(date +%s) - start ))

# ---------------------------------------------------------------------------------------------------------------------
md=$out/sanitize.md
status=0
{
  echo "# compute-sanitizer over llm-run ($(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "- device: ${device:-unknown}"
  echo "- tool: ${csver:-unknown} ($cs)"
  echo "- binaries: commit $commit, Release sm_90, device code with -lineinfo"
  echo "- ${#lane_list[@]} lanes side by side, ${budget} s each; total wall ${total} s"
  echo
  echo "| tool | target | errors | warnings / leaks | wall s | exit | result | target outcome |"
  echo "|---|---|---:|---|---:|---:|---|---|"
  cat "$logs"/rows.* | sort -t'|' -k1,1 | while IFS='|' read -r _ tool target errs warns wall rc result outcome; do
    echo "| $tool | \`$target\` | $errs | $warns | $wall | $rc | $result | $outcome |"
  done
  echo
  echo "Targets (FILTER replaces the gtest filter where a step names one):"
  echo
  for target in gen-stories gen-matvec gen-synth kernels session; do
    target_cmd "$target" && echo "- \`$target\`: \`$(show_cmd "${cmd[@]}")\`"
  done
  echo
  echo "Sanitizer options: memcheck \`--leak-check full --print-limit 1000\` (memcheck-noleak: without the leak check);"
  echo "initcheck \`--print-limit 20000 --show-backtrace no\`; racecheck and synccheck \`--print-limit 1000\`."
} >"$md"
# Findings, per log that reported any.
for f in "$logs"/*.log; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .log)
  if grep -aqE '^========= +(Invalid|Error|Warning|Uninitialized|Barrier|Program hit|Leaked|Race|Malloc|Host API)' "$f"; then
    { echo; echo "## Findings: ${name#*.} (distinct reports, most frequent first)"; echo; echo '```'; findings "$f" 25
      echo '```'; } >>"$md"
  fi
done
if grep -qE '\| (FAIL|TIMEOUT)' "$md"; then status=1; fi
if grep -q 'skipped (time budget)' "$md"; then echo >>"$md"; echo "Some steps were skipped: the time budget ran out (SAN_BUDGET)." >>"$md"; fi
tar -czf "$out/sanitize-logs.tar.gz" -C "$logs" . 2>/dev/null
cat "$md"
exit $status
