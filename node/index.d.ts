/* The types of node/native's objects that are built by hand (not by napi-rs's derive), placed by
   `napi build` (node/package.json's napi.dtsHeaderFile) above the declarations it generates.
   Edit here, not in the generated index.d.ts. */

/* eslint-disable */

/** `gate`'s verdict: exactly one JSON value, a proper prefix of one, one value and more, or none. */
export type Verdict = "complete" | "incomplete" | "trailing" | "invalid"

/** One dispatched SSE event. */
export interface Event {
  /**
   * The `data` lines joined with LF. When the decoder kept the data as one slice of the chunk
   * just fed, a view of that chunk's memory (it shares its `ArrayBuffer`, as `Buffer#subarray`
   * does): change the chunk and `data` changes. Otherwise a new `Buffer` of the decoder's own
   * (the copied data of the events of one `feed` call share one new `ArrayBuffer`).
   */
  data: Buffer
  /** The event type from the `event` field; null when absent or empty (the type is `message`). */
  event: string | null
  /** The last event ID at dispatch (inherited when this event has no `id` field); null when empty. */
  id: string | null
  /** Whether this event's own block carried an `id` field. */
  hasOwnId: boolean
  /** The reconnection time (ms) from a valid `retry` field in this event's block. */
  retry: number | null
}

/** The block still open when a connection's input ended: never dispatched. */
export interface PartialEvent {
  /** Wire bytes of the open block. */
  bytes: number
  /** Data bytes it had accumulated. */
  dataLen: number
  /** The block's `id` value, when its `id` line had arrived whole. */
  id: string | null
}

/**
 * An SSE event went over one of the decoder's limits and was dropped (the decoder skipped to the
 * next blank line and went on). Thrown by `Decoder#feed` once the whole chunk is decoded.
 */
export declare class DecodeError extends Error {
  /** A word of `contract.decodeErrorKinds` (`"line-too-long"`, `"event-too-large"`, ...). */
  readonly kind: string
  /** The limit that was passed (bytes), for the limit errors. */
  readonly limit: number | null
  /** Where in the connection's input (bytes) the error was found. */
  readonly offset: number
  /** The dropped event's `id`, when known. */
  readonly id: string | null
  /** The events the same `feed` call completed (on the first error of the call). */
  readonly events: Event[]
  /** Every error of the call, this one first. */
  readonly errors: DecodeError[]
}

/** The wire contract, read from the Rust library when the module loads. */
export declare const contract: Contract

/** A JSON-RPC id: a number, a string, or null. Ids beyond 2**53 are given as their JSON text. */
export type RpcId = number | string | null

/** A message to hand to the application: one complete JSON value. */
export interface Deliver {
  kind: "deliver"
  /**
   * The message's bytes. When it lies in the chunk last fed, and that chunk still holds the bytes
   * the engine gated, a view of the chunk (it shares its `ArrayBuffer`); otherwise a new Buffer.
   */
  message: Buffer
  /** A word of `contract.rpcKinds`. */
  rpcKind: string
  /** The top-level `id`; null when absent or `null`. */
  rpcId: RpcId
  eventId: Buffer | null
  eventType: string | null
}
/** An event passed over (a word of `contract.skipKinds`). */
export interface Skip { kind: "skip"; skip: string; reason: string }
/** The resume cursor moved. */
export interface Cursor { kind: "cursor"; cursor: Buffer }
/** An event over a decoder limit was dropped. */
export interface Dropped {
  kind: "dropped"
  reason: string
  /** A word of `contract.decodeErrorKinds`. */
  error: string
  /** A word of `contract.refusalKinds`. */
  refusal: string
  eventId: Buffer | null
  cursor: Buffer | null
  outstanding: RpcId[]
}
/** The connection ended. */
export interface Disconnected {
  kind: "disconnected"
  /** Seconds to wait before the reconnect. */
  delay: number
  needed: boolean
  lastEventId: Buffer | null
  discarded: PartialEvent | null
}
/** Time to reconnect: send GET with `Last-Event-ID: lastEventId`. */
export interface Reconnect { kind: "reconnect"; attempt: number; lastEventId: Buffer | null }
/** The stream failed. */
export interface Failed {
  kind: "failed"
  /** A word of `contract.failureKinds`. */
  failure: string
  reason: string
  refusal: string | null
  restart: string | null
  mustRenegotiate: boolean
  cursor: Buffer | null
  outstanding: RpcId[]
}
/** Every expected response was delivered. */
export interface Finished { kind: "finished" }
/** What `ResumableStream#poll` returns. */
export type Output = Deliver | Skip | Cursor | Dropped | Disconnected | Reconnect | Failed | Finished

