//! Raw-protocol smoke test of the interop task servers (`interop/README.md`, "Task servers"):
//! JSON-RPC by hand over hyper, one request per fresh connection, no `ssegate::client`.
//!
//! - rmcp (`Sdk::RmcpTasks`, MCP 2026-07-28, tasks extension `io.modelcontextprotocol/tasks`):
//!   `server/discover`, then every request with the `_meta` envelope declaring the extension and
//!   the `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` headers; `charge` answers a
//!   `CreateTaskResult` (`resultType: "task"`), `tasks/get` polls it to `completed` with the
//!   `CallToolResult` inline.
//! - TypeScript SDK 1.x (`Sdk::Ts --tasks`) and `@modelcontextprotocol/server-everything`
//!   (`Sdk::Everything`), SEP-1686 tasks of 2025-11-25: `initialize` and
//!   `notifications/initialized`, `tools/call` with `params.task: {ttl}`, `tasks/get` until
//!   terminal, the result with `tasks/result`.
//!
//! Each checks the result exactly (the deterministic receipt of a 4 MiB `charge`), that the tool
//! ran once (`count`), that a completed result reads again the same, and the error for an unknown
//! task id. Missing servers fail the tests under `CI` and skip loudly otherwise
//! (`ssegate_testkit::interop::start`). `--nocapture` prints the messages the servers sent
//! (long strings shortened).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use ssegate_testkit::interop::{Sdk, pattern, start};
use tokio::net::TcpStream;

const RECEIPT: usize = 4 << 20;
const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
const V2026: &str = "2026-07-28";
const V2025: &str = "2025-11-25";
const TIMEOUT: Duration = Duration::from_secs(60);

/// The value with every string longer than 80 bytes cut to its head and its length, to print.
fn short(value: &Value) -> Value {
    match value {
        Value::String(s) if s.len() > 80 => {
            let mut end = 60;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            Value::String(format!("{}... ({} bytes)", &s[..end], s.len()))
        }
        Value::Array(a) => Value::Array(a.iter().map(short).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), short(v))).collect()),
        other => other.clone(),
    }
}

/// What came back for one request.
#[derive(Debug)]
struct Reply {
    status: u16,
    /// `text/event-stream` or `application/json` (or whatever the server said).
    content_type: String,
    /// The JSON-RPC response to the request (`Value::Null` when none came, e.g. a 202).
    message: Value,
    session: Option<String>,
}

impl Reply {
    fn result(&self) -> &Value {
        assert!(
            self.message.get("result").is_some(),
            "expected a result, got {} ({} {})",
            short(&self.message),
            self.status,
            self.content_type
        );
        &self.message["result"]
    }

    fn error_code(&self) -> i64 {
        self.message["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("expected an error, got {}", short(&self.message)))
    }
}

/// A JSON-RPC peer by hand: 2026-07-28 (stateless, `_meta` envelope and headers) or 2025-11-25
/// (a session from `initialize`).
struct Peer {
    addr: SocketAddr,
    version: &'static str,
    /// Declare the tasks extension in the 2026 envelope.
    tasks_capability: bool,
    session: Option<String>,
    next_id: i64,
    label: &'static str,
}

impl Peer {
    fn new(addr: SocketAddr, version: &'static str, label: &'static str) -> Self {
        Self {
            addr,
            version,
            tasks_capability: true,
            session: None,
            next_id: 1,
            label,
        }
    }

