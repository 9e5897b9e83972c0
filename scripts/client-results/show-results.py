#!/usr/bin/env python3
"""show-results.py RUN_DIR — prints, from the model requests a run logged, the tool results the
client sent to the model (Anthropic tool_result blocks / OpenAI role=tool messages and any user
message after them), with base64 data shortened, plus which markers appear anywhere in the
request bodies, and the MCP server's request log."""
import json, sys, glob, os, re
run = sys.argv[1]
MARKERS = ["TEXT-MARKER-1\"", "TEXT-MARKER-1B", "STRUCT-MARKER-1\"", "STRUCT-MARKER-1B", "ITEM-META-MARKER-1", "RESULT-META-MARKER-1",
           "STRUCT-ONLY-MARKER-2", "RESULT-META-MARKER-2", "TEXT-MARKER-3", "iVBORw0KGgo", "TEXT-MARKER-4\"",
           "LINK-NAME-MARKER-4\"", "LINK-TITLE-MARKER-4", "LINK-DESC-MARKER-4\"", "probe://res/4\"", "LINK-NAME-MARKER-4B", "LINK-DESC-MARKER-4B",
           "probe://res/4b", "RESOURCE-BODY-MARKER", "EMBED-MARKER-5", "probe://res/5"]
def short(o):
    if isinstance(o, dict): return {k: short(v) for k, v in o.items()}
    if isinstance(o, list): return [short(v) for v in o]
    if isinstance(o, str) and len(o) > 200 and re.fullmatch(r"[A-Za-z0-9+/=]+", o): return o[:24] + f"...<base64 {len(o)} chars>"
    return o
for f in sorted(glob.glob(os.path.join(run, "model-log", "*.json"))):
    d = json.load(open(f)); b = d.get("body") or {}
    raw = json.dumps(b)
    # markers, with escaped quotes handled: look in the raw JSON text (markers inside JSON strings appear as \" ...)
    found = [m for m in MARKERS if m.rstrip('"') in raw and (not m.endswith('"') or re.search(re.escape(m.rstrip('"')) + r'(?![0-9A-Z])', raw))]
    print(f"=== {os.path.basename(f)} {d['url']} model={b.get('model')} stream={b.get('stream')} markers={found}")
    msgs = b.get("messages") or []
    for i, m in enumerate(msgs):
        c = m.get("content")
        if m.get("role") == "tool":
            print(f"  [{i}] role=tool:", json.dumps(short(m), ensure_ascii=False))
        elif isinstance(c, list):
            for blk in c:
                if blk.get("type") == "tool_result":
                    print(f"  [{i}] {m['role']} tool_result:", json.dumps(short(blk), ensure_ascii=False))
        if i > 0 and (msgs[i-1].get("role") == "tool" or (isinstance(msgs[i-1].get("content"), list) and any(x.get("type") in ("tool_result",) for x in msgs[i-1]["content"]))):
            print(f"  [{i}] message after the tool results ({m.get('role')}):", json.dumps(short(c), ensure_ascii=False)[:3000])
        if isinstance(c, list) and any(x.get("type") == "tool_result" for x in c):
            others = [x for x in c if x.get("type") != "tool_result"]
            if others: print(f"  [{i}] other blocks in the same user message:", json.dumps(short(others), ensure_ascii=False)[:3000])
mcp = os.path.join(run, "mcp.log")
if os.path.exists(mcp):
    print("=== MCP server requests:")
    for line in open(mcp):
        e = json.loads(line); print("  ", e["what"], json.dumps(e.get("x"))[:300])
