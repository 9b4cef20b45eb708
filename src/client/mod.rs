//! A guarded MCP Streamable HTTP client: a driver over [`ResumableStream`] on reqwest
//! (rustls TLS with the platform's roots plus any custom root, HTTP/1.1 and HTTP/2, pooled
//! connections, `HTTP(S)_PROXY`).
//!
//! [`Client::connect`] opens a session: `initialize` offering [`ClientConfig::protocol_version`]
//! (default `2025-11-25`, the newest version with `Last-Event-ID` resumption), then
//! `notifications/initialized`; every later request carries `MCP-Protocol-Version` with the version
//! the server chose and `Mcp-Session-Id` when the server gave one (sessionless servers work too).
//! [`Client::call`] POSTs one request and takes either answer. An event-stream answer goes through a
//! [`GuardedStream`]: when the connection is cut, the stream resumes with `GET` + `Last-Event-ID`
//! and the guard decides whether the replay continues the stream that was cut.
//!
//! A call is re-issued on a new session only when that is known to be safe: every method but
//! `tools/call` is side-effect free, a tool whose `tools/list` annotations say `readOnlyHint` or
//! `idempotentHint` may run twice, and the caller may mark a call retryable ([`Retry::Always`]).
//! Otherwise a lost stream is [`ClientError::OutcomeUnknown`]: the server may have run the tool.
//!
//! # A hostile or broken server
//!
//! Every read of a server's bytes is bounded and every call has a deadline by default:
//!
//! | limit | default | setting |
//! | --- | --- | --- |
//! | a call, resumes and re-issues included | 600 s | [`ClientConfig::call_timeout`], [`CallOptions::timeout`] |
//! | a connection that brings no byte is resumed | 300 s | [`ClientConfig::idle_timeout`] |
//! | an error answer's body (then the connection is dropped) | 1 KiB | [`ClientConfig::max_error_body`] |
//! | an `application/json` answer (held as received, never doubled) | 64 MiB | [`ClientConfig::max_json_body`] |
//! | one SSE event (the decoder's limits) | 64 MiB | [`ClientConfig::decoder`] |
//! | the delay before any reconnect | 250 ms (jittered up to +50 %) to 60 s | [`resume::StreamConfig::min_delay`], [`resume::StreamConfig::max_delay`] |
//! | redirects followed | none | [`ClientConfig::redirects`] |
//!
//! An event dropped over a decoder limit while the call's response is outstanding fails the call
//! at once, naming the limit (the dropped event may have been the response). A redirect is a
//! typed error ([`ClientError::Redirect`]) unless [`Redirects::Follow`] is set, and then no
//! configured header, session id or protocol header goes to another origin. A response head the
//! server got wrong (malformed, too large) is [`ClientError::InvalidResponse`]: never re-issued,
//! never reported as a cut stream. A `429`/`503` answer to a call that is safe to repeat is retried
//! after its (clamped) `Retry-After`, within the call's deadline.
//!
//! Requests the server sends on a response stream (`ping`, `sampling/createMessage`,
//! `elicitation/create`, `roots/list`) go to the application's [`Handler`] and are answered with a
//! POST (`ping` is answered by default); notifications (progress, logging, list changes) go to
//! [`Handler::notification`]. Calls take `&self` and run concurrently; a call dropped before its
//! response sends `notifications/cancelled`.
//!
//! ```no_run
//! # async fn run() -> Result<(), ssegate::client::ClientError> {
//! use ssegate::client::{Client, ClientConfig};
//! use serde_json::json;
//!
//! let mut config = ClientConfig::default();
//! config.bearer_token("secret");
//! let client = Client::connect("https://mcp.example.com/mcp", config).await?;
//! let response = client.call_tool("search", json!({"q": "sse"}), false).await?;
//! println!("{} bytes after {} resumes", response.message.len(), response.outcome.resumes);
//! client.close().await?;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod modern;
mod tasks;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::{Stream, StreamExt, TryStreamExt};
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use tracing::{Instrument, debug, info_span, warn};

use crate::gate::Verdict;
use crate::guard::{self, Refusal, RefusalKind};
use crate::message::{Message, RpcId, RpcKind};
use crate::resume::stream::GuardedStream;
use crate::resume::{self, Failure, Reconnect, ReconnectResponse, ResumableStream};
use crate::sse::{self, Data};

pub use tasks::{
    DEFAULT_MAX_TASK_READ_FAILURES, DEFAULT_TASK_POLL_MAX, DEFAULT_TASK_POLL_MIN, TASKS_EXTENSION,
    TaskError, TaskErrorKind, TaskGeneration, TaskHandle, TaskMode,
};

/// The session header.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The protocol version header sent after `initialize`.
pub const PROTOCOL_HEADER: &str = "mcp-protocol-version";
/// The newest protocol version with `Last-Event-ID` resumption: offered in `initialize` when the
/// server is not a 2026-07-28 one.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// MCP 2026-07-28: stateless, per-request `_meta`, no resumption.
pub const PROTOCOL_2026_07_28: &str = "2026-07-28";
/// The stateless ("modern") versions the client speaks, newest first.
pub const MODERN_VERSIONS: &[&str] = &[PROTOCOL_2026_07_28];
/// The `initialize` ("legacy") versions the client speaks, newest first.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];
/// A `server/discover` answer larger than this is no discover result (it is not parsed).
const MAX_DISCOVER_RESULT: usize = 256 << 10;
/// Default of [`ClientConfig::max_input_rounds`].
pub const DEFAULT_MAX_INPUT_ROUNDS: u32 = 10;

/// Which protocol versions the client speaks ([`ClientConfig::protocol`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Protocol {
    /// 2026-07-28 when the server speaks it (a `server/discover` first), else the `initialize`
    /// handshake offering [`PROTOCOL_VERSION`] (the server may choose an older version).
    #[default]
    Auto,
    /// This version only: a stateless one ([`MODERN_VERSIONS`]) is never followed by
    /// `initialize`; a legacy one is offered in `initialize` (the server may still choose another
    /// version it and the client speak).
    Only(String),
}

impl Protocol {
    /// Parses `auto` or a version.
    pub fn parse(s: &str) -> Option<Protocol> {
        match s {
            "auto" => Some(Protocol::Auto),
            v if MODERN_VERSIONS.contains(&v) || LEGACY_VERSIONS.contains(&v) => {
                Some(Protocol::Only(v.to_owned()))
            }
            _ => None,
        }
    }
}
const ACCEPT_BOTH: &str = "application/json, text/event-stream";
/// Messages of a call's stream kept for [`ClientError::OutcomeUnknown`] (the rest are counted and
/// handed to the [`Handler`] only).
const MAX_RECEIVED: usize = 64;

type Body = Pin<Box<dyn Stream<Item = Result<Bytes, ClientError>> + Send>>;

/// When a call may be issued again on a new session after its stream was lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Retry {
    /// Never: a lost stream is [`ClientError::OutcomeUnknown`].
    Never,
    /// When known to be safe: any method but `tools/call`, or a tool annotated `readOnlyHint` or
    /// `idempotentHint` in `tools/list` (the client lists tools once to find out).
    #[default]
    IfSafe,
    /// Always: the caller knows the call may run twice.
    Always,
}

/// What the client does with a redirect (`3xx` + `Location`). MCP Streamable HTTP has no
/// redirects in its protocol, so none is followed by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Redirects {
    /// A redirect is [`ClientError::Redirect`], naming its status and location (default).
    #[default]
    Refuse,
    /// `307` and `308` (method and body kept) are followed, up to `max_hops` hops. Hops within the
    /// endpoint's origin (scheme, host and port) keep every header; from the first hop to another
    /// origin on, every header configured with [`ClientConfig::header`] or
    /// [`ClientConfig::bearer_token`], the `Mcp-Session-Id` and the `MCP-Protocol-Version` are
    /// left out. Other redirect statuses (`301`, `302`, `303`: the method would change) stay
    /// [`ClientError::Redirect`].
    Follow {
        /// Most hops followed for one request; one more is [`ClientError::TooManyRedirects`].
        max_hops: u32,
    },
}

/// Default of [`ClientConfig::call_timeout`]: room for a 4 MiB result at 7 KB/s, with resumes.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// Default of [`ClientConfig::max_error_body`].
pub const DEFAULT_MAX_ERROR_BODY: usize = 1024;

/// Per-call options for [`Client::call_with`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct CallOptions {
    retry: Retry,
    progress_token: Option<RpcId>,
    timeout: Option<Duration>,
    tasks: TaskMode,
    task_ttl: Option<Duration>,
}

impl CallOptions {
    /// The re-issue rule (default [`Retry::IfSafe`]).
    pub fn retry(&mut self, retry: Retry) -> &mut Self {
        self.retry = retry;
        self
    }

    /// Sends `_meta.progressToken` so the server reports progress ([`Handler::notification`]).
    pub fn progress_token(&mut self, token: RpcId) -> &mut Self {
        self.progress_token = Some(token);
        self
    }

    /// A deadline for the whole call, resumes and renegotiations included, and, for a call that
    /// runs as a task, the polling until it ends (default: the client's
    /// [`ClientConfig::call_timeout`]). When it passes while a task runs, the task is cancelled.
    pub fn timeout(&mut self, timeout: Duration) -> &mut Self {
        self.timeout = Some(timeout);
        self
    }

    /// Whether a `tools/call` may run as a task (default [`TaskMode::Auto`]: where the server
    /// offers tasks).
    pub fn tasks(&mut self, mode: TaskMode) -> &mut Self {
        self.tasks = mode;
        self
    }

    /// The time to live asked for a 2025-11-25 task (`params.task.ttl`; default: the server's).
    /// A 2026-07-28 server sets the ttl itself.
    pub fn task_ttl(&mut self, ttl: Duration) -> &mut Self {
        self.task_ttl = Some(ttl);
        self
    }
}

/// A JSON-RPC error object, as an answer to a server request.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RpcError {
    /// The error code (`-32601` method not found, ...).
    pub code: i64,
    /// The message.
    pub message: String,
}

