/* The types of `ssegate/mcp` (node/mcp.js), written by hand and checked with `tsc --noEmit
   --strict` against the SDK's own `Transport` (node/tests/types.ts). */

import type { Transport, TransportSendOptions, FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import type { ContractCode } from "./index.js"

/** `GuardedTransport`'s options. Durations are in seconds, sizes in bytes (as `contract`'s). */
export interface GuardedTransportOptions {
  /** Init merged into every request (headers, ...); `method`, `body`, `signal`, `redirect` are the transport's. */
  requestInit?: RequestInit
  /**
   * The SDK's OAuth client provider: its token is sent with every request, resumes included; a
   * `401` (or `403` `insufficient_scope`) runs the SDK's `auth()` and sends once more. When the
   * user must sign in, the request fails with the SDK's `UnauthorizedError` (as with the SDK's own
   * transport) and `finishAuth(code)` completes it.
   */
  authProvider?: OAuthClientProvider
  /** The `fetch` to use (default: the platform's). */
  fetch?: FetchLike
  /** A session to continue. */
  sessionId?: string
  /**
   * From a request to its answer, resumes included (`contract.DEFAULT_CALL_TIMEOUT`, 600 s); when
   * it passes, the connection is dropped and the request answered with the timeout error. `null`:
   * no deadline. The SDK's own request timeout (60 s unless the call sets `timeout`) still applies.
   */
  timeout?: number | null
  /** The largest SSE event's data (`contract.DEFAULT_MAX_EVENT`, 64 MiB). */
  maxEvent?: number
  /** The largest `application/json` answer (`contract.DEFAULT_MAX_JSON_BODY`, 64 MiB). */
  maxJsonBody?: number
  /** How much of an error answer's body is read (`contract.DEFAULT_MAX_ERROR_BODY`, 1 KiB). */
  maxErrorBody?: number
  /** How long a resume may take to bring its first event (`contract.DEFAULT_REPLAY_TIMEOUT`). */
  replayTimeout?: number
  /** How long a connection may bring nothing before it counts as cut (`null`: never). */
  idleTimeout?: number | null
  /** The longest wait before a reconnect, whatever the server asks (`contract.DEFAULT_MAX_DELAY`). */
  maxDelay?: number
}

/**
 * MCP Streamable HTTP for the SDK's `Client`, every answer read by ssegate's engine: no event cap
 * below `maxEvent`, every message one complete JSON value, one response per request id, a cut
 * resumed in place only when the guard proves the replay continues the cut stream, no request
 * ever sent twice. What cannot be delivered is answered with the contract's typed error (an
 * `McpError` with one of its codes; `typed(error)` gives the class).
 */
export declare class GuardedTransport implements Transport {
  constructor(url: string | URL, options?: GuardedTransportOptions)
  start(): Promise<void>
  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void>
  close(): Promise<void>
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: <T extends JSONRPCMessage>(message: T) => void
  get sessionId(): string | undefined
  setProtocolVersion(version: string): void
  get protocolVersion(): string | undefined
  /** Ends the session with `DELETE` (a `405` is taken as "the server keeps sessions itself"). */
  terminateSession(): Promise<void>
  /** Completes a sign-in the `authProvider` sent the user to. */
  finishAuth(authorizationCode: string): Promise<void>
}

/** What an error's `data` says (the contract's keys). */
export interface GuardedErrorData {
  /** A word of `contract.kinds` (`KIND`). */
  kind: string
  /** A word of `contract.outcomes`: `"unknown"` (the server may have acted) or `"not-run"`. */
  outcome: string
  method: string
  /** One line: what happened. */
  reason: string
  /** The engine's refusal (a word of `contract.refusalKinds`), when it refused the stream. */
  refusal?: string
  /** The HTTP status, when there was one. */
  status?: number
}

/** An error with one of the contract's codes. */
export declare class GuardedError extends Error {
  readonly code: number
  readonly data: GuardedErrorData
}
/** -32050: a `tools/call` whose answer was lost: the server may have run the tool; nothing was sent again. */
export declare class OutcomeUnknown extends GuardedError {}
/** -32051: the server could not be reached, answered with an error status, or not in time. */
export declare class Unavailable extends GuardedError {}
/** -32052: the server broke the protocol (a torn, invalid or foreign answer). */
export declare class ServerProtocol extends GuardedError {}
/** -32053: the answer's stream was refused: it could not be resumed as the same stream. */
export declare class Refused extends GuardedError {}

/**
 * `error` as `OutcomeUnknown`, `Unavailable`, `ServerProtocol` or `Refused` when its `code` is one
 * of the contract's (the original is the `cause`), else `error` itself.
 */
export declare function typed<E>(error: E): E | GuardedError

/** `contract.kinds` by name (`KIND.TIMEOUT`, `KIND.RECONNECT_FAILED`, ...). */
export declare const KIND: Readonly<Record<string, string>>
/** `contract.outcomes` by name (`OUTCOME.UNKNOWN`, `OUTCOME.NOT_RUN`, `OUTCOME.FAILED`). */
export declare const OUTCOME: Readonly<Record<string, string>>
/** The contract's codes by name (`CODE.OUTCOME_UNKNOWN.value` is -32050). */
export declare const CODE: Readonly<Record<string, ContractCode>>
export declare const OUTCOME_UNKNOWN: number
export declare const UNAVAILABLE: number
export declare const SERVER_PROTOCOL: number
export declare const REFUSED: number
