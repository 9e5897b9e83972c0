#!/usr/bin/env bash
# scripts/oauth-client-check.sh — the whole sign-in flow with real MCP clients, against a real
# authorization server: `apigate serve --oauth-issuer` in front of oidc-provider
# (scripts/oidc-provider.sh), with a throwaway Postgres cluster.
#
#   Claude Code  `claude mcp list` on a `.mcp.json` with the URL only: apigate answers 401 with
#                `WWW-Authenticate: Bearer resource_metadata=…`; Claude Code reads the metadata,
#                fetches the authorization server's, and reports "Needs authentication" (its
#                browser sign-in is interactive only: `/mcp` in a session).
#   OpenCode     `opencode mcp auth apigate`: the same discovery, then Dynamic Client
#                Registration (POST /reg) and the authorization URL (PKCE, `resource` = apigate's
#                /mcp URL) it would open in a browser. This script is the browser: it fills the
#                provider's login and consent forms and follows the redirect to OpenCode's
#                callback, OpenCode exchanges the code for a token, and `opencode mcp list`
#                must then show apigate connected (initialize and tools/list with the token).
#
# Like scripts/clients-check.sh (whose client install it reuses, and runs first if needed),
# everything runs in a network namespace with loopback only, each client from an empty
# environment and a fresh HOME.
#
#   APIGATE_BIN=target/debug/apigate scripts/oauth-client-check.sh
#
# Environment: APIGATE_BIN, APIGATE_CACHE (as clients-check.sh), OAUTH_CHECK_OUT (logs).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SELF="$ROOT/scripts/oauth-client-check.sh"
log() { printf '\n== %s\n' "$*"; }
die() {
  printf 'oauth-client-check.sh: %s\n' "$*" >&2
  exit 1
}

