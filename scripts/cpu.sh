#!/usr/bin/env bash
# scripts/cpu.sh — what one call costs in CPU, the measure later changes are held to. For each
# apigate binary (BINS), spec (Petstore, GitHub) and connection count (CONNS), wrk (one thread,
# the same request each time) runs DURATION against `GET /health` (the floor: the same HTTP
# stack, no MCP or tool work), `tools/list`, `tools/call api_discover` and a dry-run
# `api_execute`, on `apigate dev --stateless --key-rate 0`, lexical. CPU per call is the server
# process's CPU time (utime + stime from /proc/PID/stat) over the requests wrk counted in that
# run; "above floor" is a row's µs per call minus /health's. Then the reference: the official
# MCP TypeScript SDK's trivial `echo` tool (scripts/ts-echo.mjs) and apigate's discover on
# Petstore, one after the other, TS_RUNS times, median and spread. Only targets 127.0.0.1.
#
#   BINS="before=/path/apigate-old after=/path/apigate" scripts/cpu.sh
#
# Environment (and those of scripts/load-common.sh):
#   BINS       name=path pairs (default: "current=" the release build)
#   CONNS      wrk connection counts (default "1 16")
#   DURATION   length of each measured run (default 5s)
#   SPECS      which specs (default "petstore github"; empty: only the reference)
#   TS_SDK     the @modelcontextprotocol/sdk version of the reference (default 1.32.2; "none"
#              skips it)
#   TS_RUNS    how many times the reference pair runs (default 4)
set -euo pipefail
NO_UPSTREAM=1
# With BINS given, nothing is built: the first binary stands for the machine line.
if [[ -n ${BINS:-} && -z ${APIGATE_BIN:-} ]]; then
  first=${BINS%% *}
  APIGATE_BIN=${first#*=}
fi
source "$(dirname "${BASH_SOURCE[0]}")/load-common.sh"

CONNS=${CONNS:-1 16}
DURATION=${DURATION:-5s}
BINS=${BINS:-current=$BIN}
SPECS=${SPECS-petstore github}
TS_SDK=${TS_SDK:-1.32.2}
TS_RUNS=${TS_RUNS:-4}

# measure PID LOG [wrk args...]: runs wrk once to warm up and once measured; prints
# "req/s cpu_us_per_call" of the measured run.
measure() {
  local pid=$1 log=$2 before after
  shift 2
  wrk -t1 -d1s "$@" >/dev/null
  before=$(cpu_ticks "$pid")
  wrk -t1 -d"$DURATION" --timeout 5s "$@" >"$log"
  after=$(cpu_ticks "$pid")
  if grep -q '^checked:' "$log" && ! grep -q 'non200=0 tool_errors=0 no_result=0 socket_errors=0' "$log"; then
    echo "warning: $log: $(grep checked: "$log")" >&2
  fi
  awk -v b="$before" -v a="$after" -v t="$TICK" '
    / requests in / { n = $1 } /^Requests\/sec:/ { r = $2 }
    END { printf "%.0f %.1f", r, (a - b) / t * 1e6 / n }' "$log"
}

# mcp PID LOG TOOL CONNECTIONS: measure of one MCP request kind (scripts/load-mcp.lua).
mcp() {
  local pid=$1 log=$2 tool=$3 c=$4
  LOAD_TOOL=$tool APIGATE_KEY=$KEY measure "$pid" "$log" -c"$c" -s "$ROOT/scripts/load-mcp.lua" "$URL"
}

spec_setup() {
  case $1 in
  petstore)
    SPEC_FILE=$PETSTORE_SPEC
    export LOAD_QUERY="find a pet by its id" LOAD_OPERATION=getPetById
    export LOAD_ARGUMENTS='{"pathParams":{"petId":1}}'
    ;;
  github)
    SPEC_FILE=$GITHUB_SPEC
    export LOAD_QUERY="list open issues in a repository" LOAD_OPERATION=issues/list-for-repo
    export LOAD_ARGUMENTS='{"pathParams":{"owner":"octo","repo":"hello"},"query":{"state":"open"}}'
    ;;
  *) die "unknown spec $1 (petstore or github)" ;;
  esac
}

machine
echo "runs:    wrk -t1, $DURATION each after a 1 s warm-up; CPU µs per call = server CPU time / requests"
echo
echo "Each cell: req/s, CPU µs per call."
echo
printf '| binary | spec | conn. | /health | tools/list | discover | dry-run execute | discover above floor µs |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for pair in $BINS; do
  name=${pair%%=*}
  BIN=${pair#*=}
  [[ -x $BIN ]] || die "no binary at $BIN"
  for spec in $SPECS; do
    spec_setup "$spec"
    start_server "$name-$spec" "$SPEC_FILE" --stateless
    base=${URL%/mcp}
    for c in $CONNS; do
      read -r h_rps h_us <<<"$(measure "$SERVER" "$OUT/$name-$spec-$c-health.txt" -c"$c" "$base/health")"
      read -r l_rps l_us <<<"$(mcp "$SERVER" "$OUT/$name-$spec-$c-list.txt" list "$c")"
      read -r d_rps d_us <<<"$(mcp "$SERVER" "$OUT/$name-$spec-$c-discover.txt" discover "$c")"
      read -r x_rps x_us <<<"$(mcp "$SERVER" "$OUT/$name-$spec-$c-dryrun.txt" dryrun "$c")"
      above=$(awk -v a="$d_us" -v b="$h_us" 'BEGIN { printf "%.1f", a - b }')
      printf '| %s | %s | %s | %s, %s | %s, %s | %s, %s | %s, %s | %s |\n' "$name" "$spec" "$c" \
        "$h_rps" "$h_us" "$l_rps" "$l_us" "$d_rps" "$d_us" "$x_rps" "$x_us" "$above"
    done
    stop_server
  done
done

if [[ $TS_SDK != none ]]; then
  start_ts_echo
  last=${BINS##* }
  BIN=${last#*=}
  spec_setup petstore
  start_server "reference" "$SPEC_FILE" --stateless
  c=${CONNS##* }
  echo
  printf '| run | TS SDK echo req/s | echo µs | apigate (%s) discover req/s | discover µs | discover ÷ echo (CPU) |\n' "${last%%=*}"
  printf '|---|---|---|---|---|---|\n'
  ratios=()
  for run in $(seq 1 "$TS_RUNS"); do
    read -r e_rps e_us <<<"$(LOAD_TOOL=echo APIGATE_KEY=none measure "$ts_pid" "$OUT/ts-echo-$run.txt" \
      -c"$c" -s "$ROOT/scripts/load-mcp.lua" "$ts_url")"
    read -r d_rps d_us <<<"$(mcp "$SERVER" "$OUT/reference-discover-$run.txt" discover "$c")"
    ratio=$(awk -v a="$d_us" -v b="$e_us" 'BEGIN { printf "%.2f", a / b }')
    ratios+=("$ratio")
    printf '| %s | %s | %s | %s | %s | %s |\n' "$run" "$e_rps" "$e_us" "$d_rps" "$d_us" "$ratio"
  done
  kill "$ts_pid" 2>/dev/null || true
  wait "$ts_pid" 2>/dev/null || true
  stop_server
  printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END {
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "\ndiscover ÷ TS SDK echo, CPU per call at %s connections: median %.2f, spread %.2f to %.2f (%d runs)\n", c, m, v[1], v[NR], NR
  }' c="$c"
fi
echo
echo "raw wrk output: $OUT"
