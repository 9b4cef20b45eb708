//! The guarded client's tasks against the test kit's loopback server (both generations), whose
//! counters are the oracle: `calls` (how many times a tool had its effect) and `task_reads`.
//! What the real servers cannot be made to do on demand is here: a cut read whose resume misses
//! (2025-11-25 `strict`: the read is sent again on the same session, never a new session, which
//! would not know the task), input asked during a task, a failed task, an expired one, a call
//! dropped at its deadline (the task is cancelled), and the refusals of each mode.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use ssegate::client::{
    CallOptions, Client, ClientConfig, ClientError, Handler, HandlerFuture, Response, Retry,
    RpcError, TaskErrorKind, TaskGeneration, TaskMode,
};
use ssegate_testkit::proxy::{Cut, ProxyConfig, RunningProxy};
use ssegate_testkit::server::{
    DEFAULT_SEED, RunningServer, ServerConfig, ServerMode, TaskSupport, expected_result,
    expected_result_2026_07_28,
};

const SIZE: usize = 1 << 20;
const LIMIT: Duration = Duration::from_secs(60);

fn server_config(mode: ServerMode, tasks: TaskSupport) -> ServerConfig {
    let mut c = ServerConfig::default();
    c.mode(mode)
        .result_size(SIZE)
        .retry_ms(5)
        .tasks(tasks)
        .task_work(Duration::from_millis(60))
        .task_poll_interval(Duration::from_millis(10));
    c
}

async fn start(config: &ServerConfig) -> (RunningServer, RunningProxy) {
    let server = config.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let mut pc = ProxyConfig::default();
    pc.accept_delay(Duration::ZERO);
    let proxy = pc.start(server.addr()).await.unwrap();
    (server, proxy)
}

fn client_config() -> ClientConfig {
    let mut c = ClientConfig::default();
    c.reuse_connections(false)
        .replay_timeout(Duration::from_millis(500))
        .task_poll(Duration::from_millis(5), Duration::from_millis(50));
    c
}

async fn connect(proxy: &RunningProxy, config: ClientConfig) -> Client {
    Client::connect(&format!("http://{}/mcp", proxy.addr()), config)
        .await
        .unwrap()
}

async fn call(
    client: &Client,
    tool: &str,
    args: Value,
    mode: TaskMode,
) -> Result<Response, ClientError> {
    let mut options = CallOptions::default();
    options.tasks(mode).retry(Retry::Never);
    client
        .call_with(
            "tools/call",
            json!({"name": tool, "arguments": args}),
            &options,
        )
        .await
}

/// The `result` member the server sends for `big_result` (2026-07-28 or 2025), whatever the id.
fn expected_big_result(stateless: bool) -> Value {
    let bytes = if stateless {
        expected_result_2026_07_28(&json!(1), SIZE, DEFAULT_SEED)
    } else {
        expected_result(&json!(1), SIZE, DEFAULT_SEED)
    };
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    v["result"].clone()
}

fn result_of(r: &Response) -> Value {
    let v: Value = r.message.deserialize().expect("one JSON value");
    assert_eq!(
        v["id"],
        json!(r.request_id.to_string().parse::<i64>().unwrap())
    );
    v["result"].clone()
}

/// The next connection whose response reaches `offset` bytes is cut there, and only that one.
fn cut_once(proxy: &RunningProxy, offset: u64) {
    proxy.set_default_cut(Cut::At(offset));
    proxy.set_max_cuts(Some(proxy.stats().cuts + 1));
}

