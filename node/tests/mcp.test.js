// `ssegate/mcp`'s GuardedTransport under the official TypeScript SDK's `Client`: against the test
// kit's loopback server and its fault proxy (cuts mid-result on servers that replay correctly,
// restart, answer empty, re-send), against the TS SDK's own server, and against a scripted loopback
// server for the answers a server should never give (202 to a request, redirects, error statuses,
// torn or foreign JSON, a second response to one id, events over the limit, silence).
//
// Results are compared with what the server sent (the kit's `big_result` text is a pure function of
// size and seed; the SDK server's content is a position pattern) and the kit counts the tool's runs,
// so a torn, glued or re-run result cannot pass.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const http = require("node:http");
const { Agent } = require("undici");
const { Kit, SdkServer, sdkServerMissing, skipOrFail, pattern } = require("./kit.js");
const mcp = require("../mcp.js");
const { GuardedTransport, typed, OutcomeUnknown, Unavailable, ServerProtocol, Refused } = mcp;

const MIB = 1 << 20;

let sdk;
test.before(async () => {
  sdk = {
    ...(await import("@modelcontextprotocol/sdk/client/index.js")),
    ...(await import("@modelcontextprotocol/sdk/client/streamableHttp.js")),
    ...(await import("@modelcontextprotocol/sdk/types.js")),
  };
});

/**
 * A connected SDK Client over a new GuardedTransport. Each client has its own connection pool (the
 * platform's `fetch` with its own undici Agent, closed with the client), as each process of a host
 * has: the proxy's cut is armed for the next connection accepted, and a pool shared across clients
 * would hand a new client an old connection (or one the proxy already closed).
 */
async function connect(url, options = {}) {
  const agent = new Agent();
  const fetch = (input, init) => globalThis.fetch(input, { ...init, dispatcher: agent });
  const transport = new GuardedTransport(url, { fetch, ...options });
  const client = new sdk.Client({ name: "ssegate-node-tests", version: "0" });
  const close = client.close.bind(client);
  client.close = async () => {
    await close();
    await agent.destroy();
  };
  await client.connect(transport);
  return { client, transport };
}

/** One `big_result` call on a new client; the transport's errors thrown typed. */
async function callBig(url, size, seed, options) {
  const { client } = await connect(url, options);
  try {
    const result = await client.callTool({ name: "big_result", arguments: { size, seed } }, undefined, {
      timeout: 120_000,
    });
    assert.ok(!result.isError, JSON.stringify(result).slice(0, 300));
    return result.content[0].text;
  } catch (error) {
    throw typed(error);
  } finally {
    await client.close();
  }
}

async function withKit(mode, flags, fn) {
  const kit = await Kit.start(mode, flags);
  try {
    return await fn(kit);
  } finally {
    await kit.stop();
  }
}

// ---- the test kit -------------------------------------------------------------------------------

test("a 4 MiB result arrives whole, run once", () =>
  withKit("buffered", {}, async (kit) => {
    const text = await callBig(kit.url, 4 * MIB, 3);
    assert.ok(text === (await kit.expectedText(4 * MIB, 3)), "the 4 MiB text differs from what the server sent");
    assert.equal((await kit.stats()).calls, 1);
  }));

test("tools are listed; the session id and protocol version are the server's", () =>
  withKit("strict", {}, async (kit) => {
    const { client, transport } = await connect(kit.url);
    const tools = await client.listTools();
    assert.ok(tools.tools.some((t) => t.name === "big_result"));
    assert.match(transport.sessionId, /^[0-9a-f]+$/);
    assert.equal(transport.protocolVersion, client.getServerVersion() && transport.protocolVersion);
    assert.equal(transport.protocolVersion, sdk.LATEST_PROTOCOL_VERSION);
    await client.close();
  }));

test("a cut result is resumed in place and runs once", () =>
  withKit("buffered", { proxy: true }, async (kit) => {
    await kit.cut(300_000);
    const text = await callBig(kit.url, 1 * MIB, 9);
    assert.ok(text === (await kit.expectedText(1 * MIB, 9)), "torn");
    assert.equal(await kit.cuts(), 1);
    const stats = await kit.stats();
    assert.equal(stats.calls, 1);
    assert.equal(stats.resumes, 1);
  }));

