//! MCP tasks, both generations ([`ServerConfig::tasks`](super::ServerConfig::tasks); off by default).
//!
//! A task runs its tool once, lazily: it stays `working` for [`ServerConfig::task_work`] after its
//! creation (or after its last input), and the first read after that runs the tool (counted in
//! [`ServerStats::calls`](super::ServerStats::calls)) and keeps the result, so every later read
//! returns the same bytes. Timestamps are the logical ones: `lastUpdatedAt` of a completed task is
//! its creation time plus the work time, whenever it is read. Tasks live at most their ttl (then
//! `-32602`, as unknown), and at most [`ServerConfig::max_tasks`] at once (the oldest is forgotten
//! first). Task ids are 128 bits from the operating system's random source, as 32 hex digits.
//!
//! **MCP 2026-07-28, the extension `io.modelcontextprotocol/tasks`** ([`ServerMode::Stateless`]):
//!
//! | request | answer |
//! | --- | --- |
//! | `server/discover` | `capabilities.extensions["io.modelcontextprotocol/tasks"]` `{}` |
//! | `tools/call` (`big_result`, `progress`, `ask`) declaring the extension in `_meta["io.modelcontextprotocol/clientCapabilities"]` | `200` JSON `{"resultType":"task","taskId","status":"working","createdAt","lastUpdatedAt","ttlMs","pollIntervalMs"}` |
//! | the same without the declaration, [`TaskSupport::Require`] | `400`, `-32021` with `data.requiredCapabilities` |
//! | `tasks/get {taskId}` | `200`: the task with `"resultType":"complete"`; `completed` inlines `result` (the direct answer's `result`, byte for byte), `failed` an `error`, `input_required` its `inputRequests`; JSON or a one-event SSE stream without id ([`ServerConfig::task_reads_sse`]) |
//! | `tasks/update {taskId, inputResponses}` | `{"resultType":"complete"}`; an answer to the outstanding key moves the task on |
//! | `tasks/cancel {taskId}` | `{"resultType":"complete"}`; a task not yet terminal becomes `cancelled` |
//! | `tasks/*` without the declaration | `400`, `-32021` |
//! | `Mcp-Name` other than `params.taskId` | `400`, `-32020` |
//! | unknown, purged or malformed `taskId` | `-32602` |
//! | `tasks/result`, `tasks/list` | `-32601` |
//!
//! **MCP 2025-11-25, experimental tasks** (the session modes):
//!
//! | request | answer |
//! | --- | --- |
//! | `initialize` | `capabilities.tasks` `{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}` |
//! | `tools/list` | each tool with `execution.taskSupport` `optional` ([`TaskSupport::Offer`]) or `required` |
//! | `tools/call` with `params.task {ttl?}` | `200` JSON `{"task":{"taskId","status":"working","createdAt","lastUpdatedAt","ttl","pollInterval"}}` (the ttl asked for, at most the server's) |
//! | `tools/call` without `params.task`, [`TaskSupport::Require`] | `-32601` (the specification's rule for `taskSupport: "required"`) |
//! | `tasks/get {taskId}` | the task's fields (JSON) |
//! | `tasks/result {taskId}` | waits until the task is terminal, then the tool's result with `_meta["io.modelcontextprotocol/related-task"]`, byte for byte the direct answer's otherwise (failed: its error; cancelled: `-32000`); JSON, or an SSE stream of the session whose event is kept in its replay buffer (resumable as the mode says) |
//! | `tasks/list` | `{"tasks":[...]}`: the session's tasks, oldest first (a `cursor` is `-32602`: none is ever issued) |
//! | `tasks/cancel {taskId}` | the task, `cancelled`; a terminal task: `-32602` |
//! | a task of another session, unknown or purged | `-32602` |
//!
//! [`ServerMode::Stateless`]: super::ServerMode::Stateless
//! [`ServerConfig::task_work`]: super::ServerConfig::task_work
//! [`ServerConfig::max_tasks`]: super::ServerConfig::max_tasks
//! [`ServerConfig::task_reads_sse`]: super::ServerConfig::task_reads_sse

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use http::{Response, StatusCode};
use serde_json::{Value, json};
use tokio::time::Instant;
use tracing::debug;

