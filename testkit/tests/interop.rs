//! Interop with the official MCP SDKs: the servers in `interop/` (TypeScript SDK, Python SDK),
//! started on loopback as child processes, behind the fault proxy, driven by the guarded client.
//!
//! Every result is checked against an independent model of what the server sends (the
//! deterministic content of `big_result`, the execution counter of `charge`, the progress
//! sequence), so a torn, duplicated or re-run call cannot pass. Cut offsets are measured, not
//! guessed: before cutting a call, the test makes the same call over a raw socket straight to the
//! server, maps the body's SSE events to wire offsets (HTTP head and chunk framing included, as the
//! proxy counts them), and cuts at those offsets.
//!
//! The servers are started by `ssegate_testkit::interop` and installed by `interop/setup`. When they
//! are missing the tests fail if `CI` is set, and otherwise skip with a loud message.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use ssegate::client::{
    CallOptions, Client, ClientConfig, ClientError, Handler, PROTOCOL_2026_07_28, PROTOCOL_VERSION,
    Protocol, Response, Retry,
};
use ssegate::message::{Message, RpcId};
use ssegate_testkit::interop::{Sdk, Server, pattern, start};
use ssegate_testkit::proxy::{Cut, ProxyConfig, RunningProxy};

// ---------------------------------------------------------------------------------------------
// The model of what the servers send

/// The text contents of a successful `tools/call` response; panics on anything else.
fn texts(response: &Response) -> Vec<String> {
    let value: Value = response
        .message
        .deserialize()
        .expect("the response is one JSON value");
    let RpcId::Number(id) = response.request_id else {
        panic!("the client numbers its requests");
    };
    assert_eq!(value["id"], json!(id), "the response answers the request");
    assert_ne!(
        value["result"]["isError"],
        json!(true),
        "a tool error: {}",
        head(&value.to_string())
    );
    value["result"]["content"]
        .as_array()
        .expect("content")
        .iter()
        .map(|c| c["text"].as_str().expect("text content").to_owned())
        .collect()
}

/// The start of a long text, for messages.
fn head(text: &str) -> &str {
    let mut end = text.len().min(300);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Records every notification the client hands to the application.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Value>>>);

impl Handler for Recorder {
    fn notification(&self, message: &Message) {
        let value = message.deserialize().expect("a notification is JSON");
        self.0.lock().unwrap().push(value);
    }
}

impl Recorder {
    fn take(&self) -> Vec<Value> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

// ---------------------------------------------------------------------------------------------
// The wire layout of a response, for choosing cut offsets

/// One SSE event of a response body, in body offsets.
#[derive(Debug)]
struct Event {
    start: usize,
    /// Where the blank line that dispatches it begins.
    blank: usize,
    /// Just after the blank line.
    end: usize,
    id: Option<String>,
    data_len: usize,
}

/// A response as the proxy sees it: the body's events mapped to raw offsets.
struct Layout {
    /// (body offset, raw offset, length) of each chunk of the body.
    chunks: Vec<(usize, usize, usize)>,
    events: Vec<Event>,
}

impl Layout {
    /// The raw offset of body byte `body`: a cut there forwards every byte before it.
    fn raw(&self, body: usize) -> u64 {
        let (b, r, _) = self
            .chunks
            .iter()
            .rev()
            .find(|(b, _, _)| *b <= body)
            .copied()
            .expect("an offset inside the body");
        (r + body - b) as u64
    }

    /// A cut that forwards exactly event `i` and everything before it.
    fn after(&self, i: usize) -> u64 {
        self.raw(self.events[i].end - 1) + 1
    }