    /// One POST on a fresh connection; reads SSE events (or a JSON body) until the response to
    /// `id` (any when `id` is `None`) or the end of the body.
    async fn post(&mut self, body: Value, id: Option<i64>, name: Option<&str>) -> Reply {
        let method = body["method"].as_str().expect("a method").to_owned();
        let stream = TcpStream::connect(self.addr).await.expect("connect");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        let conn = tokio::spawn(conn);
        let mut req = Request::post("/mcp")
            .header("host", self.addr.to_string())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if method != "initialize" {
            req = req.header("mcp-protocol-version", self.version);
        }
        if self.version == V2026 {
            req = req.header("mcp-method", &method);
            if let Some(name) = name {
                req = req.header("mcp-name", name);
            }
        }
        if let Some(session) = &self.session {
            req = req.header("mcp-session-id", session);
        }
        let req = req
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("a request");
        let response = tokio::time::timeout(TIMEOUT, sender.send_request(req))
            .await
            .expect("a response head in time")
            .expect("a response head");
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let content_type = header("content-type").unwrap_or_default();
        let session = header("mcp-session-id");
        let mut body = response.into_body();
        let mut buf: Vec<u8> = Vec::new();
        let mut message = Value::Null;
        let deadline = Instant::now() + TIMEOUT;
        let sse = content_type.starts_with("text/event-stream");
        'read: loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(frame) = tokio::time::timeout(left, body.frame())
                .await
                .unwrap_or_else(|_| panic!("{}: no response to {method} in time", self.label))
            else {
                break;
            };
            let Ok(data) = frame.expect("a body frame").into_data() else {
                continue;
            };
            buf.extend_from_slice(&data);
            if !sse {
                continue;
            }
            // Whole events: up to a blank line (LF or CRLF).
            while let Some(end) = event_end(&buf) {
                let event: Vec<u8> = buf.drain(..end).collect();
                let text = String::from_utf8(event).expect("UTF-8 events");
                let data: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                if data.is_empty() || data.iter().all(|d| d.is_empty()) {
                    continue; // a priming event or a comment
                }
                let value: Value = serde_json::from_str(&data.join("\n")).expect("JSON data");
                let answers = value.get("result").is_some() || value.get("error").is_some();
                if answers && id.is_none_or(|id| value["id"] == json!(id)) {
                    message = value;
                    break 'read;
                }
            }
        }
        if !sse && !buf.is_empty() {
            message = serde_json::from_slice(&buf)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&buf).into_owned()));
        }
        conn.abort();
        Reply {
            status,
            content_type,
            message,
            session,
        }
    }

    /// A request; `name` is the `Mcp-Name` header on 2026-07-28 (the tool, the task id).
    async fn request(&mut self, method: &str, params: Value, name: Option<&str>) -> Reply {
        let id = self.next_id;
        self.next_id += 1;
        let mut params = params;
        if self.version == V2026 {
            let mut extensions = serde_json::Map::new();
            if self.tasks_capability {
                extensions.insert(TASKS_EXTENSION.into(), json!({}));
            }
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": V2026,
                "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
                "io.modelcontextprotocol/clientInfo": {"name": "interop_tasks_raw", "version": "0"},
            });
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let reply = self.post(body, Some(id), name).await;
        eprintln!(
            "{} {method} -> {} {}: {}",
            self.label,
            reply.status,
            reply.content_type,
            short(&reply.message)
        );
        reply
    }

    /// 2025-11-25: `initialize` (declaring tasks) and `notifications/initialized`.
    async fn initialize(&mut self) {
        let reply = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": V2025,
                    "capabilities": {"tasks": {"list": {}, "cancel": {}}},
                    "clientInfo": {"name": "interop_tasks_raw", "version": "0"},
                }),
                None,
            )
            .await;
        assert_eq!(reply.result()["protocolVersion"], V2025, "{}", self.label);
        self.session = reply.session;
        assert!(self.session.is_some(), "{}: a session id", self.label);
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let reply = self.post(note, None, None).await;
        assert_eq!(
            reply.status, 202,
            "{}: notifications/initialized",
            self.label
        );
    }

    async fn call_tool(&mut self, name: &str, arguments: Value, task: Option<Value>) -> Reply {
        let mut params = json!({"name": name, "arguments": arguments});
        if let Some(task) = task {
            params["task"] = task;
        }
        self.request("tools/call", params, Some(name)).await
    }

    async fn tasks(&mut self, method: &str, task_id: &str) -> Reply {
        self.request(method, json!({"taskId": task_id}), Some(task_id))
            .await
    }

    /// `tasks/get` every `poll` until the task is terminal; the statuses seen and the last reply.
    async fn poll(&mut self, task_id: &str, poll: Duration) -> (Vec<String>, Reply) {
        let deadline = Instant::now() + TIMEOUT;
        let mut seen = Vec::new();
        loop {
            let reply = self.tasks("tasks/get", task_id).await;
            let status = reply.result()["status"]
                .as_str()
                .expect("a status")
                .to_owned();
            if seen.last() != Some(&status) {
                seen.push(status.clone());
            }
            if matches!(status.as_str(), "completed" | "failed" | "cancelled") {
                return (seen, reply);
            }
            assert!(
                Instant::now() < deadline,
                "{}: task never ended",
                self.label
            );
            tokio::time::sleep(poll).await;
        }
    }

    /// The text of `count`.
    async fn count(&mut self) -> String {
        let reply = self.call_tool("count", json!({}), None).await;
        reply.result()["content"][0]["text"]
            .as_str()
            .expect("a text")
            .to_owned()
    }
}

