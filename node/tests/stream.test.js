// `ResumableStream`: scenarios mirrored from python/tests/test_resumable.py. A stream cut anywhere
// and resumed with Last-Event-ID delivers each message once; refused resumes fail with the right
// kind; deadlines through pollTimeout and handleTimeout; the expected response once. Each
// expectation is computed from the stream the test writes, not read back from the engine.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { ResumableStream, contract } = require("..");

const T0 = 1000.0; // any clock's seconds

function sse(eid, data, event) {
  let out = "";
  if (event !== undefined) out += `event: ${event}\n`;
  if (eid !== null) out += `id: ${eid}\n`;
  return Buffer.from(out + (data.length ? `data: ${data}\n\n` : "data:\n\n"));
}

const progress = (n) =>
  JSON.stringify({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: 1, progress: n } });
const result = (rid, text = "done") =>
  JSON.stringify({ jsonrpc: "2.0", id: rid, result: { content: [{ type: "text", text }] } });

/** A response stream: event ids 0.., a priming event first, progress notifications, the result
 * for request 7 last. */
class Written {
  constructor(nProgress = 3, rid = 7) {
    this.events = [["0", ""]];
    for (let i = 1; i <= nProgress; i++) this.events.push([String(i), progress(i)]);
    this.events.push([String(nProgress + 1), result(rid)]);
    const parts = [];
    this.starts = [];
    this.ends = [];
    let at = 0;
    for (const [eid, data] of this.events) {
      const b = sse(eid, data);
      this.starts.push(at);
      parts.push(b);
      at += b.length;
      this.ends.push(at);
    }
    this.raw = Buffer.concat(parts);
    this.messages = this.events.map(([, d]) => d).filter((d) => d);
  }
  lastComplete(cut) {
    let k = -1;
    this.ends.forEach((e, i) => {
      if (e <= cut) k = i;
    });
    return k;
  }
  after(k) {
    return k + 1 < this.events.length ? this.raw.subarray(this.starts[k + 1]) : Buffer.alloc(0);
  }
}

function drain(s) {
  const out = [];
  for (let o; (o = s.poll()) !== null; ) out.push(o);
  return out;
}

const delivered = (outs) => outs.filter((o) => o.kind === "deliver").map((o) => o.message.toString());

function untilReconnect(s, now, outs) {
  for (let i = 0; i < 100; i++) {
    for (const o of drain(s)) {
      outs.push(o);
      if (o.kind === "reconnect") return [o, now];
      assert.notEqual(o.kind, "failed", JSON.stringify(o));
    }
    const t = s.pollTimeout();
    assert.notEqual(t, null, "no deadline while waiting to reconnect");
    now = Math.max(now, t);
    s.handleTimeout(now);
  }
  throw new Error("no reconnect");
}

function newStream(options = {}) {
  const s = new ResumableStream({ jitterSeed: 1, ...options });
  s.expectResponse(7);
  return s;
}

for (const replay of ["from-cursor", "from-start"]) {
  test(`a stream cut anywhere delivers each message once (${replay})`, () => {
    const w = new Written();
    for (let cut = 0; cut <= w.raw.length; cut++) {
      const s = newStream();
      let now = T0;
      const outs = [];
      if (cut) s.feed(w.raw.subarray(0, cut), now);
      s.connectionEnded("error", now);
      const k = w.lastComplete(cut);
      if (cut === w.raw.length) {
        outs.push(...drain(s));
        assert.deepEqual(delivered(outs), w.messages, `cut ${cut}`);
        assert.equal(outs.at(-1).kind, "finished");
        continue;
      }
      if (k < 0) {
        outs.push(...drain(s));
        assert.equal(outs.at(-1).kind, "failed");
        assert.equal(outs.at(-1).refusal, "unresumable");
        assert.deepEqual(outs.at(-1).outstanding, [7]);
        continue;
      }
      let r;
      [r, now] = untilReconnect(s, now, outs);
      assert.equal(r.lastEventId.toString(), w.events[k][0], `cut ${cut}`);
      assert.equal(r.attempt, 1);
      assert.equal(s.reconnectResponse(200, "text/event-stream", null, now), "read");
      const body = replay === "from-cursor" ? w.after(k) : w.raw;
      for (let at = 0; at < body.length; at += 1 + ((at * 7) % 63)) {
        s.feed(body.subarray(at, at + 1 + ((at * 7) % 63)), now);
        outs.push(...drain(s));
      }
      s.connectionEnded("eof", now);
      outs.push(...drain(s));
      assert.deepEqual(delivered(outs), w.messages, `cut ${cut}`);
      assert.equal(outs.at(-1).kind, "finished", `cut ${cut}`);
      assert.ok(s.isDone);
      assert.deepEqual(s.outstanding, []);
      assert.equal(s.resumes, 1);
      assert.equal(s.stats.delivered, w.messages.length);
    }
  });
}

