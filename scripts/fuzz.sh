#!/usr/bin/env bash
# scripts/fuzz.sh [TARGET|all] [SECONDS] — runs apigate's cargo-fuzz targets (fuzz/) with
# libFuzzer and AddressSanitizer, one after the other, each for SECONDS (default 600), one
# process at a time, niced. Installs cargo-fuzz if missing.
#
#   spec_load        Spec::from_bytes on arbitrary JSON/YAML bytes, then describe/validate/find
#   execute_request  Engine::plan_execute (the server's own api_execute path) on a fixed spec
#   path_match       spec::match_template, raw and fill-then-match round trips
#   sanitize_args    monitor::sanitize_args with planted secrets
#   redact_response  upstream::shown_body (scrub, cut, decode a response) with planted credentials
#   decode_response  upstream::shown_response on compressed, UTF-16/32 and base64 bodies and bombs
#   select           tools::select on generated expressions: a result never passes its byte bound
#   paging           tools::paging on responses of every convention's markers: next queries of declared parameters only
#
# Only stable Rust is needed: cargo-fuzz passes -Z flags (-Zsanitizer=address, sanitizer
# coverage), which stable rustc accepts under RUSTC_BOOTSTRAP=1.
#
# Corpora grow in fuzz/corpus/TARGET (seeded from fuzz/seeds/TARGET, not committed), crashing
# inputs land in fuzz/artifacts/TARGET, logs in fuzz/logs/TARGET.log; the last lines printed
# per target are libFuzzer's final stats (executions, exec/s, coverage, corpus, peak RSS).
# A crash does not stop the run (libFuzzer's -fork=1 -ignore_crashes=1; KEEP_GOING=0 stops at
# the first one). Reproduce one with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir fuzz TARGET fuzz/artifacts/TARGET/crash-…
# then keep the input under tests/data/fuzz/TARGET/ (replayed by `cargo test --test it fuzz`).
#
# Environment: FUZZ_TARGET_DIR (default fuzz/target), RSS_LIMIT_MB (2048), TIMEOUT (10 s per
# input), EXTRA (more libFuzzer flags).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ALL=(spec_load execute_request path_match sanitize_args redact_response decode_response select paging)
WHICH=${1:-all}
SECONDS_EACH=${2:-600}
TARGET_DIR=${FUZZ_TARGET_DIR:-$ROOT/fuzz/target}
export RUSTC_BOOTSTRAP=1

die() {
  printf 'fuzz.sh: %s\n' "$*" >&2
  exit 1
}
if [[ $WHICH == all ]]; then
  TARGETS=("${ALL[@]}")
else
  [[ " ${ALL[*]} " == *" $WHICH "* ]] || die "unknown target $WHICH (one of: ${ALL[*]} all)"
  TARGETS=("$WHICH")
fi
[[ $SECONDS_EACH =~ ^[0-9]+$ ]] || die "SECONDS must be a number, not $SECONDS_EACH"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

cd "$ROOT"
build=(cargo fuzz build --fuzz-dir fuzz --target-dir "$TARGET_DIR")
[[ $WHICH == all ]] || build+=("$WHICH")
CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2} nice -n 10 "${build[@]}" ||
  die "cannot build the fuzz targets (RUSTC_BOOTSTRAP=1 ${build[*]})"

mkdir -p fuzz/logs
for t in "${TARGETS[@]}"; do
  corpus=$ROOT/fuzz/corpus/$t
  mkdir -p "$corpus" "fuzz/artifacts/$t"
  cp -n fuzz/seeds/"$t"/* "$corpus"/ 2>/dev/null || true
  flags=(-max_total_time="$SECONDS_EACH" -timeout="${TIMEOUT:-10}" -rss_limit_mb="${RSS_LIMIT_MB:-2048}"
    -print_final_stats=1)
  # One child process at a time that is restarted after a crash, so one run collects every
  # distinct crash instead of stopping at the first (KEEP_GOING=0: stop at the first).
  [[ ${KEEP_GOING:-1} == 0 ]] || flags+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  case $t in
  spec_load) flags+=(-max_len=65536 -dict=$ROOT/fuzz/dict/spec_load.dict) ;;
  path_match) flags+=(-dict=$ROOT/fuzz/dict/path_match.dict) ;;
  esac
  printf '== %s: %s s\n' "$t" "$SECONDS_EACH"
  # shellcheck disable=SC2086
  nice -n 10 cargo fuzz run --fuzz-dir fuzz --target-dir "$TARGET_DIR" "$t" "$corpus" -- \
    "${flags[@]}" ${EXTRA:-} >"fuzz/logs/$t.log" 2>&1 || printf '%s: stopped early (see fuzz/logs/%s.log)\n' "$t" "$t"
  grep -E '^#[0-9]+' "fuzz/logs/$t.log" | tail -n 1 || true
  grep -E '^stat::' "fuzz/logs/$t.log" || true
  printf 'corpus: %s files, %s bytes; crash artifacts: %s\n' "$(find "$corpus" -type f | wc -l)" \
    "$(du -sb "$corpus" | cut -f1)" "$(find "fuzz/artifacts/$t" -type f | wc -l)"
done
