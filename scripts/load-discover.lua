-- scripts/load-discover.lua — wrk script for scripts/load.sh: each request is a JSON-RPC
-- tools/call of api_discover over Streamable HTTP, cycling through a few realistic queries.
-- Reads APIGATE_KEY and, for stateful mode, MCP_SESSION_ID from the environment. Counts
-- non-200 answers and tool errors (isError, e.g. RATE_LIMITED) and prints them at the end.
local key = os.getenv("APIGATE_KEY") or error("APIGATE_KEY is not set")
local session = os.getenv("MCP_SESSION_ID")

local queries = {
  "list pull requests for a repository",
  "create an issue comment",
  "get the contents of a file in a repository",
  "list workflow runs for a repository",
  "add a label to an issue",
  "merge a pull request",
  "list commits on a branch",
  "create a release",
}

local headers = {
  ["Content-Type"] = "application/json",
  ["Accept"] = "application/json, text/event-stream",
  ["MCP-Protocol-Version"] = "2025-11-25",
  ["x-api-key"] = key,
}
if session and session ~= "" then
  headers["Mcp-Session-Id"] = session
end

local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("thread_no", #threads)
end

-- JSON-RPC ids must be unique among a session's in-flight requests: every connection of a
-- stateful run shares one Mcp-Session-Id, so ids are numbered per wrk thread, never reused.
local n = 0
non200 = 0
tool_errors = 0
no_result = 0

function request()
  n = n + 1
  local id = (thread_no or 0) * 1000000000 + n
  local body = string.format(
    '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"api_discover","arguments":{"query":"%s","limit":10}}}',
    id, queries[(n % #queries) + 1])
  return wrk.format("POST", nil, headers, body)
end

function response(status, _, body)
  if status ~= 200 then
    non200 = non200 + 1
  elseif string.find(body, '"isError":true', 1, true) then
    tool_errors = tool_errors + 1
  elseif not string.find(body, '"operationId"', 1, true) then
    no_result = no_result + 1
  end
end

function done(summary, latency, requests)
  local a, b, c = 0, 0, 0
  for _, t in ipairs(threads) do
    a = a + t:get("non200")
    b = b + t:get("tool_errors")
    c = c + t:get("no_result")
  end
  io.write(string.format("checked: non200=%d tool_errors=%d no_result=%d socket_errors=%d\n",
    a, b, c, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
  io.write(string.format("latency_us: p50=%d p90=%d p99=%d max=%d mean=%.0f\n",
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
