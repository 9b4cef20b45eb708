// `ssegate/mcp`: `GuardedTransport`, a Transport for the official TypeScript MCP SDK's `Client`
// (Streamable HTTP over `fetch`) whose every answer is read by ssegate's engine: decoded, gated,
// guarded, resumed in place when the guard proves the replay continues the cut stream, and
// otherwise answered with the wire contract's typed error. Types: mcp.d.ts. Users' guide:
// docs/TYPESCRIPT.md.
//
// What it does, in the order of an exchange:
// - `send` POSTs each message (never twice). For a request it returns once the answer's head is
//   handled; the body is read in the background, within the request's deadline (`timeout`).
// - An `application/json` answer is read up to `maxJsonBody`, gated whole, parsed once.
// - A `text/event-stream` answer is fed to a `ResumableStream` (`expectResponse(id)`); its outputs
//   drive everything: messages to `onmessage`, resumes (`GET` + `Last-Event-ID`) when it asks,
//   the typed error when it fails. Its deadlines (replay, idle) are timed with its own
//   `pollTimeout`/`handleTimeout`.
// - Error statuses: the server's own JSON-RPC error when the (capped) body is one, else the
//   contract's `status` error. No redirect is followed. `401` with an `authProvider` runs the
//   SDK's `auth()` and sends once more, as the SDK's own transport does.
// - Every failure of a request is delivered through `onmessage` as a JSON-RPC error answering it,
//   so the SDK rejects the call with an `McpError` whose `code` is the contract's.
"use strict";

const { ResumableStream, gate, contract, codeFor } = require("./index.js");

// ---- the contract, by name -------------------------------------------------------------------

/** `contract.kinds` by name: `KIND.TIMEOUT` is the word of the timeout kind. */
const KIND = byName(contract.kinds);
/** `contract.outcomes` by name: `OUTCOME.NOT_RUN`... */
const OUTCOME = byName(contract.outcomes);
/** The contract's codes by name: `CODE.OUTCOME_UNKNOWN` is `{ value, word, message }`. */
const CODE = Object.freeze(Object.fromEntries(contract.codes.map((c) => [nameOf(c.word), c])));
const DATA = contract.data;

function nameOf(word) {
  return word.toUpperCase().replace(/-/g, "_");
}

function byName(words) {
  return Object.freeze(Object.fromEntries(words.map((w) => [nameOf(w), w])));
}

/** The error of one of the contract's codes, as `typed()` gives it. */
class GuardedError extends Error {
  constructor(code, message, data, options) {
    super(message, options);
    this.name = new.target.name;
    /** The JSON-RPC error code (one of the contract's). */
    this.code = code;
    /** What happened: `kind`, `outcome`, `method`, `reason`, and `refusal`, `status` when known. */
    this.data = data;
  }
}
/** -32050: a `tools/call` whose answer was lost: the server may have run the tool. */
class OutcomeUnknown extends GuardedError {}
/** -32051: the server could not be reached, answered with an error status, or not in time. */
class Unavailable extends GuardedError {}
/** -32052: the server broke the protocol. */
class ServerProtocol extends GuardedError {}
/** -32053: the answer's stream was refused: it could not be resumed as the same stream. */
class Refused extends GuardedError {}

/** Each code's message, by code. */
const MESSAGES = new Map(contract.codes.map((c) => [c.value, c.message]));

const CLASSES = new Map([
  [CODE.OUTCOME_UNKNOWN.value, OutcomeUnknown],
  [CODE.UNAVAILABLE.value, Unavailable],
  [CODE.SERVER_PROTOCOL.value, ServerProtocol],
  [CODE.REFUSED.value, Refused],
]);

/**
 * `error` (what a call through the SDK threw) as one of this module's classes when its `code` is
 * one of the contract's (the SDK's `McpError` prefixes its message with `MCP error CODE: `; the
 * typed error keeps the contract's message and the original as its `cause`), else `error` itself.
 */
function typed(error) {
  if (error instanceof GuardedError || error === null || typeof error !== "object") return error;
  const Class = CLASSES.get(error.code);
  if (Class === undefined) return error;
  return new Class(error.code, MESSAGES.get(error.code), error.data, { cause: error });
}

// ---- small helpers -------------------------------------------------------------------------------

/** Seconds on a monotonic clock: the engine's `now`. */
const now = () => performance.now() / 1000;

/** The 2026-07-28 revision and later: no resumption, no GET stream. */
const FIRST_STATELESS_VERSION = "2026-07-28";

function described(error) {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? ` (${error.cause.code ?? error.cause.name}: ${error.cause.message})` : "";
  return `${error.name}: ${error.message}${cause}`;
}