    /// The event carrying data `>= min_len` bytes (the result).
    fn event_with_data(&self, min_len: usize) -> &Event {
        self.events
            .iter()
            .find(|e| e.data_len >= min_len)
            .expect("an event with that much data")
    }
}

/// A chunked response as it came off the wire: its head's length and each chunk's data.
struct Wire {
    head_len: usize,
    chunks: Vec<Vec<u8>>,
    /// The JSON-RPC id of the request that got it.
    id: i64,
}

impl Wire {
    /// The layout the same response has when it answers request `id` instead: the servers write
    /// the id into the response's data, so its width moves every later offset (and may change a
    /// chunk's size line).
    fn layout_for(&self, id: i64) -> Layout {
        let from = format!("\"id\":{}", self.id);
        let to = format!("\"id\":{id}");
        let (mut chunks, mut body) = (Vec::new(), Vec::new());
        let mut raw = self.head_len;
        let mut replaced = 0;
        for data in &self.chunks {
            let text = String::from_utf8_lossy(data);
            replaced += text.matches(&from).count();
            let data = text.replace(&from, &to).into_bytes();
            raw += format!("{:x}\r\n", data.len()).len();
            chunks.push((body.len(), raw, data.len()));
            body.extend_from_slice(&data);
            raw += data.len() + 2;
        }
        assert_eq!(replaced, 1, "the response carries its request id once");
        Layout {
            chunks,
            events: parse_events(&body),
        }
    }
}

fn parse_events(body: &[u8]) -> Vec<Event> {
    let mut events = Vec::new();
    let (mut pos, mut start, mut lines) = (0, 0, 0);
    let mut id = None;
    let mut data_len = 0;
    while pos < body.len() {
        let Some(t) = body[pos..].iter().position(|&b| b == b'\n' || b == b'\r') else {
            break;
        };
        let line = &body[pos..pos + t];
        let term = if body[pos + t] == b'\r' && body.get(pos + t + 1) == Some(&b'\n') {
            2
        } else {
            1
        };
        if line.is_empty() {
            if lines > 0 {
                events.push(Event {
                    start,
                    blank: pos,
                    end: pos + term,
                    id: id.take(),
                    data_len,
                });
            }
            lines = 0;
            data_len = 0;
            start = pos + term;
        } else {
            lines += 1;
            if let Some(v) = line.strip_prefix(b"id:") {
                id = Some(String::from_utf8_lossy(v).trim_start().to_owned());
            } else if let Some(v) = line.strip_prefix(b"data:") {
                data_len += v.strip_prefix(b" ").unwrap_or(v).len();
            }
        }
        pos += t + term;
    }
    events
}

/// Sends `body` as the client's session would, straight to the server over a raw socket, and
/// reads the chunked SSE response to its end, as the proxy would count it (HTTP head, chunk
/// framing, body). The request runs the tool once more: only for tools without side effects.
fn wire(server: SocketAddr, client: &Client, body: &Value) -> Wire {
    let id = body["id"].as_i64().expect("a numeric id");
    let body = serde_json::to_vec(body).unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {server}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n",
        body.len()
    );
    if let Some(session) = client.session_id() {
        head.push_str(&format!("mcp-session-id: {session}\r\n"));
    }
    if let Some(version) = client.protocol_version() {
        head.push_str(&format!("mcp-protocol-version: {version}\r\n"));
    }
    head.push_str("\r\n");
    let mut socket = TcpStream::connect(server).expect("connect to the server");
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    socket.write_all(head.as_bytes()).unwrap();
    socket.write_all(&body).unwrap();
    // Read until the chunked body ends (the response stream closes after the response).
    let mut raw = Vec::new();
    let mut buf = vec![0; 1 << 16];
    while !raw.ends_with(b"\r\n0\r\n\r\n") {
        let n = socket.read(&mut buf).expect("read the response");
        assert!(n > 0, "the server closed before the end of the body");
        raw.extend_from_slice(&buf[..n]);
    }
    let head_len = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let head = String::from_utf8_lossy(&raw[..head_len]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    let mut chunks = Vec::new();
    let mut pos = head_len;
    loop {
        let line_end = pos + raw[pos..].windows(2).position(|w| w == b"\r\n").unwrap();
        let size_text = std::str::from_utf8(&raw[pos..line_end]).unwrap();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        let data = line_end + 2;
        chunks.push(raw[data..data + size].to_vec());
        pos = data + size + 2;
    }
    Wire {
        head_len,
        chunks,
        id,
    }
}

// ---------------------------------------------------------------------------------------------
// The harness

struct Rig {
    server: Server,
    proxy: RunningProxy,
    client: Client,
    notes: Recorder,
    /// Raw requests take ids from here, far from the client's.
    raw_id: i64,
    /// The id the client gives its next request: it numbers them from 1, every client call in
    /// these tests goes through the rig, which checks the prediction; unknown after a lost
    /// stream (the client may list tools to decide on a re-issue).
    next_id: Option<i64>,
}

impl Rig {
    /// A rig on the 2025-era path (`initialize` with 2025-11-25, resumable streams), whatever
    /// else the server speaks.
    async fn new(sdk: Sdk, flags: &[&str]) -> Option<Rig> {
        Rig::with(sdk, flags, |c| {
            c.protocol_version(PROTOCOL_VERSION);
        })
        .await
    }

