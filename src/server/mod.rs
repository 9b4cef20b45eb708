//! A minimal MCP Streamable HTTP server on hyper 1.x (HTTP/1.1) and tokio, for loopback tests and the
//! demo: real sockets, a real [`ReplayBuffer`] per session, and a switchable resume-miss behaviour
//! ([`ServerMode`]) that reproduces what servers in the field do.
//!
//! One endpoint, `/mcp`:
//!
//! | request | answer |
//! | --- | --- |
//! | `POST initialize` | `200` JSON result, `Mcp-Session-Id` header (a new session) |
//! | `POST` notification or response (`notifications/initialized`, ...) | `202`, no body |
//! | `POST tools/list` | `200` JSON (or a one-event SSE stream, [`ServerConfig::tools_list_sse`]) |
//! | `POST tools/call` | `200 text/event-stream`: priming event (id, empty data, `retry`), progress notifications, the result |
//! | `POST ping` / unknown method | `200` JSON result `{}` / JSON-RPC error `-32601` |
//! | `GET` + `Last-Event-ID` | the resume, as the [`ServerMode`] says |
//! | `GET` without `Last-Event-ID` | `405` (no standalone server-to-client stream) |
//! | `DELETE` | `204`, the session ends |
//! | no `Mcp-Session-Id` (except `initialize`) / an unknown one | `400` / `404` |
//!
//! Tools: `big_result` (`size`, default [`ServerConfig::result_size`]; `seed`): progress notifications,
//! then one text result of exactly [`expected_result`] bytes; `progress` (`count`): `count` progress
//! notifications, then [`expected_progress_result`]. Progress notifications carry the request's
//! `_meta.progressToken`, or the request id when it gave none.
//!
//! A `tools/call` response is produced whole when the request arrives: every event is appended to the
//! session's [`ReplayBuffer`] (so it can be replayed however the connection ends), then written from its
//! stored frame — the big result as one `Bytes` body frame, which hyper writes with few large writes.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use ssegate::server::{ServerConfig, ServerMode};
//!
//! let mut config = ServerConfig::default();
//! config.mode(ServerMode::Strict).result_size(64 << 10).retry_ms(10);
//! let server = config.start("127.0.0.1:0".parse().unwrap()).await?;
//! println!("MCP endpoint: {}", server.url());
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod tools;

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{Instrument, debug, debug_span, field, info_span, warn};

use crate::replay::{self, Miss, MissReason, ReplayBuffer, StreamId};
use tools::{Call, Tool};
pub use tools::{
    DEFAULT_RESULT_SIZE, DEFAULT_SEED, expected_progress_result, expected_result,
    progress_notification, prose,
};

/// The endpoint path.
pub const MCP_PATH: &str = "/mcp";
/// The session header.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The resume header.
pub const LAST_EVENT_ID: &str = "last-event-id";
/// The protocol version the server answers `initialize` with when the client asked for none.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// Largest POST body accepted.
const MAX_REQUEST_BYTES: usize = 1 << 20;
/// How long a graceful shutdown waits for open connections before aborting them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// What the server does with `GET` + `Last-Event-ID`: the correct mitigation and the behaviours seen in
/// the field (see DESIGN.md, "The problem, precisely").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServerMode {
    /// Replays every event after the id; on a miss answers `409 Conflict` with `Retry-After` and a
    /// JSON-RPC error body naming the reason. The correct behaviour.
    Strict,
    /// Ignores `Last-Event-ID` and re-runs the call that opened the id's stream: a new stream, new ids,
    /// the whole response again (priming, progress, result). The failure of a server that lost its
    /// buffer and "helpfully" starts over. An id whose stream it never opened: `409`.
    Restart,
    /// Like [`Strict`](Self::Strict), but the newest event of each stream is pinned outside the byte
    /// budget ([`replay::Config::pin_last`] >= 1), so the event a cut interrupted — typically the big
    /// result, which no budget holds — is re-sent whole under its original id. Correct SSE, and exactly
    /// what corrupts a client that appends the replay to its partial buffer. Misses the pin cannot
    /// cover (events before the newest one were evicted): `409`.
    Boundary,
    /// Replays when it can; on a miss answers `200 text/event-stream` with an empty body and closes
    /// (seen with rmcp and the Python SDK).
    Empty,
    /// Re-sends the `Last-Event-ID` event itself, then the events after it (rmcp): the client sees a
    /// duplicate. Pins the two newest events of each stream; a miss is `409`.
    Resend,
}

