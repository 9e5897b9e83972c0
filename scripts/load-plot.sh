#!/usr/bin/env bash
# scripts/load-plot.sh — draws the figures of BENCHMARKS.md with gnuplot (Debian package
# gnuplot-nox) from the data files that scripts/load.sh and scripts/soak.sh write:
#   docs/bench/latency.png   p50 and p99 latency vs concurrency, one line per tool × mode
#   docs/bench/soak-rss.png  the server's RSS and open file descriptors during the soak
# Usage: scripts/load-plot.sh [RESULTS_TSV] [SOAK_CSV] [OUT_DIR]
# (defaults: docs/bench/load-results.tsv, docs/bench/soak-rss.csv, docs/bench).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RESULTS=${1:-$ROOT/docs/bench/load-results.tsv}
SOAK=${2:-$ROOT/docs/bench/soak-rss.csv}
DIR=${3:-$ROOT/docs/bench}
WARMUP=${WARMUP:-330}

if ! command -v gnuplot >/dev/null; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null
  else
    echo "load-plot.sh: gnuplot is needed (apt-get install gnuplot-nox)" >&2
    exit 1
  fi
fi
mkdir -p "$DIR"

if [[ -f $RESULTS ]]; then
  gnuplot <<GP
set terminal pngcairo size 1200,520 font "sans,11"
set output "$DIR/latency.png"
set datafile separator "\t"
set multiplot layout 1,2 title "apigate tools/call latency vs concurrency (wrk, 127.0.0.1, 2 shared cores)"
set logscale xy
set xtics ("1" 1, "16" 16, "64" 64)
set xrange [0.8:80]
set xlabel "concurrent connections"
set ylabel "latency (ms, log scale)"
set grid
set key bottom right
series(t, m) = sprintf("< awk -F'\t' '\$1 == \"%s\" && \$2 == \"%s\"' '$RESULTS'", t, m)
do for [col in "5 7"] {
  c = col + 0
  set title (c == 5 ? "p50" : "p99")
  plot series("discover", "stateless") using 3:c with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "api\\\_discover stateless", \
       series("discover", "stateful")  using 3:c with linespoints lw 2 pt 5 dt 2 lc rgb "#1f77b4" title "api\\\_discover stateful", \
       series("execute", "stateless")  using 3:c with linespoints lw 2 pt 7 lc rgb "#d62728" title "api\\\_execute stateless", \
       series("execute", "stateful")   using 3:c with linespoints lw 2 pt 5 dt 2 lc rgb "#d62728" title "api\\\_execute stateful", \
       series("list", "stateless")     using 3:c with linespoints lw 1 pt 6 lc rgb "#7f7f7f" title "tools/list stateless (baseline)", \
       series("list", "stateful")      using 3:c with linespoints lw 1 pt 4 dt 2 lc rgb "#7f7f7f" title "tools/list stateful (baseline)"
}
unset multiplot
GP
  echo "wrote $DIR/latency.png"
fi

if [[ -f $SOAK ]]; then
  gnuplot <<GP
set terminal pngcairo size 1200,480 font "sans,11"
set output "$DIR/soak-rss.png"
set datafile separator ","
set title "apigate stateful soak: RSS and open file descriptors, sampled every 10 s"
set xlabel "time since the load started (min)"
set ylabel "RSS (MiB)"
set y2label "open file descriptors"
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:80]
set grid
set key bottom right
set arrow from $WARMUP/60.0, graph 0 to $WARMUP/60.0, graph 1 nohead dt 3 lc rgb "#555555"
set label "end of warm-up (idle sessions expire after 5 min)" at $WARMUP/60.0, graph 0.08 offset 0.5,0
plot "$SOAK" skip 1 using (\$1/60.0):(\$2/1024.0) with lines lw 2 lc rgb "#1f77b4" title "VmRSS (MiB)", \
     "$SOAK" skip 1 using (\$1/60.0):5 axes x1y2 with lines lw 1 lc rgb "#ff7f0e" title "open fds"
GP
  echo "wrote $DIR/soak-rss.png"
fi
