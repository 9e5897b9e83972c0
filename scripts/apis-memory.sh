#!/usr/bin/env bash
# scripts/apis-memory.sh — RSS of `apigate dev --config` serving 1, 3 and 9 APIs at once (release
# build, lexical or hybrid, stateless): after start-up, and after at least CALLS `api_discover` calls
# (wrk, one thread, 4 connections, "find a pet by its id": Petstore is in every set; every
# answer checked). The APIs are the nine specs of the dev query set: Petstore; + GitHub and Stripe;
# + Airflow, Discourse, Jupyter, Kubernetes, Slack and Spotify. Only targets 127.0.0.1.
#
#   APIGATE_BIN=/path/to/release/apigate scripts/apis-memory.sh
#
# Environment (and those of scripts/load-common.sh):
#   CALLS   the fewest calls after start-up (default 10000)
#   RANKER  lexical (default) or hybrid: with hybrid, "ready" is when every operation is
#           embedded (/health says hybrid; the model is the repository's models/minilm-api
#           unless APIGATE_MODEL names another), and the vectors are not cached on disk
set -euo pipefail
NO_UPSTREAM=1
source "$(dirname "${BASH_SOURCE[0]}")/load-common.sh"

CALLS=${CALLS:-10000}
RANKER=${RANKER:-lexical}
specs="$ROOT/tests/data/specs"
all=(petstore:petstore-3.0.json github:github-rest-3.0.json stripe:stripe.json
  airflow:airflow-v1.yaml discourse:discourse-3.1.json jupyter:jupyter-server-swagger2.yaml
  kubernetes:kubernetes-1.13-swagger2.json slack:slack-web-swagger2.json spotify:spotify.json)

machine
echo
echo "ranker: $RANKER"
printf '| APIs | operations | ready after | RSS after start-up | calls | RSS after | peak RSS (VmHWM) |\n'
printf '|---|---|---|---|---|---|---|\n'
for n in 1 3 9; do
  config="$OUT/apigate-$n.toml"
  : >"$config"
  for entry in "${all[@]:0:$n}"; do
    printf '[[api]]\nname = "%s"\nspec = "%s/%s"\nupstream = "http://127.0.0.1:9"\n\n' \
      "${entry%%:*}" "$specs" "${entry#*:}" >>"$config"
  done
  started=$(date +%s.%N)
  if [[ $RANKER == hybrid ]]; then
    APIGATE_RANKER=hybrid start_server "$n" "$config" --stateless --cache-dir "$OUT/no-cache-$n"
    for _ in $(seq 1 3600); do
      [[ $(curl -s "${URL%/mcp}/health" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("ranker"))') == hybrid ]] && break
      sleep 0.5
    done
    READY=$(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  else
    APIGATE_RANKER=lexical start_server "$n" "$config" --stateless
  fi
  ready="$READY s"
  operations=$(curl -s "${URL%/mcp}/health" | python3 -c 'import json,sys; print(json.load(sys.stdin)["operations"])')
  sleep 1
  start_rss=$(rss_kib "$SERVER")
  calls=0
  while ((calls < CALLS)); do
    LOAD_TOOL=discover LOAD_QUERY="find a pet by its id" APIGATE_KEY=$KEY wrk -t1 -c4 -d5s -s "$ROOT/scripts/load-mcp.lua" "$URL" >"$OUT/wrk-$n.txt"
    if ! grep -q 'non200=0 tool_errors=0 no_result=0 socket_errors=0' "$OUT/wrk-$n.txt"; then
      die "failed calls with $n APIs: $(grep checked: "$OUT/wrk-$n.txt")"
    fi
    calls=$((calls + $(awk '/ requests in / { print $1 }' "$OUT/wrk-$n.txt")))
  done
  printf '| %s | %s | %s | %s MiB | %s | %s MiB | %s MiB |\n' "$n" "$operations" "$ready" \
    "$(mib "$start_rss")" "$calls" "$(mib "$(rss_kib "$SERVER")")" "$(mib "$(hwm_kib "$SERVER")")"
  stop_server
done
echo
echo "raw output: $OUT"
