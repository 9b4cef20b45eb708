//! `ssegate bridge` as a child process under a stdio host written here, against the test kit's
//! loopback MCP server on every protocol era, behind the fault proxy for cuts.
//!
//! What the host receives is compared with what the server sent (the `big_result` bytes are a
//! pure function of size and seed), and the server counts the tool's runs, so a torn, glued,
//! doubled or re-run result cannot pass.

mod common;

use std::time::Duration;

use serde_json::{Value, json};
use ssegate_testkit::server::{RunningServer, ServerConfig, ServerMode, expected_result};

use common::host::{Host, tool_names};
use common::{cut_once, proxy, runtime};

// The oracles: the wire contract's codes (`ssegate::contract`), stated here independently.
/// Outcome unknown: a `tools/call` whose answer was lost; the tool may have run.
const OUTCOME_UNKNOWN: i64 = -32050;
/// The server could not be reached, did not take the request, or gave no answer in time.
const UNAVAILABLE: i64 = -32051;

/// The error's `code`, `data.kind`, `data.outcome` and `data.refusal` (`null` when absent).
fn contract_of(response: &Value) -> (Value, Value, Value, Value) {
    let error = &response["error"];
    let data = &error["data"];
    (
        error["code"].clone(),
        data["kind"].clone(),
        data["outcome"].clone(),
        data["refusal"].clone(),
    )
}

fn server_with(rt: &tokio::runtime::Runtime, mode: ServerMode, progress: u64) -> RunningServer {
    rt.block_on(async {
        let mut sc = ServerConfig::default();
        sc.mode(mode).retry_ms(5).progress_count(progress);
        sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
    })
}

fn server(rt: &tokio::runtime::Runtime, mode: ServerMode) -> RunningServer {
    server_with(rt, mode, 0)
}

/// The `result` the loopback server sends for `big_result(size, seed)`, parsed.
fn expected_big(size: usize, seed: u64) -> Value {
    let response: Value = serde_json::from_slice(&expected_result(&json!(1), size, seed)).unwrap();
    response["result"].clone()
}

fn big(id: u64, size: usize, seed: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "big_result", "arguments": {"size": size, "seed": seed}}})
}

/// The text of a tool result, without `resultType` (which only a 2026-07-28 server adds).
fn without_result_type(mut result: Value) -> Value {
    if let Some(obj) = result.as_object_mut() {
        obj.remove("resultType");
    }
    result
}

#[test]
fn a_2025_host_gets_its_version_a_4_mib_result_progress_and_two_calls_in_flight() {
    let rt = runtime();
    let server = server_with(&rt, ServerMode::Buffered, 3);
    let mut host = Host::start(&[&server.url()]);
    let init = host.initialize("2025-06-18");
    assert_eq!(init["protocolVersion"], "2025-06-18");
    assert_eq!(init["serverInfo"]["name"], "ssegate-loopback");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");

    // A line that is not JSON: -32700 with id null, and the bridge goes on.
    host.send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \n");
    let error = host.recv();
    assert_eq!(error["id"], Value::Null);
    assert_eq!(error["error"]["code"], -32700);

    let tools = host.request(json!("list"), "tools/list", json!({}));
    assert!(
        tool_names(&tools).contains(&"big_result".to_owned()),
        "{tools}"
    );

    // A 4 MiB result, with progress (the host's token), exactly as the server wrote it.
    let size = 4 << 20;
    let mut call = big(7, size, 11);
    call["params"]["_meta"] = json!({"progressToken": "p7"});
    host.send(&call);
    let response = host.response(&json!(7));
    assert_eq!(response["result"], expected_big(size, 11));
    let progress: Vec<_> = host
        .seen
        .drain(..)
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "three progress notifications");
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "p7")
    );

    // Two calls in flight, each answered under its own id.
    host.send(&big(8, 300_000, 1));
    host.send(&big(9, 200, 2));
    let mut answered = Vec::new();
    while answered.len() < 2 {
        let m = host.recv();
        if m.get("method").is_none() {
            answered.push(m);
        }
    }
    for m in answered {
        let (size, seed) = if m["id"] == 8 { (300_000, 1) } else { (200, 2) };
        assert_eq!(m["result"], expected_big(size, seed), "id {}", m["id"]);
    }
    assert_eq!(server.stats().calls, 3, "every tool ran once");

    // End of input: exit 0 within a second, the session ended with DELETE.
    host.close_stdin();
    let (code, took) = host.wait(Duration::from_secs(5));
    assert_eq!(code, Some(0), "{}", host.stderr());
    assert!(took < Duration::from_secs(1), "exit took {took:?}");
    assert_eq!(server.stats().sessions_deleted, 1);
}

