// `Decoder`: the crate's WHATWG conformance cases under every chunking, the limits and their typed
// error, and zero-copy data (views of the caller's own input).
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { Decoder, DecodeError, contract } = require("..");
const { sseCases, lossy } = require("./vectors");

const CASES = sseCases();

/** Feeds `chunks`, then ends the input: [events, last id, retry, discarded block], each event as
 * [type, data, id] in the vectors' terms. */
function outcome(chunks, options) {
  const d = new Decoder(options);
  const events = [];
  for (const c of chunks) {
    for (const ev of d.feed(c)) {
      assert.ok(Buffer.isBuffer(ev.data));
      events.push([ev.event ?? "message", Buffer.from(ev.data).toString("latin1"), ev.id ?? ""]);
    }
  }
  assert.deepEqual(d.finish(), []);
  const p = d.discarded;
  return [events, d.lastEventId ?? "", d.retry, p === null ? null : [p.bytes, p.dataLen, p.id]];
}

function expected(c) {
  const events = c.events.map(([t, data, id]) => [lossy(t), data.toString("latin1"), lossy(id)]);
  const partial =
    c.partial === null ? null : [c.partial[0], c.partial[1], c.partial[2] === null ? null : lossy(c.partial[2])];
  return [events, lossy(c.last), c.retry, partial];
}

/** A seeded generator (xorshift32), so that a failing split can be replayed. */
function rng(seed) {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x % n;
  };
}

test("the vectors are there", () => {
  assert.ok(CASES.length >= 70);
  assert.ok(CASES.reduce((n, c) => n + c.events.length, 0) > 60);
  assert.ok(CASES.some((c) => c.partial) && CASES.some((c) => c.retry !== null));
});

test("conformance under every chunking", () => {
  for (const [i, c] of CASES.entries()) {
    const want = expected(c);
    const data = c.input;
    const n = data.length;
    assert.deepEqual(outcome([data]), want, `${c.name}: whole input`);
    assert.deepEqual(outcome([...data].map((_, k) => data.subarray(k, k + 1))), want, `${c.name}: 1-byte chunks`);
    for (let cut = 0; cut <= n; cut++) {
      assert.deepEqual(outcome([data.subarray(0, cut), data.subarray(cut)]), want, `${c.name}: split at ${cut}`);
    }
    const r = rng(i + 1);
    for (let k = 0; k < 50; k++) {
      const cuts = Array.from({ length: r(8) }, () => r(n + 1)).sort((a, b) => a - b);
      const bounds = [0, ...cuts, n];
      const pieces = cuts.map((_, j) => data.subarray(bounds[j], bounds[j + 1]));
      pieces.push(data.subarray(bounds[cuts.length], n));
      assert.deepEqual(outcome(pieces), want, `${c.name}: cuts ${cuts}`);
    }
  }
});

test("conformance through plain Uint8Arrays and offset views", () => {
  for (const c of CASES) {
    const padded = Buffer.concat([Buffer.from("junk"), c.input, Buffer.from("junk")]);
    const view = new Uint8Array(padded.buffer, padded.byteOffset + 4, c.input.length);
    assert.deepEqual(outcome([new Uint8Array(c.input)]), expected(c), c.name);
    assert.deepEqual(outcome([view]), expected(c), c.name);
  }
});

test("event members", () => {
  const [ev] = new Decoder().feed(Buffer.from("event: up\nid: 9\nretry: 1500\ndata: a\ndata: b\n\n"));
  assert.deepEqual(
    { ...ev, data: ev.data.toString() },
    { data: "a\nb", event: "up", id: "9", hasOwnId: true, retry: 1500 },
  );
  const [next] = new Decoder().feed(Buffer.from("data: x\n\n"));
  assert.deepEqual([next.event, next.id, next.hasOwnId, next.retry], [null, null, false, null]);
});

test("finish discards an unterminated event", () => {
  const d = new Decoder();
  const events = d.feed(Buffer.from("id: 1\ndata: one\n\nid: 2\ndata: tw"));
  assert.deepEqual(events.map((ev) => ev.data.toString()), ["one"]);
  assert.equal(d.discarded, null);
  assert.equal(d.offset, "id: 1\ndata: one\n\nid: 2\ndata: tw".length);
  assert.deepEqual(d.finish(), []);
  assert.deepEqual(d.discarded, { bytes: "id: 2\ndata: tw".length, dataLen: 2, id: "2" });
  assert.equal(d.lastEventId, "1");
  assert.equal(d.offset, 0, "the next connection starts at 0");
});