/// The length of the first whole SSE event in `buf` (through its blank line), if any.
fn event_end(buf: &[u8]) -> Option<usize> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `charge`'s result: `charged 1` and the exact receipt.
fn assert_charge_result(label: &str, result: &Value) {
    let content = result["content"].as_array().expect("content");
    assert_eq!(content.len(), 2, "{label}: {}", short(result));
    assert_eq!(content[0]["text"], "charged 1", "{label}");
    let receipt = content[1]["text"].as_str().expect("a receipt");
    assert_eq!(receipt.len(), RECEIPT, "{label}: receipt length");
    assert!(receipt == pattern(RECEIPT), "{label}: receipt differs");
}

fn poll_interval(task: &Value, key: &str) -> Duration {
    Duration::from_millis(task[key].as_u64().unwrap_or(100).min(2000))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn rmcp_task_server_2026() {
    let Some(server) = start(Sdk::RmcpTasks, &["--task-delay-ms", "300"]) else {
        return;
    };
    runtime().block_on(async {
        let mut peer = Peer::new(server.addr(), V2026, "rmcp");
        let discover = peer.request("server/discover", json!({}), None).await;
        let result = discover.result();
        assert!(
            result["supportedVersions"]
                .as_array()
                .expect("versions")
                .contains(&json!(V2026))
        );
        assert!(
            result["capabilities"]["extensions"]
                .get(TASKS_EXTENSION)
                .is_some()
        );

        let created = peer
            .call_tool("charge", json!({"size": RECEIPT}), None)
            .await;
        let task = created.result().clone();
        assert_eq!(task["resultType"], "task", "CreateTaskResult");
        assert_eq!(task["status"], "working");
        let task_id = task["taskId"].as_str().expect("a task id").to_owned();
        let (seen, done) = peer
            .poll(&task_id, poll_interval(&task, "pollIntervalMs"))
            .await;
        assert_eq!(seen, ["working", "completed"], "statuses seen");
        let completed = done.result();
        assert_eq!(completed["resultType"], "complete");
        assert_charge_result("rmcp tasks/get", &completed["result"]);

        // Reads are repeatable.
        let again = peer.tasks("tasks/get", &task_id).await;
        assert_eq!(again.result()["status"], "completed");
        assert_charge_result("rmcp tasks/get again", &again.result()["result"]);
        assert_eq!(peer.count().await, "1", "charge ran once");

        // An unknown task: -32602 Invalid params.
        let unknown = peer.tasks("tasks/get", "no-such-task").await;
        assert_eq!(unknown.error_code(), -32602);

        // A request that does not declare the extension: tasks/* are refused (-32021 Missing
        // required client capability), and charge runs synchronously (counted).
        peer.tasks_capability = false;
        let refused = peer.tasks("tasks/get", &task_id).await;
        assert_eq!(refused.error_code(), -32021);
        assert!(
            refused.message["error"]["data"]["requiredCapabilities"]["extensions"]
                .get(TASKS_EXTENSION)
                .is_some(),
            "{}",
            refused.message
        );
        let plain = peer.call_tool("charge", json!({"size": 32}), None).await;
        assert_eq!(plain.result()["content"][0]["text"], "charged 2");
        assert_eq!(plain.result()["resultType"], "complete");
    });
}

#[test]
fn rmcp_task_server_tasks_required() {
    let Some(server) = start(
        Sdk::RmcpTasks,
        &["--tasks-required", "--task-delay-ms", "0"],
    ) else {
        return;
    };
    runtime().block_on(async {
        let mut peer = Peer::new(server.addr(), V2026, "rmcp --tasks-required");
        peer.tasks_capability = false;
        let refused = peer.call_tool("charge", json!({"size": 32}), None).await;
        assert_eq!(refused.error_code(), -32021);
        assert_eq!(peer.count().await, "0", "a refused charge does not run");
    });
}

#[test]
fn ts_sdk_tasks_2025() {
    let Some(server) = start(Sdk::Ts, &["--tasks", "--task-delay-ms", "300"]) else {
        return;
    };
    runtime().block_on(async {
        let mut peer = Peer::new(server.addr(), V2025, "ts --tasks");
        peer.initialize().await;
        let created = peer
            .call_tool(
                "charge",
                json!({"size": RECEIPT}),
                Some(json!({"ttl": 60_000})),
            )
            .await;
        let task = created.result()["task"].clone();
        assert_eq!(task["status"], "working", "CreateTaskResult");
        assert_eq!(task["ttl"], 60_000, "the ttl asked for");
        let task_id = task["taskId"].as_str().expect("a task id").to_owned();
        let (seen, _) = peer
            .poll(&task_id, poll_interval(&task, "pollInterval"))
            .await;
        assert_eq!(seen, ["working", "completed"], "statuses seen");
        for read in ["tasks/result", "tasks/result again"] {
            let reply = peer.tasks("tasks/result", &task_id).await;
            assert_charge_result(&format!("ts {read}"), reply.result());
            assert_eq!(
                reply.result()["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
                json!(task_id)
            );
        }
        assert_eq!(peer.count().await, "1", "charge ran once");
        assert_eq!(
            peer.tasks("tasks/get", "no-such-task").await.error_code(),
            -32602
        );
        assert_eq!(
            peer.tasks("tasks/result", "no-such-task")
                .await
                .error_code(),
            -32602
        );
    });
}

#[test]
fn ts_sdk_tasks_required_2025() {
    let Some(server) = start(Sdk::Ts, &["--tasks", "--tasks-required"]) else {
        return;
    };
    runtime().block_on(async {
        let mut peer = Peer::new(server.addr(), V2025, "ts --tasks --tasks-required");
        peer.initialize().await;
        // Not a JSON-RPC error: the SDK wraps it in a tool error result.
        let refused = peer.call_tool("charge", json!({"size": 32}), None).await;
        assert_eq!(refused.result()["isError"], true);
        let text = refused.result()["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("requires task augmentation"), "{text}");
        assert_eq!(peer.count().await, "0");
    });
}

#[test]
fn server_everything_tasks_2025() {
    let Some(server) = start(Sdk::Everything, &[]) else {
        return;
    };
    runtime().block_on(async {
        let mut peer = Peer::new(server.addr(), V2025, "everything");
        peer.initialize().await;
        let tool = "simulate-research-query";
        let args = json!({"topic": "resumable streams"});

        // taskSupport 'required': without `task` a tool error result, not a JSON-RPC error.
        let refused = peer.call_tool(tool, args.clone(), None).await;
        assert_eq!(refused.result()["isError"], true);

        let created = peer
            .call_tool(tool, args, Some(json!({"ttl": 60_000})))
            .await;
        let task = created.result()["task"].clone();
        assert_eq!(task["status"], "working", "CreateTaskResult");
        let task_id = task["taskId"].as_str().expect("a task id").to_owned();
        let (seen, _) = peer
            .poll(&task_id, poll_interval(&task, "pollInterval"))
            .await;
        assert_eq!(seen, ["working", "completed"], "statuses seen");
        let first = peer.tasks("tasks/result", &task_id).await;
        let text = first.result()["content"][0]["text"]
            .as_str()
            .expect("a report")
            .to_owned();
        assert!(
            text.starts_with("# Research Report: resumable streams"),
            "{text}"
        );
        let second = peer.tasks("tasks/result", &task_id).await;
        assert_eq!(
            second.result()["content"],
            first.result()["content"],
            "a second read"
        );
        assert_eq!(
            peer.tasks("tasks/get", "no-such-task").await.error_code(),
            -32602
        );
        assert_eq!(
            peer.tasks("tasks/result", "no-such-task")
                .await
                .error_code(),
            -32602
        );
    });
}