#[test]
fn a_2025_host_uses_a_2026_07_28_only_server() {
    let rt = runtime();
    let server = server(&rt, ServerMode::Stateless);
    let mut host = Host::start(&[&server.url()]);
    let init = host.initialize("2025-11-25");
    assert_eq!(init["protocolVersion"], "2025-11-25");
    let response = host.request(json!(1), "tools/call", big(1, 1 << 20, 5)["params"].clone());
    assert_eq!(
        without_result_type(response["result"].clone()),
        expected_big(1 << 20, 5)
    );
    let stats = server.stats();
    assert_eq!(
        (stats.sessions_opened, stats.calls),
        (0, 1),
        "no session; one run"
    );
}

#[test]
fn a_2026_07_28_host_uses_a_2025_server() {
    let rt = runtime();
    let server = server(&rt, ServerMode::Strict);
    let mut host = Host::start(&[&server.url()]);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "host-2026", "version": "1"},
    });
    let discover = host.request(json!(0), "server/discover", json!({"_meta": meta}));
    assert_eq!(
        discover["result"]["supportedVersions"],
        json!(["2026-07-28"])
    );
    assert_eq!(discover["result"]["serverInfo"]["name"], "ssegate-loopback");
    let mut params = big(1, 100_000, 3)["params"].clone();
    params["_meta"] = meta;
    let response = host.request(json!(1), "tools/call", params);
    // As a 2026-07-28 result must be: `resultType` first, then the server's members as sent.
    let mut expected = expected_big(100_000, 3);
    expected["resultType"] = json!("complete");
    assert_eq!(response["result"], expected);
    assert_eq!(
        server.stats().sessions_opened,
        1,
        "the bridge holds the session"
    );
}

#[test]
fn bad_input_is_answered_and_the_bridge_goes_on() {
    let rt = runtime();
    let server = server(&rt, ServerMode::Strict);
    let mut host = Host::start(&[&server.url(), "--max-line", "4096"]);
    host.initialize("2025-11-25");
    let cases: [(&[u8], i64); 4] = [
        (b"not json\n", -32700),
        (
            b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]\n",
            -32600,
        ),
        (b"42\n", -32600),
        (b"{\"jsonrpc\":\"2.0\"}\n", -32600),
    ];
    for (line, code) in cases {
        host.send_raw(line);
        let error = host.recv();
        assert_eq!(
            error["error"]["code"],
            code,
            "{}",
            String::from_utf8_lossy(line)
        );
        assert_eq!(error["id"], Value::Null);
    }
    // A line over --max-line: an error naming the limit, nothing of it kept.
    let mut long = vec![b'x'; 10_000];
    long.push(b'\n');
    host.send_raw(&long);
    let error = host.recv();
    assert_eq!(error["error"]["code"], -32600);
    assert_eq!(error["error"]["data"]["kind"], "line-too-long");
    // A response for an id the bridge never asked: dropped and logged.
    host.send(&json!({"jsonrpc": "2.0", "id": "never-asked", "result": {}}));
    // Still answering, and ping is the bridge's own.
    let pong = host.request(json!(2), "ping", json!({}));
    assert_eq!(pong["result"], json!({}));
    assert!(host.stderr_shows("never asked"), "{}", host.stderr());
}

#[test]
fn sigterm_ends_the_session_and_exits_zero() {
    let rt = runtime();
    let server = server(&rt, ServerMode::Strict);
    let mut host = Host::start(&[&server.url()]);
    host.initialize("2025-11-25");
    host.terminate();
    let (code, took) = host.wait(Duration::from_secs(5));
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_secs(1), "exit took {took:?}");
    assert_eq!(server.stats().sessions_deleted, 1);
}

