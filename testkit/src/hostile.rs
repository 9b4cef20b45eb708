//! A deliberately misbehaving MCP Streamable HTTP server for loopback tests of MCP clients: one
//! [`Misbehaviour`] per instance, written on raw TCP so it can send what no HTTP library would
//! (malformed and huge heads, trickles, endless bodies).
//!
//! One request per TCP connection: the server reads the request head (at most 64 KiB; a bigger head
//! gets the connection closed without an answer) and a `Content-Length` body (at most 1 MiB; a bigger
//! one is answered `413`), answers with `Connection: close`, then closes (FIN). Chunked request
//! bodies are not supported (such a body is not read).
//!
//! **Honest answers** for everything the misbehaviour does not hit, on the path `/mcp`:
//!
//! | request | answer |
//! | --- | --- |
//! | `POST initialize` | `200 application/json`, `mcp-session-id: hostile-1`, the result with `protocolVersion` `2025-11-25` |
//! | `POST` notification (a `method`, no `id`) or response (an `id` and `result`/`error`, no `method`) | `202`, no body |
//! | `POST tools/list` | `200 application/json`, one tool `t` (`readOnlyHint: false`) |
//! | `POST tools/call` | `200 text/event-stream`: `id: 0\ndata:\n\n`, then `id: 1` with the result `[{"type":"text","text":"ok"}]`, then the end |
//! | `POST ping` / another method | `200 application/json`: result `{}` / JSON-RPC error `-32601` |
//! | `POST` with a body that is no JSON-RPC message | `400` |
//! | `GET` (with or without `Last-Event-ID`) | `405` |
//! | `DELETE` | `200`, no body |
//! | another method, or another path | `404` |
//!
//! JSON-RPC ids are echoed as the same JSON value (number or string). Finite answers carry a
//! `Content-Length`; streamed answers (SSE, endless bodies) are close-delimited by default (no length,
//! the body ends when the connection closes, as HTTP/1.1 allows), or chunked with
//! [`Framing::Chunked`] ([`HostileServer::start_framed`]).
//!
//! **Safety bounds.** Whatever a client under test does, every connection ends: an endless writer stops
//! when a write fails (the peer closed), once its answer's body reached [`Limits::max_body_bytes`], or
//! when the connection is [`Limits::max_duration`] old, whichever comes first. A body stopped by a
//! bound is simply cut (no chunked terminator). Endless bodies are written from reused 256 KiB
//! buffers, so the server itself runs at loopback speed.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use ssegate_testkit::hostile::{Hit, HostileServer, Misbehaviour};
//!
//! let server = HostileServer::start(Misbehaviour::ErrorBody { on: Hit::ToolsCall }).await?;
//! // ... point the client at server.url() and call a tool ...
//! assert!(server.requests().iter().any(|r| r.rpc_method().as_deref() == Some("tools/call")));
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::{Instrument, debug, debug_span, info_span, warn};

/// The largest request head read; a bigger one gets the connection closed.
const MAX_HEAD: usize = 64 << 10;
/// The largest request body read; a bigger `Content-Length` is answered `413`.
const MAX_BODY: usize = 1 << 20;
/// How much of a request body [`Recorded::body`] keeps.
const MAX_RECORDED_BODY: usize = 64 << 10;
/// The size of the reused buffers endless bodies are written from.
const FILL: usize = 256 << 10;
/// The session id `initialize` hands out.
pub const SESSION_ID: &str = "hostile-1";
/// The protocol version `initialize` answers.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// The priming event that opens the `tools/call` streams (an id, empty data).
const PRIMING: &[u8] = b"id: 0\ndata:\n\n";
/// The pause between [`Misbehaviour::OversizedResponse`]'s keep-alive comments.
const KEEP_ALIVE_EVERY: Duration = Duration::from_millis(200);

/// Which request [`Misbehaviour::ErrorBody`] answers with its endless error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hit {
    /// `POST initialize`.
    Initialize,
    /// `POST tools/list`.
    ToolsList,
    /// `POST tools/call`.
    ToolsCall,
    /// Any `GET` (with or without `Last-Event-ID`).
    Get,
    /// Any `DELETE`.
    Delete,
}

/// The shape of the event ids [`Misbehaviour::ForeignStream`] sends: a stream letter and a counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IdShape {
    /// `<counter>/<stream>`: `0/A`, `1/A`, `5/B`, `6/B`.
    #[default]
    Slash,
    /// `<stream>-<counter>`: `A-0`, `A-1`, `B-5`, `B-6`.
    Dash,
}

impl IdShape {
    /// The event id for `counter` on `stream` in this shape (`IdShape::Slash.id('B', 5)` is `5/B`).
    pub fn id(self, stream: char, counter: u64) -> String {
        match self {
            IdShape::Slash => format!("{counter}/{stream}"),
            IdShape::Dash => format!("{stream}-{counter}"),
        }
    }
}

/// How streamed answers (SSE and endless bodies) are framed. Finite answers always carry a
/// `Content-Length`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Framing {
    /// No length: the body ends when the server closes the connection.
    #[default]
    Close,
    /// `Transfer-Encoding: chunked`, one chunk per write; a body that ends (rather than being cut
    /// by a bound) ends with the `0\r\n\r\n` terminator.
    Chunked,
}

