//! A guarded MCP Streamable HTTP client: a driver over [`ResumableStream`] on reqwest
//! (rustls TLS with the platform's roots plus any custom root, HTTP/1.1 and HTTP/2, pooled
//! connections, `HTTP(S)_PROXY`).
//!
//! [`Client::connect`] picks the protocol per server ([`ClientConfig::protocol`], default
//! [`Protocol::Auto`]): MCP 2026-07-28 when the server answers `server/discover` (stateless, no
//! session, no resumption), otherwise a session opened with `initialize` offering
//! [`PROTOCOL_VERSION`] (`2025-11-25`, the newest version with `Last-Event-ID` resumption) and
//! `notifications/initialized`. [`ClientConfig::protocol_version`] pins one version instead. On a
//! session every later request carries `MCP-Protocol-Version` with the version the server chose
//! and `Mcp-Session-Id` when the server gave one (sessionless servers work too).
//! [`Client::call`] POSTs one request and takes either answer. An event-stream answer goes through a
//! [`GuardedStream`]: when the connection is cut, the stream resumes with `GET` + `Last-Event-ID`
//! and the guard decides whether the replay continues the stream that was cut.
//!
//! A server on the 2024-11-05 HTTP+SSE transport (an event stream from `GET`, whose `endpoint`
//! event names where messages are `POST`ed) is reached too: [`ClientConfig::transport`] says which
//! transport is tried first ([`TransportStrategy`], default Streamable HTTP, then HTTP+SSE when
//! `initialize` is answered `400`, `404` or `405`). There every message of the one stream is gated
//! and guarded as on Streamable HTTP; nothing is resumed (the transport has no resumption), so a cut
//! stream loses the calls in flight and the next call opens a new session.
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
//! | an HTTP+SSE stream before its `endpoint` event | 16 KiB | [`ClientConfig::max_endpoint_event`] |
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
//! Settings are read as they are written: a [`ClientConfig`] setter is named after its setting
//! and chains (`config.protocol(..)`), the setting is read back with `<setting>_ref()` and edited
//! in place with `<setting>_mut()` (`config.stream_mut()`); a [`Client`]'s accessors are plain
//! nouns (`session_id()`), `is_` for a yes-or-no (`is_stateless()`).
//!
//! ```no_run
//! # async fn run() -> Result<(), ssegate::client::ClientError> {
//! use ssegate::client::{Client, ClientConfig, Retry};
//! use serde_json::json;
//!
//! let mut config = ClientConfig::default();
//! config.bearer_token("secret")?;
//! let client = Client::connect("https://mcp.example.com/mcp", config).await?;
//! let response = client.call_tool("search", json!({"q": "sse"}), Retry::IfSafe).await?;
//! println!("{} bytes after {} resumes", response.message.len(), response.outcome.resumes);
//! client.close().await?;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

// One file per concern: the settings (`config`), errors (`error`), the session and how the server's
// protocol era is found (`session`), calls and their re-issue (`call`), HTTP requests and reading
// answers (`transport`), the 2024-11-05 HTTP+SSE transport (`legacy`), the application's handler
// (`handler`), tasks (`tasks`), and the 2026-07-28
// wire format (`v2026_07_28`).
#[cfg(feature = "auth")]
#[cfg_attr(docsrs, doc(cfg(feature = "auth")))]
pub mod auth;
mod call;
mod config;
mod error;
mod handler;
mod legacy;
mod session;
mod tasks;
mod transport;
mod v2026_07_28;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicI64, AtomicU32};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::message::{Message, RpcId};
#[cfg(doc)]
use crate::resume::{self, ResumableStream, stream::GuardedStream};

pub use call::{Outcome, Response};
pub use config::{
    CallOptions, ClientConfig, DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_ERROR_BODY,
    DEFAULT_MAX_INPUT_ROUNDS, INITIALIZE_VERSIONS, PROTOCOL_2026_07_28, PROTOCOL_VERSION, Protocol,
    Redirects, Retry, STATELESS_VERSIONS, TransportStrategy,
};
pub use error::{ClientError, ProtocolError, RpcError};
pub use handler::{DefaultHandler, Handler, HandlerFuture};
pub use tasks::{
    DEFAULT_MAX_TASK_READ_FAILURES, DEFAULT_TASK_POLL_MAX, DEFAULT_TASK_POLL_MIN, TASKS_EXTENSION,
    TaskError, TaskErrorKind, TaskGeneration, TaskHandle, TaskMode,
};
pub use transport::{PROTOCOL_HEADER, SESSION_HEADER};
#[cfg(feature = "rmcp")]
pub(crate) use transport::{build_http, mime_is};

use call::{CancelOnDrop, ToolInfo};
use session::Session;

/// What the clones of a [`Client`] share: the HTTP stack, the settings, the session, the calls.
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
