//! A guarded MCP Streamable HTTP client on hyper 1.x (HTTP/1.1) and tokio.
//!
//! [`Client::connect`] opens a session (`initialize`, then `notifications/initialized`, following
//! `Mcp-Session-Id`); [`Client::call`] POSTs one request with
//! `Accept: application/json, text/event-stream` and takes either answer. An event-stream answer is
//! fed chunk by chunk to an [`sse::Decoder`] and every event to a
//! [`Guard`]: when the connection is cut, the client resumes with `GET` + `Last-Event-ID` after the
//! `retry:` delay and keeps feeding the guard, which decides whether the replay continues the stream
//! that was cut. When the guard refuses with an error that asks for a new session, and the caller
//! marked the request retryable, the client opens a new session and re-issues the request (a bounded
//! number of times). The response comes back as a [`Message`]: one complete JSON value, still
//! pointing into the received chunks.
//!
//! Each request uses its own TCP connection, so a connection's end is exactly one response's end.
//! Every step is traced with `tracing` (spans `mcp_call` and `mcp_conn`).
//!
//! ```no_run
//! # async fn run() -> Result<(), ssegate::client::ClientError> {
//! use ssegate::client::{Client, ClientConfig};
//! use serde_json::json;
//!
//! let mut client = Client::connect("http://127.0.0.1:8080/mcp", ClientConfig::default()).await?;
//! let response = client.call_tool("big_result", json!({}), true).await?;
//! println!("{} bytes after {} resumes", response.message.len(), response.outcome.resumes);
//! client.close().await?;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tracing::{Instrument, debug, debug_span, info_span, warn};

use crate::gate::{Verdict, verdict_of};
use crate::guard::{self, ConnectionEnd, Decision, Guard, ReconnectResponse, Torn, TornBoundary};
use crate::message::{Message, RpcId, RpcKind};
use crate::sse::{self, Data};

/// The session header.
const SESSION_HEADER: &str = "mcp-session-id";
/// The protocol version asked for in `initialize`.
const PROTOCOL_VERSION: &str = "2025-06-18";

/// The client's settings. Setters take `&mut self` and chain.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    guard: guard::Config,
    decoder: sse::Config,
    max_attempts: u32,
    max_busy_retries: u32,
    connect_timeout: Duration,
    read_timeout: Duration,
    max_json_body: usize,
    client_name: String,
}

impl Default for ClientConfig {
    /// The guard's defaults (replay timeout 10 s), the decoder's default limits, 3 attempts per
    /// retryable request, 5 `Busy` retries per resume, a 10 s connect timeout, a 30 s read timeout
    /// and a 64 MiB cap on a JSON response body.
    fn default() -> Self {
        ClientConfig {
            guard: guard::Config::default(),
            decoder: sse::Config::default(),
            max_attempts: 3,
            max_busy_retries: 5,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            max_json_body: 64 << 20,
            client_name: "ssegate".to_owned(),
        }
    }
}

impl ClientConfig {
    /// The guard settings (policy, dedup window, replay timeout, default retry).
    pub fn guard(&mut self, config: guard::Config) -> &mut Self {
        self.guard = config;
        self
    }

    /// Shortcut for the guard's replay timeout: how long a resumed connection may bring no event.
    pub fn replay_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.guard.replay_timeout(timeout);
        self
    }

    /// The SSE decoder limits.
    pub fn decoder(&mut self, config: sse::Config) -> &mut Self {
        self.decoder = config;
        self
    }

    /// How many times a retryable request is issued in all, each after the first on a new session
    /// (default 3, at least 1).
    pub fn max_attempts(&mut self, n: u32) -> &mut Self {
        self.max_attempts = n.max(1);
        self
    }

    /// How many `429`/`503` answers one resume waits out before giving up (default 5).
    pub fn max_busy_retries(&mut self, n: u32) -> &mut Self {
        self.max_busy_retries = n;
        self
    }

    /// Limit on opening a TCP connection (default 10 s).
    pub fn connect_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.connect_timeout = timeout;
        self
    }

    /// Limit on waiting for response headers or the next body chunk outside a resume (default 30 s).
    pub fn read_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.read_timeout = timeout;
        self
    }

    /// Largest `application/json` response body accepted (default 64 MiB).
    pub fn max_json_body(&mut self, bytes: usize) -> &mut Self {
        self.max_json_body = bytes;
        self
    }

    /// The `clientInfo.name` sent in `initialize` (default `ssegate`).
    pub fn client_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.client_name = name.into();
        self
    }
}

