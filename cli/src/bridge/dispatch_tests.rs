//! The relay in this process: a host on an in-memory duplex, the test kit's server on loopback.
//! The expected answers are the MCP stdio transport's and JSON-RPC's rules, and the wire contract's
//! codes, stated here.
#![cfg(test)]

use std::time::Duration;

use serde_json::{Value, json};
use ssegate_testkit::server::{RunningServer, ServerConfig, ServerMode};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::host::{Duplex, DuplexHost};
use super::{BridgeConfig, relay};

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// How long a test waits for a line it expects.
const WAIT: Duration = Duration::from_secs(10);

/// A relay under test and its host's end.
struct TestBridge {
    host: DuplexHost,
    stop: Option<oneshot::Sender<()>>,
    done: JoinHandle<i32>,
}

impl TestBridge {
    fn start(config: BridgeConfig) -> TestBridge {
        let (duplex, host) = Duplex::new();
        let (stop, stopped) = oneshot::channel::<()>();
        let done = tokio::spawn(relay(config, duplex, async move {
            let _ = stopped.await;
        }));
        TestBridge {
            host,
            stop: Some(stop),
            done,
        }
    }

    fn send_raw(&self, bytes: &[u8]) {
        let input = self.host.input.as_ref().expect("input open");
        input.send(bytes.to_vec()).expect("the relay reads");
    }

    fn send(&self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// The next line written to the host, parsed.
    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(WAIT, self.host.output.recv())
            .await
            .expect("a line in time")
            .expect("the relay is running");
        assert!(!line.contains(&b'\n'), "one message per line");
        serde_json::from_slice(&line).expect("each line is JSON")
    }

    /// Nothing written to the host for `period`.
    async fn silence(&mut self, period: Duration) {
        if let Ok(line) = tokio::time::timeout(period, self.host.output.recv()).await {
            panic!(
                "expected silence, got {:?}",
                line.map(|l| String::from_utf8_lossy(&l).into_owned())
            );
        }
    }

    async fn initialize(&mut self, version: &str) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                          "params": {"protocolVersion": version, "capabilities": {},
                                     "clientInfo": {"name": "dispatch-test", "version": "1"}}}));
        let answer = self.recv().await;
        assert_eq!(answer["id"], 0, "{answer}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        answer["result"].clone()
    }

    /// The relay's exit status once it ended.
    async fn status(self) -> i32 {
        tokio::time::timeout(WAIT, self.done)
            .await
            .expect("the relay ends in time")
            .expect("the relay does not panic")
    }
}

async fn server(mode: ServerMode) -> RunningServer {
    let mut sc = ServerConfig::default();
    sc.mode(mode).retry_ms(5);
    sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
}

fn code(answer: &Value) -> i64 {
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("an error: {answer}"))
}

async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !done() {
        assert!(started.elapsed() < WAIT, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_that_are_no_request_are_answered_and_the_relay_goes_on() {
    // Nothing here reaches the server: nothing listens at its address.
    let mut config = BridgeConfig::new("http://127.0.0.1:9/mcp");
    config.max_line = 64;
    let mut bridge = TestBridge::start(config);

    bridge.send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \n");
    let answer = bridge.recv().await;
    assert_eq!((code(&answer), &answer["id"]), (PARSE_ERROR, &Value::Null));

    bridge.send_raw(b"[{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"}]\n");
    assert_eq!(code(&bridge.recv().await), INVALID_REQUEST, "a batch");

    bridge.send_raw(b"{\"jsonrpc\": \"2.0\"}\n");
    assert_eq!(
        code(&bridge.recv().await),
        INVALID_REQUEST,
        "no method, no id"
    );

    // Over the limit, in pieces: answered by its length, nothing of it parsed.
    bridge.send_raw(&[b'x'; 40]);
    bridge.send_raw(&[b'y'; 40]);
    bridge.send_raw(b"\n");
    let answer = bridge.recv().await;
    assert_eq!(code(&answer), INVALID_REQUEST);
    assert_eq!(answer["error"]["data"]["kind"], "line-too-long", "{answer}");
    assert_eq!(answer["error"]["data"]["limit"], 64);

    // A blank line carries nothing; a CRLF line is a line; `ping` is answered here.
    bridge.send_raw(b"\n  \n{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}\r\n");
    assert_eq!(
        bridge.recv().await,
        json!({"jsonrpc": "2.0", "id": "p", "result": {}})
    );

    // The end of the host's input ends the relay, status 0.
    bridge.host.input = None;
    assert_eq!(bridge.status().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_reach_the_server_and_hidden_tools_never_do() {
    let server = server(ServerMode::Buffered).await;
    let mut config = BridgeConfig::new(&server.url());
    config.ignore_tools = vec!["BIG_*".into()];
    let mut bridge = TestBridge::start(config);

    let init = bridge.initialize("2025-06-18").await;
    assert_eq!(init["protocolVersion"], "2025-06-18");
    assert_eq!(init["serverInfo"]["name"], "ssegate-loopback");

    bridge.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let listed = bridge.recv().await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"progress"), "{names:?}");
    assert!(!names.contains(&"big_result"), "{names:?}");

    bridge.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "big_result", "arguments": {"size": 10}}}));
    let refused = bridge.recv().await;
    assert_eq!(
        (code(&refused), &refused["id"]),
        (INVALID_PARAMS, &json!(2))
    );

    bridge.send(&json!({"jsonrpc": "2.0", "id": "c", "method": "tools/call",
                        "params": {"name": "progress", "arguments": {"count": 2},
                                   "_meta": {"progressToken": "t"}}}));
    for n in 1..=2 {
        let progress = bridge.recv().await;
        assert_eq!(progress["method"], "notifications/progress", "{progress}");
        assert_eq!(progress["params"]["progress"], n);
    }
    let answer = bridge.recv().await;
    assert_eq!(answer["id"], "c");
    assert!(answer["result"]["content"].is_array(), "{answer}");
    assert_eq!(server.stats().calls, 1, "the hidden tool never ran");

    // Stopping (a signal, for the command) ends the relay with 0 and the session with DELETE.
    bridge.stop.take().unwrap().send(()).unwrap();
    assert_eq!(bridge.status().await, 0);
    eventually("the session is ended", || {
        server.stats().sessions_deleted == 1
    })
    .await;
}

