#!/usr/bin/env python3
"""Floods a running `apigate dev` the ways issue 15 found it could be exhausted, and prints its
RSS before and after each flood (read from /proc/PID/status), so a build before and after the
limits can be compared on one machine.

    python3 scripts/flood.py BINARY [--model DIR] [--scale 1.0]

Starts BINARY (`apigate`) in dev mode on the repository's petstore spec, with `--embedding-model`
when --model is given (the query-vector cache only exists with a model), then, one after the
other:
  metrics   20,000 requests with made-up HTTP methods, no key (item 4)
  queries   40 distinct 1 MB `api_discover` queries (item 6; needs --model)
  sse       a legacy SSE client that never reads its stream posts 2,500 tools/list (item 7)
  sessions  5,000 `initialize` calls with one key (item 8)
--scale multiplies every count. Standard library only.
"""

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import time

KEY = "flood-key-0123456789abcdef"
HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = os.path.join(HERE, "..", "tests", "data", "specs", "petstore-3.0.json")
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "flood", "version": "1"}}}


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def start(binary, model):
    port = free_port()
    args = [binary, "dev", "--spec", SPEC, "--listen", f"127.0.0.1:{port}", "--api-key", KEY]
    if model:
        args += ["--embedding-model", model]
    env = dict(os.environ, RUST_LOG="warn")
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    sys.exit("apigate did not start")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def post_mcp(conn, body, session=None):
    headers = {"x-api-key": KEY, "content-type": "application/json",
               "accept": "application/json, text/event-stream"}
    if session:
        headers["mcp-session-id"] = session
    conn.request("POST", "/mcp", json.dumps(body), headers)
    r = conn.getresponse()
    data = r.read()
    return r.status, r.getheader("mcp-session-id"), data


def flood_metrics(port, n):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for i in range(n):
        try:
            conn.request(f"FLOOD{i}", "/nowhere")
            conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    return f"{n} made-up methods"


def flood_queries(port, n):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    status, session, _ = post_mcp(conn, INIT)
    post_mcp(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    refused = 0
    for i in range(n):
        query = f"{i} " + ("find available pets " * 55_000)[:1_000_000]
        _, _, data = post_mcp(conn, {"jsonrpc": "2.0", "id": i + 2, "method": "tools/call",
                                     "params": {"name": "api_discover",
                                                "arguments": {"query": query}}}, session)
        refused += b"INVALID_ARGUMENTS" in data
    return f"{n} queries of 1 MB, {refused} refused"


def flood_sse(port, n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET /sse HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {KEY}\r\n\r\n".encode())
    seen = b""
    while b"sessionId=" not in seen or b"\n" not in seen.split(b"sessionId=", 1)[1]:
        seen += s.recv(4096)
    endpoint = seen.split(b"data: ")[1].split(b"\n")[0].decode().strip()
    # From here on the stream is never read again.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    statuses = {}

    def post(body):
        conn.request("POST", endpoint, json.dumps(body),
                     {"x-api-key": KEY, "content-type": "application/json"})
        r = conn.getresponse()
        r.read()
        statuses[r.status] = statuses.get(r.status, 0) + 1

    post(INIT)
    post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    for i in range(n):
        post({"jsonrpc": "2.0", "id": i + 2, "method": "tools/list"})
    s.close()
    return f"{n} unread tools/list, answers {statuses}"


def flood_sessions(port, n):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    statuses = {}
    for _ in range(n):
        status, _, _ = post_mcp(conn, INIT)
        statuses[status] = statuses.get(status, 0) + 1
    return f"{n} initialize, answers {statuses}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("--model")
    p.add_argument("--scale", type=float, default=1.0)
    a = p.parse_args()
    proc, port = start(a.binary, a.model)
    k = lambda n: max(1, int(n * a.scale))
    floods = [("metrics", flood_metrics, k(20_000)), ("sse", flood_sse, k(2_500)),
              ("sessions", flood_sessions, k(5_000))]
    if a.model:
        floods.insert(1, ("queries", flood_queries, k(40)))
    print(f"{a.binary}: RSS at start {rss_mb(proc.pid):.0f} MB")
    try:
        for name, flood, n in floods:
            before = rss_mb(proc.pid)
            started = time.time()
            what = flood(port, n)
            time.sleep(1)
            print(f"  {name:9} {before:6.0f} -> {rss_mb(proc.pid):6.0f} MB  "
                  f"({what}; {time.time() - started:.0f} s)")
    finally:
        proc.kill()


if __name__ == "__main__":
    main()