/// What it took to get one response.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Attempts made (1 + renegotiations).
    pub attempts: u32,
    /// Resumes (`GET` + `Last-Event-ID`) the guard allowed.
    pub resumes: u32,
    /// New sessions opened to re-issue the request.
    pub renegotiations: u32,
    /// `429`/`503` answers to a resume that were waited out.
    pub busy_retries: u32,
    /// Events the guard skipped (exact replays, duplicate responses, keep-alives).
    pub skipped: u32,
    /// Other complete messages delivered on the stream before the response (progress notifications...).
    pub other_messages: u32,
    /// Every refusal of the guard, as its `Display` text, in order.
    pub refusals: Vec<String>,
}

/// A response the client received.
#[derive(Debug)]
pub struct Response {
    /// The JSON-RPC response: exactly one complete JSON value, zero-copy until parsed.
    pub message: Message,
    /// The request id it answers.
    pub request_id: RpcId,
    /// How it was obtained.
    pub outcome: Outcome,
}

/// Why a client operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// The endpoint is not an `http://host:port/path` URL.
    InvalidUrl(String),
    /// Connecting failed.
    Connect {
        /// The address.
        addr: String,
        /// The error.
        source: io::Error,
    },
    /// An HTTP exchange failed before a response head arrived (or while reading a JSON body).
    Http {
        /// What the client was doing.
        during: &'static str,
        /// hyper's error.
        source: hyper::Error,
    },
    /// The server answered an unexpected status.
    Status {
        /// What the client was doing.
        during: &'static str,
        /// The status code.
        status: u16,
        /// The start of the body, lossy UTF-8.
        body: String,
    },
    /// The server's answer breaks the protocol (content type, body, missing session header...).
    Protocol(String),
    /// The guard refused the stream, and the request was not retryable or every attempt was used.
    Refused {
        /// The last refusal.
        error: Box<TornBoundary>,
        /// Attempts made.
        attempts: u32,
    },
    /// Nothing arrived in time.
    Timeout {
        /// What the client was waiting for.
        during: &'static str,
        /// How long it waited.
        after: Duration,
    },
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::InvalidUrl(u) => write!(f, "not an http://host:port/path URL: {u:?}"),
            ClientError::Connect { addr, source } => write!(f, "connecting to {addr}: {source}"),
            ClientError::Http { during, source } => {
                write!(f, "HTTP error during {during}: {source}")
            }
            ClientError::Status {
                during,
                status,
                body,
            } => write!(f, "{during} answered {status}: {body}"),
            ClientError::Protocol(what) => write!(f, "protocol error: {what}"),
            ClientError::Refused { error, attempts } => {
                write!(f, "refused after {attempts} attempt(s): {error}")
            }
            ClientError::Timeout { during, after } => {
                write!(
                    f,
                    "timed out after {} ms during {during}",
                    after.as_millis()
                )
            }
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Connect { source, .. } => Some(source),
            ClientError::Http { source, .. } => Some(source),
            ClientError::Refused { error, .. } => Some(&**error),
            _ => None,
        }
    }
}

