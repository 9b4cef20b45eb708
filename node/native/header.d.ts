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