test("limits throw the typed error and decoding goes on", () => {
  const d = new Decoder({ maxEvent: 10 });
  let e;
  assert.throws(
    () => d.feed(Buffer.from("data: ok\n\nid: 5\ndata: 0123456789A\n\ndata: after\n\n")),
    (x) => ((e = x), x instanceof DecodeError),
  );
  assert.ok(e instanceof Error);
  assert.equal(e.name, "DecodeError");
  assert.deepEqual([e.kind, e.limit, e.id], ["event-too-large", 10, "5"]);
  assert.equal(e.offset, 10 + 6);
  assert.deepEqual(e.events.map((ev) => ev.data.toString()), ["ok", "after"]);
  assert.deepEqual(e.errors, [e]);
  assert.match(e.message, /exceeds 10 bytes/);
  assert.ok(contract.decodeErrorKinds.includes(e.kind));
  assert.equal(d.lastEventId, null);
  assert.deepEqual(d.feed(Buffer.from("data: 0123456789\n\n")).map((ev) => ev.data.toString()), ["0123456789"]);
});

test("each limit, whole and byte by byte", () => {
  for (const [options, stream, kind] of [
    [{ maxLine: 16 }, "data: 0123456789ABCDEF\n\n", "line-too-long"],
    [{ maxLine: 16 }, ": a comment longer than 16\n\n", "line-too-long"],
    [{ maxEvent: 4 }, "data: ab\ndata: cd\n\n", "event-too-large"],
    [{ maxField: 8 }, "id: 0123456789\ndata: x\n\n", "field-too-long"],
    [{ maxField: 8 }, "event: 0123456789\ndata: x\n\n", "field-too-long"],
    [{ maxBlock: 40 }, "data: a\n" + ": padding\n".repeat(5) + "\n", "block-too-large"],
  ]) {
    const b = Buffer.from(stream);
    for (const chunks of [[b], [...b].map((_, i) => b.subarray(i, i + 1))]) {
      const d = new Decoder(options);
      const errors = [];
      for (const c of [...chunks, Buffer.from("data: next\n\n")]) {
        let events;
        try {
          events = d.feed(c);
        } catch (e) {
          assert.ok(e instanceof DecodeError);
          errors.push(e.kind);
          events = e.events;
        }
        if (c.toString().startsWith("data: next")) {
          assert.deepEqual(events.map((ev) => ev.data.toString()), ["next"]);
        }
      }
      assert.deepEqual(errors, [kind], `${JSON.stringify(options)} ${JSON.stringify(stream)}`);
    }
  }
});

test("several errors in one chunk", () => {
  try {
    new Decoder({ maxEvent: 2 }).feed(Buffer.from("data: aaa\n\ndata: b\n\ndata: ccc\n\n"));
    assert.fail("no error");
  } catch (e) {
    assert.deepEqual(e.errors.map((x) => x.kind), ["event-too-large", "event-too-large"]);
    assert.ok(e.errors.every((x) => x instanceof DecodeError));
    assert.deepEqual(e.events.map((ev) => ev.data.toString()), ["b"]);
  }
});

test("the defaults are the contract's", () => {
  const limit = contract.DEFAULT_MAX_EVENT;
  const half = Buffer.alloc(limit / 2, "x");
  const [ev] = new Decoder().feed(
    Buffer.concat([Buffer.from("data: "), half, Buffer.from("\ndata: "), half.subarray(1), Buffer.from("\n\n")]),
  );
  assert.equal(ev.data.length, limit);
  assert.throws(
    () => new Decoder().feed(Buffer.concat([Buffer.from("data: "), half, Buffer.from("\ndata: "), half, Buffer.from("\n\n")])),
    (e) => e.kind === "event-too-large" && e.limit === limit,
  );
  assert.throws(
    () => new Decoder().feed(Buffer.from("id: " + "1".repeat(contract.DEFAULT_MAX_FIELD + 1) + "\n\n")),
    (e) => e.kind === "field-too-long" && e.limit === contract.DEFAULT_MAX_FIELD,
  );
});

test("data is a view of the caller's input (zero copy)", () => {
  const body = Buffer.from('{"jsonrpc":"2.0","id":1,"result":"' + "r".repeat(4 << 20) + '"}');
  const chunk = Buffer.concat([Buffer.from("id: 1\ndata: "), body, Buffer.from("\n\n")]);
  const [ev] = new Decoder().feed(chunk);
  assert.equal(ev.data.buffer, chunk.buffer, "shares the input's ArrayBuffer");
  assert.equal(ev.data.byteOffset, chunk.byteOffset + "id: 1\ndata: ".length);
  assert.equal(ev.data.length, body.length);
  assert.ok(ev.data.equals(body));
  chunk["id: 1\ndata: ".length] = 0x58; // the view sees the caller's memory
  assert.equal(ev.data[0], 0x58);
});