/** Whether a `fetch` failure happened before any byte of the request could reach the server. */
function neverConnected(error) {
  const code = error?.cause?.code ?? error?.code;
  return (
    code === "ECONNREFUSED" ||
    code === "ENOTFOUND" ||
    code === "EAI_AGAIN" ||
    code === "EHOSTUNREACH" ||
    code === "ENETUNREACH" ||
    code === "UND_ERR_CONNECT_TIMEOUT"
  );
}

function isAbort(error, signal) {
  return signal.aborted || error?.name === "AbortError";
}

/** A value `race` gives when the timer won. */
const TIMER = Symbol("timer");

/**
 * `promise`, or `TIMER` once `seconds` pass (never, when null) or `signal` aborts, whichever is
 * first; the timer and the listener are removed either way. (A body read does not always settle
 * when its fetch is aborted.)
 */
function race(promise, seconds, signal) {
  let timer = null;
  let onAbort;
  const expiry = new Promise((resolve) => {
    onAbort = () => resolve(TIMER);
    if (signal.aborted) return resolve(TIMER);
    signal.addEventListener("abort", onAbort, { once: true });
    if (seconds !== null) timer = setTimeout(() => resolve(TIMER), Math.max(0, seconds) * 1000);
  });
  return Promise.race([promise, expiry]).finally(() => {
    if (timer !== null) clearTimeout(timer);
    signal.removeEventListener("abort", onAbort);
  });
}

/** Waits `seconds` (at least 0); false when `signal` aborted the wait. */
async function sleep(seconds, signal) {
  await race(new Promise(() => {}), seconds, signal);
  return !signal.aborted;
}

/**
 * An `AbortController` linked to `outer` (aborted with it), with a deadline of `seconds` (none
 * when null) that calls `onExpire` (by default, aborts). `dispose()` clears the timer and the link.
 */
class Linked {
  constructor(outer, seconds, onExpire) {
    this.controller = new AbortController();
    this.signal = this.controller.signal;
    this.outer = outer;
    this.abort = () => this.controller.abort();
    this.timer = null;
    if (outer.aborted) this.abort();
    else outer.addEventListener("abort", this.abort, { once: true });
    if (seconds !== null) {
      this.timer = setTimeout(onExpire ?? this.abort, seconds * 1000);
      this.timer.unref?.();
    }
  }

  dispose() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.outer.removeEventListener("abort", this.abort);
  }
}

