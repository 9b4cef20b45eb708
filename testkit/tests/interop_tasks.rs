//! The guarded client's tasks against the real task servers of `interop/` ("Task servers" in
//! interop/README.md), through the fault proxy: rmcp 3.11 (MCP 2026-07-28, the extension
//! `io.modelcontextprotocol/tasks`, SSE and JSON answers), `@modelcontextprotocol/sdk` 1.32.2
//! (2025-11-25 experimental tasks) and `@modelcontextprotocol/server-everything` 2026.8.31.
//!
//! Every read that carries the result (the completed `tasks/get` on 2026-07-28, `tasks/result` on
//! 2025-11-25) is cut at offsets from its first kilobytes to its last bytes: the result arrives
//! exactly (a 4 MiB receipt of 16-byte blocks, so a torn or doubled part cannot pass) and the
//! server's own counter (`count`) says the tool ran once. Missing servers fail the tests under
//! `CI` and skip loudly otherwise (`ssegate_testkit::interop::start`).

use std::time::Duration;

use serde_json::{Value, json};
use ssegate::client::{
    CallOptions, Client, ClientConfig, ClientError, Response, Retry, TaskErrorKind, TaskGeneration,
    TaskMode,
};
use ssegate_testkit::interop::{Sdk, Server, pattern, start};
use ssegate_testkit::proxy::{Cut, ProxyConfig, RunningProxy};

const RECEIPT: usize = 4 << 20;
const LIMIT: Duration = Duration::from_secs(180);

struct Rig {
    server: Server,
    proxy: RunningProxy,
    client: Client,
}

impl Rig {
    async fn start(sdk: Sdk, flags: &[&str]) -> Option<Rig> {
        let server = start(sdk, flags)?;
        let mut pc = ProxyConfig::default();
        pc.accept_delay(Duration::ZERO);
        let proxy = pc.start(server.addr()).await.expect("proxy");
        let mut config = ClientConfig::default();
        // Each request on its own connection: a cut hits the read it is aimed at.
        config
            .reuse_connections(false)
            .task_poll(Duration::from_millis(20), Duration::from_millis(200))
            .replay_timeout(Duration::from_secs(2));
        let client = Client::connect(&format!("http://{}/mcp", proxy.addr()), config)
            .await
            .unwrap_or_else(|e| panic!("{}: connect: {e}", server.label()));
        Some(Rig {
            server,
            proxy,
            client,
        })
    }

    fn label(&self) -> &str {
        self.server.label()
    }

    /// How many times `charge` ran (the server's own counter).
    async fn count(&self) -> u64 {
        let mut options = CallOptions::default();
        options.tasks(TaskMode::Never);
        let r = self
            .client
            .call_with(
                "tools/call",
                json!({"name": "count", "arguments": {}}),
                &options,
            )
            .await
            .unwrap_or_else(|e| panic!("{}: count: {e}", self.label()));
        let v: Value = r.message.deserialize().unwrap();
        v["result"]["content"][0]["text"]
            .as_str()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or_else(|| panic!("{}: count answered {v}", self.label()))
    }

    /// The next connection whose response reaches `offset` bytes is cut there, and only that one.
    fn cut_once(&self, offset: u64) {
        self.proxy.set_default_cut(Cut::At(offset));
        self.proxy.set_max_cuts(Some(self.proxy.stats().cuts + 1));
    }

    async fn call(
        &self,
        name: &str,
        arguments: Value,
        mode: TaskMode,
    ) -> Result<Response, ClientError> {
        let mut options = CallOptions::default();
        options.tasks(mode).retry(Retry::Never);
        self.client
            .call_with(
                "tools/call",
                json!({"name": name, "arguments": arguments}),
                &options,
            )
            .await
    }
}

