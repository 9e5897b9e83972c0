#!/usr/bin/env bash
# scripts/call-memory.sh — peak RSS (VmHWM) of `apigate dev` for one worst-case `select` and
# one worst-case `pages` call (issue 41, items 1 and 2), each on a fresh server so the peaks
# are apart. The upstream is a small Python server on 127.0.0.1: `GET /items` answers 200
# small objects; `GET /pages?page=N` answers a page of just under 16 MiB (the default
# --max-read-bytes) of `{"i":1}` items, the most a JSON parse multiplies, with a
# `Link: rel="next"` to page N+1.
#
#   select: `[@,@,@,@,@,@,@,@,@,@]` chained eight times with `|` on /items (175 bytes; it
#           would copy the body 10^8 times when converted to JSON)
#   pages:  `pages: 10` on /pages
#   gzip:   `GET /bomb`: 64 MiB of text gzip-encoded (64 KiB on the wire), cut at
#           --max-read-bytes as it is decoded
#
# Each server runs under `prlimit --as=$AS_LIMIT` (default 4 GB), so a server without the
# budgets dies alone (the row says so) instead of taking the machine down.
#
# Environment:
#   APIGATE_BIN  binary to measure (default: `cargo build --bin apigate`, a debug build: its
#                peaks are those of the debug allocator's pattern, a little above a release
#                build's)
#   AS_LIMIT     the address-space limit of each server, in bytes (default 4000000000)
#   EXTRA        more `apigate dev` flags (e.g. "--max-call-bytes 67108864")
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
AS_LIMIT=${AS_LIMIT:-4000000000}
KEY="mem-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
OUT=$(mktemp -d "${TMPDIR:-/tmp}/apigate-call-memory.XXXXXX")
die() {
  printf 'call-memory.sh: %s\n' "$*" >&2
  exit 1
}
command -v python3 >/dev/null || die "python3 is needed"
command -v curl >/dev/null || die "curl is needed"
command -v prlimit >/dev/null || die "prlimit is needed (util-linux)"
BIN=${APIGATE_BIN:-}
if [[ -z $BIN ]]; then
  (cd "$ROOT" && cargo build --quiet --bin apigate)
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/apigate
fi
[[ -x $BIN ]] || die "no apigate binary at $BIN"

SERVER=
UPSTREAM_PID=
cleanup() {
  [[ -n $SERVER ]] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  [[ -n $UPSTREAM_PID ]] && kill "$UPSTREAM_PID" 2>/dev/null && wait "$UPSTREAM_PID" 2>/dev/null
  true
}
trap cleanup EXIT

cat >"$OUT/spec.json" <<'JSON'
{"openapi": "3.0.3", "info": {"title": "Call memory", "version": "1"}, "servers": [{"url": "/"}],
 "paths": {
  "/items": {"get": {"operationId": "listItems", "responses": {"200": {"description": "items"}}}},
  "/bomb": {"get": {"operationId": "getBomb", "responses": {"200": {"description": "text"}}}},
  "/pages": {"get": {"operationId": "listPages",
    "parameters": [{"name": "page", "in": "query", "schema": {"type": "string"}}],
    "responses": {"200": {"description": "a page"}}}}}}
JSON