/// Every generation and framing: the read carrying a 1 MiB result cut at several offsets; the
/// result is exact, the tool ran once per call, and the call was never issued again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_read_is_read_again_and_the_tool_runs_once() {
    tokio::time::timeout(LIMIT, async {
        // (mode, framing of the result read as SSE, generation)
        for (mode, sse, generation) in [
            (ServerMode::Stateless, false, TaskGeneration::Extension),
            (ServerMode::Stateless, true, TaskGeneration::Extension),
            // The 2025 session modes: `strict` cannot replay the result (its budget is smaller:
            // the resume misses and the read is sent again on the same session); `buffered`
            // replays it (resumed in place).
            (ServerMode::Strict, true, TaskGeneration::Experimental),
            (ServerMode::Buffered, true, TaskGeneration::Experimental),
            (ServerMode::Strict, false, TaskGeneration::Experimental),
        ] {
            let mut sc = server_config(mode, TaskSupport::Offer);
            sc.task_reads_sse(sse);
            let (server, proxy) = start(&sc).await;
            let client = connect(&proxy, client_config()).await;
            let label = format!("{mode} sse={sse}");
            let session = client.session_id();
            let want = expected_big_result(mode.is_stateless());
            for offset in [2048, SIZE as u64 / 2, SIZE as u64 - 8] {
                let before = server.stats();
                let cuts = proxy.stats().cuts;
                cut_once(&proxy, offset);
                let r = call(&client, "big_result", json!({}), TaskMode::Auto)
                    .await
                    .unwrap_or_else(|e| panic!("{label} cut at {offset}: {e}"));
                proxy.set_max_cuts(Some(proxy.stats().cuts));
                assert_eq!(
                    proxy.stats().cuts,
                    cuts + 1,
                    "{label} {offset}: the read was cut"
                );
                let task = r.outcome.task.as_ref().expect("ran as a task");
                assert_eq!(task.generation(), generation, "{label}");
                assert_eq!(r.outcome.attempts, 1, "{label}: the call was sent once");
                let mut got = result_of(&r);
                if generation == TaskGeneration::Experimental {
                    // `tasks/result` ties the result to its task.
                    let meta = got.as_object_mut().unwrap().remove("_meta").unwrap();
                    assert_eq!(
                        meta["io.modelcontextprotocol/related-task"]["taskId"],
                        task.id(),
                        "{label}"
                    );
                }
                assert!(got == want, "{label} {offset}: not the exact result");
                let after = server.stats();
                assert_eq!(
                    after.calls - before.calls,
                    1,
                    "{label} {offset}: the tool ran once"
                );
                assert_eq!(after.tasks_created - before.tasks_created, 1, "{label}");
                assert!(
                    after.task_reads - before.task_reads >= 2,
                    "{label} {offset}: the result was read again"
                );
            }
            assert_eq!(client.session_id(), session, "{label}: no new session");
            proxy.shutdown().await;
            server.shutdown().await;
        }
    })
    .await
    .expect("bounded time");
}

/// Answers every elicitation with the name `n<k>`.
#[derive(Default)]
struct Namer(AtomicU32);

impl Handler for Namer {
    fn request(&self, method: &str, _params: Option<&Value>) -> HandlerFuture {
        let n = self.0.fetch_add(1, Ordering::Relaxed) + 1;
        let answer = if method == "elicitation/create" {
            Ok(json!({"action": "accept", "content": {"name": format!("n{n}")}}))
        } else {
            Err(RpcError::new(-32601, method))
        };
        Box::pin(async move { answer })
    }
}

/// 2026-07-28: a task that asks for input gets each round answered by the `Handler` through
/// `tasks/update`, once per request key.
#[tokio::test]
async fn input_asked_during_a_task_is_answered_once_per_key() {
    tokio::time::timeout(LIMIT, async {
        let (server, proxy) =
            start(&server_config(ServerMode::Stateless, TaskSupport::Offer)).await;
        let namer = Arc::new(Namer::default());
        let mut config = client_config();
        config.handler(namer.clone());
        let client = connect(&proxy, config).await;
        let r = call(&client, "ask", json!({"rounds": 3}), TaskMode::Auto)
            .await
            .unwrap();
        assert!(r.outcome.task.is_some());
        assert_eq!(r.outcome.input_rounds, 3);
        assert_eq!(
            result_of(&r)["content"][0]["text"],
            "3 rounds; last name: n3"
        );
        assert_eq!(namer.0.load(Ordering::Relaxed), 3, "one answer per key");
        assert_eq!(server.stats().calls, 1);
        proxy.shutdown().await;
        server.shutdown().await;
    })
    .await
    .expect("bounded time");
}

