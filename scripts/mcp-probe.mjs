// scripts/mcp-probe.mjs — raw JSON-RPC probes of an apigate Streamable HTTP endpoint, for
// scripts/conformance.sh: initializes (keeping the Mcp-Session-Id when the server issues one),
// then checks that every method apigate does not serve answers -32601 (Method not found), that
// the resources methods serve only held API responses (an empty list, one template, -32002 for
// any other URI), and that a request without the API key gets 401 before any MCP handling.
// Exits 1 on a mismatch.
//
// usage: node mcp-probe.mjs URL API_KEY
const [url, key] = process.argv.slice(2);
if (!url || !key) {
  console.error("usage: node mcp-probe.mjs URL API_KEY");
  process.exit(2);
}
const PROTOCOL = "2025-11-25";
let session = null;

async function post(body, withKey = true) {
  const headers = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": PROTOCOL,
  };
  if (withKey) headers["x-api-key"] = key;
  if (session) headers["mcp-session-id"] = session;
  const res = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
  const text = await res.text();
  let message = null;
  if ((res.headers.get("content-type") || "").includes("text/event-stream")) {
    // The JSON-RPC message is the SSE event whose data is a JSON object with our id.
    for (const line of text.split("\n")) {
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      if (!data) continue;
      const parsed = JSON.parse(data);
      if (parsed.id === body.id) message = parsed;
    }
  } else if (text) {
    message = JSON.parse(text);
  }
  return { status: res.status, headers: res.headers, message };
}

let failures = 0;
function check(ok, what, detail) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${ok ? "" : `: ${detail}`}`);
  if (!ok) failures++;
}

const unauth = await post({ jsonrpc: "2.0", id: 1, method: "ping" }, false);
check(unauth.status === 401, "no x-api-key -> 401", `HTTP ${unauth.status}`);

const init = await post({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: "apigate-probe", version: "1" } },
});
check(init.status === 200 && init.message?.result, "initialize", `HTTP ${init.status} ${JSON.stringify(init.message)}`);
session = init.headers.get("mcp-session-id");
console.log(`     session: ${session ?? "none (stateless)"}; capabilities ${JSON.stringify(init.message?.result?.capabilities)}`);
if (session) await post({ jsonrpc: "2.0", method: "notifications/initialized" });

const notServed = [
  ["prompts/list", {}],
  ["prompts/get", { name: "x" }],
  ["resources/subscribe", { uri: "file:///x" }],
  ["resources/unsubscribe", { uri: "file:///x" }],
  ["completion/complete", { ref: { type: "ref/prompt", name: "x" }, argument: { name: "a", value: "b" } }],
  ["logging/setLevel", { level: "info" }],
  ["no/such/method", {}],
];
let id = 10;
for (const [method, params] of notServed) {
  const r = await post({ jsonrpc: "2.0", id: ++id, method, params });
  check(r.message?.error?.code === -32601, `${method} -> -32601`, `HTTP ${r.status} ${JSON.stringify(r.message)}`);
}
// Resources are the binary API responses an api_execute result links to: none held yet.
const resources = await post({ jsonrpc: "2.0", id: ++id, method: "resources/list", params: {} });
check(
  Array.isArray(resources.message?.result?.resources) && resources.message.result.resources.length === 0,
  "resources/list -> []",
  JSON.stringify(resources.message),
);
const templates = await post({ jsonrpc: "2.0", id: ++id, method: "resources/templates/list", params: {} });
const uriTemplates = (templates.message?.result?.resourceTemplates || []).map((t) => t.uriTemplate).join(",");
check(uriTemplates === "apigate://responses/{id}", "resources/templates/list", JSON.stringify(templates.message));
for (const uri of ["file:///x", `apigate://responses/${"0".repeat(48)}`]) {
  const r = await post({ jsonrpc: "2.0", id: ++id, method: "resources/read", params: { uri } });
  check(r.message?.error?.code === -32002, `resources/read ${uri} -> -32002`, `HTTP ${r.status} ${JSON.stringify(r.message)}`);
}
const ping = await post({ jsonrpc: "2.0", id: ++id, method: "ping" });
check(ping.message?.result && Object.keys(ping.message.result).length === 0, "ping -> {}", JSON.stringify(ping.message));
const list = await post({ jsonrpc: "2.0", id: ++id, method: "tools/list", params: {} });
const names = (list.message?.result?.tools || []).map((t) => t.name).join(",");
check(names === "api_discover,api_schema,api_execute", "tools/list", names);
process.exit(failures > 0 ? 1 : 0);
