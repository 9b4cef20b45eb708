// The Rust crate's own test vectors, read from the repository at test time (never copied here),
// parsed as python/tests/_vectors.py parses them:
// - tests/sse_conformance/*.case: WHATWG conformance cases for the SSE decoder (format in
//   tests/sse_conformance/README.txt);
// - tests/data/json-test-suite-prefixes.jsonl: JSON completeness verdicts from JSONTestSuite.
"use strict";

const fs = require("node:fs");
const path = require("node:path");

const REPO = path.resolve(__dirname, "..", "..");
const SSE_CASES = path.join(REPO, "tests", "sse_conformance");
const JSON_VECTORS = path.join(REPO, "tests", "data", "json-test-suite-prefixes.jsonl");

const ESCAPES = { r: 0x0d, n: 0x0a, t: 0x09, 0: 0x00, "\\": 0x5c, '"': 0x22 };

/** Quoted strings (escapes decoded, as Buffers) and bare words (as Buffers). */
function tokens(line, where) {
  const out = [];
  let i = 0;
  while (i < line.length) {
    const c = line[i];
    if (c === " ") {
      i += 1;
    } else if (c === '"') {
      i += 1;
      const s = [];
      for (;;) {
        if (i >= line.length) throw new Error(`${where}: unterminated string: ${line}`);
        const d = line[i];
        if (d === '"') {
          i += 1;
          break;
        }
        if (d === "\\") {
          const e = line[i + 1];
          if (e === "x") {
            s.push(parseInt(line.slice(i + 2, i + 4), 16));
            i += 4;
          } else if (e in ESCAPES) {
            s.push(ESCAPES[e]);
            i += 2;
          } else {
            throw new Error(`${where}: unknown escape: ${line}`);
          }
        } else {
          s.push(...Buffer.from(d, "utf8"));
          i += 1;
        }
      }
      out.push(Buffer.from(s));
    } else {
      let j = line.indexOf(" ", i);
      if (j < 0) j = line.length;
      out.push(Buffer.from(line.slice(i, j), "utf8"));
      i = j;
    }
  }
  return out;
}

/** The conformance cases: {name, input, events: [[type, data, id]] (Buffers), last, retry, partial}. */
function sseCases() {
  const files = fs.readdirSync(SSE_CASES).filter((f) => f.endsWith(".case")).sort();
  if (files.length === 0) throw new Error(`no *.case files in ${SSE_CASES}`);
  const cases = [];
  for (const file of files) {
    const lines = fs.readFileSync(path.join(SSE_CASES, file), "utf8").split(/\r?\n/);
    lines.forEach((raw, n) => {
      const line = raw.trimEnd();
      if (!line || line.startsWith("#")) return;
      if (line.startsWith("== ")) {
        cases.push({
          name: `${path.basename(file, ".case")}: ${line.slice(3)}`,
          input: Buffer.alloc(0),
          events: [],
          last: Buffer.alloc(0),
          retry: null,
          partial: null,
        });
        return;
      }
      const where = `${file}:${n + 1}`;
      const c = cases[cases.length - 1];
      const [word, ...args] = tokens(line, where);
      const w = word.toString();
      if (w === "in" && args.length === 1) c.input = Buffer.concat([c.input, args[0]]);
      else if (w === "ev" && args.length === 3) c.events.push(args);
      else if (w === "last" && args.length === 1) c.last = args[0];
      else if (w === "retry" && args.length === 1)
        c.retry = args[0].toString() === "-" ? null : Number(args[0].toString());
      else if (w === "partial" && args.length === 3)
        c.partial = [
          Number(args[0].toString()),
          Number(args[1].toString()),
          args[2].toString() === "-" ? null : args[2],
        ];
      else throw new Error(`${where}: cannot parse: ${line}`);
    });
  }
  return cases;
}

/** The unambiguous JSON cases (deep-nesting ones with a raised depth limit, as tests/gate.rs
 * does), and how many ambiguous ones were left out. */
function jsonCases() {
  const cases = [];
  let skipped = 0;
  for (const line of fs.readFileSync(JSON_VECTORS, "utf8").split("\n")) {
    if (!line.trim()) continue;
    const c = JSON.parse(line);
    if (c.ambiguous) {
      skipped += 1;
      continue;
    }
    const deep = c.tags.includes("deep-nesting");
    cases.push({
      name: c.name,
      input: Buffer.from(c.input_b64, "base64"),
      verdict: c.verdict,
      maxDepth: deep ? 1 << 20 : 1024,
    });
  }
  return { cases, skipped };
}

/** Bytes as the text WHATWG decodes them to (UTF-8, errors replaced). */
function lossy(b) {
  return Buffer.from(b).toString("utf8");
}

module.exports = { REPO, sseCases, jsonCases, lossy };
