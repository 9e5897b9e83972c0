#!/usr/bin/env bash
# scripts/agent-tasks.sh — twelve everyday tasks over five APIs (tests/data/agent-tasks.json:
# GitHub, Stripe, Slack, Spotify and Kubernetes, one apigate serving their real specs, the
# upstream tests/it/five_apis.rs), each done as a skilled agent does it (api_discover →
# api_schema → api_execute with select/pages). Prints a Markdown table of the bytes of text the
# model reads per task and per tool, and whether each answer is correct (BENCHMARKS.md, "Bytes
# per task on five real APIs' shapes"). AGENT_TASKS_SHOW=1 also prints every call and result.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --test it agent_tasks::twelve_tasks -- --nocapture 2>&1 | grep -E '^(\||discover \+ schema|→|←)'
