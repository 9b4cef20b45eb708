//! The client's settings: [`ClientConfig`], the protocol versions it speaks, and the per-call
//! options ([`CallOptions`], [`Retry`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

#[cfg(doc)]
use super::{Client, ProtocolError, TaskErrorKind};
use super::{
    ClientError, DEFAULT_MAX_TASK_READ_FAILURES, DEFAULT_TASK_POLL_MAX, DEFAULT_TASK_POLL_MIN,
    DefaultHandler, Handler, TaskMode,
};
use crate::message::RpcId;
use crate::{contract, guard, resume, sse};

// The protocol versions, defined with the rest of the wire contract.
pub use crate::contract::{
    INITIALIZE_VERSIONS, PROTOCOL_2026_07_28, PROTOCOL_VERSION, STATELESS_VERSIONS,
};

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
    /// This version only: a stateless one ([`STATELESS_VERSIONS`]) is never followed by
    /// `initialize`; one of [`INITIALIZE_VERSIONS`] is offered in `initialize` (the server may
    /// still choose another version it and the client speak).
    Only(String),
}

impl Protocol {
    /// Parses `auto` or a version.
    pub fn parse(s: &str) -> Option<Protocol> {
        match s {
            "auto" => Some(Protocol::Auto),
            v if STATELESS_VERSIONS.contains(&v) || INITIALIZE_VERSIONS.contains(&v) => {
                Some(Protocol::Only(v.to_owned()))
            }
            _ => None,
        }
    }
}

/// Which HTTP transport the client speaks to the server at its URL
/// ([`ClientConfig::transport`]): Streamable HTTP (a `POST` per message), or the 2024-11-05
/// HTTP+SSE transport (one `GET` event stream that names, in its first `endpoint` event, where
/// each message is `POST`ed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportStrategy {
    /// Streamable HTTP; when `initialize` (after a `server/discover` answered as a server that
    /// does not speak 2026-07-28 answers it) is answered `400`, `404` or `405`, the HTTP+SSE
    /// transport at the same URL. When that fails too, the `initialize` answer is the error
    /// (unless the URL did answer with an event stream whose `endpoint` event is unusable).
    #[default]
    HttpFirst,
    /// The HTTP+SSE transport; when its `GET` is answered `400`, `404` or `405` (as Streamable
    /// HTTP servers answer a `GET` without a session), or with anything but an event stream,
    /// Streamable HTTP at the same URL.
    SseFirst,
    /// Streamable HTTP only.
    HttpOnly,
    /// The HTTP+SSE transport only.
    SseOnly,
}

impl TransportStrategy {
    /// Every strategy, in the order of [`TransportStrategy::as_str`]'s words.
    pub const ALL: [TransportStrategy; 4] = [
        TransportStrategy::HttpFirst,
        TransportStrategy::SseFirst,
        TransportStrategy::HttpOnly,
        TransportStrategy::SseOnly,
    ];

    /// The strategy's word: `http-first`, `sse-first`, `http-only`, `sse-only`.
    pub const fn as_str(self) -> &'static str {
        match self {
            TransportStrategy::HttpFirst => "http-first",
            TransportStrategy::SseFirst => "sse-first",
            TransportStrategy::HttpOnly => "http-only",
            TransportStrategy::SseOnly => "sse-only",
        }
    }

    /// Parses a word of [`TransportStrategy::as_str`].
    pub fn parse(s: &str) -> Option<TransportStrategy> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for TransportStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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

// Defaults of [`ClientConfig::call_timeout`] and [`ClientConfig::max_error_body`].
pub use crate::contract::{DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_ERROR_BODY};

/// Per-call options for [`Client::call_with`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct CallOptions {
    pub(super) retry: Retry,
    pub(super) progress_token: Option<RpcId>,
    pub(super) timeout: Option<Duration>,
    pub(super) tasks: TaskMode,
    pub(super) task_ttl: Option<Duration>,
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

