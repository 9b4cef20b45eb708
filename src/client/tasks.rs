//! Tasks: a `tools/call` answered with a task handle instead of its result, and the result read
//! back by polling, on both generations:
//!
//! - **2026-07-28, the extension `io.modelcontextprotocol/tasks`.** The client declares it in each
//!   request's `_meta` capabilities; the server alone decides to answer with a handle
//!   (`resultType: "task"`). `tasks/get` (with `Mcp-Name: <taskId>`) is a pure read that carries
//!   the whole result inline once the task completed; `tasks/update` answers `input_required`;
//!   `tasks/cancel` is cooperative.
//! - **2025-11-25, experimental tasks.** The client opts in per call with `params.task`, when the
//!   server's capabilities allow it for `tools/call` and the tool's `execution.taskSupport` is not
//!   `forbidden`; `tasks/get` reports the status, `tasks/result` returns the result (again, until
//!   the task's ttl); tasks belong to the session that created them.
//!
//! Every read is a read: a `tasks/get` or `tasks/result` whose stream or body is cut is read again
//! (a resume first where the 2025 revisions allow one), never turned into a new `tools/call`.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tracing::{debug, warn};

use super::{
    CallOptions, Client, ClientError, Outcome, ProtocolError, Response, Retry, v2026_07_28, within,
};
use crate::message::{Message, RpcId};
use crate::sse::Data;

// The identifier of the 2026-07-28 tasks extension, defined with the rest of the wire contract.
pub use crate::contract::TASKS_EXTENSION;

/// A task handle is small: a larger answer is not parsed as one.
const MAX_HANDLE_BYTES: usize = 256 << 10;

/// JSON-RPC error of 2026-07-28: the server needs a capability the client did not declare.
const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// The same, as drafts of the tasks extension numbered it.
const MISSING_REQUIRED_CLIENT_CAPABILITY_DRAFT: i64 = -32003;

/// Default bounds of the wait between two `tasks/get` ([`ClientConfig::task_poll`](super::ClientConfig::task_poll)).
pub const DEFAULT_TASK_POLL_MIN: Duration = Duration::from_millis(50);
/// See [`DEFAULT_TASK_POLL_MIN`].
pub const DEFAULT_TASK_POLL_MAX: Duration = Duration::from_secs(5);
/// Default of [`ClientConfig::max_task_read_failures`](super::ClientConfig::max_task_read_failures).
pub const DEFAULT_MAX_TASK_READ_FAILURES: u32 = 10;

/// Whether a `tools/call` may run as a task ([`CallOptions::tasks`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskMode {
    /// Where the server offers tasks: declare the extension (2026-07-28), or opt in (2025-11-25,
    /// when the server's capabilities and the tool's `execution.taskSupport` allow it). The
    /// server may still answer directly.
    #[default]
    Auto,
    /// Never: a tool that runs only as a task (2025-11-25 `taskSupport: "required"`; nothing is
    /// sent), or a server that answers so (2026-07-28 `-32021`), is [`TaskErrorKind::Required`].
    Never,
    /// Only as a task where the server can run one: a server that offers no tasks for the call is
    /// [`TaskErrorKind::Unsupported`] before anything is sent. (A server that offers them may still
    /// answer directly, with the whole result.)
    Require,
}

impl TaskMode {
    /// Parses `auto`, `never` or `require`.
    pub fn parse(s: &str) -> Option<TaskMode> {
        match s {
            "auto" => Some(TaskMode::Auto),
            "never" => Some(TaskMode::Never),
            "require" => Some(TaskMode::Require),
            _ => None,
        }
    }
}

/// Which generation of tasks a handle belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskGeneration {
    /// The 2026-07-28 extension `io.modelcontextprotocol/tasks`: `tasks/get` carries the result.
    Extension,
    /// The experimental tasks of 2025-11-25: `tasks/get`, then `tasks/result`; bound to the session.
    Experimental,
}

