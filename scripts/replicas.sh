#!/usr/bin/env bash
# scripts/replicas.sh — what replicas behind a load balancer buy: the throughput of distinct
# api_discover calls (scripts/load-mcp.lua's LOAD_QUERIES_FILE, 400 queries from tests/data,
# each tagged so no cache answers) through HAProxy in front of 1, then 3 `apigate serve
# --stateless` replicas on one Postgres, in the same run, and the ratio. Rate limits are off
# (--key-rate 0 --session-rate 0); every call still checks its key and session and writes an
# audit row (the upstream, examples/petstore-upstream.rs, is what `serve` is pointed at; a
# discover never calls it). CPU per call is the replicas' CPU time (utime + stime) over the requests wrk
# counted. On a machine of 2 cores three replicas share the cores one replica already used, so
# expect a ratio near 1 there. Only targets 127.0.0.1.
#
#   APIGATE_BIN=/path/apigate UPSTREAM_BIN=/path/petstore-upstream scripts/replicas.sh
#
# Builds nothing. Environment (and those of scripts/load-common.sh):
#   APIGATE_BIN   the binary (default: the release build, `cargo build --release`)
#   UPSTREAM_BIN  examples/petstore-upstream.rs built (default: the release build,
#                 `cargo build --release --example petstore-upstream`)
#   DATABASE_URL  a database to use (default: a throwaway cluster made with initdb, removed
#                 at the end; needs the Postgres server package)
#   SPEC          github (the GitHub REST spec the queries are written for, default) or
#                 petstore (openapi/petstore.json: most queries then find nothing)
#   CONNS         wrk connections (default 16), DURATION of each measured run (default 10s)
#   MODE          replicas (default: 1 vs 3 replicas, rate limits off) or limits (what the
#                 limits shared in Postgres cost a call: 1 replica with --key-rate 0
#                 --session-rate 0, where no call checks a limit, then with limits so high
#                 that every call is checked in Postgres and none refused; the table adds
#                 Postgres's CPU per call, the server's and its backends')
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
APIGATE_BIN=${APIGATE_BIN:-$TARGET/release/apigate}
UPSTREAM_BIN=${UPSTREAM_BIN:-$TARGET/release/examples/petstore-upstream}
NO_UPSTREAM=1
[[ -x $APIGATE_BIN ]] || {
  echo "replicas.sh: no apigate binary at $APIGATE_BIN (cargo build --release, or set APIGATE_BIN)" >&2
  exit 1
}
source "$ROOT/scripts/load-common.sh"

CONNS=${CONNS:-16}
DURATION=${DURATION:-10s}
SPEC=${SPEC:-github}
case $SPEC in
petstore) SPEC_FILE=$PETSTORE_SPEC ;;
github) SPEC_FILE=$GITHUB_SPEC ;;
*) die "SPEC must be petstore or github, not $SPEC" ;;
esac
[[ -x $UPSTREAM_BIN ]] ||
  die "no petstore-upstream at $UPSTREAM_BIN (cargo build --release --example petstore-upstream, or set UPSTREAM_BIN)"
command -v jq >/dev/null || die "jq is needed"
HAPROXY=${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}
if [[ ! -x $HAPROXY ]]; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null
    HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
  fi
  [[ -x $HAPROXY ]] || die "HAProxy is needed (apt-get install haproxy)"
fi

