#!/usr/bin/env bash
# scripts/memory.sh — RSS of `apigate dev` on the GitHub REST spec (release build): after
# start-up, then after CALLS mixed tool calls over one stateless connection (a third each:
# api_discover over varied queries, api_schema over every operation in turn, api_execute
# issues/get against the local upstream, examples/load_upstream.rs), lexical and, when MODEL
# names an embedding model folder (scripts/fetch-model.sh), hybrid. Every answer is checked.
# Only targets 127.0.0.1.
#
# Environment (and those of scripts/load-common.sh):
#   CALLS   how many calls after start-up (default 10000)
#   MODEL   an embedding model folder: adds the hybrid row
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/load-common.sh"

CALLS=${CALLS:-10000}
command -v python3 >/dev/null || die "python3 is needed"

machine
echo
start_upstream
printf '| ranker | ready after | RSS after start-up | RSS after %s calls | peak RSS (VmHWM) | calls/s |\n' "$CALLS"
printf '|---|---|---|---|---|---|\n'
rankers=(lexical)
[[ -n ${MODEL:-} ]] && rankers+=(hybrid)
for ranker in "${rankers[@]}"; do
  flags=(--upstream "$UPSTREAM_URL" --stateless)
  [[ $ranker == hybrid ]] && flags+=(--ranker hybrid --embedding-model "$MODEL" --cache-dir "$OUT/vectors")
  # A hybrid server embeds its operations in the background, then ranks with them: wait for
  # that, once to fill the vector cache and then for the measured start, which loads them.
  wait_hybrid() {
    for _ in $(seq 1 3000); do
      grep -q 'ranker: hybrid' "$OUT/apigate-memory-$ranker.log" && return 0
      sleep 0.1
    done
    die "the model never got ready: $OUT/apigate-memory-$ranker.log"
  }
  if [[ $ranker == hybrid ]]; then
    APIGATE_LOG=info start_server "memory-$ranker" "$GITHUB_SPEC" "${flags[@]}"
    wait_hybrid
    stop_server
  fi
  APIGATE_LOG=info start_server "memory-$ranker" "$GITHUB_SPEC" "${flags[@]}"
  [[ $ranker == hybrid ]] && wait_hybrid
  sleep 1
  idle=$(rss_kib "$SERVER")
  rate=$(python3 - "$URL" "$KEY" "$GITHUB_SPEC" "$CALLS" <<'PY'
import http.client, json, sys, time, urllib.parse
url, key, spec, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
doc = json.load(open(spec))
ids = [op["operationId"] for item in doc["paths"].values() for op in item.values()
       if isinstance(op, dict) and "operationId" in op]
queries = ["list pull requests for a repository", "create an issue comment",
           "get the contents of a file", "list workflow runs", "add a label to an issue",
           "merge a pull request", "list commits on a branch", "create a release",
           "who starred my repository", "delete a webhook", "rotate a deploy key",
           "download the logs of a job"]
u = urllib.parse.urlparse(url)
conn = http.client.HTTPConnection(u.hostname, u.port)
headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2025-11-25", "x-api-key": key}
started = time.monotonic()
for n in range(calls):
    kind = n % 3
    if kind == 0:
        name, args, want = "api_discover", {"query": queries[n // 3 % len(queries)], "limit": 10}, "operationId"
    elif kind == 1:
        name, args, want = "api_schema", {"operationId": ids[n // 3 % len(ids)]}, "parameters"
    else:
        name, args = "api_execute", {"operationId": "issues/get", "pathParams": {
            "owner": "octo", "repo": "hello", "issue_number": 1 + n % 500}}
        want = "status"
    body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                       "params": {"name": name, "arguments": args}})
    conn.request("POST", u.path, body, headers)
    resp = conn.getresponse()
    text = resp.read().decode()
    if resp.status != 200 or '"isError":true' in text or want not in text:
        sys.exit(f"call {n} ({name}) failed: {resp.status} {text[:300]}")
print(f"{calls / (time.monotonic() - started):.0f}")
PY
)
  after=$(rss_kib "$SERVER")
  peak=$(hwm_kib "$SERVER")
  printf '| %s | %s s | %s MiB | %s MiB | %s MiB | %s |\n' "$ranker" "$READY" "$(mib "$idle")" \
    "$(mib "$after")" "$(mib "$peak")" "$rate"
  stop_server
done
echo
echo "server logs: $OUT"