for (const mode of ["strict", "restart", "empty"]) {
  test(`a cut that cannot be resumed (${mode}) is OutcomeUnknown, never torn, never re-sent`, () =>
    withKit(mode, { proxy: true }, async (kit) => {
      await kit.cut(300_000);
      await assert.rejects(callBig(kit.url, 1 * MIB, 9), (error) => {
        assert.ok(error instanceof OutcomeUnknown, String(error));
        assert.equal(error.code, mcp.OUTCOME_UNKNOWN);
        assert.equal(error.data.outcome, mcp.OUTCOME.UNKNOWN);
        assert.equal(error.data.method, "tools/call");
        assert.equal(error.data.kind, mcp.KIND.REFUSED);
        assert.equal(typeof error.data.refusal, "string");
        return true;
      });
      assert.equal(await kit.cuts(), 1);
      const stats = await kit.stats();
      // A restarting server runs the call again itself on the resume; the client's own are the rest.
      assert.equal(stats.calls - stats.restarts, 1, `the transport never sends a call again: ${JSON.stringify(stats)}`);
    }));
}

test("every cut gives the whole result or the typed error", async () => {
  const size = 200_000;
  const seed = 5;
  for (const mode of ["buffered", "boundary", "restart", "empty", "resend"]) {
    await withKit(mode, { proxy: true }, async (kit) => {
      const expected = await kit.expectedText(size, seed);
      let intact = 0;
      for (let offset = 1_000; offset < size; offset += 37_000) {
        await kit.cut(offset);
        let text;
        try {
          text = await callBig(kit.url, size, seed);
        } catch (error) {
          assert.ok(error instanceof OutcomeUnknown, `${mode} cut at ${offset}: ${error} ${JSON.stringify(error.data)}`);
          continue;
        }
        assert.ok(text === expected, `${mode} cut at ${offset}: torn`);
        intact++;
      }
      // Servers that replay the cut event hold the whole result each time.
      if (mode === "buffered" || mode === "boundary" || mode === "resend") assert.equal(intact, 6, mode);
    });
  }
});

test("progress notifications reach the callback before the result", () =>
  withKit("buffered", { progress: 5 }, async (kit) => {
    const { client } = await connect(kit.url);
    const seen = [];
    const result = await client.callTool({ name: "big_result", arguments: { size: 100_000, seed: 1 } }, undefined, {
      onprogress: (p) => seen.push(p.progress),
    });
    assert.equal(seen.length, 5);
    assert.ok(result.content[0].text === (await kit.expectedText(100_000, 1)));
    await client.close();
  }));

test("a request resumed from a token the application kept: answered by the replay, not run again", () =>
  withKit("buffered", {}, async (kit) => {
    const { client } = await connect(kit.url);
    const params = { name: "big_result", arguments: { size: 200_000, seed: 8 } };
    const tokens = [];
    const first = await client.request({ method: "tools/call", params }, sdk.CallToolResultSchema, {
      onresumptiontoken: (token) => tokens.push(token),
    });
    assert.ok(tokens.length >= 2, `tokens: ${tokens}`);
    // From the first token (the priming event) the server replays the rest of that stream, whose
    // response answers the first request's id: the transport gives it to this request.
    const resumed = await client.request({ method: "tools/call", params }, sdk.CallToolResultSchema, {
      resumptionToken: tokens[0],
    });
    const expected = await kit.expectedText(200_000, 8);
    assert.ok(first.content[0].text === expected, "the first answer");
    assert.ok(resumed.content[0].text === expected, "the resumed answer");
    const stats = await kit.stats();
    assert.equal(stats.calls, 1, "the resumed request was not run again");
    assert.equal(stats.replays, 1);
    await client.close();
  }));