    /// A rig whose client negotiates ([`Protocol::Auto`]).
    async fn auto(sdk: Sdk, flags: &[&str]) -> Option<Rig> {
        Rig::with(sdk, flags, |c| {
            c.protocol(Protocol::Auto);
        })
        .await
    }

    /// A rig whose client settings `adjust` changes.
    async fn with(sdk: Sdk, flags: &[&str], adjust: impl FnOnce(&mut ClientConfig)) -> Option<Rig> {
        let server = start(sdk, flags)?;
        let mut proxy = ProxyConfig::default();
        proxy.accept_delay(Duration::from_millis(50));
        let proxy = proxy.start(server.addr()).await.expect("start the proxy");
        let notes = Recorder::default();
        let mut config = ClientConfig::default();
        config
            .reuse_connections(false)
            .replay_timeout(Duration::from_secs(5))
            .handler(Arc::new(notes.clone()));
        adjust(&mut config);
        let url = format!("http://{}/mcp", proxy.addr());
        let client = Client::connect(&url, config)
            .await
            .unwrap_or_else(|e| panic!("{}: connect: {e}", server.label()));
        Some(Rig {
            server,
            proxy,
            client,
            notes,
            raw_id: 1_000_000,
            next_id: Some(1),
        })
    }

    fn label(&self) -> &str {
        self.server.label()
    }

    /// The layout `tools/call name(arguments)` will have as the client's next request (runs the
    /// tool once more: side-effect-free tools only).
    async fn layout(&mut self, name: &str, arguments: Value, progress: bool) -> Layout {
        self.raw_id += 1;
        let mut params = json!({"name": name, "arguments": arguments});
        if progress {
            params["_meta"] = json!({"progressToken": PROGRESS_TOKEN});
        }
        let body =
            json!({"jsonrpc": "2.0", "id": self.raw_id, "method": "tools/call", "params": params});
        let addr = self.server.addr();
        let client = self.client.clone();
        let wire = tokio::task::spawn_blocking(move || wire(addr, &client, &body))
            .await
            .unwrap();
        wire.layout_for(self.next_id.expect("the client's next id is known"))
    }

    /// `tools/call` through the proxy, the next connection cut at `cut` bytes; with a progress
    /// token when `progress`.
    async fn call(
        &mut self,
        cut: Option<u64>,
        name: &str,
        arguments: Value,
        progress: bool,
    ) -> CallResult {
        let before = self.proxy.stats().cuts;
        if let Some(n) = cut {
            self.proxy.set_next_cut(Cut::At(n));
        }
        let mut options = CallOptions::default();
        if progress {
            options.progress_token(RpcId::String(PROGRESS_TOKEN.into()));
        }
        let id = self.next_id;
        let result = self
            .client
            .call_with(
                "tools/call",
                json!({"name": name, "arguments": arguments}),
                &options,
            )
            .await;
        self.proxy.clear_cuts();
        if cut.is_some() {
            assert!(
                self.proxy.stats().cuts > before,
                "{}: the proxy did not cut {name}",
                self.label()
            );
        }
        self.next_id = match (&result, id) {
            (Ok(r), Some(id)) => {
                assert_eq!(r.request_id, RpcId::Number(id), "the harness predicts ids");
                (r.outcome.renegotiations == 0).then_some(id + 1)
            }
            _ => None,
        };
        result
    }

    async fn call_cut(&mut self, cut: Option<u64>, name: &str, arguments: Value) -> CallResult {
        self.call(cut, name, arguments, false).await
    }