/** `ResumableStream#stats`. */
export interface Stats {
  events: number
  delivered: number
  deliveredBytes: number
  skipped: number
  discardedPartials: number
  discardedBytes: number
  resumes: number
}

/**
 * Which binding artifact the generated loader actually loaded: `'native'` for
 * a native addon, otherwise the `platformArchABI` of the WASI flavor. Every
 * flavor napi-rs can build is listed, because `NAPI_RS_NATIVE_LIBRARY_PATH`
 * can point the loader at a WASI artifact this package does not build itself.
 */
export declare const __napiBindingTarget: 'native' | 'wasm32-wasi' | 'wasm32-wasip1'

/** Incremental SSE decoder (WHATWG "interpreting an event stream"). */
export declare class Decoder {
  constructor(options?: DecoderOptions | undefined | null)
  /**
   * Decodes a chunk; returns the events it completed. An event over a limit is dropped and
   * thrown as a `DecodeError` once the chunk is decoded (the decoder goes on from the next
   * blank line); the error's `events` holds the events the same chunk completed.
   */
  feed(chunk: Uint8Array): Event[]
  /**
   * Ends the connection's input. Returns the events still to dispatch: always none (`feed`
   * returns every event it completes; an unterminated block is discarded, as WHATWG says, and
   * reported in `discarded`). `lastEventId` and `retry` are kept for the next connection.
   */
  finish(): Event[]
  /** The block the last `finish()` discarded, if the input ended inside one. */
  get discarded(): PartialEvent | null
  /** The committed last event ID (null when empty). */
  get lastEventId(): string | null
  /** The reconnection time (ms) from the last valid `retry` field. */
  get retry(): number | null
  /** Bytes of this connection's input decoded so far. */
  get offset(): number
}

/**
 * One logical SSE stream of MCP Streamable HTTP (a POST's response and its resumptions, or the
 * standalone GET stream): decoder, gate and resumption guard, with no IO and no clock.
 */
export declare class ResumableStream {
  constructor(options?: StreamOptions | undefined | null)
  /**
   * Registers a request (its JSON-RPC id: an integer or a string) whose response this stream
   * must deliver.
   */
  expectResponse(id: number | string): void
  /** A body chunk arrived at `now` (seconds). The chunk is copied; see `Deliver.message`. */
  feed(chunk: Uint8Array, now: number): void
  /** The open connection's body ended at `now`: `cause` is `"eof"` or `"error"`. */
  connectionEnded(cause: "eof" | "error", now: number): void
  /** The next output, or null until more input or time. */
  poll(): Output | null
  /** When the stream next needs `handleTimeout()` (seconds, on the caller's clock), if ever. */
  pollTimeout(): number | null
  /** Time passed: `now` is at or after `pollTimeout()` (earlier calls do nothing). */
  handleTimeout(now: number): void
  /** The reconnect request was answered at `now`: `"read"` (feed its body) or `"drop"`. */
  reconnectResponse(status: number, contentType: string | Buffer | null | undefined, retryAfter: string | Buffer | null | undefined, now: number): "read" | "drop"
  /** The reconnect request failed at `now` before a response head. */
  reconnectFailed(now: number): void
  /** The id of the last event processed (sent as `Last-Event-ID` on a resume). */
  get cursor(): Buffer | null
  /** Whether the stream finished or failed. */
  get isDone(): boolean
  /** Whether a connection is open and wants its bytes. */
  get isOpen(): boolean
  /** Requests this stream must still deliver. */
  get outstanding(): RpcId[]
  /** Resumes so far. */
  get resumes(): number
  /** The stream's counters. */
  get stats(): Stats
  /** The delay (seconds) the server last asked for (`retry:` or `Retry-After`), before clamps. */
  get serverRetry(): number | null
  /** The instruction set the stream's gate runs on. */
  get gateIsa(): string
}

/**
 * The code of the error answering a `method` request that failed with the kind `kind` (a word
 * of `contract.kinds`), whose outcome is `outcome` (a word of `contract.outcomes`).
 */