test("a 2026-07-28 server's cut answer is OutcomeUnknown and never resumed", () =>
  withKit("stateless", { proxy: true }, async (kit) => {
    // The SDK's Client negotiates 2025 revisions only; the transport is driven by hand here, as a
    // client of the 2026 era drives it (the version set, `_meta` stamped on each request).
    const meta = {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": {},
      "io.modelcontextprotocol/clientInfo": { name: "t", version: "0" },
    };
    const answers = [];
    const transport = new GuardedTransport(kit.url);
    transport.onmessage = (m) => answers.push(m);
    await transport.start();
    transport.setProtocolVersion("2026-07-28");
    const call = (id, size) => ({
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: { name: "big_result", arguments: { size, seed: 2 }, _meta: meta },
    });
    const answered = async (id) => {
      for (let i = 0; i < 600 && !answers.some((m) => m.id === id); i++) await new Promise((r) => setTimeout(r, 50));
      return answers.find((m) => m.id === id);
    };
    // The first connection is cut inside the first answer; the second answer comes on another.
    await kit.cut(100_000);
    await transport.send(call(1, 300_000));
    const lost = await answered(1);
    assert.equal(lost.error?.code, mcp.OUTCOME_UNKNOWN, JSON.stringify(lost).slice(0, 300));
    assert.equal(lost.error.data.method, "tools/call");
    await transport.send(call(2, 300_000));
    const whole = await answered(2);
    assert.ok(whole.result.content[0].text === (await kit.expectedText(300_000, 2)));
    assert.equal(await kit.cuts(), 1);
    const stats = await kit.stats();
    assert.equal(stats.resumes, 0, "a 2026-07-28 stream is never resumed");
    assert.equal(stats.calls, 2, "nothing was sent twice");
    await transport.close();
  }));

// ---- the official TypeScript SDK's server ------------------------------------------------------------

/** Runs `fn(server)` against the TS SDK's server (interop/ts), stopped afterwards. */
async function withSdkServer(t, fn) {
  const missing = sdkServerMissing();
  if (missing) return skipOrFail(t, missing);
  const server = await SdkServer.start();
  try {
    return await fn(server);
  } finally {
    await server.stop();
  }
}

test("the TS SDK's server gives 4 MiB, 2 MiB and tiny results intact", (t) =>
  withSdkServer(t, async (server) => {
    const { client } = await connect(server.url);
    for (const size of [4 * MIB, 2 * MIB, 10]) {
      const result = await client.callTool({ name: "big_result", arguments: { size } });
      assert.ok(result.content[0].text === pattern(size), `${size} bytes: not the server's content`);
    }
    await client.close();
  }));

test("the TS SDK's server through a proxy that cuts mid-event: intact or typed, never a hang", (t) =>
  withSdkServer(t, (server) =>
    withKit("buffered", { upstream: new URL(server.url).host }, async (kit) => {
      let intact = 0;
      for (const offset of [3_000, 1_000_000, 2_500_000, 4_000_000]) {
        await kit.cut(offset);
        const { client } = await connect(kit.url);
        try {
          const result = await client.callTool({ name: "big_result", arguments: { size: 4 * MIB } });
          assert.ok(result.content[0].text === pattern(4 * MIB), `cut at ${offset}: torn`);
          intact++;
        } catch (error) {
          assert.ok(typed(error) instanceof OutcomeUnknown, `cut at ${offset}: ${error}`);
        } finally {
          await client.close();
        }
      }
      assert.equal(await kit.cuts(), 4);
      // The SDK server's event store holds every event it sent: each cut resumes in place.
      assert.equal(intact, 4);
    }),
  ));

// ---- a scripted server: answers a server should not give ---------------------------------------------

/**
 * A loopback MCP server whose `initialize` and notifications are answered properly and whose other
 * requests get `answer(message, res, req)`. `requests` counts what reached it, by method.
 */