test("a replay that skips the interrupted event is a gap", () => {
  const w = new Written();
  const k = 1;
  const interrupted = k + 1;
  const cut = w.starts[interrupted] + `id: ${w.events[interrupted][0]}\ndata: `.length + 1;
  const s = newStream();
  s.feed(w.raw.subarray(0, cut), T0);
  s.connectionEnded("error", T0);
  const [r, now] = untilReconnect(s, T0, []);
  assert.equal(r.lastEventId.toString(), w.events[k][0]);
  assert.equal(s.reconnectResponse(200, "text/event-stream; charset=utf-8", null, now), "read");
  s.feed(w.after(interrupted), now);
  const failed = drain(s).filter((o) => o.kind === "failed");
  assert.equal(failed.length, 1);
  const [f] = failed;
  assert.deepEqual([f.failure, f.refusal, f.mustRenegotiate], ["refused", "gap", true]);
  assert.deepEqual(f.outstanding, [7]);
  assert.ok(s.isDone);
  assert.equal(s.poll(), null);
});

test("a restarted stream is refused", () => {
  const w = new Written();
  const s = newStream();
  s.feed(w.raw.subarray(0, w.ends[2]), T0);
  s.connectionEnded("error", T0);
  const [r, now] = untilReconnect(s, T0, []);
  assert.equal(r.lastEventId.toString(), "2");
  assert.equal(s.reconnectResponse(200, "text/event-stream", null, now), "read");
  s.feed(sse("1", progress(99)), now);
  const [f] = drain(s).filter((o) => o.kind === "failed");
  assert.deepEqual([f.failure, f.refusal, f.restart], ["refused", "stream-restarted", "id-reused"]);
  assert.equal(f.cursor.toString(), "2");
  assert.ok(contract.restartKinds.includes(f.restart));
});

test("refused reconnects", () => {
  for (const [status, contentType, refusal] of [
    [404, "text/plain", "session-expired"],
    [409, null, "replay-unavailable"],
    [200, "application/json", "unexpected-response"],
    [200, Buffer.from("text/html"), "unexpected-response"],
  ]) {
    const w = new Written();
    const s = newStream();
    s.feed(w.raw.subarray(0, w.ends[1] + 5), T0);
    s.connectionEnded("error", T0);
    const [, now] = untilReconnect(s, T0, []);
    assert.equal(s.reconnectResponse(status, contentType, null, now), "drop");
    const [f] = drain(s);
    assert.deepEqual([f.kind, f.failure, f.refusal], ["failed", "refused", refusal]);
    assert.ok(f.mustRenegotiate && s.isDone && !s.isOpen);
  }
});

test("busy answers wait Retry-After, then give up", () => {
  const s = newStream({ maxReconnectAttempts: 2, maxDelay: 30 });
  s.feed(sse("p", ""), T0);
  s.connectionEnded("error", T0);
  const outs = [];
  let [, now] = untilReconnect(s, T0, outs);
  assert.equal(s.reconnectResponse(503, null, "7", now), "drop");
  assert.equal(s.poll(), null);
  assert.ok(Math.abs(s.pollTimeout() - (now + 7)) < 1e-6);
  s.handleTimeout(now + 6.9);
  assert.equal(s.poll(), null);
  const [r, later] = untilReconnect(s, now, outs);
  assert.equal(r.attempt, 2);
  assert.equal(s.reconnectResponse(503, null, null, later), "drop");
  const [f] = drain(s);
  assert.deepEqual([f.failure, f.refusal], ["reconnect-failed", "busy"]);
});