impl RpcError {
    /// An error with this code and message.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }
}

/// A future a [`Handler`] returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send>>;

/// What the application does with the server's requests and notifications.
pub trait Handler: Send + Sync + 'static {
    /// A server request (`sampling/createMessage`, `elicitation/create`, `roots/list`, ...): the
    /// result to send back. The default answers `ping` with `{}` and anything else with `-32601`.
    fn request(&self, method: &str, params: Option<&Value>) -> HandlerFuture {
        let _ = params;
        let answer = if method == "ping" {
            Ok(json!({}))
        } else {
            Err(RpcError::new(-32601, format!("method not found: {method}")))
        };
        Box::pin(async move { answer })
    }

    /// A notification (progress, logging, list changes), already verified by the guard.
    fn notification(&self, message: &Message) {
        let _ = message;
    }
}

/// The default [`Handler`]: answers `ping`, refuses other requests, ignores notifications.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultHandler;

impl Handler for DefaultHandler {}

/// The client's settings. Setters take `&mut self` and chain.
#[derive(Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    pub(crate) stream: resume::StreamConfig,
    pub(crate) headers: HeaderMap,
    roots: Vec<Vec<u8>>,
    only_custom_roots: bool,
    protocol: Protocol,
    max_attempts: u32,
    max_input_rounds: u32,
    task_poll: (Duration, Duration),
    max_task_read_failures: u32,
    connect_timeout: Duration,
    call_timeout: Option<Duration>,
    pub(crate) max_json_body: usize,
    max_error_body: usize,
    redirects: Redirects,
    client_name: String,
    reuse_connections: bool,
    proxy: Option<String>,
    handler: Arc<dyn Handler>,
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("stream", &self.stream)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("roots", &self.roots.len())
            .field("protocol", &self.protocol)
            .field("max_attempts", &self.max_attempts)
            .field("task_poll", &self.task_poll)
            .field("call_timeout", &self.call_timeout)
            .field("redirects", &self.redirects)
            .finish_non_exhaustive()
    }
}

impl Default for ClientConfig {
    /// The resumable stream's defaults (replay timeout 10 s, idle timeout 300 s, reconnect delays
    /// between 250 ms and 60 s), protocol [`Protocol::Auto`] (2026-07-28, else `2025-11-25`), 3 attempts
    /// per call, 10 rounds of input per request, task polls every 50 ms to 5 s as the server asks
    /// and 10 failed task reads in a row at most, a 10 s connect
    /// timeout, a 600 s deadline per call, JSON bodies up to 64 MiB, error bodies read up to
    /// 1 KiB, no redirects, pooled connections, the platform's TLS roots, [`DefaultHandler`].
    fn default() -> Self {
        ClientConfig {
            stream: resume::StreamConfig::default(),
            headers: HeaderMap::new(),
            roots: Vec::new(),
            only_custom_roots: false,
            protocol: Protocol::Auto,
            max_attempts: 3,
            max_input_rounds: DEFAULT_MAX_INPUT_ROUNDS,
            task_poll: (DEFAULT_TASK_POLL_MIN, DEFAULT_TASK_POLL_MAX),
            max_task_read_failures: DEFAULT_MAX_TASK_READ_FAILURES,
            connect_timeout: Duration::from_secs(10),
            call_timeout: Some(DEFAULT_CALL_TIMEOUT),
            max_json_body: 64 << 20,
            max_error_body: DEFAULT_MAX_ERROR_BODY,
            redirects: Redirects::Refuse,
            client_name: "ssegate".to_owned(),
            reuse_connections: true,
            proxy: None,
            handler: Arc::new(DefaultHandler),
        }
    }
}

impl ClientConfig {
    /// The resumable stream's settings: decoder limits, guard, timing, budgets (replaces them;
    /// [`ClientConfig::stream_mut`] edits them in place).
    pub fn stream(&mut self, config: resume::StreamConfig) -> &mut Self {
        self.stream = config;
        self
    }

    /// The resumable stream's settings, to edit in place
    /// (`config.stream_mut().guard_mut().max_depth(4096)`).
    pub fn stream_mut(&mut self) -> &mut resume::StreamConfig {
        &mut self.stream
    }

    /// The resumable stream's settings.
    pub fn stream_config(&self) -> &resume::StreamConfig {
        &self.stream
    }

    /// The guard's settings (shorthand for the stream's).
    pub fn guard(&mut self, config: guard::GuardConfig) -> &mut Self {
        self.stream.guard(config);
        self
    }

    /// The decoder's limits (shorthand for the stream's).
    pub fn decoder(&mut self, config: sse::DecoderConfig) -> &mut Self {
        self.stream.decoder(config);
        self
    }

    /// How long a resumed connection may bring no byte while a response is outstanding
    /// (shorthand for the stream's [`resume::StreamConfig::replay_timeout`]; nothing else changes).
    pub fn replay_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.stream.replay_timeout(timeout);
        self
    }

    /// A connection that brings no byte for this long is resumed (default 300 s; `None`: never).
    pub fn idle_timeout(&mut self, timeout: Option<Duration>) -> &mut Self {
        self.stream.idle_timeout(timeout);
        self
    }

    /// A header sent with every request (`Authorization`, an API key, ...).
    pub fn header(&mut self, name: HeaderName, value: HeaderValue) -> &mut Self {
        self.headers.append(name, value);
        self
    }

    /// `Authorization: Bearer <token>` on every request.
    pub fn bearer_token(&mut self, token: &str) -> &mut Self {
        if let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {token}")) {
            value.set_sensitive(true);
            self.headers.insert(header::AUTHORIZATION, value);
        }
        self
    }

    /// A PEM certificate to trust besides the platform's roots.
    pub fn root_certificate_pem(&mut self, pem: &[u8]) -> &mut Self {
        self.roots.push(pem.to_vec());
        self
    }

    /// Trust only the certificates given with [`ClientConfig::root_certificate_pem`].
    pub fn only_custom_roots(&mut self, only: bool) -> &mut Self {
        self.only_custom_roots = only;
        self
    }

    /// Which protocol versions to speak (default [`Protocol::Auto`]).
    pub fn protocol(&mut self, protocol: Protocol) -> &mut Self {
        self.protocol = protocol;
        self
    }

    /// The protocol setting ([`ClientConfig::protocol`]).
    pub fn protocol_setting(&self) -> &Protocol {
        &self.protocol
    }

    /// Speaks this version only: `protocol(Protocol::Only(version))`.
    pub fn protocol_version(&mut self, version: impl Into<String>) -> &mut Self {
        self.protocol = Protocol::Only(version.into());
        self
    }

    /// Most rounds of `input_required` answered for one request on 2026-07-28 (default
    /// [`DEFAULT_MAX_INPUT_ROUNDS`]); past it the call fails with
    /// [`ProtocolError::TooManyInputRounds`].
    pub fn max_input_rounds(&mut self, n: u32) -> &mut Self {
        self.max_input_rounds = n;
        self
    }

    /// Bounds of the wait between two reads of a task's status: the server's `pollInterval`
    /// raised to `min` and capped at `max` (then jittered by ±20 %, so a fleet does not poll in
    /// step). Defaults [`DEFAULT_TASK_POLL_MIN`] and [`DEFAULT_TASK_POLL_MAX`]; `max` is raised to
    /// `min` if below it.
    pub fn task_poll(&mut self, min: Duration, max: Duration) -> &mut Self {
        self.task_poll = (min, max.max(min));
        self
    }

    /// Most reads of a task that may fail in a row (cut, refused, unreachable) before the call
    /// gives up with [`TaskErrorKind::ReadsFailed`] (default [`DEFAULT_MAX_TASK_READ_FAILURES`];
    /// at least 1). The task itself is not cancelled: read it later with [`Client::resume_task`].
    pub fn max_task_read_failures(&mut self, n: u32) -> &mut Self {
        self.max_task_read_failures = n.max(1);
        self
    }

    /// Attempts per call, the first included (default 3).
    pub fn max_attempts(&mut self, n: u32) -> &mut Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Connect timeout (default 10 s).
    pub fn connect_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.connect_timeout = timeout;
        self
    }

    /// Largest `application/json` answer (default 64 MiB). The answer is held as its chunks
    /// arrived, never copied into a growing buffer, so memory stays near the answer's size.
    pub fn max_json_body(&mut self, bytes: usize) -> &mut Self {
        self.max_json_body = bytes;
        self
    }

    /// How much of an error answer's body is read for [`ClientError::Status`] (default 1 KiB);
    /// the rest is never read and the connection is dropped.
    pub fn max_error_body(&mut self, bytes: usize) -> &mut Self {
        self.max_error_body = bytes;
        self
    }

    /// A deadline for every call, resumes, renegotiations and re-issues included, and for
    /// [`Client::connect`] and [`Client::close`] (default 600 s; `None`: none).
    /// [`CallOptions::timeout`] overrides it for one call.
    pub fn call_timeout(&mut self, timeout: Option<Duration>) -> &mut Self {
        self.call_timeout = timeout;
        self
    }

    /// What to do with redirects (default [`Redirects::Refuse`]).
    pub fn redirects(&mut self, redirects: Redirects) -> &mut Self {
        self.redirects = redirects;
        self
    }

    /// The `clientInfo.name` sent in `initialize`.
    pub fn client_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.client_name = name.into();
        self
    }

    /// Reuse pooled connections (default `true`; a fault-injection test that cuts "the next
    /// connection" turns it off so each request opens its own).
    pub fn reuse_connections(&mut self, reuse: bool) -> &mut Self {
        self.reuse_connections = reuse;
        self
    }

    /// Send every request through this proxy (`http://host:port`; HTTPS targets are tunnelled with
    /// `CONNECT`). Without it, `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY` are honoured.
    pub fn proxy(&mut self, url: impl Into<String>) -> &mut Self {
        self.proxy = Some(url.into());
        self
    }

    /// The application's handler for server requests and notifications.
    pub fn handler(&mut self, handler: Arc<dyn Handler>) -> &mut Self {
        self.handler = handler;
        self
    }
}

