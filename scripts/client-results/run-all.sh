#!/usr/bin/env bash
# run-all.sh — reproduces the runs the report quotes (about 2 minutes): both clients, every probe
# tool, then the size thresholds. Needs the npm install described in README.md. Results in runs/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
ALL=both,both_noschema,struct_only,image,link,link_only,embedded,text_meta,struct_image,error_struct,error_struct_only
for c in claude opencode; do
  OUT=$PWD/runs/$c-all ./run-probe.sh "$c" "$ALL"
  python3 show-results.py "runs/$c-all" | sed 's/iVBOR[A-Za-z0-9+\/=]*/<png base64>/g'
done
OUT=$PWD/runs/opencode-openai-all ./run-probe.sh opencode "$ALL" openai
python3 show-results.py runs/opencode-openai-all | sed 's/iVBOR[A-Za-z0-9+\/=]*/<png base64>/g'
for sz in 49900 50100 52000; do
  for c in claude opencode; do PROBE_SIZE=$sz OUT=$PWD/runs/$c-sized-$sz ./run-probe.sh "$c" sized >/dev/null
    f=$(ls runs/$c-sized-$sz/model-log/*.json | grep -v count_tokens | tail -1)
    python3 - "$f" "$c $sz" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))["body"]
for m in b["messages"]:
    for x in (m["content"] if isinstance(m.get("content"), list) else []):
        if x.get("type") == "tool_result":
            s = x["content"] if isinstance(x["content"], str) else json.dumps(x["content"])
            print(sys.argv[2], len(s), "complete" if "SIZED-LAST-MARKER" in s else "CUT", s[:100].replace("\n", "|"))
PY
  done
done
