// @modelcontextprotocol/server-everything (pinned in package.json / package-lock.json) in its
// Streamable HTTP mode, bound to one host, for ssegate's interop tests.
//
//   node server.cjs [--port N] [--host H]
//
// Port: --port, else $PORT, else 0 (any free port); host: --host, default 127.0.0.1. The package
// itself reads only $PORT (default 3001) and listens on every interface; loopback.cjs (required
// first, as `node --require ./loopback.cjs` would) makes it bind only H and prints
// `listening http://HOST:PORT/mcp` once it listens. Everything else is the package's own:
// sessions (one McpServer, InMemoryTaskStore and event store per session), its tools, and the
// task tool `simulate-research-query` (SEP-1686 tasks, 2025-11-25: taskSupport 'required').
"use strict";
const path = require("node:path");
const { pathToFileURL } = require("node:url");

const args = process.argv.slice(2);
const option = name => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : undefined;
};
process.env.SSEGATE_LISTEN_HOST = option("--host") ?? "127.0.0.1";
process.env.PORT = String(Number(option("--port") ?? process.env.PORT ?? 0));
require("./loopback.cjs");

// The package's bin picks its transport from argv[2].
process.argv = [process.argv[0], "mcp-server-everything", "streamableHttp"];
const entry = path.join(
  __dirname,
  "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
);
import(pathToFileURL(entry).href).catch(e => {
  console.error("server-everything failed to start:", e);
  process.exit(1);
});
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => process.exit(0));
}
