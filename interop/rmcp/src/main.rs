//! An MCP server on rmcp 3.x with its SEP-2663 task runtime (`rmcp::task_manager`, the MCP
//! 2026-07-28 tasks extension `io.modelcontextprotocol/tasks`), for ssegate's interop tests.
//!
//! ```text
//! rmcp-task-server [--port N] [--host H] [--task-delay-ms N] [--poll-interval-ms N] [--ttl-ms N]
//!                  [--tasks-required] [--event-store] [--json-response] [--stateless]
//! ```
//!
//! Port: `--port`, else `$PORT`, else 0 (any free port). Binds only H (default 127.0.0.1). Once
//! listening it prints one line `listening http://HOST:PORT/mcp` on stdout.
//!
//! rmcp's `StreamableHttpService` at `/mcp` on hyper: 2026-07-28 requests are served statelessly
//! (rmcp's own routing), 2025-era clients get sessions (`LocalSessionManager`) unless
//! `--stateless`. Tools (the same as `interop/ts/server.mjs`, without `progress`):
//!
//! - `big_result {size?}`: one text content of `size` bytes (default 4 MiB), readOnlyHint;
//! - `charge {size?}`: NOT idempotent, counts its executions: `charged N` plus a receipt of `size`
//!   bytes (default 0);
//! - `count`: how many times `charge` ran in this process;
//! - `echo {text}`: the text back.
//!
//! `charge` and `big_result` run as tasks (rmcp's `TaskManager`: `CreateTaskResult` at once,
//! `tasks/get` answers `working` and then `completed` with the `CallToolResult` inline) when the
//! request declares the tasks extension in its client capabilities; otherwise they answer at
//! once. The task stays `working` `--task-delay-ms` (default 200) before the tool runs.
//! `--tasks-required`: `charge` refuses a client that does not declare the extension (`-32021`,
//! rmcp's missing-required-client-capability error) without running. `--event-store`: an
//! in-memory rmcp `EventStore` (event ids, replay with `Last-Event-ID`); off by default.
//! `--json-response`: rmcp's `json_response` (a JSON body instead of SSE on the stateless path).
//!
//! Content is deterministic: 16-byte blocks, each its own byte offset as 15 lowercase hex digits
//! and `|`, truncated to `size`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ContentBlock, CreateTaskResult, GetTaskParams, GetTaskResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskManager, TaskOptions};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::store::{
    EventId, EventStore, EventStoreError, EventStream,
};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::json;
use tokio::net::TcpListener;

/// The deterministic content: `size` bytes of 16-byte blocks `<offset as %015x>|`.
fn pattern(size: usize) -> String {
    let mut s = String::with_capacity(size + 16);
    let mut offset = 0;
    while s.len() < size {
        s.push_str(&format!("{offset:015x}|"));
        offset += 16;
    }
    s.truncate(size);
    s
}

#[derive(Clone, Debug)]
struct Options {
    host: String,
    port: u16,
    task_delay: Duration,
    poll_interval_ms: u64,
    ttl_ms: u64,
    tasks_required: bool,
    event_store: bool,
    json_response: bool,
    stateless: bool,
}

fn usage(why: &str) -> ! {
    eprintln!(
        "rmcp-task-server: {why}\nusage: rmcp-task-server [--port N] [--host H] [--task-delay-ms N] \
         [--poll-interval-ms N] [--ttl-ms N] [--tasks-required] [--event-store] [--json-response] \
         [--stateless]"
    );
    std::process::exit(2)
}

