#!/usr/bin/env bash
# scripts/reload-load.sh — tool calls under load while the APIs reload. `apigate dev --config`
# serves two APIs (GitHub and Petstore, lexical, stateless, no rate limit); wrk (one thread,
# CONNS connections) sends `api_discover` on GitHub for DURATION twice: once steady, once while
# the GitHub spec file is rewritten with a new `info.version` and reloaded RELOADS times through
# `POST /admin/v1/reload` (each a new document: parsed, indexed, swapped in). Prints, for both
# runs, requests, failures (non-2xx, tool errors, socket errors) and latency p50/p90/p99.
#
#   APIGATE_BIN=/path/to/release/apigate scripts/reload-load.sh
#
# Environment (and those of scripts/load-common.sh):
#   CONNS      wrk connections (default 4)
#   DURATION   length of each run (default 30s)
#   RELOADS    reloads during the second run (default 20; at most one a second)
set -euo pipefail
NO_UPSTREAM=1
source "$(dirname "${BASH_SOURCE[0]}")/load-common.sh"

CONNS=${CONNS:-4}
DURATION=${DURATION:-30s}
RELOADS=${RELOADS:-20}
seconds=${DURATION%s}

dir="$OUT/config"
mkdir -p "$dir"
cp "$GITHUB_SPEC" "$dir/github.json"
cat >"$dir/apigate.toml" <<EOF
[[api]]
name = "github"
spec = "github.json"
upstream = "http://127.0.0.1:9"

[[api]]
name = "petstore"
spec = "$PETSTORE_SPEC"
upstream = "http://127.0.0.1:9"
EOF

# The reloads' log lines are kept (info).
APIGATE_LOG=${APIGATE_LOG:-info} start_server reload "$dir/apigate.toml" --stateless
base=${URL%/mcp}

export LOAD_TOOL=discover APIGATE_KEY=$KEY
export LOAD_QUERY="list open issues in a repository"
run_wrk() {
  wrk -t1 -c"$CONNS" -d"$DURATION" --timeout 10s --latency -s "$ROOT/scripts/load-mcp.lua" "$URL" >"$1"
}

# summary FILE: requests, failures and latency percentiles from wrk's output.
summary() {
  awk '
    / requests in / { n = $1 }
    /^  *50%/ { p50 = $2 } /^  *90%/ { p90 = $2 } /^  *99%/ { p99 = $2 }
    /Non-2xx/ { non2xx = $NF }
    /Socket errors/ { sock = $0 }
    /^checked:/ { checked = $0 }
    END {
      printf "%s requests; p50 %s, p90 %s, p99 %s; %s", n, p50, p90, p99, (checked == "" ? "unchecked" : checked)
      if (non2xx != "") printf "; non-2xx %s", non2xx
      if (sock != "") printf "; %s", sock
      printf "\n"
    }' "$1"
}

machine
echo "runs:    wrk -t1 -c$CONNS, $DURATION each, api_discover on GitHub (of GitHub + Petstore)"
wrk -t1 -c"$CONNS" -d1s -s "$ROOT/scripts/load-mcp.lua" "$URL" >/dev/null
run_wrk "$OUT/steady.txt"
echo "steady:      $(summary "$OUT/steady.txt")"

run_wrk "$OUT/reloading.txt" &
wrk_pid=$!
gap=$(awk -v s="$seconds" -v r="$RELOADS" 'BEGIN { g = (s - 2) / r; if (g < 1.1) g = 1.1; printf "%.2f", g }')
sleep 1
ok=0
failed=0
for n in $(seq 1 "$RELOADS"); do
  # A new document each time: the same operations, another info.version.
  python3 - "$dir/github.json" "$n" <<'PY'
import json, os, sys
path, n = sys.argv[1], sys.argv[2]
spec = json.load(open(path))
spec["info"]["version"] = f"reload-{n}"
tmp = path + ".tmp"
json.dump(spec, open(tmp, "w"))
os.replace(tmp, path)
PY
  status=$(curl -s -o "$OUT/reload-$n.json" -w '%{http_code}' -X POST -H "x-api-key: $KEY" "$base/admin/v1/reload")
  if [[ $status == 200 ]] && grep -q '"reloaded"' "$OUT/reload-$n.json"; then
    ok=$((ok + 1))
  elif [[ $status != 200 ]]; then
    failed=$((failed + 1))
  fi
  sleep "$gap"
done
wait "$wrk_pid"
echo "reloading:   $(summary "$OUT/reloading.txt")"
echo "reloads:     $ok of $RELOADS through the admin route reloaded GitHub ($failed answered other than 200; the file watcher may have reloaded a change first)"
echo "health:      $(curl -s "$base/health" | python3 -c 'import json,sys; h=json.load(sys.stdin); print([(s["name"], s["version"], s["lastError"]) for s in h["specs"]])')"
echo "rss:         $(mib "$(rss_kib "$SERVER")") MiB now, peak $(mib "$(hwm_kib "$SERVER")") MiB"
echo
echo "raw output: $OUT"