test("the replay timeout", () => {
  const s = newStream({ replayTimeout: 2 });
  s.feed(sse("p", ""), T0);
  s.connectionEnded("error", T0);
  const [, now] = untilReconnect(s, T0, []);
  assert.equal(s.reconnectResponse(200, "text/event-stream", null, now), "read");
  assert.ok(Math.abs(s.pollTimeout() - (now + 2)) < 1e-6);
  s.feed(Buffer.from(": still here\n"), now + 1.5);
  assert.ok(Math.abs(s.pollTimeout() - (now + 3.5)) < 1e-6);
  s.handleTimeout(now + 3);
  assert.deepEqual(drain(s), []);
  s.handleTimeout(s.pollTimeout());
  const [f] = drain(s);
  assert.deepEqual([f.failure, f.refusal], ["refused", "replay-missed"]);
  assert.match(f.reason, /no event arrived within 2000 ms/);
});

test("idle connections, and no idle timeout", () => {
  const s = newStream({ idleTimeout: 30 });
  s.feed(sse("41", ""), T0);
  assert.deepEqual(drain(s).map((o) => o.kind), ["cursor"]);
  assert.ok(Math.abs(s.pollTimeout() - (T0 + 30)) < 1e-6);
  s.handleTimeout(s.pollTimeout());
  const [d] = drain(s);
  assert.deepEqual([d.kind, d.needed, d.lastEventId.toString()], ["disconnected", true, "41"]);
  const t = newStream({ idleTimeout: null });
  t.feed(sse("41", ""), T0);
  drain(t);
  assert.equal(t.pollTimeout(), null);
});

test("the delay is the server's retry, clamped", () => {
  const s = newStream({ maxDelay: 5 });
  s.feed(Buffer.concat([Buffer.from("retry: 1000000000000\n"), sse("a", "")]), T0);
  s.connectionEnded("eof", T0);
  const d = drain(s).at(-1);
  assert.deepEqual([d.kind, d.delay, d.lastEventId.toString()], ["disconnected", 5, "a"]);
  assert.ok(Math.abs(s.serverRetry - 1e9) < 1);
});

test("deadlines always fire when handed back", () => {
  let x = 5;
  const rand = () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let i = 0; i < 300; i++) {
    const t = rand() * 1e6;
    const s = newStream({ defaultRetry: 0.25 + rand() * 50, minDelay: 0 });
    s.feed(sse("a", ""), t);
    s.connectionEnded("error", t);
    drain(s);
    const deadline = s.pollTimeout();
    assert.ok(deadline !== null && deadline >= t);
    s.handleTimeout(deadline);
    const outs = drain(s);
    assert.deepEqual(outs.map((o) => o.kind), ["reconnect"], `${t} ${deadline}`);
  }
});

test("pollTimeout never answers before the deadline: handing it back always acts", () => {
  // A deadline is an instant; pollTimeout() answers in a caller's float seconds. Where floats are
  // coarser than the engine's nanoseconds (near 2**39 s they are 2**-13 s apart), a float rounded to
  // nearest lands before the deadline about half the time, and a caller's timer set to it would
  // fire while handleTimeout does nothing. The rule: handleTimeout(pollTimeout()) disconnects.
  let x = 11;
  const rand = () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let i = 0; i < 200; i++) {
    const t = 2 ** 39 + rand() * 2 ** 30;
    const idle = 1 + rand() * 100;
    const s = newStream({ idleTimeout: idle });
    s.feed(sse("41", ""), t);
    drain(s);
    const deadline = s.pollTimeout();
    assert.ok(deadline !== null && deadline > t, `${t} ${idle} ${deadline}`);
    s.handleTimeout(deadline);
    assert.deepEqual(drain(s).map((o) => o.kind), ["disconnected"], `t=${t} idle=${idle} deadline=${deadline}`);
  }
});

