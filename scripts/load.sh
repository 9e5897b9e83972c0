#!/usr/bin/env bash
# scripts/load.sh — short load runs of the MCP endpoint of `apigate dev` on 127.0.0.1
# (release build) with wrk (Debian package) and scripts/load-mcp.lua: `tools/call
# api_discover` on the GitHub REST spec and `tools/call api_execute` (getPetById) on the
# petstore spec against a local upstream (examples/load_upstream.rs), stateless and stateful
# Streamable HTTP, at concurrency 1, 16 and 64. `TOOLS=list` adds the no-op baseline
# (tools/list). Prints a Markdown table and writes it as TSV to $OUT/results.tsv (the input
# of scripts/load-plot.sh); BENCHMARKS.md holds the numbers of a run. Every run is bounded
# (DURATION each, after a 3 s warm-up per server) and only targets 127.0.0.1.
#
# Environment (and those of scripts/load-common.sh):
#   TOOLS        (default "discover execute"; also "list")
#   MODES        (default "stateless stateful")
#   CONCURRENCY  connection counts (default "1 16 64")
#   DURATION     length of each measured run (default 15s; keep it 10–20 s)
#   OUT_DIR      where wrk's raw output and results.tsv go (default a new temp dir)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/load-common.sh"

TOOLS=${TOOLS:-discover execute}
MODES=${MODES:-stateless stateful}
CONCURRENCY=${CONCURRENCY:-1 16 64}
DURATION=${DURATION:-15s}

machine
echo
printf '| tool | mode | conc. | req/s | p50 ms | p90 ms | p99 ms | max ms | requests | errors | load avg (1/5/15 min) |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
printf 'tool\tmode\tconcurrency\trps\tp50_ms\tp90_ms\tp99_ms\tmax_ms\trequests\terrors\tload1\n' >"$OUT/results.tsv"

RSS_LINES=()
for tool in $TOOLS; do
  spec=$GITHUB_SPEC
  upstream=()
  if [[ $tool == execute ]]; then
    [[ -n $UPSTREAM_PID ]] || start_upstream
    spec=$PETSTORE_SPEC
    upstream=(--upstream "$UPSTREAM_URL")
  fi
  for mode in $MODES; do
    flags=()
    [[ $mode == stateless ]] && flags=(--stateless)
    start_server "$tool-$mode" "$spec" "${upstream[@]}" "${flags[@]}"
    sleep 1
    idle=$(rss_kib "$SERVER")
    session=
    [[ $mode == stateful ]] && session=$(open_session)

    # Warm-up (not reported): caches, allocator, first-touch pages, upstream connections.
    LOAD_TOOL=$tool APIGATE_KEY=$KEY MCP_SESSION_ID=$session \
      wrk -t1 -c4 -d3s -s "$ROOT/scripts/load-mcp.lua" "$URL" >/dev/null

    for c in $CONCURRENCY; do
      threads=1
      ((c > 1)) && threads=2
      log="$OUT/wrk-$tool-$mode-c$c.txt"
      load=$(loadavg)
      LOAD_TOOL=$tool APIGATE_KEY=$KEY MCP_SESSION_ID=$session \
        wrk -t"$threads" -c"$c" -d"$DURATION" --timeout 5s --latency \
        -s "$ROOT/scripts/load-mcp.lua" "$URL" >"$log"
      rps=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$log")
      total=$(awk '/requests in/ { print $1 }' "$log")
      read -r p50 p90 p99 max < <(awk -F'[ =]' '/^latency_us:/ { printf "%.2f %.2f %.2f %.1f\n", $3/1000, $5/1000, $7/1000, $9/1000 }' "$log")
      errors=$(awk '/^checked:/ { split($0, a, /[ =]/); print a[3] + a[5] + a[7] + a[9] }' "$log")
      printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
        "$tool" "$mode" "$c" "$rps" "$p50" "$p90" "$p99" "$max" "$total" "$errors" "$load"
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
        "$tool" "$mode" "$c" "$rps" "$p50" "$p90" "$p99" "$max" "$total" "$errors" "${load%% *}" \
        >>"$OUT/results.tsv"
    done
    after=$(rss_kib "$SERVER")
    peak=$(hwm_kib "$SERVER")
    RSS_LINES+=("| $tool | $mode | $READY s | $(mib "$idle") MiB | $(mib "$after") MiB | $(mib "$peak") MiB |")
    stop_server
  done
done

echo
printf '| tool | mode | ready after | RSS idle | RSS after load | peak RSS (VmHWM) |\n'
printf '|---|---|---|---|---|---|\n'
printf '%s\n' "${RSS_LINES[@]}"
echo
echo "raw wrk output and results.tsv: $OUT"
