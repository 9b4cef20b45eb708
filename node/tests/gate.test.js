// `gate`: against the crate's JSONTestSuite-derived vectors, through Buffer and Uint8Array inputs,
// with the depth limit, and against JavaScript's own JSON.parse as an independent oracle.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { gate } = require("..");
const { jsonCases } = require("./vectors");

const { cases: CASES, skipped: AMBIGUOUS } = jsonCases();

test("the vectors are there", () => {
  assert.ok(CASES.length > 1000 && AMBIGUOUS > 0);
  assert.deepEqual(
    new Set(CASES.map((c) => c.verdict)),
    new Set(["complete", "incomplete", "trailing", "invalid"]),
  );
});

test("every JSONTestSuite vector, as Buffer and as Uint8Array", () => {
  const wrong = [];
  for (const c of CASES) {
    const got = gate(c.input, { maxDepth: c.maxDepth });
    const got2 = gate(new Uint8Array(c.input), { maxDepth: c.maxDepth });
    if (got !== c.verdict || got2 !== c.verdict) wrong.push(`${c.name}: ${got}/${got2}, want ${c.verdict}`);
  }
  assert.deepEqual(wrong, []);
});

test("small cases", () => {
  for (const [text, verdict] of [
    ["", "incomplete"],
    ["   ", "incomplete"],
    ['{"a":1}', "complete"],
    [' [1, 2] \n', "complete"],
    ['{"a":1}{"b":2}', "trailing"],
    ["[1,]", "invalid"],
    ['{"a":', "incomplete"],
  ]) {
    assert.equal(gate(Buffer.from(text)), verdict, JSON.stringify(text));
  }
});

test("maxDepth", () => {
  const deep = (n) => Buffer.from("[".repeat(n) + "]".repeat(n));
  assert.equal(gate(deep(3), { maxDepth: 3 }), "complete");
  assert.equal(gate(deep(4), { maxDepth: 3 }), "invalid");
  assert.equal(gate(deep(4)), "complete");
  assert.throws(() => gate(deep(1), { maxDepth: -1 }), /maxDepth/);
  assert.throws(() => gate(deep(1), { maxDepth: 1.5 }), /maxDepth/);
});

test("a subarray is judged on its own bytes", () => {
  const big = Buffer.from('xx{"a":1}yy');
  assert.equal(gate(big.subarray(2, 9)), "complete");
});

test("agrees with JSON.parse on every complete vector", () => {
  for (const c of CASES) {
    if (c.verdict !== "complete") continue;
    let parsed = true;
    try {
      JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(c.input));
    } catch {
      parsed = false;
    }
    // JSON.parse accepts lone surrogates and deep nesting; complete must parse.
    assert.ok(parsed, c.name);
  }
});

test("rejects what is not bytes", () => {
  assert.throws(() => gate("{}"));
  assert.throws(() => gate(null));
});
