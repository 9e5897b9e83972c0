// probe-mcp-server.mjs — a stdio MCP server (official TypeScript SDK, low-level Server) whose
// tools return results with distinct markers in each part, to see what an MCP client passes on
// to the model. Every JSON-RPC request it receives is appended to $PROBE_MCP_LOG.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  ListToolsRequestSchema, CallToolRequestSchema,
  ListResourcesRequestSchema, ReadResourceRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { appendFileSync } from "node:fs";

const LOG = process.env.PROBE_MCP_LOG || "/dev/null";
const log = (what, x) => appendFileSync(LOG, JSON.stringify({ t: new Date().toISOString(), what, x }) + "\n");

// A 16x16 solid red PNG (valid, so image pipelines that decode it do not choke).
import { deflateSync } from "node:zlib";
function png(w, h, rgb) {
  const crcTable = Array.from({ length: 256 }, (_, n) => { let c = n; for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1; return c >>> 0; });
  const crc = (b) => { let c = 0xffffffff; for (const x of b) c = crcTable[(c ^ x) & 0xff] ^ (c >>> 8); return (c ^ 0xffffffff) >>> 0; };
  const chunk = (type, data) => { const len = Buffer.alloc(4); len.writeUInt32BE(data.length); const td = Buffer.concat([Buffer.from(type), data]); const c = Buffer.alloc(4); c.writeUInt32BE(crc(td)); return Buffer.concat([len, td, c]); };
  const ihdr = Buffer.alloc(13); ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4); ihdr[8] = 8; ihdr[9] = 2; ihdr[10] = 0; ihdr[11] = 0; ihdr[12] = 0;
  const row = Buffer.concat([Buffer.from([0]), Buffer.concat(Array(w).fill(Buffer.from(rgb)))]);
  const raw = Buffer.concat(Array(h).fill(row));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr), chunk("IDAT", deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}
const PNG_B64 = png(16, 16, [255, 0, 0]).toString("base64");

