#!/usr/bin/env bash
# scripts/load.sh — short load runs of `tools/call api_discover` against `apigate dev` on
# 127.0.0.1 (release build), stateless and stateful Streamable HTTP, at concurrency 1 and 16,
# with wrk (Debian package) and scripts/load-discover.lua. Prints latency percentiles,
# throughput and the server's RSS (from /proc) idle and after the load; BENCHMARKS.md holds
# the numbers of a run. Every run is bounded (DURATION each) and only targets 127.0.0.1.
#
# Environment:
#   APIGATE_BIN  binary to measure (default: `cargo build --release --bin apigate`)
#   LOAD_SPEC    OpenAPI document (default ../shared/specs/github-rest-3.0.json)
#   DURATION     length of each measured run (default 15s; keep it 10–20 s)
#   CONCURRENCY  connection counts (default "1 16")
#   MODES        (default "stateless stateful")
#
# The per-key rate limit (--key-rate, 50/s by default) is switched off with --key-rate 0:
# with it on, the load would measure the limiter's RATE_LIMITED answers, not discovery.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SPEC=${LOAD_SPEC:-$ROOT/../shared/specs/github-rest-3.0.json}
DURATION=${DURATION:-15s}
CONCURRENCY=${CONCURRENCY:-1 16}
MODES=${MODES:-stateless stateful}
KEY="load-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
OUT=$(mktemp -d "${TMPDIR:-/tmp}/apigate-load.XXXXXX")

die() {
  printf 'load.sh: %s\n' "$*" >&2
  exit 1
}
[[ -f $SPEC ]] || die "no spec at $SPEC (set LOAD_SPEC)"

if ! command -v wrk >/dev/null; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
  else
    die "wrk is needed (apt-get install wrk)"
  fi
fi
command -v curl >/dev/null || die "curl is needed"

BIN=${APIGATE_BIN:-}
if [[ -z $BIN ]]; then
  (cd "$ROOT" && cargo build --quiet --release --bin apigate)
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/apigate"
fi
[[ -x $BIN ]] || die "no apigate binary at $BIN"

SERVER=
cleanup() {
  if [[ -n $SERVER ]]; then
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
  fi
}
trap cleanup EXIT

rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

HDR=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
  -H 'MCP-Protocol-Version: 2025-11-25')

echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2/1048576 }' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary:  $BIN"
echo "spec:    $SPEC"
echo
printf '| mode | conc. | req/s | p50 ms | p90 ms | p99 ms | max ms | requests | errors |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'

RSS_LINES=()
for mode in $MODES; do
  flags=()
  [[ $mode == stateless ]] && flags=(--stateless)
  started=$(date +%s.%N)
  : >"$OUT/apigate-$mode.log"
  RUST_LOG=warn "$BIN" dev --spec "$SPEC" --api-key "$KEY" --listen 127.0.0.1:0 --key-rate 0 "${flags[@]}" \
    >"$OUT/apigate-$mode.log" 2>&1 &
  SERVER=$!
  port=
  for _ in $(seq 1 600); do
    if [[ $(cat "$OUT/apigate-$mode.log") =~ at\ http://127\.0\.0\.1:([0-9]+)/mcp ]]; then
      port=${BASH_REMATCH[1]}
      curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    fi
    kill -0 "$SERVER" 2>/dev/null || die "apigate exited: $(cat "$OUT/apigate-$mode.log")"
    sleep 0.1
  done
  [[ -n $port ]] || die "apigate did not start"
  ready=$(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  url="http://127.0.0.1:$port/mcp"
  sleep 1
  idle=$(rss_kib "$SERVER")

  session=
  if [[ $mode == stateful ]]; then
    session=$(curl -s -D - -o /dev/null "${HDR[@]}" -H "x-api-key: $KEY" "$url" \
      -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"apigate-load","version":"1"}}}' |
      awk 'tolower($1) == "mcp-session-id:" { print $2 }' | tr -d '\r')
    [[ -n $session ]] || die "no Mcp-Session-Id from initialize"
    curl -sf -o /dev/null "${HDR[@]}" -H "x-api-key: $KEY" -H "Mcp-Session-Id: $session" "$url" \
      -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  fi

  # Warm-up (not reported): caches, allocator, first-touch pages.
  APIGATE_KEY=$KEY MCP_SESSION_ID=$session wrk -t1 -c4 -d3s -s "$ROOT/scripts/load-discover.lua" "$url" >/dev/null

  for c in $CONCURRENCY; do
    threads=1
    ((c > 1)) && threads=2
    log="$OUT/wrk-$mode-c$c.txt"
    APIGATE_KEY=$KEY MCP_SESSION_ID=$session wrk -t"$threads" -c"$c" -d"$DURATION" --latency \
      -s "$ROOT/scripts/load-discover.lua" "$url" >"$log"
    rps=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$log")
    total=$(awk '/requests in/ { print $1 }' "$log")
    read -r p50 p90 p99 max < <(awk -F'[ =]' '/^latency_us:/ { printf "%.2f %.2f %.2f %.1f\n", $3/1000, $5/1000, $7/1000, $9/1000 }' "$log")
    errors=$(awk '/^checked:/ { split($0, a, /[ =]/); print a[3] + a[5] + a[7] + a[9] }' "$log")
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$mode" "$c" "$rps" "$p50" "$p90" "$p99" "$max" "$total" "$errors"
  done
  after=$(rss_kib "$SERVER")
  peak=$(hwm_kib "$SERVER")
  RSS_LINES+=("| $mode | $ready s | $(mib "$idle") MiB | $(mib "$after") MiB | $(mib "$peak") MiB |")
  kill "$SERVER"
  wait "$SERVER" 2>/dev/null || true
  SERVER=
done

echo
printf '| mode | ready after | RSS idle | RSS after load | peak RSS (VmHWM) |\n'
printf '|---|---|---|---|---|\n'
printf '%s\n' "${RSS_LINES[@]}"
echo
echo "raw wrk output: $OUT"