use super::{Body, SessionEntry, Shared, bump, rpc_error, tools::Call};

/// The extension identifier of MCP 2026-07-28 tasks.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The `_meta` key tying a 2025-11-25 `tasks/result` answer to its task.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The `_meta` key of a 2026-07-28 request's client capabilities.
pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// JSON-RPC error (2026-07-28): a header disagrees with the request body.
pub const HEADER_MISMATCH: i64 = -32020;
/// JSON-RPC error (2026-07-28): the request lacks a client capability the server needs.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;

/// Whether the server offers MCP tasks ([`ServerConfig::tasks`](super::ServerConfig::tasks)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskSupport {
    /// No tasks (the default): every call is answered directly, `tasks/*` is `-32601`.
    #[default]
    Off,
    /// Tasks when the client asks (2025-11-25: `params.task`) or declares the extension
    /// (2026-07-28: the server then always answers with a task); direct answers otherwise.
    Offer,
    /// Tasks only: a call that does not ask for one (2025-11-25) is `-32601`; one that does not
    /// declare the extension (2026-07-28) is `-32021`.
    Require,
}

impl TaskSupport {
    /// Whether tasks are served at all.
    pub fn is_on(self) -> bool {
        self != TaskSupport::Off
    }
}

/// What a task runs.
#[derive(Clone, Debug)]
pub(super) enum Job {
    Call(Call),
    /// The 2026-07-28 `ask` tool: `rounds` elicitations, then the last name given.
    Ask {
        rounds: u64,
    },
}

#[derive(Clone, Debug)]
enum Status {
    Working,
    /// Waiting for the answer to key `name-<n>`.
    InputRequired(u64),
    /// The tool's `result` object, byte for byte.
    Completed(Bytes),
    Failed(i64, String),
    Cancelled,
}

impl Status {
    fn as_str(&self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired(_) => "input_required",
            Status::Completed(_) => "completed",
            Status::Failed(..) => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    fn is_terminal(&self) -> bool {
        matches!(
            self,
            Status::Completed(_) | Status::Failed(..) | Status::Cancelled
        )
    }
}

#[derive(Debug)]
pub(super) struct Task {
    id: String,
    created: Instant,
    created_at: SystemTime,
    /// The last status change, from `created`.
    updated: Duration,
    ttl: Option<Duration>,
    job: Job,
    /// `ask`: answers received, the last name given, and when the current working phase began.
    answered: u64,
    last_name: String,
    since: Duration,
    status: Status,
}

impl Task {
    /// Moves the task on to what `now` makes it: the first read after the work time runs the tool
    /// (once) or asks the next question.
    fn advance(&mut self, shared: &Shared) {
        if !matches!(self.status, Status::Working) {
            return;
        }
        let work = shared.config.task_work;
        let due = self.since.saturating_add(work);
        if self.created.elapsed() < due {
            return;
        }
        self.updated = due;
        if let Some((code, message)) = &shared.config.task_failure {
            self.status = Status::Failed(*code, message.clone());
            return;
        }
        self.status = match &self.job {
            Job::Call(call) => {
                bump(&shared.stats.calls);
                Status::Completed(call.result_object())
            }
            Job::Ask { rounds } if self.answered < *rounds => {
                Status::InputRequired(self.answered + 1)
            }
            Job::Ask { rounds } => {
                bump(&shared.stats.calls);
                let v = json!({
                    "content": [{"type": "text", "text": format!("{rounds} rounds; last name: {}", self.last_name)}],
                    "isError": false,
                    "resultType": "complete",
                });
                Status::Completed(Bytes::from(
                    serde_json::to_vec(&v).expect("a JSON value serializes"),
                ))
            }
        };
        debug!(task = %self.id, status = self.status.as_str(), "task moved on");
    }

