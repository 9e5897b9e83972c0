-- scripts/load-mcp.lua — wrk script for scripts/load.sh: each request is one JSON-RPC message
-- POSTed to /mcp over Streamable HTTP. LOAD_TOOL picks it:
--   discover  tools/call api_discover (limit 10), cycling through realistic GitHub queries
--   execute   tools/call api_execute getPetById with a varying petId (needs an upstream)
--   dryrun    tools/call api_execute with dryRun: LOAD_OPERATION (default getPetById) and
--             LOAD_ARGUMENTS, the JSON of its other arguments (default {"pathParams":{"petId":1}});
--             validation and the request apigate would send, no upstream call
--   list      tools/list: the MCP/HTTP stack alone, no tool work (the baseline)
--   echo      tools/call echo {"message": "hello"} (scripts/ts-echo.mjs, the TypeScript SDK)
-- Reads APIGATE_KEY, for stateful mode MCP_SESSION_ID, and for `apigate serve` the user
-- session's token APIGATE_SESSION_TOKEN (sent as x-session-token) from the environment. Every answer
-- is checked; non-200 answers, tool errors (isError, e.g. RATE_LIMITED) and answers without
-- the expected content are counted and printed at the end with the latency percentiles.
local key = os.getenv("APIGATE_KEY") or error("APIGATE_KEY is not set")
local session = os.getenv("MCP_SESSION_ID")
local session_token = os.getenv("APIGATE_SESSION_TOKEN")
local tool = os.getenv("LOAD_TOOL") or "discover"

-- LOAD_QUERY replaces them with one query (scripts/floor.sh: "find a pet by its id" on Petstore).
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

if os.getenv("LOAD_QUERY") and os.getenv("LOAD_QUERY") ~= "" then
  queries = { os.getenv("LOAD_QUERY") }
end

-- LOAD_QUERIES_FILE: one query per line (plain text, no quotes or backslashes), each sent once
-- with a tag that makes it distinct from every earlier request (the run's start second and the
-- pass over the file), so no cache of recent queries answers: what a new query costs
-- (scripts/discover-cpu.sh).
local distinct = os.getenv("LOAD_QUERIES_FILE")
local run_tag = tostring(os.time())
if distinct and distinct ~= "" then
  queries = {}
  for line in io.lines(distinct) do
    if line ~= "" then table.insert(queries, line) end
  end
  if #queries == 0 then error("LOAD_QUERIES_FILE " .. distinct .. " has no queries") end
end

local operation = os.getenv("LOAD_OPERATION") or "getPetById"
local dry_arguments = string.sub(os.getenv("LOAD_ARGUMENTS") or '{"pathParams":{"petId":1}}', 2, -2)

local headers = {
  ["Content-Type"] = "application/json",
  ["Accept"] = "application/json, text/event-stream",
  ["MCP-Protocol-Version"] = "2025-11-25",
  ["x-api-key"] = key,
}
if session and session ~= "" then
  headers["Mcp-Session-Id"] = session
end
if session_token and session_token ~= "" then
  headers["x-session-token"] = session_token
end

local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("thread_no", #threads)
end

-- What a good answer must contain (the tool result is JSON text inside the JSON-RPC answer,
-- so its quotes arrive escaped).
local expected = ({
  discover = '"operationId',
  execute = '\\"status\\":200',
  list = '"api_execute"',
  dryrun = '\\"dryRun\\":true',
  echo = '"text":"hello"',
})[tool] or error("LOAD_TOOL must be discover, execute, dryrun, list or echo, not " .. tool)

-- JSON-RPC ids must be unique among a session's in-flight requests: every connection of a
-- stateful run shares one Mcp-Session-Id, so ids are numbered per wrk thread, never reused.
local n = 0
non200 = 0
tool_errors = 0
no_result = 0

local function body(id)
  if tool == "list" then
    return string.format('{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{}}', id)
  elseif tool == "echo" then
    return string.format(
      '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}',
      id)
  elseif tool == "dryrun" then
    return string.format(
      '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"api_execute","arguments":{"operationId":"%s","dryRun":true,%s}}}',
      id, operation, dry_arguments)
  elseif tool == "execute" then
    return string.format(
      '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"api_execute","arguments":{"operationId":"getPetById","pathParams":{"petId":%d}}}}',
      id, 1 + n % 1000)
  end
  local query = queries[(n % #queries) + 1]
  if distinct and distinct ~= "" then
    query = string.format("%s v%s%d", query, run_tag, math.floor(n / #queries))
  end
  return string.format(
    '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"api_discover","arguments":{"query":"%s","limit":10}}}',
    id, query)
end

function request()
  n = n + 1
  return wrk.format("POST", nil, headers, body((thread_no or 0) * 1000000000 + n))
end

function response(status, _, body)
  if status ~= 200 then
    non200 = non200 + 1
  elseif string.find(body, '"isError":true', 1, true) then
    tool_errors = tool_errors + 1
  elseif not string.find(body, expected, 1, true) then
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