    async fn count(&mut self) -> u64 {
        let response = self
            .call(None, "count", json!({}), false)
            .await
            .expect("count");
        texts(&response)[0].parse().expect("a number")
    }
}

const PROGRESS_TOKEN: &str = "p";

type CallResult = Result<Response, ClientError>;

/// A `big_result` response that must carry exactly `size` bytes of the pattern.
fn assert_big(label: &str, case: &str, result: CallResult, size: usize) -> Response {
    let response = result.unwrap_or_else(|e| panic!("{label}: {case}: {e}"));
    let t = texts(&response);
    assert_eq!(t.len(), 1, "{label}: {case}: one content");
    assert!(
        t[0] == pattern(size),
        "{label}: {case}: the result is not intact"
    );
    response
}

/// Resumed in place: at least one resume, no second run.
fn assert_in_place(label: &str, case: &str, response: &Response) {
    let o = &response.outcome;
    assert!(o.resumes > 0, "{label}: {case}: not resumed: {o:?}");
    assert_eq!(o.renegotiations, 0, "{label}: {case}: renegotiated: {o:?}");
    assert_eq!(o.attempts, 1, "{label}: {case}: re-issued: {o:?}");
}

// ---------------------------------------------------------------------------------------------
// The scenarios

const SIZE: usize = 1 << 20;

/// `big_result` cut in the middle of its result event and at event boundaries, `charge` cut mid
/// result, and `progress` cut between notifications and inside one: every one resumed in place.
async fn resumes_in_place(sdk: Sdk) {
    let Some(mut rig) = Rig::new(sdk, &[]).await else {
        return;
    };
    let label = rig.label().to_owned();
    assert!(rig.client.session_id().is_some(), "{label}: a session");
    assert_eq!(rig.client.protocol_version().as_deref(), Some("2025-11-25"));

    // The whole 4 MiB default, cut in its middle.
    let l = rig.layout("big_result", json!({}), false).await;
    let result = l.event_with_data(4 << 20);
    let cut = l.raw(result.start + (result.end - result.start) / 2);
    let r = rig.call_cut(Some(cut), "big_result", json!({})).await;
    let r = assert_big(&label, "4 MiB cut in the middle", r, 4 << 20);
    assert_in_place(&label, "4 MiB cut in the middle", &r);

    // 1 MiB at several offsets.
    let args = json!({"size": SIZE});
    let l = rig.layout("big_result", args.clone(), false).await;
    assert!(
        l.events[0].data_len == 0 && l.events[0].id.is_some(),
        "{label}: a priming event first: {:?}",
        l.events
    );
    let result = l.event_with_data(SIZE);
    let cuts = [
        ("at the boundary after the priming event", l.after(0)),
        ("one byte into the result event", l.raw(result.start + 1)),
        ("inside the result's id line", l.raw(result.start + 5)),
        (
            "in the middle of the result event",
            l.raw(result.start + SIZE / 2),
        ),
        ("before the result's blank line", l.raw(result.blank)),
    ];
    for (case, cut) in cuts {
        let r = rig.call_cut(Some(cut), "big_result", args.clone()).await;
        let r = assert_big(&label, case, r, SIZE);
        assert_in_place(&label, case, &r);
    }

    // charge (not idempotent) cut in the middle of its result: resumed, ran once.
    let before = rig.count().await;
    let receipt = 256 << 10;
    let r = rig
        .call_cut(Some(receipt as u64 / 2), "charge", json!({"size": receipt}))
        .await
        .unwrap_or_else(|e| panic!("{label}: charge cut mid-result: {e}"));
    assert_in_place(&label, "charge cut mid-result", &r);
    let t = texts(&r);
    assert_eq!(t[0], format!("charged {}", before + 1), "{label}");
    assert!(
        t[1] == pattern(receipt),
        "{label}: the receipt is not intact"
    );
    assert_eq!(rig.count().await, before + 1, "{label}: charge ran twice");

    // progress: notifications before the result, each exactly once, with cuts.
    let args = json!({"count": 5, "delay_ms": 20});
    let l = rig.layout("progress", args.clone(), true).await;
    assert_eq!(l.events.len(), 7, "{label}: priming, 5 progress, result");
    let cuts = [
        (None, "uncut"),
        (
            Some(l.after(2)),
            "at the boundary after the 2nd notification",
        ),
        (
            Some(l.raw(l.events[4].start + 20)),
            "inside the 4th notification",
        ),
    ];
    for (cut, case) in cuts {
        rig.notes.take();
        let r = rig
            .call(cut, "progress", args.clone(), true)
            .await
            .unwrap_or_else(|e| panic!("{label}: progress {case}: {e}"));
        assert_eq!(texts(&r), ["done 5"], "{label}: progress {case}");
        if cut.is_some() {
            assert_in_place(&label, case, &r);
        }
        let progress: Vec<f64> = rig
            .notes
            .take()
            .iter()
            .filter(|n| n["method"] == "notifications/progress")
            .map(|n| {
                assert_eq!(n["params"]["progressToken"], PROGRESS_TOKEN, "{label}");
                n["params"]["progress"].as_f64().unwrap()
            })
            .collect();
        assert_eq!(
            progress,
            [1.0, 2.0, 3.0, 4.0, 5.0],
            "{label}: progress {case}: every notification exactly once, in order, before the result"
        );
    }
    rig.client.clone().close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_resumes_in_place() {
    resumes_in_place(Sdk::Ts).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_resumes_in_place() {
    resumes_in_place(Sdk::Py).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_resumes_in_place() {
    resumes_in_place(Sdk::FastMcp).await;
}

/// A lost buffer (the store forgets everything): a cut result cannot be resumed. `charge` is not
/// safe to re-run: a typed refusal, and it ran once; `big_result` (readOnlyHint) is renegotiated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_lost_buffer_refuses_or_renegotiates() {
    let Some(mut rig) = Rig::new(Sdk::Py, &["--forgetful"]).await else {
        return;
    };
    let label = rig.label().to_owned();
    let before = rig.count().await;
    let receipt = 256 << 10;
    match rig
        .call_cut(Some(receipt as u64 / 2), "charge", json!({"size": receipt}))
        .await
    {
        Err(ClientError::OutcomeUnknown {
            failure, method, ..
        }) => {
            assert_eq!(method, "tools/call charge", "{label}");
            assert!(failure.must_renegotiate(), "{label}: {failure}");
        }
        other => panic!("{label}: charge on a lost buffer: {other:?}"),
    }
    assert_eq!(rig.count().await, before + 1, "{label}: charge re-run");

    let r = rig
        .call_cut(Some(SIZE as u64 / 2), "big_result", json!({"size": SIZE}))
        .await;
    let r = assert_big(&label, "lost buffer", r, SIZE);
    assert_eq!(r.outcome.renegotiations, 1, "{label}: {:?}", r.outcome);
    assert_eq!(r.outcome.attempts, 2, "{label}: {:?}", r.outcome);
    assert_eq!(rig.client.sessions_opened(), 2, "{label}");
}

/// `stateless_http=True`: no session, no event store. Calls work; a cut result has nothing to
/// resume from: re-issued when safe, refused otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_stateless() {
    let Some(mut rig) = Rig::new(Sdk::Py, &["--stateless"]).await else {
        return;
    };
    let label = rig.label().to_owned();
    assert_eq!(rig.client.session_id(), None, "{label}: no Mcp-Session-Id");
    let r = rig
        .call(None, "echo", json!({"text": "héllo"}), false)
        .await
        .expect("echo");
    assert_eq!(texts(&r), ["héllo"]);
    let r = rig
        .call_cut(None, "big_result", json!({"size": SIZE}))
        .await;
    let r = assert_big(&label, "uncut", r, SIZE);
    assert_eq!(r.outcome.attempts, 1);

    let r = rig
        .call_cut(Some(SIZE as u64 / 2), "big_result", json!({"size": SIZE}))
        .await;
    let r = assert_big(&label, "stateless cut", r, SIZE);
    assert_eq!(r.outcome.renegotiations, 1, "{label}: {:?}", r.outcome);

    let before = rig.count().await;
    let receipt = 256 << 10;
    let e = rig
        .call_cut(Some(receipt as u64 / 2), "charge", json!({"size": receipt}))
        .await
        .expect_err("charge cannot be resumed without ids");
    assert!(
        matches!(e, ClientError::OutcomeUnknown { .. }),
        "{label}: {e}"
    );
    assert_eq!(rig.count().await, before + 1, "{label}: charge re-run");
    assert_eq!(rig.client.session_id(), None, "{label}");
}

/// A response cut before its HTTP head was complete (the request was sent, the tool ran): nothing
/// can be resumed. `big_result` (readOnlyHint) is re-issued on a new session; `charge` is refused
/// as `OutcomeUnknown`, and ran once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_cut_before_its_head() {
    for sdk in [Sdk::Ts, Sdk::Py] {
        let Some(mut rig) = Rig::new(sdk, &[]).await else {
            continue;
        };
        let label = rig.label().to_owned();
        for cut in [0, 12, 60] {
            let case = format!("cut at byte {cut} of the head");
            let r = rig
                .call_cut(Some(cut), "big_result", json!({"size": 4096}))
                .await;
            let r = assert_big(&label, &case, r, 4096);
            assert_eq!(
                r.outcome.renegotiations, 1,
                "{label}: {case}: {:?}",
                r.outcome
            );
            let before = rig.count().await;
            match rig.call_cut(Some(cut), "charge", json!({})).await {
                Err(ClientError::OutcomeUnknown { method, .. }) => {
                    assert_eq!(method, "tools/call charge", "{label}: {case}");
                }
                other => panic!("{label}: {case}: charge: {other:?}"),
            }
            assert_eq!(
                rig.count().await,
                before + 1,
                "{label}: {case}: charge re-run"
            );
        }
    }
}

/// Offered 2025-06-18, neither SDK sends a priming event: the result is the first event of its
/// stream, and a cut inside it leaves no id to resume from. Why the client offers 2025-11-25.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_2025_06_18_cannot_resume_a_cut_result() {
    for sdk in [Sdk::Ts, Sdk::Py] {
        let Some(mut rig) = Rig::with(sdk, &[], |c| {
            c.protocol_version("2025-06-18");
        })
        .await
        else {
            continue;
        };
        let label = rig.label().to_owned();
        assert_eq!(rig.client.protocol_version().as_deref(), Some("2025-06-18"));
        let l = rig.layout("big_result", json!({"size": SIZE}), false).await;
        assert_eq!(
            l.events.len(),
            1,
            "{label}: no priming event: {:?}",
            l.events
        );
        let r = rig
            .call_cut(Some(SIZE as u64 / 2), "big_result", json!({"size": SIZE}))
            .await;
        let r = assert_big(&label, "2025-06-18", r, SIZE);
        assert_eq!(r.outcome.renegotiations, 1, "{label}: {:?}", r.outcome);
        let before = rig.count().await;
        let e = rig
            .call_cut(Some(SIZE as u64 / 2), "charge", json!({"size": SIZE}))
            .await
            .expect_err("nothing to resume from");
        assert!(
            matches!(e, ClientError::OutcomeUnknown { .. }),
            "{label}: {e}"
        );
        assert_eq!(rig.count().await, before + 1, "{label}: charge re-run");
    }
}

