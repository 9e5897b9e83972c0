# scripts/load-common.sh — sourced by scripts/load.sh and scripts/soak.sh: builds (or takes)
# the binaries, starts `apigate dev` and the local upstream on 127.0.0.1 port 0, reads their
# RSS from /proc, and stops them on exit. Not meant to be run alone.
#
# Environment read here:
#   APIGATE_BIN   binary to measure (default: `cargo build --release --bin apigate`)
#   UPSTREAM_BIN  the upstream (default: `cargo build --release --example load_upstream`)

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GITHUB_SPEC=${LOAD_SPEC:-$ROOT/tests/data/specs/github-rest-3.0.json}
PETSTORE_SPEC=$ROOT/openapi/petstore.json
KEY="load-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
OUT=${OUT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/apigate-load.XXXXXX")}
mkdir -p "$OUT"

die() {
  printf '%s: %s\n' "$(basename "$0")" "$*" >&2
  exit 1
}
[[ -f $GITHUB_SPEC ]] || die "no spec at $GITHUB_SPEC (set LOAD_SPEC)"

if ! command -v wrk >/dev/null; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
  else
    die "wrk is needed (apt-get install wrk)"
  fi
fi
command -v curl >/dev/null || die "curl is needed"

# A script that starts no upstream (scripts/cpu.sh) sets NO_UPSTREAM=1 before sourcing this.
BIN=${APIGATE_BIN:-}
UPSTREAM=${UPSTREAM_BIN:-}
if [[ ${NO_UPSTREAM:-0} == 1 ]]; then
  if [[ -z $BIN ]]; then
    (cd "$ROOT" && cargo build --quiet --release --bin apigate)
    BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/apigate
  fi
elif [[ -z $BIN || -z $UPSTREAM ]]; then
  (cd "$ROOT" && cargo build --quiet --release --bin apigate --example load_upstream)
  BIN=${BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/apigate}
  UPSTREAM=${UPSTREAM:-${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/load_upstream}
fi
[[ -x $BIN ]] || die "no apigate binary at $BIN"
[[ ${NO_UPSTREAM:-0} == 1 || -x $UPSTREAM ]] || die "no load_upstream binary at $UPSTREAM"

SERVER=
UPSTREAM_PID=
stop_server() {
  if [[ -n $SERVER ]]; then
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
    SERVER=
  fi
}
cleanup() {
  stop_server
  if [[ -n $UPSTREAM_PID ]]; then
    kill "$UPSTREAM_PID" 2>/dev/null || true
    wait "$UPSTREAM_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT

# A process's CPU time so far, in clock ticks (utime + stime); TICK ticks make a second.
TICK=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

HDR=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
  -H 'MCP-Protocol-Version: 2025-11-25')

# start_upstream: runs load_upstream on a free port; sets UPSTREAM_URL.
start_upstream() {
  : >"$OUT/upstream.log"
  "$UPSTREAM" --listen 127.0.0.1:0 >"$OUT/upstream.log" 2>&1 &
  UPSTREAM_PID=$!
  UPSTREAM_URL=
  for _ in $(seq 1 100); do
    if [[ $(cat "$OUT/upstream.log") =~ listening\ on\ (http://127\.0\.0\.1:[0-9]+) ]]; then
      UPSTREAM_URL=${BASH_REMATCH[1]}
      break
    fi
    kill -0 "$UPSTREAM_PID" 2>/dev/null || die "load_upstream exited: $(cat "$OUT/upstream.log")"
    sleep 0.1
  done
  [[ -n $UPSTREAM_URL ]] || die "load_upstream did not start"
}

# start_server NAME SPEC [apigate dev flags...]: starts apigate (rate limit off, RUST_LOG=warn
# unless APIGATE_LOG says otherwise) on SPEC, or on the APIs of SPEC when it is an apigate.toml
# and waits for /health; sets SERVER (pid), URL (/mcp) and READY (seconds to healthy).
# The per-key rate limit (--key-rate, 50/s by default) is off: with it on, the load would
# measure the limiter's RATE_LIMITED answers.
start_server() {
  local name=$1 spec=$2
  shift 2
  local log="$OUT/apigate-$name.log" started port= source=(--spec "$spec")
  [[ $spec == *.toml ]] && source=(--config "$spec")
  started=$(date +%s.%N)
  : >"$log"
  # Lexical unless the caller says otherwise (--ranker hybrid): the background embedding
  # pass would share the CPU with the load being measured.
  APIGATE_RANKER=${APIGATE_RANKER:-lexical} RUST_LOG=${APIGATE_LOG:-warn} "$BIN" dev "${source[@]}" --api-key "$KEY" --listen 127.0.0.1:0 --key-rate 0 "$@" \
    >"$log" 2>&1 &
  SERVER=$!
  for _ in $(seq 1 600); do
    if [[ $(cat "$log") =~ at\ http://127\.0\.0\.1:([0-9]+)/mcp ]]; then
      port=${BASH_REMATCH[1]}
      curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    fi
    kill -0 "$SERVER" 2>/dev/null || die "apigate exited: $(cat "$log")"
    sleep 0.1
  done
  [[ -n $port ]] || die "apigate did not start"
  READY=$(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  URL="http://127.0.0.1:$port/mcp"
}

# open_session: initialize + notifications/initialized on $URL; prints the Mcp-Session-Id.
open_session() {
  local session
  session=$(curl -s -D - -o /dev/null "${HDR[@]}" -H "x-api-key: $KEY" "$URL" \
    -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"apigate-load","version":"1"}}}' |
    awk 'tolower($1) == "mcp-session-id:" { print $2 }' | tr -d '\r')
  [[ -n $session ]] || die "no Mcp-Session-Id from initialize"
  curl -sf -o /dev/null "${HDR[@]}" -H "x-api-key: $KEY" -H "Mcp-Session-Id: $session" "$URL" \
    -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  printf '%s\n' "$session"
}

machine() {
  echo "machine: $(nproc) cores ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/MemTotal/ { printf "%.0f GiB", $2/1048576 }' /proc/meminfo), shared; load average $(loadavg)"
  echo "binary:  $BIN"
  echo "wrk:     $(wrk -v 2>&1 | head -1)"
}

# start_ts_echo: installs the MCP TypeScript SDK $TS_SDK (with Node, from npm into the cache
# the conformance script uses) and starts scripts/ts-echo.mjs; sets ts_pid and ts_url (/mcp).
start_ts_echo() {
  source "$ROOT/scripts/npm-tools.sh"
  tools="${APIGATE_CACHE:-/var/tmp/apigate-cache}/mcp-sdk$TS_SDK-node$NODE_VERSION"
  if [[ ! -f $tools/.complete ]]; then
    need_npm "the MCP TypeScript SDK"
    rm -rf "$tools" && mkdir -p "$tools"
    (cd "$tools" && echo '{"private":true}' >package.json &&
      npm install --no-audit --no-fund --ignore-scripts --loglevel=error \
        "$NODE_PKG@$NODE_VERSION" "@modelcontextprotocol/sdk@$TS_SDK") >"$OUT/npm-install.log" 2>&1 ||
      die "npm install failed: $(cat "$OUT/npm-install.log")"
    touch "$tools/.complete"
  fi
  SDK_DIR="$tools/node_modules/@modelcontextprotocol/sdk" \
    "$tools/node_modules/$NODE_PKG/bin/node" "$ROOT/scripts/ts-echo.mjs" 0 >"$OUT/ts-echo.log" 2>&1 &
  ts_pid=$!
  ts_url=
  for _ in $(seq 1 100); do
    [[ $(cat "$OUT/ts-echo.log") =~ listening\ on\ (http://127\.0\.0\.1:[0-9]+/mcp) ]] &&
      ts_url=${BASH_REMATCH[1]} && break
    kill -0 "$ts_pid" 2>/dev/null || die "ts-echo exited: $(cat "$OUT/ts-echo.log")"
    sleep 0.1
  done
  [[ -n $ts_url ]] || die "ts-echo did not start"
}
