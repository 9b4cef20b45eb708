// `contract` and `codeFor` against the wire contract's table. The oracles are literals here, on
// purpose (as in python/tests/test_contract.py): a change on one side only fails a test.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { contract, codeFor } = require("..");

const UNAVAILABLE = -32051;
const SERVER_PROTOCOL = -32052;
const REFUSED = -32053;
const CODE_OF_KIND = {
  setup: UNAVAILABLE,
  unreachable: UNAVAILABLE,
  http: UNAVAILABLE,
  status: UNAVAILABLE,
  redirect: UNAVAILABLE,
  timeout: UNAVAILABLE,
  "invalid-response": SERVER_PROTOCOL,
  protocol: SERVER_PROTOCOL,
  refused: REFUSED,
  "too-many-resumes": REFUSED,
  "no-progress": REFUSED,
  "reconnect-failed": UNAVAILABLE,
  "task-failed": UNAVAILABLE,
  "task-cancelled": UNAVAILABLE,
  tasks: UNAVAILABLE,
  task: UNAVAILABLE,
  auth: UNAVAILABLE,
};
const MIB = 1 << 20;
const DEFAULTS = {
  DEFAULT_MAX_EVENT: 64 * MIB,
  DEFAULT_MAX_LINE: 64 * MIB,
  DEFAULT_MAX_FIELD: 4096,
  DEFAULT_MAX_BLOCK: 80 * MIB,
  DEFAULT_MAX_JSON_BODY: 64 * MIB,
  DEFAULT_MAX_ERROR_BODY: 1024,
  DEFAULT_MAX_RESUMES: 32,
  DEFAULT_MAX_STALLED_RESUMES: 4,
  DEFAULT_MAX_RECONNECT_ATTEMPTS: 6,
  DEFAULT_CALL_TIMEOUT: 600,
  DEFAULT_CONNECT_TIMEOUT: 10,
  DEFAULT_REPLAY_TIMEOUT: 10,
  DEFAULT_IDLE_TIMEOUT: 300,
  DEFAULT_MAX_DELAY: 60,
  DEFAULT_MIN_DELAY: 0.25,
  DEFAULT_RETRY: 1,
  DEFAULT_BACKOFF: 0.25,
};

test("codes, kinds, outcomes", () => {
  assert.deepEqual(
    contract.codes.map((c) => [c.value, c.word]),
    [[-32050, "outcome-unknown"], [UNAVAILABLE, "unavailable"], [SERVER_PROTOCOL, "server-protocol"], [REFUSED, "refused"]],
  );
  assert.ok(contract.codes.every((c) => typeof c.message === "string" && c.message.length > 0));
  assert.deepEqual(new Set(contract.kinds), new Set(Object.keys(CODE_OF_KIND)));
  assert.deepEqual(new Set(contract.outcomes), new Set(["unknown", "not-run", "failed"]));
  assert.equal(contract.toolsCall, "tools/call");
  assert.deepEqual(contract.data, {
    kind: "kind", outcome: "outcome", method: "method", reason: "reason", refusal: "refusal", status: "status",
  });
});

test("codeFor follows the table for every kind", () => {
  for (const kind of contract.kinds) {
    for (const outcome of contract.outcomes) {
      for (const method of ["tools/call", "tools/list", "initialize"]) {
        const lostCall = method === "tools/call" && outcome === "unknown";
        assert.equal(codeFor(method, kind, outcome), lostCall ? -32050 : CODE_OF_KIND[kind], `${method} ${kind} ${outcome}`);
      }
    }
  }
  assert.throws(() => codeFor("tools/call", "other", "unknown"), /kind/);
  assert.throws(() => codeFor("tools/call", "refused", "maybe"), /outcome/);
});

test("the defaults are the contract's", () => {
  for (const [name, value] of Object.entries(DEFAULTS)) assert.equal(contract[name], value, name);
});

test("the engine's word lists", () => {
  for (const list of ["refusalKinds", "failureKinds", "restartKinds", "skipKinds", "decodeErrorKinds", "rpcKinds"]) {
    assert.ok(Array.isArray(contract[list]) && contract[list].length > 0, list);
    assert.equal(new Set(contract[list]).size, contract[list].length, list);
  }
  assert.deepEqual(new Set(contract.decodeErrorKinds), new Set(["line-too-long", "event-too-large", "field-too-long", "block-too-large"]));
  assert.deepEqual(new Set(contract.rpcKinds), new Set(["request", "response", "notification", "batch", "other"]));
});

test("the module loads in a worker too (its own DecodeError class)", async () => {
  const { Worker } = require("node:worker_threads");
  const code = `
    const { parentPort } = require("node:worker_threads");
    const s = require(${JSON.stringify(require.resolve(".."))});
    try { new s.Decoder({ maxLine: 2 }).feed(Buffer.from("data: x\\n\\n")); parentPort.postMessage("no error"); }
    catch (e) { parentPort.postMessage(String(e instanceof s.DecodeError) + " " + e.kind); }`;
  const w = new Worker(code, { eval: true });
  const got = await new Promise((resolve, reject) => {
    w.on("message", resolve);
    w.on("error", reject);
  });
  await w.terminate();
  assert.equal(got, "true line-too-long");
});
