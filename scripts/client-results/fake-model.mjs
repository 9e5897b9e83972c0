// fake-model.mjs — a fake model API on 127.0.0.1 for probing MCP clients.
// Speaks the Anthropic Messages API (POST /v1/messages, SSE when "stream": true) and the
// OpenAI Chat Completions API (POST /v1/chat/completions, SSE when "stream": true).
// Turn logic: if the conversation already holds tool results -> answer text "PROBE-DONE";
// else if the request offers the probe tools -> call every tool named in $PROBE_CALL
// (comma list of MCP tool names, e.g. "both,image"), in parallel, with input {};
// else (title generation and the like) -> answer text "ok".
// Every request (method, path, headers, body) is written to $PROBE_LOG_DIR/NNN-<path>.json.
// Prints "listening on PORT" once ready. Usage: node fake-model.mjs [port]
import http from "node:http";
import { writeFileSync, mkdirSync } from "node:fs";

const DIR = process.env.PROBE_LOG_DIR || "./model-log";
mkdirSync(DIR, { recursive: true });
const CALL = (process.env.PROBE_CALL || "both").split(",").filter(Boolean);
let n = 0;

function pickTools(names) {
  const out = [];
  for (const want of CALL) {
    const hit = names.find((x) => x === `mcp__probe__${want}` || x === `probe_${want}`);
    if (hit) out.push(hit);
  }
  return out;
}

function anthropic(req, body, res) {
  const msgs = body.messages || [];
  const hasToolResult = msgs.some((m) => Array.isArray(m.content) && m.content.some((c) => c.type === "tool_result"));
  const toolNames = (body.tools || []).map((t) => t.name).filter(Boolean);
  const calls = hasToolResult ? [] : pickTools(toolNames);
  const blocks = calls.length
    ? calls.map((name, i) => ({ type: "tool_use", id: `toolu_probe_${n}_${i}`, name, input: {} }))
    : [{ type: "text", text: hasToolResult ? "PROBE-DONE" : "ok" }];
  const stop = calls.length ? "tool_use" : "end_turn";
  const id = `msg_probe_${n}`;
  const model = body.model || "claude-sonnet-4-5";
  const usage = { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  if (!body.stream) {
    res.writeHead(200, { "content-type": "application/json", "request-id": `req_${n}` });
    res.end(JSON.stringify({ id, type: "message", role: "assistant", model, content: blocks, stop_reason: stop, stop_sequence: null, usage }));
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", "request-id": `req_${n}` });
  const ev = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  ev("message_start", { message: { id, type: "message", role: "assistant", model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } });
  blocks.forEach((b, index) => {
    if (b.type === "text") {
      ev("content_block_start", { index, content_block: { type: "text", text: "" } });
      ev("content_block_delta", { index, delta: { type: "text_delta", text: b.text } });
    } else {
      ev("content_block_start", { index, content_block: { type: "tool_use", id: b.id, name: b.name, input: {} } });
      ev("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: "{}" } });
    }
    ev("content_block_stop", { index });
  });
  ev("message_delta", { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 5 } });
  ev("message_stop", {});
  res.end();
}

function openai(req, body, res) {
  const msgs = body.messages || [];
  const hasToolResult = msgs.some((m) => m.role === "tool");
  const toolNames = (body.tools || []).map((t) => t.function?.name).filter(Boolean);
  const calls = hasToolResult ? [] : pickTools(toolNames);
  const id = `chatcmpl_probe_${n}`;
  const model = body.model || "probe";
  const created = Math.floor(Date.now() / 1000);
  const toolCalls = calls.map((name, i) => ({ index: i, id: `call_probe_${n}_${i}`, type: "function", function: { name, arguments: "{}" } }));
  const text = calls.length ? null : hasToolResult ? "PROBE-DONE" : "ok";
  const finish = calls.length ? "tool_calls" : "stop";
  const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
  if (!body.stream) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ id, object: "chat.completion", created, model, choices: [{ index: 0, message: { role: "assistant", content: text, ...(calls.length ? { tool_calls: toolCalls } : {}) }, finish_reason: finish }], usage }));
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const chunk = (delta, finish_reason = null, extra = {}) =>
    res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [{ index: 0, delta, finish_reason }], ...extra })}\n\n`);
  chunk({ role: "assistant", content: "" });
  if (calls.length) chunk({ tool_calls: toolCalls });
  else chunk({ content: text });
  chunk({}, finish, { usage });
  res.write("data: [DONE]\n\n");
  res.end();
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    n += 1;
    const raw = Buffer.concat(chunks).toString("utf8");
    let body = null;
    try { body = raw ? JSON.parse(raw) : null; } catch { body = { unparsed: raw }; }
    const tag = req.url.replace(/[^a-z0-9]+/gi, "_").slice(0, 60);
    writeFileSync(`${DIR}/${String(n).padStart(3, "0")}${tag}.json`, JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body }, null, 2));
    const path = req.url.split("?")[0];
    if (req.method === "POST" && /\/messages$/.test(path)) return anthropic(req, body || {}, res);
    if (req.method === "POST" && /\/chat\/completions$/.test(path)) return openai(req, body || {}, res);
    if (/\/messages\/count_tokens$/.test(path)) {
      // A rough stand-in for the real tokenizer: 1 token per 3.5 characters of the messages' JSON
      // ($PROBE_CHARS_PER_TOKEN to change it).
      const cpt = Number(process.env.PROBE_CHARS_PER_TOKEN || 3.5);
      const tokens = Math.ceil(JSON.stringify((body && body.messages) || []).length / cpt);
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ input_tokens: tokens }));
    }
    if (/\/models$/.test(path)) { res.writeHead(200, { "content-type": "application/json" }); return res.end('{"data":[{"id":"claude-sonnet-4-5","type":"model"}],"object":"list"}'); }
    res.writeHead(404, { "content-type": "application/json" });
    res.end('{"type":"error","error":{"type":"not_found_error","message":"fake-model: no such endpoint"}}');
  });
});
server.listen(Number(process.argv[2] || 0), "127.0.0.1", () => console.log(`listening on ${server.address().port}`));
