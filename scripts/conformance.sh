#!/usr/bin/env bash
# scripts/conformance.sh — runs the official MCP conformance suite
# (@modelcontextprotocol/conformance) and the MCP Inspector CLI against `apigate dev`'s
# Streamable HTTP endpoint, stateful and then stateless, and checks that the server is still
# healthy afterwards.
#
# The suite's client cannot send custom headers, so it talks to scripts/header-proxy.mjs, which
# adds `x-api-key` and forwards everything else unchanged (Host and Origin included: the
# dns-rebinding-protection scenario still tests apigate's own check). apigate itself runs with
# its normal settings: key required, loopback hosts only.
#
# Exit status 0 only when, in both modes:
#   - every required scenario passes (server-initialize, ping, tools-list, dns-rebinding-protection,
#     and server-sse-multiple-streams in stateful mode), every other scenario passes or is listed
#     in scripts/conformance-expected-failures.txt, and no listed one passes (stale entry);
#   - scenarios of methods apigate does not serve fail with -32601, as listed, and raw probes of
#     those methods answer -32601 (scripts/mcp-probe.mjs);
#   - the Inspector CLI lists the three tools and calls api_discover;
#   - GET /health answers 200 and the server process is alive after all of it.
#
# Tools (Node 22 from the npm package node-linux-*, the suite, the Inspector) are installed with
# npm into ${APIGATE_CACHE:-/var/tmp/apigate-cache}, once per version set. Needs npm (any Node);
# on a machine without it, Debian's nodejs + npm are installed when running as root.
#
# Environment:
#   APIGATE_BIN       apigate binary to test (default: `cargo build --bin apigate`, debug)
#   APIGATE_CACHE     cache directory for the npm tools (default /var/tmp/apigate-cache)
#   CONFORMANCE_SPEC  OpenAPI document to serve (default tests/data/specs/petstore-3.0.json)
#   CONFORMANCE_MODES modes to run (default "stateful stateless")
#   CONFORMANCE_OUT   where logs and results go (default: a new temporary directory)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${APIGATE_CACHE:-/var/tmp/apigate-cache}
CONFORMANCE_VERSION=0.1.16
INSPECTOR_VERSION=2.12.0
MODES=${CONFORMANCE_MODES:-stateful stateless}
EXPECTED="$ROOT/scripts/conformance-expected-failures.txt"
KEY="conformance-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
OUT=${CONFORMANCE_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/apigate-conformance.XXXXXX")}
mkdir -p "$OUT"

log() { printf '\n== %s\n' "$*"; }
die() {
  printf 'conformance.sh: %s\n' "$*" >&2
  exit 1
}

# --- the spec -------------------------------------------------------------------------------
SPEC=${CONFORMANCE_SPEC:-$ROOT/tests/data/specs/petstore-3.0.json}
[[ -f $SPEC ]] || die "no OpenAPI document at $SPEC; set CONFORMANCE_SPEC"

# --- tools: Node 22, the suite, the Inspector ----------------------------------------------
source "$ROOT/scripts/npm-tools.sh"
TOOLS="$CACHE/mcp-tools-conformance$CONFORMANCE_VERSION-inspector$INSPECTOR_VERSION-node$NODE_VERSION"
if [[ ! -f $TOOLS/.complete ]]; then
  log "installing the MCP conformance suite $CONFORMANCE_VERSION, Inspector $INSPECTOR_VERSION and Node $NODE_VERSION into $TOOLS"
  need_npm "the MCP tools"
  rm -rf "$TOOLS"
  mkdir -p "$TOOLS"
  # The packages run no install scripts we need: the Node binary ships inside node-linux-*.
  (cd "$TOOLS" && echo '{"private":true}' >package.json &&
    npm install --no-audit --no-fund --ignore-scripts --loglevel=error \
      "$NODE_PKG@$NODE_VERSION" \
      "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" \
      "@modelcontextprotocol/inspector@$INSPECTOR_VERSION") >"$OUT/npm-install.log" 2>&1 ||
    {
      cat "$OUT/npm-install.log" >&2
      die "npm install failed"
    }
  touch "$TOOLS/.complete"
fi
NODE="$TOOLS/node_modules/$NODE_PKG/bin/node"
"$NODE" --version | grep -q '^v22\.' || die "$NODE is not Node 22"
CONFORMANCE="$TOOLS/node_modules/@modelcontextprotocol/conformance/dist/index.js"
INSPECTOR="$TOOLS/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
[[ -f $CONFORMANCE && -f $INSPECTOR ]] || die "the MCP tools in $TOOLS are incomplete; delete it and rerun"

# --- the binary -----------------------------------------------------------------------------
BIN=${APIGATE_BIN:-}
if [[ -z $BIN ]]; then
  log "building apigate (debug)"
  (cd "$ROOT" && cargo build --quiet --bin apigate)
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/apigate"
fi
[[ -x $BIN ]] || die "no apigate binary at $BIN"

# --- processes we start, stopped on exit ----------------------------------------------------
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

# Waits until FILE has a line matching REGEX; prints the first capture group.
wait_for_line() {
  local file=$1 regex=$2 pid=$3
  for _ in $(seq 1 300); do
    if [[ -f $file ]] && [[ $(cat "$file") =~ $regex ]]; then
      echo "${BASH_REMATCH[1]}"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || {
      cat "$file" >&2
      return 1
    }
    sleep 0.1
  done
  cat "$file" >&2
  return 1
}

http_status() { # URL -> HTTP status (via Node: curl may be missing)
  "$NODE" -e 'fetch(process.argv[1]).then(async r => { await r.text(); console.log(r.status) }, () => console.log(0))' "$1"
}

FAILED=()
RESULTS=()
run_mode() {
  local mode=$1 flags=() required="server-initialize,ping,tools-list,dns-rebinding-protection"
  if [[ $mode == stateless ]]; then
    flags=(--stateless)
  else
    required="$required,server-sse-multiple-streams"
  fi
  local dir="$OUT/$mode"
  mkdir -p "$dir"

  log "[$mode] starting apigate dev on 127.0.0.1 ($SPEC)"
  RUST_LOG=${RUST_LOG:-warn} "$BIN" dev --spec "$SPEC" --api-key "$KEY" --listen 127.0.0.1:0 "${flags[@]}" \
    >"$dir/apigate.log" 2>&1 &
  local server=$!
  PIDS+=("$server")
  local port
  port=$(wait_for_line "$dir/apigate.log" 'at http://127\.0\.0\.1:([0-9]+)/mcp' "$server") ||
    die "[$mode] apigate did not start (log: $dir/apigate.log)"
  local direct="http://127.0.0.1:$port/mcp"

  PROXY_HEADER_NAME=x-api-key PROXY_HEADER_VALUE="$KEY" \
    "$NODE" "$ROOT/scripts/header-proxy.mjs" 0 "$port" >"$dir/proxy.log" 2>&1 &
  local proxy=$!
  PIDS+=("$proxy")
  local pport
  pport=$(wait_for_line "$dir/proxy.log" 'listening ([0-9]+)' "$proxy") || die "[$mode] the header proxy did not start"
  local proxied="http://127.0.0.1:$pport/mcp"
  echo "apigate at $direct, suite through $proxied"

  # The suite's own baseline file (YAML) for this mode, from the expected-failures list.
  {
    echo "server:"
    grep -v '^\s*#' "$EXPECTED" | awk -v m="$mode" 'NF >= 2 && ($2 == "both" || $2 == m) { print "  - " $1 }'
  } >"$dir/expected-failures.yaml"

  log "[$mode] MCP conformance suite $CONFORMANCE_VERSION"
  local suite_rc=0
  (cd "$dir" && "$NODE" "$CONFORMANCE" server --url "$proxied" --expected-failures "$dir/expected-failures.yaml" \
    -o "$dir/results") >"$dir/suite.log" 2>&1 || suite_rc=$?
  sed -n '/=== SUMMARY ===/,$p' "$dir/suite.log"
  echo "(suite exit status with its baseline: $suite_rc; full output: $dir/suite.log)"

  log "[$mode] scenario verdicts"
  local check_rc=0
  "$NODE" "$ROOT/scripts/conformance-check.mjs" "$dir/results" "$EXPECTED" "$mode" "$required" \
    >"$dir/verdicts.txt" || check_rc=$?
  cat "$dir/verdicts.txt"
  [[ $suite_rc == 0 && $check_rc == 0 ]] || FAILED+=("$mode: conformance suite")

  log "[$mode] raw probes: unsupported methods answer -32601"
  "$NODE" "$ROOT/scripts/mcp-probe.mjs" "$direct" "$KEY" || FAILED+=("$mode: -32601 probes")

  log "[$mode] MCP Inspector CLI $INSPECTOR_VERSION: tools/list, tools/call api_discover"
  # HOME points into the run directory: the Inspector keeps a catalog and storage there.
  local inspect=(env HOME="$dir/inspector-home" "$NODE" "$INSPECTOR" --cli "$direct" --transport http
    --header "x-api-key: $KEY")
  if "${inspect[@]}" --method tools/list >"$dir/inspector-tools-list.json" 2>"$dir/inspector-tools-list.err" &&
    grep -q '"name": "api_discover"' "$dir/inspector-tools-list.json" &&
    grep -q '"name": "api_schema"' "$dir/inspector-tools-list.json" &&
    grep -q '"name": "api_execute"' "$dir/inspector-tools-list.json"; then
    echo "ok   tools/list: api_discover, api_schema, api_execute ($(tail -n1 "$dir/inspector-tools-list.err"))"
  else
    echo "FAIL tools/list (see $dir/inspector-tools-list.*)"
    FAILED+=("$mode: inspector tools/list")
  fi
  if "${inspect[@]}" --method tools/call --tool-name api_discover --tool-arg 'query=find a pet by its id' limit=3 \
    >"$dir/inspector-discover.json" 2>"$dir/inspector-discover.err" &&
    grep -q '"isError": false' "$dir/inspector-discover.json" &&
    grep -q '"operationId": "getPetById"' "$dir/inspector-discover.json"; then
    echo "ok   tools/call api_discover {query: \"find a pet by its id\"} -> getPetById"
  else
    echo "FAIL tools/call api_discover (see $dir/inspector-discover.*)"
    FAILED+=("$mode: inspector tools/call")
  fi

  log "[$mode] server still alive"
  local health
  health=$(http_status "http://127.0.0.1:$port/health")
  if [[ $health == 200 ]] && kill -0 "$server" 2>/dev/null; then
    echo "ok   GET /health -> 200, pid $server running"
  else
    echo "FAIL GET /health -> $health"
    FAILED+=("$mode: health after the suite")
  fi
  if grep -qiE 'panicked|thread .* panicked' "$dir/apigate.log"; then
    echo "FAIL apigate logged a panic (see $dir/apigate.log)"
    FAILED+=("$mode: panic in the server log")
  fi
  RESULTS+=("$(tail -n +1 "$dir/verdicts.txt" | grep '^\[')")

  kill "$proxy" "$server" 2>/dev/null || true
  wait "$proxy" "$server" 2>/dev/null || true
  PIDS=()
}

for mode in $MODES; do
  case $mode in
    stateful | stateless) run_mode "$mode" ;;
    *) die "unknown mode $mode (stateful or stateless)" ;;
  esac
done

log "summary (logs and results in $OUT)"
printf '%s\n' "${RESULTS[@]}"
if ((${#FAILED[@]} > 0)); then
  printf 'FAILED: %s\n' "${FAILED[@]}"
  exit 1
fi
echo "conformance: all required checks passed"