    /// How long until [`advance`](Self::advance) can move a working task on.
    fn remaining(&self, shared: &Shared) -> Duration {
        self.since
            .saturating_add(shared.config.task_work)
            .saturating_sub(self.created.elapsed())
    }

    fn cancel(&mut self) -> bool {
        if self.status.is_terminal() {
            return false;
        }
        self.status = Status::Cancelled;
        self.updated = self.created.elapsed();
        true
    }

    fn timestamp(&self, offset: Duration) -> String {
        iso8601(self.created_at + offset)
    }

    fn ms(d: Duration) -> u64 {
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
    }

    fn status_message(&self) -> Option<String> {
        match &self.status {
            Status::InputRequired(_) => Some("waiting for input".to_owned()),
            Status::Failed(_, message) => Some(message.clone()),
            Status::Cancelled => Some("cancelled by request".to_owned()),
            _ => None,
        }
    }

    /// The 2026-07-28 `Task` fields (no status payload).
    fn extension_fields(&self, shared: &Shared) -> Value {
        let mut v = json!({
            "taskId": self.id,
            "status": self.status.as_str(),
            "createdAt": self.timestamp(Duration::ZERO),
            "lastUpdatedAt": self.timestamp(self.updated),
            "ttlMs": self.ttl.map(Task::ms),
            "pollIntervalMs": Task::ms(shared.config.task_poll_interval),
        });
        if let Some(m) = self.status_message() {
            v["statusMessage"] = m.into();
        }
        v
    }

    /// The 2025-11-25 `Task`.
    fn experimental_fields(&self, shared: &Shared) -> Value {
        let mut v = json!({
            "taskId": self.id,
            "status": self.status.as_str(),
            "createdAt": self.timestamp(Duration::ZERO),
            "lastUpdatedAt": self.timestamp(self.updated),
            "ttl": self.ttl.map(Task::ms),
            "pollInterval": Task::ms(shared.config.task_poll_interval),
        });
        if let Some(m) = self.status_message() {
            v["statusMessage"] = m.into();
        }
        v
    }

    /// The 2026-07-28 `tasks/get` result: the task, `"resultType":"complete"` and its status payload;
    /// a completed task's `result` spliced in as its bytes.
    fn extension_detail(&self, shared: &Shared, id: &Value) -> Bytes {
        let mut fields = self.extension_fields(shared);
        fields["resultType"] = "complete".into();
        match &self.status {
            Status::InputRequired(n) => {
                let key = format!("name-{n}");
                fields["inputRequests"] = json!({
                    key: {
                        "method": "elicitation/create",
                        "params": {
                            "mode": "form",
                            "message": format!("Your name? (round {n} of {})", self.rounds()),
                            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
                        },
                    },
                });
            }
            Status::Failed(code, message) => {
                fields["error"] = json!({"code": code, "message": message});
            }
            Status::Completed(result) => {
                return envelope(id, &splice(&fields, "result", result));
            }
            Status::Working | Status::Cancelled => {}
        }
        envelope(
            id,
            &serde_json::to_vec(&fields).expect("a JSON value serializes"),
        )
    }