fn options() -> Options {
    let mut o = Options {
        host: "127.0.0.1".into(),
        port: std::env::var("PORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0),
        task_delay: Duration::from_millis(200),
        poll_interval_ms: 100,
        ttl_ms: rmcp::task_manager::DEFAULT_TASK_TTL_MS,
        tasks_required: false,
        event_store: false,
        json_response: false,
        stateless: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| usage(&format!("{name} needs a value")))
        };
        let number = |name: &str, v: String| -> u64 {
            v.parse()
                .unwrap_or_else(|_| usage(&format!("{name}: not a number: {v}")))
        };
        match arg.as_str() {
            "--host" => o.host = value("--host"),
            "--port" => {
                let v = value("--port");
                o.port = u16::try_from(number("--port", v))
                    .unwrap_or_else(|_| usage("--port: out of range"));
            }
            "--task-delay-ms" => {
                let v = value("--task-delay-ms");
                o.task_delay = Duration::from_millis(number("--task-delay-ms", v));
            }
            "--poll-interval-ms" => {
                let v = value("--poll-interval-ms");
                o.poll_interval_ms = number("--poll-interval-ms", v);
            }
            "--ttl-ms" => {
                let v = value("--ttl-ms");
                o.ttl_ms = number("--ttl-ms", v);
            }
            "--tasks-required" => o.tasks_required = true,
            "--event-store" => o.event_store = true,
            "--json-response" => o.json_response = true,
            "--stateless" => o.stateless = true,
            other => usage(&format!("unknown argument {other}")),
        }
    }
    o
}

#[derive(Clone)]
struct TaskServer {
    tasks: TaskManager,
    charges: Arc<AtomicU64>,
    options: Arc<Options>,
}

fn schema(value: serde_json::Value) -> Arc<JsonObject> {
    match value {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => unreachable!("a schema is an object"),
    }
}

fn size_schema() -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": {"size": {"type": "integer", "minimum": 0, "maximum": 268_435_456}}
    }))
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "big_result",
            "One text content of `size` deterministic bytes (default 4 MiB); a task when the \
             client declares the tasks extension",
            size_schema(),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::new(
            "charge",
            "Not idempotent: counts its executions; a receipt of `size` bytes; a task when the \
             client declares the tasks extension",
            size_schema(),
        )
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .idempotent(false)
                .destructive(false),
        ),
        Tool::new(
            "count",
            "How many times `charge` ran in this process",
            schema(json!({"type": "object", "properties": {}})),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::new(
            "echo",
            "The text back",
            schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"]
            })),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
    ]
}

fn size_arg(request: &CallToolRequestParams, default: usize) -> Result<usize, McpError> {
    match request.arguments.as_ref().and_then(|a| a.get("size")) {
        None | Some(serde_json::Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .filter(|&n| n <= 256 << 20)
            .map(|n| n as usize)
            .ok_or_else(|| McpError::invalid_params("size: an integer 0..=268435456", None)),
    }
}

fn text(s: impl Into<String>) -> ContentBlock {
    ContentBlock::text(s.into())
}

/// `charge`: one execution, counted.
fn run_charge(charges: &AtomicU64, size: usize) -> CallToolResult {
    let n = charges.fetch_add(1, Ordering::SeqCst) + 1;
    let mut content = vec![text(format!("charged {n}"))];
    if size > 0 {
        content.push(text(pattern(size)));
    }
    CallToolResult::success(content)
}

impl TaskServer {
    /// Runs `work` as an rmcp task: `working` for the task delay, then the tool's result.
    fn spawn_task(
        &self,
        work: impl FnOnce() -> CallToolResult + Send + 'static,
    ) -> CallToolResponse {
        let delay = self.options.task_delay;
        let options = TaskOptions::new()
            .with_ttl_ms(self.options.ttl_ms)
            .with_poll_interval_ms(self.options.poll_interval_ms);
        let task = self.tasks.spawn(options, move |_ctx| {
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                Ok(work())
            })
        });
        CallToolResponse::Task(CreateTaskResult::new(task))
    }
}