impl ClientError {
    /// The guard's refusal, if that is what ended the call.
    pub fn refusal(&self) -> Option<&TornBoundary> {
        match self {
            ClientError::Refused { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Where the MCP endpoint is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// `host:port`, for connecting and the `Host` header.
    pub(crate) authority: String,
    /// The path, e.g. `/mcp`.
    pub(crate) path: String,
}

impl Endpoint {
    pub(crate) fn parse(url: &str) -> Result<Endpoint, ClientError> {
        let bad = || ClientError::InvalidUrl(url.to_owned());
        let rest = url.strip_prefix("http://").ok_or_else(bad)?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || !authority.contains(':') {
            return Err(bad());
        }
        Ok(Endpoint {
            authority: authority.to_owned(),
            path: path.to_owned(),
        })
    }

    pub(crate) fn from_addr(addr: SocketAddr) -> Endpoint {
        Endpoint {
            authority: addr.to_string(),
            path: "/mcp".to_owned(),
        }
    }
}

/// One request on a fresh connection; returns the response head with its streaming body.
pub(crate) async fn exchange(
    endpoint: &Endpoint,
    method: Method,
    headers: &[(&str, &str)],
    body: Bytes,
    connect_timeout: Duration,
    read_timeout: Duration,
    during: &'static str,
) -> Result<http::Response<Incoming>, ClientError> {
    let connect = TcpStream::connect(endpoint.authority.as_str());
    let stream = match tokio::time::timeout(connect_timeout, connect).await {
        Ok(Ok(s)) => s,
        Ok(Err(source)) => {
            return Err(ClientError::Connect {
                addr: endpoint.authority.clone(),
                source,
            });
        }
        Err(_) => {
            return Err(ClientError::Timeout {
                during: "connect",
                after: connect_timeout,
            });
        }
    };
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr().ok();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|source| ClientError::Http { during, source })?;
    let span = debug_span!("mcp_conn", %method, during, local = ?local);
    tokio::spawn(
        async move {
            if let Err(e) = conn.await {
                debug!(error = %e, "connection ended with an error");
            }
        }
        .instrument(span),
    );
    let mut req = Request::builder()
        .method(method)
        .uri(endpoint.path.as_str())
        .header(header::HOST, endpoint.authority.as_str());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if !body.is_empty() {
        req = req.header(header::CONTENT_TYPE, "application/json");
    }
    let req = req
        .body(Full::new(body))
        .map_err(|e| ClientError::Protocol(format!("building the request: {e}")))?;
    match tokio::time::timeout(read_timeout, sender.send_request(req)).await {
        Ok(Ok(res)) => Ok(res),
        Ok(Err(source)) => Err(ClientError::Http { during, source }),
        Err(_) => Err(ClientError::Timeout {
            during,
            after: read_timeout,
        }),
    }
}

/// Reads a whole body, up to `limit` bytes.
pub(crate) async fn read_body(
    body: Incoming,
    limit: usize,
    during: &'static str,
) -> Result<Bytes, ClientError> {
    let mut body = body;
    let mut out = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|source| ClientError::Http { during, source })?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > limit {
                return Err(ClientError::Protocol(format!(
                    "{during}: body larger than {limit} bytes"
                )));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out.freeze())
}

fn header_str(res: &http::Response<Incoming>, name: impl header::AsHeaderName) -> Option<String> {
    res.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn mime_is(content_type: Option<&str>, mime: &str) -> bool {
    content_type
        .and_then(|ct| ct.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case(mime))
}

async fn status_error(res: http::Response<Incoming>, during: &'static str) -> ClientError {
    let status = res.status().as_u16();
    let body = read_body(res.into_body(), 64 << 10, during)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned();
    ClientError::Status {
        during,
        status,
        body: text,
    }
}

/// How one attempt ended without a response.
enum AttemptError {
    /// The guard refused: maybe renegotiate.
    Refused(TornBoundary),
    /// Anything else: give up.
    Client(ClientError),
}

impl From<TornBoundary> for AttemptError {
    fn from(e: TornBoundary) -> Self {
        AttemptError::Refused(e)
    }
}

impl From<ClientError> for AttemptError {
    fn from(e: ClientError) -> Self {
        AttemptError::Client(e)
    }
}

/// An MCP Streamable HTTP session with a guarded response path. See the [module docs](self).
#[derive(Debug)]
pub struct Client {
    endpoint: Endpoint,
    config: ClientConfig,
    session: Option<String>,
    next_id: i64,
    sessions_opened: u32,
}

impl Client {
    /// Opens a session at `url` (`http://host:port/path`): `initialize`, then
    /// `notifications/initialized`.
    pub async fn connect(url: &str, config: ClientConfig) -> Result<Client, ClientError> {
        let endpoint = Endpoint::parse(url)?;
        Client::open(endpoint, config).await
    }

    /// Like [`Client::connect`], for `http://<addr>/mcp`.
    pub async fn connect_addr(
        addr: SocketAddr,
        config: ClientConfig,
    ) -> Result<Client, ClientError> {
        Client::open(Endpoint::from_addr(addr), config).await
    }

    async fn open(endpoint: Endpoint, config: ClientConfig) -> Result<Client, ClientError> {
        let mut client = Client {
            endpoint,
            config,
            session: None,
            next_id: 1,
            sessions_opened: 0,
        };
        client.initialize().await?;
        Ok(client)
    }

    /// The current `Mcp-Session-Id`.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// Sessions opened so far (1 + renegotiations).
    pub fn sessions_opened(&self) -> u32 {
        self.sessions_opened
    }

    async fn send(
        &self,
        method: Method,
        extra: &[(&str, &str)],
        body: Bytes,
        during: &'static str,
    ) -> Result<http::Response<Incoming>, ClientError> {
        let mut headers: Vec<(&str, &str)> = Vec::with_capacity(extra.len() + 2);
        if let Some(s) = &self.session {
            headers.push((SESSION_HEADER, s.as_str()));
        }
        headers.extend_from_slice(extra);
        exchange(
            &self.endpoint,
            method,
            &headers,
            body,
            self.config.connect_timeout,
            self.config.read_timeout,
            during,
        )
        .await
    }

    /// Opens a new session: `initialize` (capturing `Mcp-Session-Id`), then
    /// `notifications/initialized`. Called by [`Client::connect`] and on renegotiation.
    pub async fn initialize(&mut self) -> Result<(), ClientError> {
        self.session = None;
        let req = json!({
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": self.config.client_name, "version": env!("CARGO_PKG_VERSION")},
            },
        });
        let body = Bytes::from(serde_json::to_vec(&req).expect("a JSON value serializes"));
        let accept = [("accept", "application/json, text/event-stream")];
        let res = self.send(Method::POST, &accept, body, "initialize").await?;
        if res.status() != StatusCode::OK {
            return Err(status_error(res, "initialize").await);
        }
        let session = header_str(&res, SESSION_HEADER).ok_or_else(|| {
            ClientError::Protocol("initialize answered without Mcp-Session-Id".to_owned())
        })?;
        read_body(res.into_body(), self.config.max_json_body, "initialize").await?;
        self.session = Some(session);
        self.sessions_opened += 1;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let body = Bytes::from(serde_json::to_vec(&note).expect("a JSON value serializes"));
        let res = self
            .send(Method::POST, &accept, body, "notifications/initialized")
            .await?;
        if !res.status().is_success() {
            return Err(status_error(res, "notifications/initialized").await);
        }
        debug!(session = self.session.as_deref(), "session open");
        Ok(())
    }

    /// Calls `tools/call` with `{"name": name, "arguments": arguments}`.
    pub async fn call_tool(
        &mut self,
        name: &str,
        arguments: Value,
        retryable: bool,
    ) -> Result<Response, ClientError> {
        self.call(
            "tools/call",
            json!({"name": name, "arguments": arguments}),
            retryable,
        )
        .await
    }

    /// Sends one JSON-RPC request and returns its response.
    ///
    /// `retryable`: the request may be issued again on a new session when the guard refuses the
    /// stream with an error that requires it ([`TornBoundary::must_renegotiate`]); the re-issued
    /// request keeps its JSON-RPC id.
    pub async fn call(
        &mut self,
        method: &str,
        params: Value,
        retryable: bool,
    ) -> Result<Response, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let span = info_span!("mcp_call", method, id, retryable);
        self.call_inner(method, params, retryable, id)
            .instrument(span)
            .await
    }