test("a plain Uint8Array input gives Buffer views of it", () => {
  const u = new Uint8Array(Buffer.from("data: hello\n\n"));
  const [ev] = new Decoder().feed(u);
  assert.ok(Buffer.isBuffer(ev.data));
  assert.equal(ev.data.buffer, u.buffer);
  assert.equal(ev.data.byteOffset, 6);
});

test("data spread over chunks is joined once, in a new buffer", () => {
  const d = new Decoder();
  const a = Buffer.from("data: hel");
  assert.deepEqual(d.feed(a), []);
  const b = Buffer.from("lo\ndata: world\n\n");
  const [ev] = d.feed(b);
  assert.equal(ev.data.toString(), "hello\nworld");
  assert.notEqual(ev.data.buffer, a.buffer === b.buffer ? null : b.buffer);
  b.fill(0); // the engine's copy is its own: later input is not affected
  assert.equal(ev.data.toString(), "hello\nworld");
});

test("what the engine keeps is not changed by the caller reusing its buffer", () => {
  const d = new Decoder();
  const buf = Buffer.from("data: abc");
  d.feed(buf);
  buf.write("data: XYZ"); // a reused read buffer
  const [ev] = d.feed(Buffer.from("def\n\n"));
  assert.equal(ev.data.toString(), "abcdef");
});

test("bad arguments", () => {
  assert.throws(() => new Decoder().feed("data: x\n\n"));
  assert.throws(() => new Decoder().feed(new Uint16Array(4)), /Uint8Array/);
  assert.throws(() => new Decoder({ maxLine: -1 }), /maxLine/);
  assert.throws(() => new Decoder({ maxEvent: 1.5 }), /maxEvent/);
  assert.throws(() => new Decoder({ maxField: NaN }), /maxField/);
});

test("no crash for random input", () => {
  const r = rng(7);
  const alphabet = Buffer.from("data: id:event:retry:\r\n\n:x\x00\xff ");
  for (let round = 0; round < 300; round++) {
    const d = new Decoder({ maxLine: 1 + r(40), maxEvent: 1 + r(40), maxField: 1 + r(16), maxBlock: 1 + r(80) });
    for (let k = 0; k < 5; k++) {
      const chunk = Buffer.from(Array.from({ length: r(64) }, () => alphabet[r(alphabet.length)]));
      try {
        d.feed(chunk);
      } catch (e) {
        assert.ok(e instanceof DecodeError, String(e));
      }
    }
    d.finish();
  }
});

/** An event as plain values: [data as latin1 text, event, id, hasOwnId, retry]. */
function plain(ev) {
  return [Buffer.from(ev.data).toString("latin1"), ev.event, ev.id, ev.hasOwnId, ev.retry];
}

test("many events in one feed: views and copies, types, ids and retry in order", () => {
  const big = "B".repeat(300); // at least the default copyBelow (256): a view of the chunk
  const stream = Buffer.concat([
    Buffer.from(`event: up\nid: 1\ndata: ${big}\n\n`),
    Buffer.from("event: up\ndata: small\n\n"), // the same type again; the id inherited
    Buffer.from("data: a\ndata: b\nretry: 250\n\n"), // joined lines: copied
    Buffer.from("event: \u00e9t\u00e9\nid: \u65e5\u672c\ndata: x\ndata:\n\n"), // non-ASCII type and id
    Buffer.from("event: \ud83d\ude00\nid: 2\ndata\ndata: y\n\n"), // a type of two UTF-16 units
    Buffer.from("event: bad\xff\n", "latin1"), // invalid UTF-8: replaced
    Buffer.from(`id: 3\ndata: ${big}!\n\n`),
    Buffer.from("id\ndata: z\n\n"), // an empty id field: the id is reset
    Buffer.from("data: w\n\n"),
  ]);
  const chunk = Buffer.concat([Buffer.from("pad"), stream]).subarray(3); // a view at an offset
  const events = new Decoder().feed(chunk);
  assert.deepEqual(events.map(plain), [
    [big, "up", "1", true, null],
    ["small", "up", "1", false, null],
    ["a\nb", null, "1", false, 250],
    ["x\n", "\u00e9t\u00e9", "\u65e5\u672c", true, null],
    ["\ny", "\ud83d\ude00", "2", true, null],
    [`${big}!`, "bad\ufffd", "3", true, null],
    ["z", null, null, true, null],
    ["w", null, null, false, null],
  ]);
  // One `data` line in the chunk: a view of it; lines joined: a copy.
  for (const i of [0, 1, 5, 6, 7]) {
    assert.equal(events[i].data.buffer, chunk.buffer, `event ${i} is a view of the chunk`);
    assert.equal(events[i].data.byteOffset, chunk.byteOffset + stream.indexOf(events[i].data));
  }
  for (const i of [2, 3, 4]) {
    assert.ok(Buffer.isBuffer(events[i].data));
    assert.notEqual(events[i].data.buffer, chunk.buffer, `event ${i} is a copy`);
  }
  events[3].data.fill(0x2e); // copies do not overlap
  assert.deepEqual(events.map((ev) => ev.data.toString()).slice(2, 5), ["a\nb", "..", "\ny"]);
  chunk.fill(0);
  assert.equal(events[2].data.toString(), "a\nb", "a copy is not the caller's memory");
  assert.equal(events[1].data.toString(), "\0".repeat(5), "a view is");
  assert.equal(events[0].data[0], 0, "a view is");
});

