//! MCP tasks on the loopback server, both generations, driven by a plain hyper client over real TCP:
//! the 2026-07-28 extension `io.modelcontextprotocol/tasks` on `ServerMode::Stateless`, and the
//! experimental tasks of 2025-11-25 on the session modes. Every expectation is stated from the
//! specifications and the tools' pure payload functions, not from the server's code.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use serde_json::{Value, json};

use common::Reply;
use ssegate::replay;
use ssegate_testkit::proxy::{Cut, ProxyConfig, RunningProxy};
use ssegate_testkit::server::{
    RunningServer, ServerConfig, ServerMode, TaskSupport, VERSION_2026_07_28, expected_result,
    expected_result_2026_07_28,
};

const RESULT: usize = 64 << 10;
const SEED: u64 = 42;
const LIMIT: Duration = Duration::from_secs(30);
const EXT: &str = "io.modelcontextprotocol/tasks";

/// One request on a fresh connection (so a proxy applies one cut per request).
async fn send(
    addr: SocketAddr,
    method: Method,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Reply {
    common::exchange(addr, method, headers, body).await
}

/// The complete SSE events in `body` as (id, data) (a partial one at the end is dropped).
fn events(body: &[u8]) -> Vec<(Option<String>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(end) = rest.windows(2).position(|w| w == b"\n\n") {
        let (mut id, mut data) = (None, Vec::new());
        for line in rest[..end].split(|&b| b == b'\n') {
            if let Some(v) = line.strip_prefix(b"id: ") {
                id = Some(String::from_utf8(v.to_vec()).unwrap());
            } else if let Some(v) = line.strip_prefix(b"data: ") {
                data.extend_from_slice(v);
            } else if line == b"data:" || line.starts_with(b"retry:") {
            } else {
                panic!("unexpected line {:?}", String::from_utf8_lossy(line));
            }
        }
        out.push((id, data));
        rest = &rest[end + 2..];
    }
    out
}

/// The `result` member of a JSON-RPC response as the server laid it out:
/// `{"jsonrpc":"2.0","id":<id>,"result":<this>}`.
fn result_member(response: &[u8], id: &Value) -> Vec<u8> {
    let prefix = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"#);
    assert!(response.starts_with(prefix.as_bytes()));
    assert!(response.ends_with(b"}"));
    response[prefix.len()..response.len() - 1].to_vec()
}

fn code(r: &Reply) -> i64 {
    r.json()["error"]["code"]
        .as_i64()
        .expect("a JSON-RPC error")
}

/// An ISO 8601 UTC timestamp: `YYYY-MM-DDTHH:MM:SS[.fff]Z`.
fn is_iso8601(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && s.ends_with('Z')
        && [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]
            .iter()
            .all(|&i| b[i].is_ascii_digit())
}

fn is_task_id(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 32 && s.bytes().all(|c| c.is_ascii_hexdigit()))
}

fn config(mode: ServerMode, tasks: TaskSupport) -> ServerConfig {
    let mut c = ServerConfig::default();
    c.mode(mode)
        .result_size(RESULT)
        .seed(SEED)
        .retry_ms(10)
        .progress_count(3)
        .tasks(tasks)
        .task_work(Duration::from_millis(300))
        .task_poll_interval(Duration::from_millis(20));
    c
}

async fn start(config: &ServerConfig) -> RunningServer {
    config.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
}

async fn proxy_for(server: &RunningServer) -> RunningProxy {
    let mut pc = ProxyConfig::default();
    pc.accept_delay(Duration::ZERO).seed(7);
    pc.start(server.addr()).await.unwrap()
}

// ---- MCP 2026-07-28 -------------------------------------------------------------------------