    async fn call_inner(
        &mut self,
        method: &str,
        params: Value,
        retryable: bool,
        id: i64,
    ) -> Result<Response, ClientError> {
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let body = Bytes::from(serde_json::to_vec(&req).expect("a JSON value serializes"));
        let rpc_id = RpcId::Number(id);
        let mut guard = self.config.guard.build();
        guard.expect_response(rpc_id.clone());
        let mut outcome = Outcome::default();
        loop {
            outcome.attempts += 1;
            let attempt = self.attempt(&body, &rpc_id, &mut guard, &mut outcome).await;
            let refusal = match attempt {
                Ok(message) => {
                    debug!(bytes = message.len(), ?outcome, "response delivered");
                    return Ok(Response {
                        message,
                        request_id: rpc_id,
                        outcome,
                    });
                }
                Err(AttemptError::Client(e)) => return Err(e),
                Err(AttemptError::Refused(e)) => e,
            };
            warn!(refusal = %refusal, attempt = outcome.attempts, "the guard refused the stream");
            outcome.refusals.push(refusal.to_string());
            if !(retryable
                && refusal.must_renegotiate()
                && outcome.attempts < self.config.max_attempts)
            {
                return Err(ClientError::Refused {
                    error: Box::new(refusal),
                    attempts: outcome.attempts,
                });
            }
            // The old session's stream is lost; end it politely (it may already be gone) and start over.
            if let Err(e) = self.delete_session().await {
                debug!(error = %e, "could not delete the old session");
            }
            self.initialize().await?;
            outcome.renegotiations += 1;
            guard.reset();
            debug!(
                session = self.session.as_deref(),
                "renegotiated; re-issuing the request"
            );
        }
    }