test("events across feeds: types and ids carried over, copies of earlier chunks", () => {
  const d = new Decoder();
  const first = d.feed(Buffer.from("event: t\nid: 7\ndata: one\n\nevent: t\ndata: tw"));
  assert.deepEqual(first.map(plain), [["one", "t", "7", true, null]]);
  const second = d.feed(Buffer.from("o\n\nevent: t\ndata: three\n\nid: 8\ndata: four\n\n"));
  assert.deepEqual(second.map(plain), [
    ["two", "t", "7", false, null],
    ["three", "t", "7", false, null],
    ["four", null, "8", true, null],
  ]);
  assert.deepEqual(d.feed(Buffer.from("data: five\n\n")).map(plain), [["five", null, "8", false, null]]);
  assert.deepEqual(d.feed(Buffer.from(": nothing\n")), []);
});

test("many small events through every chunking agree with one feed", () => {
  const parts = [];
  for (let i = 0; i < 200; i++) {
    const type = i % 7 === 0 ? "" : `event: ${["a", "b", "\u00fc"][i % 3]}\n`;
    const id = i % 5 === 0 ? `id: ${i}\n` : "";
    const data = "d".repeat(i % 3 === 0 ? 300 : i % 40);
    parts.push(`${type}${id}data: ${data}\n${i % 11 === 0 ? "retry: 9\n" : ""}\n`);
  }
  const all = Buffer.from(parts.join(""));
  const whole = new Decoder().feed(all).map(plain);
  assert.equal(whole.length, 200);
  for (const size of [1, 7, 64, 300, 4096]) {
    const d = new Decoder();
    const got = [];
    for (let at = 0; at < all.length; at += size) got.push(...d.feed(all.subarray(at, at + size)).map(plain));
    assert.deepEqual(got, whole, `chunks of ${size}`);
  }
  assert.deepEqual(whole[0], ["d".repeat(300), null, "0", true, 9]);
  assert.deepEqual(whole[1], ["d", "b", "0", false, null]);
  assert.deepEqual(whole[2], ["dd", "\u00fc", "0", false, null]);
});

test("a DecodeError carries the call's events, views and copies", () => {
  const big = "V".repeat(300);
  const chunk = Buffer.from(`event: e\nid: 1\ndata: ${big}\n\nid: 2\ndata: 012345\ndata: 6789A\n\nevent: f\ndata: ok\n\n`);
  const fed = Buffer.concat([chunk, Buffer.from(`data: ${big}\ndata: x\n\n`)]);
  try {
    new Decoder({ maxEvent: 301 }).feed(fed);
    assert.fail("no error");
  } catch (e) {
    assert.equal(e.kind, "event-too-large");
    assert.deepEqual(e.events.map(plain), [
      [big, "e", "1", true, null],
      ["012345\n6789A", null, "2", true, null],
      ["ok", "f", "2", false, null],
    ]);
    assert.equal(e.events[0].data.buffer, fed.buffer, "a view of the chunk");
    assert.equal(e.events[0].data.byteOffset, fed.byteOffset + fed.indexOf(big));
    assert.notEqual(e.events[1].data.buffer, e.events[0].data.buffer, "the joined lines are a copy");
  }
});