impl ServerMode {
    /// Every mode, in table order.
    pub const ALL: [ServerMode; 5] = [
        ServerMode::Strict,
        ServerMode::Restart,
        ServerMode::Boundary,
        ServerMode::Empty,
        ServerMode::Resend,
    ];

    /// The lower-case name (`strict`, `restart`, `boundary`, `empty`, `resend`).
    pub fn as_str(self) -> &'static str {
        match self {
            ServerMode::Strict => "strict",
            ServerMode::Restart => "restart",
            ServerMode::Boundary => "boundary",
            ServerMode::Empty => "empty",
            ServerMode::Resend => "resend",
        }
    }

    /// How many newest events per stream this mode pins outside the replay budget.
    fn pins(self) -> usize {
        match self {
            ServerMode::Boundary => 1,
            ServerMode::Resend => 2,
            ServerMode::Strict | ServerMode::Restart | ServerMode::Empty => 0,
        }
    }
}

impl fmt::Display for ServerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode name that is not one of [`ServerMode::ALL`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownMode(pub String);

impl fmt::Display for UnknownMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown server mode {:?} (expected strict, restart, boundary, empty or resend)",
            self.0
        )
    }
}

impl std::error::Error for UnknownMode {}

impl FromStr for ServerMode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ServerMode::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownMode(s.to_owned()))
    }
}

/// The server's settings. Setters take `&mut self` and chain; [`ServerConfig::start`] binds and serves.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    mode: ServerMode,
    result_size: usize,
    seed: u64,
    replay: replay::Config,
    retry_ms: u64,
    progress_count: u64,
    tools_list_sse: bool,
}

impl Default for ServerConfig {
    /// `Strict`, a 4 MiB result, 3 progress notifications, `retry: 250`, and a replay buffer of 64 slots,
    /// a 1 MiB budget and a 1 MiB per-event cap (so the big result evicts the older events and is itself
    /// never kept, as in the field report), `Retry-After` 1 s.
    fn default() -> Self {
        ServerConfig {
            mode: ServerMode::Strict,
            result_size: DEFAULT_RESULT_SIZE,
            seed: DEFAULT_SEED,
            replay: replay::Config::default(),
            retry_ms: 250,
            progress_count: 3,
            tools_list_sse: false,
        }
    }
}

impl ServerConfig {
    /// The resume behaviour.
    pub fn mode(&mut self, mode: ServerMode) -> &mut Self {
        self.mode = mode;
        self
    }

    /// The default `size` of `big_result`'s text, in bytes.
    pub fn result_size(&mut self, bytes: usize) -> &mut Self {
        self.result_size = bytes;
        self
    }

    /// The default `seed` of `big_result`'s prose.
    pub fn seed(&mut self, seed: u64) -> &mut Self {
        self.seed = seed;
        self
    }

    /// Each session's replay buffer limits. The mode may raise [`replay::Config::pin_last`]
    /// (`Boundary` to 1, `Resend` to 2), never lower it.
    pub fn replay(&mut self, config: replay::Config) -> &mut Self {
        self.replay = config;
        self
    }

    /// The `retry:` field of the priming event, in milliseconds.
    pub fn retry_ms(&mut self, ms: u64) -> &mut Self {
        self.retry_ms = ms;
        self
    }

    /// How many progress notifications `big_result` sends (and `progress` by default).
    pub fn progress_count(&mut self, n: u64) -> &mut Self {
        self.progress_count = n;
        self
    }

    /// Answer `tools/list` as a one-event SSE stream instead of JSON.
    pub fn tools_list_sse(&mut self, yes: bool) -> &mut Self {
        self.tools_list_sse = yes;
        self
    }