/// Two calls at once on one session, both cut in the middle of their results: each stream is
/// resumed in place on its own and each result arrives intact, answering its own request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_resume_independently() {
    for sdk in [Sdk::Ts, Sdk::Py] {
        let Some(mut rig) = Rig::new(sdk, &[]).await else {
            continue;
        };
        let label = rig.label().to_owned();
        let (small, large) = (256 << 10, SIZE);
        // The next two connections are the two POSTs; each is cut in its result's middle.
        rig.proxy.set_next_cut(Cut::At(small as u64 / 2));
        rig.proxy.set_next_cut(Cut::At(small as u64 / 2));
        let (a, b) = tokio::join!(
            rig.client
                .call_tool("big_result", json!({"size": small}), Retry::IfSafe),
            rig.client
                .call_tool("big_result", json!({"size": large}), Retry::IfSafe),
        );
        rig.next_id = None;
        assert_eq!(rig.proxy.stats().cuts, 2, "{label}: both cut");
        let a = assert_big(&label, "concurrent A", a, small);
        let b = assert_big(&label, "concurrent B", b, large);
        assert_ne!(a.request_id, b.request_id);
        assert_in_place(&label, "concurrent A", &a);
        assert_in_place(&label, "concurrent B", &b);
        assert_eq!(rig.client.sessions_opened(), 1, "{label}");
    }
}

