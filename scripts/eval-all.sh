#!/usr/bin/env bash
# Retrieval quality of every ranker on every query set, per spec and pooled, as the tables of
# BENCHMARKS.md ("Retrieval"). Writes one `apigate eval --json` report per cell into OUT_DIR
# and prints markdown tables (overall, per kind, per spec) built from them.
#
#   APIGATE_BIN=target/release/apigate OUT_DIR=/tmp/eval scripts/eval-all.sh
#
# MODEL: the non-lexical rankers' --embedding-model (default: none, the built-in static model;
# e.g. models/minilm-api for the encoder it is distilled from).
#
# SETS (default: dev extra fresh blind), RANKERS (default: lexical dense hybrid) and EVAL_ARGS
# (extra `apigate eval` arguments, e.g. "--set coord=0") narrow or vary a run;
# TABLES_ONLY=1 prints the tables from the reports already in OUT_DIR.
# The blind set is measured here and never tuned on (tests/data/queries/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${APIGATE_BIN:-target/release/apigate}
MODEL=${MODEL:-}
OUT_DIR=${OUT_DIR:-/tmp/apigate-eval}
SETS=${SETS:-dev extra fresh blind}
RANKERS=${RANKERS:-lexical dense hybrid}
EVAL_ARGS=${EVAL_ARGS:-}
mkdir -p "$OUT_DIR"
file_of() {
  case $1 in
    dev) echo tests/data/queries/dev.jsonl ;;
    extra) echo tests/data/index-extra-queries.jsonl ;;
    fresh) echo tests/data/fresh-queries.jsonl ;;
    blind) echo tests/data/queries/blind.jsonl ;;
    *) echo "$1" ;;
  esac
}
for set in $SETS; do
  [ -n "${TABLES_ONLY:-}" ] && break
  for ranker in $RANKERS; do
    for mode in spec pooled; do
      pooled=()
      [ "$mode" = pooled ] && pooled=(--pooled)
      model=()
      [ "$ranker" != lexical ] && [ -n "$MODEL" ] && model=(--embedding-model "$MODEL")
      # shellcheck disable=SC2086
      "$BIN" eval --specs-dir tests/data/specs --queries "$(file_of "$set")" --ranker "$ranker" \
        "${pooled[@]}" "${model[@]}" --json $EVAL_ARGS >"$OUT_DIR/$set-$ranker-$mode.json"
    done
  done
done
f() { jq -r '[.["recall@1"], .["recall@5"], .["mrr@10"]] | @tsv' "$@" | awk '{ printf "%.3f / %.3f / %.3f", $1, $2, $3 }'; }
echo "### overall (R@1 / R@5 / MRR@10)"
echo
printf '| ranker |'; for set in $SETS; do printf ' %s | %s pooled |' "$set" "$set"; done; echo
printf '|---|'; for _ in $SETS; do printf -- '---|---|'; done; echo
for ranker in $RANKERS; do
  printf '| %s |' "$ranker"
  for set in $SETS; do
    printf ' %s | %s |' "$(f "$OUT_DIR/$set-$ranker-spec.json")" "$(f "$OUT_DIR/$set-$ranker-pooled.json")"
  done
  echo
done
for group in per_kind per_spec; do
  echo
  echo "### $group, per-spec index (R@1 / R@5 / MRR@10; n)"
  for set in $SETS; do
    echo
    echo "**$set**"
    echo
    printf '| %s | n |' "${group#per_}"; for ranker in $RANKERS; do printf ' %s |' "$ranker"; done; echo
    printf '|---|---:|'; for _ in $RANKERS; do printf -- '---|'; done; echo
    for key in $(jq -r ".$group | keys[]" "$OUT_DIR/$set-lexical-spec.json" 2>/dev/null || jq -r ".$group | keys[]" "$OUT_DIR/$set-$(echo $RANKERS | cut -d' ' -f1)-spec.json"); do
      first=$(echo $RANKERS | cut -d' ' -f1)
      printf '| %s | %s |' "$key" "$(jq -r ".$group[\"$key\"].queries" "$OUT_DIR/$set-$first-spec.json")"
      for ranker in $RANKERS; do
        printf ' %s |' "$(jq -r ".$group[\"$key\"]" "$OUT_DIR/$set-$ranker-spec.json" | f)"
      done
      echo
    done
  done
done