    /// The configured mode.
    pub fn get_mode(&self) -> ServerMode {
        self.mode
    }

    /// The configured default result size.
    pub fn get_result_size(&self) -> usize {
        self.result_size
    }

    /// The configured default seed.
    pub fn get_seed(&self) -> u64 {
        self.seed
    }

    /// The replay limits each session actually uses (with the mode's pins applied).
    pub fn effective_replay(&self) -> replay::Config {
        let mut c = self.replay.clone();
        let pins = c.pin_last.max(self.mode.pins());
        c.pin_last(pins);
        c
    }

    /// Binds `addr` (use `127.0.0.1:0` for an ephemeral loopback port) and serves on the current tokio
    /// runtime until [`RunningServer::shutdown`] or drop.
    pub async fn start(&self, addr: SocketAddr) -> io::Result<RunningServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            config: self.clone(),
            replay: self.effective_replay(),
            sessions: Mutex::new(HashMap::new()),
            stats: Stats::default(),
            next_session: AtomicU64::new(1),
        });
        let (stop, stopped) = watch::channel(false);
        let span = info_span!("mcp_server", %addr, mode = %self.mode);
        let task =
            tokio::spawn(accept_loop(listener, Arc::clone(&shared), stopped).instrument(span));
        Ok(RunningServer {
            addr,
            shared,
            stop,
            task,
        })
    }
}

/// A snapshot of the server's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// TCP connections accepted.
    pub connections: u64,
    /// HTTP requests handled.
    pub requests: u64,
    /// Sessions opened by `initialize`.
    pub sessions_opened: u64,
    /// Sessions ended by `DELETE`.
    pub sessions_deleted: u64,
    /// SSE streams opened (`tools/call` responses and restarts).
    pub streams: u64,
    /// `GET` + `Last-Event-ID` requests.
    pub resumes: u64,
    /// Resumes answered from the replay buffer (including `Resend`'s).
    pub replays: u64,
    /// Resumes answered `409` (a replay miss).
    pub misses: u64,
    /// Resumes answered by re-running the call (`Restart`).
    pub restarts: u64,
    /// Resumes answered with an empty `200` (`Empty` on a miss).
    pub empty_replies: u64,
}

#[derive(Debug, Default)]
struct Stats {
    connections: AtomicU64,
    requests: AtomicU64,
    sessions_opened: AtomicU64,
    sessions_deleted: AtomicU64,
    streams: AtomicU64,
    resumes: AtomicU64,
    replays: AtomicU64,
    misses: AtomicU64,
    restarts: AtomicU64,
    empty_replies: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Stats {
    fn snapshot(&self) -> ServerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ServerStats {
            connections: get(&self.connections),
            requests: get(&self.requests),
            sessions_opened: get(&self.sessions_opened),
            sessions_deleted: get(&self.sessions_deleted),
            streams: get(&self.streams),
            resumes: get(&self.resumes),
            replays: get(&self.replays),
            misses: get(&self.misses),
            restarts: get(&self.restarts),
            empty_replies: get(&self.empty_replies),
        }
    }
}

/// A server accepting connections. Dropping it stops the server too (without waiting).
#[derive(Debug)]
pub struct RunningServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningServer {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.addr, MCP_PATH)
    }

    /// The mode it runs in.
    pub fn mode(&self) -> ServerMode {
        self.shared.config.mode
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &ServerConfig {
        &self.shared.config
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> ServerStats {
        self.shared.stats.snapshot()
    }

    /// Live sessions.
    pub fn session_count(&self) -> usize {
        self.shared.lock().len()
    }

    /// Stops accepting, lets open connections finish their response (up to 2 s), then aborts them.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

#[derive(Debug)]
struct Session {
    replay: ReplayBuffer,
    calls: HashMap<StreamId, Call>,
}

#[derive(Debug)]
struct Shared {
    config: ServerConfig,
    replay: replay::Config,
    sessions: Mutex<HashMap<String, Session>>,
    stats: Stats,
    next_session: AtomicU64,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // A panic while holding the lock leaves the map consistent (every update is one insert/remove).
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    bump(&shared.stats.connections);
                    let span = debug_span!("mcp_conn", %peer);
                    let task = serve_connection(stream, Arc::clone(&shared), stopped.clone());
                    conns.spawn(task.instrument(span));
                }
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = stopped.changed() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while conns.join_next().await.is_some() {}
    });
    if drained.await.is_err() {
        conns.abort_all();
    }
    debug!("server stopped");
}