/// What it took to get one response.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outcome {
    /// Attempts made (1 + re-issues).
    pub attempts: u32,
    /// Resumes (`GET` + `Last-Event-ID`) made.
    pub resumes: u32,
    /// New sessions opened to re-issue the request.
    pub renegotiations: u32,
    /// Events the guard skipped (exact replays, duplicate responses, keep-alives).
    pub skipped: u32,
    /// Other messages on the stream before the response (notifications, server requests).
    pub other_messages: u32,
    /// Every stream failure, in order.
    pub refusals: Vec<Failure>,
    /// Rounds of `input_required` answered (MCP 2026-07-28), each a new request (or, in a task,
    /// a `tasks/update`).
    pub input_rounds: u32,
    /// The task the call ran as, when the server answered it with one ([`TaskHandle`]).
    pub task: Option<TaskHandle>,
    /// Reads of the task answered (`tasks/get`, `tasks/result`).
    pub task_reads: u32,
    /// Task requests sent again because their answer was lost (cut, refused, unreachable): each
    /// a read, never the call again.
    pub task_rereads: u32,
}

/// A response the client received.
#[derive(Debug)]
#[non_exhaustive]
pub struct Response {
    /// The JSON-RPC response: exactly one complete JSON value, zero-copy until parsed.
    pub message: Message,
    /// The request id it answers.
    pub request_id: RpcId,
    /// How it was obtained.
    pub outcome: Outcome,
}

/// How the server broke the protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A JSON answer that is not one complete JSON value.
    JsonBody(Verdict),
    /// A JSON answer that is not the response to the request.
    NotTheResponse(RpcId),
    /// An answer with a content type that is neither JSON nor an event stream.
    ContentType(Option<String>),
    /// A JSON answer over the size limit.
    BodyTooLarge(usize),
    /// A response stream that ended without the response.
    StreamEndedWithoutResponse,
    /// `initialize` answered with a JSON-RPC error.
    InitializeError(String),
    /// A header value the client cannot send (an id with control characters).
    Unsendable(&'static str),
    /// The server speaks none of the client's protocol versions (it named these).
    NoCommonVersion(Vec<String>),
    /// A 2026-07-28 request kept being answered `input_required` (the rounds answered).
    TooManyInputRounds(u32),
    /// The [`Handler`] could not answer an input request of an `input_required` result.
    InputRequest {
        /// The input request's method.
        method: String,
        /// The handler's error.
        error: RpcError,
    },
}

impl std::error::Error for ProtocolError {}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::JsonBody(v) => {
                write!(f, "the JSON answer is {v:?}, not one complete JSON value")
            }
            ProtocolError::NotTheResponse(id) => {
                write!(f, "the JSON answer is not the response to request {id}")
            }
            ProtocolError::ContentType(ct) => write!(f, "unexpected content type {ct:?}"),
            ProtocolError::BodyTooLarge(n) => write!(f, "the JSON answer exceeds {n} bytes"),
            ProtocolError::StreamEndedWithoutResponse => {
                write!(f, "the response stream ended without the response")
            }
            ProtocolError::InitializeError(e) => write!(f, "initialize failed: {e}"),
            ProtocolError::Unsendable(what) => write!(f, "cannot send {what} as a header"),
            ProtocolError::NoCommonVersion(v) => {
                write!(
                    f,
                    "the server speaks none of our protocol versions (it supports {v:?})"
                )
            }
            ProtocolError::TooManyInputRounds(n) => {
                write!(f, "the server still asked for input after {n} rounds")
            }
            ProtocolError::InputRequest { method, error } => write!(
                f,
                "the handler could not answer the server's {method} input request: {} ({})",
                error.message, error.code
            ),
        }
    }
}

/// Why a client operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// The URL does not parse, or the HTTP client cannot be built (bad root certificate...).
    Setup(String),
    /// An HTTP exchange failed (connect, TLS, reset before a response head...).
    Http {
        /// What the client was doing.
        during: &'static str,
        /// reqwest's error (its source chain names TLS and connect failures).
        source: reqwest::Error,
    },
    /// The server answered an unexpected status.
    Status {
        /// What the client was doing.
        during: &'static str,
        /// The status code.
        status: u16,
        /// The start of the body (at most [`ClientConfig::max_error_body`] bytes), lossy UTF-8.
        body: String,
    },
    /// The server answered with a redirect the client does not follow ([`Redirects`]).
    Redirect {
        /// What the client was doing.
        during: &'static str,
        /// The status code (`3xx`).
        status: u16,
        /// The `Location` header, if any.
        location: Option<String>,
    },
    /// More redirects than [`Redirects::Follow`] allows.
    TooManyRedirects {
        /// What the client was doing.
        during: &'static str,
        /// Hops followed.
        hops: u32,
    },
    /// The server's response head is not valid HTTP (malformed, or larger than the HTTP stack
    /// accepts). Not a cut: the request is not re-issued.
    InvalidResponse {
        /// What the client was doing.
        during: &'static str,
        /// reqwest's error (its source chain names the HTTP parser's complaint).
        source: reqwest::Error,
    },
    /// The server's answer breaks the protocol.
    Protocol(ProtocolError),
    /// The stream was lost, the call was re-issued as often as allowed, and the last stream was
    /// lost too.
    Refused {
        /// The last failure.
        failure: Box<Failure>,
        /// Attempts made.
        attempts: u32,
        /// The last transport error on the stream (a failed body or reconnect), if any.
        transport: Option<Box<ClientError>>,
    },
    /// The stream was lost and the call is not known to be safe to re-issue: the server may have
    /// run it. Nothing was re-issued.
    OutcomeUnknown {
        /// The failure.
        failure: Box<Failure>,
        /// The method (and tool, for `tools/call`).
        method: String,
        /// Messages received for the call before the loss (progress notifications...): the
        /// first 64.
        received: Vec<Message>,
        /// The last transport error on the stream (a failed body or reconnect), if any.
        transport: Option<Box<ClientError>>,
    },
    /// The call's deadline passed.
    Timeout(Duration),
    /// The call ran (or had to run) as a task and has no result.
    Task(Box<TaskError>),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Setup(what) => write!(f, "client setup: {what}"),
            ClientError::Http { during, source } => {
                write!(f, "HTTP error during {during}: {source}")?;
                let mut cause = std::error::Error::source(source);
                while let Some(c) = cause {
                    write!(f, ": {c}")?;
                    cause = c.source();
                }
                Ok(())
            }
            ClientError::Status {
                during,
                status,
                body,
            } => write!(f, "{during} answered {status}: {body}"),
            ClientError::Redirect {
                during,
                status,
                location,
            } => write!(
                f,
                "{during} answered {status}, a redirect to {}, which is not followed (MCP has no \
                 redirects; see ClientConfig::redirects)",
                location.as_deref().unwrap_or("(no Location)")
            ),
            ClientError::TooManyRedirects { during, hops } => {
                write!(f, "{during}: more than {hops} redirects")
            }
            ClientError::InvalidResponse { during, source } => {
                write!(f, "invalid response during {during}: {source}")?;
                let mut cause = std::error::Error::source(source);
                while let Some(c) = cause {
                    write!(f, ": {c}")?;
                    cause = c.source();
                }
                Ok(())
            }
            ClientError::Protocol(e) => write!(f, "protocol error: {e}"),
            ClientError::Refused {
                failure,
                attempts,
                transport,
            } => {
                write!(f, "refused after {attempts} attempt(s): {failure}")?;
                if let Some(t) = transport {
                    write!(f, "; last transport error: {t}")?;
                }
                Ok(())
            }
            ClientError::OutcomeUnknown {
                failure,
                method,
                transport,
                ..
            } => {
                write!(
                    f,
                    "{method}: the stream was lost and the call is not safe to re-issue; the server \
                     may have run it (outcome unknown): {failure}"
                )?;
                if let Some(t) = transport {
                    write!(f, "; last transport error: {t}")?;
                }
                Ok(())
            }
            ClientError::Timeout(after) => {
                write!(f, "the call timed out after {} ms", after.as_millis())
            }
            ClientError::Task(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Http { source, .. } | ClientError::InvalidResponse { source, .. } => {
                Some(source)
            }
            ClientError::Protocol(e) => Some(e),
            ClientError::Task(e) => Some(&**e),
            ClientError::Refused { failure, .. } | ClientError::OutcomeUnknown { failure, .. } => {
                Some(&**failure)
            }
            _ => None,
        }
    }
}

impl ClientError {
    /// The guard's refusal behind this error, if any.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            ClientError::Refused { failure, .. } | ClientError::OutcomeUnknown { failure, .. } => {
                failure.refusal()
            }
            _ => None,
        }
    }

    fn http(during: &'static str) -> impl Fn(reqwest::Error) -> ClientError {
        move |source| ClientError::from_reqwest(during, source)
    }

    /// reqwest's error, typed: a response head the HTTP parser rejected is
    /// [`ClientError::InvalidResponse`], anything else [`ClientError::Http`].
    fn from_reqwest(during: &'static str, source: reqwest::Error) -> ClientError {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&source);
        let mut invalid = false;
        while let Some(c) = cause {
            if let Some(h) = c.downcast_ref::<hyper::Error>() {
                // Every parse error: a malformed or too large head, an invalid status or header.
                invalid = h.is_parse();
                break;
            }
            cause = c.source();
        }
        if invalid {
            ClientError::InvalidResponse { during, source }
        } else {
            ClientError::Http { during, source }
        }
    }
}