/// The `charge` result: `charged N` and the receipt, exactly.
fn assert_receipt(label: &str, case: &str, r: &Response, charged: u64) {
    let v: Value = r.message.deserialize().expect("one JSON value");
    let content = &v["result"]["content"];
    assert_eq!(
        content[0]["text"],
        format!("charged {charged}"),
        "{label}: {case}"
    );
    assert!(
        content[1]["text"].as_str() == Some(pattern(RECEIPT).as_str()),
        "{label}: {case}: the receipt is not exact ({} bytes)",
        content[1]["text"].as_str().map_or(0, str::len)
    );
}

/// `charge` (not idempotent) as a task, its result-carrying read cut at each offset: the exact
/// receipt, and the tool ran once per call.
async fn cut_every_read(rig: &Rig, generation: TaskGeneration) {
    let label = rig.label().to_owned();
    for offset in [4096, 1 << 20, 3 << 20, RECEIPT as u64 - 64] {
        let case = format!("read cut at byte {offset}");
        let before = rig.count().await;
        let cuts = rig.proxy.stats().cuts;
        rig.cut_once(offset);
        let r = rig
            .call("charge", json!({"size": RECEIPT}), TaskMode::Auto)
            .await
            .unwrap_or_else(|e| panic!("{label}: {case}: {e}"));
        rig.proxy.set_max_cuts(Some(rig.proxy.stats().cuts));
        assert_eq!(
            rig.proxy.stats().cuts,
            cuts + 1,
            "{label}: {case}: the read was cut"
        );
        let task = r
            .outcome
            .task
            .as_ref()
            .unwrap_or_else(|| panic!("{label}: {case}: not a task"));
        assert_eq!(task.generation(), generation, "{label}");
        assert!(
            r.outcome.task_reads >= 2,
            "{label}: {case}: {:?}",
            r.outcome
        );
        assert_receipt(&label, &case, &r, before + 1);
        assert_eq!(
            rig.count().await,
            before + 1,
            "{label}: {case}: charge ran once"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_2026_task_results_survive_cut_reads() {
    tokio::time::timeout(LIMIT, async {
        for flags in [&[][..], &["--json-response"]] {
            let Some(rig) = Rig::start(Sdk::RmcpTasks, flags).await else {
                return;
            };
            assert_eq!(rig.client.protocol_version().as_deref(), Some("2026-07-28"));
            cut_every_read(&rig, TaskGeneration::Extension).await;
        }
    })
    .await
    .expect("bounded time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_2025_task_results_survive_cut_reads() {
    tokio::time::timeout(LIMIT, async {
        let Some(rig) = Rig::start(Sdk::Ts, &["--tasks"]).await else {
            return;
        };
        assert_eq!(rig.client.protocol_version().as_deref(), Some("2025-11-25"));
        cut_every_read(&rig, TaskGeneration::Experimental).await;
    })
    .await
    .expect("bounded time");
}

/// A `tools/call` whose answer (the task handle) is lost before any of it arrived: no task id,
/// nothing to read: outcome unknown, never a second call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_before_its_handle_is_outcome_unknown() {
    tokio::time::timeout(LIMIT, async {
        for (sdk, flags) in [
            (Sdk::RmcpTasks, &["--json-response"][..]),
            (Sdk::Ts, &["--tasks"]),
        ] {
            let Some(rig) = Rig::start(sdk, flags).await else {
                continue;
            };
            let label = rig.label().to_owned();
            let before = rig.count().await;
            // Reset as the answer's first byte arrives: the request was sent, nothing came back.
            // (A cut after an event id of a 2025-11-25 stream would be resumed instead.)
            rig.cut_once(0);
            let err = rig
                .call("charge", json!({"size": 1024}), TaskMode::Auto)
                .await
                .expect_err("the handle was cut");
            rig.proxy.set_max_cuts(Some(rig.proxy.stats().cuts));
            assert!(
                matches!(err, ClientError::OutcomeUnknown { .. }),
                "{label}: {err}"
            );
            // The task may run (it was created); the call was not issued again.
            tokio::time::sleep(Duration::from_millis(600)).await;
            assert!(rig.count().await <= before + 1, "{label}: charge ran twice");
        }
    })
    .await
    .expect("bounded time");
}

/// Task errors are typed: a server that runs `charge` only as a task answers a call refusing
/// tasks with `-32021` (2026-07-28) or says so in the tool's definition (2025-11-25); an unknown
/// task id is `NotFound`; a handle persisted as JSON is read again by a second client
/// (2026-07-28).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_errors_are_typed_and_handles_resume() {
    tokio::time::timeout(LIMIT, async {
        for (sdk, flags) in [
            (Sdk::RmcpTasks, &["--tasks-required"][..]),
            (Sdk::Ts, &["--tasks", "--tasks-required"]),
        ] {
            let Some(rig) = Rig::start(sdk, flags).await else {
                continue;
            };
            let label = rig.label().to_owned();
            let before = rig.count().await;
            let err = rig
                .call("charge", json!({"size": 16}), TaskMode::Never)
                .await
                .expect_err("tasks are required");
            assert!(
                matches!(&err, ClientError::Task(e) if e.kind == TaskErrorKind::Required),
                "{label}: {err:?}"
            );
            assert_eq!(rig.count().await, before, "{label}: nothing ran");
            let r = rig
                .call("charge", json!({"size": RECEIPT}), TaskMode::Require)
                .await
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_receipt(&label, "required task", &r, before + 1);

            let task = r.outcome.task.clone().expect("a task");
            let unknown = ssegate::client::TaskHandle::new("no-such-task", task.generation());
            let err = rig
                .client
                .resume_task(&unknown, &CallOptions::default())
                .await
                .expect_err("unknown");
            assert!(
                matches!(&err, ClientError::Task(e) if matches!(e.kind, TaskErrorKind::NotFound { .. })),
                "{label}: {err:?}"
            );
            if task.generation() == TaskGeneration::Extension {
                // Persisted, then read by another client: the same result, nothing ran again.
                let stored = task.to_json().to_string();
                let handle = ssegate::client::TaskHandle::from_json(
                    &serde_json::from_str(&stored).unwrap(),
                )
                .unwrap();
                let other = Client::connect(&rig.server.url(), ClientConfig::default())
                    .await
                    .unwrap();
                let again = other
                    .resume_task(&handle, &CallOptions::default())
                    .await
                    .unwrap_or_else(|e| panic!("{label}: resume: {e}"));
                assert_receipt(&label, "resumed by another client", &again, before + 1);
                assert_eq!(rig.count().await, before + 1, "{label}");
            }
        }
    })
    .await
    .expect("bounded time");
}

/// `@modelcontextprotocol/server-everything`: `simulate-research-query` runs as a task (its tool
/// requires it); its `tasks/result` stream cut in the middle is read again (its event store
/// replays other streams' events after a resume: the guard must never deliver them), and the
/// report is the one an uncut read gives; the session holds one task (its `tasks/list`), so the
/// tool ran once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_research_task_survives_a_cut_result() {
    tokio::time::timeout(LIMIT, async {
        let Some(rig) = Rig::start(Sdk::Everything, &[]).await else {
            return;
        };
        let label = rig.label().to_owned();
        let uncut = rig
            .call(
                "simulate-research-query",
                json!({"topic": "sse"}),
                TaskMode::Auto,
            )
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        let task = uncut.outcome.task.clone().expect("ran as a task");
        assert_eq!(task.generation(), TaskGeneration::Experimental);
        let text = |r: &Response| -> String {
            let v: Value = r.message.deserialize().unwrap();
            v["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        let report = text(&uncut);
        assert!(report.contains("sse"), "{label}: {report}");
        // Read the finished task again, cut mid-way through its result each time.
        let len = uncut.message.len() as u64;
        for offset in [200, len / 2, len.saturating_sub(20)] {
            rig.cut_once(offset);
            let again = rig
                .client
                .resume_task(&task, &CallOptions::default())
                .await
                .unwrap_or_else(|e| panic!("{label}: cut at {offset}: {e}"));
            rig.proxy.set_max_cuts(Some(rig.proxy.stats().cuts));
            assert_eq!(text(&again), report, "{label}: cut at {offset}");
        }
        // Its counter: the session's tasks. One task, so the tool ran once.
        let listed = rig
            .client
            .call("tasks/list", json!({}), Retry::IfSafe)
            .await
            .unwrap_or_else(|e| panic!("{label}: tasks/list: {e}"));
        let v: Value = listed.message.deserialize().unwrap();
        let tasks = v["result"]["tasks"].as_array().cloned().unwrap_or_default();
        assert_eq!(tasks.len(), 1, "{label}: {v}");
        assert_eq!(tasks[0]["taskId"], task.id(), "{label}");
    })
    .await
    .expect("bounded time");
}

/// The rmcp drop-in: rmcp's own client (2026-07-28, the tasks extension declared) on
/// `GuardedHttpClient`: `call_tool_once` answers a task, and `get_task` reads of the 4 MiB result
/// cut at several offsets are read again by the transport: the exact receipt, charge ran once,
/// never a second `tools/call`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_task_reads_are_read_again_on_the_guarded_stack() {
    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, ClientCapabilities, GetTaskParams, Implementation,
        ProtocolVersion, TaskPayload,
    };
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    tokio::time::timeout(LIMIT, async {
        let Some(rig) = Rig::start(Sdk::RmcpTasks, &[]).await else {
            return;
        };
        let mut config = ClientConfig::default();
        config.reuse_connections(false);
        let http = ssegate::rmcp::GuardedHttpClient::new(config).unwrap();
        let transport = StreamableHttpClientTransport::with_client(
            http,
            StreamableHttpClientTransportConfig::with_uri(format!(
                "http://{}/mcp",
                rig.proxy.addr()
            )),
        );
        let info = rmcp::model::ClientConfig::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new("ssegate-test", "0"),
        );
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        let client = info
            .serve_with_lifecycle(transport, lifecycle)
            .await
            .expect("rmcp connects");
        let mut args = serde_json::Map::new();
        args.insert("size".into(), json!(RECEIPT));
        for offset in [4096, 2 << 20, RECEIPT as u64 - 64] {
            let before = rig.count().await;
            let created = match client
                .call_tool_once(CallToolRequestParams::new("charge").with_arguments(args.clone()))
                .await
                .expect("charge")
            {
                CallToolResponse::Task(t) => t,
                other => panic!("not a task: {other:?}"),
            };
            let task_id = created.task.task_id.clone();
            let cuts = rig.proxy.stats().cuts;
            rig.cut_once(offset);
            let result = loop {
                let got = client
                    .get_task(GetTaskParams::new(task_id.clone()))
                    .await
                    .unwrap_or_else(|e| panic!("get_task, cut at {offset}: {e:?}"));
                match got.task.payload {
                    TaskPayload::Completed { result } => break result,
                    TaskPayload::Working => tokio::time::sleep(Duration::from_millis(50)).await,
                    other => panic!("{other:?}"),
                }
            };
            rig.proxy.set_max_cuts(Some(rig.proxy.stats().cuts));
            assert_eq!(
                rig.proxy.stats().cuts,
                cuts + 1,
                "cut at {offset}: the read was cut"
            );
            assert_eq!(
                result["content"][0]["text"],
                format!("charged {}", before + 1)
            );
            assert!(
                result["content"][1]["text"].as_str() == Some(pattern(RECEIPT).as_str()),
                "cut at {offset}: the receipt is not exact"
            );
            assert_eq!(
                rig.count().await,
                before + 1,
                "cut at {offset}: charge ran once"
            );
        }
        client.cancel().await.unwrap();
    })
    .await
    .expect("bounded time");
}
