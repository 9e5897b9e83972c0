#!/usr/bin/env bash
# scripts/floor.sh — the MCP layer against the binary's own HTTP floor, side by side, for one
# or more apigate binaries in one run: wrk (16 connections, DURATION each) on `GET /health`
# (no tool work: the floor), `tools/list` and `tools/call api_discover` on the Petstore spec,
# stateless and stateful Streamable HTTP. Prints a Markdown table with each row's share of
# the same binary's floor. A second table gives what `api_execute` adds to a call: p50 at one
# connection of `getPetById` through apigate against the same GET straight at the upstream
# (examples/load_upstream.rs), measured one after the other. Then the reference the issue measured against: the official MCP
# TypeScript SDK serving a trivial `echo` tool (scripts/ts-echo.mjs), stateless, on Node 22;
# the SDK is installed with npm into the cache folder the conformance script uses. Only
# targets 127.0.0.1.
#
#   BINS="before=/path/apigate-old after=/path/apigate" scripts/floor.sh
#
# Environment (and those of scripts/load-common.sh):
#   BINS         name=path pairs (default: "current=" the release build)
#   TS_SDK       the @modelcontextprotocol/sdk version of the reference row (default 1.32.2;
#                "none" skips it)
#   APIGATE_CACHE  where npm installs it (default /var/tmp/apigate-cache)
#   CONNECTIONS  wrk connections (default 16)
#   DURATION     length of each measured run (default 8s)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/load-common.sh"

CONNECTIONS=${CONNECTIONS:-16}
DURATION=${DURATION:-8s}
BINS=${BINS:-current=$BIN}
QUERY="find a pet by its id"

# run_wrk LOG [wrk args...]: prints "req/s p50_ms".
rate() {
  awk '/^Requests\/sec:/ { r = $2 } /latency_us: p50=/ { split($2, a, "="); p = a[2] / 1000 }
       END { printf "%.0f %.2f", r, p }' "$1"
}

# p50 in ms of a wrk log written with --latency (wrk's own distribution, for plain HTTP runs).
wrk_p50() {
  awk '$1 == "50%" { v = $2; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 }
       else if (v ~ /ms$/) { sub(/ms$/, "", v) } else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 }
       printf "%.3f", v }' "$1"
}

machine
echo
start_upstream
OVERHEAD=()
printf '| binary | mode | /health req/s | tools/list req/s (share) | discover req/s (share) | list p50 ms | discover p50 ms |\n'
printf '|---|---|---|---|---|---|---|\n'
for pair in $BINS; do
  name=${pair%%=*}
  BIN=${pair#*=}
  [[ -x $BIN ]] || die "no binary at $BIN"
  for mode in stateless stateful; do
    flags=()
    [[ $mode == stateless ]] && flags=(--stateless)
    start_server "$name-$mode" "$PETSTORE_SPEC" --upstream "$UPSTREAM_URL" "${flags[@]}"
    session=
    [[ $mode == stateful ]] && session=$(open_session)
    base=${URL%/mcp}
    wrk -t2 -c"$CONNECTIONS" -d2s "$base/health" >/dev/null
    wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency "$base/health" >"$OUT/$name-$mode-health.txt"
    health=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$OUT/$name-$mode-health.txt")
    declare -A r=()
    for tool in list discover; do
      LOAD_TOOL=$tool LOAD_QUERY=$QUERY APIGATE_KEY=$KEY MCP_SESSION_ID=$session \
        wrk -t2 -c4 -d2s -s "$ROOT/scripts/load-mcp.lua" "$URL" >/dev/null
      log="$OUT/$name-$mode-$tool.txt"
      LOAD_TOOL=$tool LOAD_QUERY=$QUERY APIGATE_KEY=$KEY MCP_SESSION_ID=$session \
        wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --timeout 5s --latency \
        -s "$ROOT/scripts/load-mcp.lua" "$URL" >"$log"
      grep -q 'non200=0 tool_errors=0 no_result=0 socket_errors=0' "$log" ||
        echo "warning: $name $mode $tool: $(grep checked: "$log")" >&2
      r[$tool]=$(rate "$log")
    done
    # api_execute at one connection, and the same request straight at the upstream.
    LOAD_TOOL=execute APIGATE_KEY=$KEY MCP_SESSION_ID=$session \
      wrk -t1 -c1 -d2s -s "$ROOT/scripts/load-mcp.lua" "$URL" >/dev/null
    log="$OUT/$name-$mode-execute.txt"
    LOAD_TOOL=execute APIGATE_KEY=$KEY MCP_SESSION_ID=$session \
      wrk -t1 -c1 -d"$DURATION" --timeout 5s --latency -s "$ROOT/scripts/load-mcp.lua" "$URL" >"$log"
    grep -q 'non200=0 tool_errors=0 no_result=0 socket_errors=0' "$log" ||
      echo "warning: $name $mode execute: $(grep checked: "$log")" >&2
    read -r exec_rps exec_p50 <<<"$(rate "$log")"
    direct="$OUT/$name-$mode-direct.txt"
    wrk -t1 -c1 -d"$DURATION" --latency "$UPSTREAM_URL/v2/pet/1" >"$direct"
    direct_p50=$(wrk_p50 "$direct")
    OVERHEAD+=("| $name | $mode | $exec_p50 | $direct_p50 | $(awk -v a="$exec_p50" -v b="$direct_p50" 'BEGIN { printf "%.2f", a - b }') |")
    read -r list_rps list_p50 <<<"${r[list]}"
    read -r disc_rps disc_p50 <<<"${r[discover]}"
    share() { awk -v a="$1" -v b="$health" 'BEGIN { printf "%.0f %%", 100 * a / b }'; }
    printf '| %s | %s | %s | %s (%s) | %s (%s) | %s | %s |\n' "$name" "$mode" "$health" \
      "$list_rps" "$(share "$list_rps")" "$disc_rps" "$(share "$disc_rps")" "$list_p50" "$disc_p50"
    stop_server
  done
done
echo
printf '| binary | mode | api_execute p50 ms (1 conn.) | direct to the upstream p50 ms | overhead ms |\n'
printf '|---|---|---|---|---|\n'
printf '%s\n' "${OVERHEAD[@]}"

TS_SDK=${TS_SDK:-1.32.2}
if [[ $TS_SDK != none ]]; then
  start_ts_echo
  LOAD_TOOL=echo APIGATE_KEY=none wrk -t2 -c4 -d2s -s "$ROOT/scripts/load-mcp.lua" "$ts_url" >/dev/null
  log="$OUT/ts-echo-wrk.txt"
  LOAD_TOOL=echo APIGATE_KEY=none wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --timeout 5s --latency \
    -s "$ROOT/scripts/load-mcp.lua" "$ts_url" >"$log"
  grep -q 'non200=0 tool_errors=0 no_result=0 socket_errors=0' "$log" ||
    echo "warning: ts-echo: $(grep checked: "$log")" >&2
  kill "$ts_pid" 2>/dev/null || true
  wait "$ts_pid" 2>/dev/null || true
  read -r echo_rps echo_p50 <<<"$(rate "$log")"
  echo
  echo "TypeScript SDK $TS_SDK (Node $NODE_VERSION), stateless, tools/call echo: $echo_rps req/s, p50 $echo_p50 ms"
fi
echo
echo "raw wrk output: $OUT"