    fn rounds(&self) -> u64 {
        match self.job {
            Job::Ask { rounds } => rounds,
            Job::Call(_) => 0,
        }
    }
}

/// `object` (a JSON object) with `"key":raw` added as its last member, `raw` kept byte for byte.
fn splice(object: &Value, key: &str, raw: &[u8]) -> Vec<u8> {
    let mut out = serde_json::to_vec(object).expect("a JSON value serializes");
    debug_assert_eq!(out.last(), Some(&b'}'));
    out.pop();
    if out.len() > 1 {
        out.push(b',');
    }
    out.extend_from_slice(&serde_json::to_vec(key).expect("a string serializes"));
    out.push(b':');
    out.extend_from_slice(raw);
    out.push(b'}');
    out
}

/// `{"jsonrpc":"2.0","id":<id>,"result":<result>}`, `result` byte for byte.
fn envelope(id: &Value, result: &[u8]) -> Bytes {
    let id = serde_json::to_vec(id).expect("a JSON value serializes");
    let mut out = BytesMut::with_capacity(result.len() + id.len() + 32);
    out.put_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.put_slice(&id);
    out.put_slice(b",\"result\":");
    out.put_slice(result);
    out.put_slice(b"}");
    out.freeze()
}

type TaskRef = Arc<Mutex<Task>>;

fn lock(task: &TaskRef) -> MutexGuard<'_, Task> {
    // Every update of a task is complete before its lock is released.
    task.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every live task: the map is locked only to find, add or remove one, never while a result is
/// built (each task has its own lock).
#[derive(Debug, Default)]
pub(super) struct TaskStore {
    inner: Mutex<StoreInner>,
}

#[derive(Debug, Default)]
struct StoreInner {
    tasks: HashMap<String, Entry>,
    /// Oldest first.
    order: VecDeque<String>,
}

/// A task in the map: what finding and purging it need (never changed), and the task.
#[derive(Debug)]
struct Entry {
    /// The 2025-11-25 session that created it (tasks are bound to it); none on 2026-07-28.
    session: Option<String>,
    created: Instant,
    ttl: Option<Duration>,
    task: TaskRef,
}

impl TaskStore {
    fn lock(&self) -> MutexGuard<'_, StoreInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets the tasks whose ttl has passed.
    fn purge(inner: &mut StoreInner) {
        let before = inner.tasks.len();
        inner
            .tasks
            .retain(|_, e| e.ttl.is_none_or(|ttl| e.created.elapsed() < ttl));
        if inner.tasks.len() != before {
            let StoreInner { tasks, order } = inner;
            order.retain(|id| tasks.contains_key(id));
        }
    }

    /// Live tasks.
    pub(super) fn len(&self) -> usize {
        let mut inner = self.lock();
        TaskStore::purge(&mut inner);
        inner.tasks.len()
    }

    fn create(
        &self,
        shared: &Shared,
        session: Option<String>,
        job: Job,
        ttl: Option<Duration>,
    ) -> Result<TaskRef, getrandom::Error> {
        let id = super::random_id()?;
        let created = Instant::now();
        let task = Arc::new(Mutex::new(Task {
            id: id.clone(),
            created,
            created_at: SystemTime::now(),
            updated: Duration::ZERO,
            ttl,
            job,
            answered: 0,
            last_name: String::new(),
            since: Duration::ZERO,
            status: Status::Working,
        }));
        let mut inner = self.lock();
        TaskStore::purge(&mut inner);
        while inner.tasks.len() >= shared.config.max_tasks {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            inner.tasks.remove(&oldest);
            debug!(task = %oldest, "forgot the oldest task");
        }
        let entry = Entry {
            session,
            created,
            ttl,
            task: Arc::clone(&task),
        };
        inner.tasks.insert(id.clone(), entry);
        inner.order.push_back(id);
        drop(inner);
        bump(&shared.stats.tasks_created);
        Ok(task)
    }

    /// The live task `id`, when `session` created it.
    fn find(&self, id: &str, session: Option<&str>) -> Option<TaskRef> {
        let mut inner = self.lock();
        TaskStore::purge(&mut inner);
        let e = inner.tasks.get(id)?;
        (e.session.as_deref() == session).then(|| Arc::clone(&e.task))
    }

    /// The tasks of `session`, oldest first.
    fn of_session(&self, session: &str) -> Vec<TaskRef> {
        let mut inner = self.lock();
        TaskStore::purge(&mut inner);
        inner
            .order
            .iter()
            .filter_map(|id| inner.tasks.get(id))
            .filter(|e| e.session.as_deref() == Some(session))
            .map(|e| Arc::clone(&e.task))
            .collect()
    }
}

/// An ISO 8601 (RFC 3339) UTC timestamp with milliseconds, e.g. `2026-07-28T10:30:00.000Z`.
fn iso8601(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (y, m, day) = civil_from_days(i64::try_from(secs / 86_400).unwrap_or(0));
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// The civil date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn invalid(id: &Value, message: &str, data: Option<Value>) -> Response<Body> {
    rpc_error(StatusCode::OK, id, -32602, message, data)
}

fn not_found(id: &Value, task_id: &str) -> Response<Body> {
    invalid(
        id,
        "Failed to retrieve task: Task not found",
        Some(json!({"taskId": task_id})),
    )
}

fn missing_capability(id: &Value) -> Response<Body> {
    rpc_error(
        StatusCode::BAD_REQUEST,
        id,
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        "Missing required client capability",
        Some(json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})),
    )
}