test("either cause of a connection's end is a cut: eof and error decide alike", () => {
  // The library's resume docs (src/resume/mod.rs, EndCause and connection_ended): a clean end
  // ("eof") and a failed read ("error") are both a cut to the guard; the blank line decides, not
  // the transport. So for every cut the outputs are the same for both causes, and what they decide
  // is computed from the written stream: finished when every event arrived, unresumable before
  // any complete event, else a reconnect from the last complete event's id.
  const w = new Written();
  const settle = (s) => {
    const outs = [];
    for (let i = 0; i < 100; i++) {
      for (const o of drain(s)) {
        outs.push(o);
        if (["reconnect", "finished", "failed"].includes(o.kind)) return outs;
      }
      s.handleTimeout(s.pollTimeout());
    }
    throw new Error("undecided");
  };
  for (let cut = 0; cut <= w.raw.length; cut++) {
    const [eof, error] = ["eof", "error"].map((cause) => {
      const s = newStream();
      if (cut) s.feed(w.raw.subarray(0, cut), T0);
      s.connectionEnded(cause, T0);
      return settle(s);
    });
    const k = w.lastComplete(cut);
    const last = eof.at(-1);
    if (cut === w.raw.length) assert.equal(last.kind, "finished", `cut ${cut}`);
    else if (k < 0) assert.deepEqual([last.kind, last.refusal], ["failed", "unresumable"], `cut ${cut}`);
    else assert.deepEqual([last.kind, last.lastEventId.toString()], ["reconnect", w.events[k][0]], `cut ${cut}`);
    assert.deepEqual(delivered(eof), w.messages.slice(0, delivered(eof).length), `cut ${cut}`);
    assert.deepEqual(eof, error, `cut ${cut}: eof and error differ`);
  }
});

test("the response is delivered once; deliver members", () => {
  const s = newStream();
  s.feed(sse("1", result(7)), T0);
  s.feed(sse("2", result(7)), T0);
  const outs = drain(s);
  assert.deepEqual(outs.map((o) => o.kind), ["deliver", "skip"]);
  assert.deepEqual([outs[0].rpcKind, outs[0].rpcId, outs[1].skip], ["response", 7, "duplicate-response"]);
  assert.ok(contract.skipKinds.includes(outs[1].skip));
  assert.deepEqual(s.outstanding, []);
  const t = newStream();
  t.feed(Buffer.concat([sse("e1", progress(1), "message"), sse(null, '{"jsonrpc":"2.0","id":"x","method":"ping"}')]), T0);
  const [a, b] = drain(t);
  assert.deepEqual([a.rpcKind, a.rpcId, a.eventId.toString(), a.eventType], ["notification", null, "e1", "message"]);
  assert.deepEqual([b.rpcKind, b.rpcId, b.eventId, b.eventType], ["request", "x", null, null]);
  assert.ok(Buffer.isBuffer(a.message) && a.message.toString() === progress(1));
});

test("ids of every kind", () => {
  const s = new ResumableStream();
  for (const id of ["abc", -3, 2 ** 53 - 1]) s.expectResponse(id);
  s.feed(Buffer.concat([sse("1", result("abc")), sse("2", result(-3)), sse("3", result(2 ** 53 - 1))]), T0);
  assert.deepEqual(drain(s).map((o) => o.rpcId), ["abc", -3, 2 ** 53 - 1]);
  assert.deepEqual(s.outstanding, []);
  s.feed(Buffer.concat([sse("4", '{"jsonrpc":"2.0","id":1.5,"result":1}'), sse("5", '{"jsonrpc":"2.0","id":123456789012345678901234,"result":1}')]), T0);
  const [a, b] = drain(s);
  assert.equal(a.rpcId, 1.5);
  assert.equal(b.rpcId, "123456789012345678901234");
  assert.throws(() => s.expectResponse(1.5), /integer/);
  assert.throws(() => s.expectResponse(true));
});

test("a dropped event is reported and the stream goes on", () => {
  const s = newStream({ maxEvent: 100 });
  s.feed(Buffer.concat([sse("1", progress(1) + " ".repeat(100)), sse("2", result(7))]), T0);
  const [d, r] = drain(s);
  assert.deepEqual([d.kind, d.error, d.eventId.toString(), d.outstanding], ["dropped", "event-too-large", "1", [7]]);
  assert.ok(contract.refusalKinds.includes(d.refusal));
  assert.deepEqual([r.kind, r.rpcId], ["deliver", 7]);
});