/// The one misbehaviour of a [`HostileServer`]. Requests it does not hit get the honest answers
/// (the [module documentation](self)). `<id>` below is the JSON-RPC id of the request, echoed as the
/// same JSON value; "the priming event" is `id: 0\ndata:\n\n`; an "SSE" answer is
/// `200`, `content-type: text/event-stream`, `cache-control: no-cache`, streamed ([`Framing`]).
/// "Endless" means until a [`Limits`] bound or the peer's close.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Misbehaviour {
    /// None: every request gets the honest answer (a baseline).
    Honest,
    /// The request named by `on` is answered `500`, `content-type: text/plain`, with an endless
    /// streamed body `error error error ...`.
    ErrorBody {
        /// The request hit.
        on: Hit,
    },
    /// `tools/list` is answered `200`, `content-type: application/json`, streamed, with a body of
    /// exactly `bytes` bytes: `{"jsonrpc":"2.0","id":<id>,"result":{"pad":"` followed by `a`s (an
    /// incomplete JSON value: the string is never closed), then the body ends. With `bytes` shorter
    /// than the prefix, the prefix's first `bytes` bytes.
    HugeJson {
        /// The body's length.
        bytes: u64,
    },
    /// `tools/call` is answered SSE: the priming event, then
    /// `data: {"jsonrpc":"2.0","id":<id>,"result":{"text":"` followed by endless `x`s, no newline
    /// ever (one line without end).
    EndlessDataLine,
    /// `tools/call` is answered with the SSE head at once, then the body one byte per `every`,
    /// endlessly: the priming event, then `: k\n` (an SSE comment) repeated, never another event.
    SlowLoris {
        /// The pause after each byte.
        every: Duration,
    },
    /// The head of every `tools/call` answer is trickled one byte per `every` and never finishes:
    /// `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-slow: ` followed by endless `k`s.
    /// These bytes count as body bytes for [`HostileServer::bytes_written`] and
    /// [`Limits::max_body_bytes`] (they are this misbehaviour's endless output); the answer is
    /// recorded with status `200`.
    SlowHead {
        /// The pause after each byte.
        every: Duration,
    },
    /// `tools/call` is answered SSE with priming events `id: 0\ndata:\n\n`, `id: 1\ndata:\n\n`, ...
    /// one per `every` (the first at once), endlessly, never a response.
    EndlessPriming {
        /// The pause between events.
        every: Duration,
    },
    /// `tools/call` is answered SSE: the priming event, then one complete response event
    /// `id: 1\ndata: {"jsonrpc":"2.0","id":<id>,"result":{"text":"xx…x"}}\n\n` whose data line
    /// (from `data: ` to `"}}`, without the newline) is `bytes` long (or the shortest possible), then
    /// the connection stays open with `: keep-alive\n\n` every 200 ms, endlessly.
    OversizedResponse {
        /// The data line's length.
        bytes: u64,
    },
    /// Another stream's events after a cut at an event boundary. `tools/call` is answered SSE:
    /// `id: 0/A\ndata:\n\n` and, unless `priming_only`,
    /// `id: 1/A\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n\n`,
    /// then the body ends. Every `GET` with a `Last-Event-ID` is answered SSE with *another*
    /// stream's events: `id: 5/B\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":5}}\n\n`,
    /// then `id: 6/B\ndata: {"jsonrpc":"2.0","id":<id>,"result":{"content":[{"type":"text","text":"another session's result"}]}}\n\n`
    /// with `<id>` the id of the last `tools/call` received (`1` before any), then the body ends.
    /// The ids are shown in the [`IdShape::Slash`] shape; `shape` picks.
    ForeignStream {
        /// Send only the priming event on the `tools/call` stream.
        priming_only: bool,
        /// The event ids' shape.
        shape: IdShape,
    },
    /// Every request (any method, any path) is answered `status` with `location: <location>`,
    /// `content-length: 0`.
    Redirect {
        /// The status code (`301`, `302`, `303`, `307`, `308`, ...).
        status: u16,
        /// The `Location` header's value.
        location: String,
    },
    /// `tools/call` is answered SSE: the priming event, then the body ends (the response still
    /// outstanding). Every `GET` with a `Last-Event-ID` is answered `status` with
    /// `retry-after: <retry_after>` and `content-length: 0`.
    ResumeBusy {
        /// The resume's status code (`503`, `429`, `409`, ...).
        status: u16,
        /// The `Retry-After` header's value.
        retry_after: String,
    },
    /// `tools/call` is answered SSE `retry: 0\nid: 0\ndata:\n\n`, then the body ends. Every `GET`
    /// with `Last-Event-ID: N` is answered SSE `retry: 0\nid: <N+1>\ndata:\n\n` (one new priming
    /// event: each resume "progresses"), then the body ends. `N` that is no integer counts as `0`.
    RetryStorm,
    /// The first `times` `POST`s of `tools/list` are answered `503` with
    /// `retry-after: <retry_after>` and `content-length: 0`; later ones honestly. Count the `503`s
    /// with [`Recorded::status`].
    PostBusy {
        /// How many `tools/list` requests are refused.
        times: u32,
        /// The `Retry-After` header's value.
        retry_after: String,
    },
    /// `tools/call` is answered `200` SSE with an extra header `x-pad` whose value is `bytes` bytes
    /// of `p`, then the honest `tools/call` body.
    HugeHead {
        /// The `x-pad` value's length.
        bytes: usize,
    },
    /// `tools/call` is answered with exactly `HTTP/1.1 2x0 Nope\r\n\r\n` (an invalid status line),
    /// then the connection closes. Recorded without a status.
    MalformedHead,
    /// `tools/call` is answered SSE with endless tiny events `id: <n>\ndata: {}\n\n`, `n` counting up
    /// from `0`, written `chunk` bytes per write (events straddle writes), never a response.
    TinyEvents {
        /// The size of each write.
        chunk: usize,
    },
    /// `tools/call` is answered SSE: the priming event, then one complete, valid response event
    /// `id: 1\ndata: {"jsonrpc":"2.0","id":<id>,"result":{"text":"xx…x"}}\n\n` whose data line
    /// (from `data: ` to `"}}`, without the newline) is `bytes` long (or the shortest possible), then
    /// the body ends.
    HugeEvent {
        /// The data line's length.
        bytes: u64,
    },
}