    async fn attempt(
        &mut self,
        body: &Bytes,
        rpc_id: &RpcId,
        guard: &mut Guard,
        outcome: &mut Outcome,
    ) -> Result<Message, AttemptError> {
        let accept = [("accept", "application/json, text/event-stream")];
        let res = self
            .send(Method::POST, &accept, body.clone(), "request")
            .await?;
        if res.status() == StatusCode::NOT_FOUND && self.session.is_some() {
            // The session expired before the request was taken: the refusal a 404 on resume gets,
            // so a retryable call renegotiates instead of failing.
            return Err(AttemptError::Refused(TornBoundary {
                kind: Torn::SessionExpired,
                cursor: None,
                outstanding: vec![rpc_id.clone()],
            }));
        }
        if res.status() != StatusCode::OK {
            return Err(status_error(res, "request").await.into());
        }
        let content_type = header_str(&res, header::CONTENT_TYPE);
        if mime_is(content_type.as_deref(), "application/json") {
            let bytes = read_body(res.into_body(), self.config.max_json_body, "request").await?;
            let verdict = verdict_of(&bytes);
            if verdict != Verdict::Complete {
                return Err(ClientError::Protocol(format!(
                    "the JSON response body is {verdict:?}, not one complete JSON value"
                ))
                .into());
            }
            let message = Message::new(Data::from(bytes));
            let peek = message.jsonrpc_peek();
            if peek.kind != RpcKind::Response || peek.id.as_ref() != Some(rpc_id) {
                return Err(ClientError::Protocol(format!(
                    "the JSON response body is not the response to request {rpc_id}"
                ))
                .into());
            }
            return Ok(message);
        }
        if !mime_is(content_type.as_deref(), "text/event-stream") {
            return Err(ClientError::Protocol(format!(
                "unexpected content type {:?}",
                content_type.as_deref().unwrap_or("(none)")
            ))
            .into());
        }
        self.stream(res.into_body(), rpc_id, guard, outcome).await
    }

    /// Feeds one SSE response stream and its resumptions to the guard until the response arrives.
    async fn stream(
        &self,
        body: Incoming,
        rpc_id: &RpcId,
        guard: &mut Guard,
        outcome: &mut Outcome,
    ) -> Result<Message, AttemptError> {
        let mut decoder = self.config.decoder.build();
        let mut body = body;
        // Set while the guard waits for the first event of a resumed connection.
        let mut resume_deadline: Option<Instant> = None;
        loop {
            let next = match resume_deadline {
                Some(deadline) => match tokio::time::timeout_at(deadline, body.frame()).await {
                    Ok(next) => next,
                    Err(_) => {
                        guard.on_replay_timeout(guard.replay_timeout())?;
                        resume_deadline = None;
                        continue;
                    }
                },
                None => match tokio::time::timeout(self.config.read_timeout, body.frame()).await {
                    Ok(next) => next,
                    Err(_) => {
                        return Err(ClientError::Timeout {
                            during: "reading the event stream",
                            after: self.config.read_timeout,
                        }
                        .into());
                    }
                },
            };
            match next {
                Some(Ok(frame)) => {
                    let Ok(chunk) = frame.into_data() else {
                        continue;
                    };
                    decoder.feed(chunk);
                    while let Some(event) = decoder.next_event() {
                        let event = event.map_err(|e| guard.on_decode_error(&e))?;
                        match guard.on_event(event)? {
                            Decision::Deliver(d) => {
                                if d.rpc.kind == RpcKind::Response
                                    && d.rpc.id.as_ref() == Some(rpc_id)
                                {
                                    return Ok(d.message);
                                }
                                outcome.other_messages += 1;
                            }
                            Decision::Skip(why) => {
                                debug!(?why, "event skipped");
                                outcome.skipped += 1;
                            }
                            Decision::Cursor(id) => {
                                debug!(id = %String::from_utf8_lossy(&id), "cursor moved");
                            }
                        }
                    }
                    if !guard.is_resuming() {
                        resume_deadline = None;
                    }
                }
                end => {
                    if let Some(Err(e)) = &end {
                        debug!(error = %e, "the event stream was cut");
                    } else {
                        debug!("the event stream ended");
                    }
                    let resume = guard.on_disconnect(ConnectionEnd::from_decoder(&mut decoder))?;
                    if !resume.needed {
                        return Err(ClientError::Protocol(
                            "the stream ended with no response outstanding".to_owned(),
                        )
                        .into());
                    }
                    outcome.resumes += 1;
                    debug!(
                        last_event_id = ?resume.last_event_id.as_deref().map(String::from_utf8_lossy),
                        delay_ms = resume.delay.as_millis() as u64,
                        discarded = ?resume.discarded,
                        "resuming"
                    );
                    tokio::time::sleep(resume.delay).await;
                    body = match self.reconnect(guard, resume.last_event_id, outcome).await? {
                        Some(body) => body,
                        // The resume request itself failed: a connection that brought nothing.
                        None => {
                            let end = ConnectionEnd::from_decoder(&mut decoder);
                            return Err(match guard.on_disconnect(end) {
                                Err(e) => e.into(),
                                Ok(_) => {
                                    ClientError::Protocol("the resume request failed".to_owned())
                                        .into()
                                }
                            });
                        }
                    };
                    resume_deadline = Some(Instant::now() + guard.replay_timeout());
                }
            }
        }
    }