test("not resumable; strict policy; keep open; an invalid message", () => {
  const w = new Written();
  let s = newStream({ resumable: false });
  s.feed(w.raw.subarray(0, w.ends[2]), T0);
  s.connectionEnded("error", T0);
  assert.equal(drain(s).at(-1).refusal, "unresumable");
  s = newStream({ policy: "strict" });
  s.feed(w.raw.subarray(0, w.ends[1] + 10), T0);
  s.connectionEnded("error", T0);
  assert.equal(drain(s).at(-1).refusal, "partial-event");
  s = new ResumableStream({ keepOpen: true });
  s.feed(sse("g1", progress(1)), T0);
  s.connectionEnded("eof", T0);
  const outs = drain(s);
  assert.deepEqual(outs.map((o) => o.kind), ["deliver", "disconnected"]);
  assert.equal(outs[1].needed, false);
  s = newStream();
  s.feed(sse("1", '{"jsonrpc":"2.0","id":7,"result":{}}{"jsonrpc"'), T0);
  assert.equal(drain(s)[0].refusal, "trailing-bytes");
});

test("properties and bad arguments", () => {
  const s = newStream();
  assert.deepEqual([s.cursor, s.isDone, s.isOpen, s.outstanding, s.resumes], [null, false, true, [7], 0]);
  assert.deepEqual(Object.keys(s.stats).sort(), [
    "delivered", "deliveredBytes", "discardedBytes", "discardedPartials", "events", "resumes", "skipped",
  ]);
  assert.ok(["portable", "neon", "avx2", "avx512"].includes(s.gateIsa));
  s.feed(sse("c1", ""), T0);
  assert.equal(s.poll().kind, "cursor");
  assert.equal(s.cursor.toString(), "c1");
  assert.equal(new ResumableStream({ maxIsa: "portable" }).gateIsa, "portable");
  assert.throws(() => new ResumableStream({ policy: "lenient" }), /policy/);
  assert.throws(() => new ResumableStream({ maxIsa: "sse9" }), /maxIsa/);
  assert.throws(() => new ResumableStream({ replayTimeout: -1 }), /replayTimeout/);
  assert.throws(() => new ResumableStream({ maxResumes: 2 ** 33 }), /maxResumes/);
  assert.throws(() => s.feed(Buffer.from("x"), -1), /now/);
  assert.throws(() => s.feed(Buffer.from("x"), NaN), /now/);
  assert.throws(() => s.connectionEnded("closed", T0), /cause/);
  assert.throws(() => s.reconnectResponse(70000, null, null, T0), /status/);
});

test("deliver.message is a view of the chunk last fed, unless the caller changed it", () => {
  const body = result(7, "r".repeat(4 << 20));
  const chunk = sse("1", body);
  const s = newStream();
  s.feed(chunk, T0);
  const [d] = drain(s);
  assert.equal(d.kind, "deliver");
  assert.equal(d.message.buffer, chunk.buffer, "shares the input's ArrayBuffer");
  assert.equal(d.message.byteOffset, chunk.byteOffset + "id: 1\ndata: ".length);
  assert.equal(d.message.toString(), body);
  assert.deepEqual(Object.keys(s), [], "the kept chunk is not an enumerable property");
  // A chunk changed between feed and poll: the message is the engine's copy, as it was gated.
  const t = newStream();
  const reused = sse("1", result(7));
  t.feed(reused, T0);
  reused.fill(0x20);
  const [e] = drain(t);
  assert.equal(e.message.toString(), result(7));
  assert.notEqual(e.message.buffer, reused.buffer);
  // A message spread over two chunks is one new buffer.
  const u = newStream();
  const whole = sse("1", result(7));
  u.feed(whole.subarray(0, 20), T0);
  u.feed(whole.subarray(20), T0);
  const [f] = drain(u);
  assert.equal(f.message.toString(), result(7));
  assert.notEqual(f.message.buffer, whole.buffer);
});