impl TaskGeneration {
    /// `io.modelcontextprotocol/tasks` or `2025-11-25`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskGeneration::Extension => TASKS_EXTENSION,
            TaskGeneration::Experimental => "2025-11-25",
        }
    }

    fn parse(s: &str) -> Option<TaskGeneration> {
        match s {
            TASKS_EXTENSION => Some(TaskGeneration::Extension),
            "2025-11-25" => Some(TaskGeneration::Experimental),
            _ => None,
        }
    }
}

/// A task the server created for a call: what it takes to read its result later, from this
/// client or (on 2026-07-28) from another one ([`Client::resume_task`]). Persist it with
/// [`TaskHandle::to_json`], as the specification advises, so that polling can resume after a
/// restart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskHandle {
    id: String,
    generation: TaskGeneration,
    tool: Option<String>,
    poll_interval: Option<Duration>,
    ttl: Option<Duration>,
}

impl TaskHandle {
    /// A handle for a task id the application kept.
    pub fn new(id: impl Into<String>, generation: TaskGeneration) -> TaskHandle {
        TaskHandle {
            id: id.into(),
            generation,
            tool: None,
            poll_interval: None,
            ttl: None,
        }
    }

    /// The server's task id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The generation of tasks it belongs to.
    pub fn generation(&self) -> TaskGeneration {
        self.generation
    }

    /// The tool the task runs, when known.
    pub fn tool(&self) -> Option<&str> {
        self.tool.as_deref()
    }

    /// The poll interval the server asked for last.
    pub fn poll_interval(&self) -> Option<Duration> {
        self.poll_interval
    }

    /// The time to live the server gave the task (from its creation), when limited.
    pub fn ttl(&self) -> Option<Duration> {
        self.ttl
    }

    /// `{"taskId": .., "generation": .., "tool": ..}`, for durable storage.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"taskId": self.id, "generation": self.generation.as_str()});
        if let Some(tool) = &self.tool {
            v["tool"] = json!(tool);
        }
        v
    }

    /// A handle stored by [`TaskHandle::to_json`].
    pub fn from_json(v: &Value) -> Option<TaskHandle> {
        let id = v["taskId"].as_str()?;
        let generation = TaskGeneration::parse(v["generation"].as_str()?)?;
        let mut handle = TaskHandle::new(id, generation);
        handle.tool = v["tool"].as_str().map(str::to_owned);
        Some(handle)
    }

    /// Reads the task fields a server sent (a handle, or a `tasks/get` answer): the poll interval
    /// and ttl, in the generation's names.
    fn learn(&mut self, task: &Value) {
        let (poll, ttl) = match self.generation {
            TaskGeneration::Extension => ("pollIntervalMs", "ttlMs"),
            TaskGeneration::Experimental => ("pollInterval", "ttl"),
        };
        if let Some(ms) = task[poll].as_u64() {
            self.poll_interval = Some(Duration::from_millis(ms));
        }
        if let Some(ms) = task[ttl].as_u64() {
            self.ttl = Some(Duration::from_millis(ms));
        }
    }
}

/// Why a call that ran as a task has no result.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskErrorKind {
    /// The server does not know the task: never created, expired or purged (`-32602`), or, on
    /// 2025-11-25, created on a session that is gone.
    NotFound {
        /// The server's message.
        message: String,
    },
    /// The task failed with a JSON-RPC error (the tool's own errors are results with `isError`).
    Failed {
        /// The error object.
        error: Value,
    },
    /// The task was cancelled.
    Cancelled,
    /// The server can serve the call only as a task, and the call said [`TaskMode::Never`]
    /// (`-32021`).
    Required,
    /// [`TaskMode::Require`], and the server offers no tasks for this call (nothing was sent).
    Unsupported,
    /// Reads of the task kept failing (cut, refused or unreachable), this many in a row; the task
    /// may still complete: read it later with [`Client::resume_task`].
    ReadsFailed {
        /// Failed reads in a row.
        failures: u32,
        /// The last failure.
        last: String,
    },
    /// A read was answered with another JSON-RPC error.
    ReadError {
        /// The error object.
        error: Value,
    },
    /// A read's answer is not a task of the expected shape.
    InvalidAnswer(String),
}