/// The session state shared by concurrent calls.
#[derive(Clone, Debug, Default)]
struct Session {
    id: Option<String>,
    protocol_version: Option<String>,
    /// A stateless (2026-07-28) server: `_meta` on every request, no session, no resumption.
    modern: bool,
    /// The `server/discover` result of a stateless server.
    discover: Option<Arc<Value>>,
    /// The server's capabilities (from `initialize` or `server/discover`).
    capabilities: Option<Arc<Value>>,
    /// Bumped at each new session, so concurrent calls renegotiate once.
    generation: u64,
    /// The session's streams, sharing outstanding requests and response deduplication.
    streams: resume::Session,
}

struct Inner {
    http: reqwest::Client,
    url: reqwest::Url,
    config: ClientConfig,
    session: RwLock<Session>,
    renegotiating: tokio::sync::Mutex<()>,
    next_id: AtomicI64,
    sessions_opened: AtomicU32,
    /// What `tools/list` said of each tool.
    tools: Mutex<Option<HashMap<String, ToolInfo>>>,
    /// Calls waiting for their response, for a response that arrives on another stream of the
    /// session (the `GET` stream after the POST stream was cut).
    pending: Mutex<HashMap<RpcId, tokio::sync::oneshot::Sender<Message>>>,
}

/// What the client keeps of a tool's definition.
#[derive(Clone, Debug, Default)]
struct ToolInfo {
    /// Safe to run twice (`readOnlyHint` or `idempotentHint`).
    safe: bool,
    /// Its `x-mcp-header` arguments, mirrored into `Mcp-Param-*` headers on 2026-07-28.
    headers: Vec<modern::ParamHeader>,
    /// Its 2025-11-25 `execution.taskSupport`.
    tasks: tasks::TaskSupport,
}

/// A guarded MCP client. Cheap to share: calls take `&self`.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.inner.url.as_str())
            .field("session", &self.session_id())
            .finish_non_exhaustive()
    }
}

pub(crate) fn build_http(config: &ClientConfig) -> Result<reqwest::Client, ClientError> {
    // reqwest is built without a default crypto provider; ring is ssegate's. Installing twice is
    // harmless (the first one stays).
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Redirects are the client's own business ([`Client::send`]): reqwest would re-send every
    // configured header to another host but `Authorization`.
    let mut builder = reqwest::Client::builder()
        .connect_timeout(config.connect_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .tls_backend_rustls();
    let mut certs = Vec::new();
    for pem in &config.roots {
        let found = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| ClientError::Setup(format!("root certificate: {e}")))?;
        certs.extend(found);
    }
    builder = if config.only_custom_roots {
        builder.tls_certs_only(certs)
    } else {
        builder.tls_certs_merge(certs)
    };
    if !config.reuse_connections {
        builder = builder.pool_max_idle_per_host(0);
    }
    if let Some(url) = &config.proxy {
        let proxy = reqwest::Proxy::all(url)
            .map_err(|e| ClientError::Setup(format!("proxy {url:?}: {e}")))?;
        builder = builder.proxy(proxy);
    }
    builder
        .build()
        .map_err(|e| ClientError::Setup(format!("HTTP client: {e}")))
}

