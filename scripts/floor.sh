#!/usr/bin/env bash
# scripts/floor.sh — the MCP layer against the binary's own HTTP floor, side by side, for one
# or more apigate binaries in one run: wrk (16 connections, DURATION each) on `GET /health`
# (no tool work: the floor), `tools/list` and `tools/call api_discover` on the Petstore spec,
# stateless and stateful Streamable HTTP. Prints a Markdown table with each row's share of
# the same binary's floor. Only targets 127.0.0.1.
#
#   BINS="before=/path/apigate-old after=/path/apigate" scripts/floor.sh
#
# Environment (and those of scripts/load-common.sh):
#   BINS         name=path pairs (default: "current=" the release build)
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

machine
echo
printf '| binary | mode | /health req/s | tools/list req/s (share) | discover req/s (share) | list p50 ms | discover p50 ms |\n'
printf '|---|---|---|---|---|---|---|\n'
for pair in $BINS; do
  name=${pair%%=*}
  BIN=${pair#*=}
  [[ -x $BIN ]] || die "no binary at $BIN"
  for mode in stateless stateful; do
    flags=()
    [[ $mode == stateless ]] && flags=(--stateless)
    start_server "$name-$mode" "$PETSTORE_SPEC" "${flags[@]}"
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
    read -r list_rps list_p50 <<<"${r[list]}"
    read -r disc_rps disc_p50 <<<"${r[discover]}"
    share() { awk -v a="$1" -v b="$health" 'BEGIN { printf "%.0f %%", 100 * a / b }'; }
    printf '| %s | %s | %s | %s (%s) | %s (%s) | %s | %s |\n' "$name" "$mode" "$health" \
      "$list_rps" "$(share "$list_rps")" "$disc_rps" "$(share "$disc_rps")" "$list_p50" "$disc_p50"
    stop_server
  done
done
echo
echo "raw wrk output: $OUT"