fn no_random(id: &Value) -> Response<Body> {
    super::internal_error(id, "no random source for a task id")
}

/// `params.taskId`, or the `-32602` answer.
fn task_id<'a>(msg: &'a Value, id: &Value) -> Result<&'a str, Box<Response<Body>>> {
    msg["params"]["taskId"]
        .as_str()
        .ok_or_else(|| Box::new(invalid(id, "invalid params: taskId must be a string", None)))
}

fn reply(shared: &Shared, data: Bytes) -> Response<Body> {
    if shared.config.task_reads_sse {
        super::sse(vec![super::stateless::frame(&data)])
    } else {
        super::full(StatusCode::OK, "application/json", data)
    }
}

// ---- MCP 2026-07-28 -------------------------------------------------------------------------

/// Whether a 2026-07-28 request declares the tasks extension in its per-request capabilities.
pub(super) fn declares_extension(msg: &Value) -> bool {
    msg["params"]["_meta"][CLIENT_CAPABILITIES]["extensions"]
        .get(TASKS_EXTENSION)
        .is_some_and(Value::is_object)
}

/// A 2026-07-28 `tools/call` of a tool that can run as a task: the task (when the client declares
/// the extension), the `-32021` error (when it does not, in require mode), or `None` (a direct
/// answer).
pub(super) fn extension_call(
    shared: &Shared,
    msg: &Value,
    id: &Value,
    job: impl FnOnce() -> Result<Job, Box<Response<Body>>>,
) -> Option<Response<Body>> {
    let support = shared.config.tasks;
    if !support.is_on() {
        return None;
    }
    if !declares_extension(msg) {
        return (support == TaskSupport::Require).then(|| missing_capability(id));
    }
    let job = match job() {
        Ok(job) => job,
        Err(answer) => return Some(*answer),
    };
    let task = match shared
        .tasks
        .create(shared, None, job, shared.config.task_ttl)
    {
        Ok(t) => t,
        Err(_) => return Some(no_random(id)),
    };
    let t = lock(&task);
    let mut result = t.extension_fields(shared);
    result["resultType"] = "task".into();
    debug!(task = %t.id, "task created (2026-07-28)");
    Some(super::json(
        StatusCode::OK,
        &json!({"jsonrpc": "2.0", "id": id, "result": result}),
    ))
}

/// `tasks/get`, `tasks/update`, `tasks/cancel` on 2026-07-28; `None` for other methods or with
/// tasks off.
pub(super) fn extension_method(
    shared: &Shared,
    method: &str,
    msg: &Value,
    id: &Value,
) -> Option<Response<Body>> {
    if !shared.config.tasks.is_on()
        || !matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel")
    {
        return None;
    }
    if !declares_extension(msg) {
        return Some(missing_capability(id));
    }
    let task_id = match task_id(msg, id) {
        Ok(t) => t,
        Err(answer) => return Some(*answer),
    };
    let Some(task) = shared.tasks.find(task_id, None) else {
        return Some(not_found(id, task_id));
    };
    let ack = || {
        super::json(
            StatusCode::OK,
            &json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "complete"}}),
        )
    };
    Some(match method {
        "tasks/get" => {
            let data = {
                let mut t = lock(&task);
                t.advance(shared);
                t.extension_detail(shared, id)
            };
            bump(&shared.stats.task_reads);
            reply(shared, data)
        }
        "tasks/update" => {
            let responses = &msg["params"]["inputResponses"];
            if !responses.is_object() {
                return Some(invalid(
                    id,
                    "invalid params: inputResponses must be an object",
                    None,
                ));
            }
            let mut t = lock(&task);
            t.advance(shared);
            if let Status::InputRequired(n) = t.status {
                // Only the outstanding key counts; anything else is ignored, as the extension says.
                if let Some(answer) = responses.get(format!("name-{n}")) {
                    t.answered = n;
                    t.last_name = answer["content"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    t.since = t.created.elapsed();
                    t.updated = t.since;
                    t.status = Status::Working;
                }
            }
            ack()
        }
        _ => {
            let mut t = lock(&task);
            t.advance(shared);
            if t.cancel() {
                bump(&shared.stats.tasks_cancelled);
            }
            ack()
        }
    })
}