/// Bounds on every connection, so that a buggy client can never make the server run forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most body bytes written in one answer; an endless body stops there. Default 8 GiB.
    pub max_body_bytes: u64,
    /// The longest a connection lives (reading the request, answering, trickling). Default 120 s.
    pub max_duration: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 8 << 30,
            max_duration: Duration::from_secs(120),
        }
    }
}

/// One request the server received.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// The request method, as sent (`POST`).
    pub method: String,
    /// The request target, as sent (`/mcp`).
    pub path: String,
    /// The raw `Host` header value, if any.
    pub host: Option<String>,
    /// Every header in order, names lowercased, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The body's first 64 KiB (empty when the body was not read: over 1 MiB, or chunked).
    pub body: Bytes,
    /// The status code of the answer, once the server chose it (`None` while undecided, and for
    /// [`Misbehaviour::MalformedHead`]'s answer).
    pub status: Option<u16>,
}

impl Recorded {
    /// The first value of the header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC `method` of the body, if it is a JSON object with a string `method`.
    pub fn rpc_method(&self) -> Option<String> {
        let value: Value = serde_json::from_slice(&self.body).ok()?;
        value.get("method")?.as_str().map(str::to_owned)
    }
}

/// A running hostile server on `127.0.0.1`. Dropping it stops it too (the accept loop and every
/// connection are aborted).
#[derive(Debug)]
pub struct HostileServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

#[derive(Debug)]
struct Shared {
    misbehaviour: Misbehaviour,
    limits: Limits,
    framing: Framing,
    requests: Mutex<Vec<Recorded>>,
    bytes_written: AtomicU64,
    /// The JSON-RPC id of the last `tools/call` received.
    last_call_id: Mutex<Option<Value>>,
    /// `503`s sent by [`Misbehaviour::PostBusy`].
    busy_sent: AtomicU32,
}

impl Shared {
    fn requests(&self) -> MutexGuard<'_, Vec<Recorded>> {
        self.requests.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn last_call_id(&self) -> MutexGuard<'_, Option<Value>> {
        self.last_call_id.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl HostileServer {
    /// Binds an ephemeral port on `127.0.0.1` and serves `misbehaviour` with the default [`Limits`]
    /// and close-delimited streams, on the current tokio runtime.
    pub async fn start(misbehaviour: Misbehaviour) -> io::Result<HostileServer> {
        Self::start_framed(misbehaviour, Limits::default(), Framing::Close).await
    }

    /// [`HostileServer::start`] with other [`Limits`].
    pub async fn start_with(
        misbehaviour: Misbehaviour,
        limits: Limits,
    ) -> io::Result<HostileServer> {
        Self::start_framed(misbehaviour, limits, Framing::Close).await
    }

    /// [`HostileServer::start_with`] with a choice of [`Framing`] for streamed answers.
    pub async fn start_framed(
        misbehaviour: Misbehaviour,
        limits: Limits,
        framing: Framing,
    ) -> io::Result<HostileServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let span = info_span!("hostile", %addr, ?misbehaviour);
        let shared = Arc::new(Shared {
            misbehaviour,
            limits,
            framing,
            requests: Mutex::new(Vec::new()),
            bytes_written: AtomicU64::new(0),
            last_call_id: Mutex::new(None),
            busy_sent: AtomicU32::new(0),
        });
        let (stop, stopped) = watch::channel(false);
        let task =
            tokio::spawn(accept_loop(listener, Arc::clone(&shared), stopped).instrument(span));
        Ok(HostileServer {
            addr,
            shared,
            stop,
            task,
        })
    }

    /// The server's address (`127.0.0.1:<port>`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The MCP endpoint, `http://127.0.0.1:<port>/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The misbehaviour served.
    pub fn misbehaviour(&self) -> &Misbehaviour {
        &self.shared.misbehaviour
    }

