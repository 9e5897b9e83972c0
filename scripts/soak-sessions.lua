-- scripts/soak-sessions.lua — wrk script for scripts/soak.sh: every wrk connection runs MCP
-- sessions over stateful Streamable HTTP, one after the other, so the soak keeps creating and
-- dropping sessions instead of reusing one:
--   initialize → notifications/initialized → CALLS tool calls (api_discover and api_execute
--   in turn) → DELETE /mcp, except every ABANDON-th session, which is left open and must
--   be expired by the server's idle timeout (rmcp's 5 minutes).
-- wrk runs one Lua state per thread and soak.sh gives every thread exactly one connection
-- (-t N -c N), so the state below is one connection's. Reads APIGATE_KEY, SOAK_CALLS (20)
-- and SOAK_ABANDON (4). Prints what it checked at the end (all must be zero but the counts).
local key = os.getenv("APIGATE_KEY") or error("APIGATE_KEY is not set")
local calls_per_session = tonumber(os.getenv("SOAK_CALLS") or "20")
local abandon_every = tonumber(os.getenv("SOAK_ABANDON") or "4")

local queries = {
  "list pull requests for a repository",
  "get an issue",
  "create an issue comment",
  "list workflow runs for a repository",
  "merge a pull request",
  "list commits on a branch",
}

local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("thread_no", #threads)
end

local state = "init" -- init | initialized | call | delete
local session = nil
local calls = 0
local n = 0
sessions = 0
deleted = 0
abandoned = 0
bad_init = 0
bad_status = 0
tool_errors = 0
no_result = 0

local function headers(with_session)
  local h = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
    ["MCP-Protocol-Version"] = "2025-11-25",
    ["x-api-key"] = key,
  }
  if with_session then
    h["Mcp-Session-Id"] = session
  end
  return h
end

function request()
  n = n + 1
  if state == "init" then
    return wrk.format("POST", nil, headers(false), string.format(
      '{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"apigate-soak","version":"1"}}}',
      n))
  elseif state == "initialized" then
    return wrk.format("POST", nil, headers(true),
      '{"jsonrpc":"2.0","method":"notifications/initialized"}')
  elseif state == "delete" then
    return wrk.format("DELETE", nil, headers(true))
  end
  local body
  if calls % 2 == 0 then
    body = string.format(
      '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"api_discover","arguments":{"query":"%s","limit":10}}}',
      n, queries[(n % #queries) + 1])
  else
    body = string.format(
      '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"api_execute","arguments":{"operationId":"issues/get","pathParams":{"owner":"octo-org","repo":"apigate","issue_number":%d}}}}',
      n, 1 + n % 5000)
  end
  return wrk.format("POST", nil, headers(true), body)
end

local function after_calls()
  if abandon_every > 0 and sessions % abandon_every == 0 then
    abandoned = abandoned + 1
    state = "init"
  else
    state = "delete"
  end
end

function response(status, hdrs, body)
  if state == "init" then
    local id = hdrs["mcp-session-id"] or hdrs["Mcp-Session-Id"]
    if status ~= 200 or not id then
      bad_init = bad_init + 1
      return
    end
    session = id
    sessions = sessions + 1
    calls = 0
    state = "initialized"
  elseif state == "initialized" then
    if status ~= 202 then bad_status = bad_status + 1 end
    state = "call"
  elseif state == "delete" then
    if status ~= 202 then bad_status = bad_status + 1 else deleted = deleted + 1 end
    state = "init"
  else
    if status ~= 200 then
      bad_status = bad_status + 1
    elseif string.find(body, '"isError":true', 1, true) then
      tool_errors = tool_errors + 1
    elseif calls % 2 == 0 and not string.find(body, '"operationId', 1, true) then
      no_result = no_result + 1
    elseif calls % 2 == 1 and not string.find(body, '\\"status\\":200', 1, true) then
      no_result = no_result + 1
    end
    calls = calls + 1
    if calls >= calls_per_session then after_calls() end
  end
end

function done(summary, latency, requests)
  local t = {}
  for _, name in ipairs({ "sessions", "deleted", "abandoned", "bad_init", "bad_status",
    "tool_errors", "no_result" }) do
    t[name] = 0
    for _, th in ipairs(threads) do t[name] = t[name] + th:get(name) end
  end
  io.write(string.format(
    "sessions: opened=%d deleted=%d abandoned=%d\n", t.sessions, t.deleted, t.abandoned))
  io.write(string.format(
    "checked: bad_init=%d bad_status=%d tool_errors=%d no_result=%d socket_errors=%d\n",
    t.bad_init, t.bad_status, t.tool_errors, t.no_result,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
  io.write(string.format("latency_us: p50=%d p90=%d p99=%d max=%d mean=%.0f\n",
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
