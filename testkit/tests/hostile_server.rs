//! The hostile MCP server, driven by hand-written HTTP/1.1 requests over raw loopback TCP.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use ssegate_testkit::hostile::{
    Framing, Hit, HostileServer, IdShape, Limits, Misbehaviour, PROTOCOL_VERSION, SESSION_ID,
};

/// The bound on any single wait in these tests.
const WAIT: Duration = Duration::from_secs(3);
const MIB: u64 = 1 << 20;

/// Sends one request on a fresh connection and returns the connection.
async fn send(addr: SocketAddr, method: &str, extra: &[(&str, &str)], body: &[u8]) -> TcpStream {
    let mut stream = tokio::time::timeout(WAIT, TcpStream::connect(addr))
        .await
        .expect("connect in time")
        .expect("connect");
    let mut req = format!("{method} /mcp HTTP/1.1\r\nhost: {addr}\r\n");
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() {
        req.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    stream.write_all(&bytes).await.expect("write request");
    stream
}

/// POSTs a JSON-RPC message.
async fn post(addr: SocketAddr, msg: &Value) -> TcpStream {
    let body = serde_json::to_vec(msg).unwrap();
    send(
        addr,
        "POST",
        &[("accept", "application/json, text/event-stream")],
        &body,
    )
    .await
}

fn call(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "t", "arguments": {}}})
}

fn list(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
}

/// Reads until `limit` bytes, the end, or `time` passed; returns the bytes and whether the end came.
async fn read_for(stream: &mut TcpStream, limit: usize, time: Duration) -> (Vec<u8>, bool) {
    let deadline = tokio::time::Instant::now() + time;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    while out.len() < limit {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return (out, false),
            Ok(Ok(0)) | Ok(Err(_)) => return (out, true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n.min(limit - out.len())]),
        }
    }
    (out, false)
}

/// Reads the whole answer (to the server's close, within [`WAIT`], at most 64 MiB).
async fn read_all(stream: &mut TcpStream) -> Vec<u8> {
    let (out, ended) = read_for(stream, 64 << 20, WAIT).await;
    assert!(ended, "the answer did not end ({} bytes read)", out.len());
    out
}

/// Reads and discards up to `n` bytes; returns how many came.
async fn discard(stream: &mut TcpStream, n: u64) -> u64 {
    let mut buf = vec![0u8; 256 << 10];
    let mut got = 0u64;
    while got < n {
        match tokio::time::timeout(WAIT, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(k)) => got += k as u64,
        }
    }
    got
}

/// A parsed answer head.
#[derive(Debug)]
struct Head {
    status: u16,
    headers: Vec<(String, String)>,
}

