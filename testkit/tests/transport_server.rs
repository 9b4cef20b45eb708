//! The loopback MCP server and the fault-injecting proxy, driven by a plain hyper client over real TCP.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::Reply;
use ssegate::client::{
    Client, ClientConfig, ClientError, Handler, HandlerFuture, Protocol, ProtocolError, Retry,
    RpcError,
};
use ssegate::replay;
use ssegate_testkit::proxy::{Cut, ProxyConfig, RunningProxy};
use ssegate_testkit::server::{
    RunningServer, ServerConfig, ServerMode, VERSION_2026_07_28, expected_progress_result,
    expected_result, expected_result_2026_07_28,
};

const RESULT: usize = 64 << 10;
const SEED: u64 = 42;
const LIMIT: Duration = Duration::from_secs(20);

/// One request on a fresh connection (so a proxy applies one cut per request), on `session`.
async fn send(
    addr: SocketAddr,
    method: Method,
    session: Option<&str>,
    extra: &[(&str, &str)],
    body: Option<Value>,
) -> Reply {
    let mut headers = extra.to_vec();
    if let Some(s) = session {
        headers.push(("mcp-session-id", s));
    }
    common::exchange(addr, method, &headers, body.as_ref()).await
}

async fn post(addr: SocketAddr, session: Option<&str>, msg: Value) -> Reply {
    send(addr, Method::POST, session, &[], Some(msg)).await
}

async fn initialize(addr: SocketAddr) -> String {
    initialize_with(addr, Some("2025-06-18"), "2025-06-18").await
}

/// `initialize` asking for `version` (none: no `protocolVersion`), expecting `negotiated` back.
async fn initialize_with(addr: SocketAddr, version: Option<&str>, negotiated: &str) -> String {
    let mut params = json!({"capabilities": {}, "clientInfo": {"name": "t", "version": "0"}});
    if let Some(v) = version {
        params["protocolVersion"] = json!(v);
    }
    let r = post(
        addr,
        None,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["result"]["protocolVersion"], negotiated);
    let session = r.headers["mcp-session-id"].to_str().unwrap().to_owned();
    let n = post(
        addr,
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(n.status, StatusCode::ACCEPTED);
    assert!(n.body.is_empty());
    session
}

fn call(id: u64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}})
}

/// A complete event of the test's tiny SSE reader (our frames have no multi-line data).
#[derive(Debug, Clone, PartialEq)]
struct Ev {
    id: Option<String>,
    retry: Option<u64>,
    data: Vec<u8>,
    raw: Vec<u8>,
}

/// The complete events in `body` (a partial one at the end is dropped).
fn events(body: &[u8]) -> Vec<Ev> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(end) = rest.windows(2).position(|w| w == b"\n\n") {
        let block = &rest[..end];
        let mut ev = Ev {
            id: None,
            retry: None,
            data: Vec::new(),
            raw: rest[..end + 2].to_vec(),
        };
        for line in block.split(|&b| b == b'\n') {
            let line = std::str::from_utf8(line).unwrap();
            let (name, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match name {
                "id" => ev.id = Some(value.to_owned()),
                "retry" => ev.retry = value.parse().ok(),
                "data" => ev.data.extend_from_slice(value.as_bytes()),
                _ => panic!("unexpected field {name:?}"),
            }
        }
        out.push(ev);
        rest = &rest[end + 2..];
    }
    out
}

fn server_config(mode: ServerMode) -> ServerConfig {
    let mut replay = replay::BufferConfig::default();
    // A budget smaller than the result, as in the field report: the result evicts the progress events
    // and is itself never kept (unless the mode pins it).
    replay
        .max_session_bytes(32 << 10)
        .max_event_bytes(32 << 10)
        .retry_after(Duration::from_millis(1500));
    let mut c = ServerConfig::default();
    c.mode(mode)
        .result_size(RESULT)
        .seed(SEED)
        .retry_ms(10)
        .progress_count(3)
        .replay(replay);
    c
}

async fn start(mode: ServerMode) -> (RunningServer, RunningProxy) {
    let server = server_config(mode)
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut pc = ProxyConfig::default();
    pc.accept_delay(Duration::ZERO).seed(7);
    let proxy = pc.start(server.addr()).await.unwrap();
    (server, proxy)
}

fn is_sse(r: &Reply) -> bool {
    r.headers["content-type"] == "text/event-stream" && r.headers["cache-control"] == "no-cache"
}

