#!/usr/bin/env bash
# scripts/clients-check.sh — real MCP clients against `apigate dev`: Claude Code
# (`claude mcp list`, project `.mcp.json`) and OpenCode (`opencode mcp list`, project
# `opencode.json`) must both report apigate as connected, configured with exactly what
# `apigate config claude|opencode` prints.
#
# Cases, for each client, each in a fresh project folder and a fresh HOME:
#   key        the snippet of `apigate config <client> --url URL --key KEY`    -> connected
#   env        the snippet of `apigate config <client> --url URL` (the key read from the
#              APIGATE_API_KEY environment variable by the client) with APIGATE_API_KEY=KEY
#                                                                                -> connected
#   wrong-key  the snippet of `apigate config <client> --url URL --key WRONG`  -> not connected
# The last case shows that the check can fail: a client that did not really talk to apigate
# could not tell the two keys apart.
#
# Isolation: apigate and the clients run together in a new network namespace
# (`unshare --net`, only `lo`, brought up here), so nothing can reach beyond loopback; the script
# fails when it cannot create one instead of running with network. Each client starts from an
# empty environment (`env -i`) with a fresh HOME and XDG directories, so no user configuration
# leaks in, and with their update, telemetry and other non-essential traffic switched off:
#   Claude Code: CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 (documented as DISABLE_AUTOUPDATER +
#                DISABLE_BUG_COMMAND + DISABLE_ERROR_REPORTING + DISABLE_TELEMETRY), those set
#                explicitly too;
#   OpenCode:    OPENCODE_DISABLE_AUTOUPDATE, OPENCODE_DISABLE_MODELS_FETCH (models.dev),
#                OPENCODE_DISABLE_DEFAULT_PLUGINS (npm), OPENCODE_DISABLE_LSP_DOWNLOAD,
#                OPENCODE_DISABLE_SHARE (it has no telemetry switch; none found in 1.18.33).
# No login is needed for `mcp list`.
#
# Claude Code approval: servers of a project's `.mcp.json` stay "Pending approval" until the user
# approves them in the interactive `claude`. Approval in a project's own `.claude/settings*.json`
# is ignored until the folder's trust dialog was accepted, so the non-interactive way is the
# user settings file: `~/.claude/settings.json` with {"enabledMcpjsonServers": ["apigate"]}
# (or {"enableAllProjectMcpServers": true}); the script writes it into the fresh HOME.
#
# `mcp list` of both clients exits 0 whatever the servers' state, so the verdict comes from
# their output: Claude Code's line `apigate: URL (HTTP) - ✔ Connected`, OpenCode's
# `✓ apigate connected` (failures: `✘ Failed to connect …`, `✗ apigate failed`). On apigate's
# 401 both clients try OAuth discovery and registration (/.well-known/*, POST /register), so a
# wrong key shows as `✘ Failed to connect — Dynamic Client Registration rejected (HTTP 404)` in
# Claude Code and as `✗ apigate failed` with an empty reason in OpenCode.
#
# The clients are installed (pinned) with npm into ${APIGATE_CACHE:-/var/tmp/apigate-cache},
# outside the namespace, once per version set; their install scripts (which put the native
# binary of the platform in place) run with the same Node 22 as scripts/conformance.sh (both
# take its version from scripts/npm-tools.sh).
#
# Environment:
#   APIGATE_BIN    apigate binary to test (default: `cargo build --bin apigate`, debug)
#   APIGATE_CACHE  cache directory for the npm packages (default /var/tmp/apigate-cache)
#   CLIENTS_SPEC   OpenAPI document to serve (default tests/data/specs/petstore-3.0.json)
#   CLIENTS_OUT    where logs, homes and project folders go (default: a new temporary directory)
# Needs util-linux `unshare` with network namespaces (root, or unprivileged user namespaces)
# and iproute2 `ip`.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SELF="$ROOT/scripts/clients-check.sh"
CACHE=${APIGATE_CACHE:-/var/tmp/apigate-cache}
CLAUDE_CODE_VERSION=2.1.330
OPENCODE_VERSION=1.18.33
CLIENT_TIMEOUT=90    # seconds for one `mcp list`
STAGE_TIMEOUT=600    # seconds for everything inside the namespace

log() { printf '\n== %s\n' "$*"; }
die() {
  printf 'clients-check.sh: %s\n' "$*" >&2
  exit 1
}