impl Client {
    /// Opens a session at `url` (`http://` or `https://`): `initialize`, then
    /// `notifications/initialized`.
    pub async fn connect(url: &str, config: ClientConfig) -> Result<Client, ClientError> {
        let url = reqwest::Url::parse(url)
            .map_err(|e| ClientError::Setup(format!("URL {url:?}: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ClientError::Setup(format!("URL {url}: not http(s)")));
        }
        let deadline = config.call_timeout;
        let client = Client {
            inner: Arc::new(Inner {
                http: build_http(&config)?,
                url,
                config,
                session: RwLock::new(Session::default()),
                renegotiating: tokio::sync::Mutex::new(()),
                next_id: AtomicI64::new(1),
                sessions_opened: AtomicU32::new(0),
                tools: Mutex::new(None),
                pending: Mutex::new(HashMap::new()),
            }),
        };
        within(deadline, client.initialize()).await?;
        Ok(client)
    }

    /// Like [`Client::connect`], for `http://<addr>/mcp`.
    pub async fn connect_addr(
        addr: SocketAddr,
        config: ClientConfig,
    ) -> Result<Client, ClientError> {
        Client::connect(&format!("http://{addr}/mcp"), config).await
    }

    /// The current `Mcp-Session-Id` (`None` for a sessionless server).
    pub fn session_id(&self) -> Option<String> {
        self.session().id
    }

    /// The protocol version in use: the one the server chose in `initialize`, or the stateless
    /// version both speak.
    pub fn protocol_version(&self) -> Option<String> {
        self.session().protocol_version
    }

    /// Whether the server is spoken to statelessly (MCP 2026-07-28): no session, no resumption,
    /// a cut response stream is a lost (cancelled) request.
    pub fn is_stateless(&self) -> bool {
        self.session().modern
    }

    /// The server's capabilities, as `initialize` or `server/discover` gave them.
    pub fn server_capabilities(&self) -> Option<Arc<Value>> {
        self.session().capabilities
    }

    /// The stateless server's `server/discover` result (`supportedVersions`, `capabilities`,
    /// `serverInfo`, ...); `None` on a legacy session.
    pub fn discover_result(&self) -> Option<Arc<Value>> {
        self.session().discover
    }

    /// Sessions opened so far (1 + renegotiations).
    pub fn sessions_opened(&self) -> u32 {
        self.inner.sessions_opened.load(Ordering::Relaxed)
    }

    fn session(&self) -> Session {
        self.inner.session.read().expect("session lock").clone()
    }

    /// Sends one request of `session` to the endpoint: the configured headers, the session's
    /// headers, then `extra`. A redirect is an error unless [`ClientConfig::redirects`] follows it
    /// (see [`Redirects::Follow`] for what crosses to another origin).
    async fn send(
        &self,
        method: reqwest::Method,
        session: &Session,
        extra: HeaderMap,
        body: Option<Bytes>,
        during: &'static str,
    ) -> Result<reqwest::Response, ClientError> {
        let origin = self.inner.url.origin();
        let mut url = self.inner.url.clone();
        let mut foreign = false;
        let mut hops = 0;
        loop {
            let mut req = self.inner.http.request(method.clone(), url.clone());
            if !foreign {
                req = req.headers(self.inner.config.headers.clone());
                if let Some(id) = &session.id {
                    req = req.header(SESSION_HEADER, id);
                }
                if let Some(v) = &session.protocol_version {
                    req = req.header(PROTOCOL_HEADER, v);
                }
            }
            req = req.headers(extra.clone());
            if let Some(body) = &body {
                req = req.body(body.clone());
            }
            let res = req.send().await.map_err(ClientError::http(during))?;
            if !res.status().is_redirection() {
                return Ok(res);
            }
            let status = res.status().as_u16();
            let location = res
                .headers()
                .get(header::LOCATION)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
            // The redirect's body is never read: dropping the answer closes its connection.
            drop(res);
            let refused = || ClientError::Redirect {
                during,
                status,
                location: location.clone(),
            };
            let max_hops = match self.inner.config.redirects {
                Redirects::Follow { max_hops } if matches!(status, 307 | 308) => max_hops,
                _ => return Err(refused()),
            };
            let Some(next) = location
                .as_deref()
                .and_then(|l| url.join(l).ok())
                .filter(|u| matches!(u.scheme(), "http" | "https"))
            else {
                return Err(refused());
            };
            hops += 1;
            if hops > max_hops {
                return Err(ClientError::TooManyRedirects {
                    during,
                    hops: max_hops,
                });
            }
            foreign |= next.origin() != origin;
            debug!(status, to = %next, foreign, "following a redirect");
            url = next;
        }
    }

    async fn post(
        &self,
        session: &Session,
        body: &Value,
        during: &'static str,
    ) -> Result<reqwest::Response, ClientError> {
        let mut extra = HeaderMap::new();
        if session.modern {
            let params = match (body["method"].as_str(), body["params"]["name"].as_str()) {
                (Some("tools/call"), Some(name)) => self
                    .inner
                    .tools
                    .lock()
                    .expect("tools lock")
                    .as_ref()
                    .and_then(|t| t.get(name).map(|i| i.headers.clone()))
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            let headers = modern::request_headers(body, &params)
                .map_err(|what| ClientError::Protocol(ProtocolError::Unsendable(what)))?;
            extra.extend(headers);
        }
        let body = serde_json::to_vec(body).expect("a JSON value serializes");
        extra.insert(header::ACCEPT, HeaderValue::from_static(ACCEPT_BOTH));
        extra.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        self.send(
            reqwest::Method::POST,
            session,
            extra,
            Some(Bytes::from(body)),
            during,
        )
        .await
    }

    /// A `GET` for an event stream, with `Last-Event-ID` when given.
    async fn get_stream(
        &self,
        session: &Session,
        last_event_id: Option<HeaderValue>,
        during: &'static str,
    ) -> Result<reqwest::Response, ClientError> {
        let mut extra = HeaderMap::new();
        extra.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        if let Some(id) = last_event_id {
            extra.insert("last-event-id", id);
        }
        self.send(reqwest::Method::GET, session, extra, None, during)
            .await
    }

    /// `res` when it is a success, else [`ClientError::Status`] with the start of its body.
    async fn expect_ok(
        &self,
        res: reqwest::Response,
        during: &'static str,
    ) -> Result<reqwest::Response, ClientError> {
        if res.status().is_success() {
            Ok(res)
        } else {
            Err(status_error(res, during, self.inner.config.max_error_body).await)
        }
    }

    /// Finds out how to speak to the server, as [`ClientConfig::protocol`] says: a
    /// `server/discover` for 2026-07-28 (stateless), else (or after a legacy server's answer to
    /// it) a new session with `initialize` and `notifications/initialized`. Called by
    /// [`Client::connect`] and when a legacy session must be renewed.
    ///
    /// The era is told apart as the 2026-07-28 specification asks of a client that speaks both:
    /// a `server/discover` answered with a version in common is a stateless server; an
    /// unsupported-version error (`-32022`) naming a stateless version in common is asked again
    /// with it, naming only legacy versions selects `initialize` with one of them; any other
    /// answer short of `401`, `403` or a `5xx` (an error body that is not a recognized modern
    /// error, an empty result) is a legacy server.
    pub async fn initialize(&self) -> Result<(), ClientError> {
        let offer = match self.inner.config.protocol.clone() {
            Protocol::Only(v) if !MODERN_VERSIONS.contains(&v.as_str()) => {
                return self.initialize_legacy(&v).await;
            }
            Protocol::Only(v) => Some(v),
            Protocol::Auto => None,
        };
        let pinned = offer.is_some();
        let mut version = offer.unwrap_or_else(|| MODERN_VERSIONS[0].to_owned());
        // One corrective round: a modern server that refused the version asked for.
        for round in 0..2 {
            // The first request of a client takes id 0 (as `initialize` does); a corrective
            // retry is a new request with a new id.
            let id = if round == 0 {
                0
            } else {
                self.inner.next_id.fetch_add(1, Ordering::Relaxed)
            };
            let (era, answer) = self.discover(&version, id).await?;
            debug!(?era, version, "server/discover answered");
            match era {
                modern::Era::Modern(v) => return self.open_modern(v, answer),
                modern::Era::Corrective(v) if v != version || !pinned => version = v,
                modern::Era::Corrective(_) => {}
                modern::Era::NoCommonVersion(v) => {
                    return Err(ClientError::Protocol(ProtocolError::NoCommonVersion(v)));
                }
                modern::Era::Legacy(offer) => {
                    if pinned {
                        let supported = answer["error"]["data"]["supported"]
                            .as_array()
                            .map(|a| {
                                a.iter()
                                    .filter_map(|v| v.as_str().map(str::to_owned))
                                    .collect()
                            })
                            .unwrap_or_default();
                        return Err(ClientError::Protocol(ProtocolError::NoCommonVersion(
                            supported,
                        )));
                    }
                    let offer = offer.unwrap_or_else(|| PROTOCOL_VERSION.to_owned());
                    return self.initialize_legacy(&offer).await;
                }
            }
        }
        Err(ClientError::Protocol(ProtocolError::NoCommonVersion(vec![
            version,
        ])))
    }

    /// Adds the 2026-07-28 `_meta` fields of `session` (its version, the client's capabilities and
    /// name) to a request's `params`.
    fn stamp(&self, params: &mut Value, session: &Session) {
        let version = session
            .protocol_version
            .as_deref()
            .unwrap_or(PROTOCOL_2026_07_28);
        modern::stamp_meta(
            params,
            version,
            &Self::capabilities(),
            &self.inner.config.client_name,
        );
    }

    /// The client's capabilities, as `initialize` and the 2026-07-28 `_meta` declare them.
    fn capabilities() -> Value {
        json!({"roots": {}, "sampling": {}, "elicitation": {}})
    }

    /// Sends `server/discover` as a 2026-07-28 request speaking `version`: the era its answer
    /// shows, and the answer (the JSON-RPC response, or the error body's JSON).
    async fn discover(&self, version: &str, id: i64) -> Result<(modern::Era, Value), ClientError> {
        let fresh = Session {
            protocol_version: Some(version.to_owned()),
            modern: true,
            streams: resume::Session::new(self.inner.config.stream.clone()),
            ..Session::default()
        };
        let mut params = json!({});
        self.stamp(&mut params, &fresh);
        let req =
            json!({"jsonrpc": "2.0", "id": id, "method": "server/discover", "params": params});
        let res = self.post(&fresh, &req, "server/discover").await?;
        let status = res.status().as_u16();
        if !res.status().is_success() {
            // A refusal for want of credentials or a broken server says nothing of the era.
            if matches!(status, 401 | 403) || status >= 500 || status == 429 {
                return Err(
                    status_error(res, "server/discover", self.inner.config.max_error_body).await,
                );
            }
            // Room for an unsupported-version error's list of versions.
            let cap = self.inner.config.max_error_body.max(4096);
            let body = match status_error(res, "server/discover", cap).await {
                ClientError::Status { body, .. } => body,
                _ => String::new(),
            };
            let answer: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let era = modern::classify(&answer, MODERN_VERSIONS, LEGACY_VERSIONS);
            return Ok((era, answer));
        }
        let mut stream = self.inner.config.stream.build();
        stream.resumable(false);
        let answer = self
            .answer(
                res,
                &fresh,
                RpcId::Number(id),
                stream,
                None,
                &mut Outcome::default(),
            )
            .await;
        match answer {
            // A discover result is small: a big answer is no discover result (and is not parsed).
            Ok(message) if message.len() > MAX_DISCOVER_RESULT => {
                Ok((modern::Era::Legacy(None), Value::Null))
            }
            Ok(message) => {
                let answer: Value = message.deserialize().unwrap_or(Value::Null);
                let era = modern::classify(&answer, MODERN_VERSIONS, LEGACY_VERSIONS);
                Ok((era, answer))
            }
            // A legacy server's odd answer to a method it does not know (another content type,
            // no response on its stream): not a modern server.
            Err(Attempt::Client(ClientError::Protocol(_))) => {
                Ok((modern::Era::Legacy(None), Value::Null))
            }
            Err(a) => Err(a.into_error()),
        }
    }

    /// Speaks `version` statelessly from now on.
    fn open_modern(&self, version: String, discover: Value) -> Result<(), ClientError> {
        let mut s = self.inner.session.write().expect("session lock");
        s.id = None;
        s.protocol_version = Some(version);
        s.modern = true;
        let result = discover.get("result").cloned().unwrap_or(Value::Null);
        s.capabilities = Some(Arc::new(result["capabilities"].clone()));
        s.discover = Some(Arc::new(result));
        s.generation += 1;
        s.streams = resume::Session::new(self.inner.config.stream.clone());
        self.inner.sessions_opened.fetch_add(1, Ordering::Relaxed);
        debug!(version = ?s.protocol_version, "stateless server");
        Ok(())
    }

    /// Opens a new session: `initialize` offering `offer`, then `notifications/initialized`.
    async fn initialize_legacy(&self, offer: &str) -> Result<(), ClientError> {
        // Calls take ids from 1; `initialize` is alone on its new session and always takes 0.
        let id = 0;
        let req = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "initialize",
            "params": {
                "protocolVersion": offer,
                "capabilities": Self::capabilities(),
                "clientInfo": {"name": self.inner.config.client_name, "version": env!("CARGO_PKG_VERSION")},
            },
        });
        let fresh = Session {
            streams: resume::Session::new(self.inner.config.stream.clone()),
            ..Session::default()
        };
        let res = self.post(&fresh, &req, "initialize").await?;
        if res.status() == reqwest::StatusCode::BAD_REQUEST {
            // A server that does not speak the version offered may say which ones it does
            // (`-32022`, as a 2026-07-28-only server answers `initialize`).
            let cap = self.inner.config.max_error_body.max(4096);
            let error = status_error(res, "initialize", cap).await;
            if let ClientError::Status { body, .. } = &error {
                let answer: Value = serde_json::from_str(body).unwrap_or(Value::Null);
                if let Some(supported) = modern::supported_versions_of_error(&answer) {
                    return Err(ClientError::Protocol(ProtocolError::NoCommonVersion(
                        supported,
                    )));
                }
            }
            return Err(error);
        }
        let res = self.expect_ok(res, "initialize").await?;
        let session_id = res
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let stream = self.inner.config.stream.build();
        let answer = self
            .answer(
                res,
                &fresh,
                RpcId::Number(id),
                stream,
                None,
                &mut Outcome::default(),
            )
            .await
            .map_err(Attempt::into_error)?;
        let value: Value = answer
            .deserialize()
            .map_err(|e| ClientError::Protocol(ProtocolError::InitializeError(e.to_string())))?;
        if let Some(error) = value.get("error") {
            return Err(ClientError::Protocol(ProtocolError::InitializeError(
                error.to_string(),
            )));
        }
        let version = value["result"]["protocolVersion"]
            .as_str()
            .unwrap_or(offer)
            .to_owned();
        let session = {
            let mut s = self.inner.session.write().expect("session lock");
            s.id = session_id;
            s.protocol_version = Some(version);
            s.modern = false;
            s.discover = None;
            s.capabilities = Some(Arc::new(value["result"]["capabilities"].clone()));
            s.generation += 1;
            s.streams = fresh.streams.clone();
            s.clone()
        };
        self.inner.sessions_opened.fetch_add(1, Ordering::Relaxed);
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let res = self
            .post(&session, &note, "notifications/initialized")
            .await?;
        self.expect_ok(res, "notifications/initialized").await?;
        debug!(session = ?session.id, version = ?session.protocol_version, "session open");
        Ok(())
    }

    /// Lists the server's tools (`tools/list`, every page) and remembers which are safe to run
    /// twice (annotations `readOnlyHint` or `idempotentHint`).
    pub async fn list_tools(&self) -> Result<Vec<Value>, ClientError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page: Value = self
                .call("tools/list", params, true)
                .await?
                .message
                .deserialize()
                .map_err(|_| ClientError::Protocol(ProtocolError::StreamEndedWithoutResponse))?;
            if let Some(list) = page["result"]["tools"].as_array() {
                tools.extend(list.iter().cloned());
            }
            cursor = page["result"]["nextCursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        let modern = self.session().modern;
        let mut known = HashMap::new();
        tools.retain(|t| {
            let Some(name) = t["name"].as_str() else {
                return true;
            };
            let headers = match modern::param_headers(&t["inputSchema"]) {
                Ok(headers) => headers,
                // On 2026-07-28 a tool whose header annotations are invalid is left out (it could
                // not be called with the headers the server expects).
                Err(why) if modern => {
                    warn!(tool = name, why, "tool definition refused");
                    return false;
                }
                Err(_) => Vec::new(),
            };
            let a = &t["annotations"];
            let safe = a["readOnlyHint"].as_bool() == Some(true)
                || a["idempotentHint"].as_bool() == Some(true);
            known.insert(
                name.to_owned(),
                ToolInfo {
                    safe,
                    headers,
                    tasks: tasks::TaskSupport::of_tool(t),
                },
            );
            true
        });
        *self.inner.tools.lock().expect("tools lock") = Some(known);
        Ok(tools)
    }

    /// Calls `tools/call` with `{"name": name, "arguments": arguments}`. `retryable`: the caller
    /// knows the tool may run twice ([`Retry::Always`]); otherwise [`Retry::IfSafe`] decides from
    /// the tool's annotations.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        retryable: bool,
    ) -> Result<Response, ClientError> {
        let mut options = CallOptions::default();
        options.retry(if retryable {
            Retry::Always
        } else {
            Retry::IfSafe
        });
        self.call_with(
            "tools/call",
            json!({"name": name, "arguments": arguments}),
            &options,
        )
        .await
    }