    /// Every request received so far, in arrival order (a request whose head was too big, never
    /// complete or malformed is not recorded).
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests().clone()
    }

    /// Body bytes written to clients so far, over all connections (heads and chunk framing not
    /// counted, except [`Misbehaviour::SlowHead`]'s trickle).
    pub fn bytes_written(&self) -> u64 {
        self.shared.bytes_written.load(Ordering::Relaxed)
    }

    /// Stops accepting and aborts every open connection.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        let _ = (&mut self.task).await;
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        // Dropping the accept loop drops its `JoinSet`, which aborts every connection task.
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    let mut n = 0u64;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    n += 1;
                    let span = debug_span!("hostile_conn", n, %peer);
                    conns.spawn(connection(stream, Arc::clone(&shared)).instrument(span));
                }
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = stopped.changed() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.shutdown().await;
}

/// Serves one connection within [`Limits::max_duration`], then closes it with a FIN.
async fn connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let deadline = Instant::now() + shared.limits.max_duration;
    let served = tokio::time::timeout_at(deadline, serve(&mut stream, &shared)).await;
    match served {
        Err(_) => debug!("max_duration reached"),
        Ok(Err(Stop::Limit)) => debug!("max_body_bytes reached"),
        Ok(Err(Stop::Io(e))) => debug!(error = %e, "the peer went away"),
        Ok(Ok(())) => {
            let _ = tokio::time::timeout_at(deadline, stream.shutdown()).await;
            debug!("answered");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reading requests
// ---------------------------------------------------------------------------------------------

/// A request as read.
#[derive(Debug)]
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Bytes,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What reading a request gave.
#[derive(Debug)]
enum Incoming {
    /// A whole request.
    Request(Request),
    /// A well-formed head announcing a body over [`MAX_BODY`] (not read).
    TooLarge(Request),
    /// A head that is no HTTP/1.x request.
    BadHead,
    /// The peer closed first, or the head grew over [`MAX_HEAD`].
    Gone,
}

/// Reads one request head and its `Content-Length` body.
async fn read_request(stream: &mut TcpStream) -> io::Result<Incoming> {
    let mut buf = BytesMut::with_capacity(8 << 10);
    let finder = memchr::memmem::Finder::new(b"\r\n\r\n");
    let head_end = loop {
        if let Some(i) = finder.find(&buf) {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            debug!(len = buf.len(), "request head too big");
            return Ok(Incoming::Gone);
        }
        buf.reserve(8 << 10);
        if stream.read_buf(&mut buf).await? == 0 {
            return Ok(Incoming::Gone);
        }
    };
    if head_end > MAX_HEAD {
        return Ok(Incoming::Gone);
    }
    let head = buf.split_to(head_end);
    let Some(mut req) = parse_head(&head) else {
        return Ok(Incoming::BadHead);
    };
    let length = match req.header("content-length") {
        None => 0,
        Some(v) => match v.parse::<usize>() {
            Ok(n) => n,
            Err(_) => return Ok(Incoming::BadHead),
        },
    };
    if length > MAX_BODY {
        return Ok(Incoming::TooLarge(req));
    }
    while buf.len() < length {
        buf.reserve(length - buf.len());
        if stream.read_buf(&mut buf).await? == 0 {
            return Ok(Incoming::Gone);
        }
    }
    req.body = buf.split_to(length).freeze();
    Ok(Incoming::Request(req))
}

/// Parses a head (ending with the blank line) into a request without its body.
fn parse_head(head: &[u8]) -> Option<Request> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut start = lines.next()?.split(' ');
    let (method, target, version) = (start.next()?, start.next()?, start.next()?);
    if method.is_empty() || target.is_empty() || !version.starts_with("HTTP/1.") {
        return None;
    }
    let mut headers = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    Some(Request {
        method: method.to_owned(),
        path: target.to_owned(),
        headers,
        body: Bytes::new(),
    })
}

/// What a request is, for choosing the answer.
#[derive(Debug)]
enum Kind {
    Initialize(Value),
    ToolsList(Value),
    ToolsCall(Value),
    /// Another JSON-RPC request: its id and method.
    OtherCall(Value, String),
    /// A notification or a response: `202`.
    Accepted,
    /// A `POST` body that is no JSON-RPC message.
    BadBody,
    Get {
        last_event_id: Option<String>,
    },
    Delete,
    /// Another method or path.
    Other,
}

fn classify(req: &Request) -> Kind {
    let path = req.path.split('?').next().unwrap_or_default();
    if path != "/mcp" {
        return Kind::Other;
    }
    match req.method.as_str() {
        "GET" => Kind::Get {
            last_event_id: req.header("last-event-id").map(str::to_owned),
        },
        "DELETE" => Kind::Delete,
        "POST" => classify_rpc(&req.body),
        _ => Kind::Other,
    }
}

fn classify_rpc(body: &[u8]) -> Kind {
    let Ok(Value::Object(msg)) = serde_json::from_slice::<Value>(body) else {
        return Kind::BadBody;
    };
    let id = msg.get("id").cloned();
    match (msg.get("method").and_then(Value::as_str), id) {
        (Some(_), None) => Kind::Accepted,
        (Some("initialize"), Some(id)) => Kind::Initialize(id),
        (Some("tools/list"), Some(id)) => Kind::ToolsList(id),
        (Some("tools/call"), Some(id)) => Kind::ToolsCall(id),
        (Some(method), Some(id)) => Kind::OtherCall(id, method.to_owned()),
        (None, Some(_)) if msg.contains_key("result") || msg.contains_key("error") => {
            Kind::Accepted
        }
        (None, _) => Kind::BadBody,
    }
}

impl Hit {
    fn hits(self, kind: &Kind) -> bool {
        matches!(
            (self, kind),
            (Hit::Initialize, Kind::Initialize(_))
                | (Hit::ToolsList, Kind::ToolsList(_))
                | (Hit::ToolsCall, Kind::ToolsCall(_))
                | (Hit::Get, Kind::Get { .. })
                | (Hit::Delete, Kind::Delete)
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Writing answers
// ---------------------------------------------------------------------------------------------

/// Why an answer stopped early.
#[derive(Debug)]
enum Stop {
    /// A write failed: the peer closed.
    Io(io::Error),
    /// [`Limits::max_body_bytes`] was reached.
    Limit,
}

type Flow = Result<(), Stop>;

/// How the body after a head is delimited.
#[derive(Clone, Copy, Debug)]
enum Body {
    /// `content-length: <n>`.
    Length(usize),
    /// Streamed as the server's [`Framing`] says.
    Stream,
}

/// One connection's writing side: heads, counted and bounded body bytes, chunk framing.
#[derive(Debug)]
struct Conn<'a> {
    stream: &'a mut TcpStream,
    shared: &'a Shared,
    /// The index of this connection's request in [`Shared::requests`].
    record: Option<usize>,
    /// Body bytes written in this answer.
    sent: u64,
    /// Whether the body being written is chunked.
    chunked: bool,
}

impl Conn<'_> {
    /// Notes the answer's status on the recorded request.
    fn note_status(&self, status: u16) {
        if let Some(i) = self.record
            && let Some(r) = self.shared.requests().get_mut(i)
        {
            r.status = Some(status);
        }
    }

    /// Writes bytes as they are: not counted, not bounded by [`Limits::max_body_bytes`].
    async fn raw(&mut self, bytes: &[u8]) -> Flow {
        self.stream.write_all(bytes).await.map_err(Stop::Io)
    }

    /// Writes the status line and headers; adds the delimiting header and `connection: close`.
    async fn head(&mut self, status: u16, headers: &[(&str, &str)], body: Body) -> Flow {
        self.note_status(status);
        let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
        for (name, value) in headers {
            let _ = write!(head, "{name}: {value}\r\n");
        }
        self.chunked = false;
        match body {
            Body::Length(n) => {
                let _ = write!(head, "content-length: {n}\r\n");
            }
            Body::Stream => {
                if self.shared.framing == Framing::Chunked {
                    head.push_str("transfer-encoding: chunked\r\n");
                    self.chunked = true;
                }
            }
        }
        head.push_str("connection: close\r\n\r\n");
        self.raw(head.as_bytes()).await
    }

    /// The SSE head (`200`, streamed).
    async fn sse_head(&mut self) -> Flow {
        self.head(
            200,
            &[
                ("content-type", "text/event-stream"),
                ("cache-control", "no-cache"),
            ],
            Body::Stream,
        )
        .await
    }

    /// A whole answer with a `Content-Length` body (possibly empty).
    async fn full(&mut self, status: u16, headers: &[(&str, &str)], body: &[u8]) -> Flow {
        self.head(status, headers, Body::Length(body.len())).await?;
        self.counted(body).await
    }

    /// Writes body bytes (chunk-framed when the body is chunked), counted and bounded: when the
    /// bound cuts them, writes what fits and stops with [`Stop::Limit`].
    async fn body(&mut self, bytes: &[u8]) -> Flow {
        let room = self.room();
        let take = bytes.len().min(room);
        if take > 0 {
            if self.chunked {
                self.raw(format!("{take:x}\r\n").as_bytes()).await?;
            }
            self.counted(&bytes[..take]).await?;
            if self.chunked {
                self.raw(b"\r\n").await?;
            }
        }
        if take < bytes.len() {
            return Err(Stop::Limit);
        }
        Ok(())
    }

    /// Ends a streamed body that ends (rather than being cut): the chunked terminator, if chunked.
    async fn finish(&mut self) -> Flow {
        if self.chunked {
            self.raw(b"0\r\n\r\n").await?;
        }
        Ok(())
    }

    /// How many more body bytes [`Limits::max_body_bytes`] allows.
    fn room(&self) -> usize {
        let left = self.shared.limits.max_body_bytes.saturating_sub(self.sent);
        usize::try_from(left).unwrap_or(usize::MAX)
    }

    /// Writes bytes without framing, counting every byte the kernel takes (so the counters stop
    /// within one write of the peer's close), bounded like [`Conn::body`].
    async fn counted(&mut self, bytes: &[u8]) -> Flow {
        let take = bytes.len().min(self.room());
        let mut rest = &bytes[..take];
        while !rest.is_empty() {
            let n = self.stream.write(rest).await.map_err(Stop::Io)?;
            if n == 0 {
                return Err(Stop::Io(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n as u64;
            self.shared
                .bytes_written
                .fetch_add(n as u64, Ordering::Relaxed);
            rest = &rest[n..];
        }
        if take < bytes.len() {
            return Err(Stop::Limit);
        }
        Ok(())
    }

    /// Writes `unit` repeated, `total` bytes in all (`None`: endless), from one reused buffer.
    async fn repeat(&mut self, unit: &[u8], total: Option<u64>) -> Flow {
        let buf = filler(unit);
        let mut left = total;
        loop {
            let n = match left {
                Some(0) => return Ok(()),
                Some(l) => usize::try_from(l).map_or(buf.len(), |l| l.min(buf.len())),
                None => buf.len(),
            };
            self.body(&buf[..n]).await?;
            if let Some(l) = &mut left {
                *l -= n as u64;
            }
        }
    }

    /// Writes `bytes` one byte per `every` as body bytes (`framed`) or unframed but counted.
    async fn trickle(
        &mut self,
        bytes: impl Iterator<Item = u8>,
        every: Duration,
        framed: bool,
    ) -> Flow {
        for b in bytes {
            if framed {
                self.body(&[b]).await?;
            } else {
                self.counted(&[b]).await?;
            }
            tokio::time::sleep(every).await;
        }
        Ok(())
    }
}

/// About 256 KiB of `unit` repeated (a whole number of units).
fn filler(unit: &[u8]) -> Vec<u8> {
    let unit = if unit.is_empty() { b" " } else { unit };
    unit.repeat((FILL / unit.len()).max(1))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Hostile",
    }
}

/// A complete response event `id: 1\ndata: {"jsonrpc":"2.0","id":<id>,"result":{"text":"xx…x"}}\n\n`
/// whose data line is `bytes` long (or the shortest possible): the part before the padding, the
/// padding's length, the part after.
fn big_event(id: &Value, bytes: u64) -> (String, u64, &'static str) {
    let json_start = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"text":""#);
    let end = "\"}}\n\n";
    // The data line: `data: ` + json_start + padding + `"}}`.
    let fixed = ("data: ".len() + json_start.len() + 3) as u64;
    (
        format!("id: 1\ndata: {json_start}"),
        bytes.saturating_sub(fixed),
        end,
    )
}

// ---------------------------------------------------------------------------------------------
// Serving
// ---------------------------------------------------------------------------------------------

/// Reads the request, records it, answers it.
async fn serve(stream: &mut TcpStream, shared: &Shared) -> Flow {
    let incoming = read_request(stream).await.map_err(Stop::Io)?;
    let mut conn = Conn {
        stream,
        shared,
        record: None,
        sent: 0,
        chunked: false,
    };
    let (req, too_large) = match incoming {
        Incoming::Gone => return Ok(()),
        Incoming::BadHead => return conn.full(400, &[], b"").await,
        Incoming::Request(req) => (req, false),
        Incoming::TooLarge(req) => (req, true),
    };
    conn.record = Some(record(shared, &req));
    if too_large {
        return conn.full(413, &[], b"").await;
    }
    let kind = classify(&req);
    debug!(method = %req.method, path = %req.path, ?kind, "request");
    if let Kind::ToolsCall(id) = &kind {
        *shared.last_call_id() = Some(id.clone());
    }
    respond(&mut conn, &kind).await
}

/// Appends the request to [`Shared::requests`]; returns its index.
fn record(shared: &Shared, req: &Request) -> usize {
    let keep = req.body.len().min(MAX_RECORDED_BODY);
    let recorded = Recorded {
        method: req.method.clone(),
        path: req.path.clone(),
        host: req.header("host").map(str::to_owned),
        headers: req.headers.clone(),
        body: req.body.slice(..keep),
        status: None,
    };
    let mut requests = shared.requests();
    requests.push(recorded);
    requests.len() - 1
}

/// Picks the answer: the misbehaviour where it hits, else the honest one.
async fn respond(conn: &mut Conn<'_>, kind: &Kind) -> Flow {
    let shared = conn.shared;
    match (&shared.misbehaviour, kind) {
        (Misbehaviour::Redirect { status, location }, _) => {
            conn.full(*status, &[("location", location)], b"").await
        }
        (Misbehaviour::ErrorBody { on }, kind) if on.hits(kind) => error_body(conn).await,
        (Misbehaviour::HugeJson { bytes }, Kind::ToolsList(id)) => {
            huge_json(conn, id, *bytes).await
        }
        (Misbehaviour::PostBusy { times, retry_after }, Kind::ToolsList(_))
            if shared
                .busy_sent
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    (n < *times).then_some(n + 1)
                })
                .is_ok() =>
        {
            conn.full(503, &[("retry-after", retry_after)], b"").await
        }
        (Misbehaviour::EndlessDataLine, Kind::ToolsCall(id)) => endless_data_line(conn, id).await,
        (Misbehaviour::SlowLoris { every }, Kind::ToolsCall(_)) => slow_loris(conn, *every).await,
        (Misbehaviour::SlowHead { every }, Kind::ToolsCall(_)) => slow_head(conn, *every).await,
        (Misbehaviour::EndlessPriming { every }, Kind::ToolsCall(_)) => {
            endless_priming(conn, *every).await
        }
        (Misbehaviour::OversizedResponse { bytes }, Kind::ToolsCall(id)) => {
            oversized_response(conn, id, *bytes).await
        }
        (
            Misbehaviour::ForeignStream {
                priming_only,
                shape,
            },
            Kind::ToolsCall(_),
        ) => foreign_stream_call(conn, *priming_only, *shape).await,
        (
            Misbehaviour::ForeignStream { shape, .. },
            Kind::Get {
                last_event_id: Some(_),
            },
        ) => foreign_stream_resume(conn, *shape).await,
        (Misbehaviour::ResumeBusy { .. }, Kind::ToolsCall(_)) => priming_then_end(conn).await,
        (
            Misbehaviour::ResumeBusy {
                status,
                retry_after,
            },
            Kind::Get {
                last_event_id: Some(_),
            },
        ) => {
            conn.full(*status, &[("retry-after", retry_after)], b"")
                .await
        }
        (Misbehaviour::RetryStorm, Kind::ToolsCall(_)) => retry_storm(conn, 0).await,
        (
            Misbehaviour::RetryStorm,
            Kind::Get {
                last_event_id: Some(last),
            },
        ) => {
            let n = last.trim().parse::<u64>().unwrap_or(0);
            retry_storm(conn, n.saturating_add(1)).await
        }
        (Misbehaviour::HugeHead { bytes }, Kind::ToolsCall(id)) => {
            huge_head(conn, id, *bytes).await
        }
        (Misbehaviour::MalformedHead, Kind::ToolsCall(_)) => {
            conn.raw(b"HTTP/1.1 2x0 Nope\r\n\r\n").await
        }
        (Misbehaviour::TinyEvents { chunk }, Kind::ToolsCall(_)) => tiny_events(conn, *chunk).await,
        (Misbehaviour::HugeEvent { bytes }, Kind::ToolsCall(id)) => {
            huge_event(conn, id, *bytes).await
        }
        (_, kind) => honest(conn, kind).await,
    }
}

/// `{"jsonrpc":"2.0","id":<id>,"result":<result>}`, keys in that order.
fn rpc_result(id: &Value, result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

/// The honest answers (module documentation).
async fn honest(conn: &mut Conn<'_>, kind: &Kind) -> Flow {
    let json: &[(&str, &str)] = &[("content-type", "application/json")];
    match kind {
        Kind::Initialize(id) => {
            let result = format!(
                r#"{{"protocolVersion":"{PROTOCOL_VERSION}","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"hostile","version":"0"}}}}"#
            );
            let headers = [json[0], ("mcp-session-id", SESSION_ID)];
            conn.full(200, &headers, rpc_result(id, &result).as_bytes())
                .await
        }
        Kind::ToolsList(id) => {
            let result = r#"{"tools":[{"name":"t","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false}}]}"#;
            conn.full(200, json, rpc_result(id, result).as_bytes())
                .await
        }
        Kind::ToolsCall(id) => {
            conn.sse_head().await?;
            honest_call_body(conn, id).await
        }
        Kind::OtherCall(id, method) if method == "ping" => {
            conn.full(200, json, rpc_result(id, "{}").as_bytes()).await
        }
        Kind::OtherCall(id, _) => {
            let error = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"Method not found"}}}}"#
            );
            conn.full(200, json, error.as_bytes()).await
        }
        Kind::Accepted => conn.full(202, &[], b"").await,
        Kind::BadBody => conn.full(400, &[], b"").await,
        Kind::Get { .. } => conn.full(405, &[("allow", "POST, DELETE")], b"").await,
        Kind::Delete => conn.full(200, &[], b"").await,
        Kind::Other => conn.full(404, &[], b"").await,
    }
}