/// The client's settings. Setters take `&mut self` and chain; see the [module docs](super)
/// for how a setting is read back.
#[derive(Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    pub(crate) stream: resume::StreamConfig,
    pub(crate) headers: HeaderMap,
    pub(super) roots: Vec<Vec<u8>>,
    pub(super) only_custom_roots: bool,
    pub(super) protocol: Protocol,
    pub(super) transport: TransportStrategy,
    pub(super) max_endpoint_event: usize,
    pub(super) max_attempts: u32,
    pub(super) max_input_rounds: u32,
    pub(super) task_poll: (Duration, Duration),
    pub(super) max_task_read_failures: u32,
    pub(super) connect_timeout: Duration,
    pub(super) call_timeout: Option<Duration>,
    pub(crate) max_json_body: usize,
    pub(super) max_error_body: usize,
    pub(super) redirects: Redirects,
    pub(super) client_name: String,
    pub(super) client_version: String,
    pub(super) capabilities: Value,
    pub(super) reuse_connections: bool,
    pub(super) proxy: Option<String>,
    pub(super) handler: Arc<dyn Handler>,
    #[cfg(feature = "auth")]
    pub(super) auth: Option<super::auth::AuthConfig>,
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("stream", &self.stream)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("roots", &self.roots.len())
            .field("protocol", &self.protocol)
            .field("transport", &self.transport)
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
            transport: TransportStrategy::HttpFirst,
            max_endpoint_event: contract::DEFAULT_MAX_ENDPOINT_EVENT,
            max_attempts: contract::DEFAULT_MAX_ATTEMPTS,
            max_input_rounds: DEFAULT_MAX_INPUT_ROUNDS,
            task_poll: (DEFAULT_TASK_POLL_MIN, DEFAULT_TASK_POLL_MAX),
            max_task_read_failures: DEFAULT_MAX_TASK_READ_FAILURES,
            connect_timeout: contract::DEFAULT_CONNECT_TIMEOUT,
            call_timeout: Some(DEFAULT_CALL_TIMEOUT),
            max_json_body: contract::DEFAULT_MAX_JSON_BODY,
            max_error_body: DEFAULT_MAX_ERROR_BODY,
            redirects: Redirects::Refuse,
            client_name: "ssegate".to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            capabilities: json!({"roots": {}, "sampling": {}, "elicitation": {}}),
            reuse_connections: true,
            proxy: None,
            handler: Arc::new(DefaultHandler),
            #[cfg(feature = "auth")]
            auth: None,
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

    /// The resumable stream's settings, to read.
    pub fn stream_ref(&self) -> &resume::StreamConfig {
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

    /// `Authorization: Bearer <token>` on every request (marked sensitive: it never shows in
    /// logs). A token that is not a valid header value (a control character, a line break) is
    /// [`ClientError::Setup`], and the settings are left as they were.
    pub fn bearer_token(&mut self, token: &str) -> Result<&mut Self, ClientError> {
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            ClientError::Setup(
                "the bearer token is not a valid header value (control characters or line \
                 breaks)"
                    .to_owned(),
            )
        })?;
        value.set_sensitive(true);
        self.headers.insert(header::AUTHORIZATION, value);
        Ok(self)
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

    /// Which protocol versions to speak, to read ([`ClientConfig::protocol`] sets it).
    pub fn protocol_ref(&self) -> &Protocol {
        &self.protocol
    }

    /// Which HTTP transport to speak (default [`TransportStrategy::HttpFirst`]).
    pub fn transport(&mut self, transport: TransportStrategy) -> &mut Self {
        self.transport = transport;
        self
    }

    /// Which HTTP transport to speak, to read ([`ClientConfig::transport`] sets it).
    pub fn transport_ref(&self) -> TransportStrategy {
        self.transport
    }

    /// On the 2024-11-05 HTTP+SSE transport, the most bytes the event stream may bring before its
    /// `endpoint` event is complete (default 16 KiB); past it, [`ProtocolError::NoEndpoint`].
    pub fn max_endpoint_event(&mut self, bytes: usize) -> &mut Self {
        self.max_endpoint_event = bytes;
        self
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

    /// The `clientInfo.name` sent in `initialize` (and, on 2026-07-28, in every request's
    /// `_meta`); default `ssegate`.
    pub fn client_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.client_name = name.into();
        self
    }

    /// The `clientInfo.version` sent beside [`ClientConfig::client_name`]; default this crate's
    /// version.
    pub fn client_version(&mut self, version: impl Into<String>) -> &mut Self {
        self.client_version = version.into();
        self
    }

    /// The client capabilities declared in `initialize` and, on 2026-07-28, in every request's
    /// `_meta` (default `{"roots": {}, "sampling": {}, "elicitation": {}}`: the [`Handler`]
    /// answers those requests). A bridge declares its host's.
    pub fn capabilities(&mut self, capabilities: Value) -> &mut Self {
        self.capabilities = capabilities;
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

    /// Sign in when the server asks for a token (`401` with a challenge): see
    /// [`auth`](super::auth). Without it (the default), a `401` is [`ClientError::Status`].
    #[cfg(feature = "auth")]
    pub fn auth(&mut self, auth: super::auth::AuthConfig) -> &mut Self {
        self.auth = Some(auth);
        self
    }

    /// The application's handler for server requests and notifications.
    pub fn handler(&mut self, handler: Arc<dyn Handler>) -> &mut Self {
        self.handler = handler;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_token_that_is_no_header_value_is_a_setup_error() {
        let mut config = ClientConfig::default();
        config.bearer_token("good").unwrap();
        let sent = config.headers[header::AUTHORIZATION].clone();
        assert_eq!(sent, "Bearer good");
        assert!(sent.is_sensitive());
        for bad in ["line\nbreak", "nul\0", "cr\r"] {
            let err = config.bearer_token(bad).map(|_| ()).unwrap_err();
            assert!(matches!(err, ClientError::Setup(_)), "{err}");
            assert!(
                !err.to_string().contains(bad),
                "the token is not echoed: {err}"
            );
        }
        // The good token is still the one sent.
        assert_eq!(config.headers[header::AUTHORIZATION], "Bearer good");
    }
}