    /// `GET` + `Last-Event-ID`, waiting out `Busy` answers. `Ok(None)`: the request failed at the
    /// transport level.
    async fn reconnect(
        &self,
        guard: &mut Guard,
        last_event_id: Option<Bytes>,
        outcome: &mut Outcome,
    ) -> Result<Option<Incoming>, AttemptError> {
        let cursor = last_event_id
            .as_deref()
            .map(|id| String::from_utf8_lossy(id).into_owned())
            .unwrap_or_default();
        let mut busy = 0;
        loop {
            let headers = [
                ("accept", "text/event-stream"),
                ("last-event-id", cursor.as_str()),
            ];
            let res = match self
                .send(Method::GET, &headers, Bytes::new(), "resume")
                .await
            {
                Ok(res) => res,
                Err(e) => {
                    warn!(error = %e, "the resume request failed");
                    return Ok(None);
                }
            };
            let response = ReconnectResponse {
                status: res.status().as_u16(),
                retry_after: header_str(&res, header::RETRY_AFTER)
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs),
                content_type: header_str(&res, header::CONTENT_TYPE),
            };
            debug!(status = response.status, "resume answered");
            match guard.on_reconnect(&response) {
                Ok(()) => return Ok(Some(res.into_body())),
                Err(e)
                    if matches!(e.kind, Torn::Busy { .. })
                        && busy < self.config.max_busy_retries =>
                {
                    busy += 1;
                    outcome.busy_retries += 1;
                    let wait = e.retry_after().unwrap_or_else(|| guard.retry());
                    debug!(
                        wait_ms = wait.as_millis() as u64,
                        "server busy; retrying the resume"
                    );
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    async fn delete_session(&mut self) -> Result<(), ClientError> {
        if self.session.is_none() {
            return Ok(());
        }
        let res = self
            .send(Method::DELETE, &[], Bytes::new(), "delete session")
            .await;
        self.session = None;
        let res = res?;
        let status = res.status();
        // A session the server already forgot is as ended as it gets.
        if status.is_success() || status == StatusCode::NOT_FOUND {
            Ok(())
        } else {
            Err(status_error(res, "delete session").await)
        }
    }

    /// Ends the session with `DELETE`.
    pub async fn close(mut self) -> Result<(), ClientError> {
        self.delete_session().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_parsing() {
        let e = Endpoint::parse("http://127.0.0.1:8080/mcp").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.path.as_str()),
            ("127.0.0.1:8080", "/mcp")
        );
        let e = Endpoint::parse("http://localhost:1").unwrap();
        assert_eq!(e.path, "/");
        assert!(Endpoint::parse("https://x:1/").is_err());
        assert!(Endpoint::parse("http://nohost/").is_err());
    }

    #[test]
    fn mime_matching() {
        assert!(mime_is(
            Some("text/event-stream; charset=utf-8"),
            "text/event-stream"
        ));
        assert!(!mime_is(Some("application/json"), "text/event-stream"));
        assert!(!mime_is(None, "application/json"));
    }

    #[test]
    fn errors_display() {
        let e = ClientError::Timeout {
            during: "resume",
            after: Duration::from_millis(1500),
        };
        assert_eq!(e.to_string(), "timed out after 1500 ms during resume");
    }
}