/// Answers the server's requests: `ping` (as the default handler does) and `sampling/createMessage`.
#[derive(Clone, Default)]
struct Sampler(Arc<Mutex<Vec<String>>>);

impl Handler for Sampler {
    fn request(&self, method: &str, params: Option<&Value>) -> ssegate::client::HandlerFuture {
        self.0.lock().unwrap().push(method.to_owned());
        let answer = match method {
            "ping" => Ok(json!({})),
            "sampling/createMessage" => {
                let asked = params
                    .and_then(|p| p["messages"][0]["content"]["text"].as_str())
                    .unwrap_or_default()
                    .to_owned();
                Ok(
                    json!({"role": "assistant", "model": "test", "stopReason": "endTurn",
                          "content": {"type": "text", "text": format!("{asked}: forty-two")}}),
                )
            }
            _ => Err(ssegate::client::RpcError::new(-32601, "not here")),
        };
        Box::pin(async move { answer })
    }
}

/// A server request on the response stream (ping, then sampling) reaches the application's handler
/// and its answer reaches the server, which then completes the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_requests_are_answered_through_the_handler() {
    let sampler = Sampler::default();
    let seen = sampler.clone();
    let Some(rig) = Rig::with(Sdk::Py, &[], move |c| {
        // Server requests on response streams: the 2025-era path (2026-07-28 has none).
        c.protocol_version(PROTOCOL_VERSION);
        c.handler(Arc::new(sampler));
    })
    .await
    else {
        return;
    };
    let response = tokio::time::timeout(
        Duration::from_secs(30),
        rig.client
            .call_tool("ask", json!({"question": "the answer"}), Retry::IfSafe),
    )
    .await
    .expect("the call does not hang")
    .expect("the call succeeds");
    assert_eq!(texts(&response), ["client said: the answer: forty-two"]);
    assert_eq!(*seen.0.lock().unwrap(), ["sampling/createMessage"]);

    // A request the server sends outside any call goes on the standalone GET stream, which the
    // application opens with `listen()`: it is answered there, and the call goes on.
    let listening = rig.client.listen().await.expect("the GET stream opens");
    let listener = tokio::spawn(async move {
        futures::pin_mut!(listening);
        while let Some(item) = futures::StreamExt::next(&mut listening).await {
            if item.is_err() {
                break;
            }
        }
    });
    let response = tokio::time::timeout(
        Duration::from_secs(30),
        rig.client.call_tool(
            "ask",
            json!({"question": "again", "ping": true}),
            Retry::IfSafe,
        ),
    )
    .await
    .expect("the call does not hang")
    .expect("the call succeeds");
    assert_eq!(texts(&response), ["client said: again: forty-two"]);
    assert_eq!(
        *seen.0.lock().unwrap(),
        ["sampling/createMessage", "ping", "sampling/createMessage"]
    );
    listener.abort();
}