    /// Sends one JSON-RPC request and returns its response; `retryable` as in
    /// [`Client::call_tool`].
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        retryable: bool,
    ) -> Result<Response, ClientError> {
        let mut options = CallOptions::default();
        options.retry(if retryable {
            Retry::Always
        } else {
            Retry::IfSafe
        });
        self.call_with(method, params, &options).await
    }

    /// Sends one JSON-RPC request with per-call options.
    pub async fn call_with(
        &self,
        method: &str,
        mut params: Value,
        options: &CallOptions,
    ) -> Result<Response, ClientError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        if let (Some(token), Some(obj)) = (&options.progress_token, params.as_object_mut()) {
            let token = match token {
                RpcId::Number(n) => json!(n),
                RpcId::String(s) => json!(s.as_ref()),
                _ => Value::Null,
            };
            obj.entry("_meta")
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .map(|m| m.insert("progressToken".into(), token));
        }
        let span = info_span!("mcp_call", method, id);
        let call = async {
            // Dropped with the call (its deadline, or the caller's drop) before the answer: the
            // server is told (`notifications/cancelled`; a task is cancelled with `tasks/cancel`).
            let mut cancel = CancelOnDrop {
                client: Some(self.clone()),
                id,
            };
            let result = if method == "tools/call" {
                self.call_tool_tasks(params, options, id, &mut cancel).await
            } else {
                self.call_inner(method, params, options.retry, id).await
            };
            cancel.client = None;
            result
        };
        within(
            options.timeout.or(self.inner.config.call_timeout),
            call.instrument(span),
        )
        .await
    }

    async fn safe_to_reissue(&self, method: &str, params: &Value, retry: Retry) -> bool {
        match retry {
            Retry::Always => true,
            Retry::Never => false,
            Retry::IfSafe if method != "tools/call" => true,
            Retry::IfSafe => {
                let Some(name) = params["name"].as_str() else {
                    return false;
                };
                let known = self.inner.tools.lock().expect("tools lock").is_some();
                // Boxed: listing tools is itself a call.
                if !known && Box::pin(self.list_tools()).await.is_err() {
                    return false;
                }
                let tools = self.inner.tools.lock().expect("tools lock");
                tools
                    .as_ref()
                    .and_then(|t| t.get(name))
                    .is_some_and(|t| t.safe)
            }
        }
    }

    async fn call_inner(
        &self,
        method: &str,
        params: Value,
        retry: Retry,
        id: i64,
    ) -> Result<Response, ClientError> {
        let mut id = id;
        if method == "tools/call" && self.session().modern {
            let known = self.inner.tools.lock().expect("tools lock").is_some();
            // The tool's `x-mcp-header` arguments must be mirrored into headers: learn them
            // once (boxed: listing tools is itself a call).
            if !known && let Err(e) = Box::pin(self.list_tools()).await {
                warn!(error = %e, "tools/list failed; calling without parameter headers");
            }
        }
        // What an `input_required` retry sends: the original params plus that round's answers.
        let mut sent = params.clone();
        let mut outcome = Outcome::default();
        loop {
            outcome.attempts += 1;
            let session = self.session();
            let mut wire = sent.clone();
            if session.modern {
                self.stamp(&mut wire, &session);
            }
            let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": wire});
            let rpc_id = RpcId::Number(id);
            let attempt = async {
                let res = match self.post(&session, &req, "request").await {
                    Ok(res) => res,
                    // Sent, then cut before the response head: the server may have run the call,
                    // and nothing can be resumed (no event id yet). A connect failure (nothing
                    // sent) stays an HTTP error; an invalid response head is the server's answer,
                    // not a cut ([`ClientError::InvalidResponse`]).
                    Err(ClientError::Http { source, during }) if !source.is_connect() => {
                        warn!(error = %source, "the request's response was cut before its head");
                        return Err(Attempt::Lost(
                            Failure::Refused(Refusal {
                                kind: RefusalKind::Unresumable {
                                    partial_bytes: 0,
                                    partial_id: None,
                                },
                                cursor: None,
                                outstanding: vec![rpc_id.clone()],
                            }),
                            Vec::new(),
                            Some(Box::new(ClientError::Http { during, source })),
                        ));
                    }
                    Err(e) => return Err(e.into()),
                };
                let status = res.status().as_u16();
                if matches!(status, 429 | 503) {
                    // Overloaded, or a replay store briefly unavailable: the request was not
                    // taken. Retried after the server's (clamped) delay when safe to repeat.
                    let retry_after = res
                        .headers()
                        .get(header::RETRY_AFTER)
                        .and_then(|v| resume::parse_retry_after(v.as_bytes(), SystemTime::now()));
                    let error =
                        status_error(res, "request", self.inner.config.max_error_body).await;
                    return Err(Attempt::Busy(error, retry_after));
                }
                if res.status() == reqwest::StatusCode::NOT_FOUND && session.id.is_some() {
                    // The session expired before the request was taken: nothing ran, so the
                    // call may always be issued again on a new session.
                    return Err(Attempt::NotTaken(Failure::Refused(Refusal {
                        kind: RefusalKind::SessionExpired,
                        cursor: None,
                        outstanding: vec![rpc_id.clone()],
                    })));
                }
                let res = self.expect_ok(res, "request").await?;
                let mut stream = session.streams.request_stream(rpc_id.clone());
                // 2026-07-28 has no resumption: a cut stream is a lost request.
                stream.resumable(!session.modern);
                let (tx, mut rx) = tokio::sync::oneshot::channel();
                self.inner
                    .pending
                    .lock()
                    .expect("pending lock")
                    .insert(rpc_id.clone(), tx);
                let answer = self
                    .answer(
                        res,
                        &session,
                        rpc_id.clone(),
                        stream,
                        Some(&mut rx),
                        &mut outcome,
                    )
                    .await;
                self.inner
                    .pending
                    .lock()
                    .expect("pending lock")
                    .remove(&rpc_id);
                answer
            };
            let (failure, received, transport) = match attempt.await {
                Ok(message)
                    if session.modern && contains(message.data(), b"\"input_required\"") =>
                {
                    let value: Value = message.deserialize().map_err(|_| {
                        ClientError::Protocol(ProtocolError::StreamEndedWithoutResponse)
                    })?;
                    let result = &value["result"];
                    if result["resultType"] != "input_required" {
                        return Ok(Response {
                            message,
                            request_id: rpc_id,
                            outcome,
                        });
                    }
                    if outcome.input_rounds >= self.inner.config.max_input_rounds {
                        return Err(ClientError::Protocol(ProtocolError::TooManyInputRounds(
                            outcome.input_rounds,
                        )));
                    }
                    outcome.input_rounds += 1;
                    sent = self.answer_input(&params, result).await?;
                    // A retry is a new request, with a new id.
                    id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
                    outcome.attempts -= 1;
                    continue;
                }
                Ok(message) => {
                    return Ok(Response {
                        message,
                        request_id: rpc_id,
                        outcome,
                    });
                }
                Err(Attempt::Client(e)) => return Err(e),
                Err(Attempt::Busy(error, retry_after)) => {
                    if outcome.attempts >= self.inner.config.max_attempts
                        || !self.safe_to_reissue(method, &params_of(&req), retry).await
                    {
                        return Err(error);
                    }
                    let delay = self.inner.config.stream.busy_delay(retry_after);
                    warn!(error = %error, delay_ms = delay.as_millis() as u64, "busy; retrying");
                    tokio::time::sleep(delay).await;
                    continue;
                }
                Err(Attempt::Lost(f, received, transport)) => (f, Some(received), transport),
                Err(Attempt::NotTaken(f)) => (f, None, None),
            };
            warn!(failure = %failure, attempt = outcome.attempts, "the response stream was lost");
            outcome.refusals.push(failure.clone());
            if !failure.must_renegotiate() {
                return Err(ClientError::Refused {
                    failure: Box::new(failure),
                    attempts: outcome.attempts,
                    transport,
                });
            }
            if let Some(received) = received
                && !self.safe_to_reissue(method, &params_of(&req), retry).await
            {
                return Err(ClientError::OutcomeUnknown {
                    failure: Box::new(failure),
                    method: describe_call(method, &req),
                    received,
                    transport,
                });
            }
            if outcome.attempts >= self.inner.config.max_attempts {
                return Err(ClientError::Refused {
                    failure: Box::new(failure),
                    attempts: outcome.attempts,
                    transport,
                });
            }
            if session.modern {
                // Stateless: nothing to renew. The request is issued again as a new request.
                id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            self.renegotiate(session.generation).await?;
            outcome.renegotiations += 1;
        }
    }

    /// The [`Handler`]'s answers to `requests` (an `inputRequests` object: key to server request),
    /// keyed alike; keys in `answered` are skipped, and the answered ones are added to it.
    async fn input_responses(
        &self,
        requests: &Value,
        answered: &mut std::collections::HashSet<String>,
    ) -> Result<serde_json::Map<String, Value>, ClientError> {
        let mut responses = serde_json::Map::new();
        let Some(requests) = requests.as_object() else {
            return Ok(responses);
        };
        for (key, request) in requests {
            if answered.contains(key) {
                continue;
            }
            let method = request["method"].as_str().unwrap_or_default();
            let answer = self
                .inner
                .config
                .handler
                .request(method, request.get("params"))
                .await
                .map_err(|error| {
                    ClientError::Protocol(ProtocolError::InputRequest {
                        method: method.to_owned(),
                        error,
                    })
                })?;
            answered.insert(key.clone());
            responses.insert(key.clone(), answer);
        }
        Ok(responses)
    }

    /// The params of the retry of a request answered `input_required` with `result`: the
    /// original params, the [`Handler`]'s answers to the input requests (`inputResponses`, only
    /// when there were requests) and `requestState` exactly as received (only when there was one).
    async fn answer_input(&self, original: &Value, result: &Value) -> Result<Value, ClientError> {
        let responses = self
            .input_responses(&result["inputRequests"], &mut Default::default())
            .await?;
        let mut params = original.clone();
        if !params.is_object() {
            params = json!({});
        }
        let obj = params.as_object_mut().expect("an object");
        if !responses.is_empty() {
            obj.insert("inputResponses".into(), Value::Object(responses));
        }
        if let Some(state) = result.get("requestState") {
            obj.insert("requestState".into(), state.clone());
        }
        Ok(params)
    }

    /// Opens a new session unless a concurrent call already did since `seen`.
    async fn renegotiate(&self, seen: u64) -> Result<(), ClientError> {
        let _one = self.inner.renegotiating.lock().await;
        if self.session().generation != seen {
            return Ok(());
        }
        let old = self.session();
        if old.id.is_some() {
            // End the lost session politely; it may already be gone.
            if let Err(e) = self.delete(&old).await {
                debug!(error = %e, "could not delete the old session");
            }
        }
        // The server was found to speak `initialize`: a new session with the version it chose.
        let offer = old.protocol_version.as_deref().unwrap_or(PROTOCOL_VERSION);
        self.initialize_legacy(offer).await
    }

    /// Reads one answer: a JSON body, or an event stream through the guard until `rpc_id`'s
    /// response arrives.
    async fn answer(
        &self,
        res: reqwest::Response,
        session: &Session,
        rpc_id: RpcId,
        stream: ResumableStream,
        mut elsewhere: Option<&mut tokio::sync::oneshot::Receiver<Message>>,
        outcome: &mut Outcome,
    ) -> Result<Message, Attempt> {
        let content_type = res
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if mime_is(content_type.as_deref(), "application/json") {
            return self.json_answer(res, rpc_id).await;
        }
        if !mime_is(content_type.as_deref(), "text/event-stream") {
            return Err(ClientError::Protocol(ProtocolError::ContentType(content_type)).into());
        }
        let body: Body = Box::pin(
            res.bytes_stream()
                .map_err(ClientError::http("response stream")),
        );
        let me = self.clone();
        let resume_session = session.clone();
        let reconnect = move |r: Reconnect| {
            let me = me.clone();
            let session = resume_session.clone();
            async move { me.resume(&session, r).await }
        };
        let mut guarded = GuardedStream::new(stream, body, reconnect);
        let mut received = Vec::new();
        let result = loop {
            match guarded.next().await {
                Some(Ok(d))
                    if d.rpc.kind == RpcKind::Response && d.rpc.id.as_ref() == Some(&rpc_id) =>
                {
                    break Ok(d.message);
                }
                Some(Ok(d)) => {
                    outcome.other_messages += 1;
                    // Kept for `OutcomeUnknown`: the first few, copied out of their chunks (a
                    // slice would keep a whole transport buffer alive per message).
                    if received.len() < MAX_RECEIVED {
                        let copy = Bytes::copy_from_slice(&d.message.data().contiguous());
                        received.push(Message::new(Data::from(copy)));
                    }
                    self.dispatch(session, d).await;
                }
                Some(Err(f)) => {
                    if let Some(m) = Self::arrived_elsewhere(&mut elsewhere, guarded.state()).await
                    {
                        break Ok(m);
                    }
                    let transport = guarded.take_last_error().map(Box::new);
                    break Err(Attempt::Lost(f, std::mem::take(&mut received), transport));
                }
                None => {
                    // The stream finished with nothing outstanding: the response came on another
                    // stream of the session.
                    if let Some(m) = Self::arrived_elsewhere(&mut elsewhere, guarded.state()).await
                    {
                        break Ok(m);
                    }
                    break Err(
                        ClientError::Protocol(ProtocolError::StreamEndedWithoutResponse).into(),
                    );
                }
            }
        };
        let state = guarded.state();
        outcome.resumes += state.resumes();
        outcome.skipped += state.stats().skipped as u32;
        result
    }

    /// The response, when another stream of the session delivered it (waits briefly: that
    /// stream's consumer hands it over just after its guard accepted it).
    async fn arrived_elsewhere(
        elsewhere: &mut Option<&mut tokio::sync::oneshot::Receiver<Message>>,
        stream: &ResumableStream,
    ) -> Option<Message> {
        let rx = elsewhere.as_mut()?;
        let answered = stream.outstanding().is_empty();
        let wait = if answered {
            stream.replay_timeout()
        } else {
            Duration::ZERO
        };
        tokio::time::timeout(wait, &mut **rx).await.ok()?.ok()
    }

    async fn json_answer(&self, res: reqwest::Response, rpc_id: RpcId) -> Result<Message, Attempt> {
        let limit = self.inner.config.max_json_body;
        if res.content_length().is_some_and(|n| n > limit as u64) {
            return Err(ClientError::Protocol(ProtocolError::BodyTooLarge(limit)).into());
        }
        // Held as the chunks arrived (no growing copy) and judged as they come, as the guard
        // judges streamed messages (its nesting limit and instruction set).
        let mut gate = self.inner.config.stream.guard_config().gate();
        let mut body = Data::default();
        let mut chunks = res.bytes_stream();
        let lost = |partial_bytes: usize, transport: Option<Box<ClientError>>| {
            Attempt::Lost(
                Failure::Refused(Refusal {
                    kind: RefusalKind::Unresumable {
                        partial_bytes: partial_bytes as u64,
                        partial_id: None,
                    },
                    cursor: None,
                    outstanding: vec![rpc_id.clone()],
                }),
                Vec::new(),
                transport,
            )
        };
        while let Some(chunk) = chunks.next().await {
            let chunk = match chunk.map_err(ClientError::http("JSON answer")) {
                Ok(chunk) => chunk,
                // Cut inside the answer: lost like a cut stream with no ids.
                Err(e @ ClientError::Http { .. }) => {
                    return Err(lost(body.len(), Some(Box::new(e))));
                }
                Err(e) => return Err(e.into()),
            };
            if body.len() + chunk.len() > limit {
                return Err(ClientError::Protocol(ProtocolError::BodyTooLarge(limit)).into());
            }
            if !chunk.is_empty() {
                gate.feed(&chunk);
                body.push_segment(chunk);
            }
        }
        let verdict = gate.verdict();
        match verdict {
            Verdict::Complete => {}
            // A cut JSON answer: the response is lost like a cut stream with no ids.
            Verdict::Incomplete => return Err(lost(body.len(), None)),
            // Whole but not one JSON value (or deeper than the guard's limit): the server's answer,
            // reported as is.
            Verdict::Trailing | Verdict::Invalid => {
                return Err(ClientError::Protocol(ProtocolError::JsonBody(verdict)).into());
            }
        }
        let message = Message::new(body);
        let peek = message.jsonrpc_peek();
        if peek.kind != RpcKind::Response || peek.id.as_ref() != Some(&rpc_id) {
            return Err(ClientError::Protocol(ProtocolError::NotTheResponse(rpc_id)).into());
        }
        Ok(message)
    }

    /// `GET` + `Last-Event-ID` for a reconnect the stream asked for.
    async fn resume(
        &self,
        session: &Session,
        r: Reconnect,
    ) -> Result<(ReconnectResponse, Body), ClientError> {
        let last_event_id =
            match &r.last_event_id {
                Some(id) => Some(HeaderValue::from_bytes(id).map_err(|_| {
                    ClientError::Protocol(ProtocolError::Unsendable("Last-Event-ID"))
                })?),
                None => None,
            };
        let res = match self.get_stream(session, last_event_id, "resume").await {
            Ok(res) => res,
            // A redirect not followed is the server's answer to the resume: the guard refuses
            // it as unexpected, once, instead of the reconnect being retried.
            Err(ClientError::Redirect { status, .. }) => {
                let body: Body = Box::pin(futures_util::stream::empty());
                return Ok((
                    ReconnectResponse::from_raw(status, None, None, SystemTime::now()),
                    body,
                ));
            }
            Err(e) => return Err(e),
        };
        let header = |name| res.headers().get(name).map(HeaderValue::as_bytes);
        let response = ReconnectResponse::from_raw(
            res.status().as_u16(),
            header(header::RETRY_AFTER),
            header(header::CONTENT_TYPE),
            SystemTime::now(),
        );
        debug!(
            status = response.status,
            attempt = r.attempt,
            "resume answered"
        );
        let body: Body = Box::pin(
            res.bytes_stream()
                .map_err(ClientError::http("resumed stream")),
        );
        Ok((response, body))
    }

    /// A message on a response stream that is not the response: a server request to answer or a
    /// notification for the application.
    async fn dispatch(&self, session: &Session, d: guard::Delivery) {
        let handler = self.inner.config.handler.clone();
        match d.rpc.kind {
            RpcKind::Request if session.modern => {
                // 2026-07-28 servers ask for input in `input_required` results; a client sends
                // no responses there. Shown to the application, never answered.
                warn!("a server request on a 2026-07-28 stream: not answered");
                handler.notification(&d.message);
            }
            RpcKind::Request => {
                let Ok(value) = d.message.deserialize::<Value>() else {
                    return;
                };
                let method = value["method"].as_str().unwrap_or_default().to_owned();
                let answer = handler.request(&method, value.get("params")).await;
                let body = match answer {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": value["id"], "result": result}),
                    Err(e) => json!({"jsonrpc": "2.0", "id": value["id"],
                                     "error": {"code": e.code, "message": e.message}}),
                };
                let answer = self.post(session, &body, "answer a server request");
                match within(self.inner.config.call_timeout, answer).await {
                    Ok(res) if res.status().is_success() => {}
                    Ok(res) => warn!(status = res.status().as_u16(), method, "answer refused"),
                    Err(e) => warn!(error = %e, method, "answer failed"),
                }
            }
            RpcKind::Response => {
                let waiting = d
                    .rpc
                    .id
                    .as_ref()
                    .and_then(|id| self.inner.pending.lock().expect("pending lock").remove(id));
                match waiting {
                    Some(tx) => {
                        let _ = tx.send(Message::new(d.message.data().clone()));
                    }
                    None => handler.notification(&d.message),
                }
            }
            _ => handler.notification(&d.message),
        }
    }

    /// The standalone `GET` stream: server notifications and requests outside any call, guarded
    /// and resumed like a response stream, kept open until the server ends it for good. Server
    /// requests on it are answered through the [`Handler`]; every message is also yielded.
    pub async fn listen(
        &self,
    ) -> Result<impl Stream<Item = Result<Message, Failure>> + use<>, ClientError> {
        let session = self.session();
        let open = async {
            let res = if session.modern {
                let mut params = json!({"notifications": {
                    "toolsListChanged": true,
                    "promptsListChanged": true,
                    "resourcesListChanged": true,
                }});
                self.stamp(&mut params, &session);
                let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
                let req = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
                                 "params": params});
                self.post(&session, &req, "subscriptions/listen").await?
            } else {
                self.get_stream(&session, None, "open the GET stream")
                    .await?
            };
            self.expect_ok(res, "open the GET stream").await
        };
        let res = within(self.inner.config.call_timeout, open).await?;
        let mut stream = session.streams.listen_stream();
        if session.modern {
            // The `subscriptions/listen` stream ends when the server ends it: nothing to resume.
            stream.keep_open(false);
            stream.resumable(false);
        }
        let body: Body = Box::pin(res.bytes_stream().map_err(ClientError::http("GET stream")));
        let me = self.clone();
        let resume_session = session.clone();
        let reconnect = move |r: Reconnect| {
            let me = me.clone();
            let session = resume_session.clone();
            async move { me.resume(&session, r).await }
        };
        let me = self.clone();
        Ok(
            GuardedStream::new(stream, body, reconnect).then(move |item| {
                let me = me.clone();
                let session = session.clone();
                async move {
                    let d = item?;
                    let message = Message::new(d.message.data().clone());
                    me.dispatch(&session, d).await;
                    Ok(message)
                }
            }),
        )
    }

    async fn delete(&self, session: &Session) -> Result<(), ClientError> {
        let res = self
            .send(
                reqwest::Method::DELETE,
                session,
                HeaderMap::new(),
                None,
                "delete session",
            )
            .await?;
        let status = res.status();
        // A session the server already forgot (or one it does not let clients end) is as ended
        // as it gets.
        if status.is_success() || status == 404 || status == 405 {
            Ok(())
        } else {
            Err(status_error(res, "delete session", self.inner.config.max_error_body).await)
        }
    }

    /// POSTs the JSON-RPC message `body` on the current session and hands back the response
    /// unread, whatever its status: the escape hatch for tools that read a response themselves
    /// (`ssegate probe`). On 2026-07-28 the request's `_meta` envelope is stamped as for any call.
    /// Nothing guards what is read from it.
    pub async fn post_raw(&self, body: &Value) -> Result<reqwest::Response, ClientError> {
        let session = self.session();
        if session.modern {
            let mut body = body.clone();
            self.stamp(&mut body["params"], &session);
            return self.post(&session, &body, "request").await;
        }
        self.post(&session, body, "request").await
    }

    /// `GET` with `Last-Event-ID` (its exact bytes) on the current session, the response unread
    /// (see [`Client::post_raw`]). An id that cannot be sent as a header value is
    /// [`ProtocolError::Unsendable`].
    pub async fn get_raw(&self, last_event_id: &[u8]) -> Result<reqwest::Response, ClientError> {
        let value = HeaderValue::from_bytes(last_event_id)
            .map_err(|_| ClientError::Protocol(ProtocolError::Unsendable("Last-Event-ID")))?;
        self.get_stream(&self.session(), Some(value), "resume")
            .await
    }

    /// Ends the session with `DELETE` (nothing to do for a sessionless server).
    pub async fn close(self) -> Result<(), ClientError> {
        let session = self.session();
        if session.id.is_none() || session.modern {
            return Ok(());
        }
        within(self.inner.config.call_timeout, self.delete(&session)).await
    }
}