/// A 2026-07-28 request: the version in `_meta`, and the tasks extension declared when `tasks`.
fn stateless(id: u64, method: &str, mut params: Value, tasks: bool) -> Value {
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(VERSION_2026_07_28);
    if tasks {
        params["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
            json!({"extensions": {EXT: {}}});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// POSTs a 2026-07-28 request with `MCP-Protocol-Version`, `Mcp-Method` and, when given, `Mcp-Name`.
async fn post_stateless(addr: SocketAddr, msg: &Value, name: Option<&str>) -> Reply {
    let method = msg["method"].as_str().unwrap().to_owned();
    let mut headers = vec![
        ("mcp-protocol-version", VERSION_2026_07_28),
        ("mcp-method", method.as_str()),
    ];
    if let Some(n) = name {
        headers.push(("mcp-name", n));
    }
    send(addr, Method::POST, &headers, Some(msg)).await
}

async fn create_stateless(addr: SocketAddr, id: u64, tool: &str, args: Value) -> (String, Value) {
    let msg = stateless(
        id,
        "tools/call",
        json!({"name": tool, "arguments": args}),
        true,
    );
    let r = post_stateless(addr, &msg, Some(tool)).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers["content-type"], "application/json");
    let v = r.json();
    assert_eq!(v["id"], id);
    let task = v["result"].clone();
    assert_eq!(task["resultType"], "task", "{task}");
    assert_eq!(task["status"], "working");
    assert!(is_task_id(&task["taskId"]), "{task}");
    (task["taskId"].as_str().unwrap().to_owned(), task)
}

async fn get_stateless(addr: SocketAddr, id: u64, task: &str) -> Reply {
    let msg = stateless(id, "tasks/get", json!({"taskId": task}), true);
    post_stateless(addr, &msg, Some(task)).await
}

/// The `tasks/get` result (JSON framing).
async fn poll_stateless(addr: SocketAddr, task: &str) -> Value {
    let r = get_stateless(addr, 99, task).await;
    assert_eq!(r.status, StatusCode::OK);
    r.json()["result"].clone()
}

/// Polls until the status is not `working`; returns that read's raw reply.
async fn until_not_working(addr: SocketAddr, id: u64, task: &str) -> Reply {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = get_stateless(addr, id, task).await;
        let data = if r.is_sse() {
            events(&r.body).pop().expect("one event").1
        } else {
            r.body.to_vec()
        };
        let v: Value = serde_json::from_slice(&data).unwrap();
        if v["result"]["status"] != "working" {
            return r;
        }
        assert!(Instant::now() < deadline, "still working");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A task-capable client gets a task for `big_result`; polls see `working`, then `completed` with
/// exactly the direct answer's `result` inlined; every completed read is the same bytes; the tool
/// ran once. A client that does not declare the extension gets the direct answer.
#[tokio::test]
async fn extension_task_completes_with_the_exact_inline_result() {
    tokio::time::timeout(LIMIT, async {
        let server = start(&config(ServerMode::Stateless, TaskSupport::Offer)).await;
        let addr = server.addr();
        let discover = post_stateless(
            addr,
            &stateless(1, "server/discover", json!({}), false),
            None,
        )
        .await;
        assert_eq!(
            discover.json()["result"]["capabilities"]["extensions"][EXT],
            json!({})
        );

        let started = Instant::now();
        let (task, created) = create_stateless(addr, 2, "big_result", json!({})).await;
        assert!(
            is_iso8601(created["createdAt"].as_str().unwrap()),
            "{created}"
        );
        assert!(is_iso8601(created["lastUpdatedAt"].as_str().unwrap()));
        assert_eq!(created["ttlMs"], 60_000);
        assert_eq!(created["pollIntervalMs"], 20);
        assert!(created.get("result").is_none());

        // Resolvable at once, and working for the configured 300 ms.
        let first = poll_stateless(addr, &task).await;
        assert_eq!(first["resultType"], "complete");
        assert_eq!(first["taskId"], task.as_str());
        assert_eq!(first["status"], "working");
        assert!(first.get("result").is_none());
        assert_eq!(server.stats().calls, 0, "nothing ran yet");

        let done = until_not_working(addr, 7, &task).await;
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(done.headers["content-type"], "application/json");
        let v = done.json();
        assert_eq!(v["result"]["status"], "completed");
        assert_eq!(v["result"]["resultType"], "complete");
        assert_eq!(v["result"]["createdAt"], created["createdAt"]);
        assert!(is_iso8601(v["result"]["lastUpdatedAt"].as_str().unwrap()));
        // The inline result is the direct answer's `result`, byte for byte (escapes included).
        let direct = result_member(
            &expected_result_2026_07_28(&json!(2), RESULT, SEED),
            &json!(2),
        );
        let read = result_member(&done.body, &json!(7));
        let inline = [b",\"result\":".as_slice(), &direct, b"}"].concat();
        assert!(read.ends_with(&inline), "inline result differs");
        assert_eq!(
            v["result"]["result"],
            serde_json::from_slice::<Value>(&direct).unwrap()
        );

        // A pure read: the same bytes again, and the tool still ran once.
        let again = get_stateless(addr, 7, &task).await;
        assert_eq!(again.body, done.body);
        let stats = server.stats();
        assert_eq!((stats.calls, stats.tasks_created), (1, 1));
        assert!(stats.task_reads >= 4, "{stats:?}");

        // Without the declaration: the direct SSE answer, as without tasks.
        let msg = stateless(
            3,
            "tools/call",
            json!({"name": "big_result", "arguments": {}}),
            false,
        );
        let direct_answer = post_stateless(addr, &msg, Some("big_result")).await;
        assert!(direct_answer.is_sse());
        let evs = events(&direct_answer.body);
        assert_eq!(
            evs.last().unwrap().1,
            expected_result_2026_07_28(&json!(3), RESULT, SEED).to_vec()
        );
        assert_eq!((server.stats().calls, server.stats().tasks_created), (2, 1));
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// Unknown and purged tasks are `-32602`; `tasks/result` and `tasks/list` do not exist on
/// 2026-07-28 (`-32601`); `tasks/*` without the declared extension is `-32021`; with tasks off,
/// `tasks/get` is `-32601` and a declaring client is answered directly.
#[tokio::test]
async fn extension_unknown_purged_and_undeclared() {
    tokio::time::timeout(LIMIT, async {
        let mut c = config(ServerMode::Stateless, TaskSupport::Offer);
        c.task_ttl(Some(Duration::from_millis(400)))
            .task_work(Duration::from_millis(50));
        let server = start(&c).await;
        let addr = server.addr();
        let unknown = get_stateless(addr, 1, "0123456789abcdef0123456789abcdef").await;
        assert_eq!(code(&unknown), -32602);
        let (task, created) = create_stateless(addr, 2, "progress", json!({"count": 2})).await;
        assert_eq!(created["ttlMs"], 400);
        for method in ["tasks/result", "tasks/list"] {
            let r = post_stateless(
                addr,
                &stateless(3, method, json!({"taskId": task}), true),
                None,
            )
            .await;
            assert_eq!(code(&r), -32601, "{method}");
        }
        let undeclared = post_stateless(
            addr,
            &stateless(4, "tasks/get", json!({"taskId": task}), false),
            Some(&task),
        )
        .await;
        assert_eq!(code(&undeclared), -32021);
        assert_eq!(
            undeclared.json()["error"]["data"]["requiredCapabilities"]["extensions"][EXT],
            json!({})
        );
        let malformed = post_stateless(
            addr,
            &stateless(5, "tasks/get", json!({"taskId": 5}), true),
            None,
        )
        .await;
        assert_eq!(code(&malformed), -32602);

        let done = until_not_working(addr, 6, &task).await.json();
        assert_eq!(done["result"]["status"], "completed");
        assert_eq!(
            done["result"]["result"]["content"][0]["text"],
            "done: 2 steps"
        );
        tokio::time::sleep(Duration::from_millis(450)).await;
        let purged = get_stateless(addr, 7, &task).await;
        assert_eq!(code(&purged), -32602, "purged after its ttl");
        assert_eq!(server.task_count(), 0);
        server.shutdown().await;

        let off = start(&config(ServerMode::Stateless, TaskSupport::Off)).await;
        let discover = post_stateless(
            off.addr(),
            &stateless(1, "server/discover", json!({}), true),
            None,
        )
        .await;
        assert!(
            discover.json()["result"]["capabilities"]
                .get("extensions")
                .is_none()
        );
        let msg = stateless(
            2,
            "tools/call",
            json!({"name": "big_result", "arguments": {}}),
            true,
        );
        let r = post_stateless(off.addr(), &msg, None).await;
        assert!(r.is_sse(), "answered directly");
        let r = get_stateless(off.addr(), 3, "0123456789abcdef0123456789abcdef").await;
        assert_eq!(code(&r), -32601);
        assert_eq!(off.stats().tasks_created, 0);
        off.shutdown().await;
    })
    .await
    .unwrap();
}

/// `tasks/cancel` is an empty acknowledgement and the task becomes `cancelled` (its tool never
/// runs); a failing task reports its JSON-RPC error; require mode refuses a call that does not
/// declare the extension with `-32021`.
#[tokio::test]
async fn extension_cancel_failure_and_require() {
    tokio::time::timeout(LIMIT, async {
        let mut c = config(ServerMode::Stateless, TaskSupport::Require);
        c.task_work(Duration::from_secs(10));
        let server = start(&c).await;
        let addr = server.addr();
        let msg = stateless(
            1,
            "tools/call",
            json!({"name": "big_result", "arguments": {}}),
            false,
        );
        let refused = post_stateless(addr, &msg, None).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert_eq!(code(&refused), -32021);
        assert_eq!(
            refused.json()["error"]["data"]["requiredCapabilities"],
            json!({"extensions": {EXT: {}}})
        );

        let (task, _) = create_stateless(addr, 2, "big_result", json!({})).await;
        for _ in 0..2 {
            let r = post_stateless(
                addr,
                &stateless(3, "tasks/cancel", json!({"taskId": task}), true),
                Some(&task),
            )
            .await;
            assert_eq!(
                r.json(),
                json!({"jsonrpc": "2.0", "id": 3, "result": {"resultType": "complete"}})
            );
        }
        let v = poll_stateless(addr, &task).await;
        assert_eq!(v["status"], "cancelled");
        assert!(v.get("result").is_none());
        let r = post_stateless(
            addr,
            &stateless(4, "tasks/cancel", json!({"taskId": "nope"}), true),
            None,
        )
        .await;
        assert_eq!(code(&r), -32602);
        assert_eq!(
            server.stats().calls,
            0,
            "a cancelled task never ran its tool"
        );
        server.shutdown().await;

        let mut c = config(ServerMode::Stateless, TaskSupport::Offer);
        c.task_work(Duration::from_millis(20))
            .task_failure(Some((-32603, "backend exploded".into())));
        let server = start(&c).await;
        let (task, _) = create_stateless(server.addr(), 1, "big_result", json!({})).await;
        let v = until_not_working(server.addr(), 2, &task).await.json();
        assert_eq!(v["result"]["status"], "failed");
        assert_eq!(
            v["result"]["error"],
            json!({"code": -32603, "message": "backend exploded"})
        );
        assert_eq!(server.stats().calls, 0);
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// `ask` as a task: `input_required` with one elicitation under a key never used before, answered
/// through `tasks/update`; an answer under any other key is ignored; after the last round the task
/// completes with the last name, as the direct `ask` would.
#[tokio::test]
async fn extension_ask_takes_its_input_through_tasks_update() {
    tokio::time::timeout(LIMIT, async {
        let mut c = config(ServerMode::Stateless, TaskSupport::Offer);
        c.task_work(Duration::from_millis(30));
        let server = start(&c).await;
        let addr = server.addr();
        let (task, _) = create_stateless(addr, 1, "ask", json!({"rounds": 2})).await;
        let mut keys = Vec::new();
        for (round, name) in [(1, "Ada"), (2, "Grace")] {
            let v = until_not_working(addr, 2, &task).await.json()["result"].clone();
            assert_eq!(v["status"], "input_required", "{v}");
            let requests = v["inputRequests"].as_object().unwrap();
            assert_eq!(requests.len(), 1);
            let (key, request) = requests.iter().next().unwrap();
            assert!(!keys.contains(key), "keys are unique over the task's lifetime");
            keys.push(key.clone());
            assert_eq!(request["method"], "elicitation/create");
            assert!(request["params"]["message"].as_str().unwrap().contains(&format!("round {round}")));
            let update = |responses: Value| {
                stateless(3, "tasks/update", json!({"taskId": task, "inputResponses": responses}), true)
            };
            let answer = json!({"action": "accept", "content": {"name": name}});
            let stray = post_stateless(addr, &update(json!({"not-asked": answer})), Some(&task)).await;
            assert_eq!(stray.json()["result"], json!({"resultType": "complete"}));
            assert_eq!(poll_stateless(addr, &task).await["status"], "input_required");
            let r = post_stateless(addr, &update(json!({key.as_str(): answer})), Some(&task)).await;
            assert_eq!(r.json()["result"], json!({"resultType": "complete"}));
        }
        let v = until_not_working(addr, 4, &task).await.json()["result"].clone();
        assert_eq!(v["status"], "completed");
        assert_eq!(
            v["result"],
            json!({"content": [{"type": "text", "text": "2 rounds; last name: Grace"}], "isError": false, "resultType": "complete"})
        );
        assert_eq!(server.stats().calls, 1);
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// The routing headers must agree with the body: `Mcp-Name` with `params.taskId` of `tasks/*` and
/// `params.name` of `tools/call`, `Mcp-Method` with the method: else `400`, `-32020`.
#[tokio::test]
async fn extension_header_mismatch_is_32020() {
    tokio::time::timeout(LIMIT, async {
        let server = start(&config(ServerMode::Stateless, TaskSupport::Offer)).await;
        let addr = server.addr();
        let (task, _) = create_stateless(addr, 1, "big_result", json!({})).await;
        let get = stateless(2, "tasks/get", json!({"taskId": task}), true);
        let wrong = post_stateless(addr, &get, Some("ffffffffffffffffffffffffffffffff")).await;
        assert_eq!(wrong.status, StatusCode::BAD_REQUEST);
        assert_eq!(code(&wrong), -32020);
        assert_eq!(
            post_stateless(addr, &get, Some(&task)).await.status,
            StatusCode::OK
        );
        assert_eq!(
            post_stateless(addr, &get, None).await.status,
            StatusCode::OK
        );

        let call = stateless(
            3,
            "tools/call",
            json!({"name": "big_result", "arguments": {}}),
            true,
        );
        let r = post_stateless(addr, &call, Some("progress")).await;
        assert_eq!((r.status, code(&r)), (StatusCode::BAD_REQUEST, -32020));
        let r = send(
            addr,
            Method::POST,
            &[
                ("mcp-protocol-version", VERSION_2026_07_28),
                ("mcp-method", "tasks/cancel"),
            ],
            Some(&get),
        )
        .await;
        assert_eq!((r.status, code(&r)), (StatusCode::BAD_REQUEST, -32020));
        assert_eq!(server.stats().tasks_created, 1);
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// A 4 MiB completed read cut by the proxy mid-body (SSE framing: one event without id; and JSON
/// framing) is read again whole: exactly the direct answer's `result` inline, the tool ran once.
#[tokio::test]
async fn extension_4mib_read_cut_then_read_whole() {
    tokio::time::timeout(LIMIT, async {
        for sse in [true, false] {
            let mut c = config(ServerMode::Stateless, TaskSupport::Offer);
            c.result_size(4 << 20)
                .task_work(Duration::from_millis(50))
                .task_reads_sse(sse);
            let server = start(&c).await;
            let proxy = proxy_for(&server).await;
            let (task, _) = create_stateless(proxy.addr(), 1, "big_result", json!({})).await;
            tokio::time::sleep(Duration::from_millis(80)).await;

            proxy.set_next_cut(Cut::At(1_000_000));
            let cut = get_stateless(proxy.addr(), 2, &task).await;
            assert!(cut.broken, "sse={sse}");
            assert!(cut.body.len() < 1_000_000);
            assert_eq!(server.stats().calls, 1, "the first read ran the tool");

            let whole = get_stateless(proxy.addr(), 2, &task).await;
            assert!(!whole.broken);
            let data = if sse {
                assert!(whole.is_sse());
                let evs = events(&whole.body);
                assert_eq!(evs.len(), 1);
                assert_eq!(evs[0].0, None, "no event id");
                assert_eq!(whole.body.len(), evs[0].1.len() + b"data: \n\n".len());
                evs[0].1.clone()
            } else {
                assert_eq!(whole.headers["content-type"], "application/json");
                whole.body.to_vec()
            };
            let direct = result_member(
                &expected_result_2026_07_28(&json!(1), 4 << 20, SEED),
                &json!(1),
            );
            let read = result_member(&data, &json!(2));
            assert!(read.ends_with(&[b",\"result\":".as_slice(), &direct, b"}"].concat()));
            let again = get_stateless(proxy.addr(), 2, &task).await;
            assert_eq!(again.body, whole.body, "a pure, repeatable read");
            let stats = server.stats();
            assert_eq!(
                (stats.calls, stats.tasks_created, stats.task_reads),
                (1, 1, 3)
            );
            assert_eq!(proxy.stats().cuts, 1);
            proxy.shutdown().await;
            server.shutdown().await;
        }
    })
    .await
    .unwrap();
}

// ---- MCP 2025-11-25 -------------------------------------------------------------------------

async fn post_session(addr: SocketAddr, session: &str, msg: &Value) -> Reply {
    send(
        addr,
        Method::POST,
        &[("mcp-session-id", session)],
        Some(msg),
    )
    .await
}

/// `initialize` on 2025-11-25; returns the session and the `initialize` result.
async fn initialize(addr: SocketAddr) -> (String, Value) {
    let msg = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let r = send(addr, Method::POST, &[], Some(&msg)).await;
    assert_eq!(r.status, StatusCode::OK);
    let session = r.headers["mcp-session-id"].to_str().unwrap().to_owned();
    (session, r.json()["result"].clone())
}

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

async fn create_experimental(addr: SocketAddr, session: &str, id: u64, task: Value) -> Value {
    let msg = rpc(
        id,
        "tools/call",
        json!({"name": "big_result", "arguments": {}, "task": task}),
    );
    let r = post_session(addr, session, &msg).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers["content-type"], "application/json");
    let v = r.json();
    let t = v["result"]["task"].clone();
    assert_eq!(t["status"], "working", "{v}");
    assert!(is_task_id(&t["taskId"]), "{v}");
    assert!(is_iso8601(t["createdAt"].as_str().unwrap()));
    assert!(is_iso8601(t["lastUpdatedAt"].as_str().unwrap()));
    t
}

/// `expected_result` for request `id` with `_meta["io.modelcontextprotocol/related-task"]` added as
/// the result's last member: what `tasks/result` must answer.
fn expected_task_result(id: u64, size: usize, task: &str) -> Vec<u8> {
    let direct = expected_result(&json!(id), size, SEED);
    let meta =
        format!(r#","_meta":{{"io.modelcontextprotocol/related-task":{{"taskId":"{task}"}}}}"#);
    assert!(direct.ends_with(b"}}"));
    [&direct[..direct.len() - 2], meta.as_bytes(), b"}}"].concat()
}

/// 2025-11-25: `initialize` declares the tasks capability and `tools/list` marks the tools
/// `optional`; a call with `params.task` is a task (its ttl the one asked for, below the server's);
/// `tasks/get` moves from `working` to `completed`; `tasks/result` (asked at once) waits for it and
/// answers the direct result plus the related-task `_meta`, the same bytes on every read; the tool
/// ran once; the task is listed for its session only, and unknown to another session.
#[tokio::test]
async fn experimental_task_waits_and_returns_the_exact_result() {
    tokio::time::timeout(LIMIT, async {
        let server = start(&config(ServerMode::Strict, TaskSupport::Offer)).await;
        let addr = server.addr();
        let (session, init) = initialize(addr).await;
        assert_eq!(
            init["capabilities"]["tasks"],
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
        );
        let list = post_session(addr, &session, &rpc(1, "tools/list", json!({})))
            .await
            .json();
        for tool in list["result"]["tools"].as_array().unwrap() {
            assert_eq!(
                tool["execution"],
                json!({"taskSupport": "optional"}),
                "{tool}"
            );
        }

        let started = Instant::now();
        let task = create_experimental(addr, &session, 2, json!({"ttl": 30_000})).await;
        assert_eq!(
            (task["ttl"].clone(), task["pollInterval"].clone()),
            (json!(30_000), json!(20))
        );
        let id = task["taskId"].as_str().unwrap().to_owned();
        let get = post_session(addr, &session, &rpc(3, "tasks/get", json!({"taskId": id})))
            .await
            .json();
        assert_eq!(get["result"]["status"], "working");
        assert_eq!(get["result"]["taskId"], id.as_str());
        assert_eq!(server.stats().calls, 0);

        // Asked while working: answers once the work time has passed.
        let r = post_session(
            addr,
            &session,
            &rpc(4, "tasks/result", json!({"taskId": id})),
        )
        .await;
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(r.headers["content-type"], "application/json");
        assert_eq!(r.body.to_vec(), expected_task_result(4, RESULT, &id));
        let again = post_session(
            addr,
            &session,
            &rpc(4, "tasks/result", json!({"taskId": id})),
        )
        .await;
        assert_eq!(again.body, r.body, "repeatable");
        let get = post_session(addr, &session, &rpc(5, "tasks/get", json!({"taskId": id})))
            .await
            .json();
        assert_eq!(get["result"]["status"], "completed");
        assert!(
            get["result"].get("result").is_none(),
            "the result comes from tasks/result"
        );

        let listed = post_session(addr, &session, &rpc(6, "tasks/list", json!({})))
            .await
            .json();
        let tasks = listed["result"]["tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0]["taskId"], id.as_str());
        let stats = server.stats();
        assert_eq!(
            (stats.calls, stats.tasks_created, stats.task_reads),
            (1, 1, 4)
        );

        // Bound to its session.
        let (other, _) = initialize(addr).await;
        let r = post_session(addr, &other, &rpc(7, "tasks/get", json!({"taskId": id}))).await;
        assert_eq!(code(&r), -32602);
        let r = post_session(addr, &other, &rpc(8, "tasks/result", json!({"taskId": id}))).await;
        assert_eq!(code(&r), -32602);
        let listed = post_session(addr, &other, &rpc(9, "tasks/list", json!({})))
            .await
            .json();
        assert_eq!(listed["result"]["tasks"], json!([]));
        let r = post_session(
            addr,
            &session,
            &rpc(10, "tasks/get", json!({"taskId": "beef"})),
        )
        .await;
        assert_eq!(code(&r), -32602);

        // Without `params.task`: the direct answer, as without tasks.
        let direct = post_session(
            addr,
            &session,
            &rpc(
                11,
                "tools/call",
                json!({"name": "big_result", "arguments": {}}),
            ),
        )
        .await;
        assert!(direct.is_sse());
        assert_eq!(server.stats().calls, 2);
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// Cancelling a working task answers it `cancelled`; cancelling it again (terminal) is `-32602`;
/// its `tasks/result` is an error and the tool never ran. Require mode marks the tools `required`
/// and refuses a call without `params.task` with `-32601`. A ttl purges the task (`-32602`).
#[tokio::test]
async fn experimental_cancel_require_and_ttl() {
    tokio::time::timeout(LIMIT, async {
        let mut c = config(ServerMode::Strict, TaskSupport::Require);
        c.task_work(Duration::from_secs(10))
            .task_ttl(Some(Duration::from_secs(5)));
        let server = start(&c).await;
        let addr = server.addr();
        let (session, _) = initialize(addr).await;
        let list = post_session(addr, &session, &rpc(1, "tools/list", json!({})))
            .await
            .json();
        assert_eq!(
            list["result"]["tools"][0]["execution"]["taskSupport"],
            "required"
        );
        let plain = post_session(
            addr,
            &session,
            &rpc(
                2,
                "tools/call",
                json!({"name": "big_result", "arguments": {}}),
            ),
        )
        .await;
        assert_eq!(code(&plain), -32601);

        let task = create_experimental(addr, &session, 3, json!({})).await;
        assert_eq!(task["ttl"], 5000, "the server's ttl when none is asked for");
        let id = task["taskId"].as_str().unwrap().to_owned();
        let cancelled = post_session(
            addr,
            &session,
            &rpc(4, "tasks/cancel", json!({"taskId": id})),
        )
        .await
        .json();
        assert_eq!(cancelled["result"]["status"], "cancelled");
        assert_eq!(cancelled["result"]["taskId"], id.as_str());
        let get = post_session(addr, &session, &rpc(5, "tasks/get", json!({"taskId": id})))
            .await
            .json();
        assert_eq!(get["result"]["status"], "cancelled");
        let twice = post_session(
            addr,
            &session,
            &rpc(6, "tasks/cancel", json!({"taskId": id})),
        )
        .await;
        assert_eq!(code(&twice), -32602);
        let result = post_session(
            addr,
            &session,
            &rpc(7, "tasks/result", json!({"taskId": id})),
        )
        .await
        .json();
        assert!(result["error"]["code"].is_i64(), "{result}");
        assert!(result.get("result").is_none());
        assert_eq!(server.stats().calls, 0);

        let short = create_experimental(addr, &session, 8, json!({"ttl": 200})).await;
        assert_eq!(short["ttl"], 200);
        let sid = short["taskId"].as_str().unwrap().to_owned();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let r = post_session(addr, &session, &rpc(9, "tasks/get", json!({"taskId": sid}))).await;
        assert_eq!(code(&r), -32602, "purged after its ttl");
        let r = post_session(
            addr,
            &session,
            &rpc(10, "tools/call", json!({"name": "big_result", "task": 5})),
        )
        .await;
        assert_eq!(code(&r), -32602);
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// With tasks off, 2025-11-25 is unchanged: no `tasks` capability, no `execution`, `params.task`
/// ignored (a direct answer), `tasks/*` unknown. `max_tasks` bounds the tasks kept, oldest first.
#[tokio::test]
async fn experimental_tasks_off_and_bounded() {
    tokio::time::timeout(LIMIT, async {
        let server = start(&config(ServerMode::Strict, TaskSupport::Off)).await;
        let addr = server.addr();
        let (session, init) = initialize(addr).await;
        assert!(init["capabilities"].get("tasks").is_none());
        let list = post_session(addr, &session, &rpc(1, "tools/list", json!({})))
            .await
            .json();
        assert!(list["result"]["tools"][0].get("execution").is_none());
        let r = post_session(
            addr,
            &session,
            &rpc(
                2,
                "tools/call",
                json!({"name": "big_result", "arguments": {}, "task": {}}),
            ),
        )
        .await;
        assert!(r.is_sse());
        assert_eq!(
            events(&r.body).last().unwrap().1,
            expected_result(&json!(2), RESULT, SEED).to_vec()
        );
        for method in ["tasks/get", "tasks/result", "tasks/list", "tasks/cancel"] {
            let r = post_session(addr, &session, &rpc(3, method, json!({"taskId": "x"}))).await;
            assert_eq!(code(&r), -32601, "{method}");
        }
        server.shutdown().await;

        let mut c = config(ServerMode::Strict, TaskSupport::Offer);
        c.max_tasks(2);
        let server = start(&c).await;
        let addr = server.addr();
        let (session, _) = initialize(addr).await;
        let mut ids = Vec::new();
        for n in 0..3 {
            ids.push(
                create_experimental(addr, &session, n, json!({})).await["taskId"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
        }
        assert_eq!(server.task_count(), 2);
        let r = post_session(
            addr,
            &session,
            &rpc(5, "tasks/get", json!({"taskId": ids[0]})),
        )
        .await;
        assert_eq!(code(&r), -32602, "the oldest was forgotten");
        for id in &ids[1..] {
            let r = post_session(addr, &session, &rpc(6, "tasks/get", json!({"taskId": id}))).await;
            assert_eq!(r.json()["result"]["taskId"], id.as_str());
        }
        assert_ne!(ids[1], ids[2]);
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// `tasks/result` as an SSE stream of the session: its event carries an id in the session's replay
/// buffer, so a read cut by the proxy resumes with `GET` + `Last-Event-ID` (here the `Buffered`
/// mode, which holds whole results) to exactly the expected bytes; read again it is the same
/// result; the tool ran once.
#[tokio::test]
async fn experimental_sse_result_cut_resumes_and_rereads() {
    tokio::time::timeout(LIMIT, async {
        let size = 4 << 20;
        let mut c = config(ServerMode::Buffered, TaskSupport::Offer);
        c.result_size(size)
            .task_work(Duration::from_millis(50))
            .task_reads_sse(true)
            .replay(replay::BufferConfig::default());
        let server = start(&c).await;
        let proxy = proxy_for(&server).await;
        let addr = proxy.addr();
        let (session, _) = initialize(addr).await;
        let id = create_experimental(addr, &session, 1, json!({})).await["taskId"]
            .as_str()
            .unwrap()
            .to_owned();

        proxy.set_next_cut(Cut::At(1_000_000));
        let cut = post_session(
            addr,
            &session,
            &rpc(2, "tasks/result", json!({"taskId": id})),
        )
        .await;
        assert!(cut.broken);
        assert!(cut.is_sse());
        let evs = events(&cut.body);
        // 2025-11-25 primes every stream: the priming event's id is the cursor.
        let (cursor, priming) = evs.first().cloned().expect("the priming event arrived");
        assert!(priming.is_empty());
        let cursor = cursor.expect("an event id");
        assert_eq!(server.stats().calls, 1);

        let resumed = send(
            addr,
            Method::GET,
            &[
                ("mcp-session-id", session.as_str()),
                ("last-event-id", cursor.as_str()),
            ],
            None,
        )
        .await;
        assert_eq!(resumed.status, StatusCode::OK);
        let evs = events(&resumed.body);
        assert_eq!(evs.len(), 1);
        assert!(evs[0].0.is_some(), "an event id");
        let expected = expected_task_result(2, size, &id);
        assert!(evs[0].1 == expected, "the replayed result differs");

        let whole = post_session(
            addr,
            &session,
            &rpc(2, "tasks/result", json!({"taskId": id})),
        )
        .await;
        assert!(!whole.broken);
        let evs = events(&whole.body);
        assert_eq!(evs.len(), 2, "priming and the result");
        assert!(evs[1].1 == expected);
        let stats = server.stats();
        assert_eq!(
            (stats.calls, stats.tasks_created, stats.task_reads),
            (1, 1, 2)
        );
        assert_eq!(stats.replays, 1);
        proxy.shutdown().await;
        server.shutdown().await;
    })
    .await
    .unwrap();
}