QUERIES="$OUT/queries.txt"
cat "$ROOT"/tests/data/queries/*.jsonl "$ROOT"/tests/data/index-extra-queries.jsonl \
  "$ROOT"/tests/data/fresh-queries.jsonl | jq -r '.query' | grep -v '["\\]' | awk '!seen[$0]++' |
  head -400 >"$QUERIES"
[[ $(wc -l <"$QUERIES") -ge 400 ]] || die "fewer than 400 distinct queries in tests/data"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

REPLICA_PIDS=()
HAPROXY_PID=
PG_STOP=()
replicas_cleanup() {
  [[ -n $HAPROXY_PID ]] && kill "$HAPROXY_PID" 2>/dev/null || true
  for pid in "${REPLICA_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${REPLICA_PIDS[@]}" $HAPROXY_PID; do wait "$pid" 2>/dev/null || true; done
  if [[ -n $UPSTREAM_PID ]]; then
    kill "$UPSTREAM_PID" 2>/dev/null || true
    wait "$UPSTREAM_PID" 2>/dev/null || true
  fi
  if [[ ${#PG_STOP[@]} -gt 0 ]]; then "${PG_STOP[@]}" >/dev/null 2>&1 || true; fi
}
trap replicas_cleanup EXIT

# The database: DATABASE_URL, else a throwaway cluster as the tests make one (tests/it/pg_cluster.rs).
if [[ -z ${DATABASE_URL:-} ]]; then
  PG_BIN=$(dirname "$(command -v initdb 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -1)")
  [[ -x $PG_BIN/initdb ]] || die "no initdb: install the Postgres server package (apt-get install postgresql) or set DATABASE_URL"
  PG="$OUT/pg"
  mkdir -p "$PG"
  as_pg=()
  if [[ $(id -u) == 0 ]]; then
    id postgres >/dev/null 2>&1 || die "running as root: initdb needs a postgres user"
    chown postgres "$PG"
    chmod o+x "$OUT"
    as_pg=(runuser -u postgres --)
  fi
  "${as_pg[@]}" "$PG_BIN/initdb" -D "$PG/data" -U postgres -A trust -E UTF8 --no-locale --no-sync \
    >"$OUT/initdb.log" 2>&1 || die "initdb failed (log: $OUT/initdb.log)"
  pg_port=$(free_port)
  "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$PG/data" -l "$PG/server.log" -w -t 60 \
    -o "-p $pg_port -k $PG -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off" \
    start >/dev/null || die "pg_ctl start failed (log: $PG/server.log)"
  PG_STOP=("${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$PG/data" -m immediate stop)
  DATABASE_URL=postgres://postgres@127.0.0.1:$pg_port/postgres
fi
export DATABASE_URL

"$BIN" migrate >"$OUT/migrate.log" 2>&1 || die "apigate migrate failed: $(cat "$OUT/migrate.log")"
KEY=$("$BIN" keys create --name replicas-load --features 'apigate.*' --json | jq -r .key)
TOKEN=$("$BIN" sessions create --user replicas-load --features 'apigate.*' --ttl-minutes 120 --json | jq -r .token)

"$UPSTREAM_BIN" --listen 127.0.0.1:0 >"$OUT/upstream.log" 2>&1 &
UPSTREAM_PID=$!
UPSTREAM_URL=
for _ in $(seq 1 100); do
  [[ $(cat "$OUT/upstream.log") =~ listening\ on\ (http://127\.0\.0\.1:[0-9]+) ]] && UPSTREAM_URL=${BASH_REMATCH[1]} && break
  kill -0 "$UPSTREAM_PID" 2>/dev/null || die "petstore-upstream exited: $(cat "$OUT/upstream.log")"
  sleep 0.1
done
[[ -n $UPSTREAM_URL ]] || die "petstore-upstream did not start"

# start_replica N: one `apigate serve --stateless` on a free port; appends to REPLICA_PORTS.
# LIMITS=off|shared picks the rate limit flags of the replicas started next.
REPLICA_PORTS=()
LIMITS=off
limit_flags() {
  case $LIMITS in
  off) echo --key-rate 0 --session-rate 0 ;;
  shared) echo --key-rate 1000000 --key-burst 1000000 --session-rate 1000000 --session-burst 1000000 ;;
  esac
}
start_replica() {
  local log="$OUT/replica-$1.log" port=
  # shellcheck disable=SC2046 # the flags are words
  APIGATE_RANKER=${APIGATE_RANKER:-lexical} RUST_LOG=${APIGATE_LOG:-warn} "$BIN" serve --spec "$SPEC_FILE" \
    --upstream "$UPSTREAM_URL" --listen 127.0.0.1:0 --stateless $(limit_flags) >"$log" 2>&1 &
  REPLICA_PIDS+=($!)
  for _ in $(seq 1 600); do
    if [[ $(cat "$log") =~ at\ http://127\.0\.0\.1:([0-9]+)/mcp ]]; then
      port=${BASH_REMATCH[1]}
      curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    fi
    kill -0 "${REPLICA_PIDS[-1]}" 2>/dev/null || die "replica $1 exited: $(cat "$log")"
    sleep 0.1
  done
  [[ -n $port ]] || die "replica $1 did not start (log: $log)"
  REPLICA_PORTS+=("$port")
}

# start_balancer: HAProxy in front of every replica started so far (the test's configuration,
# tests/it/replicas.rs); sets LB_URL. A running balancer is stopped first.
start_balancer() {
  if [[ -n $HAPROXY_PID ]]; then
    kill "$HAPROXY_PID" 2>/dev/null || true
    wait "$HAPROXY_PID" 2>/dev/null || true
  fi
  local port cfg="$OUT/haproxy-${#REPLICA_PORTS[@]}.cfg" i=0
  port=$(free_port)
  {
    printf 'global\n    maxconn 4000\n'
    printf 'defaults\n    mode http\n    timeout connect 2s\n    timeout client 60s\n    timeout server 60s\n'
    printf '    timeout check 2s\n    retries 3\n    option redispatch\n    retry-on conn-failure empty-response\n'
    printf '    default-server inter 1s fall 2 rise 2\n'
    printf 'frontend mcp\n    bind 127.0.0.1:%s\n    default_backend replicas\n' "$port"
    printf 'backend replicas\n    balance roundrobin\n    option httpchk\n'
    printf '    http-check send meth GET uri /ready ver HTTP/1.1 hdr Host 127.0.0.1\n    http-check expect status 200\n'
    for p in "${REPLICA_PORTS[@]}"; do
      i=$((i + 1))
      printf '    server r%s 127.0.0.1:%s check\n' "$i" "$p"
    done
  } >"$cfg"
  "$HAPROXY" -db -f "$cfg" >"$OUT/haproxy.log" 2>&1 &
  HAPROXY_PID=$!
  LB_URL="http://127.0.0.1:$port/mcp"
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    kill -0 "$HAPROXY_PID" 2>/dev/null || die "haproxy exited: $(cat "$OUT/haproxy.log")"
    sleep 0.1
  done
  sleep 3 # every server seen UP by two checks (rise 2, inter 1s)
}

replicas_cpu() {
  local sum=0
  for pid in "${REPLICA_PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null && sum=$((sum + $(cpu_ticks "$pid")))
  done
  echo "$sum"
}

# The CPU ticks of the throwaway cluster: its postmaster and every process under it (the
# backends serving the replicas' connections); 0 with DATABASE_URL given.
db_cpu() {
  local sum=0 pid
  [[ -n ${PG:-} && -f $PG/data/postmaster.pid ]] || {
    echo 0
    return
  }
  local main
  main=$(head -1 "$PG/data/postmaster.pid")
  for pid in "$main" $(pgrep -P "$main"); do
    sum=$((sum + $(cpu_ticks "$pid" 2>/dev/null || echo 0)))
  done
  echo "$sum"
}

# measure N: a 1 s warm-up and a measured run through the balancer; prints
# "req/s p50_ms p99_ms cpu_ms_per_call db_cpu_ms_per_call checked".
measure() {
  local log="$OUT/wrk-$1.txt" before after db_before db_after
  LOAD_TOOL=discover LOAD_QUERIES_FILE=$QUERIES APIGATE_KEY=$KEY APIGATE_SESSION_TOKEN=$TOKEN \
    wrk -t1 -c"$CONNS" -d1s -s "$ROOT/scripts/load-mcp.lua" "$LB_URL" >/dev/null
  sleep 1 # a new second: the measured run's tags differ from the warm-up's
  before=$(replicas_cpu)
  db_before=$(db_cpu)
  LOAD_TOOL=discover LOAD_QUERIES_FILE=$QUERIES APIGATE_KEY=$KEY APIGATE_SESSION_TOKEN=$TOKEN \
    wrk -t1 -c"$CONNS" -d"$DURATION" --timeout 10s -s "$ROOT/scripts/load-mcp.lua" "$LB_URL" >"$log"
  after=$(replicas_cpu)
  db_after=$(db_cpu)
  if ! grep -q 'non200=0 tool_errors=0 no_result=0 socket_errors=0' "$log"; then
    echo "warning: $log: $(grep checked: "$log")" >&2
  fi
  awk -v b="$before" -v a="$after" -v db="$db_before" -v da="$db_after" -v t="$TICK" '
    / requests in / { n = $1 } /^Requests\/sec:/ { r = $2 }
    /^latency_us:/ { split($2, p, "="); p50 = p[2]; split($4, q, "="); p99 = q[2] }
    /^checked:/ { c = $2 " " $3 " " $4 " " $5 }
    END { printf "%.0f %.2f %.2f %.3f %.3f %s", r, p50 / 1e3, p99 / 1e3, (a - b) / t * 1e3 / n,
          (da - db) / t * 1e3 / n, c }' "$log"
}

stop_replicas() {
  for pid in "${REPLICA_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${REPLICA_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  REPLICA_PIDS=()
  REPLICA_PORTS=()
}

machine
echo "haproxy: $("$HAPROXY" -v | head -1)"
echo "runs:    wrk -t1 -c$CONNS, $DURATION of distinct discovers (limit 10) on $SPEC through HAProxy (round robin) after a 1 s warm-up"
echo
if [[ ${MODE:-replicas} == limits ]]; then
  printf '| 1 replica | req/s | p50 ms | p99 ms | apigate CPU ms/call | Postgres CPU ms/call | checked |\n|---|---|---|---|---|---|---|\n'
  LIMITS=off start_replica 1
  start_balancer
  read -r rps0 p50o p99o cpu0 db0 checked <<<"$(measure off)"
  printf '| limits off | %s | %s | %s | %s | %s | %s |\n' "$rps0" "$p50o" "$p99o" "$cpu0" "$db0" "$checked"
  stop_replicas
  LIMITS=shared
  start_replica 1
  start_balancer
  read -r rps1 p50s p99s cpu1 db1 checked <<<"$(measure shared)"
  printf '| limits shared | %s | %s | %s | %s | %s | %s |\n' "$rps1" "$p50s" "$p99s" "$cpu1" "$db1" "$checked"
  echo
  awk -v a="$p50o" -v b="$p50s" -v c="$p99o" -v d="$p99s" -v e="$cpu0" -v f="$cpu1" -v g="$db0" -v h="$db1" \
    'BEGIN { printf "a shared limit check adds: p50 %+.2f ms, p99 %+.2f ms, apigate CPU %+.3f ms/call, Postgres CPU %+.3f ms/call\n", b - a, d - c, f - e, h - g }'
  echo "raw output: $OUT"
  exit 0
fi
printf '| replicas | req/s | p50 ms | p99 ms | replicas CPU ms/call | Postgres CPU ms/call | checked |\n|---|---|---|---|---|---|---|\n'
start_replica 1
start_balancer
read -r rps1 p50 p99 cpu db checked <<<"$(measure 1)"
printf '| 1 | %s | %s | %s | %s | %s | %s |\n' "$rps1" "$p50" "$p99" "$cpu" "$db" "$checked"
start_replica 2
start_replica 3
start_balancer
read -r rps3 p50 p99 cpu db checked <<<"$(measure 3)"
printf '| 3 | %s | %s | %s | %s | %s | %s |\n' "$rps3" "$p50" "$p99" "$cpu" "$db" "$checked"
echo
awk -v a="$rps1" -v b="$rps3" 'BEGIN { printf "3 replicas / 1 replica: %.2f (on %d cores)\n", b / a, '"$(nproc)"' }'
echo "raw output: $OUT"