async fn serve_connection(
    stream: TcpStream,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let service = service_fn(move |req| {
        let shared = Arc::clone(&shared);
        let span = debug_span!("mcp_request", method = %req.method(), rpc = field::Empty, session = field::Empty);
        async move { Ok::<_, Infallible>(handle(&shared, req).await) }.instrument(span)
    });
    let conn =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = stopped.changed() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        // A client or proxy that resets mid-response lands here: expected in fault-injection runs.
        debug!(error = %e, "connection ended with an error");
    }
}

type Body = BoxBody<Bytes, Infallible>;

fn full(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn json(status: StatusCode, v: &Value) -> Response<Body> {
    full(
        status,
        "application/json",
        serde_json::to_vec(v).expect("a JSON value serializes"),
    )
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(Empty::new().boxed());
    *r.status_mut() = status;
    r
}

fn rpc_error(
    status: StatusCode,
    id: &Value,
    code: i64,
    message: &str,
    data: Option<Value>,
) -> Response<Body> {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    json(status, &json!({"jsonrpc": "2.0", "id": id, "error": error}))
}

/// `200 text/event-stream` whose body is exactly `frames`, one body frame each (no copy).
fn sse(frames: Vec<Bytes>) -> Response<Body> {
    let body = StreamBody::new(futures_util::stream::iter(
        frames
            .into_iter()
            .map(|f| Ok::<_, Infallible>(Frame::data(f))),
    ));
    let mut r = Response::new(body.boxed());
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

fn conflict(miss: &Miss, last_event_id: &str) -> Response<Body> {
    let data = json!({
        "reason": miss.reason.as_str(),
        "lastEventId": last_event_id,
        "missing": miss.missing,
        "retryAfterMs": miss.retry_after.as_millis() as u64,
    });
    let mut r = rpc_error(
        StatusCode::CONFLICT,
        &Value::Null,
        -32000,
        &miss.to_string(),
        Some(data),
    );
    // Retry-After is whole seconds; round up so a client never retries early.
    let secs = miss.retry_after.as_millis().div_ceil(1000);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs as u64));
    r
}

async fn handle(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    bump(&shared.stats.requests);
    if req.uri().path() != MCP_PATH {
        return full(StatusCode::NOT_FOUND, "text/plain", "not found\n");
    }
    let session = req
        .headers()
        .get(SESSION_HEADER)
        .map(|v| v.to_str().unwrap_or("").to_owned());
    if let Some(s) = &session {
        tracing::Span::current().record("session", s.as_str());
    }
    match *req.method() {
        Method::POST => post(shared, session, req).await,
        Method::GET => resume(shared, session, &req),
        Method::DELETE => delete(shared, session),
        _ => {
            let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            r
        }
    }
}

/// Why a request's session header is not acceptable.
#[derive(Clone, Copy, Debug)]
enum NoSession {
    Missing,
    Unknown,
}

impl NoSession {
    fn response(self) -> Response<Body> {
        match self {
            NoSession::Missing => rpc_error(
                StatusCode::BAD_REQUEST,
                &Value::Null,
                -32600,
                "missing Mcp-Session-Id",
                None,
            ),
            NoSession::Unknown => rpc_error(
                StatusCode::NOT_FOUND,
                &Value::Null,
                -32001,
                "session not found",
                None,
            ),
        }
    }
}

/// Checks the session header: `400` when it is missing, `404` when the session is unknown.
fn check_session(shared: &Shared, session: Option<String>) -> Result<String, NoSession> {
    let session = session.ok_or(NoSession::Missing)?;
    if !shared.lock().contains_key(&session) {
        return Err(NoSession::Unknown);
    }
    Ok(session)
}