if [[ ${OAUTH_CHECK_STAGE:-} == inside ]]; then
  : "${BIN:?}" "${OUT:?}" "${CLAUDE:?}" "${OPENCODE:?}" "${IDP_NODE:?}" "${IDP_SCRIPT:?}" "${PG_BIN:?}"
  ip link set lo up || die "cannot bring up lo"
  PIDS=()
  trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

  wait_for() { # FILE PATTERN WHAT
    for _ in $(seq 1 300); do
      grep -q "$2" "$1" 2>/dev/null && return 0
      sleep 0.1
    done
    cat "$1" >&2
    die "$3 did not start (log: $1)"
  }

  log "Postgres (throwaway cluster)"
  PG="$OUT/pg"
  mkdir -p "$PG"
  as_pg=()
  if [[ $(id -u) == 0 ]]; then
    id postgres >/dev/null 2>&1 || die "running as root: initdb needs a postgres user"
    chown postgres "$PG"
    chmod o+x "$OUT" # postgres may pass through (not list) the folder to its own
    as_pg=(runuser -u postgres --)
  fi
  "${as_pg[@]}" "$PG_BIN/initdb" -D "$PG/data" -U postgres -A trust >"$OUT/initdb.log" 2>&1 ||
    die "initdb failed (log: $OUT/initdb.log)"
  "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$PG/data" -o "-p 5544 -k $PG -c listen_addresses=127.0.0.1" \
    -l "$PG/server.log" -w start >/dev/null || die "pg_ctl start failed (log: $PG/server.log)"
  trap '"${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$PG/data" -m immediate stop >/dev/null 2>&1; for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
  DATABASE_URL=postgres://postgres@127.0.0.1:5544/postgres

  log "oidc-provider at http://127.0.0.1:4500, apigate serve at http://127.0.0.1:4600/mcp"
  PORT=4500 RESOURCE=http://127.0.0.1:4600/mcp KEYS_OUT="$OUT/keys.json" \
    "$IDP_NODE" "$IDP_SCRIPT" >"$OUT/idp.log" 2>&1 &
  PIDS+=($!)
  wait_for "$OUT/idp.log" "listening at" "oidc-provider"
  (cd "$OUT" && exec env DATABASE_URL="$DATABASE_URL" RUST_LOG=info APIGATE_RANKER=lexical \
    "$BIN" serve --spec "$ROOT/tests/data/specs/petstore-3.0.json" --listen 127.0.0.1:4600 \
    --oauth-issuer http://127.0.0.1:4500) >"$OUT/apigate.log" 2>&1 &
  PIDS+=($!)
  wait_for "$OUT/apigate.log" "apigate serve:" "apigate serve"
  grep -q "OAuth issuer keys loaded" "$OUT/apigate.log" || die "apigate did not load the issuer's keys"

  client_env() {
    printf '%s\n' -i "PATH=/usr/local/bin:/usr/bin:/bin" "HOME=$1" "USER=${USER:-root}" \
      "XDG_CONFIG_HOME=$1/.config" "XDG_DATA_HOME=$1/.local/share" "XDG_CACHE_HOME=$1/.cache" \
      "XDG_STATE_HOME=$1/.local/state" "TMPDIR=$1/tmp" "LANG=C.UTF-8" "TERM=dumb" "NO_COLOR=1"
  }
  seen() { grep -c "request $1" "$OUT/idp.log" || true; }

  log "Claude Code: claude mcp list"
  home="$OUT/claude/home"
  mkdir -p "$home/tmp" "$home/.claude" "$OUT/claude/project"
  echo '{"enabledMcpjsonServers": ["apigate"]}' >"$home/.claude/settings.json"
  echo '{"mcpServers": {"apigate": {"type": "http", "url": "http://127.0.0.1:4600/mcp"}}}' \
    >"$OUT/claude/project/.mcp.json"
  mapfile -t envs < <(client_env "$home")
  before=$(seen "GET /.well-known/oauth-authorization-server")
  claude_out=$(cd "$OUT/claude/project" && timeout 90 env "${envs[@]}" \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 \
    DISABLE_ERROR_REPORTING=1 "$CLAUDE" mcp list 2>&1) || true
  echo "$claude_out"
  after=$(seen "GET /.well-known/oauth-authorization-server")
  grep -q "apigate: http://127.0.0.1:4600/mcp (HTTP) - ! Needs authentication" <<<"$claude_out" ||
    die "Claude Code did not report that apigate needs authentication"
  ((after > before)) || die "Claude Code never fetched the authorization server's metadata"
  echo "ok   Claude Code: 401 -> resource metadata -> the authorization server's metadata -> needs authentication"

  log "OpenCode: opencode mcp auth apigate, this script as the browser"
  home="$OUT/opencode/home"
  project="$OUT/opencode/project"
  mkdir -p "$home/tmp" "$project"
  echo '{"$schema": "https://opencode.ai/config.json", "mcp": {"apigate": {"type": "remote", "url": "http://127.0.0.1:4600/mcp", "enabled": true}}}' \
    >"$project/opencode.json"
  mapfile -t envs < <(client_env "$home")
  oc=(env "${envs[@]}" OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1
    OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_SHARE=1 "$OPENCODE")
  (cd "$project" && exec timeout 120 "${oc[@]}" mcp auth apigate) >"$OUT/opencode-auth.log" 2>&1 &
  auth=$!
  PIDS+=($auth)
  url=""
  for _ in $(seq 1 600); do
    url=$(grep -ao 'http://127\.0\.0\.1:4500/auth?[^[:space:][:cntrl:]]*' "$OUT/opencode-auth.log" | head -1 || true)
    [[ -n $url ]] && break
    sleep 0.1
  done
  [[ -n $url ]] || die "OpenCode printed no authorization URL (log: $OUT/opencode-auth.log)"
  (($(seen "POST /reg") > 0)) || die "OpenCode did not register (no POST /reg at the provider)"
  [[ $url == *"resource=http%3A%2F%2F127.0.0.1%3A4600%2Fmcp"* && $url == *code_challenge=* ]] ||
    die "the authorization URL lacks resource= apigate or PKCE: $url"
  echo "ok   OpenCode registered and asks for: ${url:0:90}…"
  python3 - "$url" <<'PY' || die "the sign-in did not reach OpenCode's callback"
import re, sys, urllib.error, urllib.parse, urllib.request, http.cookiejar
url = sys.argv[1]
class Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None
opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), Stay)
data = None
for _ in range(15):
    if not url.startswith("http://127.0.0.1:4500/"):
        with urllib.request.urlopen(url, timeout=30) as r:
            print("browser: OpenCode's callback answered", r.status)
        sys.exit(0)
    try:
        r = opener.open(urllib.request.Request(url, data=data), timeout=30)
        body, location = r.read().decode(), None
    except urllib.error.HTTPError as e:
        body, location = e.read().decode(), e.headers.get("Location")
    data = None
    if location:
        url = urllib.parse.urljoin(url, location)
        continue
    action = re.search(r'action="([^"]+)"', body).group(1)
    form = {"prompt": "login", "login": "alice", "password": "any"} if 'name="login"' in body else {"prompt": "consent"}
    print("browser: the provider's", form["prompt"], "form")
    data, url = urllib.parse.urlencode(form).encode(), urllib.parse.urljoin(url, action)