impl Head {
    fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Splits an answer into its head and the body bytes that follow it.
fn split(answer: &[u8]) -> (Head, &[u8]) {
    let end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete head");
    let text = std::str::from_utf8(&answer[..end]).expect("a UTF-8 head");
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|s| s.get(..3))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("status line {status_line:?}"));
    let headers = lines
        .map(|l| {
            let (k, v) = l.split_once(':').expect("a header line");
            (k.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    (Head { status, headers }, &answer[end + 4..])
}

/// Reads one head (and whatever body bytes came with it).
async fn read_head(stream: &mut TcpStream) -> (Head, Vec<u8>) {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if got.windows(4).any(|w| w == b"\r\n\r\n") {
            let (head, body) = split(&got);
            return (head, body.to_vec());
        }
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .expect("a head in time")
            .expect("read");
        assert!(
            n > 0,
            "closed before the head's end: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
}

/// One whole exchange: head and body.
async fn exchange(addr: SocketAddr, msg: &Value) -> (Head, Vec<u8>) {
    let mut stream = post(addr, msg).await;
    let answer = read_all(&mut stream).await;
    let (head, body) = split(&answer);
    (head, body.to_vec())
}

/// Waits until `bytes_written` is stable for 100 ms; returns the value and the time it took.
async fn settle(server: &HostileServer) -> (u64, Duration) {
    let start = Instant::now();
    let mut last = server.bytes_written();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = server.bytes_written();
        if now == last {
            return (now, start.elapsed());
        }
        assert!(start.elapsed() < WAIT, "bytes_written keeps growing");
        last = now;
    }
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("UTF-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn honest_answers_and_recording() {
    let server = HostileServer::start(Misbehaviour::Honest).await.unwrap();
    let addr = server.addr();
    assert_eq!(server.url(), format!("http://{addr}/mcp"));

    // initialize with a string id and a custom header.
    let init = json!({"jsonrpc": "2.0", "id": "init-1", "method": "initialize", "params": {}});
    let mut stream = send(
        addr,
        "POST",
        &[("x-api-key", "sekrit"), ("X-Mixed-Case", "Value")],
        &serde_json::to_vec(&init).unwrap(),
    )
    .await;
    let answer = read_all(&mut stream).await;
    let (head, body) = split(&answer);
    assert_eq!(head.status, 200);
    assert_eq!(head.get("content-type"), Some("application/json"));
    assert_eq!(head.get("mcp-session-id"), Some(SESSION_ID));
    assert_eq!(head.get("connection"), Some("close"));
    assert_eq!(
        head.get("content-length"),
        Some(body.len().to_string().as_str())
    );
    let body: Value = serde_json::from_slice(body).unwrap();
    assert_eq!(
        body,
        json!({"jsonrpc": "2.0", "id": "init-1", "result": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "0"},
        }})
    );

    // A notification and a response: 202, no body.
    for msg in [
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 9, "result": {}}),
    ] {
        let (head, body) = exchange(addr, &msg).await;
        assert_eq!(head.status, 202, "{msg}");
        assert!(body.is_empty());
    }

    // tools/list.
    let (head, body) = exchange(addr, &list(json!(2))).await;
    assert_eq!(head.status, 200);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["id"], json!(2));
    assert_eq!(
        body["result"]["tools"],
        json!([{"name": "t", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": false}}])
    );

    // tools/call: the SSE stream, close-delimited.
    let (head, body) = exchange(addr, &call(json!(3))).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.get("content-type"), Some("text/event-stream"));
    assert_eq!(head.get("content-length"), None);
    assert_eq!(head.get("transfer-encoding"), None);
    assert_eq!(
        text(&body),
        "id: 0\ndata:\n\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\n\n"
    );

    // GET (with and without Last-Event-ID), DELETE, PUT, another path.
    for (method, extra, status) in [
        ("GET", &[][..], 405),
        ("GET", &[("last-event-id", "0")][..], 405),
        ("DELETE", &[][..], 200),
        ("PUT", &[][..], 404),
    ] {
        let mut stream = send(addr, method, extra, b"").await;
        let (head, _) = split(&read_all(&mut stream).await);
        assert_eq!(head.status, status, "{method} {extra:?}");
    }
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"POST /other HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}")
        .await
        .unwrap();
    assert_eq!(split(&read_all(&mut stream).await).0.status, 404);

    // The recording.
    let requests = server.requests();
    assert_eq!(requests.len(), 10);
    let first = &requests[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/mcp");
    assert_eq!(first.host.as_deref(), Some(addr.to_string().as_str()));
    assert_eq!(first.header("x-api-key"), Some("sekrit"));
    assert!(
        first
            .headers
            .contains(&("x-mixed-case".to_owned(), "Value".to_owned()))
    );
    assert_eq!(first.body, serde_json::to_vec(&init).unwrap());
    assert_eq!(first.rpc_method().as_deref(), Some("initialize"));
    assert_eq!(first.status, Some(200));
    let statuses: Vec<_> = requests.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [200, 202, 202, 200, 200, 405, 405, 200, 404, 404].map(Some)
    );
    assert_eq!(requests[6].header("last-event-id"), Some("0"));
    assert_eq!(requests[9].path, "/other");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests() {
    let server = HostileServer::start(Misbehaviour::Honest).await.unwrap();
    let addr = server.addr();
    // A head over 64 KiB: closed without an answer, not recorded.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let big = format!(
        "GET /mcp HTTP/1.1\r\nx-big: {}\r\n\r\n",
        "b".repeat(70 << 10)
    );
    let _ = stream.write_all(big.as_bytes()).await;
    let (answer, ended) = read_for(&mut stream, 1 << 20, WAIT).await;
    assert!(
        ended && answer.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    // A body over 1 MiB: 413.
    let mut stream = send(addr, "POST", &[("content-length", "2000000")], b"").await;
    assert_eq!(split(&read_all(&mut stream).await).0.status, 413);
    // Not JSON-RPC: 400; not HTTP: 400.
    let mut stream = send(addr, "POST", &[], b"[1,2]").await;
    assert_eq!(split(&read_all(&mut stream).await).0.status, 400);
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(b"hello\r\n\r\n").await.unwrap();
    assert_eq!(split(&read_all(&mut stream).await).0.status, 400);
    let statuses: Vec<_> = server.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [Some(413), Some(400)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_body_is_endless_and_stops_when_the_peer_closes() {
    let server = HostileServer::start(Misbehaviour::ErrorBody { on: Hit::ToolsCall })
        .await
        .unwrap();
    let addr = server.addr();
    // Not hit: honest.
    let (head, _) = exchange(addr, &list(json!(1))).await;
    assert_eq!(head.status, 200);

    let mut stream = post(addr, &call(json!(2))).await;
    let (head, body) = read_head(&mut stream).await;
    assert_eq!(head.status, 500);
    assert_eq!(head.get("content-type"), Some("text/plain"));
    assert_eq!(head.get("content-length"), None);
    let (more, ended) = read_for(&mut stream, 4096, WAIT).await;
    assert!(!ended);
    let start: Vec<u8> = body.iter().chain(more.iter()).copied().take(60).collect();
    assert_eq!(text(&start), "error ".repeat(10));
    let got = discard(&mut stream, 16 * MIB).await;
    assert!(got >= 16 * MIB, "only {got} bytes");
    assert!(server.bytes_written() >= 16 * MIB);
    drop(stream);
    let (stable, took) = settle(&server).await;
    assert!(took < Duration::from_secs(1), "took {took:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.bytes_written(), stable);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_body_on_each_hit() {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}});
    for hit in [
        Hit::Initialize,
        Hit::ToolsList,
        Hit::ToolsCall,
        Hit::Get,
        Hit::Delete,
    ] {
        let server = HostileServer::start(Misbehaviour::ErrorBody { on: hit })
            .await
            .unwrap();
        let addr = server.addr();
        let rpc = |v: &Value| serde_json::to_vec(v).unwrap();
        let no_headers: &[(&str, &str)] = &[];
        let requests = [
            ("POST", no_headers, rpc(&init), Hit::Initialize),
            ("POST", no_headers, rpc(&list(json!(1))), Hit::ToolsList),
            ("POST", no_headers, rpc(&call(json!(2))), Hit::ToolsCall),
            ("GET", no_headers, Vec::new(), Hit::Get),
            ("GET", &[("last-event-id", "3")], Vec::new(), Hit::Get),
            ("DELETE", no_headers, Vec::new(), Hit::Delete),
        ];
        for (method, extra, body, which) in requests {
            let mut stream = send(addr, method, extra, &body).await;
            let (head, _) = read_head(&mut stream).await;
            if which == hit {
                assert_eq!(head.status, 500, "{hit:?} {method}");
                assert!(discard(&mut stream, MIB).await >= MIB);
            } else {
                assert_ne!(head.status, 500, "{hit:?} {method}");
                let (_, ended) = read_for(&mut stream, 1 << 20, WAIT).await;
                assert!(ended);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_stop_a_body() {
    // The byte cap.
    let limits = Limits {
        max_body_bytes: MIB + 7,
        ..Limits::default()
    };
    let server = HostileServer::start_with(Misbehaviour::ErrorBody { on: Hit::Get }, limits)
        .await
        .unwrap();
    let mut stream = send(server.addr(), "GET", &[], b"").await;
    let answer = read_all(&mut stream).await;
    let (head, body) = split(&answer);
    assert_eq!(head.status, 500);
    assert_eq!(body.len() as u64, MIB + 7);
    assert_eq!(server.bytes_written(), MIB + 7);

    // The time cap, on a trickle.
    let limits = Limits {
        max_duration: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = HostileServer::start_with(
        Misbehaviour::EndlessPriming {
            every: Duration::from_millis(20),
        },
        limits,
    )
    .await
    .unwrap();
    let started = Instant::now();
    let mut stream = post(server.addr(), &call(json!(1))).await;
    let answer = read_all(&mut stream).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(2),
        "{took:?}"
    );
    let (_, body) = split(&answer);
    assert!(text(body).starts_with("id: 0\ndata:\n\nid: 1\ndata:\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_json_is_exactly_long_and_never_closed() {
    let bytes = 5 * MIB + 3;
    let server = HostileServer::start(Misbehaviour::HugeJson { bytes })
        .await
        .unwrap();
    let (head, body) = exchange(server.addr(), &list(json!("L"))).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.get("content-type"), Some("application/json"));
    assert_eq!(head.get("content-length"), None);
    assert_eq!(body.len() as u64, bytes);
    let prefix = r#"{"jsonrpc":"2.0","id":"L","result":{"pad":""#;
    assert!(body.starts_with(prefix.as_bytes()));
    assert!(body[prefix.len()..].iter().all(|&b| b == b'a'));
    assert!(serde_json::from_slice::<Value>(&body).is_err());
    assert_eq!(server.bytes_written(), bytes);
    // tools/call stays honest.
    let (head, _) = exchange(server.addr(), &call(json!(1))).await;
    assert_eq!(head.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_data_line_has_no_newline() {
    let server = HostileServer::start(Misbehaviour::EndlessDataLine)
        .await
        .unwrap();
    let mut stream = post(server.addr(), &call(json!(4))).await;
    let (head, mut body) = read_head(&mut stream).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.get("content-type"), Some("text/event-stream"));
    let (more, _) = read_for(&mut stream, 8 * MIB as usize, WAIT).await;
    body.extend_from_slice(&more);
    assert!(body.len() as u64 >= 8 * MIB);
    let start = "id: 0\ndata:\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{\"text\":\"";
    assert!(body.starts_with(start.as_bytes()));
    assert!(body[start.len()..].iter().all(|&b| b == b'x'));
    drop(stream);
    settle(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_loris_trickles_comments() {
    let every = Duration::from_millis(20);
    let server = HostileServer::start(Misbehaviour::SlowLoris { every })
        .await
        .unwrap();
    let mut stream = post(server.addr(), &call(json!(1))).await;
    let started = Instant::now();
    let (head, mut body) = read_head(&mut stream).await;
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(head.status, 200);
    assert_eq!(head.get("content-type"), Some("text/event-stream"));
    let (more, ended) = read_for(&mut stream, 1 << 20, Duration::from_millis(600)).await;
    assert!(!ended);
    body.extend_from_slice(&more);
    // About 30 bytes in 600 ms; allow for a slow machine.
    assert!(body.len() >= 13 && body.len() <= 40, "{} bytes", body.len());
    let expected = format!("id: 0\ndata:\n\n{}", ": k\n".repeat(10));
    assert_eq!(text(&body), &expected[..body.len()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_head_never_finishes() {
    let every = Duration::from_millis(5);
    let server = HostileServer::start(Misbehaviour::SlowHead { every })
        .await
        .unwrap();
    let mut stream = post(server.addr(), &call(json!(1))).await;
    let (got, ended) = read_for(&mut stream, 1 << 20, Duration::from_millis(500)).await;
    assert!(!ended);
    assert!(got.len() >= 20 && got.len() <= 110, "{} bytes", got.len());
    let expected = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-slow: {}",
        "k".repeat(100)
    );
    assert_eq!(text(&got), &expected[..got.len()]);
    assert!(!got.windows(4).any(|w| w == b"\r\n\r\n"));
    assert_eq!(server.requests()[0].status, Some(200));
    // tools/list is not trickled.
    let (head, _) = exchange(server.addr(), &list(json!(1))).await;
    assert_eq!(head.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_priming_counts_up_without_a_response() {
    let server = HostileServer::start(Misbehaviour::EndlessPriming {
        every: Duration::from_millis(10),
    })
    .await
    .unwrap();
    let mut stream = post(server.addr(), &call(json!(1))).await;
    let (_, mut body) = read_head(&mut stream).await;
    let (more, ended) = read_for(&mut stream, 1 << 20, Duration::from_millis(400)).await;
    assert!(!ended);
    body.extend_from_slice(&more);
    let events: Vec<&str> = text(&body).split_terminator("\n\n").collect();
    assert!(events.len() >= 5, "{events:?}");
    for (n, event) in events.iter().enumerate() {
        if n + 1 < events.len() || text(&body).ends_with("\n\n") {
            assert_eq!(*event, format!("id: {n}\ndata:"));
        }
    }
}

/// Finds the response event `id: 1\ndata: …\n\n` after the priming event; checks its data line.
fn check_big_event(body: &[u8], id: &Value, line_len: u64) -> usize {
    let start = b"id: 0\ndata:\n\nid: 1\n";
    assert!(body.starts_with(start));
    let line_end = start.len()
        + body[start.len()..]
            .iter()
            .position(|&b| b == b'\n')
            .expect("the data line ends");
    let line = &body[start.len()..line_end];
    assert_eq!(line.len() as u64, line_len);
    let json: Value = serde_json::from_slice(line.strip_prefix(b"data: ").unwrap()).unwrap();
    assert_eq!(&json["id"], id);
    assert_eq!(json["jsonrpc"], "2.0");
    let pad = json["result"]["text"].as_str().unwrap();
    assert!(pad.bytes().all(|b| b == b'x'));
    assert_eq!(&body[line_end..line_end + 2], b"\n\n");
    line_end + 2
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_response_then_keep_alives() {
    let bytes = 2 * MIB;
    let server = HostileServer::start(Misbehaviour::OversizedResponse { bytes })
        .await
        .unwrap();
    let mut stream = post(server.addr(), &call(json!("c"))).await;
    let (head, mut body) = read_head(&mut stream).await;
    assert_eq!(head.status, 200);
    // The event, then two keep-alives (200 ms apart).
    let want = 13 + 6 + bytes as usize + 2 + 2 * 14;
    let (more, ended) = read_for(&mut stream, want - body.len(), WAIT).await;
    assert!(!ended);
    body.extend_from_slice(&more);
    let end = check_big_event(&body, &json!("c"), bytes);
    assert_eq!(text(&body[end..]), ": keep-alive\n\n: keep-alive\n\n");
}

async fn foreign_stream(shape: IdShape, priming_only: bool) {
    let server = HostileServer::start(Misbehaviour::ForeignStream {
        priming_only,
        shape,
    })
    .await
    .unwrap();
    let addr = server.addr();
    let (a0, a1, b5, b6) = match shape {
        IdShape::Slash => ("0/A", "1/A", "5/B", "6/B"),
        IdShape::Dash => ("A-0", "A-1", "B-5", "B-6"),
    };
    assert_eq!(shape.id('B', 5), b5);
    let progress = |n: u64| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":1,"progress":{n}}}}}"#
        )
    };
    let (head, body) = exchange(addr, &call(json!(17))).await;
    assert_eq!(head.status, 200);
    let mut expected = format!("id: {a0}\ndata:\n\n");
    if !priming_only {
        expected.push_str(&format!("id: {a1}\ndata: {}\n\n", progress(1)));
    }
    assert_eq!(text(&body), expected);

    let mut stream = send(addr, "GET", &[("last-event-id", a1)], b"").await;
    let answer = read_all(&mut stream).await;
    let (head, body) = split(&answer);
    assert_eq!(head.status, 200);
    assert_eq!(head.get("content-type"), Some("text/event-stream"));
    let result = r#"{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"another session's result"}]}}"#;
    assert_eq!(
        text(body),
        format!(
            "id: {b5}\ndata: {}\n\nid: {b6}\ndata: {result}\n\n",
            progress(5)
        )
    );
    // Without Last-Event-ID: honest 405.
    let mut stream = send(addr, "GET", &[], b"").await;
    assert_eq!(split(&read_all(&mut stream).await).0.status, 405);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_stream_slash() {
    foreign_stream(IdShape::Slash, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_stream_dash_priming_only() {
    foreign_stream(IdShape::Dash, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_everything() {
    let server = HostileServer::start(Misbehaviour::Redirect {
        status: 307,
        location: "http://127.0.0.1:1/elsewhere".to_owned(),
    })
    .await
    .unwrap();
    let addr = server.addr();
    for (method, body) in [
        ("POST", serde_json::to_vec(&call(json!(1))).unwrap()),
        ("GET", Vec::new()),
    ] {
        let mut stream = send(addr, method, &[], &body).await;
        let answer = read_all(&mut stream).await;
        let (head, body) = split(&answer);
        assert_eq!(head.status, 307);
        assert_eq!(head.get("location"), Some("http://127.0.0.1:1/elsewhere"));
        assert_eq!(head.get("content-length"), Some("0"));
        assert!(body.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_busy() {
    for status in [503, 429, 409] {
        let server = HostileServer::start(Misbehaviour::ResumeBusy {
            status,
            retry_after: "999999999".to_owned(),
        })
        .await
        .unwrap();
        let addr = server.addr();
        let (head, body) = exchange(addr, &call(json!(1))).await;
        assert_eq!(head.status, 200);
        assert_eq!(text(&body), "id: 0\ndata:\n\n");
        let mut stream = send(addr, "GET", &[("last-event-id", "0")], b"").await;
        let answer = read_all(&mut stream).await;
        let (head, body) = split(&answer);
        assert_eq!(head.status, status);
        assert_eq!(head.get("retry-after"), Some("999999999"));
        assert!(body.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_storm_progresses_one_event_per_resume() {
    let server = HostileServer::start(Misbehaviour::RetryStorm)
        .await
        .unwrap();
    let addr = server.addr();
    let (head, body) = exchange(addr, &call(json!(1))).await;
    assert_eq!(head.status, 200);
    assert_eq!(text(&body), "retry: 0\nid: 0\ndata:\n\n");
    for (last, next) in [("0", 1), ("41", 42), ("junk", 1)] {
        let mut stream = send(addr, "GET", &[("last-event-id", last)], b"").await;
        let answer = read_all(&mut stream).await;
        let (head, body) = split(&answer);
        assert_eq!(head.status, 200);
        assert_eq!(text(body), format!("retry: 0\nid: {next}\ndata:\n\n"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_busy_then_honest() {
    let server = HostileServer::start(Misbehaviour::PostBusy {
        times: 2,
        retry_after: "1".to_owned(),
    })
    .await
    .unwrap();
    let addr = server.addr();
    // tools/call is not refused.
    let (head, _) = exchange(addr, &call(json!(1))).await;
    assert_eq!(head.status, 200);
    for (n, want) in [503, 503, 200, 200].into_iter().enumerate() {
        let (head, body) = exchange(addr, &list(json!(n))).await;
        assert_eq!(head.status, want, "tools/list #{n}");
        if want == 503 {
            assert_eq!(head.get("retry-after"), Some("1"));
            assert!(body.is_empty());
        }
    }
    let busy = server
        .requests()
        .iter()
        .filter(|r| r.status == Some(503))
        .count();
    assert_eq!(busy, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_head() {
    let bytes = 1 << 20;
    let server = HostileServer::start(Misbehaviour::HugeHead { bytes })
        .await
        .unwrap();
    let (head, body) = exchange(server.addr(), &call(json!(5))).await;
    assert_eq!(head.status, 200);
    let pad = head.get("x-pad").unwrap();
    assert_eq!(pad.len(), bytes);
    assert!(pad.bytes().all(|b| b == b'p'));
    assert!(text(&body).starts_with("id: 0\ndata:\n\nid: 1\ndata: "));
    assert!(text(&body).contains(r#""text":"ok""#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_head() {
    let server = HostileServer::start(Misbehaviour::MalformedHead)
        .await
        .unwrap();
    let mut stream = post(server.addr(), &call(json!(1))).await;
    assert_eq!(read_all(&mut stream).await, b"HTTP/1.1 2x0 Nope\r\n\r\n");
    assert_eq!(server.requests()[0].status, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_events_count_up() {
    let chunk = 64 << 10;
    let server = HostileServer::start(Misbehaviour::TinyEvents { chunk })
        .await
        .unwrap();
    let mut stream = post(server.addr(), &call(json!(1))).await;
    let (_, mut body) = read_head(&mut stream).await;
    let (more, ended) = read_for(&mut stream, (4 << 20) - body.len(), WAIT).await;
    assert!(!ended);
    body.extend_from_slice(&more);
    assert_eq!(body.len(), 4 << 20);
    let events: Vec<&str> = text(&body).split("\n\n").collect();
    // The last piece is an incomplete event.
    let complete = &events[..events.len() - 1];
    assert!(complete.len() > 100_000);
    for (n, event) in complete.iter().enumerate() {
        assert_eq!(*event, format!("id: {n}\ndata: {{}}"));
    }
    drop(stream);
    settle(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_event_is_one_complete_response() {
    let bytes = 24 * MIB + 1;
    let server = HostileServer::start(Misbehaviour::HugeEvent { bytes })
        .await
        .unwrap();
    let (head, body) = exchange(server.addr(), &call(json!(8))).await;
    assert_eq!(head.status, 200);
    let end = check_big_event(&body, &json!(8), bytes);
    assert_eq!(end, body.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_framing() {
    let server =
        HostileServer::start_framed(Misbehaviour::Honest, Limits::default(), Framing::Chunked)
            .await
            .unwrap();
    let (head, body) = exchange(server.addr(), &call(json!(1))).await;
    assert_eq!(head.get("transfer-encoding"), Some("chunked"));
    // Dechunk.
    let mut rest = &body[..];
    let mut data = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(text(&rest[..line_end]), 16).unwrap();
        rest = &rest[line_end + 2..];
        if size == 0 {
            assert_eq!(rest, b"\r\n");
            break;
        }
        data.extend_from_slice(&rest[..size]);
        assert_eq!(&rest[size..size + 2], b"\r\n");
        rest = &rest[size + 2..];
    }
    assert!(text(&data).starts_with("id: 0\ndata:\n\nid: 1\ndata: {"));
    assert!(text(&data).ends_with("}\n\n"));
    // A finite JSON answer keeps its length.
    let (head, _) = exchange(server.addr(), &list(json!(1))).await;
    assert!(head.get("content-length").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_and_drop_end_open_connections() {
    for by_drop in [false, true] {
        let server = HostileServer::start(Misbehaviour::ErrorBody { on: Hit::ToolsCall })
            .await
            .unwrap();
        let addr = server.addr();
        let mut stream = post(addr, &call(json!(1))).await;
        assert!(discard(&mut stream, MIB).await >= MIB);
        if by_drop {
            drop(server);
        } else {
            server.shutdown().await;
        }
        // The endless body ends (after what was in flight).
        let started = Instant::now();
        discard(&mut stream, u64::MAX).await;
        assert!(started.elapsed() < Duration::from_secs(2));
        // Nobody accepts any more.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let refused = match TcpStream::connect(addr).await {
            Err(_) => true,
            Ok(mut s) => {
                let _ = s.write_all(b"GET /mcp HTTP/1.1\r\n\r\n").await;
                read_for(&mut s, 1, Duration::from_millis(500)).await == (Vec::new(), true)
            }
        };
        assert!(refused);
    }
}
