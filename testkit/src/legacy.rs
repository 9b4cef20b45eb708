//! A minimal MCP server on the 2024-11-05 HTTP+SSE transport, for loopback tests of clients that
//! speak it: the kit's tools plus a few faults a server on this transport can commit.
//!
//! | request | answer |
//! | --- | --- |
//! | `GET /sse` | `200 text/event-stream`: first an `endpoint` event naming `/messages?sessionId=<id>` (or [`LegacyConfig::endpoint`]), then every message of the session, no event ids |
//! | `POST /messages?sessionId=<id>` | `202 Accepted`; the answer (if any) comes on the session's stream |
//! | `POST` with an unknown session / a body over [`LegacyConfig::max_request_bytes`] | `404` / `413` |
//! | anything else (a `POST /sse` as Streamable HTTP sends it) | `404` |
//!
//! Methods: `initialize` (answers the client's version when it is one of `2024-11-05`,
//! `2025-03-26`, `2025-06-18`, `2025-11-25`, else `2024-11-05`), `ping`, `tools/list`,
//! `tools/call`; notifications and responses are taken silently. Tools:
//!
//! - `big_result` (`size` at most [`LegacyConfig::max_result_size`], `seed`): the response
//!   [`expected_result`](crate::server::expected_result) exactly;
//! - `progress` (`count` at most 10 000): progress notifications, then
//!   [`expected_progress_result`](crate::server::expected_progress_result);
//! - `cut_stream`: the start of the response event, then the stream is cut (the connection is
//!   aborted mid-event) and the session is gone;
//! - `duplicate_response`: the response (text `first`), then a second, different one for the same
//!   id (text `second`);
//! - `sleep` (`ms`, at most 60 000): the result (text `slept`) after `ms` milliseconds;
//! - `ping_client`: a `ping` request to the client on the stream; the result's text is `pinged`
//!   when the client's answer was `POST`ed within 5 s, else `no answer`.
//!
//! Every `tools/call` is counted per tool ([`RunningLegacyServer::calls`]), so a test can tell a
//! call that was sent again. Sessions end when their stream is dropped.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

use crate::server::tools::{Call, Tool};
use crate::server::{DEFAULT_RESULT_SIZE, DEFAULT_SEED};

/// The event stream's path.
pub const SSE_PATH: &str = "/sse";
/// The path messages are posted to.
pub const MESSAGES_PATH: &str = "/messages";

/// Versions `initialize` answers as asked.
const VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// Frames queued for one session's stream before a sender waits.
const QUEUE: usize = 64;
/// Most `progress` notifications of one call.
const MAX_PROGRESS: u64 = 10_000;
/// How long `ping_client` waits for the client's answer.
const PING_WAIT: Duration = Duration::from_secs(5);

/// The server's settings.
#[derive(Clone, Debug)]
pub struct LegacyConfig {
    endpoint: Option<String>,
    max_request_bytes: usize,
    max_result_size: usize,
}

impl Default for LegacyConfig {
    /// The endpoint `/messages?sessionId=<id>`, requests up to 1 MiB, results up to 64 MiB.
    fn default() -> Self {
        LegacyConfig {
            endpoint: None,
            max_request_bytes: 1 << 20,
            max_result_size: 64 << 20,
        }
    }
}

impl LegacyConfig {
    /// The `endpoint` event's data, as sent (`{session}` is replaced with the session's id): a
    /// fault test names another origin here.
    pub fn endpoint(&mut self, data: impl Into<String>) -> &mut Self {
        self.endpoint = Some(data.into());
        self
    }

    /// Largest request body (default 1 MiB); over it, `413`.
    pub fn max_request_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_request_bytes = bytes;
        self
    }

    /// Largest `big_result` `size` (default 64 MiB); over it, a `-32602` error.
    pub fn max_result_size(&mut self, bytes: usize) -> &mut Self {
        self.max_result_size = bytes;
        self
    }

    /// Binds `addr` and serves until [`RunningLegacyServer::shutdown`] or drop.
    pub async fn start(&self, addr: SocketAddr) -> io::Result<RunningLegacyServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            config: self.clone(),
            sessions: Mutex::new(HashMap::new()),
            next_session: AtomicU64::new(1),
            sessions_opened: AtomicU64::new(0),
            calls: Mutex::new(HashMap::new()),
        });
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, shared.clone(), stopped));
        Ok(RunningLegacyServer {
            addr,
            shared,
            stop,
            task,
        })
    }
}

