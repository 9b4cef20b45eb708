// The addon's `Decoder` against eventsource-parser (the SSE parser of the official TypeScript MCP
// SDK, @modelcontextprotocol/sdk 1.x) on the same bytes fed in the same 16 KiB chunks:
//   (i)  one event of 4 MiB (a single `data:` line of JSON text), and
//   (ii) 100,000 events of 200 bytes each on the wire (`id`, `event`, one `data:` line).
// Rows: the addon (each event's `data` is a Buffer); the addon with `.toString()` of each event's
// data (a string, as eventsource-parser hands out); eventsource-parser fed through a streaming
// TextDecoder (bytes in, as the SDK's EventSourceParserStream does: decoding is part of its cost);
// eventsource-parser fed strings decoded before the clock starts (its parse alone).
// Before timing, every row must report the same number of events and the same total data bytes
// (the input is ASCII, so a string's length is its byte count). Each case: WARMUP untimed runs,
// then RUNS timed runs (process.hrtime.bigint()), the median reported. MB = 10**6 bytes of input.
//
//   node node/bench/decode.mjs            (node/bench/run builds the addon first)
//   RUNS=21 WARMUP=5 node node/bench/decode.mjs
import { createRequire } from "node:module";
import assert from "node:assert/strict";
import os from "node:os";

const require = createRequire(import.meta.url);
const { Decoder } = require("../index.js");
const { createParser } = require("eventsource-parser");
const parserVersion = require("eventsource-parser/package.json").version;

const RUNS = Number(process.env.RUNS ?? 11);
const WARMUP = Number(process.env.WARMUP ?? 3);
const CHUNK = 16 * 1024;

/** ASCII JSON-like filler of exactly n characters (varied, so no run of one byte). */
function filler(n, seed) {
  const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:;-_";
  let x = seed >>> 0 || 1;
  const out = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    out[i] = alphabet.charCodeAt(x % alphabet.length);
  }
  return out.toString("latin1");
}

/** One SSE event of exactly `size` bytes on the wire; returns [bytes, its data's length]. */
function event(size, n) {
  const head = `id: ${String(n).padStart(8, "0")}\nevent: message\ndata: `;
  const open = `{"jsonrpc":"2.0","id":${n},"result":{"text":"`;
  const close = `"}}`;
  const pad = size - head.length - open.length - close.length - 2; // "\n\n"
  assert.ok(pad >= 0, "event too small");
  const data = open + filler(pad, n + 1) + close;
  return [`${head}${data}\n\n`, data.length];
}

function input(count, size) {
  const parts = [];
  let dataBytes = 0;
  for (let i = 0; i < count; i++) {
    const [text, len] = event(size, i + 1);
    parts.push(text);
    dataBytes += len;
  }
  const raw = Buffer.from(parts.join(""), "latin1");
  assert.equal(raw.length, count * size);
  const chunks = [];
  for (let at = 0; at < raw.length; at += CHUNK) chunks.push(raw.subarray(at, at + CHUNK));
  const td = new TextDecoder();
  const strings = chunks.map((c) => td.decode(c, { stream: true }));
  return { raw, chunks, strings, count, dataBytes };
}

// Each row parses the whole input once and returns [events, total data bytes].
const rows = {
  "ssegate Decoder (data: Buffer)": (inp) => {
    const d = new Decoder();
    let n = 0;
    let bytes = 0;
    for (const c of inp.chunks) {
      for (const ev of d.feed(c)) {
        n++;
        bytes += ev.data.length;
      }
    }
    d.finish();
    return [n, bytes];
  },
  "ssegate Decoder + data.toString()": (inp) => {
    const d = new Decoder();
    let n = 0;
    let bytes = 0;
    for (const c of inp.chunks) {
      for (const ev of d.feed(c)) {
        n++;
        bytes += ev.data.toString().length;
      }
    }
    d.finish();
    return [n, bytes];
  },
  [`eventsource-parser ${parserVersion} (TextDecoder + parse)`]: (inp) => {
    let n = 0;
    let bytes = 0;
    const p = createParser({ onEvent: (ev) => { n++; bytes += ev.data.length; } });
    const td = new TextDecoder();
    for (const c of inp.chunks) p.feed(td.decode(c, { stream: true }));
    p.feed(td.decode());
    p.reset({ consume: true });
    return [n, bytes];
  },
  [`eventsource-parser ${parserVersion} (strings, parse only)`]: (inp) => {
    let n = 0;
    let bytes = 0;
    const p = createParser({ onEvent: (ev) => { n++; bytes += ev.data.length; } });
    for (const s of inp.strings) p.feed(s);
    p.reset({ consume: true });
    return [n, bytes];
  },
};

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const cases = [
  ["(i) 1 event of 4 MiB", input(1, 4 * 1024 * 1024)],
  ["(ii) 100,000 events of 200 B", input(100_000, 200)],
];

console.log(
  `node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? "?"}), ` +
    `load ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}; ` +
    `16 KiB chunks, median of ${RUNS} runs after ${WARMUP} warm-up`,
);
console.log("| input | parser | MB/s | ns/event |");
console.log("| --- | --- | ---: | ---: |");
for (const [name, inp] of cases) {
  // The same events and data bytes for every row, checked before anything is timed.
  for (const [row, run] of Object.entries(rows)) {
    assert.deepEqual(run(inp), [inp.count, inp.dataBytes], `${name}: ${row}`);
  }
  for (const [row, run] of Object.entries(rows)) {
    for (let i = 0; i < WARMUP; i++) run(inp);
    const ns = [];
    for (let i = 0; i < RUNS; i++) {
      const t0 = process.hrtime.bigint();
      const got = run(inp);
      const t1 = process.hrtime.bigint();
      assert.equal(got[0], inp.count);
      ns.push(Number(t1 - t0));
    }
    const m = median(ns);
    const mbs = inp.raw.length / 1e6 / (m / 1e9);
    console.log(`| ${name} | ${row} | ${mbs.toFixed(0)} | ${(m / inp.count).toFixed(0)} |`);
  }
}
console.log(`load after: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`);