async fn post(shared: &Shared, session: Option<String>, req: Request<Incoming>) -> Response<Body> {
    let body = match Limited::new(req.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return full(
                StatusCode::BAD_REQUEST,
                "text/plain",
                "unreadable or too large body\n",
            );
        }
    };
    let msg: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                &Value::Null,
                -32600,
                "expected one JSON-RPC object",
                None,
            );
        }
        Err(_) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                &Value::Null,
                -32700,
                "parse error",
                None,
            );
        }
    };
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    tracing::Span::current().record("rpc", method);
    let id = msg.get("id").cloned();
    if method == "initialize" {
        return initialize(shared, &msg, id.unwrap_or(Value::Null));
    }
    let session = match check_session(shared, session) {
        Ok(s) => s,
        Err(e) => return e.response(),
    };
    // Notifications (no id) and responses (no method) are accepted and not answered.
    let Some(id) = id.filter(|_| !method.is_empty()) else {
        return empty(StatusCode::ACCEPTED);
    };
    match method {
        "ping" => json(
            StatusCode::OK,
            &json!({"jsonrpc": "2.0", "id": id, "result": {}}),
        ),
        "tools/list" => {
            let response = json!({"jsonrpc": "2.0", "id": id, "result": tools::tool_list()});
            if !shared.config.tools_list_sse {
                return json(StatusCode::OK, &response);
            }
            let data = serde_json::to_vec(&response).expect("a JSON value serializes");
            let mut sessions = shared.lock();
            let Some(s) = sessions.get_mut(&session) else {
                return NoSession::Unknown.response();
            };
            let stream = s.replay.open_stream();
            let frame = s
                .replay
                .append(stream, None, &data)
                .expect("a fresh stream is open")
                .frame;
            s.replay.close_stream(stream);
            bump(&shared.stats.streams);
            sse(vec![frame])
        }
        "tools/call" => tools_call(shared, &session, &msg, id),
        _ => rpc_error(StatusCode::OK, &id, -32601, "method not found", None),
    }
}

fn initialize(shared: &Shared, msg: &Value, id: Value) -> Response<Body> {
    let n = shared.next_session.fetch_add(1, Ordering::Relaxed);
    let session = format!("{:016x}", tools::mix(shared.config.seed ^ n));
    shared.lock().insert(
        session.clone(),
        Session {
            replay: ReplayBuffer::new(shared.replay.clone()),
            calls: HashMap::new(),
        },
    );
    bump(&shared.stats.sessions_opened);
    tracing::Span::current().record("session", session.as_str());
    let version = msg["params"]["protocolVersion"]
        .as_str()
        .unwrap_or(PROTOCOL_VERSION);
    let result = json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "ssegate-loopback", "version": env!("CARGO_PKG_VERSION")},
    });
    let mut r = json(
        StatusCode::OK,
        &json!({"jsonrpc": "2.0", "id": id, "result": result}),
    );
    r.headers_mut().insert(
        SESSION_HEADER,
        HeaderValue::from_str(&session).expect("hex is a valid header"),
    );
    r
}

fn tools_call(shared: &Shared, session: &str, msg: &Value, id: Value) -> Response<Body> {
    let params = &msg["params"];
    let args = &params["arguments"];
    let config = &shared.config;
    let tool = match params["name"].as_str() {
        Some("big_result") => Tool::BigResult {
            size: args["size"]
                .as_u64()
                .map_or(config.result_size, |n| n as usize),
            seed: args["seed"].as_u64().unwrap_or(config.seed),
            progress: config.progress_count,
        },
        Some("progress") => Tool::Progress {
            count: args["count"].as_u64().unwrap_or(config.progress_count),
        },
        _ => {
            return rpc_error(
                StatusCode::OK,
                &id,
                -32602,
                "unknown tool",
                Some(params["name"].clone()),
            );
        }
    };
    let token = params["_meta"]
        .get("progressToken")
        .cloned()
        .unwrap_or_else(|| id.clone());
    let call = Call {
        request_id: id,
        token,
        tool,
    };
    match run_call(shared, session, call) {
        Some(frames) => sse(frames),
        None => NoSession::Unknown.response(),
    }
}