// ---------------------------------------------------------------------------------------------
// MCP 2026-07-28: stateless, no resumption

/// The client negotiates the newest protocol each server speaks: 2026-07-28 with the Python SDK
/// and `@modelcontextprotocol/server` 2.x, the `initialize` handshake (2025-11-25) with
/// `@modelcontextprotocol/sdk` 1.x.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_server_gets_the_newest_protocol_it_speaks() {
    for (sdk, version, stateless) in [
        (Sdk::Ts, PROTOCOL_VERSION, false),
        (Sdk::Py, PROTOCOL_2026_07_28, true),
        (Sdk::Ts2026, PROTOCOL_2026_07_28, true),
    ] {
        let Some(rig) = Rig::auto(sdk, &[]).await else {
            continue;
        };
        let label = rig.label().to_owned();
        assert_eq!(
            rig.client.protocol_version().as_deref(),
            Some(version),
            "{label}"
        );
        assert_eq!(rig.client.is_stateless(), stateless, "{label}");
        assert_eq!(rig.client.discover_result().is_some(), stateless, "{label}");
        if stateless {
            assert_eq!(rig.client.session_id(), None, "{label}");
        }
        let r = rig
            .client
            .call_tool("echo", json!({"text": "héllo"}), Retry::IfSafe)
            .await
            .unwrap_or_else(|e| panic!("{label}: echo: {e}"));
        assert_eq!(texts(&r), ["héllo"], "{label}");
        rig.client.clone().close().await.expect("close");
    }
}