// ---- MCP 2025-11-25 -------------------------------------------------------------------------

/// The `capabilities.tasks` of an `initialize` result, with tasks on.
pub(super) fn experimental_capabilities() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// A 2025-11-25 `tools/call` (arguments already checked into `call`): a task when it asks for one,
/// the `-32601` error when it does not in require mode, or `Err(call)` (a direct answer).
pub(super) fn experimental_call(
    shared: &Shared,
    session: &str,
    msg: &Value,
    id: &Value,
    call: Call,
) -> Result<Response<Body>, Call> {
    let support = shared.config.tasks;
    let asked = &msg["params"]["task"];
    if !support.is_on() {
        return Err(call);
    }
    let requested = match asked {
        Value::Null if support == TaskSupport::Require => {
            return Ok(rpc_error(
                StatusCode::OK,
                id,
                -32601,
                "Task augmentation required for tools/call requests (execution.taskSupport is \"required\")",
                None,
            ));
        }
        Value::Null => return Err(call),
        Value::Object(o) => match o.get("ttl") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(ms) => Some(Duration::from_millis(ms)),
                None => {
                    bump(&shared.stats.invalid_params);
                    return Ok(invalid(
                        id,
                        "invalid params: task.ttl must be a non-negative integer",
                        None,
                    ));
                }
            },
        },
        _ => {
            bump(&shared.stats.invalid_params);
            return Ok(invalid(id, "invalid params: task must be an object", None));
        }
    };
    // The receiver may shorten the ttl asked for, never lengthen it past its own.
    let ttl = match (requested, shared.config.task_ttl) {
        (Some(r), Some(max)) => Some(r.min(max)),
        (Some(r), None) => Some(r),
        (None, own) => own,
    };
    let task = match shared
        .tasks
        .create(shared, Some(session.to_owned()), Job::Call(call), ttl)
    {
        Ok(t) => t,
        Err(_) => return Ok(no_random(id)),
    };
    let t = lock(&task);
    debug!(task = %t.id, "task created (2025-11-25)");
    Ok(super::json(
        StatusCode::OK,
        &json!({"jsonrpc": "2.0", "id": id, "result": {"task": t.experimental_fields(shared)}}),
    ))
}