/// Produces a call's whole response into a new stream of the session's replay buffer; returns the
/// frames to write, or `None` if the session is gone.
fn run_call(shared: &Shared, session: &str, call: Call) -> Option<Vec<Bytes>> {
    // Build the payloads (megabytes of prose) before taking the lock.
    let messages = call.messages();
    let mut sessions = shared.lock();
    let s = sessions.get_mut(session)?;
    let stream = s.replay.open_stream();
    let mut frames = Vec::with_capacity(messages.len() + 1);
    let priming = s
        .replay
        .append_with_retry(stream, None, b"", Some(shared.config.retry_ms));
    frames.push(priming.expect("a fresh stream is open").frame);
    for m in &messages {
        let appended = s
            .replay
            .append(stream, None, m)
            .expect("a fresh stream is open");
        if appended.oversized {
            debug!(id = %appended.id, bytes = appended.frame.len(), "event exceeds the replay cap");
        }
        frames.push(appended.frame);
    }
    s.replay.close_stream(stream);
    s.calls.insert(stream, call);
    bump(&shared.stats.streams);
    debug!(%stream, events = frames.len(), "tools/call stream produced");
    Some(frames)
}

fn resume(shared: &Shared, session: Option<String>, req: &Request<Incoming>) -> Response<Body> {
    let session = match check_session(shared, session) {
        Ok(s) => s,
        Err(e) => return e.response(),
    };
    let Some(last) = req.headers().get(LAST_EVENT_ID) else {
        let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
        return r;
    };
    let Ok(last) = last.to_str() else {
        return full(
            StatusCode::BAD_REQUEST,
            "text/plain",
            "Last-Event-ID is not visible ASCII\n",
        );
    };
    let stats = &shared.stats;
    bump(&stats.resumes);
    let mode = shared.config.mode;
    let _span = debug_span!("resume", %mode, last_event_id = last).entered();
    if mode == ServerMode::Restart {
        let call = {
            let sessions = shared.lock();
            let s = sessions.get(&session);
            replay::parse_id(last).and_then(|(stream, _)| s?.calls.get(&stream).cloned())
        };
        let Some(call) = call else {
            let miss = Miss {
                reason: MissReason::Unknown,
                missing: None,
                retry_after: shared.replay.retry_after,
            };
            bump(&stats.misses);
            return conflict(&miss, last);
        };
        return match run_call(shared, &session, call) {
            Some(frames) => {
                bump(&stats.restarts);
                debug!("restarted the call under new ids");
                sse(frames)
            }
            None => NoSession::Unknown.response(),
        };
    }
    let replayed = {
        let sessions = shared.lock();
        let Some(s) = sessions.get(&session) else {
            return NoSession::Unknown.response();
        };
        let after = s.replay.replay_after(last);
        if mode == ServerMode::Resend {
            after.and_then(|mut r| {
                let own = s.replay.frame(last).ok_or_else(|| Miss {
                    reason: MissReason::Evicted,
                    missing: Some(last.to_owned()),
                    retry_after: shared.replay.retry_after,
                })?;
                r.frames.insert(0, own);
                Ok(r)
            })
        } else {
            after
        }
    };
    match replayed {
        Ok(replay) => {
            bump(&stats.replays);
            debug!(frames = replay.frames.len(), "replayed");
            sse(replay.frames)
        }
        Err(miss) if mode == ServerMode::Empty => {
            bump(&stats.empty_replies);
            debug!(reason = %miss.reason, "replay miss answered with an empty 200");
            sse(Vec::new())
        }
        Err(miss) => {
            bump(&stats.misses);
            debug!(reason = %miss.reason, "replay miss answered 409");
            conflict(&miss, last)
        }
    }
}

fn delete(shared: &Shared, session: Option<String>) -> Response<Body> {
    let session = match check_session(shared, session) {
        Ok(s) => s,
        Err(e) => return e.response(),
    };
    if shared.lock().remove(&session).is_some() {
        bump(&shared.stats.sessions_deleted);
    }
    empty(StatusCode::NO_CONTENT)
}