sys.exit(1)
PY
  wait "$auth" || true
  grep -aq "Authentication successful" "$OUT/opencode-auth.log" ||
    die "OpenCode did not finish the sign-in (log: $OUT/opencode-auth.log)"
  (($(seen "POST /token") > 0)) || die "OpenCode never called the token endpoint"
  list=$(cd "$project" && timeout 90 "${oc[@]}" mcp list 2>&1 | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g') || true
  echo "$list" | grep -a apigate
  grep -aq "apigate connected" <<<"$list" || die "OpenCode does not show apigate connected with its token"
  echo "ok   OpenCode: signed in as alice; apigate connected with the bearer token"
  exit 0
fi

OUT=${OAUTH_CHECK_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/apigate-oauth-clients.XXXXXX")}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
CACHE=${APIGATE_CACHE:-/var/tmp/apigate-cache}
BIN=${APIGATE_BIN:?set APIGATE_BIN to the apigate binary}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
# The clients, as scripts/clients-check.sh installs them.
versions=$(grep -E '^(CLAUDE_CODE_VERSION|OPENCODE_VERSION)=' "$ROOT/scripts/clients-check.sh")
eval "$versions"
source "$ROOT/scripts/npm-tools.sh"
TOOLS="$CACHE/mcp-clients-claude-code$CLAUDE_CODE_VERSION-opencode$OPENCODE_VERSION-node$NODE_VERSION"
if [[ ! -f $TOOLS/.complete ]]; then
  log "installing the clients (scripts/clients-check.sh)"
  APIGATE_BIN="$BIN" bash "$ROOT/scripts/clients-check.sh" >"$OUT/clients-check.log" 2>&1 ||
    die "scripts/clients-check.sh failed (log: $OUT/clients-check.log)"
fi
read -r IDP_NODE IDP_SCRIPT < <(bash "$ROOT/scripts/oidc-provider.sh")
PG_BIN=$(dirname "$(command -v initdb 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
UNSHARE=(unshare --net --pid --fork --kill-child --mount-proc)
[[ $(id -u) == 0 ]] || UNSHARE=(unshare --map-root-user --net --pid --fork --kill-child --mount-proc)
log "network namespace, loopback only"
OAUTH_CHECK_STAGE=inside BIN="$BIN" OUT="$OUT" CLAUDE="$TOOLS/node_modules/@anthropic-ai/claude-code/bin/claude.exe" \
  OPENCODE="$TOOLS/node_modules/opencode-ai/bin/opencode.exe" IDP_NODE="$IDP_NODE" IDP_SCRIPT="$IDP_SCRIPT" \
  PG_BIN="$PG_BIN" ROOT="$ROOT" timeout -k 10 300 "${UNSHARE[@]}" bash "$SELF" ||
  die "the sign-in check failed (logs in $OUT)"
echo "oauth clients: Claude Code reaches the authorization server; OpenCode signs in and connects"