/// A `tools/call` through the proxy, its response cut at `cut` bytes (when given).
async fn cut_call(
    rig: &Rig,
    cut: Option<u64>,
    name: &str,
    arguments: Value,
    retry: Retry,
) -> CallResult {
    if let Some(n) = cut {
        rig.proxy.set_next_cut(Cut::At(n));
    }
    let before = rig.proxy.stats().cuts;
    let mut options = CallOptions::default();
    options.retry(retry);
    let result = rig
        .client
        .call_with(
            "tools/call",
            json!({"name": name, "arguments": arguments}),
            &options,
        )
        .await;
    rig.proxy.clear_cuts();
    if cut.is_some() {
        assert!(rig.proxy.stats().cuts > before, "{}: no cut", rig.label());
    }
    result
}

/// Through the fault proxy, a 4 MiB result cut in the middle on 2026-07-28 (a JSON body, or one
/// SSE event): nothing is resumed; a read-only tool is issued again as a new request and its
/// result arrives intact; a tool that is not idempotent is `OutcomeUnknown` and ran once (its
/// counter says so); the same tool marked retryable by the caller is issued again and ran twice.
async fn stateless_cuts(sdk: Sdk, flags: &[&str]) {
    let Some(rig) = Rig::auto(sdk, flags).await else {
        return;
    };
    let label = rig.label().to_owned();
    assert!(rig.client.is_stateless(), "{label}: not on 2026-07-28");
    // Known before any cut: the client lists tools once to learn their annotations and headers.
    rig.client.list_tools().await.expect("tools/list");
    let big = 4 << 20;
    let count = || async {
        let r = cut_call(&rig, None, "count", json!({}), Retry::IfSafe)
            .await
            .expect("count");
        texts(&r)[0].parse::<u64>().expect("a number")
    };

    let r = cut_call(
        &rig,
        None,
        "big_result",
        json!({"size": big}),
        Retry::IfSafe,
    )
    .await;
    let r = assert_big(&label, "uncut", r, big);
    assert_eq!(r.outcome.attempts, 1, "{label}: {:?}", r.outcome);

    let r = cut_call(
        &rig,
        Some(big as u64 / 2),
        "big_result",
        json!({"size": big}),
        Retry::IfSafe,
    )
    .await;
    let r = assert_big(&label, "read-only, cut", r, big);
    assert_eq!(r.outcome.attempts, 2, "{label}: {:?}", r.outcome);
    assert_eq!(r.outcome.resumes, 0, "{label}: resumed on 2026-07-28");
    assert_eq!(r.outcome.refusals.len(), 1, "{label}: {:?}", r.outcome);

    let before = count().await;
    let e = cut_call(
        &rig,
        Some(big as u64 / 2),
        "charge",
        json!({"size": big}),
        Retry::IfSafe,
    )
    .await
    .expect_err("a cut charge cannot be delivered");
    assert!(
        matches!(e, ClientError::OutcomeUnknown { .. }),
        "{label}: {e}"
    );
    assert_eq!(count().await, before + 1, "{label}: charge ran again");

    let r = cut_call(
        &rig,
        Some(big as u64 / 2),
        "charge",
        json!({"size": big}),
        Retry::Always,
    )
    .await
    .unwrap_or_else(|e| panic!("{label}: retryable charge: {e}"));
    let t = texts(&r);
    assert_eq!(t[0], format!("charged {}", before + 3), "{label}");
    assert!(t[1] == pattern(big), "{label}: the receipt is not intact");
    assert_eq!(r.outcome.attempts, 2, "{label}: {:?}", r.outcome);
    assert_eq!(
        count().await,
        before + 3,
        "{label}: ran once cut, once whole"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_2026_07_28_cuts() {
    stateless_cuts(Sdk::Py, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_server_2026_07_28_cuts_json() {
    stateless_cuts(Sdk::Ts2026, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_server_2026_07_28_cuts_sse() {
    stateless_cuts(Sdk::Ts2026, &["--response-mode", "sse"]).await;
}