#[test]
fn an_unreachable_server_answers_each_request_and_the_bridge_recovers() {
    let rt = runtime();
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut host = Host::start(&[&format!("http://{addr}/mcp")]);
    let response = host.request(
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}),
    );
    assert_eq!(response["error"]["code"], UNAVAILABLE, "{response}");
    assert_eq!(response["error"]["data"]["outcome"], "not-run");
    let response = host.request(json!(1), "tools/list", json!({}));
    assert_eq!(response["error"]["code"], UNAVAILABLE, "{response}");
    // The server comes up: the bridge reaches it on the next request.
    let server = rt.block_on(async {
        let mut sc = ServerConfig::default();
        sc.mode(ServerMode::Strict);
        sc.start(addr).await.unwrap()
    });
    let init = host.initialize("2025-11-25");
    assert_eq!(init["serverInfo"]["name"], "ssegate-loopback");
    let tools = host.request(json!(2), "tools/list", json!({}));
    assert!(tools["result"]["tools"].is_array(), "{tools}");
    drop(server);
}

/// A cut in the middle of a 1 MiB result, on `mode`, with `--retry retry`: what the host gets, and
/// how often the tool ran.
fn cut_mid_result(mode: ServerMode, retry: &str) -> (Value, u64) {
    let rt = runtime();
    let server = server(&rt, mode);
    let proxy = proxy(&rt, server.addr());
    let url = format!("http://{}/mcp", proxy.addr());
    // Every connection takes its cut when accepted; the bridge's pooled connections carry small
    // answers (`initialize`, `tools/list`) before the result, far from the offset.
    cut_once(&proxy, 300_000);
    let mut host = Host::start(&[&url, "--retry", retry]);
    host.initialize("2025-11-25");
    let listed = host.request(json!("l"), "tools/list", json!({}));
    assert!(listed["result"]["tools"].is_array());
    let size = 1 << 20;
    let response = host.request(json!(1), "tools/call", big(1, size, 9)["params"].clone());
    // Exactly one answer for the id: nothing more arrives.
    host.expect_silence(Duration::from_millis(300));
    assert!(proxy.stats().cuts >= 1, "the proxy cut the stream");
    (response, server.stats().calls)
}

#[test]
fn a_cut_result_is_resumed_whole_on_a_resumable_server() {
    let (response, calls) = cut_mid_result(ServerMode::Buffered, "never");
    assert_eq!(response["result"], expected_big(1 << 20, 9));
    assert_eq!(calls, 1);
}

/// A server that cannot replay the cut result (strict: its budget does not hold it, `409`;
/// stateless: no event ids): the call is not sent again (`--retry never`), and the host is told the
/// outcome is unknown, with the engine's refusal.
#[test]
fn a_cut_result_that_cannot_be_resumed_is_outcome_unknown_and_runs_once() {
    for (mode, refusal) in [
        (ServerMode::Strict, "replay-unavailable"),
        (ServerMode::Stateless, "unresumable"),
    ] {
        let (response, calls) = cut_mid_result(mode, "never");
        assert_eq!(
            contract_of(&response),
            (
                json!(OUTCOME_UNKNOWN),
                json!("refused"),
                json!("unknown"),
                json!(refusal)
            ),
            "{mode:?}: {response}"
        );
        assert_eq!(response["error"]["data"]["method"], "tools/call");
        assert_eq!(calls, 1, "{mode:?}: never run again");
        let (response, calls) = cut_mid_result(mode, "always");
        assert_eq!(
            without_result_type(response["result"].clone()),
            expected_big(1 << 20, 9),
            "{mode:?}"
        );
        assert_eq!(calls, 2, "{mode:?}: run again, as --retry always allows");
    }
}

/// A server that answers the resume of a cut result with a new stream (it ran the call again): the
/// engine refuses the stream (its ids skip what the cut stream had next: `gap`), and since the tool
/// may have run, the host is told the outcome is unknown.
#[test]
fn a_started_over_stream_of_a_tool_call_is_refused_and_outcome_unknown() {
    let (response, _) = cut_mid_result(ServerMode::Restart, "never");
    assert_eq!(
        contract_of(&response),
        (
            json!(OUTCOME_UNKNOWN),
            json!("refused"),
            json!("unknown"),
            json!("gap")
        ),
        "{response}"
    );
    assert_eq!(
        response["error"]["message"],
        "outcome unknown: the call's answer was lost and it was not sent again; the tool may have run"
    );
}