const objSchema = { type: "object", properties: {}, additionalProperties: false };
const outSchema = { type: "object", properties: { s: { type: "string" } }, required: ["s"] };
const TOOLS = [
  { name: "both", description: "returns text content and structuredContent (and _meta)", inputSchema: objSchema, outputSchema: outSchema },
  { name: "both_noschema", description: "text content and structuredContent, no outputSchema declared", inputSchema: objSchema },
  { name: "struct_only", description: "returns structuredContent only (content is empty)", inputSchema: objSchema, outputSchema: outSchema },
  { name: "image", description: "returns a text item and an image item", inputSchema: objSchema },
  { name: "link", description: "returns a text item and a resource_link item", inputSchema: objSchema },
  { name: "link_only", description: "returns only a resource_link item", inputSchema: objSchema },
  { name: "embedded", description: "returns an embedded resource item (type resource)", inputSchema: objSchema },
  { name: "text_meta", description: "text only, with _meta on the item and on the result", inputSchema: objSchema },
  { name: "struct_image", description: "text + image + structuredContent", inputSchema: objSchema, outputSchema: outSchema },
  { name: "error_struct", description: "isError with text and structuredContent", inputSchema: objSchema },
  { name: "big", description: "about 100 KB: compact JSON text + the same structuredContent", inputSchema: objSchema },
  { name: "big_pretty", description: "about 100 KB: pretty-printed JSON text + the same structuredContent", inputSchema: objSchema },
  { name: "sized", description: "compact JSON text + the same structuredContent, about $PROBE_SIZE characters", inputSchema: objSchema },
  { name: "sized_meta", description: "as sized; the tool's _meta carries anthropic/maxResultSizeChars 500000", inputSchema: objSchema, _meta: { "anthropic/maxResultSizeChars": 500000 } },
  { name: "error_struct_only", description: "isError with structuredContent and no content", inputSchema: objSchema },
  { name: "big_text_pretty", description: "about 100 KB: pretty-printed JSON text only", inputSchema: objSchema },
];
const BIG = { items: Array.from({ length: 1000 }, (_, i) => ({ id: i, name: `item-${i}`, tag: i === 999 ? "BIG-LAST-MARKER" : "x", v: [i, i * 2, i * 3] })) };
const RESULTS = {
  both: {
    content: [{ type: "text", text: "TEXT-MARKER-1", _meta: { im: "ITEM-META-MARKER-1" } }],
    structuredContent: { s: "STRUCT-MARKER-1" },
    _meta: { m: "RESULT-META-MARKER-1" },
  },
  both_noschema: {
    content: [{ type: "text", text: "TEXT-MARKER-1B" }],
    structuredContent: { s: "STRUCT-MARKER-1B" },
  },
  struct_only: { content: [], structuredContent: { s: "STRUCT-ONLY-MARKER-2" }, _meta: { m: "RESULT-META-MARKER-2" } },
  image: {
    content: [
      { type: "text", text: "TEXT-MARKER-3" },
      { type: "image", data: PNG_B64, mimeType: "image/png" },
    ],
  },
  link: {
    content: [
      { type: "text", text: "TEXT-MARKER-4" },
      { type: "resource_link", uri: "probe://res/4", name: "LINK-NAME-MARKER-4", title: "LINK-TITLE-MARKER-4", description: "LINK-DESC-MARKER-4", mimeType: "application/json" },
    ],
  },
  link_only: {
    content: [
      { type: "resource_link", uri: "probe://res/4b", name: "LINK-NAME-MARKER-4B", description: "LINK-DESC-MARKER-4B", mimeType: "text/plain" },
    ],
  },
  embedded: {
    content: [
      { type: "resource", resource: { uri: "probe://res/5", mimeType: "application/json", text: "{\"e\":\"EMBED-MARKER-5\"}" } },
    ],
  },
  text_meta: { content: [{ type: "text", text: "TEXT-MARKER-6", _meta: { im: "ITEM-META-MARKER-6" } }], _meta: { m: "RESULT-META-MARKER-6" } },
  struct_image: {
    content: [{ type: "text", text: "TEXT-MARKER-7" }, { type: "image", data: PNG_B64, mimeType: "image/png" }],
    structuredContent: { s: "STRUCT-MARKER-7" },
  },
  error_struct: { isError: true, content: [{ type: "text", text: "ERROR-TEXT-MARKER-8" }], structuredContent: { s: "ERROR-STRUCT-MARKER-8" } },
  big: { content: [{ type: "text", text: JSON.stringify(BIG) }], structuredContent: BIG },
  big_pretty: { content: [{ type: "text", text: JSON.stringify(BIG, null, 2) }], structuredContent: BIG },
  get sized() {
    const want = Number(process.env.PROBE_SIZE || 10000);
    const items = [];
    let len = 11;
    for (let i = 0; len < want; i++) { const it = { id: i, name: `item-${i}`, tag: "x", v: [i, i * 2, i * 3] }; items.push(it); len += JSON.stringify(it).length + 1; }
    items[items.length - 1].tag = "SIZED-LAST-MARKER";
    const sc = { items };
    return { content: [{ type: "text", text: JSON.stringify(sc) }], structuredContent: sc };
  },
  get sized_meta() { return this.sized; },
  error_struct_only: { isError: true, content: [], structuredContent: { error: "ERROR-STRUCT-ONLY-MARKER-9" } },
  big_text_pretty: { content: [{ type: "text", text: JSON.stringify(BIG, null, 2) }] },
};

const server = new Server({ name: "probe", version: "1.0.0" }, { capabilities: { tools: {}, resources: {} } });
server.setRequestHandler(ListToolsRequestSchema, async (req) => { log("tools/list", req.params); return { tools: TOOLS }; });
server.setRequestHandler(CallToolRequestSchema, async (req) => {
  log("tools/call", req.params);
  const r = RESULTS[req.params.name];
  if (!r) return { content: [{ type: "text", text: "unknown tool" }], isError: true };
  return r;
});
server.setRequestHandler(ListResourcesRequestSchema, async (req) => {
  log("resources/list", req.params);
  return { resources: [{ uri: "probe://res/4", name: "LISTED-RES-MARKER", mimeType: "application/json" }] };
});
server.setRequestHandler(ReadResourceRequestSchema, async (req) => {
  log("resources/read", req.params);
  return { contents: [{ uri: req.params.uri, mimeType: "application/json", text: `{"r":"RESOURCE-BODY-MARKER for ${req.params.uri}"}` }] };
});
log("start", { pid: process.pid, argv: process.argv });
await server.connect(new StdioServerTransport());