impl ServerHandler for TaskServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("ssegate-interop-rmcp", "0.0.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let as_task = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        match request.name.as_ref() {
            "big_result" => {
                let size = size_arg(&request, 4 << 20)?;
                let work = move || CallToolResult::success(vec![text(pattern(size))]);
                Ok(if as_task {
                    self.spawn_task(work)
                } else {
                    work().into()
                })
            }
            "charge" => {
                let size = size_arg(&request, 0)?;
                if as_task {
                    let charges = self.charges.clone();
                    Ok(self.spawn_task(move || run_charge(&charges, size)))
                } else if self.options.tasks_required {
                    Err(McpError::missing_required_client_capability(
                        ClientCapabilities::builder().enable_tasks().build(),
                    ))
                } else {
                    Ok(run_charge(&self.charges, size).into())
                }
            }
            "count" => Ok(CallToolResult::success(vec![text(
                self.charges.load(Ordering::SeqCst).to_string(),
            )])
            .into()),
            "echo" => {
                let t = request
                    .arguments
                    .as_ref()
                    .and_then(|a| a.get("text"))
                    .and_then(|t| t.as_str())
                    .ok_or_else(|| McpError::invalid_params("text: a string", None))?;
                Ok(CallToolResult::success(vec![text(t)]).into())
            }
            other => Err(McpError::invalid_params(
                format!("unknown tool {other}"),
                None,
            )),
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel_task(&request.task_id)
    }
}

/// A correct in-memory `EventStore`: ids `<stream>_<n>`, each stream's events in the order
/// stored, a replay yields the stream's events strictly after the id; an unknown id is an error
/// (rmcp then answers an empty stream).
#[derive(Default)]
struct MemoryEventStore {
    inner: Mutex<MemoryEvents>,
}

#[derive(Default)]
struct MemoryEvents {
    next: u64,
    streams: HashMap<String, Vec<ServerSseMessage>>,
    index: HashMap<EventId, (String, usize)>,
}

#[async_trait::async_trait]
impl EventStore for MemoryEventStore {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<EventId, EventStoreError> {
        let mut inner = self.inner.lock().expect("event store lock");
        inner.next += 1;
        let id = format!("{stream_id}_{}", inner.next);
        let mut stored = event.clone();
        stored.event_id = Some(id.clone());
        let events = inner.streams.entry(stream_id.to_owned()).or_default();
        events.push(stored);
        let at = events.len() - 1;
        inner.index.insert(id.clone(), (stream_id.to_owned(), at));
        Ok(id)
    }

    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        let inner = self.inner.lock().expect("event store lock");
        let (stream, at) = inner
            .index
            .get(last_event_id)
            .ok_or_else(|| format!("unknown event id {last_event_id}"))?;
        let events: Vec<ServerSseMessage> = inner.streams[stream][at + 1..].to_vec();
        Ok(Box::pin(futures::stream::iter(events)))
    }
}

#[tokio::main]
async fn main() {
    let options = Arc::new(options());
    let handler = TaskServer {
        tasks: TaskManager::new(),
        charges: Arc::new(AtomicU64::new(0)),
        options: options.clone(),
    };
    let mut sessions = LocalSessionManager::default();
    if options.event_store {
        sessions = sessions.with_event_store(Arc::new(MemoryEventStore::default()));
    }
    let config = StreamableHttpServerConfig::default()
        .with_json_response(options.json_response)
        .with_legacy_session_mode(!options.stateless);
    let service: StreamableHttpService<TaskServer, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(handler.clone()), Arc::new(sessions), config);

    let listener = TcpListener::bind((options.host.as_str(), options.port))
        .await
        .unwrap_or_else(|e| {
            eprintln!(
                "rmcp-task-server: cannot listen on {}:{}: {e}",
                options.host, options.port
            );
            std::process::exit(1)
        });
    let addr: SocketAddr = listener.local_addr().expect("a bound address");
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening http://{addr}/mcp");
        let _ = out.flush();
    }
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let service = service.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let service = service.clone();
                async move { Ok::<_, Infallible>(service.handle(req).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), svc)
                .await;
        });
    }
}