/// A call that ran (or had to run) as a task and has no result ([`ClientError::Task`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskError {
    /// The task, when one was created.
    pub task: Option<TaskHandle>,
    /// What happened.
    pub kind: TaskErrorKind,
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(t) = &self.task {
            write!(f, "task {} ({}): ", t.id, t.generation.as_str())?;
        }
        match &self.kind {
            TaskErrorKind::NotFound { message } => {
                write!(f, "the server does not know the task (expired?): {message}")
            }
            TaskErrorKind::Failed { error } => write!(f, "the task failed: {error}"),
            TaskErrorKind::Cancelled => f.write_str("the task was cancelled"),
            TaskErrorKind::Required => {
                f.write_str("the server runs this call only as a task, and tasks were refused")
            }
            TaskErrorKind::Unsupported => {
                f.write_str("tasks are required, and the server offers none for this call")
            }
            TaskErrorKind::ReadsFailed { failures, last } => write!(
                f,
                "{failures} reads of the task failed in a row (it may still complete; read it \
                 again later): {last}"
            ),
            TaskErrorKind::ReadError { error } => write!(f, "a read was answered {error}"),
            TaskErrorKind::InvalidAnswer(what) => write!(f, "invalid answer: {what}"),
        }
    }
}

impl std::error::Error for TaskError {}

fn task_error(task: Option<&TaskHandle>, kind: TaskErrorKind) -> ClientError {
    ClientError::Task(Box::new(TaskError {
        task: task.cloned(),
        kind,
    }))
}

/// What the tool's definition says of tasks (2025-11-25 `execution.taskSupport`; absent is
/// `forbidden`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum TaskSupport {
    #[default]
    Forbidden,
    Optional,
    Required,
}

impl TaskSupport {
    pub(crate) fn of_tool(tool: &Value) -> TaskSupport {
        match tool["execution"]["taskSupport"].as_str() {
            Some("optional") => TaskSupport::Optional,
            Some("required") => TaskSupport::Required,
            _ => TaskSupport::Forbidden,
        }
    }
}

/// Adds the extension to a 2026-07-28 request's `_meta` capabilities (stamped around it).
fn declare_extension(params: &mut Value) {
    if !params.is_object() {
        *params = json!({});
    }
    let meta = params
        .as_object_mut()
        .expect("an object")
        .entry("_meta")
        .or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta[v2026_07_28::META_CAPABILITIES]["extensions"][TASKS_EXTENSION] = json!({});
}

/// A uniform fraction in [0, 1), from the standard library's per-process random keys.
fn random_fraction() -> f64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x5EED);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// A `tasks/cancel` sent if the call is dropped (or times out) while its task runs.
struct CancelTaskOnDrop {
    client: Option<Client>,
    task: TaskHandle,
}

impl Drop for CancelTaskOnDrop {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let task = self.task.clone();
        runtime.spawn(async move {
            if let Err(e) = client.cancel_task(&task).await {
                debug!(error = %e, task = task.id, "could not cancel the task");
            }
        });
    }
}