# ============================================================================================
# Inside the network namespace (the script runs itself again there, see the end of the file).
# ============================================================================================
if [[ ${CLIENTS_CHECK_STAGE:-} == inside ]]; then
  : "${BIN:?}" "${SPEC:?}" "${OUT:?}" "${CLAUDE:?}" "${OPENCODE:?}"

  ip link set lo up || die "cannot bring up lo in the network namespace"
  links=$(ip -o link show | awk -F': ' '{print $2}' | tr '\n' ' ')
  [[ $links == "lo " ]] || die "the network namespace has interfaces besides lo: $links"
  routes=$(ip route show | grep -v ' dev lo' || true)
  [[ -z $routes ]] || die "the network namespace has routes beyond lo: $routes"
  # And the proof: a connection beyond loopback fails at once (no route), whatever is out there.
  if timeout 5 bash -c 'exec 3<>/dev/tcp/1.1.1.1/443' 2>/dev/null; then
    die "a TCP connection to 1.1.1.1:443 succeeded inside the network namespace"
  fi
  echo "network namespace: interfaces: ${links% }; loopback only (a connection to 1.1.1.1:443 fails)"

  SERVER=""
  cleanup_inside() {
    if [[ -n $SERVER ]]; then
      kill "$SERVER" 2>/dev/null || true
      wait "$SERVER" 2>/dev/null || true
    fi
  }
  trap cleanup_inside EXIT
  trap 'exit 143' TERM INT

  KEY="clients-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
  WRONG="wrong-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"

  log "starting apigate dev on 127.0.0.1 ($SPEC)"
  # From $OUT: `apigate dev` would read a .mcp.json in its working directory (not here, and the
  # key comes from --api-key anyway).
  (cd "$OUT" && exec env -u APIGATE_API_KEY -u MCP_SERVER_API_KEY RUST_LOG="${RUST_LOG:-warn}" \
    "$BIN" dev --spec "$SPEC" --api-key "$KEY" --listen 127.0.0.1:0) >"$OUT/apigate.log" 2>&1 &
  SERVER=$!
  port=""
  for _ in $(seq 1 300); do
    if [[ $(cat "$OUT/apigate.log") =~ at\ http://127\.0\.0\.1:([0-9]+)/mcp ]]; then
      port=${BASH_REMATCH[1]}
      break
    fi
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n $port ]] || {
    cat "$OUT/apigate.log" >&2
    die "apigate did not start within 30 s (log: $OUT/apigate.log)"
  }
  URL="http://127.0.0.1:$port/mcp"
  head -n 2 "$OUT/apigate.log"

  # A fresh HOME with XDG dirs under it, and an empty environment apart from what is listed.
  client_env() { # HOME -> prints env(1) arguments
    local home=$1
    printf '%s\n' -i "PATH=/usr/local/bin:/usr/bin:/bin" "HOME=$home" "USER=${USER:-root}" \
      "XDG_CONFIG_HOME=$home/.config" "XDG_DATA_HOME=$home/.local/share" \
      "XDG_CACHE_HOME=$home/.cache" "XDG_STATE_HOME=$home/.local/state" \
      "TMPDIR=$home/tmp" "LANG=C.UTF-8" "TERM=dumb" "NO_COLOR=1"
  }
  CLAUDE_SWITCHES=(CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1
    DISABLE_ERROR_REPORTING=1)
  OPENCODE_SWITCHES=(OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1
    OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_SHARE=1)

  FAILED=()
  SUMMARY=()
  # run_case CLIENT CASE EXPECT SNIPPET_KEY ENV_KEY
  #   SNIPPET_KEY: the --key for `apigate config` ("" = none: the env-var snippet)
  #   ENV_KEY: APIGATE_API_KEY for the client ("" = unset)
  run_case() {
    local client=$1 case=$2 expect=$3 snippet_key=$4 env_key=$5
    local dir="$OUT/$client-$case" config_args=(config "$client" --url "$URL")
    local home="$dir/home" project="$dir/project"
    mkdir -p "$home/tmp" "$project"
    [[ -n $snippet_key ]] && config_args+=(--key "$snippet_key")
    local envs
    mapfile -t envs < <(client_env "$home")
    [[ -n $env_key ]] && envs+=("APIGATE_API_KEY=$env_key")

    local file cmd=()
    case $client in
      claude)
        file="$project/.mcp.json"
        mkdir -p "$home/.claude"
        echo '{"enabledMcpjsonServers": ["apigate"]}' >"$home/.claude/settings.json"
        cmd=(env "${envs[@]}" "${CLAUDE_SWITCHES[@]}" "$CLAUDE" mcp list)
        ;;
      opencode)
        file="$project/opencode.json"
        cmd=(env "${envs[@]}" "${OPENCODE_SWITCHES[@]}" "$OPENCODE" mcp list)
        ;;
    esac
    "$BIN" "${config_args[@]}" >"$file" || die "apigate ${config_args[*]} failed"

    log "$client / $case: apigate ${config_args[*]} > ${file#"$dir/"}${env_key:+ (client run with APIGATE_API_KEY=$env_key)}"
    cat "$file"
    local rc=0 t0 secs
    t0=$(date +%s%N)
    # In the background and waited for, so that a TERM to this stage acts at once.
    (cd "$project" && exec timeout -k 5 "$CLIENT_TIMEOUT" "${cmd[@]}") >"$dir/out.raw" 2>&1 </dev/null &
    wait $! || rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    # Colours and cursor codes off, for matching and for the log.
    sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g' "$dir/out.raw" >"$dir/out.txt"
    echo "--- \`${client} mcp list\` (exit status $rc, ${secs} s):"
    sed "s/^/    /" "$dir/out.txt"

    local line="" state
    case $client in
      claude)
        line=$(grep -E "^apigate: $URL " "$dir/out.txt" | head -n 1 || true)
        [[ $line == *"- ✔ Connected"* ]] && state=connected || state=not-connected
        ;;
      opencode)
        line=$(grep -E '^[●│ ]*[^ ]+ apigate( |$)' "$dir/out.txt" | head -n 1 || true)
        [[ $line =~ ✓\ apigate\ connected ]] && state=connected || state=not-connected
        ;;
    esac
    if ((rc == 124 || rc == 137)); then
      FAILED+=("$client/$case: \`$client mcp list\` did not finish within ${CLIENT_TIMEOUT}s")
    elif [[ -z $line ]]; then
      FAILED+=("$client/$case: no line for apigate in the output of \`$client mcp list\` ($dir/out.txt)")
    elif [[ $state != "$expect" ]]; then
      FAILED+=("$client/$case: expected $expect, the client says: ${line#"${line%%[![:space:]]*}"}")
    fi
    SUMMARY+=("$(printf '%-9s %-10s %5s s  expect %-14s got %-14s | %s' "$client" "$case" "$secs" "$expect" "$state" \
      "$(sed 's/^[[:space:]│●]*//' <<<"$line")")")
  }

  for client in claude opencode; do
    run_case "$client" key connected "$KEY" ""
    run_case "$client" env connected "" "$KEY"
    run_case "$client" wrong-key not-connected "$WRONG" ""
  done

  log "apigate still alive"
  if kill -0 "$SERVER" 2>/dev/null; then
    echo "ok   pid $SERVER running"
  else
    FAILED+=("apigate exited during the check (log: $OUT/apigate.log)")
  fi
  if grep -qi 'panicked' "$OUT/apigate.log"; then
    FAILED+=("apigate logged a panic (log: $OUT/apigate.log)")
  fi

  log "summary (logs, homes and project folders in $OUT)"
  printf '%s\n' "${SUMMARY[@]}"
  if ((${#FAILED[@]} > 0)); then
    printf 'FAILED: %s\n' "${FAILED[@]}"
    exit 1
  fi
  echo "clients: Claude Code and OpenCode connect with the printed snippets and refuse a wrong key"
  exit 0
fi

# ============================================================================================
# Outside: preconditions, installs, then the namespace.
# ============================================================================================
START=$SECONDS
OUT=${CLIENTS_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/apigate-clients.XXXXXX")}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# --- the network namespace: must work, or the check must not run ----------------------------
command -v unshare >/dev/null || die "unshare (util-linux) is needed to run the clients without network"
if ! command -v ip >/dev/null; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
  fi
  command -v ip >/dev/null || die "ip (iproute2) is needed to bring up lo in the namespace (apt-get install iproute2)"
fi
UNSHARE=(unshare --net --pid --fork --kill-child --mount-proc)
[[ $(id -u) == 0 ]] || UNSHARE=(unshare --map-root-user --net --pid --fork --kill-child --mount-proc)
"${UNSHARE[@]}" true 2>"$OUT/unshare.err" || {
  cat "$OUT/unshare.err" >&2
  die "cannot create a network namespace (${UNSHARE[*]}); the clients must not run with network access. Run as root or enable unprivileged user namespaces."
}

# --- the spec -------------------------------------------------------------------------------
SPEC=${CLIENTS_SPEC:-$ROOT/tests/data/specs/petstore-3.0.json}
[[ -f $SPEC ]] || die "no OpenAPI document at $SPEC; set CLIENTS_SPEC"
SPEC=$(cd "$(dirname "$SPEC")" && pwd)/$(basename "$SPEC")

# --- the clients (and Node 22 for their install scripts) ------------------------------------
source "$ROOT/scripts/npm-tools.sh"
TOOLS="$CACHE/mcp-clients-claude-code$CLAUDE_CODE_VERSION-opencode$OPENCODE_VERSION-node$NODE_VERSION"
NODE="$TOOLS/node_modules/$NODE_PKG/bin/node"
CLAUDE="$TOOLS/node_modules/@anthropic-ai/claude-code/bin/claude.exe"
OPENCODE="$TOOLS/node_modules/opencode-ai/bin/opencode.exe"
if [[ ! -f $TOOLS/.complete ]]; then
  log "installing Claude Code $CLAUDE_CODE_VERSION, OpenCode $OPENCODE_VERSION and Node $NODE_VERSION into $TOOLS"
  need_npm "the clients"
  rm -rf "$TOOLS"
  mkdir -p "$TOOLS"
  # Scripts off for npm; the two packages' own install scripts then run explicitly with Node 22:
  # each picks its platform's native binary (glibc/musl, AVX2 or baseline) from the optional
  # dependencies just installed and puts it over the placeholder bin/*.exe.
  (cd "$TOOLS" && echo '{"private":true}' >package.json &&
    timeout 900 npm install --no-audit --no-fund --ignore-scripts --loglevel=error \
      "$NODE_PKG@$NODE_VERSION" \
      "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" \
      "opencode-ai@$OPENCODE_VERSION" &&
    (cd node_modules/@anthropic-ai/claude-code && timeout 120 "$NODE" install.cjs) &&
    (cd node_modules/opencode-ai && timeout 120 "$NODE" postinstall.mjs)) >"$OUT/npm-install.log" 2>&1 ||
    {
      cat "$OUT/npm-install.log" >&2
      die "installing the clients failed (log: $OUT/npm-install.log)"
    }
  touch "$TOOLS/.complete"
fi
"$NODE" --version | grep -q '^v22\.' || die "$NODE is not Node 22; delete $TOOLS and rerun"
claude_version=$(timeout 60 env -i HOME="$OUT/version-home" "$CLAUDE" --version 2>&1) ||
  die "$CLAUDE does not run: $claude_version (delete $TOOLS and rerun)"
[[ $claude_version == "$CLAUDE_CODE_VERSION (Claude Code)" ]] ||
  die "expected Claude Code $CLAUDE_CODE_VERSION, $CLAUDE says: $claude_version"
opencode_version=$(timeout 60 env -i HOME="$OUT/version-home" OPENCODE_DISABLE_AUTOUPDATE=1 "$OPENCODE" --version 2>&1) ||
  die "$OPENCODE does not run: $opencode_version (delete $TOOLS and rerun)"
[[ $opencode_version == "$OPENCODE_VERSION" ]] ||
  die "expected OpenCode $OPENCODE_VERSION, $OPENCODE says: $opencode_version"
echo "clients: Claude Code $claude_version; OpenCode $opencode_version"

# --- the binary -----------------------------------------------------------------------------
BIN=${APIGATE_BIN:-}
if [[ -z $BIN ]]; then
  log "building apigate (debug)"
  (cd "$ROOT" && cargo build --quiet --bin apigate)
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/apigate"
fi
[[ -x $BIN ]] || die "no apigate binary at $BIN"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

# --- into the namespace: apigate and the clients, nothing beyond loopback -------------------
# --pid --fork --kill-child: every process started in there dies with it, whatever happens.
log "network namespace (${UNSHARE[*]}), loopback only"
CLIENTS_CHECK_STAGE=inside BIN="$BIN" SPEC="$SPEC" OUT="$OUT" CLAUDE="$CLAUDE" OPENCODE="$OPENCODE" \
  timeout -k 10 "$STAGE_TIMEOUT" "${UNSHARE[@]}" bash "$SELF" &
stage=$!
# Stopped from outside: stop the stage too (timeout passes the signal on to unshare).
trap 'kill "$stage" 2>/dev/null; wait "$stage" 2>/dev/null; exit 143' TERM INT HUP
rc=0
wait "$stage" || rc=$?
trap - TERM INT HUP
((rc != 124 && rc != 137)) || die "the check did not finish within ${STAGE_TIMEOUT}s (logs in $OUT)"
echo "(clients-check.sh took $((SECONDS - START)) s)"
((rc == 0)) || die "the real-client check failed (logs in $OUT)"