/// A relay whose host has a call (id 1, the request returned) in flight as a task that works for
/// 30 s before its result.
async fn task_in_flight() -> (RunningServer, TestBridge, Value) {
    let server = {
        let mut sc = ServerConfig::default();
        sc.mode(ServerMode::Tasks)
            .task_work(Duration::from_secs(30));
        sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
    };
    let mut bridge = TestBridge::start(BridgeConfig::new(&server.url()));
    bridge.initialize("2025-11-25").await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "big_result", "arguments": {"size": 100}}});
    bridge.send(&call);
    eventually("the task is created", || server.stats().tasks_created == 1).await;
    (server, bridge, call)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_in_use_is_refused_and_a_cancelled_request_gets_no_answer() {
    let (server, mut bridge, call) = task_in_flight().await;

    // The same id again while the first is under way: refused, the first goes on.
    bridge.send(&call);
    let refused = bridge.recv().await;
    assert_eq!(
        (code(&refused), &refused["id"]),
        (INVALID_REQUEST, &json!(1))
    );
    assert_eq!(server.stats().tasks_created, 1);

    bridge.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 1}}),
    );
    eventually("the task is cancelled", || {
        server.stats().tasks_cancelled == 1
    })
    .await;
    bridge.silence(Duration::from_millis(300)).await;

    // The id is free again.
    bridge.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(
        bridge.recv().await,
        json!({"jsonrpc": "2.0", "id": 1, "result": {}})
    );
    assert_eq!(server.stats().calls, 0, "the tool never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_input_cancels_what_is_under_way() {
    let (server, mut bridge, _) = task_in_flight().await;
    bridge.host.input = None;
    assert_eq!(bridge.status().await, 0);
    eventually("the task is cancelled", || {
        server.stats().tasks_cancelled == 1
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_stops_reading_ends_the_relay_with_1() {
    let mut bridge = TestBridge::start(BridgeConfig::new("http://127.0.0.1:9/mcp"));
    let (_closed, output) = tokio::sync::mpsc::unbounded_channel();
    drop(std::mem::replace(&mut bridge.host.output, output));
    bridge.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(bridge.status().await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_requests_are_asked_of_the_host_under_ids_of_their_own() {
    let server = server(ServerMode::Stateless).await;
    let mut bridge = TestBridge::start(BridgeConfig::new(&server.url()));
    bridge.initialize("2025-11-25").await;
    bridge.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": {"name": "ask", "arguments": {"rounds": 2}}}));
    let mut asked = Vec::new();
    for name in ["Ada", "Grace"] {
        let request = bridge.recv().await;
        assert_eq!(request["method"], "elicitation/create", "{request}");
        assert!(!asked.contains(&request["id"]), "a new id each time");
        asked.push(request["id"].clone());
        // An answer to an id never asked is dropped; the relay goes on.
        bridge.send(&json!({"jsonrpc": "2.0", "id": "never-asked", "result": {}}));
        bridge.send(&json!({"jsonrpc": "2.0", "id": request["id"],
                            "result": {"action": "accept", "content": {"name": name}}}));
    }
    let answer = bridge.recv().await;
    assert_eq!(answer["id"], 1);
    assert!(answer["result"].to_string().contains("Grace"), "{answer}");
}
