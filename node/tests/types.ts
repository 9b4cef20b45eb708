// Uses the API with strict types: `npx tsc --noEmit --strict` (node/test) must accept this file,
// and each `@ts-expect-error` line must be an error. It is type-checked, never run.
import {
  gate,
  Decoder,
  DecodeError,
  ResumableStream,
  contract,
  codeFor,
  type Event,
  type Output,
  type Verdict,
  type RpcId,
  type Stats,
} from "..";

const verdict: Verdict = gate(new Uint8Array([0x7b, 0x7d]), { maxDepth: 64 });
const words: Array<"complete" | "incomplete" | "trailing" | "invalid"> = [verdict];

const decoder = new Decoder({ maxLine: contract.DEFAULT_MAX_LINE, maxEvent: 1 << 20 });
try {
  const events: Event[] = decoder.feed(Buffer.from("data: x\n\n"));
  for (const e of events) {
    const data: Buffer = e.data;
    const type: string | null = e.event;
    const id: string | null = e.id;
    const own: boolean = e.hasOwnId;
    const retry: number | null = e.retry;
    void [data, type, id, own, retry];
  }
} catch (err) {
  if (err instanceof DecodeError) {
    const kind: string = err.kind;
    const limit: number | null = err.limit;
    const events: Event[] = err.events;
    const all: DecodeError[] = err.errors;
    void [kind, limit, events, all, err.offset, err.message];
  }
}
decoder.finish();
const partial = decoder.discarded;
if (partial !== null) {
  const n: number = partial.bytes + partial.dataLen;
  void n;
}
const last: string | null = decoder.lastEventId;
const offset: number = decoder.offset;

const stream = new ResumableStream({
  resumable: true,
  keepOpen: false,
  idleTimeout: null,
  replayTimeout: contract.DEFAULT_REPLAY_TIMEOUT,
  policy: "strict",
  maxIsa: "portable",
  jitterSeed: 1,
});
stream.expectResponse(7);
stream.expectResponse("req-1");
stream.feed(new Uint8Array(0), performance.now() / 1000);
stream.connectionEnded("error", 1);
const answer: "read" | "drop" = stream.reconnectResponse(200, "text/event-stream", null, 2);
stream.reconnectFailed(3);

function handle(o: Output): string {
  switch (o.kind) {
    case "deliver": {
      const message: Buffer = o.message;
      const id: RpcId = o.rpcId;
      return `${message.length} ${String(id)} ${o.rpcKind}`;
    }
    case "skip":
      return o.skip + o.reason;
    case "cursor":
      return o.cursor.toString();
    case "dropped":
      return o.error + o.refusal + o.outstanding.length;
    case "disconnected":
      return `${o.delay} ${o.needed} ${o.discarded?.dataLen ?? 0}`;
    case "reconnect":
      return `${o.attempt} ${o.lastEventId?.toString() ?? ""}`;
    case "failed":
      return `${o.failure} ${o.refusal ?? ""} ${o.restart ?? ""} ${o.mustRenegotiate}`;
    case "finished":
      return "done";
  }
}
for (let o = stream.poll(); o !== null; o = stream.poll()) handle(o);
const timeout: number | null = stream.pollTimeout();
if (timeout !== null) stream.handleTimeout(timeout);
const stats: Stats = stream.stats;
const cursor: Buffer | null = stream.cursor;
const done: boolean = stream.isDone;
const code: number = codeFor(contract.toolsCall, contract.kinds[0] ?? "refused", "unknown");

void [words, last, offset, answer, stats, cursor, done, code];

// @ts-expect-error: a string is not bytes
gate("{}");
// @ts-expect-error: no such option
new Decoder({ maxLines: 1 });
// @ts-expect-error: the cause is "eof" or "error"
stream.connectionEnded("closed", 1);
// @ts-expect-error: outputs are discriminated by kind
handle({ kind: "deliver" });
