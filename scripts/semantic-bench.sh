#!/usr/bin/env bash
# Semantic-ranking numbers on one spec (default GitHub's 1,223 operations), release build:
#  - embedding throughput: `apigate index build` (operations per second);
#  - start-up with `--ranker lexical`, and by default (hybrid with the shipped model) with a
#    cold vector cache and with a warm one: seconds from process start to the first /health
#    200, and to "ranker":"hybrid";
#  - RSS once hybrid (and lexical-only for comparison).
#   scripts/semantic-bench.sh        (APIGATE_BIN, SPEC override; APIGATE_EMBEDDING_MODEL
#                                     measures another model than the shipped one)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${APIGATE_BIN:-target/release/apigate}
spec=${SPEC:-tests/data/specs/github-rest-3.0.json}
port=${PORT:-3917}
work=$(mktemp -d)
pid=
trap '[[ -n "$pid" ]] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
rss_mib() { awk '/VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }
health() { curl -fsS "http://127.0.0.1:$port/health" 2>/dev/null || true; }

echo "== embedding throughput (apigate index build)"
"$bin" index build --spec "$spec" --out "$work/index"

# run NAME ARGS…: start `apigate dev`, report time to health, time to hybrid, RSS.
run() {
  local name=$1; shift
  local t0; t0=$(now)
  "$bin" dev --spec "$spec" --listen "127.0.0.1:$port" --api-key bench-key-0123456789 "$@" \
    2>"$work/$name.log" &
  pid=$!
  until [[ -n "$(health)" ]]; do sleep 0.05; done
  local ready; ready=$(since "$t0")
  local hybrid="-"
  if [[ "$*" != *"--ranker lexical"* ]]; then
    until health | grep -q '"ranker":"hybrid"'; do sleep 0.1; done
    hybrid=$(since "$t0")
  fi
  printf '%-34s ready %6s s   hybrid %6s s   RSS %4s MiB\n' "$name" "$ready" "$hybrid" "$(rss_mib "$pid")"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
}

echo "== start-up"
run "--ranker lexical" --ranker lexical --cache-dir "$work/cache"
run "default (hybrid), cold cache" --cache-dir "$work/cache"
run "default (hybrid), warm cache" --cache-dir "$work/cache"
run "default, --index from index build" --cache-dir "$work/empty" --index "$work/index"