impl Client {
    /// `tools/call`, run as a task where [`CallOptions::tasks`] and the server allow: the result
    /// as if the call had answered directly (its `Outcome` says it ran as a task).
    pub(super) async fn call_tool_tasks(
        &self,
        mut params: Value,
        options: &CallOptions,
        id: i64,
        cancel: &mut super::CancelOnDrop,
    ) -> Result<Response, ClientError> {
        let generation = self.task_offer(&params, options.tasks).await?;
        match generation {
            Some(TaskGeneration::Extension) => declare_extension(&mut params),
            Some(TaskGeneration::Experimental) => {
                let mut task = json!({});
                if let Some(ttl) = options.task_ttl {
                    task["ttl"] = json!(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
                }
                if let Some(obj) = params.as_object_mut() {
                    obj.insert("task".into(), task);
                }
            }
            None => {}
        }
        let tool = params["name"].as_str().map(str::to_owned);
        let response = match self
            .call_inner("tools/call", params, options.retry, id)
            .await
        {
            Ok(r) => r,
            Err(e) => {
                return Err(match rpc_error_of(&e) {
                    Some(error) if requires_tasks(&error) => {
                        task_error(None, TaskErrorKind::Required)
                    }
                    _ => e,
                });
            }
        };
        let Some(generation) = generation else {
            return self.direct_answer(response);
        };
        let Some(mut handle) = handle_of(&response.message, generation) else {
            return self.direct_answer(response);
        };
        handle.tool = tool;
        debug!(
            task = handle.id,
            generation = handle.generation.as_str(),
            "the call runs as a task"
        );
        // The call was answered (with the handle): from now on a drop cancels the task.
        cancel.client = None;
        let mut task_cancel = CancelTaskOnDrop {
            client: Some(self.clone()),
            task: handle.clone(),
        };
        let mut outcome = response.outcome;
        let result = self.await_task(&mut handle, id, &mut outcome).await;
        task_cancel.client = None;
        result
    }

    /// A direct answer to `tools/call`: a `-32021` error (the server runs the call only as a
    /// task, which was refused) is typed; anything else is the response.
    fn direct_answer(&self, response: Response) -> Result<Response, ClientError> {
        if response.message.len() <= MAX_HANDLE_BYTES
            && let Ok(v) = response.message.deserialize::<Value>()
            && requires_tasks(&v["error"])
        {
            return Err(task_error(None, TaskErrorKind::Required));
        }
        Ok(response)
    }

    /// Which generation of tasks to offer for this call, if any.
    async fn task_offer(
        &self,
        params: &Value,
        mode: TaskMode,
    ) -> Result<Option<TaskGeneration>, ClientError> {
        let session = self.session();
        if mode == TaskMode::Never && session.stateless {
            return Ok(None);
        }
        let capabilities = session.capabilities.clone().unwrap_or_default();
        if session.stateless {
            // The server alone decides; declaring the extension never forces a task. `Require`
            // asks that the server said it offers them.
            let offered = capabilities["extensions"].get(TASKS_EXTENSION).is_some();
            return match (mode, offered) {
                (TaskMode::Require, false) => Err(task_error(None, TaskErrorKind::Unsupported)),
                _ => Ok(Some(TaskGeneration::Extension)),
            };
        }
        let server = capabilities["tasks"]["requests"]["tools"]
            .get("call")
            .is_some();
        if mode == TaskMode::Never && !server {
            return Ok(None);
        }
        let support = if server {
            self.tool_task_support(params["name"].as_str().unwrap_or_default())
                .await
        } else {
            TaskSupport::Forbidden
        };
        match (mode, support) {
            // The tool runs only as a task, which the call refused: nothing is sent.
            (TaskMode::Never, TaskSupport::Required) => {
                Err(task_error(None, TaskErrorKind::Required))
            }
            (TaskMode::Never, _) => Ok(None),
            (_, TaskSupport::Optional | TaskSupport::Required) => {
                Ok(Some(TaskGeneration::Experimental))
            }
            (TaskMode::Require, TaskSupport::Forbidden) => {
                Err(task_error(None, TaskErrorKind::Unsupported))
            }
            _ => Ok(None),
        }
    }

    /// The tool's `execution.taskSupport`, listing the tools first if they are not known.
    async fn tool_task_support(&self, name: &str) -> TaskSupport {
        let known = self.inner.tools.lock().expect("tools lock").is_some();
        // Boxed: listing tools is itself a call.
        if !known && let Err(e) = Box::pin(self.list_tools()).await {
            warn!(error = %e, "tools/list failed; the call does not opt in to tasks");
            return TaskSupport::Forbidden;
        }
        let tools = self.inner.tools.lock().expect("tools lock");
        tools
            .as_ref()
            .and_then(|t| t.get(name))
            .map_or(TaskSupport::Forbidden, |t| t.tasks)
    }

    /// Reads the result of a task created earlier (a handle from [`Outcome::task`] or
    /// [`TaskHandle::from_json`]): polls it until it ends, and returns its result as a
    /// response. A 2026-07-28 task can be read from any client of the server; a 2025-11-25 one
    /// only on the session that created it. Dropping the returned future (or its deadline,
    /// [`CallOptions::timeout`]) sends `tasks/cancel`.
    pub async fn resume_task(
        &self,
        task: &TaskHandle,
        options: &CallOptions,
    ) -> Result<Response, ClientError> {
        let mut handle = task.clone();
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let run = async {
            let mut cancel = CancelTaskOnDrop {
                client: Some(self.clone()),
                task: handle.clone(),
            };
            let mut outcome = Outcome::default();
            let result = self.await_task(&mut handle, id, &mut outcome).await;
            cancel.client = None;
            result
        };
        within(options.timeout.or(self.inner.config.call_timeout), run).await
    }

    /// Asks the server to cancel a task (`tasks/cancel`; cooperative: the task may still end
    /// otherwise).
    pub async fn cancel_task(&self, task: &TaskHandle) -> Result<(), ClientError> {
        let (answer, _) = self
            .task_read("tasks/cancel", task, json!({}), &mut 0)
            .await?;
        debug!(task = task.id, answer = %answer["result"], "task cancel acknowledged");
        Ok(())
    }

    /// Polls the task until it ends; its result as the response to request `id`.
    async fn await_task(
        &self,
        handle: &mut TaskHandle,
        id: i64,
        outcome: &mut Outcome,
    ) -> Result<Response, ClientError> {
        outcome.task = Some(handle.clone());
        let mut answered: HashSet<String> = HashSet::new();
        let mut first = true;
        loop {
            if !first {
                tokio::time::sleep(self.poll_delay(handle)).await;
            }
            first = false;
            let (answer, message) = self
                .task_read("tasks/get", handle, json!({}), &mut outcome.task_rereads)
                .await?;
            outcome.task_reads += 1;
            let task = &answer["result"];
            handle.learn(task);
            outcome.task = Some(handle.clone());
            let status = task["status"].as_str().unwrap_or_default();
            debug!(task = handle.id, status, "task status");
            match (status, handle.generation) {
                ("working", _) => {}
                ("input_required", TaskGeneration::Extension) => {
                    let responses = self
                        .input_responses(&task["inputRequests"], &mut answered)
                        .await?;
                    if !responses.is_empty() {
                        if outcome.input_rounds >= self.inner.config.max_input_rounds {
                            return Err(ClientError::Protocol(ProtocolError::TooManyInputRounds(
                                outcome.input_rounds,
                            )));
                        }
                        outcome.input_rounds += 1;
                        self.task_read(
                            "tasks/update",
                            handle,
                            json!({"inputResponses": Value::Object(responses)}),
                            &mut outcome.task_rereads,
                        )
                        .await?;
                    }
                }
                ("completed", TaskGeneration::Extension) => {
                    // The result exactly as the server wrote it, inside the task inside the answer.
                    let text = message.data().contiguous();
                    let inner = std::str::from_utf8(&text)
                        .ok()
                        .and_then(|t| raw_member(t, "result"))
                        .and_then(|task| raw_member(task.get(), "result"));
                    let Some(result) = inner else {
                        return Err(task_error(
                            Some(handle),
                            TaskErrorKind::InvalidAnswer(
                                "a completed task without its result".to_owned(),
                            ),
                        ));
                    };
                    return Ok(self.as_response(id, result.get(), outcome));
                }
                // 2025-11-25: the result, the error of a failed task, or the input the task waits
                // for (which the server asks on the result's stream) come from `tasks/result`.
                ("completed" | "input_required" | "failed", TaskGeneration::Experimental) => {
                    let read = self.task_read(
                        "tasks/result",
                        handle,
                        json!({}),
                        &mut outcome.task_rereads,
                    );
                    let message = match read.await {
                        Ok((_, message)) => message,
                        // The task's own JSON-RPC error: it failed.
                        Err(ClientError::Task(e))
                            if matches!(e.kind, TaskErrorKind::ReadError { .. }) =>
                        {
                            let TaskErrorKind::ReadError { error } = e.kind else {
                                unreachable!("matched")
                            };
                            return Err(task_error(Some(handle), TaskErrorKind::Failed { error }));
                        }
                        Err(e) => return Err(e),
                    };
                    outcome.task_reads += 1;
                    let text = message.data().contiguous();
                    let Some(result) = std::str::from_utf8(&text)
                        .ok()
                        .and_then(|t| raw_member(t, "result"))
                    else {
                        return Err(task_error(
                            Some(handle),
                            TaskErrorKind::InvalidAnswer(
                                "tasks/result without a result".to_owned(),
                            ),
                        ));
                    };
                    return Ok(self.as_response(id, result.get(), outcome));
                }
                ("failed", _) => {
                    let error = task
                        .get("error")
                        .cloned()
                        .unwrap_or_else(|| json!({"message": task["statusMessage"]}));
                    return Err(task_error(Some(handle), TaskErrorKind::Failed { error }));
                }
                ("cancelled" | "canceled", _) => {
                    return Err(task_error(Some(handle), TaskErrorKind::Cancelled));
                }
                (other, _) => {
                    return Err(task_error(
                        Some(handle),
                        TaskErrorKind::InvalidAnswer(format!("unknown task status {other:?}")),
                    ));
                }
            }
        }
    }

    /// How long to wait before the next `tasks/get`: the server's interval, bounded by
    /// [`ClientConfig::task_poll`](super::ClientConfig::task_poll), jittered by ±20 %.
    fn poll_delay(&self, handle: &TaskHandle) -> Duration {
        let (min, max) = self.inner.config.task_poll;
        let asked = handle.poll_interval.unwrap_or(min).clamp(min, max);
        asked.mul_f64(0.8 + 0.4 * random_fraction())
    }

    /// One task method (`tasks/get`, `tasks/result`, `tasks/update`, `tasks/cancel`) for
    /// `handle`, with `extra` params: the JSON-RPC response (a result; an error is typed). A
    /// read whose stream or body was lost is sent again, as a new request, up to
    /// [`ClientConfig::max_task_read_failures`](super::ClientConfig::max_task_read_failures) times
    /// in a row: it is a read.
    async fn task_read(
        &self,
        method: &'static str,
        handle: &TaskHandle,
        extra: Value,
        rereads: &mut u32,
    ) -> Result<(Value, Message), ClientError> {
        let mut failures = 0u32;
        loop {
            let mut params = extra.clone();
            params["taskId"] = json!(handle.id);
            if handle.generation == TaskGeneration::Extension {
                declare_extension(&mut params);
            }
            let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
            // `Retry::Never`: a lost read is not re-issued inside (on a 2025-era session that
            // would open a new session, which does not know the task); it is read again here.
            let error = match self.call_inner(method, params, Retry::Never, id).await {
                Ok(response) => {
                    let answer: Value = response.message.deserialize().map_err(|e| {
                        task_error(
                            Some(handle),
                            TaskErrorKind::InvalidAnswer(format!("{method}: {e}")),
                        )
                    })?;
                    let Some(error) = answer.get("error") else {
                        return Ok((answer, response.message));
                    };
                    return Err(read_error(handle, error));
                }
                // A JSON-RPC error answered with an HTTP error status.
                Err(e) if rpc_error_of(&e).is_some() => {
                    let error = rpc_error_of(&e).expect("just seen");
                    return Err(read_error(handle, &error));
                }
                Err(e @ (ClientError::OutcomeUnknown { .. } | ClientError::Refused { .. })) => e,
                Err(e @ ClientError::Http { .. }) => e,
                Err(e @ ClientError::Status { status, .. }) if status >= 500 || status == 429 => e,
                Err(e) => return Err(e),
            };
            failures += 1;
            *rereads += 1;
            warn!(error = %error, method, task = handle.id, failures, "a task read was lost; reading again");
            if failures >= self.inner.config.max_task_read_failures {
                return Err(task_error(
                    Some(handle),
                    TaskErrorKind::ReadsFailed {
                        failures,
                        last: error.to_string(),
                    },
                ));
            }
            let backoff = self
                .inner
                .config
                .task_poll
                .0
                .saturating_mul(failures.min(8));
            tokio::time::sleep(backoff).await;
        }
    }

    /// `{"jsonrpc":"2.0","id":id,"result":<result>}`: a task's result, exactly as the server
    /// wrote it, as the call's response.
    fn as_response(&self, id: i64, result: &str, outcome: &Outcome) -> Response {
        let head = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":");
        let mut bytes = BytesMut::with_capacity(head.len() + result.len() + 1);
        bytes.put_slice(head.as_bytes());
        bytes.put_slice(result.as_bytes());
        bytes.put_u8(b'}');
        Response {
            message: Message::new(Data::from(bytes.freeze())),
            request_id: RpcId::Number(id),
            outcome: outcome.clone(),
        }
    }
}