export declare function codeFor(method: string, kind: string, outcome: string): number

/** The wire contract: codes, words, default limits (bytes, counts) and durations (seconds). */
export interface Contract {
  codes: Array<ContractCode>
  kinds: Array<string>
  outcomes: Array<string>
  toolsCall: string
  data: ContractDataKeys
  DEFAULT_MAX_EVENT: number
  DEFAULT_MAX_LINE: number
  DEFAULT_MAX_FIELD: number
  DEFAULT_MAX_BLOCK: number
  DEFAULT_MAX_JSON_BODY: number
  DEFAULT_MAX_ERROR_BODY: number
  DEFAULT_MAX_RESUMES: number
  DEFAULT_MAX_STALLED_RESUMES: number
  DEFAULT_MAX_RECONNECT_ATTEMPTS: number
  DEFAULT_CALL_TIMEOUT: number
  DEFAULT_CONNECT_TIMEOUT: number
  DEFAULT_REPLAY_TIMEOUT: number
  DEFAULT_IDLE_TIMEOUT: number
  DEFAULT_MAX_DELAY: number
  DEFAULT_MIN_DELAY: number
  DEFAULT_RETRY: number
  DEFAULT_BACKOFF: number
  refusalKinds: Array<string>
  failureKinds: Array<string>
  restartKinds: Array<string>
  skipKinds: Array<string>
  decodeErrorKinds: Array<string>
  rpcKinds: Array<string>
}

/** One error code of the contract. */
export interface ContractCode {
  /** The JSON-RPC error code (e.g. -32050). */
  value: number
  /** Its word (e.g. `"outcome-unknown"`). */
  word: string
  /** The error's `message`. */
  message: string
}

/** The keys of an error's `data`. */
export interface ContractDataKeys {
  kind: string
  outcome: string
  method: string
  reason: string
  refusal: string
  status: string
}

/** The decoder's limits (bytes); each defaults to the contract's (`contract.DEFAULT_MAX_*`). */
export interface DecoderOptions {
  /** The longest line (`DEFAULT_MAX_LINE`). */
  maxLine?: number
  /** The largest event's data (`DEFAULT_MAX_EVENT`). */
  maxEvent?: number
  /** The longest `event`/`id`/`retry` value (`DEFAULT_MAX_FIELD`). */
  maxField?: number
  /** The largest block on the wire, comments included (`DEFAULT_MAX_BLOCK`). */
  maxBlock?: number
  /** Data shorter than this is copied rather than sliced (the Rust config's default when absent). */
  copyBelow?: number
}

/**
 * The verdict on `data`: `"complete"` (exactly one JSON value, whitespace around it allowed),
 * `"incomplete"` (a proper prefix of one), `"trailing"` (one value and then more) or `"invalid"`.
 */
export declare function gate(data: Uint8Array, options?: GateOptions | undefined | null): Verdict

export interface GateOptions {
  /** The nesting limit (levels of arrays and objects); the gate's default when absent. */
  maxDepth?: number
}

/**
 * Every `StreamConfig` knob, as Python's `ResumableStream` takes them: limits in bytes, durations
 * in seconds. Each defaults to the library's (`contract.DEFAULT_*`, or the Rust config's own).
 */
export interface StreamOptions {
  /** Whether a cut may be resumed (true). */
  resumable?: boolean
  /** Keep the stream open after every expected response (the GET stream) (false). */
  keepOpen?: boolean
  maxEvent?: number
  maxLine?: number
  maxField?: number
  maxBlock?: number
  copyBelow?: number
  replayTimeout?: number
  /** Seconds without a byte before the connection counts as cut; null: never. */
  idleTimeout?: number | null
  defaultRetry?: number
  maxDelay?: number
  minDelay?: number
  backoff?: number
  maxResumes?: number
  maxStalledResumes?: number
  maxReconnectAttempts?: number
  jitterSeed?: number
  gateAhead?: number
  /** `"verified"` (default) or `"strict"`. */
  policy?: "verified" | "strict"
  window?: number
  unrequestedWindow?: number
  contiguousIds?: boolean
  maxDepth?: number
  /** `"portable"`, `"neon"`, `"avx2"` or `"avx512"`: the best instruction set the gate may use. */
  maxIsa?: string
}
