// scripts/ts-echo.mjs — the reference point of scripts/floor.sh: the official MCP TypeScript
// SDK serving one trivial `echo` tool over stateless Streamable HTTP with JSON responses (a
// fresh server and transport per request, as the SDK's stateless example does), on
// 127.0.0.1:PORT. SDK_DIR is the folder of the installed @modelcontextprotocol/sdk package.
//
//   SDK_DIR=…/node_modules/@modelcontextprotocol/sdk node scripts/ts-echo.mjs PORT
import http from "node:http";
import path from "node:path";
import { pathToFileURL } from "node:url";

const sdk = process.env.SDK_DIR;
if (!sdk) throw new Error("SDK_DIR is not set");
const load = (p) => import(pathToFileURL(path.join(sdk, "dist/esm", p)).href);
const { McpServer } = await load("server/mcp.js");
const { StreamableHTTPServerTransport } = await load("server/streamableHttp.js");
// zod is the SDK's own dependency, installed beside it.
const { z } = await import(pathToFileURL(path.join(sdk, "../../zod/index.js")).href);

function makeServer() {
  const server = new McpServer({ name: "ts-echo", version: "1.0.0" });
  server.registerTool(
    "echo",
    { description: "Echoes its message", inputSchema: { message: z.string() } },
    async ({ message }) => ({ content: [{ type: "text", text: message }] }),
  );
  return server;
}

const port = Number(process.argv[2] ?? 0);
const httpServer = http.createServer(async (req, res) => {
  if (req.method !== "POST" || req.url !== "/mcp") {
    res.writeHead(req.url === "/health" ? 200 : 404).end("ok");
    return;
  }
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  const server = makeServer();
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  res.on("close", () => {
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
});
httpServer.listen(port, "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${httpServer.address().port}/mcp`);
});