/// The member `key` of the JSON object `json`, as its exact text.
fn raw_member<'a>(json: &'a str, key: &str) -> Option<&'a RawValue> {
    let members: HashMap<Cow<'a, str>, &'a RawValue> = serde_json::from_str(json).ok()?;
    members.get(key).copied()
}

/// A JSON-RPC error object answered with an HTTP error status (`400` on 2026-07-28).
fn rpc_error_of(e: &ClientError) -> Option<Value> {
    let ClientError::Status { status, body, .. } = e else {
        return None;
    };
    if !(400..500).contains(status) {
        return None;
    }
    let v: Value = serde_json::from_str(body).ok()?;
    v.get("error").filter(|e| e["code"].is_i64()).cloned()
}

/// Whether a JSON-RPC error says the server needs the tasks extension declared (`-32021`).
fn requires_tasks(error: &Value) -> bool {
    let code = error["code"].as_i64();
    (code == Some(MISSING_REQUIRED_CLIENT_CAPABILITY)
        || code == Some(MISSING_REQUIRED_CLIENT_CAPABILITY_DRAFT))
        && error["data"]["requiredCapabilities"]["extensions"]
            .get(TASKS_EXTENSION)
            .is_some()
}

/// A task read answered with a JSON-RPC error: an unknown task (`-32602`), or another error.
fn read_error(handle: &TaskHandle, error: &Value) -> ClientError {
    let kind = if error["code"].as_i64() == Some(-32602) {
        TaskErrorKind::NotFound {
            message: error["message"].as_str().unwrap_or_default().to_owned(),
        }
    } else {
        TaskErrorKind::ReadError {
            error: error.clone(),
        }
    };
    task_error(Some(handle), kind)
}

