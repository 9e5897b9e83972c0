// scripts/header-proxy.mjs — a tiny reverse proxy for tests: adds one request header (the
// apigate API key) and forwards everything else unchanged, Host and Origin included, so the
// server behind it still sees what the client sent (its DNS-rebinding check stays under test).
// Responses, SSE streams included, are streamed back as they arrive.
//
// usage: node header-proxy.mjs LISTEN_PORT UPSTREAM_PORT   (header from PROXY_HEADER_NAME /
//        PROXY_HEADER_VALUE; both bind to 127.0.0.1 only). Prints "listening PORT" when ready.
import http from "node:http";

const [listenPort, upstreamPort] = process.argv.slice(2).map(Number);
const name = (process.env.PROXY_HEADER_NAME || "x-api-key").toLowerCase();
const value = process.env.PROXY_HEADER_VALUE;
if (!Number.isInteger(listenPort) || !Number.isInteger(upstreamPort) || !value) {
  console.error("usage: PROXY_HEADER_VALUE=... node header-proxy.mjs LISTEN_PORT UPSTREAM_PORT");
  process.exit(2);
}
const agent = new http.Agent({ keepAlive: true });

const server = http.createServer((req, res) => {
  // rawHeaders keeps every header as sent (Host, Origin, repeated headers); only ours is set.
  const headers = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i].toLowerCase() !== name) headers.push(req.rawHeaders[i], req.rawHeaders[i + 1]);
  }
  headers.push(name, value);
  const upstream = http.request(
    { host: "127.0.0.1", port: upstreamPort, method: req.method, path: req.url, headers, agent, setHost: false },
    (up) => {
      res.writeHead(up.statusCode, up.statusMessage, up.rawHeaders);
      res.flushHeaders();
      up.pipe(res);
    },
  );
  upstream.on("error", (e) => {
    if (!res.headersSent) {
      res.writeHead(502, { "content-type": "text/plain" });
    }
    res.end(`proxy: ${e.message}\n`);
  });
  // A client that goes away (e.g. closes an SSE stream) closes the upstream request too.
  res.on("close", () => {
    if (!res.writableFinished) upstream.destroy();
  });
  req.pipe(upstream);
});
server.listen(listenPort, "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(0));