/// A running HTTP+SSE server. Dropping it stops it (without waiting).
#[derive(Debug)]
pub struct RunningLegacyServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RunningLegacyServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RunningLegacyServer {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>/sse`: the URL a client is given.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.addr, SSE_PATH)
    }

    /// Streams opened so far (each a session).
    pub fn sessions_opened(&self) -> u64 {
        self.shared.sessions_opened.load(Ordering::Relaxed)
    }

    /// Live sessions.
    pub fn session_count(&self) -> usize {
        self.shared.sessions.lock().expect("sessions lock").len()
    }

    /// `tools/call` requests received for `tool`.
    pub fn calls(&self, tool: &str) -> u64 {
        self.shared
            .calls
            .lock()
            .expect("calls lock")
            .get(tool)
            .copied()
            .unwrap_or(0)
    }

    /// Stops accepting and ends every connection.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        self.shared.sessions.lock().expect("sessions lock").clear();
    }
}

type Frames = mpsc::Sender<Result<Frame<Bytes>, io::Error>>;

#[derive(Debug)]
struct LegacySession {
    out: Frames,
    /// Server requests waiting for the client's answer.
    asked: HashMap<String, oneshot::Sender<Value>>,
    next_ask: u64,
}

#[derive(Debug)]
struct Shared {
    config: LegacyConfig,
    sessions: Mutex<HashMap<String, LegacySession>>,
    next_session: AtomicU64,
    sessions_opened: AtomicU64,
    calls: Mutex<HashMap<String, u64>>,
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                conns.spawn(async move {
                    let service = service_fn(move |req| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(handle(&shared, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            _ = stopped.changed() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.abort_all();
}

type Body = BoxBody<Bytes, io::Error>;

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut res = Response::new(
        Full::new(Bytes::from_static(body.as_bytes()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *res.status_mut() = status;
    res
}

/// One SSE event of `data` (a compact JSON message: no line breaks).
fn event(kind: &str, data: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + kind.len() + 16);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

async fn handle(shared: &Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    match (req.method(), req.uri().path()) {
        (&Method::GET, SSE_PATH) => open_stream(shared),
        (&Method::POST, MESSAGES_PATH) => post(shared, req).await,
        _ => text(StatusCode::NOT_FOUND, "Not Found"),
    }
}

fn open_stream(shared: &Arc<Shared>) -> Response<Body> {
    let n = shared.next_session.fetch_add(1, Ordering::Relaxed);
    let id = format!("{n:016x}");
    let (tx, rx) = mpsc::channel(QUEUE);
    let data = match &shared.config.endpoint {
        Some(e) => e.replace("{session}", &id),
        None => format!("{MESSAGES_PATH}?sessionId={id}"),
    };
    // Room for the first frame: the queue is empty.
    let _ = tx.try_send(Ok(Frame::data(event("endpoint", data.as_bytes()))));
    shared.sessions.lock().expect("sessions lock").insert(
        id,
        LegacySession {
            out: tx,
            asked: HashMap::new(),
            next_ask: 1,
        },
    );
    shared.sessions_opened.fetch_add(1, Ordering::Relaxed);
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|frame| (frame, rx))
    });
    let mut res = Response::new(BodyExt::boxed(StreamBody::new(frames)));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    res
}

fn session_of(req: &Request<Incoming>) -> Option<String> {
    req.uri()
        .query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix("sessionId=").map(str::to_owned))
}

async fn post(shared: &Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let Some(id) = session_of(&req) else {
        return text(StatusCode::BAD_REQUEST, "sessionId missing");
    };
    let out = match shared.sessions.lock().expect("sessions lock").get(&id) {
        Some(s) => s.out.clone(),
        None => return text(StatusCode::NOT_FOUND, "Session not found"),
    };
    let body = match Limited::new(req.into_body(), shared.config.max_request_bytes)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "too large"),
    };
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return text(StatusCode::BAD_REQUEST, "not JSON");
    };
    if message.get("method").is_none() {
        // A response to a server request.
        if let Some(key) = message["id"].as_str() {
            let waiting = shared
                .sessions
                .lock()
                .expect("sessions lock")
                .get_mut(&id)
                .and_then(|s| s.asked.remove(key));
            if let Some(tx) = waiting {
                let _ = tx.send(message);
            }
        }
    } else if message.get("id").is_some() {
        // Answered on the stream, after the 202.
        tokio::spawn(answer(shared.clone(), id, out, message));
    }
    text(StatusCode::ACCEPTED, "Accepted")
}

fn response(id: &Value, result: Value) -> Bytes {
    Bytes::from(
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .expect("a JSON value serializes"),
    )
}

fn error(id: &Value, code: i64, message: &str) -> Bytes {
    Bytes::from(
        serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        )
        .expect("a JSON value serializes"),
    )
}

fn text_result(id: &Value, text: &str) -> Bytes {
    response(
        id,
        json!({"content": [{"type": "text", "text": text}], "isError": false}),
    )
}

fn tool_list() -> Value {
    let mut list = crate::server::tools::tool_list();
    let tools = list["tools"].as_array_mut().expect("a list");
    for (name, description) in [
        (
            "cut_stream",
            "Cuts the session's stream in the middle of the response event.",
        ),
        ("duplicate_response", "Answers twice, differently."),
        ("sleep", "Answers after `ms` milliseconds."),
        (
            "ping_client",
            "Sends the client a ping request and says whether it was answered.",
        ),
    ] {
        tools.push(json!({"name": name, "description": description,
                          "inputSchema": {"type": "object"}}));
    }
    list
}

async fn answer(shared: Arc<Shared>, session: String, out: Frames, message: Value) {
    let id = message["id"].clone();
    let send = |data: Bytes| {
        let out = out.clone();
        async move {
            out.send(Ok(Frame::data(event("message", &data))))
                .await
                .is_ok()
        }
    };
    let method = message["method"].as_str().unwrap_or_default();
    let params = &message["params"];
    match method {
        "initialize" => {
            let asked = params["protocolVersion"].as_str().unwrap_or_default();
            let version = VERSIONS
                .iter()
                .find(|v| **v == asked)
                .copied()
                .unwrap_or(VERSIONS[0]);
            send(response(
                &id,
                json!({"protocolVersion": version, "capabilities": {"tools": {}},
                       "serverInfo": {"name": "ssegate-testkit-legacy", "version": "1"}}),
            ))
            .await;
        }
        "ping" => {
            send(response(&id, json!({}))).await;
        }
        "tools/list" => {
            send(response(&id, tool_list())).await;
        }
        "tools/call" => {
            let name = params["name"].as_str().unwrap_or_default().to_owned();
            *shared
                .calls
                .lock()
                .expect("calls lock")
                .entry(name.clone())
                .or_default() += 1;
            let args = &params["arguments"];
            let token = params["_meta"]["progressToken"].clone();
            let token = if token.is_null() { id.clone() } else { token };
            match name.as_str() {
                "big_result" => {
                    let size = args["size"].as_u64().unwrap_or(DEFAULT_RESULT_SIZE as u64);
                    if size > shared.config.max_result_size as u64 {
                        send(error(&id, -32602, "size over the server's limit")).await;
                        return;
                    }
                    let call = Call {
                        request_id: id.clone(),
                        token,
                        tool: Tool::BigResult {
                            size: size as usize,
                            seed: args["seed"].as_u64().unwrap_or(DEFAULT_SEED),
                            progress: 0,
                        },
                        stateless: false,
                    };
                    for m in call.messages() {
                        send(m).await;
                    }
                }
                "progress" => {
                    let count = args["count"].as_u64().unwrap_or(3);
                    if count > MAX_PROGRESS {
                        send(error(&id, -32602, "count over the server's limit")).await;
                        return;
                    }
                    let call = Call {
                        request_id: id.clone(),
                        token,
                        tool: Tool::Progress { count },
                        stateless: false,
                    };
                    for m in call.messages() {
                        send(m).await;
                    }
                }
                "cut_stream" => {
                    let whole = event("message", &text_result(&id, "never complete"));
                    let _ = out
                        .send(Ok(Frame::data(whole.slice(..whole.len() / 2))))
                        .await;
                    // An error ends the body without its last chunk: the connection is aborted.
                    let _ = out.send(Err(io::Error::other("cut"))).await;
                    shared
                        .sessions
                        .lock()
                        .expect("sessions lock")
                        .remove(&session);
                }
                "sleep" => {
                    let ms = args["ms"].as_u64().unwrap_or(0).min(60_000);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    send(text_result(&id, "slept")).await;
                }
                "duplicate_response" => {
                    send(text_result(&id, "first")).await;
                    send(text_result(&id, "second")).await;
                }
                "ping_client" => {
                    let (tx, rx) = oneshot::channel();
                    let key = {
                        let mut sessions = shared.sessions.lock().expect("sessions lock");
                        let Some(s) = sessions.get_mut(&session) else {
                            return;
                        };
                        let key = format!("srv-{}", s.next_ask);
                        s.next_ask += 1;
                        s.asked.insert(key.clone(), tx);
                        key
                    };
                    let ask = json!({"jsonrpc": "2.0", "id": key, "method": "ping"});
                    send(Bytes::from(serde_json::to_vec(&ask).expect("serializes"))).await;
                    let answered = matches!(
                        tokio::time::timeout(PING_WAIT, rx).await,
                        Ok(Ok(v)) if v.get("result").is_some()
                    );
                    let said = if answered { "pinged" } else { "no answer" };
                    send(text_result(&id, said)).await;
                }
                _ => {
                    send(error(&id, -32602, "unknown tool")).await;
                }
            }
        }
        _ => {
            send(error(&id, -32601, "method not found")).await;
        }
    }
}