/// Sends `notifications/cancelled` for a call dropped (or timed out) before its response.
struct CancelOnDrop {
    client: Option<Client>,
    id: i64,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let id = self.id;
        // On 2026-07-28 the dropped response stream is itself the cancellation.
        if client.session().modern {
            return;
        }
        runtime.spawn(async move {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                              "params": {"requestId": id, "reason": "the client dropped the call"}});
            let session = client.session();
            let post = client.post(&session, &note, "notifications/cancelled");
            if let Err(e) = within(client.inner.config.call_timeout, post).await {
                debug!(error = %e, "could not send notifications/cancelled");
            }
        });
    }
}

/// How one attempt at a call ended, short of its response.
enum Attempt {
    /// An error the client reports as is.
    Client(ClientError),
    /// The stream was lost; the messages received before; the last transport error.
    Lost(Failure, Vec<Message>, Option<Box<ClientError>>),
    /// The server did not take the request (`404` on the POST: the session had expired).
    NotTaken(Failure),
    /// The server answered `429` or `503` (the error, its `Retry-After`): the request was not taken.
    Busy(ClientError, Option<Duration>),
}

impl Attempt {
    /// The error of a single-attempt exchange (`initialize`, `server/discover`): a lost stream is
    /// a refusal after one attempt.
    fn into_error(self) -> ClientError {
        match self {
            Attempt::Client(e) | Attempt::Busy(e, _) => e,
            Attempt::Lost(f, _, transport) => ClientError::Refused {
                failure: Box::new(f),
                attempts: 1,
                transport,
            },
            Attempt::NotTaken(f) => ClientError::Refused {
                failure: Box::new(f),
                attempts: 1,
                transport: None,
            },
        }
    }
}

