// What a TypeScript MCP client does with the installed package: `GuardedTransport` from
// "ssegate/mcp" under the official SDK's `Client` (both installed from their tarballs in the
// folder this file is copied into), against the official TypeScript SDK's server
// (interop/ts/server.mjs): a 4 MiB result intact; then through the test kit's fault proxy, which
// cuts the answer mid-event at several offsets: each call intact or the typed OutcomeUnknown,
// never torn, never a hang (each call has 60 s). The servers are started by the checkout's
// node/tests/kit.js (the kit binary: $SSEGATE_TESTKIT).
//
//   SSEGATE_TESTKIT=KIT node ts_host.mjs REPO      REPO: the checkout
import path from "node:path";
import { createRequire } from "node:module";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { GuardedTransport, typed, OutcomeUnknown } from "ssegate/mcp";

const [repo] = process.argv.slice(2);
const { Kit, SdkServer, pattern } = createRequire(import.meta.url)(path.join(repo, "node", "tests", "kit.js"));
const MIB = 1 << 20;

const within = (promise, what) =>
  Promise.race([promise, new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer in 60 s`)), 60_000))]);

async function call(url, size) {
  const client = new Client({ name: "ts_host", version: "0" });
  await within(client.connect(new GuardedTransport(url)), "connect");
  try {
    const result = await within(client.callTool({ name: "big_result", arguments: { size } }), "big_result");
    if (result.content[0].text !== pattern(size)) throw new Error(`a ${size}-byte result is torn`);
    return "intact";
  } catch (error) {
    if (typed(error) instanceof OutcomeUnknown) return "outcome-unknown";
    throw error;
  } finally {
    await client.close();
  }
}

const server = await SdkServer.start();
console.log(`ts_host: the official TS SDK's server at ${server.url}`);
if ((await call(server.url, 4 * MIB)) !== "intact") throw new Error("the uncut 4 MiB result was not delivered");
console.log("ts_host: a 4 MiB result, intact");

const kit = await Kit.start("buffered", { upstream: new URL(server.url).host });
const outcomes = [];
for (const offset of [2_000, 1_000_000, 2_500_000, 4_100_000]) {
  await kit.cut(offset);
  outcomes.push(`${offset}: ${await call(kit.url, 4 * MIB)}`);
}
const cuts = await kit.cuts();
console.log(`ts_host: through the fault proxy (${cuts} cuts): ${outcomes.join(", ")}`);
if (cuts !== 4) throw new Error(`the proxy cut ${cuts} answers, not 4`);
await kit.stop();
await server.stop();