#[test]
fn a_cut_task_result_is_read_again_and_runs_once() {
    let (response, calls) = cut_mid_result(ServerMode::Tasks, "never");
    assert_eq!(
        without_result_type(response["result"].clone()),
        expected_big(1 << 20, 9)
    );
    assert_eq!(calls, 1);
}

/// Waits up to 10 s for `done`.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A bridge whose host has a call in flight as a task that works for 30 s before its result.
fn task_in_flight(rt: &tokio::runtime::Runtime) -> (RunningServer, Host) {
    let server = rt.block_on(async {
        let mut sc = ServerConfig::default();
        sc.mode(ServerMode::Tasks)
            .task_work(Duration::from_secs(30));
        sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
    });
    let mut host = Host::start(&[&server.url()]);
    host.initialize("2025-11-25");
    host.send(&big(1, 1000, 1));
    eventually("the task is created", || server.stats().tasks_created == 1);
    (server, host)
}

#[test]
fn the_hosts_cancel_cancels_the_task_and_gets_no_answer() {
    let rt = runtime();
    let (server, mut host) = task_in_flight(&rt);
    host.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 1, "reason": "the user gave up"}}),
    );
    eventually("the task is cancelled", || {
        server.stats().tasks_cancelled == 1
    });
    host.expect_silence(Duration::from_millis(300));
    assert_eq!(server.stats().calls, 0, "the tool never ran");
}

#[test]
fn end_of_input_cancels_calls_in_flight() {
    let rt = runtime();
    let (server, mut host) = task_in_flight(&rt);
    host.close_stdin();
    let (code, took) = host.wait(Duration::from_secs(5));
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_secs(1), "exit took {took:?}");
    eventually("the task is cancelled", || {
        server.stats().tasks_cancelled == 1
    });
}

#[test]
fn an_expired_session_is_opened_again_transparently() {
    let rt = runtime();
    let server = rt.block_on(async {
        let mut sc = ServerConfig::default();
        sc.mode(ServerMode::Strict)
            .session_idle_timeout(Duration::from_millis(300));
        sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
    });
    let mut host = Host::start(&[&server.url()]);
    host.initialize("2025-11-25");
    let first = host.request(json!(1), "tools/call", big(1, 5000, 1)["params"].clone());
    assert_eq!(first["result"], expected_big(5000, 1));
    eventually("the session expires", || server.session_count() == 0);
    let second = host.request(json!(2), "tools/call", big(2, 5000, 2)["params"].clone());
    assert_eq!(second["result"], expected_big(5000, 2), "{second}");
    let stats = server.stats();
    assert_eq!((stats.sessions_opened, stats.calls), (2, 2));
}

#[test]
fn a_closed_stdout_stops_the_bridge() {
    let rt = runtime();
    let server = server(&rt, ServerMode::Strict);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ssegate"))
        .args(["bridge", &server.url()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    use std::io::Write;
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
        .unwrap();
    stdin.flush().unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "still running");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(1));
}

#[test]
fn a_2026_07_28_servers_input_requests_are_asked_of_a_2025_host() {
    let rt = runtime();
    let server = server(&rt, ServerMode::Stateless);
    let mut host = Host::start(&[&server.url()]);
    host.initialize("2025-11-25");
    host.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "ask", "arguments": {"rounds": 2}}}));
    // Each round's elicitation reaches the host as a request of the bridge's own; the host's
    // answer goes back in the retry.
    for (round, name) in [(1, "Ada"), (2, "Grace")] {
        let request = host.recv();
        assert_eq!(request["method"], "elicitation/create", "{request}");
        let message = request["params"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("round {round} of 2")),
            "{message}"
        );
        host.send(&json!({"jsonrpc": "2.0", "id": request["id"],
                          "result": {"action": "accept", "content": {"name": name}}}));
    }
    let response = host.response(&json!(1));
    assert!(
        response["result"].to_string().contains("Grace"),
        "{response}"
    );
}
