#!/usr/bin/env bash
# scripts/discover-cpu.sh — what a *new* api_discover query costs, per ranker: each request is
# one of 400 distinct queries (the query sets in tests/data, each tagged so it is never a
# repeat, scripts/load-mcp.lua's LOAD_QUERIES_FILE), so no cache of recent queries answers.
# For each binary (BINS), ranker (RANKERS), spec (Petstore, GitHub) and connection count
# (CONNS), wrk (one thread) runs DURATION of discovers against `apigate dev --stateless
# --key-rate 0`; CPU per call is the server's CPU time (utime + stime) over the requests wrk
# counted. Also, per server: seconds from the start to the first discover answered with the
# ranker asked for, and RSS then and at the end (VmHWM, the peak). Only targets 127.0.0.1.
#
#   scripts/discover-cpu.sh                      (builds the release binary)
#   BINS="after=/path/apigate" RANKERS="lexical hybrid encoder" scripts/discover-cpu.sh
#
# Rankers: `lexical`; `hybrid`, the default (the model built into the binary); `encoder`,
# hybrid with the sentence encoder models/minilm-api (the default before issue 43), whose
# operation vectors come from the cache folder after its first start (--cache-dir
# $OUT/cache), so its start-up is measured warm.
set -euo pipefail
NO_UPSTREAM=1
if [[ -n ${BINS:-} && -z ${APIGATE_BIN:-} ]]; then
  first=${BINS%% *}
  APIGATE_BIN=${first#*=}
fi
source "$(dirname "${BASH_SOURCE[0]}")/load-common.sh"

CONNS=${CONNS:-1 16}
DURATION=${DURATION:-5s}
BINS=${BINS:-current=$BIN}
SPECS=${SPECS-petstore github}
RANKERS=${RANKERS:-lexical hybrid encoder}

command -v jq >/dev/null || die "jq is needed"
QUERIES="$OUT/queries.txt"
cat "$ROOT"/tests/data/queries/*.jsonl "$ROOT"/tests/data/index-extra-queries.jsonl \
  "$ROOT"/tests/data/fresh-queries.jsonl | jq -r '.query' | grep -v '["\\]' | awk '!seen[$0]++' |
  head -400 >"$QUERIES"
[[ $(wc -l <"$QUERIES") -ge 400 ]] || die "fewer than 400 distinct queries in tests/data"

# discover_once: one api_discover over curl; prints the answer.
discover_once() {
  curl -s "${HDR[@]}" -H "x-api-key: $KEY" "$URL" \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"api_discover","arguments":{"query":"list open issues","limit":3}}}'
}

# serve NAME SPEC RANKER: starts the server and waits until it answers with RANKER's ranking;
# sets FIRST (seconds to that first answer) and RSS0 (MiB then).
serve() {
  local name=$1 spec=$2 ranker=$3 want=hybrid args=() started
  case $ranker in
  lexical) want=lexical ;;
  encoder) args=(--embedding-model "$ROOT/models/minilm-api" --cache-dir "$OUT/cache") ;;
  hybrid) ;;
  *) die "unknown ranker $ranker (lexical, hybrid or encoder)" ;;
  esac
  local env_ranker=hybrid
  [[ $ranker == lexical ]] && env_ranker=lexical
  if [[ $ranker == encoder && ! -d $OUT/cache ]]; then
    # The encoder's first start embeds every operation; later starts read the cache.
    APIGATE_RANKER=$env_ranker start_server "$name-warm" "$spec" --stateless "${args[@]}"
    for _ in $(seq 1 1200); do
      curl -s "${URL%/mcp}/health" | grep -q '"ranker":"hybrid"' && break
      sleep 0.5
    done
    stop_server
  fi
  started=$(date +%s.%N)
  APIGATE_RANKER=$env_ranker start_server "$name" "$spec" --stateless "${args[@]}"
  for _ in $(seq 1 1200); do
    if curl -s "${URL%/mcp}/health" | grep -q "\"ranker\":\"$want\"" && discover_once | grep -q operationId; then
      break
    fi
    sleep 0.02
  done
  FIRST=$(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
  RSS0=$(mib "$(rss_kib "$SERVER")")
}

# measure LOG CONNECTIONS: a 1 s warm-up and a measured run; prints "req/s cpu_us_per_call p50_ms".
measure() {
  local log=$1 c=$2 before after
  LOAD_TOOL=discover LOAD_QUERIES_FILE=$QUERIES APIGATE_KEY=$KEY \
    wrk -t1 -c"$c" -d1s -s "$ROOT/scripts/load-mcp.lua" "$URL" >/dev/null
  sleep 1 # a new second: the measured run's tags differ from the warm-up's
  before=$(cpu_ticks "$SERVER")
  LOAD_TOOL=discover LOAD_QUERIES_FILE=$QUERIES APIGATE_KEY=$KEY \
    wrk -t1 -c"$c" -d"$DURATION" --timeout 10s -s "$ROOT/scripts/load-mcp.lua" "$URL" >"$log"
  after=$(cpu_ticks "$SERVER")
  if ! grep -q 'non200=0 tool_errors=0 no_result=0 socket_errors=0' "$log"; then
    echo "warning: $log: $(grep checked: "$log")" >&2
  fi
  awk -v b="$before" -v a="$after" -v t="$TICK" '
    / requests in / { n = $1 } /^Requests\/sec:/ { r = $2 } /^latency_us:/ { split($2, p, "="); m = p[2] }
    END { printf "%.0f %.3f %.2f", r, (a - b) / t * 1e3 / n, m / 1e3 }' "$log"
}

machine
echo "runs:    wrk -t1, $DURATION of distinct discovers (limit 10) each after a 1 s warm-up; CPU ms per call = server CPU time / requests"
echo
printf '| binary | ranker | spec | first answer s | RSS then MiB | conn. | req/s | CPU ms/call | p50 ms | peak RSS MiB |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for pair in $BINS; do
  name=${pair%%=*}
  BIN=${pair#*=}
  [[ -x $BIN ]] || die "no binary at $BIN"
  for ranker in $RANKERS; do
    for spec in $SPECS; do
      case $spec in
      petstore) file=$PETSTORE_SPEC ;;
      github) file=$GITHUB_SPEC ;;
      *) die "unknown spec $spec (petstore or github)" ;;
      esac
      serve "$name-$ranker-$spec" "$file" "$ranker"
      for c in $CONNS; do
        read -r rps ms p50 <<<"$(measure "$OUT/$name-$ranker-$spec-$c.txt" "$c")"
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$ranker" "$spec" \
          "$FIRST" "$RSS0" "$c" "$rps" "$ms" "$p50" "$(mib "$(hwm_kib "$SERVER")")"
      done
      stop_server
    done
  done
done
echo
echo "raw wrk output: $OUT"