async function scripted(answer) {
  const seen = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers });
      if (req.method !== "POST") {
        res.writeHead(405).end();
        return;
      }
      const message = JSON.parse(body);
      if (message.method === "initialize") {
        res.writeHead(200, { "content-type": "application/json", "mcp-session-id": "s1" });
        res.end(
          JSON.stringify({
            jsonrpc: "2.0",
            id: message.id,
            result: {
              protocolVersion: message.params.protocolVersion,
              capabilities: { tools: {} },
              serverInfo: { name: "scripted", version: "0" },
            },
          }),
        );
        return;
      }
      if (message.id === undefined) {
        res.writeHead(202).end();
        return;
      }
      answer(message, res, req);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}/mcp`;
  return {
    url,
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

const ok = (id, text = "ok") => JSON.stringify({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text }] } });

/** The typed error a `tools/call` (or `method`) gets from a scripted server. */
async function failure(answer, { method = "tools/call", options = {} } = {}) {
  const server = await scripted(answer);
  try {
    const { client } = await connect(server.url, options);
    try {
      if (method === "tools/call") await client.callTool({ name: "x", arguments: {} });
      else await client.listTools();
    } catch (error) {
      return { error: typed(error), seen: server.seen };
    } finally {
      await client.close();
    }
    assert.fail("the call succeeded");
  } finally {
    await server.close();
  }
}

test("202 to a request is a protocol error", async () => {
  const { error } = await failure((m, res) => res.writeHead(202).end());
  assert.ok(error instanceof OutcomeUnknown, String(error));
  assert.equal(error.data.kind, mcp.KIND.PROTOCOL);
  assert.equal(error.data.status, 202);
  const list = await failure((m, res) => res.writeHead(202).end(), { method: "tools/list" });
  assert.ok(list.error instanceof ServerProtocol, String(list.error));
});

test("a redirect is not followed: not run", async () => {
  const { error, seen } = await failure((m, res) => res.writeHead(307, { location: "/elsewhere" }).end());
  assert.ok(error instanceof Unavailable, String(error));
  assert.equal(error.data.kind, mcp.KIND.REDIRECT);
  assert.equal(error.data.outcome, mcp.OUTCOME.NOT_RUN);
  assert.ok(!seen.some((r) => r.url === "/elsewhere"), "the redirect was followed");
});

test("an error status: the server's JSON-RPC error as it is, else the typed status error, body capped", async () => {
  const own = await failure((m, res) => {
    res.writeHead(400, { "content-type": "application/json" });
    res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32602, message: "bad arguments" } }));
  });
  assert.equal(own.error.code, sdk.ErrorCode.InvalidParams);
  assert.ok(!(own.error instanceof mcp.GuardedError));
  const text = await failure((m, res) => res.writeHead(503, { "content-type": "text/plain" }).end("busy ".repeat(1000)), {
    options: { maxErrorBody: 64 },
  });
  assert.ok(text.error instanceof OutcomeUnknown, String(text.error));
  assert.equal(text.error.data.kind, mcp.KIND.STATUS);
  assert.equal(text.error.data.status, 503);
  assert.ok(text.error.data.reason.length < 120, text.error.data.reason);
  const refused = await failure((m, res) => res.writeHead(403).end(), { method: "tools/list" });
  assert.ok(refused.error instanceof Unavailable);
  assert.equal(refused.error.data.outcome, mcp.OUTCOME.NOT_RUN);
});

test("a JSON answer that is torn, too large, foreign or of another type is a protocol error", async () => {
  const json = (body) => (m, res) => res.writeHead(200, { "content-type": "application/json" }).end(body(m));
  for (const [what, answer, options] of [
    ["torn", json((m) => ok(m.id).slice(0, -3)), {}],
    ["two values", json((m) => ok(m.id) + ok(m.id)), {}],
    ["too large", json((m) => ok(m.id, "x".repeat(5000))), { maxJsonBody: 1000 }],
    ["another id", json((m) => ok(m.id + 1)), {}],
    ["not a response", json(() => JSON.stringify({ jsonrpc: "2.0", id: 1 })), {}],
    ["text/html", (m, res) => res.writeHead(200, { "content-type": "text/html" }).end(ok(m.id)), {}],
  ]) {
    const { error } = await failure(answer, { method: "tools/list", options });
    assert.ok(error instanceof ServerProtocol, `${what}: ${error}`);
    assert.equal(error.data.kind, mcp.KIND.PROTOCOL, what);
  }
});

const sse = (res, ...events) => {
  res.writeHead(200, { "content-type": "text/event-stream" });
  for (const e of events) res.write(e);
  res.end();
};

test("an event stream: one response per id, a torn event never delivered", async () => {
  const server = await scripted((m, res) =>
    sse(res, `data: ${ok(m.id, "first")}\n\n`, `data: ${ok(m.id, "second")}\n\n`),
  );
  const { client } = await connect(server.url);
  const result = await client.callTool({ name: "x", arguments: {} });
  assert.equal(result.content[0].text, "first");
  await client.close();
  await server.close();

  const torn = await failure((m, res) => sse(res, `data: ${ok(m.id).slice(0, 30)}`));
  assert.ok(torn.error instanceof OutcomeUnknown, String(torn.error));
});

test("an event over maxEvent while the answer is outstanding is a refusal", async () => {
  const big = (m, res) => sse(res, `data: ${ok(m.id, "y".repeat(10_000))}\n\n`);
  const call = await failure(big, { options: { maxEvent: 4096 } });
  assert.ok(call.error instanceof OutcomeUnknown, String(call.error));
  assert.equal(call.error.data.kind, mcp.KIND.REFUSED);
  const list = await failure(big, { method: "tools/list", options: { maxEvent: 4096 } });
  assert.ok(list.error instanceof Refused, String(list.error));
});

test("no answer within the deadline: the timeout error, the connection dropped", async () => {
  const hung = [];
  const server = await scripted((m, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(": waiting\n\n");
    hung.push(new Promise((resolve) => res.on("close", resolve)));
  });
  try {
    const { client } = await connect(server.url, { timeout: 0.5 });
    const call = await client.callTool({ name: "x", arguments: {} }).then(() => null, typed);
    assert.ok(call instanceof OutcomeUnknown, String(call));
    assert.equal(call.data.kind, mcp.KIND.TIMEOUT);
    const list = await client.listTools().then(() => null, typed);
    assert.ok(list instanceof Unavailable, String(list));
    assert.equal(list.data.kind, mcp.KIND.TIMEOUT);
    // The server never ends these answers: the client closed each connection at its deadline.
    const closed = await Promise.race([Promise.all(hung), new Promise((r) => setTimeout(() => r(false), 10_000))]);
    assert.ok(closed, "a connection was kept open after the deadline");
    await client.close();
  } finally {
    await server.close();
  }
});

test("an unreachable server: Unavailable, not run", async () => {
  const server = await scripted(() => {});
  const url = server.url;
  await server.close();
  const client = new sdk.Client({ name: "t", version: "0" });
  await assert.rejects(client.connect(new GuardedTransport(url)), (error) => {
    const e = typed(error);
    assert.ok(e instanceof Unavailable, String(error));
    assert.equal(e.data.kind, mcp.KIND.UNREACHABLE);
    assert.equal(e.data.outcome, mcp.OUTCOME.NOT_RUN);
    assert.equal(e.data.method, "initialize");
    return true;
  });
});

test("options are checked when the transport is made", () => {
  assert.throws(() => new GuardedTransport("http://127.0.0.1:1/mcp", { timeout: 0 }), TypeError);
  assert.throws(() => new GuardedTransport("http://127.0.0.1:1/mcp", { timeout: Number.NaN }), TypeError);
  assert.throws(() => new GuardedTransport("http://127.0.0.1:1/mcp", { maxEvent: -1 }), TypeError);
  assert.throws(() => new GuardedTransport("http://127.0.0.1:1/mcp", { maxJsonBody: 1.5 }), TypeError);
  assert.throws(() => new GuardedTransport("not a url"), TypeError);
  new GuardedTransport("http://127.0.0.1:1/mcp", { timeout: null, idleTimeout: null });
});

test("the contract's codes and words are the library's", () => {
  const { contract } = require("..");
  assert.deepEqual(
    [mcp.OUTCOME_UNKNOWN, mcp.UNAVAILABLE, mcp.SERVER_PROTOCOL, mcp.REFUSED],
    contract.codes.map((c) => c.value),
  );
  assert.deepEqual(Object.values(mcp.KIND), contract.kinds);
  const e = typed(new sdk.McpError(mcp.REFUSED, "x", { kind: "refused" }));
  assert.ok(e instanceof Refused && e instanceof mcp.GuardedError && e instanceof Error);
  assert.equal(e.message, contract.codes[3].message);
  const other = new sdk.McpError(-32602, "x");
  assert.equal(typed(other), other);
});