/// The task handle in a `tools/call` answer, if it is one.
fn handle_of(message: &Message, generation: TaskGeneration) -> Option<TaskHandle> {
    if message.len() > MAX_HANDLE_BYTES {
        return None;
    }
    let v: Value = message.deserialize().ok()?;
    let result = v.get("result")?;
    let task = match generation {
        TaskGeneration::Extension if result["resultType"] == "task" => result,
        TaskGeneration::Experimental if result["task"].is_object() => &result["task"],
        _ => return None,
    };
    let mut handle = TaskHandle::new(task["taskId"].as_str()?, generation);
    handle.learn(task);
    Some(handle)
}

impl fmt::Display for TaskMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TaskMode::Auto => "auto",
            TaskMode::Never => "never",
            TaskMode::Require => "require",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &str) -> Message {
        Message::new(Data::from(bytes::Bytes::copy_from_slice(text.as_bytes())))
    }

    #[test]
    fn handles_are_recognised_in_their_generation_only() {
        let extension = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"t-1","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttlMs":60000,"pollIntervalMs":250}}"#;
        let h = handle_of(&message(extension), TaskGeneration::Extension).expect("a handle");
        assert_eq!(h.id(), "t-1");
        assert_eq!(h.poll_interval(), Some(Duration::from_millis(250)));
        assert_eq!(h.ttl(), Some(Duration::from_secs(60)));
        assert!(handle_of(&message(extension), TaskGeneration::Experimental).is_none());

        let experimental = r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t-2","status":"working","ttl":null,"pollInterval":1000,"createdAt":"x","lastUpdatedAt":"x"}}}"#;
        let h = handle_of(&message(experimental), TaskGeneration::Experimental).expect("a handle");
        assert_eq!(
            (h.id(), h.poll_interval(), h.ttl()),
            ("t-2", Some(Duration::from_secs(1)), None)
        );
        assert!(handle_of(&message(experimental), TaskGeneration::Extension).is_none());

        // A direct result is not a handle, even when its text says "task".
        let direct = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"resultType task taskId"}],"resultType":"complete"}}"#;
        assert!(handle_of(&message(direct), TaskGeneration::Extension).is_none());
        let no_id = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","status":"working"}}"#;
        assert!(handle_of(&message(no_id), TaskGeneration::Extension).is_none());
    }

    #[test]
    fn handles_round_trip_through_json() {
        let mut h = TaskHandle::new("abc", TaskGeneration::Extension);
        h.tool = Some("charge".to_owned());
        let stored = h.to_json();
        assert_eq!(
            stored,
            json!({"taskId": "abc", "generation": "io.modelcontextprotocol/tasks", "tool": "charge"})
        );
        assert_eq!(TaskHandle::from_json(&stored), Some(h));
        let experimental = TaskHandle::new("x", TaskGeneration::Experimental);
        assert_eq!(
            TaskHandle::from_json(&experimental.to_json()),
            Some(experimental)
        );
        assert_eq!(
            TaskHandle::from_json(&json!({"taskId": "x", "generation": "2030"})),
            None
        );
        assert_eq!(
            TaskHandle::from_json(&json!({"generation": "2025-11-25"})),
            None
        );
    }

    #[test]
    fn the_extension_is_declared_beside_the_clients_capabilities() {
        let mut params = json!({"taskId": "t"});
        declare_extension(&mut params);
        v2026_07_28::stamp_meta(
            &mut params,
            "2026-07-28",
            &json!({"roots": {}, "elicitation": {}}),
            &json!({"name": "me"}),
        );
        let caps = &params["_meta"][v2026_07_28::META_CAPABILITIES];
        assert_eq!(caps["roots"], json!({}));
        assert_eq!(caps["extensions"][TASKS_EXTENSION], json!({}));
        assert_eq!(params["taskId"], "t");
        // Without a declaration, the capabilities are the client's alone.
        let mut plain = json!({});
        v2026_07_28::stamp_meta(
            &mut plain,
            "2026-07-28",
            &json!({"roots": {}}),
            &json!({"name": "me"}),
        );
        assert!(plain["_meta"][v2026_07_28::META_CAPABILITIES]["extensions"].is_null());
    }

    #[test]
    fn task_methods_name_their_task_in_mcp_name() {
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": {"taskId": "786512e2"}});
            let h = v2026_07_28::request_headers(&body, &[]).unwrap();
            assert_eq!(h["mcp-name"], "786512e2", "{method}");
            assert_eq!(h["mcp-method"], method);
        }
    }

    #[test]
    fn tool_task_support_defaults_to_forbidden() {
        assert_eq!(
            TaskSupport::of_tool(&json!({"name": "x"})),
            TaskSupport::Forbidden
        );
        assert_eq!(
            TaskSupport::of_tool(&json!({"execution": {"taskSupport": "optional"}})),
            TaskSupport::Optional
        );
        assert_eq!(
            TaskSupport::of_tool(&json!({"execution": {"taskSupport": "required"}})),
            TaskSupport::Required
        );
        assert_eq!(
            TaskSupport::of_tool(&json!({"execution": {"taskSupport": "forbidden"}})),
            TaskSupport::Forbidden
        );
    }

    #[test]
    fn modes_parse_and_print() {
        for m in [TaskMode::Auto, TaskMode::Never, TaskMode::Require] {
            assert_eq!(TaskMode::parse(&m.to_string()), Some(m));
        }
        assert_eq!(TaskMode::parse("sometimes"), None);
    }
}

#[cfg(test)]
mod error_tests {
    use super::*;

    #[test]
    fn a_400_missing_capability_is_typed() {
        let e = ClientError::Status {
            during: "request",
            status: 400,
            body: r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32021,"message":"Missing required client capability","data":{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}"#.to_owned(),
        };
        let error = rpc_error_of(&e).expect("an error object");
        assert!(requires_tasks(&error));
    }
}