/// Typed ends: a failed task, a task purged after its ttl, tasks required by the call and not
/// offered, tasks offered and refused by a server that requires them.
#[tokio::test]
async fn task_errors_are_typed() {
    tokio::time::timeout(LIMIT, async {
        for mode in [ServerMode::Stateless, ServerMode::Strict] {
            // A failed task: its JSON-RPC error.
            let mut sc = server_config(mode, TaskSupport::Offer);
            sc.task_failure(Some((-32603, "the backend is down".to_owned())));
            let (server, proxy) = start(&sc).await;
            let client = connect(&proxy, client_config()).await;
            let err = call(&client, "big_result", json!({}), TaskMode::Auto)
                .await
                .unwrap_err();
            let ClientError::Task(e) = &err else {
                panic!("{mode}: {err}")
            };
            assert!(
                matches!(&e.kind, TaskErrorKind::Failed { error } if error["code"] == -32603),
                "{mode}: {e}"
            );
            assert!(e.task.is_some());
            proxy.shutdown().await;
            server.shutdown().await;

            // Purged after its ttl, before the client came back to it.
            let mut sc = server_config(mode, TaskSupport::Offer);
            sc.task_ttl(Some(Duration::from_millis(100)));
            let (server, proxy) = start(&sc).await;
            let client = connect(&proxy, client_config()).await;
            let r = call(&client, "big_result", json!({"size": 64}), TaskMode::Auto)
                .await
                .unwrap();
            let task = r.outcome.task.clone().unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
            let err = client
                .resume_task(&task, &CallOptions::default())
                .await
                .unwrap_err();
            assert!(
                matches!(&err, ClientError::Task(e) if matches!(e.kind, TaskErrorKind::NotFound { .. })),
                "{mode}: {err:?}"
            );
            proxy.shutdown().await;
            server.shutdown().await;

            // Required by the call, not offered: nothing is sent.
            let (server, proxy) = start(&server_config(mode, TaskSupport::Off)).await;
            let client = connect(&proxy, client_config()).await;
            let err = call(&client, "big_result", json!({}), TaskMode::Require)
                .await
                .unwrap_err();
            assert!(
                matches!(&err, ClientError::Task(e) if e.kind == TaskErrorKind::Unsupported),
                "{mode}: {err:?}"
            );
            assert_eq!(server.stats().calls, 0);
            // Auto against a server without tasks: the direct answer.
            let r = call(&client, "big_result", json!({"size": 64}), TaskMode::Auto)
                .await
                .unwrap();
            assert!(r.outcome.task.is_none());
            proxy.shutdown().await;
            server.shutdown().await;

            // Refused by the call, required by the server.
            let (server, proxy) = start(&server_config(mode, TaskSupport::Require)).await;
            let client = connect(&proxy, client_config()).await;
            let err = call(&client, "big_result", json!({}), TaskMode::Never)
                .await
                .unwrap_err();
            assert!(
                matches!(&err, ClientError::Task(e) if e.kind == TaskErrorKind::Required),
                "{mode}: {err:?}"
            );
            assert_eq!(server.stats().calls, 0, "{mode}: nothing ran");
            proxy.shutdown().await;
            server.shutdown().await;
        }
    })
    .await
    .expect("bounded time");
}

/// A call whose deadline passes while its task works: the task is cancelled (`tasks/cancel`), and
/// its tool never runs.
#[tokio::test]
async fn a_call_dropped_at_its_deadline_cancels_its_task() {
    tokio::time::timeout(LIMIT, async {
        for mode in [ServerMode::Stateless, ServerMode::Strict] {
            let mut sc = server_config(mode, TaskSupport::Offer);
            sc.task_work(Duration::from_secs(2));
            let (server, proxy) = start(&sc).await;
            let client = connect(&proxy, client_config()).await;
            let mut options = CallOptions::default();
            options
                .tasks(TaskMode::Auto)
                .timeout(Duration::from_millis(300));
            let err = client
                .call_with(
                    "tools/call",
                    json!({"name": "big_result", "arguments": {}}),
                    &options,
                )
                .await
                .unwrap_err();
            assert!(matches!(err, ClientError::Timeout(_)), "{mode}: {err}");
            assert_eq!(server.stats().tasks_created, 1);
            // The cancel is sent in the background.
            for _ in 0..100 {
                if server.stats().tasks_cancelled == 1 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert_eq!(server.stats().tasks_cancelled, 1, "{mode}: tasks/cancel");
            assert_eq!(
                server.stats().calls,
                0,
                "{mode}: the cancelled task never ran"
            );
            proxy.shutdown().await;
            server.shutdown().await;
        }
    })
    .await
    .expect("bounded time");
}

/// A status read (`tasks/get` while the task works: a few hundred bytes) cut in its middle is read
/// again too; the call is not issued again and the tool runs once.
#[tokio::test]
async fn a_cut_status_read_is_read_again() {
    tokio::time::timeout(LIMIT, async {
        for mode in [ServerMode::Stateless, ServerMode::Strict] {
            let mut sc = server_config(mode, TaskSupport::Offer);
            sc.task_work(Duration::from_millis(300));
            let (server, proxy) = start(&sc).await;
            let client = connect(&proxy, client_config()).await;
            // A first call lists the tools (2025: to learn their task support).
            call(&client, "big_result", json!({"size": 16}), TaskMode::Auto)
                .await
                .unwrap();
            let before = server.stats();
            // The call's connection passes; the next one, the first `tasks/get`, is cut inside
            // its body.
            proxy.set_next_cut(Cut::None);
            proxy.set_next_cut(Cut::At(150));
            let r = call(&client, "big_result", json!({"size": 4096}), TaskMode::Auto)
                .await
                .unwrap_or_else(|e| panic!("{mode}: {e}"));
            proxy.clear_cuts();
            assert_eq!(proxy.stats().cuts, 1, "{mode}: the status read was cut");
            assert_eq!(r.outcome.attempts, 1, "{mode}");
            assert!(r.outcome.task_rereads >= 1, "{mode}: {:?}", r.outcome);
            let after = server.stats();
            assert_eq!(after.calls - before.calls, 1, "{mode}");
            assert_eq!(after.tasks_created - before.tasks_created, 1, "{mode}");
            proxy.shutdown().await;
            server.shutdown().await;
        }
    })
    .await
    .expect("bounded time");
}
