// One `client.callTool(big_result)` through the official TypeScript SDK's `Client`, over ssegate's
// `GuardedTransport` and over the SDK's own `StreamableHTTPClientTransport`
// (@modelcontextprotocol/sdk, node/package.json's devDependencies), against the same loopback
// server: the test kit's (`ssegate-testkit serve --mode buffered`, started through
// node/tests/kit.js; `$SSEGATE_TESTKIT` or a debug build). One Client per transport, connected
// once and kept open; results of 4 MiB and 1 KiB (`size`, bytes of JSON-escaped text). Before
// timing, each transport's text must equal the kit's. Each case: WARMUP untimed calls, then RUNS
// timed calls (process.hrtime.bigint(), the whole `callTool`: request, server, response, parse),
// the median reported, the two transports' calls interleaved. MB = 10**6 bytes of result.
//
//   node node/bench/transport.mjs          (node/bench/run runs it after decode.mjs)
//   RUNS=21 WARMUP=5 node node/bench/transport.mjs
import { createRequire } from "node:module";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const require = createRequire(import.meta.url);
const { GuardedTransport } = require("../mcp.js");
const { Kit } = require("../tests/kit.js");
// The package's `exports` do not include its package.json: read from node_modules.
const sdkVersion = JSON.parse(
  fs.readFileSync(new URL("../node_modules/@modelcontextprotocol/sdk/package.json", import.meta.url), "utf8"),
).version;

const RUNS = Number(process.env.RUNS ?? 9);
const WARMUP = Number(process.env.WARMUP ?? 2);
const SEED = 1;
const SIZES = [
  ["4 MiB", 4 * 1024 * 1024],
  ["1 KiB", 1024],
];

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const kit = await Kit.start("buffered", {});
const clients = {};
try {
  const transports = {
    "ssegate `GuardedTransport`": () => new GuardedTransport(kit.url),
    [`SDK ${sdkVersion} \`StreamableHTTPClientTransport\``]: () => new StreamableHTTPClientTransport(new URL(kit.url)),
  };
  for (const [name, make] of Object.entries(transports)) {
    const client = new Client({ name: "ssegate-node-bench", version: "0" });
    await client.connect(make());
    clients[name] = client;
  }
  const call = async (client, size) => {
    const result = await client.callTool({ name: "big_result", arguments: { size, seed: SEED } }, undefined, {
      timeout: 120_000,
    });
    assert.ok(!result.isError);
    return result.content[0].text;
  };

  console.log(
    `node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? "?"}), ` +
      `load ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}; ` +
      `median of ${RUNS} calls after ${WARMUP} warm-up calls`,
  );
  console.log("| result | transport | ms/call | MB/s |");
  console.log("| --- | --- | ---: | ---: |");
  for (const [label, size] of SIZES) {
    const expected = await kit.expectedText(size, SEED);
    for (const [name, client] of Object.entries(clients)) {
      assert.equal(await call(client, size), expected, `${label}: ${name}`);
      for (let i = 0; i < WARMUP; i++) await call(client, size);
    }
    const ns = Object.fromEntries(Object.keys(clients).map((name) => [name, []]));
    for (let i = 0; i < RUNS; i++) {
      for (const [name, client] of Object.entries(clients)) {
        const t0 = process.hrtime.bigint();
        const text = await call(client, size);
        const t1 = process.hrtime.bigint();
        assert.equal(text.length, expected.length);
        ns[name].push(Number(t1 - t0));
      }
    }
    for (const name of Object.keys(clients)) {
      const m = median(ns[name]);
      const mbs = size / 1e6 / (m / 1e9);
      console.log(`| ${label} | ${name} | ${(m / 1e6).toFixed(m < 1e7 ? 2 : 1)} | ${mbs.toFixed(mbs < 10 ? 2 : 0)} |`);
    }
  }
  console.log(`load after: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`);
} finally {
  for (const client of Object.values(clients)) await client.close();
  await kit.stop();
}
