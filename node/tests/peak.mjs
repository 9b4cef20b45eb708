// Run as a child process by mcp-memory.test.js: `node peak.mjs guarded|sdk URL SIZE [SEED]`
// connects one SDK `Client` over ssegate's `GuardedTransport` ("guarded") or the SDK's own
// `StreamableHTTPClientTransport` ("sdk"), makes ONE `big_result` call of SIZE bytes, and prints
// one JSON line: the resident memory right after connect (`baseline_kib`), the process's peak
// resident memory (`process.resourceUsage().maxRSS`, KiB) before the call and after it, and the
// result text's length and SHA-256 (the parent compares it with the kit's expected text, so no
// second copy of the text is held here). A failed call prints `{"error": ...}` and exits 0.
import { createRequire } from "node:module";
import crypto from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const require = createRequire(import.meta.url);
const { GuardedTransport, typed } = require("../mcp.js");

const [which, url, sizeArg, seedArg = "1"] = process.argv.slice(2);
const size = Number(sizeArg);
const seed = Number(seedArg);

const transport =
  which === "guarded"
    ? new GuardedTransport(url)
    : which === "sdk"
      ? new StreamableHTTPClientTransport(new URL(url))
      : null;
if (transport === null) throw new Error(`transport: guarded or sdk, not ${which}`);

const client = new Client({ name: "ssegate-node-peak", version: "0" });
await client.connect(transport);
const baseline = process.memoryUsage.rss();
const before = process.resourceUsage().maxRSS;
const report = { transport: which, size, baseline_kib: Math.round(baseline / 1024), before_kib: before };
try {
  const result = await client.callTool({ name: "big_result", arguments: { size, seed } }, undefined, {
    timeout: 120_000,
  });
  const text = result.content?.[0]?.text ?? "";
  report.is_error = Boolean(result.isError);
  report.length = text.length;
  report.sha256 = crypto.createHash("sha256").update(text).digest("hex");
} catch (error) {
  const e = typed(error);
  report.error = `${e?.name ?? "Error"} ${e?.code ?? ""}: ${e?.message ?? e}`;
}
report.peak_kib = process.resourceUsage().maxRSS;
await client.close();
console.log(JSON.stringify(report));