impl From<ClientError> for Attempt {
    fn from(e: ClientError) -> Self {
        Attempt::Client(e)
    }
}

/// Whether `needle` occurs in `data`, across its chunks (however small).
fn contains(data: &Data, needle: &[u8]) -> bool {
    let finder = memchr::memmem::Finder::new(needle);
    let keep = needle.len().saturating_sub(1);
    // The last `keep` bytes seen, to find a needle that spans chunks.
    let mut tail: Vec<u8> = Vec::with_capacity(2 * keep);
    for chunk in data.chunks() {
        if finder.find(chunk).is_some() {
            return true;
        }
        let head = &chunk[..chunk.len().min(keep)];
        tail.extend_from_slice(head);
        if finder.find(&tail).is_some() {
            return true;
        }
        if chunk.len() >= keep {
            tail.clear();
            tail.extend_from_slice(&chunk[chunk.len() - keep..]);
        } else if tail.len() > keep {
            tail.drain(..tail.len() - keep);
        }
    }
    false
}

fn params_of(req: &Value) -> Value {
    req.get("params").cloned().unwrap_or(Value::Null)
}

fn describe_call(method: &str, req: &Value) -> String {
    match req["params"]["name"].as_str() {
        Some(tool) if method == "tools/call" => format!("tools/call {tool}"),
        _ => method.to_owned(),
    }
}

fn mime_is(content_type: Option<&str>, mime: &str) -> bool {
    content_type
        .and_then(|ct| ct.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case(mime))
}

/// Runs `f` under `deadline` (none: unbounded); past it, [`ClientError::Timeout`].
async fn within<T>(
    deadline: Option<Duration>,
    f: impl Future<Output = Result<T, ClientError>>,
) -> Result<T, ClientError> {
    match deadline {
        Some(t) => tokio::time::timeout(t, f)
            .await
            .unwrap_or(Err(ClientError::Timeout(t))),
        None => f.await,
    }
}

/// [`ClientError::Status`] with at most `cap` bytes of `res`'s body; the rest is never read (the
/// answer is dropped, and its connection with it).
async fn status_error(mut res: reqwest::Response, during: &'static str, cap: usize) -> ClientError {
    let status = res.status().as_u16();
    let mut body = Vec::new();
    while body.len() < cap {
        match res.chunk().await {
            Ok(Some(chunk)) => {
                let take = chunk.len().min(cap - body.len());
                body.extend_from_slice(&chunk[..take]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    drop(res);
    ClientError::Status {
        during,
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mime_matching() {
        assert!(mime_is(
            Some("text/event-stream; charset=utf-8"),
            "text/event-stream"
        ));
        assert!(mime_is(Some("Application/JSON"), "application/json"));
        assert!(!mime_is(None, "application/json"));
        assert!(!mime_is(Some("text/plain"), "application/json"));
    }

    #[test]
    fn a_needle_is_found_across_any_chunking() {
        let text = br#"{"result":{"resultType":"input_required"}}"#;
        for size in 1..text.len() {
            let mut data = Data::default();
            for chunk in text.chunks(size) {
                data.push(Bytes::copy_from_slice(chunk));
            }
            assert!(contains(&data, b"\"input_required\""), "chunks of {size}");
            assert!(!contains(&data, b"\"complete\""), "chunks of {size}");
        }
    }

    #[test]
    fn calls_are_described_with_their_tool() {
        let req = json!({"method": "tools/call", "params": {"name": "charge_card"}});
        assert_eq!(describe_call("tools/call", &req), "tools/call charge_card");
        assert_eq!(describe_call("tools/list", &json!({})), "tools/list");
    }
}