#[tokio::test]
async fn session_lifecycle_and_http_errors() {
    tokio::time::timeout(LIMIT, async {
        let (server, _proxy) = start(ServerMode::Strict).await;
        let addr = server.addr();
        let session = initialize(addr).await;
        let list = post(
            addr,
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await;
        assert_eq!(list.headers["content-type"], "application/json");
        let v: Value = serde_json::from_slice(&list.body).unwrap();
        assert_eq!(v["result"]["tools"][0]["name"], "big_result");
        let unknown = post(
            addr,
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 2, "method": "nope"}),
        )
        .await;
        assert_eq!(
            serde_json::from_slice::<Value>(&unknown.body).unwrap()["error"]["code"],
            -32601
        );

        let missing = post(
            addr,
            None,
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        )
        .await;
        assert_eq!(missing.status, StatusCode::BAD_REQUEST);
        let stranger = post(
            addr,
            Some("feedface"),
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
        )
        .await;
        assert_eq!(stranger.status, StatusCode::NOT_FOUND);
        let no_cursor = send(addr, Method::GET, Some(&session), &[], None).await;
        assert_eq!(no_cursor.status, StatusCode::METHOD_NOT_ALLOWED);
        let resume_unknown = send(
            addr,
            Method::GET,
            Some("feedface"),
            &[("last-event-id", "1-0")],
            None,
        )
        .await;
        assert_eq!(resume_unknown.status, StatusCode::NOT_FOUND);
        let resume_missing = send(addr, Method::GET, None, &[("last-event-id", "1-0")], None).await;
        assert_eq!(resume_missing.status, StatusCode::BAD_REQUEST);

        assert_eq!(server.session_count(), 1);
        let del = send(addr, Method::DELETE, Some(&session), &[], None).await;
        assert_eq!(del.status, StatusCode::NO_CONTENT);
        assert_eq!(server.session_count(), 0);
        let after = post(
            addr,
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}),
        )
        .await;
        assert_eq!(after.status, StatusCode::NOT_FOUND);
        let stats = server.stats();
        assert_eq!((stats.sessions_opened, stats.sessions_deleted), (1, 1));
        server.shutdown().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn tools_call_streams_priming_progress_and_the_exact_result() {
    tokio::time::timeout(LIMIT, async {
        let (server, proxy) = start(ServerMode::Strict).await;
        // Through the proxy with no cut: it must be transparent.
        let addr = proxy.addr();
        let session = initialize(addr).await;
        let mut msg = call(7, "big_result", json!({}));
        msg["params"]["_meta"] = json!({"progressToken": "tok"});
        let r = post(addr, Some(&session), msg).await;
        assert_eq!(r.status, StatusCode::OK);
        assert!(is_sse(&r) && !r.broken);
        let evs = events(&r.body);
        assert_eq!(evs.len(), 5, "priming, 3 progress, result");
        assert_eq!(evs[0].raw, b"id: 1-0\nretry: 10\ndata:\n\n");
        for (k, ev) in evs[1..4].iter().enumerate() {
            assert_eq!(ev.id.as_deref(), Some(format!("1-{}", k + 1).as_str()));
            let v: Value = serde_json::from_slice(&ev.data).unwrap();
            assert_eq!(v["method"], "notifications/progress");
            assert_eq!(v["params"]["progressToken"], "tok");
            assert_eq!(v["params"]["progress"], k as u64 + 1);
        }
        assert_eq!(evs[4].id.as_deref(), Some("1-4"));
        assert_eq!(evs[4].data, expected_result(&json!(7), RESULT, SEED));
        // The whole body is exactly the frames, nothing else.
        assert_eq!(evs.iter().map(|e| e.raw.len()).sum::<usize>(), r.body.len());

        let p = post(
            addr,
            Some(&session),
            call(8, "progress", json!({"count": 5})),
        )
        .await;
        let evs = events(&p.body);
        assert_eq!(evs.len(), 7);
        assert_eq!(evs[6].data, expected_progress_result(&json!(8), 5));
        let token: Value = serde_json::from_slice(&evs[1].data).unwrap();
        assert_eq!(
            token["params"]["progressToken"], 8,
            "no token given: the request id"
        );

        let stats = proxy.stats();
        assert_eq!(stats.cuts, 0);
        assert!(stats.bytes_down > RESULT as u64 && stats.bytes_up > 0);
        assert_eq!(server.stats().streams, 2);
        proxy.shutdown().await;
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// A raw request, read with a raw socket: the proxy forwards exactly `cut` bytes, then a reset.
#[tokio::test]
async fn proxy_cut_forwards_exact_bytes_then_resets() {
    tokio::time::timeout(LIMIT, async {
        let (server, proxy) = start(ServerMode::Strict).await;
        let session = initialize(server.addr()).await;
        for (cut, size) in [(0u64, RESULT), (1, RESULT), (150, RESULT), (10_000, RESULT), (50_001, RESULT), (3_000_001, 4 << 20)] {
            proxy.set_next_cut(Cut::At(cut));
            let body = serde_json::to_vec(&call(1, "big_result", json!({"size": size}))).unwrap();
            let head = format!(
                "POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\naccept: text/event-stream\r\nmcp-session-id: {session}\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
            s.write_all(head.as_bytes()).await.unwrap();
            s.write_all(&body).await.unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 8192];
            let end = loop {
                match s.read(&mut buf).await {
                    Ok(0) => break None,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) => break Some(e.kind()),
                }
            };
            assert_eq!(end, Some(std::io::ErrorKind::ConnectionReset), "cut at {cut}");
            assert_eq!(got.len() as u64, cut);
            if cut >= 12 {
                assert!(got.starts_with(b"HTTP/1.1 200 OK\r\n"));
            }
            assert_eq!(proxy.last_cut().unwrap().offset, cut);
        }
        assert_eq!(proxy.stats().cuts, 6);

        // A hyper client sees the cut as a body error; the next connection passes whole.
        proxy.set_next_cut(Cut::At(20_000));
        let cut = post(proxy.addr(), Some(&session), call(2, "big_result", json!({}))).await;
        assert!(cut.broken);
        assert!(cut.body.len() < 20_000);
        let whole = post(proxy.addr(), Some(&session), call(3, "big_result", json!({}))).await;
        assert!(!whole.broken);
        assert_eq!(events(&whole.body).last().unwrap().data, expected_result(&json!(3), RESULT, SEED));
        assert_eq!(proxy.stats().cuts, 7);
        proxy.shutdown().await;
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// A budget of cuts: with a default cut on every connection, only as many connections are cut as the
/// budget allows, counted when the offset is reached (connections accepted earlier included); the
/// others pass whole.
#[tokio::test]
async fn proxy_max_cuts_bounds_the_cuts_in_all() {
    tokio::time::timeout(LIMIT, async {
        let (server, proxy) = start(ServerMode::Strict).await;
        let session = initialize(server.addr()).await;
        proxy.set_default_cut(Cut::At(20_000));
        proxy.set_max_cuts(Some(1));
        let first = post(
            proxy.addr(),
            Some(&session),
            call(1, "big_result", json!({})),
        )
        .await;
        assert!(first.broken);
        assert_eq!(proxy.last_cut().unwrap().offset, 20_000);
        for id in 2..4 {
            let r = post(
                proxy.addr(),
                Some(&session),
                call(id, "big_result", json!({})),
            )
            .await;
            assert!(!r.broken, "request {id}: the budget is spent");
            assert_eq!(
                events(&r.body).last().unwrap().data,
                expected_result(&json!(id), RESULT, SEED)
            );
        }
        assert_eq!(proxy.stats().cuts, 1);
        // One more: the next connection to reach the offset is cut.
        proxy.set_max_cuts(Some(2));
        let r = post(
            proxy.addr(),
            Some(&session),
            call(4, "big_result", json!({})),
        )
        .await;
        assert!(r.broken);
        proxy.set_max_cuts(None);
        let r = post(
            proxy.addr(),
            Some(&session),
            call(5, "big_result", json!({})),
        )
        .await;
        assert!(r.broken, "no bound: the default cut again");
        assert_eq!(proxy.stats().cuts, 3);
        proxy.shutdown().await;
        server.shutdown().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn proxy_random_cuts_are_seeded_and_delay_the_next_connection() {
    tokio::time::timeout(LIMIT, async {
        let server = server_config(ServerMode::Strict)
            .start("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let session = initialize(server.addr()).await;
        let mut offsets = Vec::new();
        for _ in 0..2 {
            let mut pc = ProxyConfig::default();
            pc.accept_delay(Duration::from_millis(300))
                .seed(99)
                .default_cut(Cut::Random(1_000..=60_000));
            let proxy = pc.start(server.addr()).await.unwrap();
            let r = post(
                proxy.addr(),
                Some(&session),
                call(1, "big_result", json!({})),
            )
            .await;
            assert!(r.broken);
            let first = proxy.last_cut().unwrap().offset;
            assert!((1_000..=60_000).contains(&first));
            proxy.set_default_cut(Cut::None);
            let t = Instant::now();
            let r = post(
                proxy.addr(),
                Some(&session),
                call(2, "big_result", json!({})),
            )
            .await;
            assert!(!r.broken);
            assert!(
                t.elapsed() >= Duration::from_millis(250),
                "held {:?}",
                t.elapsed()
            );
            offsets.push(first);
            proxy.shutdown().await;
        }
        assert_eq!(offsets[0], offsets[1], "same seed, same offset");
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// Calls `big_result` through the proxy with a cut inside the result event; returns the events that
/// arrived whole (priming and progress) — the last one's id is the client's cursor.
async fn cut_inside_result(
    server: &RunningServer,
    proxy: &RunningProxy,
    session: &str,
    id: u64,
) -> Vec<Ev> {
    proxy.set_next_cut(Cut::At(40_000));
    let r = post(
        proxy.addr(),
        Some(session),
        call(id, "big_result", json!({})),
    )
    .await;
    assert!(r.broken, "{:?}", server.mode());
    let evs = events(&r.body);
    assert_eq!(evs.len(), 4, "priming and 3 progress arrived whole");
    evs
}

fn resume_headers(cursor: &str) -> [(&str, &str); 1] {
    [("last-event-id", cursor)]
}

#[tokio::test]
async fn resume_after_a_cut_follows_the_server_mode() {
    tokio::time::timeout(LIMIT, async {
        // The 2025-era modes (a stateless server has no resume).
        for mode in ServerMode::ALL.into_iter().filter(|m| !m.is_stateless()) {
            let (server, proxy) = start(mode).await;
            let session = initialize(server.addr()).await;
            let got = cut_inside_result(&server, &proxy, &session, 11).await;
            let cursor = got.last().unwrap().id.clone().unwrap();
            assert_eq!(cursor, "1-3");
            let r = send(
                proxy.addr(),
                Method::GET,
                Some(&session),
                &resume_headers(&cursor),
                None,
            )
            .await;
            let expected = expected_result(&json!(11), RESULT, SEED);
            let stats = server.stats();
            match mode {
                ServerMode::Strict => {
                    assert_eq!(r.status, StatusCode::CONFLICT);
                    assert_eq!(r.headers["retry-after"], "2", "1.5 s rounds up");
                    let v: Value = serde_json::from_slice(&r.body).unwrap();
                    assert_eq!(v["error"]["data"]["reason"], "too_large");
                    assert_eq!(v["error"]["data"]["missing"], "1-4");
                    assert_eq!(v["error"]["data"]["retryAfterMs"], 1500);
                    assert_eq!(stats.misses, 1);
                }
                ServerMode::Buffered => {
                    // Its budget holds the result: the interrupted event is replayed whole.
                    assert_eq!(r.status, StatusCode::OK);
                    let evs = events(&r.body);
                    assert_eq!(evs.len(), 1);
                    assert_eq!(evs[0].id.as_deref(), Some("1-4"));
                    assert_eq!(evs[0].data, expected);
                    assert_eq!(stats.replays, 1);
                }
                ServerMode::Restart => {
                    assert_eq!(r.status, StatusCode::OK);
                    assert!(is_sse(&r));
                    let evs = events(&r.body);
                    let ids: Vec<_> = evs.iter().map(|e| e.id.clone().unwrap()).collect();
                    assert_eq!(
                        ids,
                        ["2-0", "2-1", "2-2", "2-3", "2-4"],
                        "a new stream, new ids"
                    );
                    assert_eq!(evs[4].data, expected, "the whole result again");
                    assert_eq!(stats.restarts, 1);
                }
                ServerMode::Boundary => {
                    assert_eq!(r.status, StatusCode::OK);
                    let evs = events(&r.body);
                    assert_eq!(evs.len(), 1);
                    assert_eq!(
                        evs[0].id.as_deref(),
                        Some("1-4"),
                        "the interrupted event, same id"
                    );
                    assert_eq!(evs[0].data, expected, "whole");
                    assert_eq!(evs[0].raw.len(), r.body.len());
                    assert_eq!(stats.replays, 1);
                }
                ServerMode::Empty => {
                    assert_eq!(r.status, StatusCode::OK);
                    assert!(is_sse(&r) && !r.broken);
                    assert!(r.body.is_empty());
                    assert_eq!(stats.empty_replies, 1);
                }
                ServerMode::Resend => {
                    assert_eq!(r.status, StatusCode::OK);
                    let evs = events(&r.body);
                    assert_eq!(evs.len(), 2);
                    assert_eq!(evs[0], got[3], "the Last-Event-ID event itself, again");
                    assert_eq!(
                        (evs[1].id.as_deref(), &evs[1].data),
                        (Some("1-4"), &expected.to_vec())
                    );
                    assert_eq!(stats.replays, 1);
                }
                ServerMode::Stateless | ServerMode::Tasks => {
                    unreachable!("no resume on a stateless server")
                }
            }
            assert_eq!(stats.resumes, 1, "{mode}");
            // A cursor the server never issued is a miss in every mode but Empty.
            let bogus = send(
                server.addr(),
                Method::GET,
                Some(&session),
                &resume_headers("9-9"),
                None,
            )
            .await;
            let want = if mode == ServerMode::Empty {
                StatusCode::OK
            } else {
                StatusCode::CONFLICT
            };
            assert_eq!(bogus.status, want, "{mode}");
            proxy.shutdown().await;
            server.shutdown().await;
        }
    })
    .await
    .unwrap();
}

/// When the buffer still holds everything after the cursor, Strict replays the exact tail.
#[tokio::test]
async fn strict_replays_the_exact_tail_when_it_holds_it() {
    tokio::time::timeout(LIMIT, async {
        let (server, proxy) = start(ServerMode::Strict).await;
        let session = initialize(server.addr()).await;
        let whole = post(
            server.addr(),
            Some(&session),
            call(1, "progress", json!({"count": 20})),
        )
        .await;
        let all = events(&whole.body);
        assert_eq!(all.len(), 22);
        proxy.set_next_cut(Cut::At(1_500));
        let cut = post(
            proxy.addr(),
            Some(&session),
            call(2, "progress", json!({"count": 20})),
        )
        .await;
        assert!(cut.broken);
        let got = events(&cut.body);
        assert!(!got.is_empty() && got.len() < 22);
        let cursor = got.last().unwrap().id.clone().unwrap();
        let r = send(
            proxy.addr(),
            Method::GET,
            Some(&session),
            &resume_headers(&cursor),
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::OK);
        let rest = events(&r.body);
        assert_eq!(got.len() + rest.len(), 22);
        let seqs: Vec<u64> = got
            .iter()
            .chain(&rest)
            .map(|e| e.id.as_ref().unwrap()[2..].parse().unwrap())
            .collect();
        assert_eq!(
            seqs,
            (0..22).collect::<Vec<_>>(),
            "in order, no gap, no duplicate"
        );
        assert_eq!(
            rest.last().unwrap().data,
            expected_progress_result(&json!(2), 20)
        );
        proxy.shutdown().await;
        server.shutdown().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn tools_list_can_be_an_sse_stream() {
    tokio::time::timeout(LIMIT, async {
        let mut config = server_config(ServerMode::Strict);
        config.tools_list_sse(true);
        let server = config.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let session = initialize(server.addr()).await;
        let r = post(
            server.addr(),
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await;
        assert!(is_sse(&r));
        let evs = events(&r.body);
        assert_eq!(evs.len(), 1);
        let v: Value = serde_json::from_slice(&evs[0].data).unwrap();
        assert_eq!(v["result"]["tools"][1]["name"], "progress");
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// The field scenario with the default limits (64 slots, 1 MiB budget, 4 MiB result): Strict misses
/// with `too_large` and says so; Boundary still re-sends the whole interrupted event.
#[tokio::test]
async fn default_limits_reproduce_the_field_report() {
    tokio::time::timeout(LIMIT, async {
        for mode in [ServerMode::Strict, ServerMode::Boundary] {
            let mut config = ServerConfig::default();
            config.mode(mode).retry_ms(10);
            let server = config.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
            let mut pc = ProxyConfig::default();
            pc.accept_delay(Duration::ZERO);
            let proxy = pc.start(server.addr()).await.unwrap();
            let session = initialize(proxy.addr()).await;
            proxy.set_next_cut(Cut::At(1_300_000));
            let t = Instant::now();
            let r = post(
                proxy.addr(),
                Some(&session),
                call(1, "big_result", json!({})),
            )
            .await;
            assert!(r.broken);
            let cursor = events(&r.body).last().unwrap().id.clone().unwrap();
            assert_eq!(cursor, "1-3");
            let resumed = send(
                proxy.addr(),
                Method::GET,
                Some(&session),
                &resume_headers(&cursor),
                None,
            )
            .await;
            let expected =
                expected_result(&json!(1), 4 << 20, ssegate_testkit::server::DEFAULT_SEED);
            if mode == ServerMode::Strict {
                assert_eq!(resumed.status, StatusCode::CONFLICT);
                assert_eq!(resumed.headers["retry-after"], "1");
                let v: Value = serde_json::from_slice(&resumed.body).unwrap();
                assert_eq!(v["error"]["data"]["reason"], "too_large");
            } else {
                let evs = events(&resumed.body);
                assert_eq!((evs.len(), evs[0].id.as_deref()), (1, Some("1-4")));
                assert_eq!(evs[0].data, expected);
            }
            eprintln!(
                "{mode}: cut + resume of a 4 MiB result took {:?}",
                t.elapsed()
            );
            proxy.shutdown().await;
            server.shutdown().await;
        }
    })
    .await
    .unwrap();
}

fn rpc(r: &Reply) -> Value {
    assert_eq!(r.headers["content-type"], "application/json");
    serde_json::from_slice(&r.body).unwrap()
}

fn ping(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

async fn start_with(config: &ServerConfig) -> RunningServer {
    config.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
}

/// `size` and `count` are checked against their maximum before anything is allocated for them: one
/// request asking for an exabyte gets a JSON-RPC `-32602`, and the server keeps serving.
#[tokio::test]
async fn arguments_out_of_range_are_invalid_params() {
    tokio::time::timeout(LIMIT, async {
        let mut config = server_config(ServerMode::Strict);
        config.max_result_size(1000).max_progress_count(5);
        let server = start_with(&config).await;
        let addr = server.addr();
        let session = initialize(addr).await;
        let refused = [
            ("big_result", json!({"size": 1001}), "size", 1000u64),
            ("big_result", json!({"size": 1u64 << 62}), "size", 1000),
            ("big_result", json!({"size": "12"}), "size", 1000),
            ("big_result", json!({"size": -1}), "size", 1000),
            (
                "big_result",
                json!({"size": 10, "seed": 1.5}),
                "seed",
                u64::MAX,
            ),
            ("progress", json!({"count": 6}), "count", 5),
            ("progress", json!({"count": u64::MAX}), "count", 5),
        ];
        for (k, (tool, args, argument, max)) in refused.iter().enumerate() {
            let r = post(addr, Some(&session), call(k as u64, tool, args.clone())).await;
            assert_eq!(r.status, StatusCode::OK, "{args}");
            let v = rpc(&r);
            assert_eq!(v["id"], k as u64);
            assert_eq!(v["error"]["code"], -32602, "{args}");
            assert_eq!(v["error"]["data"]["argument"], *argument);
            assert_eq!(v["error"]["data"]["maximum"], *max);
        }
        let ok = post(
            addr,
            Some(&session),
            call(20, "big_result", json!({"size": 1000})),
        )
        .await;
        let evs = events(&ok.body);
        assert_eq!(
            evs.last().unwrap().data,
            expected_result(&json!(20), 1000, SEED)
        );
        let ok = post(
            addr,
            Some(&session),
            call(21, "progress", json!({"count": 5})),
        )
        .await;
        assert_eq!(events(&ok.body).len(), 7);
        let stats = server.stats();
        assert_eq!(
            (stats.invalid_params, stats.streams),
            (refused.len() as u64, 2)
        );
        server.shutdown().await;

        // The default bound (64 MiB) refuses the request that used to abort the process.
        let server = start_with(&ServerConfig::default()).await;
        let session = initialize(server.addr()).await;
        let r = post(
            server.addr(),
            Some(&session),
            call(1, "big_result", json!({"size": 1u64 << 40})),
        )
        .await;
        assert_eq!(rpc(&r)["error"]["data"]["maximum"], 64u64 << 20);
        server.shutdown().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn request_bodies_over_the_limit_are_413() {
    tokio::time::timeout(LIMIT, async {
        let mut config = server_config(ServerMode::Strict);
        config.max_request_bytes(512);
        let server = start_with(&config).await;
        let session = initialize(server.addr()).await;
        let mut big = ping(1);
        big["params"] = json!({"pad": "x".repeat(600)});
        let r = post(server.addr(), Some(&session), big).await;
        assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
        let mut small = ping(2);
        small["params"] = json!({"pad": "x".repeat(400)});
        let r = post(server.addr(), Some(&session), small).await;
        assert_eq!(rpc(&r)["id"], 2);
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// At the cap, `initialize` evicts the least recently used session (not the oldest one).
#[tokio::test]
async fn sessions_are_capped_least_recently_used_first() {
    tokio::time::timeout(LIMIT, async {
        let mut config = server_config(ServerMode::Strict);
        config.max_sessions(2);
        let server = start_with(&config).await;
        let addr = server.addr();
        let a = initialize(addr).await;
        let b = initialize(addr).await;
        // Millisecond clock: let the uses be ordered.
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(post(addr, Some(&a), ping(1)).await.status, StatusCode::OK);
        tokio::time::sleep(Duration::from_millis(5)).await;
        let c = initialize(addr).await;
        assert_eq!(server.session_count(), 2);
        assert_eq!(
            post(addr, Some(&b), ping(2)).await.status,
            StatusCode::NOT_FOUND
        );
        assert_eq!(post(addr, Some(&a), ping(3)).await.status, StatusCode::OK);
        assert_eq!(post(addr, Some(&c), ping(4)).await.status, StatusCode::OK);
        let stats = server.stats();
        assert_eq!((stats.sessions_opened, stats.sessions_evicted), (3, 1));
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// A session idle for longer than the timeout is gone (`404`); every request keeps it alive.
#[tokio::test]
async fn idle_sessions_expire() {
    tokio::time::timeout(LIMIT, async {
        let mut config = server_config(ServerMode::Strict);
        config.session_idle_timeout(Duration::from_millis(300));
        let server = start_with(&config).await;
        let addr = server.addr();
        let kept = initialize(addr).await;
        let idle = initialize(addr).await;
        for k in 0..6 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(
                post(addr, Some(&kept), ping(k)).await.status,
                StatusCode::OK
            );
        }
        assert_eq!(
            post(addr, Some(&idle), ping(9)).await.status,
            StatusCode::NOT_FOUND
        );
        assert_eq!(server.session_count(), 1);
        tokio::time::sleep(Duration::from_millis(450)).await;
        assert_eq!(server.session_count(), 0);
        assert_eq!(server.stats().sessions_expired, 2);
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// `Restart` re-runs only the calls it remembers: the newest `max_calls_per_session`.
#[tokio::test]
async fn restart_remembers_a_bounded_number_of_calls() {
    tokio::time::timeout(LIMIT, async {
        let mut config = server_config(ServerMode::Restart);
        config.max_calls_per_session(2);
        let server = start_with(&config).await;
        let addr = server.addr();
        let session = initialize(addr).await;
        for id in 1..=3 {
            let r = post(
                addr,
                Some(&session),
                call(id, "progress", json!({"count": 1})),
            )
            .await;
            assert_eq!(
                events(&r.body)[0].id.as_deref(),
                Some(format!("{id}-0").as_str())
            );
        }
        let resume = |cursor: &'static str| {
            let session = session.clone();
            async move {
                send(
                    addr,
                    Method::GET,
                    Some(&session),
                    &resume_headers(cursor),
                    None,
                )
                .await
            }
        };
        assert_eq!(
            resume("1-0").await.status,
            StatusCode::CONFLICT,
            "forgotten"
        );
        let r = resume("2-0").await;
        assert_eq!(r.status, StatusCode::OK);
        let evs = events(&r.body);
        assert_eq!(
            evs[0].id.as_deref(),
            Some("4-0"),
            "re-run under a new stream"
        );
        assert_eq!(
            evs.last().unwrap().data,
            expected_progress_result(&json!(2), 1)
        );
        // The re-run is remembered as the newest call, so call 2 is now the oldest forgotten one.
        assert_eq!(resume("2-0").await.status, StatusCode::CONFLICT);
        assert_eq!(resume("3-0").await.status, StatusCode::OK);
        let stats = server.stats();
        assert_eq!((stats.restarts, stats.misses), (2, 2));
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// Session ids come from the OS random source: two servers with the same configuration (and seed)
/// hand out different ids.
#[tokio::test]
async fn session_ids_are_unpredictable() {
    tokio::time::timeout(LIMIT, async {
        let config = server_config(ServerMode::Strict);
        let one = start_with(&config).await;
        let two = start_with(&config).await;
        let a = initialize(one.addr()).await;
        let b = initialize(two.addr()).await;
        assert_ne!(a, b);
        for id in [&a, &b] {
            assert_eq!(id.len(), 32);
            assert!(id.bytes().all(|c| c.is_ascii_hexdigit()));
        }
        one.shutdown().await;
        two.shutdown().await;
    })
    .await
    .unwrap();
}

/// A client that never finishes its request head is disconnected after the header read timeout.
#[tokio::test]
async fn slow_request_heads_are_cut_off() {
    tokio::time::timeout(LIMIT, async {
        let mut config = server_config(ServerMode::Strict);
        config.header_read_timeout(Duration::from_millis(200));
        let server = start_with(&config).await;
        let started = Instant::now();
        let mut s = TcpStream::connect(server.addr()).await.unwrap();
        s.write_all(b"POST /mcp HTTP/1.1\r\nhost: x\r\n")
            .await
            .unwrap();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest)).await;
        assert!(read.is_ok(), "the server kept a stalled request head open");
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(150), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        // A complete request on a fresh connection is still served.
        let session = initialize(server.addr()).await;
        assert_eq!(
            post(server.addr(), Some(&session), ping(1)).await.status,
            StatusCode::OK
        );
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// Beyond `max_connections`, a connection waits (in the listen backlog) until one closes.
#[tokio::test]
async fn connections_beyond_the_cap_wait_for_a_slot() {
    tokio::time::timeout(LIMIT, async {
        let mut config = server_config(ServerMode::Strict);
        config.max_connections(2);
        let server = start_with(&config).await;
        let addr = server.addr();
        let idle_one = TcpStream::connect(addr).await.unwrap();
        let _idle_two = TcpStream::connect(addr).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while server.stats().connections < 2 {
            assert!(Instant::now() < deadline, "the idle connections were not accepted");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let waiting = tokio::spawn(async move {
            post(addr, None, json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}})).await.status
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiting.is_finished(), "a third connection was served");
        assert_eq!(server.stats().connections, 2);
        drop(idle_one);
        let status = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("served once a slot was free")
            .unwrap();
        assert_eq!(status, StatusCode::OK);
        assert_eq!(server.stats().connections, 3);
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// `initialize` answers the client's version when supported, else the newest; later requests may
/// name the session's version in `MCP-Protocol-Version`, and any other is a `400`.
#[tokio::test]
async fn protocol_versions_are_negotiated_and_checked() {
    tokio::time::timeout(LIMIT, async {
        let server = start_with(&server_config(ServerMode::Strict)).await;
        let addr = server.addr();
        initialize_with(addr, Some("2025-11-25"), "2025-11-25").await;
        initialize_with(addr, Some("2024-11-05"), "2025-11-25").await;
        initialize_with(addr, None, "2025-11-25").await;
        let session = initialize_with(addr, Some("2025-06-18"), "2025-06-18").await;
        let with = |version: &'static str| {
            let session = session.clone();
            async move {
                send(
                    addr,
                    Method::POST,
                    Some(&session),
                    &[("mcp-protocol-version", version)],
                    Some(ping(1)),
                )
                .await
            }
        };
        assert_eq!(with("2025-06-18").await.status, StatusCode::OK);
        for bad in ["2025-11-25", "1999-01-01", ""] {
            let r = with(bad).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad:?}");
            let v = rpc(&r);
            assert_eq!(v["error"]["data"]["got"], bad);
            assert_eq!(v["error"]["data"]["session"], "2025-06-18");
        }
        assert_eq!(
            post(addr, Some(&session), ping(2)).await.status,
            StatusCode::OK
        );
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// On `2025-11-25` every SSE stream the server opens starts with a priming event (an id, empty
/// data, `retry`); on `2025-06-18` only `tools/call` streams do (this server always primes those).
#[tokio::test]
async fn streams_are_primed_on_2025_11_25() {
    tokio::time::timeout(LIMIT, async {
        let mut config = server_config(ServerMode::Strict);
        config.tools_list_sse(true);
        let server = start_with(&config).await;
        let addr = server.addr();
        for (version, primed_list) in [("2025-11-25", true), ("2025-06-18", false)] {
            let session = initialize_with(addr, Some(version), version).await;
            let list = post(
                addr,
                Some(&session),
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            )
            .await;
            let evs = events(&list.body);
            assert_eq!(evs.len(), 1 + usize::from(primed_list), "{version}");
            if primed_list {
                assert!(evs[0].id.is_some() && evs[0].data.is_empty());
                assert_eq!(evs[0].retry, Some(10));
            }
            let v: Value = serde_json::from_slice(&evs.last().unwrap().data).unwrap();
            assert_eq!(v["id"], 1);
            let ids: Vec<_> = evs.iter().map(|e| e.id.clone().unwrap()).collect();
            let r = post(
                addr,
                Some(&session),
                call(2, "progress", json!({"count": 1})),
            )
            .await;
            let evs = events(&r.body);
            assert!(evs[0].id.is_some() && evs[0].data.is_empty() && evs[0].retry == Some(10));
            assert!(
                !ids.contains(evs[0].id.as_ref().unwrap()),
                "ids unique in the session"
            );
        }
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// `ServerMode::Stateless` is MCP 2026-07-28 as the specification describes it: `server/discover`,
/// the version in every request's `_meta` (`initialize` and requests without it: `-32022` naming
/// the supported version), headers that must agree with the body, `resultType`, SSE without event
/// ids, `GET` and `DELETE` answered `405`, no sessions.
#[tokio::test]
async fn stateless_mode_speaks_2026_07_28_only() {
    tokio::time::timeout(LIMIT, async {
        let (server, proxy) = start(ServerMode::Stateless).await;
        let addr = server.addr();
        let meta = json!({"io.modelcontextprotocol/protocolVersion": VERSION_2026_07_28});
        let discover = post(
            addr,
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}),
        )
        .await;
        assert_eq!(discover.status, StatusCode::OK);
        assert!(discover.headers.get("mcp-session-id").is_none());
        let v: Value = serde_json::from_slice(&discover.body).unwrap();
        assert_eq!(v["result"]["supportedVersions"], json!(["2026-07-28"]));
        assert_eq!(v["result"]["resultType"], "complete");

        for (body, what) in [
            (
                json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}),
                "initialize",
            ),
            (call(3, "big_result", json!({})), "no _meta version"),
        ] {
            let r = post(addr, None, body).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{what}");
            let v: Value = serde_json::from_slice(&r.body).unwrap();
            assert_eq!(v["error"]["code"], -32022, "{what}");
            assert_eq!(v["error"]["data"]["supported"], json!(["2026-07-28"]), "{what}");
        }

        let mut stateless_call = call(4, "big_result", json!({}));
        stateless_call["params"]["_meta"] = meta.clone();
        let mismatch = send(
            addr,
            Method::POST,
            None,
            &[("mcp-method", "tools/list")],
            Some(stateless_call.clone()),
        )
        .await;
        assert_eq!(mismatch.status, StatusCode::BAD_REQUEST);
        let v: Value = serde_json::from_slice(&mismatch.body).unwrap();
        assert_eq!(v["error"]["code"], -32020, "HeaderMismatch");

        let r = send(
            addr,
            Method::POST,
            None,
            &[("mcp-method", "tools/call"), ("mcp-protocol-version", VERSION_2026_07_28)],
            Some(stateless_call),
        )
        .await;
        assert!(is_sse(&r) && !r.broken);
        let evs = events(&r.body);
        assert_eq!(evs.len(), 4, "three progress notifications and the result");
        assert!(evs.iter().all(|e| e.id.is_none() && e.retry.is_none()), "no ids, no retry");
        assert_eq!(
            evs[3].data,
            expected_result_2026_07_28(&json!(4), RESULT, SEED).to_vec()
        );

        for method in [Method::GET, Method::DELETE] {
            let r = send(addr, method.clone(), None, &[("last-event-id", "1-1")], None).await;
            assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
            assert_eq!(r.headers["allow"], "POST");
        }
        let stats = server.stats();
        assert_eq!((stats.calls, stats.sessions_opened, stats.resumes), (1, 0, 0));

        // The guarded client negotiates 2026-07-28 by itself; pinned to a 2025 revision it gets a
        // typed answer naming what the server speaks.
        let client = Client::connect(&format!("http://{}/mcp", proxy.addr()), ClientConfig::default())
            .await
            .unwrap();
        assert_eq!(client.protocol_version().as_deref(), Some("2026-07-28"));
        assert!(client.is_stateless());
        let r = client.call_tool("big_result", json!({}), Retry::IfSafe).await.unwrap();
        assert!(r.message.data().eq_bytes(&expected_result_2026_07_28(&serde_json::from_str(&r.request_id.to_string()).unwrap(), RESULT, SEED)));
        let mut pinned = ClientConfig::default();
        pinned.protocol(Protocol::Only("2025-11-25".into()));
        let err = Client::connect(&format!("http://{}/mcp", proxy.addr()), pinned)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ClientError::Protocol(ProtocolError::NoCommonVersion(v)) if v == &["2026-07-28"]),
            "{err:?}"
        );
        proxy.shutdown().await;
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// Answers every elicitation with the name `round <n>`, counting them.
#[derive(Default)]
struct Namer(std::sync::atomic::AtomicU32);

impl Handler for Namer {
    fn request(&self, method: &str, params: Option<&Value>) -> HandlerFuture {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let answer = if method == "elicitation/create" && params.is_some() {
            Ok(json!({"action": "accept", "content": {"name": format!("round {n}")}}))
        } else {
            Err(RpcError::new(-32601, method))
        };
        Box::pin(async move { answer })
    }
}

/// `input_required` on 2026-07-28: each round goes to the `Handler` and is answered in a new
/// request carrying `inputResponses` and the `requestState` as received; a server that keeps
/// asking past `max_input_rounds` is a typed error after exactly that many rounds, and the tool
/// never completed.
#[tokio::test]
async fn input_required_rounds_are_answered_and_bounded() {
    tokio::time::timeout(LIMIT, async {
        let (server, proxy) = start(ServerMode::Stateless).await;
        let url = format!("http://{}/mcp", proxy.addr());
        let namer = Arc::new(Namer::default());
        let mut config = ClientConfig::default();
        config.handler(namer.clone()).max_input_rounds(3);
        let client = Client::connect(&url, config).await.unwrap();

        let r = client
            .call_tool("ask", json!({"rounds": 3}), Retry::IfSafe)
            .await
            .unwrap();
        assert_eq!(r.outcome.input_rounds, 3);
        let v: Value = r.message.deserialize().unwrap();
        assert_eq!(
            v["result"]["content"][0]["text"],
            "3 rounds; last name: round 3"
        );
        assert_eq!(server.stats().calls, 1);

        let err = client
            .call_tool("ask", json!({"rounds": 4}), Retry::IfSafe)
            .await
            .unwrap_err();
        assert!(
            matches!(err, ClientError::Protocol(ProtocolError::TooManyInputRounds(3))),
            "{err:?}"
        );
        assert_eq!(namer.0.load(std::sync::atomic::Ordering::Relaxed), 6);
        assert_eq!(server.stats().calls, 1, "the second call never completed");

        // A handler that cannot answer: a typed error naming the request.
        let client = Client::connect(&url, ClientConfig::default()).await.unwrap();
        let err = client
            .call_tool("ask", json!({"rounds": 1}), Retry::IfSafe)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ClientError::Protocol(ProtocolError::InputRequest { method, .. }) if method == "elicitation/create"),
            "{err:?}"
        );
        proxy.shutdown().await;
        server.shutdown().await;
    })
    .await
    .unwrap();
}
