#!/usr/bin/env bash
# scripts/tasks.sh — the ten everyday agent tasks of tests/data/tasks.json against the fixture API
# (tests/it/fixture_api.rs): calls and bytes of text an agent reads for each, before (`plain`: no
# select, pages or next, at the old 64 KiB budget) and after (`shaped`). Prints a Markdown table
# (BENCHMARKS.md, "What an agent reads per task").
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --test it tasks::ten_tasks -- --nocapture 2>&1 | grep '^|'
