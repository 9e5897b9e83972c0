#!/usr/bin/env bash
# scripts/soak.sh — a bounded soak of stateful `apigate dev` on 127.0.0.1 (release build):
# constant load from wrk with scripts/soak-sessions.lua (every connection opens an MCP
# session, makes SOAK_CALLS calls alternating api_discover on the GitHub REST spec and
# api_execute of GitHub's issues/get against the local upstream examples/load_upstream.rs,
# then DELETEs the session, except every SOAK_ABANDON-th session, left for the server's idle
# timeout to expire), while the server's RSS, VmHWM, threads and open file descriptors are
# sampled from /proc every 10 s into $OUT/soak-rss.csv. The load runs as MINUTES one-minute
# wrk runs, one table row each, so a slowdown over time would show. Prints the summary:
# RSS at the end of the warm-up, final, max, and the slope after the warm-up (least squares).
# The warm-up is WARMUP seconds (default 330: rmcp expires idle sessions after 300 s, so
# the number of abandoned-but-live sessions only stops growing then).
#
# Run it niced on a shared machine: `nice -n 10 scripts/soak.sh`.
#
# Environment (and those of scripts/load-common.sh):
#   MINUTES      length of the load in minutes (default 10)
#   CONNECTIONS  wrk connections, one per wrk thread (default 8)
#   WARMUP       seconds excluded from the slope (default 330)
#   SOAK_CALLS   tool calls per session (default 20)
#   SOAK_ABANDON every N-th session is abandoned instead of deleted (default 4; 0 = none)
#   OUT_DIR      where soak-rss.csv, soak-minutes.tsv and wrk's output go (default a temp dir)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/load-common.sh"

MINUTES=${MINUTES:-10}
CONNECTIONS=${CONNECTIONS:-8}
WARMUP=${WARMUP:-330}
export SOAK_CALLS=${SOAK_CALLS:-20} SOAK_ABANDON=${SOAK_ABANDON:-4}

machine
start_upstream
start_server soak "$GITHUB_SPEC" --upstream "$UPSTREAM_URL"
echo "server:  $URL (stateful), ready after $READY s; upstream $UPSTREAM_URL"
echo "load:    $MINUTES × 60 s, $CONNECTIONS connections, sessions of $SOAK_CALLS calls, every ${SOAK_ABANDON}th abandoned"
echo

CSV="$OUT/soak-rss.csv"
echo "t_s,rss_kib,hwm_kib,threads,fds,load1" >"$CSV"
t0=$(date +%s)
(
  while kill -0 "$SERVER" 2>/dev/null; do
    now=$(date +%s)
    status=$(cat "/proc/$SERVER/status" 2>/dev/null) || break
    fds=$(find "/proc/$SERVER/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    awk -v t=$((now - t0)) -v fds="$fds" -v la="$(cut -d' ' -f1 /proc/loadavg)" '
      /^VmRSS/ { rss = $2 } /^VmHWM/ { hwm = $2 } /^Threads/ { th = $2 }
      END { printf "%d,%d,%d,%d,%d,%s\n", t, rss, hwm, th, fds, la }' <<<"$status" >>"$CSV"
    sleep $((10 - ($(date +%s) - t0) % 10))
  done
) &
SAMPLER=$!

printf '| minute | req/s | p50 ms | p99 ms | max ms | sessions opened | deleted | abandoned | errors | RSS MiB | load avg |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
printf 'minute\trps\tp50_ms\tp99_ms\tmax_ms\topened\tdeleted\tabandoned\terrors\trss_kib\n' >"$OUT/soak-minutes.tsv"
for m in $(seq 1 "$MINUTES"); do
  log="$OUT/wrk-soak-$m.txt"
  load=$(loadavg)
  APIGATE_KEY=$KEY wrk -t"$CONNECTIONS" -c"$CONNECTIONS" -d60s --timeout 5s --latency \
    -s "$ROOT/scripts/soak-sessions.lua" "$URL" >"$log"
  rps=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$log")
  read -r p50 p99 max < <(awk -F'[ =]' '/^latency_us:/ { printf "%.2f %.2f %.1f\n", $3/1000, $7/1000, $9/1000 }' "$log")
  read -r opened deleted abandoned < <(awk -F'[ =]' '/^sessions:/ { print $3, $5, $7 }' "$log")
  errors=$(awk '/^checked:/ { split($0, a, /[ =]/); print a[3] + a[5] + a[7] + a[9] + a[11] }' "$log")
  rss=$(rss_kib "$SERVER")
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
    "$m" "$rps" "$p50" "$p99" "$max" "$opened" "$deleted" "$abandoned" "$errors" "$(mib "$rss")" "$load"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
    "$m" "$rps" "$p50" "$p99" "$max" "$opened" "$deleted" "$abandoned" "$errors" "$rss" >>"$OUT/soak-minutes.tsv"
done
sleep 10 # one more sample after the load
kill "$SAMPLER" 2>/dev/null || true
wait "$SAMPLER" 2>/dev/null || true

echo
awk -F, -v warm="$WARMUP" -v end=$((MINUTES * 60)) '
  NR == 1 { next }
  { t[NR] = $1; r[NR] = $2 / 1024; if (r[NR] > max) max = r[NR]; fd[NR] = $5 }
  $1 <= warm { warm_rss = $2 / 1024; warm_fd = $5 }
  $1 >= warm && $1 <= end { n++; sx += $1; sy += $2 / 1024; sxx += $1 * $1; sxy += $1 * $2 / 1024 }
  END {
    last = NR
    slope = n > 1 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) * 60 : 0
    printf "RSS: start %.1f MiB, end of warm-up (%d s) %.1f MiB, final %.1f MiB, max %.1f MiB\n", \
      r[2], warm, warm_rss, r[last], max
    printf "slope after warm-up: %+.3f MiB/min over %d samples (%d–%d s)\n", slope, n, warm, end
    printf "open fds: start %d, end of warm-up %d, final %d\n", fd[2], warm_fd, fd[last]
  }' "$CSV"
echo "samples: $CSV; per minute: $OUT/soak-minutes.tsv; raw wrk output: $OUT"