/// The honest `tools/call` body: the priming event, the `ok` result, the end.
async fn honest_call_body(conn: &mut Conn<'_>, id: &Value) -> Flow {
    let result = rpc_result(id, r#"{"content":[{"type":"text","text":"ok"}]}"#);
    conn.body(PRIMING).await?;
    conn.body(format!("id: 1\ndata: {result}\n\n").as_bytes())
        .await?;
    conn.finish().await
}

/// [`Misbehaviour::ErrorBody`].
async fn error_body(conn: &mut Conn<'_>) -> Flow {
    conn.head(500, &[("content-type", "text/plain")], Body::Stream)
        .await?;
    conn.repeat(b"error ", None).await
}

/// [`Misbehaviour::HugeJson`].
async fn huge_json(conn: &mut Conn<'_>, id: &Value, bytes: u64) -> Flow {
    conn.head(200, &[("content-type", "application/json")], Body::Stream)
        .await?;
    let prefix = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"pad":""#);
    let prefix = prefix.as_bytes();
    let head = usize::try_from(bytes).map_or(prefix.len(), |b| b.min(prefix.len()));
    conn.body(&prefix[..head]).await?;
    conn.repeat(b"a", Some(bytes - head as u64)).await?;
    conn.finish().await
}

/// [`Misbehaviour::EndlessDataLine`].
async fn endless_data_line(conn: &mut Conn<'_>, id: &Value) -> Flow {
    conn.sse_head().await?;
    conn.body(PRIMING).await?;
    let line = format!(r#"data: {{"jsonrpc":"2.0","id":{id},"result":{{"text":""#);
    conn.body(line.as_bytes()).await?;
    conn.repeat(b"x", None).await
}

/// [`Misbehaviour::SlowLoris`].
async fn slow_loris(conn: &mut Conn<'_>, every: Duration) -> Flow {
    conn.sse_head().await?;
    let bytes = PRIMING.iter().chain(b": k\n".iter().cycle()).copied();
    conn.trickle(bytes, every, true).await
}

/// [`Misbehaviour::SlowHead`].
async fn slow_head(conn: &mut Conn<'_>, every: Duration) -> Flow {
    conn.note_status(200);
    let head: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-slow: ";
    let bytes = head.iter().copied().chain(std::iter::repeat(b'k'));
    conn.trickle(bytes, every, false).await
}

/// [`Misbehaviour::EndlessPriming`].
async fn endless_priming(conn: &mut Conn<'_>, every: Duration) -> Flow {
    conn.sse_head().await?;
    for n in 0u64.. {
        conn.body(format!("id: {n}\ndata:\n\n").as_bytes()).await?;
        tokio::time::sleep(every).await;
    }
    Ok(())
}

/// [`Misbehaviour::OversizedResponse`].
async fn oversized_response(conn: &mut Conn<'_>, id: &Value, bytes: u64) -> Flow {
    conn.sse_head().await?;
    conn.body(PRIMING).await?;
    let (start, pad, end) = big_event(id, bytes);
    conn.body(start.as_bytes()).await?;
    conn.repeat(b"x", Some(pad)).await?;
    conn.body(end.as_bytes()).await?;
    loop {
        tokio::time::sleep(KEEP_ALIVE_EVERY).await;
        conn.body(b": keep-alive\n\n").await?;
    }
}

/// The progress notification `progress` on token 1.
fn progress(n: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":1,"progress":{n}}}}}"#
    )
}

/// [`Misbehaviour::ForeignStream`], the `tools/call` stream of stream `A`.
async fn foreign_stream_call(conn: &mut Conn<'_>, priming_only: bool, shape: IdShape) -> Flow {
    conn.sse_head().await?;
    conn.body(format!("id: {}\ndata:\n\n", shape.id('A', 0)).as_bytes())
        .await?;
    if !priming_only {
        let event = format!("id: {}\ndata: {}\n\n", shape.id('A', 1), progress(1));
        conn.body(event.as_bytes()).await?;
    }
    conn.finish().await
}

/// [`Misbehaviour::ForeignStream`], a resume answered with stream `B`'s events.
async fn foreign_stream_resume(conn: &mut Conn<'_>, shape: IdShape) -> Flow {
    let id = conn.shared.last_call_id().clone().unwrap_or(Value::from(1));
    let result = rpc_result(
        &id,
        r#"{"content":[{"type":"text","text":"another session's result"}]}"#,
    );
    conn.sse_head().await?;
    let events = format!(
        "id: {}\ndata: {}\n\nid: {}\ndata: {result}\n\n",
        shape.id('B', 5),
        progress(5),
        shape.id('B', 6),
    );
    conn.body(events.as_bytes()).await?;
    conn.finish().await
}

/// [`Misbehaviour::ResumeBusy`]'s `tools/call`: the priming event, then the end.
async fn priming_then_end(conn: &mut Conn<'_>) -> Flow {
    conn.sse_head().await?;
    conn.body(PRIMING).await?;
    conn.finish().await
}

/// [`Misbehaviour::RetryStorm`]: one priming event `n` with `retry: 0`, then the end.
async fn retry_storm(conn: &mut Conn<'_>, n: u64) -> Flow {
    conn.sse_head().await?;
    conn.body(format!("retry: 0\nid: {n}\ndata:\n\n").as_bytes())
        .await?;
    conn.finish().await
}

/// [`Misbehaviour::HugeHead`].
async fn huge_head(conn: &mut Conn<'_>, id: &Value, bytes: usize) -> Flow {
    let pad = "p".repeat(bytes);
    conn.head(
        200,
        &[
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
            ("x-pad", &pad),
        ],
        Body::Stream,
    )
    .await?;
    drop(pad);
    honest_call_body(conn, id).await
}

/// A decimal counter kept as ASCII digits, incremented in place.
#[derive(Debug)]
struct Counter(Vec<u8>);

impl Counter {
    fn increment(&mut self) {
        for d in self.0.iter_mut().rev() {
            if *d == b'9' {
                *d = b'0';
            } else {
                *d += 1;
                return;
            }
        }
        self.0.insert(0, b'1');
    }
}

/// [`Misbehaviour::TinyEvents`].
async fn tiny_events(conn: &mut Conn<'_>, chunk: usize) -> Flow {
    conn.sse_head().await?;
    let chunk = chunk.max(1);
    let mut n = Counter(vec![b'0']);
    let mut buf = Vec::with_capacity(chunk + 64);
    loop {
        while buf.len() < chunk {
            buf.extend_from_slice(b"id: ");
            buf.extend_from_slice(&n.0);
            buf.extend_from_slice(b"\ndata: {}\n\n");
            n.increment();
        }
        conn.body(&buf[..chunk]).await?;
        buf.drain(..chunk);
    }
}

/// [`Misbehaviour::HugeEvent`].
async fn huge_event(conn: &mut Conn<'_>, id: &Value, bytes: u64) -> Flow {
    conn.sse_head().await?;
    conn.body(PRIMING).await?;
    let (start, pad, end) = big_event(id, bytes);
    conn.body(start.as_bytes()).await?;
    conn.repeat(b"x", Some(pad)).await?;
    conn.body(end.as_bytes()).await?;
    conn.finish().await
}