/// `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel` on 2025-11-25; `None` for other
/// methods or with tasks off.
pub(super) async fn experimental_method(
    shared: &Shared,
    session: &str,
    entry: &SessionEntry,
    method: &str,
    msg: &Value,
    id: &Value,
) -> Option<Response<Body>> {
    if !shared.config.tasks.is_on()
        || !matches!(
            method,
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel"
        )
    {
        return None;
    }
    if method == "tasks/list" {
        if !msg["params"]["cursor"].is_null() {
            return Some(invalid(id, "invalid params: unknown cursor", None));
        }
        let tasks: Vec<Value> = shared
            .tasks
            .of_session(session)
            .iter()
            .map(|task| {
                let mut t = lock(task);
                t.advance(shared);
                t.experimental_fields(shared)
            })
            .collect();
        return Some(super::json(
            StatusCode::OK,
            &json!({"jsonrpc": "2.0", "id": id, "result": {"tasks": tasks}}),
        ));
    }
    let task_id = match task_id(msg, id) {
        Ok(t) => t,
        Err(answer) => return Some(*answer),
    };
    let Some(task) = shared.tasks.find(task_id, Some(session)) else {
        return Some(not_found(id, task_id));
    };
    Some(match method {
        "tasks/get" => {
            let fields = {
                let mut t = lock(&task);
                t.advance(shared);
                t.experimental_fields(shared)
            };
            bump(&shared.stats.task_reads);
            super::json(
                StatusCode::OK,
                &json!({"jsonrpc": "2.0", "id": id, "result": fields}),
            )
        }
        "tasks/cancel" => {
            let mut t = lock(&task);
            t.advance(shared);
            let cancelled = t.cancel();
            if cancelled {
                bump(&shared.stats.tasks_cancelled);
            }
            if !cancelled {
                return Some(invalid(
                    id,
                    "invalid params: the task is already terminal",
                    Some(json!({"taskId": task_id, "status": t.status.as_str()})),
                ));
            }
            super::json(
                StatusCode::OK,
                &json!({"jsonrpc": "2.0", "id": id, "result": t.experimental_fields(shared)}),
            )
        }
        _ => experimental_result(shared, entry, &task, id).await,
    })
}

/// `tasks/result`: waits (at most the task's work time) until the task is terminal, then the
/// underlying request's answer.
async fn experimental_result(
    shared: &Shared,
    entry: &SessionEntry,
    task: &TaskRef,
    id: &Value,
) -> Response<Body> {
    let status = loop {
        let wait = {
            let mut t = lock(task);
            t.advance(shared);
            if t.status.is_terminal() {
                break (t.id.clone(), t.status.clone());
            }
            t.remaining(shared)
        };
        if wait.is_zero() {
            // A 2025-11-25 task only ever waits for its work time; nothing else moves it on.
            return super::internal_error(id, "the task cannot complete");
        }
        tokio::time::sleep(wait).await;
    };
    bump(&shared.stats.task_reads);
    let (task_id, status) = status;
    let related = json!({RELATED_TASK: {"taskId": task_id}});
    let data = match status {
        Status::Completed(result) => {
            // The result object with `_meta` added last, the rest byte for byte.
            let mut object = BytesMut::from(&result[..]);
            object.truncate(object.len().saturating_sub(1));
            let tail = serde_json::to_vec(&json!({"_meta": related})).expect("JSON serializes");
            if object.len() > 1 {
                object.put_u8(b',');
            }
            object.put_slice(&tail[1..]);
            envelope(id, &object)
        }
        Status::Failed(code, message) => Bytes::from(
            serde_json::to_vec(&json!({
                "jsonrpc": "2.0", "id": id,
                "error": {"code": code, "message": message, "data": {"_meta": related}},
            }))
            .expect("JSON serializes"),
        ),
        _ => Bytes::from(
            serde_json::to_vec(&json!({
                "jsonrpc": "2.0", "id": id,
                "error": {"code": -32000, "message": "task cancelled", "data": {"_meta": related}},
            }))
            .expect("JSON serializes"),
        ),
    };
    if !shared.config.task_reads_sse {
        return super::full(StatusCode::OK, "application/json", data);
    }
    match super::one_event_stream(shared, entry, &data) {
        Ok(frames) => super::sse(frames),
        Err(e) => super::internal_error(id, &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_8601_utc() {
        assert_eq!(iso8601(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap = UNIX_EPOCH + Duration::from_millis(951_782_400_123);
        assert_eq!(iso8601(leap), "2000-02-29T00:00:00.123Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_785_234_600 + 59);
        assert_eq!(iso8601(t), "2026-07-28T10:30:59.000Z");
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn splice_keeps_the_raw_bytes() {
        let raw = br#"{"text":"a\/b \u00e9"}"#;
        let out = splice(&json!({"a": 1}), "result", raw);
        assert_eq!(out, br#"{"a":1,"result":{"text":"a\/b \u00e9"}}"#.to_vec());
        assert_eq!(splice(&json!({}), "r", b"1"), br#"{"r":1}"#.to_vec());
    }
}