cat >"$OUT/upstream.py" <<'PY'
import gzip, http.server, json, sys, urllib.parse
ITEMS = json.dumps([{"id": i, "name": "item %d" % i} for i in range(200)]).encode()
n = (16 * 1024 * 1024 - 4096 - 2) // 8
PAGE = b"[" + b'{"i":1},' * (n - 1) + b'{"i":1}]'
BOMB = gzip.compress(b"a" * (64 * 1024 * 1024))
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        body, extra, ct = ITEMS, [], "application/json"
        if u.path == "/bomb":
            body, extra, ct = BOMB, [("Content-Encoding", "gzip")], "text/plain"
        if u.path == "/pages":
            page = int(urllib.parse.parse_qs(u.query).get("page", ["1"])[0])
            body, extra = PAGE, [("Link", '</pages?page=%d>; rel="next"' % (page + 1))]
        self.send_response(200)
        self.send_header("Content-Type", ct)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra: self.send_header(k, v)
        self.end_headers()
        try: self.wfile.write(body)
        except BrokenPipeError: pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print("listening on http://127.0.0.1:%d" % s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$OUT/upstream.py" >"$OUT/upstream.log" 2>&1 &
UPSTREAM_PID=$!
UPSTREAM_URL=
for _ in $(seq 1 100); do
  if [[ $(cat "$OUT/upstream.log") =~ listening\ on\ (http://127\.0\.0\.1:[0-9]+) ]]; then
    UPSTREAM_URL=${BASH_REMATCH[1]}
    break
  fi
  sleep 0.1
done
[[ -n $UPSTREAM_URL ]] || die "the upstream did not start: $(cat "$OUT/upstream.log")"

hwm_mib() { awk '/^VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }

# measure NAME ARGUMENTS-JSON: a fresh server, one api_execute call, its peak RSS.
measure() {
  local name=$1 args=$2 log="$OUT/apigate-${1%% *}.log" port= before after answer sampler
  : >"$log"
  # shellcheck disable=SC2086
  APIGATE_RANKER=lexical RUST_LOG=warn prlimit --as="$AS_LIMIT" -- "$BIN" dev --spec "$OUT/spec.json" \
    --upstream "$UPSTREAM_URL" --api-key "$KEY" --listen 127.0.0.1:0 --stateless ${EXTRA:-} >"$log" 2>&1 &
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
  before=$(hwm_mib "$SERVER")
  # The last peak seen, for a server that dies before it can be read.
  (while hwm_mib "$SERVER" >"$OUT/seen.tmp" 2>/dev/null && [[ -s $OUT/seen.tmp ]]; do
    mv "$OUT/seen.tmp" "$OUT/seen"
    sleep 0.05
  done) &
  sampler=$!
  answer=$(curl -s -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2025-11-25' -H "x-api-key: $KEY" "http://127.0.0.1:$port/mcp" \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"api_execute\",\"arguments\":$args}}" || true)
  if kill -0 "$SERVER" 2>/dev/null; then
    after=$(hwm_mib "$SERVER")
    kill "$sampler" 2>/dev/null || true
    local said
    said=$(printf '%s' "$answer" | grep -o '"stoppedBecause\\\?":\\\?"[^"\\]*\|the selection would produce more than [0-9]* bytes[^"\\]*' | head -1 || true)
    printf '| %s | %s MiB | %s MiB | %s |\n' "$name" "$before" "$after" "${said:-answered}"
    kill "$SERVER" && wait "$SERVER" 2>/dev/null || true
  else
    wait "$SERVER" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    printf '| %s | %s MiB | ≥ %s MiB (last seen) | the server died: %s |\n' "$name" "$before" \
      "$(cat "$OUT/seen" 2>/dev/null || echo '?')" "$(grep -m1 -o 'memory allocation of [0-9]* bytes failed' "$log" || tail -1 "$log" | cut -c1-80)"
  fi
  SERVER=
}

ten='[@,@,@,@,@,@,@,@,@,@]'
bomb="$ten|$ten|$ten|$ten|$ten|$ten|$ten|$ten"
echo "binary: $BIN ${EXTRA:-}"
printf '| call | peak RSS after start-up | peak RSS after the call | the call said |\n|---|---|---|---|\n'
measure "select bomb (175 bytes)" "{\"operationId\":\"listItems\",\"select\":\"$bomb\"}"
measure "pages: 10 of 16 MiB" '{"operationId":"listPages","query":{"page":"1"},"pages":10}'
measure "gzip bomb (64 MiB of text)" '{"operationId":"getBomb"}'