function mediaType(response) {
  return (response.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
}

/** Whether `response` is an event stream (a `GET`'s answer to read). */
function isEventStream(response) {
  return response.status === 200 && mediaType(response) === "text/event-stream";
}

/** Drops a response's body without reading it. */
function discard(response) {
  response.body?.cancel().catch(() => {});
}

/** At most `cap` bytes of `response`'s body: `{ body, more }` (`more`: it had more; not read). */
async function readCapped(response, cap) {
  const parts = [];
  let length = 0;
  if (response.body === null) return { body: Buffer.alloc(0), more: false };
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { body: Buffer.concat(parts, length), more: false };
      const room = cap - length;
      if (value.length > room) {
        parts.push(value.subarray(0, room));
        return { body: Buffer.concat(parts, cap), more: true };
      }
      parts.push(value);
      length += value.length;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function isId(v) {
  return typeof v === "string" || (typeof v === "number" && Number.isInteger(v));
}

/** What a JSON value is as a JSON-RPC message: "request", "notification", "response", "error", or null. */
function messageKind(v) {
  if (!isObject(v) || v.jsonrpc !== "2.0") return null;
  if (typeof v.method === "string") {
    if (v.params !== undefined && !isObject(v.params)) return null;
    return "id" in v ? (isId(v.id) ? "request" : null) : "notification";
  }
  if (!isId(v.id)) return null;
  if ("result" in v) return isObject(v.result) && !("error" in v) ? "response" : null;
  if (isObject(v.error) && Number.isInteger(v.error.code) && typeof v.error.message === "string") return "error";
  return null;
}

function sameId(a, b) {
  return a === b || (a !== null && b !== null && String(a) === String(b) && typeof a === typeof b);
}

/** A positive number of seconds, or null for "none" when `nullable`. */
function seconds(name, value, fallback, nullable) {
  if (value === undefined) return fallback;
  if (value === null && nullable) return null;
  if (typeof value !== "number" || !(value > 0) || !Number.isFinite(value)) {
    throw new TypeError(`${name} must be a positive number of seconds${nullable ? " or null" : ""}, not ${value}`);
  }
  return value;
}

function bytes(name, value, fallback) {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new TypeError(`${name} must be a positive whole number of bytes, not ${value}`);
  }
  return value;
}

// ---- one request ---------------------------------------------------------------------------------

/**
 * A request waiting for its answer. Every answer goes through `answer()`, which hands the SDK one
 * and drops any later one. Owns the request's deadline and its `AbortController` (linked to the
 * transport's), so the deadline, a cancellation and `close()` all drop its connections.
 */
class Pending {
  constructor(transport, message) {
    this.transport = transport;
    this.id = message.id;
    this.method = message.method;
    this.answered = false;
    const timeout = transport._options.timeout;
    this.link = new Linked(transport._controller.signal, timeout, () => this.expire(timeout));
    this.signal = this.link.signal;
  }

  expire(timeout) {
    this.fail(KIND.TIMEOUT, OUTCOME.UNKNOWN, `no answer within ${timeout} s (the call's deadline); the connection was dropped`);
  }

  /** Hands `message` (answering this request) to the SDK, unless it was answered already. */
  answer(message) {
    if (this.answered) return;
    this.settle();
    this.transport._deliver(message);
  }

  /** Answers with the contract's error: its code by `codeFor(method, kind, outcome)`. */
  fail(kind, outcome, reason, extra = {}) {
    if (this.answered) return;
    this.answer(errorMessage(this.id, this.method, kind, outcome, reason, extra));
  }

  /** Done: no answer will be handed on; the deadline is cleared and the connections dropped. */
  settle() {
    this.answered = true;
    this.transport._pending.delete(this);
    this.link.dispose();
    this.link.abort();
  }
}

function errorData(method, kind, outcome, reason, extra) {
  const data = { [DATA.kind]: kind, [DATA.outcome]: outcome, [DATA.method]: method, [DATA.reason]: reason };
  if (extra.refusal != null) data[DATA.refusal] = extra.refusal;
  if (extra.status != null) data[DATA.status] = extra.status;
  return data;
}

/** The contract's error answering request `id`, a `method` request. */
function errorMessage(id, method, kind, outcome, reason, extra) {
  const code = codeFor(method, kind, outcome);
  const data = errorData(method, kind, outcome, reason, extra);
  return { jsonrpc: "2.0", id, error: { code, message: MESSAGES.get(code), data } };
}

/** The typed error thrown for a message that is not a request (nothing to answer). */
function thrown(method, kind, outcome, reason, extra = {}) {
  const { error } = errorMessage(null, method, kind, outcome, reason, extra);
  return new (CLASSES.get(error.code))(error.code, `${error.message}: ${reason}`, error.data);
}

// ---- driving one stream over its connections -----------------------------------------------------

const DONE = Symbol("done");
const ENDED = Symbol("ended");

/** Drives one `ResumableStream` over a response and the resumes it asks for. */
class Drive {
  /**
   * @param transport the GuardedTransport
   * @param stream the engine
   * @param request the Pending it answers (null: the standalone GET stream)
   * @param signal drops every connection (the request's, or the transport's)
   * @param onresumptiontoken the SDK's callback, given the cursor each time it moves
   */
  constructor(transport, stream, request, signal, onresumptiontoken) {
    this.transport = transport;
    this.stream = stream;
    this.request = request;
    this.signal = signal;
    this.onresumptiontoken = onresumptiontoken;
    this.pending = null;
    /** A resumed request's stream: its first response is the answer, whatever its id. */
    this.adoptsResponse = false;
    /** The resume token last given to `onresumptiontoken`. */
    this.token = null;
  }

  async run(response) {
    let current = response;
    while (current !== null && !this.signal.aborted) {
      const state = await this.read(current);
      if (state === DONE) return;
      current = await this.nextConnection();
    }
  }

  /** Reads one connection to its end, the engine's deadlines timed meanwhile: DONE or ENDED. */
  async read(response) {
    if (response.body === null) {
      this.stream.connectionEnded("eof", now());
      return this.drain() ?? ENDED;
    }
    const reader = response.body.getReader();
    let next = null;
    try {
      for (;;) {
        if (next === null) next = reader.read().then((r) => r, (e) => ({ error: e }));
        const deadline = this.stream.pollTimeout();
        const item = await race(next, deadline === null ? null : deadline - now(), this.signal);
        if (this.signal.aborted) return DONE;
        const t = now();
        let ended = false;
        if (item === TIMER) {
          // A replay that brought nothing is refused; an idle connection is ended (and resumed).
          this.stream.handleTimeout(t);
        } else {
          next = null;
          if (item.error !== undefined) {
            this.stream.connectionEnded("error", t);
            ended = true;
          } else if (item.done) {
            this.stream.connectionEnded("eof", t);
            ended = true;
          } else {
            this.stream.feed(item.value, t);
          }
        }
        const state = this.drain();
        if (state !== null) return state;
        if (ended) return ENDED;
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  /** What the engine has to say while a connection is open: DONE, ENDED, or null to read on. */
  drain() {
    let out;
    while ((out = this.stream.poll()) !== null) {
      if (this.handle(out)) return DONE;
      if (out.kind === "reconnect") {
        this.pending = out;
        return ENDED;
      }
      if (out.kind === "disconnected") return ENDED;
    }
    return null;
  }

  /** After a connection ended: the next one to read (a resume), or null when done. */
  async nextConnection() {
    for (;;) {
      if (this.signal.aborted) return null;
      const out = this.pending ?? this.stream.poll();
      this.pending = null;
      if (out === null) {
        const deadline = this.stream.pollTimeout();
        if (deadline === null) return null;
        if (!(await sleep(deadline - now(), this.signal))) return null;
        this.stream.handleTimeout(now());
        continue;
      }
      if (out.kind !== "reconnect") {
        if (this.handle(out)) return null;
        continue;
      }
      let response;
      try {
        response = await this.transport._get(out.lastEventId, this.signal);
      } catch (error) {
        if (isAbort(error, this.signal)) return null;
        if (error instanceof SignInFailed) {
          this.lost(KIND.AUTH, `a resume was not sent: ${error.message}`);
          return null;
        }
        this.transport._debug(`a resume failed: ${described(error)}`);
        this.stream.reconnectFailed(now());
        continue;
      }
      const answer = this.stream.reconnectResponse(
        response.status,
        response.headers.get("content-type"),
        response.headers.get("retry-after"),
        now(),
      );
      if (answer === "read") return response;
      discard(response);
    }
  }

  /** The answer was lost (`kind`): the request's typed error, or a report for the GET stream. */
  lost(kind, reason, extra) {
    if (this.request !== null) this.request.fail(kind, OUTCOME.UNKNOWN, reason, extra);
    else this.transport._error(new Error(`the GET stream was lost: ${reason}`));
  }

  /** One output of the engine; true when the stream is done with. */
  handle(out) {
    switch (out.kind) {
      case "deliver": {
        const done = this.deliver(out);
        this.cursorMoved(out.eventId);
        return done;
      }
      case "cursor":
        this.cursorMoved(out.cursor);
        return false;
      case "finished":
        return true;
      case "failed":
        this.lost(out.failure, out.reason, { refusal: out.refusal });
        return true;
      case "dropped":
        // An event over a limit while the response is outstanding may have been the response:
        // nothing will come in its place.
        if (this.request !== null && out.outstanding.length > 0) {
          this.lost(KIND.REFUSED, `an event was dropped over a limit (${out.error}): ${out.reason}`, {
            refusal: out.refusal,
          });
          return true;
        }
        this.transport._error(new Error(`an event was dropped: ${out.reason}`));
        return false;
      case "skip":
        this.transport._debug(`an event was passed over (${out.skip}): ${out.reason}`);
        return false;
      default:
        return false;
    }
  }

  /** Tells the SDK's `onresumptiontoken` each new resume cursor (an event id). */
  cursorMoved(id) {
    if (id === null || this.onresumptiontoken === undefined) return;
    const token = id.toString("latin1");
    if (token === this.token) return;
    this.token = token;
    this.onresumptiontoken(token);
  }

  /** Hands a message on; true when it answered a resumed request (then the stream is done with). */
  deliver(out) {
    const request = this.request;
    // The engine delivers one response per request id: a message with this request's id is its
    // answer (a notification has no id). A resumed request's answer carries the id of the request
    // that opened the stream, which the application resent under another: the first response is
    // its answer.
    const answers =
      request !== null &&
      out.rpcId !== null &&
      (this.adoptsResponse ? out.rpcKind === "response" : sameId(out.rpcId, request.id));
    let parsed;
    let kind = null;
    try {
      // The engine gated these bytes as one complete JSON value. The bytes are let go of before
      // the text is parsed, so that a large message is held twice at most (text and parsed).
      const text = out.message.toString("utf8");
      out.message = null;
      parsed = JSON.parse(text);
      kind = messageKind(parsed);
    } catch {
      kind = null;
    }
    if (kind === null) {
      const reason = "an event's data is not a JSON-RPC message";
      if (answers) request.fail(KIND.PROTOCOL, OUTCOME.UNKNOWN, `the answer is not a JSON-RPC message`);
      else this.transport._error(new Error(reason));
      return answers;
    }
    if (answers && (kind === "response" || kind === "error")) {
      // As the SDK does: the answer carries the id the request was sent with.
      parsed.id = request.id;
      request.answer(parsed);
      return this.adoptsResponse;
    }
    this.transport._deliver(parsed);
    return false;
  }
}

/**
 * The `authProvider`'s sign-in or refresh failed, or needs the user (`userMustSignIn`: the cause
 * is the SDK's `UnauthorizedError`, which the application's sign-in flow catches).
 */
class SignInFailed extends Error {
  constructor(message, options) {
    super(message, options);
    this.userMustSignIn = false;
  }
}

// ---- the transport -------------------------------------------------------------------------------

/**
 * A `Transport` for the SDK's `Client`: MCP Streamable HTTP over `fetch`, every answer read by
 * ssegate's engine. See mcp.d.ts for the options and docs/TYPESCRIPT.md for the guide.
 */
class GuardedTransport {
  constructor(url, options = {}) {
    this._url = new URL(url);
    const o = options;
    this._options = {
      timeout: seconds("timeout", o.timeout, contract.DEFAULT_CALL_TIMEOUT, true),
      maxJsonBody: bytes("maxJsonBody", o.maxJsonBody, contract.DEFAULT_MAX_JSON_BODY),
      maxErrorBody: bytes("maxErrorBody", o.maxErrorBody, contract.DEFAULT_MAX_ERROR_BODY),
    };
    this._streamOptions = {
      maxEvent: bytes("maxEvent", o.maxEvent, contract.DEFAULT_MAX_EVENT),
      replayTimeout: seconds("replayTimeout", o.replayTimeout, contract.DEFAULT_REPLAY_TIMEOUT, false),
      idleTimeout: seconds("idleTimeout", o.idleTimeout, contract.DEFAULT_IDLE_TIMEOUT, true),
      maxDelay: seconds("maxDelay", o.maxDelay, contract.DEFAULT_MAX_DELAY, false),
    };
    // A stream the engine cannot be given is refused now, not at the first answer.
    new ResumableStream(this._streamOptions);
    this._requestInit = o.requestInit;
    this._authProvider = o.authProvider;
    this._fetch = o.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this._sessionId = o.sessionId;
    this._protocolVersion = undefined;
    this._controller = null;
    this._pending = new Set();
    this._getStream = null;
    this._resourceMetadataUrl = undefined;
    this._scope = undefined;
    this._closed = false;
    /** @type {((message: object) => void) | undefined} */
    this.onmessage = undefined;
    /** @type {((error: Error) => void) | undefined} */
    this.onerror = undefined;
    /** @type {(() => void) | undefined} */
    this.onclose = undefined;
  }

  get sessionId() {
    return this._sessionId;
  }

  get protocolVersion() {
    return this._protocolVersion;
  }

  setProtocolVersion(version) {
    this._protocolVersion = version;
  }

  async start() {
    if (this._controller !== null) {
      throw new Error("GuardedTransport already started (Client.connect() starts it)");
    }
    this._controller = new AbortController();
  }

  async close() {
    if (this._closed) return;
    this._closed = true;
    for (const request of [...this._pending]) request.settle();
    this._controller?.abort();
    this.onclose?.();
  }

  /** Whether the session speaks a revision without resumption (2026-07-28 and later). */
  _stateless() {
    return this._protocolVersion !== undefined && this._protocolVersion >= FIRST_STATELESS_VERSION;
  }

  _deliver(message) {
    if (this._closed) return;
    try {
      this.onmessage?.(message);
    } catch (error) {
      this._error(error);
    }
  }

  _error(error) {
    if (!this._closed) this.onerror?.(error);
  }

  _debug(text) {
    if (process.env.SSEGATE_DEBUG) process.stderr.write(`ssegate/mcp: ${text}\n`);
  }

  async _headers() {
    const headers = new Headers();
    if (this._authProvider) {
      const tokens = await this._authProvider.tokens();
      if (tokens) headers.set("authorization", `Bearer ${tokens.access_token}`);
    }
    if (this._sessionId) headers.set("mcp-session-id", this._sessionId);
    if (this._protocolVersion) headers.set("mcp-protocol-version", this._protocolVersion);
    new Headers(this._requestInit?.headers).forEach((value, key) => headers.set(key, value));
    return headers;
  }

  /** The options of the SDK's `auth()`: this server, what its challenge named, this `fetch`. */
  _authOptions(extra = {}) {
    return {
      serverUrl: this._url,
      resourceMetadataUrl: this._resourceMetadataUrl,
      scope: this._scope,
      fetchFn: (input, init) => this._fetch(input, { ...this._requestInit, ...init }),
      ...extra,
    };
  }

  /** Runs the SDK's `auth()` for the `authProvider`; throws `SignInFailed` unless authorized. */
  async _signIn(response) {
    const sdk = await import("@modelcontextprotocol/sdk/client/auth.js");
    if (response) {
      const { resourceMetadataUrl, scope } = sdk.extractWWWAuthenticateParams(response);
      if (resourceMetadataUrl) this._resourceMetadataUrl = resourceMetadataUrl;
      if (scope) this._scope = scope;
    }
    let result;
    try {
      result = await sdk.auth(this._authProvider, this._authOptions());
    } catch (error) {
      throw new SignInFailed(`the sign-in failed: ${described(error)}`, { cause: error });
    }
    if (result !== "AUTHORIZED") {
      // The user is asked (`redirectToAuthorization`): as the SDK's own transport, the request
      // fails with the SDK's UnauthorizedError; `finishAuth(code)` completes the sign-in.
      const error = new sdk.UnauthorizedError("the user must sign in (authProvider.redirectToAuthorization was called)");
      const failed = new SignInFailed(error.message, { cause: error });
      failed.userMustSignIn = true;
      throw failed;
    }
  }

  /**
   * `fetch` with the session's headers, redirects not followed, and one sign-in when the server
   * answers 401 (or 403 `insufficient_scope`) and there is an `authProvider`.
   */
  async _fetchAuthed(method, extraHeaders, body, signal) {
    for (let attempt = 0; ; attempt++) {
      const headers = await this._headers().catch((error) => {
        throw new SignInFailed(`the authProvider's tokens() failed: ${described(error)}`, { cause: error });
      });
      for (const [k, v] of Object.entries(extraHeaders)) headers.set(k, v);
      const init = { ...this._requestInit, method, headers, body, signal, redirect: "manual" };
      const response = await this._fetch(this._url, init);
      if (!this._authProvider || attempt > 0) return response;
      const challenge = response.headers.get("www-authenticate") ?? "";
      const stepUp = response.status === 403 && /error="?insufficient_scope/.test(challenge);
      if (response.status !== 401 && !stepUp) return response;
      discard(response);
      await this._signIn(response);
    }
  }

  /** `GET` on the session, with `Last-Event-ID` when there is one. */
  _get(lastEventId, signal) {
    const headers = { accept: "text/event-stream" };
    if (lastEventId !== null) headers["last-event-id"] = lastEventId.toString("latin1");
    return this._fetchAuthed("GET", headers, undefined, signal);
  }

  _stream(request) {
    const stream = new ResumableStream({ ...this._streamOptions, resumable: !this._stateless() });
    stream.expectResponse(request.id);
    return stream;
  }

  async send(message, options = {}) {
    if (this._controller === null) throw new Error("GuardedTransport is not started (Client.connect() starts it)");
    if (this._closed) throw new Error("GuardedTransport is closed");
    const kind = messageKind(message);
    if (kind === "request") {
      const request = new Pending(this, message);
      this._pending.add(request);
      const exchange = options.resumptionToken
        ? this._resume(request, options)
        : this._request(message, request, options);
      // `send` returns once the answer's head is handled; the body is read in the background.
      const headed = await exchange;
      if (headed !== null) {
        headed.body.catch((error) => {
          request.fail(KIND.HTTP, OUTCOME.UNKNOWN, `reading the answer failed: ${described(error)}`);
        });
      }
      return;
    }
    await this._message(message, kind);
  }

  /**
   * A notification or a response: POSTed, its `202` awaited (within the deadline). A failure
   * throws the contract's typed error (nothing answers it).
   */
  async _message(message, kind) {
    const method = message.method ?? "(response)";
    const timeout = this._options.timeout;
    const link = new Linked(this._controller.signal, timeout);
    let response;
    try {
      response = await this._fetchAuthed("POST", POST_HEADERS, JSON.stringify(message), link.signal);
    } catch (error) {
      if (error instanceof SignInFailed) {
        if (error.userMustSignIn) throw error.cause;
        throw thrown(method, KIND.AUTH, OUTCOME.NOT_RUN, error.message);
      }
      if (neverConnected(error)) throw thrown(method, KIND.UNREACHABLE, OUTCOME.NOT_RUN, described(error));
      if (link.signal.aborted && !link.outer.aborted) {
        throw thrown(method, KIND.TIMEOUT, OUTCOME.UNKNOWN, `no answer within ${timeout} s; the connection was dropped`);
      }
      throw thrown(method, KIND.HTTP, OUTCOME.UNKNOWN, described(error));
    } finally {
      link.dispose();
    }
    discard(response);
    if (response.status >= 300) {
      const outcome = response.status < 500 ? OUTCOME.NOT_RUN : OUTCOME.UNKNOWN;
      const kindOf = response.status < 400 ? KIND.REDIRECT : KIND.STATUS;
      throw thrown(method, kindOf, outcome, `the server answered ${response.status}`, { status: response.status });
    }
    // Once the session is initialized, the server may offer a GET stream for its own messages.
    if (kind === "notification" && message.method === "notifications/initialized") this._openGetStream();
    if (kind === "notification" && message.method === "notifications/cancelled") {
      // The SDK stopped waiting: drop the cancelled request's connections.
      const id = message.params?.requestId;
      for (const request of this._pending) if (sameId(request.id, id)) request.settle();
    }
  }

  /**
   * A request's POST up to its answer's head. Returns `{ body }`, the promise of the body's
   * reading, or null when the request is answered already.
   */
  async _request(message, request, options) {
    let response;
    try {
      response = await this._fetchAuthed("POST", POST_HEADERS, JSON.stringify(message), request.signal);
    } catch (error) {
      if (request.answered) return null;
      if (error instanceof SignInFailed) {
        // The SDK's own flow: the user must sign in; the caller catches UnauthorizedError.
        if (error.userMustSignIn) {
          request.settle();
          throw error.cause;
        }
        request.fail(KIND.AUTH, OUTCOME.NOT_RUN, error.message);
        return null;
      }
      // A connection that was never made sent nothing; anything later may have reached it.
      if (neverConnected(error)) request.fail(KIND.UNREACHABLE, OUTCOME.NOT_RUN, described(error));
      else request.fail(KIND.HTTP, OUTCOME.UNKNOWN, described(error));
      return null;
    }
    if (request.answered) {
      discard(response);
      return null;
    }
    if (message.method === "initialize" && response.ok) {
      const session = response.headers.get("mcp-session-id");
      if (session) this._sessionId = session;
    }
    return this._answered(request, response, options);
  }

  /**
   * The answer's head: what to do with its body: `{ body }`, the promise of its reading (wrapped,
   * so that awaiting the head does not await the body), or null.
   */
  _answered(request, response, options) {
    const status = response.status;
    if (status === 202) {
      discard(response);
      request.fail(KIND.PROTOCOL, OUTCOME.UNKNOWN, "the server answered the request 202 Accepted: no answer will follow", {
        status,
      });
      return null;
    }
    if (status >= 300 && status < 400) {
      discard(response);
      const where = response.headers.get("location") ?? "(no Location)";
      request.fail(KIND.REDIRECT, OUTCOME.NOT_RUN, `the server answered ${status}, a redirect to ${where}, which is not followed`, {
        status,
      });
      return null;
    }
    if (status >= 400) return { body: this._statusAnswer(request, response) };
    const type = mediaType(response);
    if (type === "application/json") return { body: this._jsonAnswer(request, response) };
    if (type === "text/event-stream") {
      const drive = new Drive(this, this._stream(request), request, request.signal, options.onresumptiontoken);
      return { body: drive.run(response) };
    }
    discard(response);
    request.fail(KIND.PROTOCOL, OUTCOME.UNKNOWN, `the answer's content type is ${type || "missing"}: neither JSON nor an event stream`, {
      status,
    });
    return null;
  }

  /** An error status: the server's own JSON-RPC error when the body is one, else the contract's. */
  async _statusAnswer(request, response) {
    const status = response.status;
    let body = Buffer.alloc(0);
    try {
      ({ body } = await readCapped(response, this._options.maxErrorBody));
    } catch {
      // The status says enough.
    }
    if (mediaType(response) === "application/json") {
      let parsed = null;
      try {
        parsed = JSON.parse(body.toString("utf8"));
      } catch {
        parsed = null;
      }
      if (isObject(parsed) && parsed.jsonrpc === "2.0" && isObject(parsed.error) && Number.isInteger(parsed.error.code)) {
        // The server may have set `id: null`; the answer carries this request's id.
        request.answer({ jsonrpc: "2.0", id: request.id, error: parsed.error });
        return;
      }
    }
    const text = body.toString("utf8").split(/\s+/).filter(Boolean).join(" ");
    const outcome = status < 500 ? OUTCOME.NOT_RUN : OUTCOME.UNKNOWN;
    request.fail(KIND.STATUS, outcome, `the server answered ${status}${text ? `: ${text}` : ""}`, { status });
  }

  /** A JSON answer: read up to the cap, gated whole, parsed once. */
  async _jsonAnswer(request, response) {
    const cap = this._options.maxJsonBody;
    let read;
    try {
      read = await readCapped(response, cap);
    } catch (error) {
      if (!request.answered) request.fail(KIND.HTTP, OUTCOME.UNKNOWN, `the JSON answer was cut: ${described(error)}`);
      return;
    }
    if (read.more) {
      request.fail(KIND.PROTOCOL, OUTCOME.UNKNOWN, `the JSON answer exceeds ${cap} bytes (maxJsonBody)`);
      return;
    }
    const verdict = gate(read.body);
    if (verdict !== "complete") {
      request.fail(KIND.PROTOCOL, OUTCOME.UNKNOWN, `the JSON answer is ${verdict}, not one complete JSON value`);
      return;
    }
    const parsed = JSON.parse(read.body.toString("utf8"));
    const kind = messageKind(parsed);
    if ((kind !== "response" && kind !== "error") || !sameId(parsed.id, request.id)) {
      request.fail(KIND.PROTOCOL, OUTCOME.UNKNOWN, "the JSON answer is not a JSON-RPC response to this request");
      return;
    }
    request.answer(parsed);
  }

  /**
   * A request the application resumes from a token it kept (`resumptionToken`): `GET` with
   * `Last-Event-ID`, read by the engine like any other stream, within the deadline. The engine
   * did not see the stream the token came from, so the replay's first event is taken as the
   * server sends it; every later cut is guarded as usual. The replay answers the request that
   * opened the stream, under that request's id: its first response is this request's answer (as
   * the SDK's own transport takes it), and the stream is let go of then.
   */
  async _resume(request, options) {
    const stream = new ResumableStream({ ...this._streamOptions, resumable: !this._stateless(), keepOpen: true });
    const drive = new Drive(this, stream, request, request.signal, options.onresumptiontoken);
    drive.adoptsResponse = true;
    let response;
    try {
      response = await this._get(Buffer.from(options.resumptionToken, "latin1"), request.signal);
    } catch (error) {
      if (request.answered) return null;
      const kind = error instanceof SignInFailed ? KIND.AUTH : KIND.RECONNECT_FAILED;
      request.fail(kind, OUTCOME.UNKNOWN, `the resumption GET failed: ${error instanceof SignInFailed ? error.message : described(error)}`);
      return null;
    }
    if (!isEventStream(response)) {
      discard(response);
      const reason = `the resumption GET was answered ${response.status} (${response.headers.get("content-type") ?? "(none)"}), not with the stream`;
      request.fail(KIND.STATUS, OUTCOME.UNKNOWN, reason, { status: response.status });
      return null;
    }
    return { body: drive.run(response) };
  }

  /** The standalone GET stream, guarded and resumed like a response stream (no deadline). */
  _openGetStream() {
    if (this._getStream !== null || !this._sessionId || this._stateless()) return;
    const signal = this._controller.signal;
    const stream = new ResumableStream({ ...this._streamOptions, keepOpen: true });
    const drive = new Drive(this, stream, null, signal, undefined);
    this._getStream = (async () => {
      let response;
      try {
        response = await this._get(null, signal);
      } catch (error) {
        if (!isAbort(error, signal)) this._debug(`no GET stream: ${described(error)}`);
        return;
      }
      if (!isEventStream(response)) {
        // 405: the server offers no GET stream.
        this._debug(`no GET stream: ${response.status}`);
        discard(response);
        return;
      }
      await drive.run(response);
    })().catch((error) => this._error(error));
  }

  /** Ends the session with `DELETE` (a `405` means the server does not end sessions this way). */
  async terminateSession() {
    if (!this._sessionId) return;
    const signal = this._controller?.signal ?? new AbortController().signal;
    const response = await this._fetchAuthed("DELETE", {}, undefined, signal);
    discard(response);
    if (!response.ok && response.status !== 405) {
      throw new Error(`the server answered DELETE with ${response.status}`);
    }
    this._sessionId = undefined;
  }

  /** Completes a sign-in the `authProvider` sent the user to: exchanges `authorizationCode`. */
  async finishAuth(authorizationCode) {
    if (!this._authProvider) throw new Error("finishAuth needs an authProvider");
    const sdk = await import("@modelcontextprotocol/sdk/client/auth.js");
    const result = await sdk.auth(this._authProvider, this._authOptions({ authorizationCode }));
    if (result !== "AUTHORIZED") throw new sdk.UnauthorizedError("Failed to authorize");
  }
}

const POST_HEADERS = Object.freeze({
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
});

exports.GuardedTransport = GuardedTransport;
exports.GuardedError = GuardedError;
exports.OutcomeUnknown = OutcomeUnknown;
exports.Unavailable = Unavailable;
exports.ServerProtocol = ServerProtocol;
exports.Refused = Refused;
exports.typed = typed;
exports.KIND = KIND;
exports.OUTCOME = OUTCOME;
exports.CODE = CODE;
exports.OUTCOME_UNKNOWN = CODE.OUTCOME_UNKNOWN.value;
exports.UNAVAILABLE = CODE.UNAVAILABLE.value;
exports.SERVER_PROTOCOL = CODE.SERVER_PROTOCOL.value;
exports.REFUSED = CODE.REFUSED.value;
