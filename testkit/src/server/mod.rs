//! A minimal MCP Streamable HTTP server on hyper 1.x (HTTP/1.1) and tokio, for loopback tests and the
//! demo: real sockets, a real [`ReplayBuffer`] per session (or one [`RedisStore`] shared by several
//! instances, [`ServerStore`]), and a switchable resume-miss behaviour ([`ServerMode`]) that
//! reproduces what servers in the field do.
//!
//! One endpoint, `/mcp`:
//!
//! | request | answer |
//! | --- | --- |
//! | `POST initialize` | `200` JSON result with the negotiated version ([`ProtocolVersion::negotiate`]), `Mcp-Session-Id` header (a new session) |
//! | `POST` notification or response (`notifications/initialized`, ...) | `202`, no body |
//! | `POST tools/list` | `200` JSON (or an SSE stream, [`ServerConfig::tools_list_sse`]; damaged on request, [`ServerConfig::tools_list_fault`]) |
//! | `POST tools/call` | `200 text/event-stream`: priming event (id, empty data, `retry`), progress notifications, the result |
//! | `POST tools/call` with `size` / `count` / `seed` out of range | `200` JSON-RPC error `-32602` |
//! | `POST ping` / unknown method | `200` JSON result `{}` / JSON-RPC error `-32601` |
//! | `POST tools/call` with `params.task`, `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel` | with [`ServerConfig::tasks`] on: MCP 2025-11-25 tasks (the [`tasks`] module's table; `initialize` then declares `capabilities.tasks` and `tools/list` each tool's `execution.taskSupport`); off (the default): `params.task` is ignored, `tasks/*` is `-32601` |
//! | `GET` + `Last-Event-ID` | the resume, as the [`ServerMode`] says (with [`ServerStore::Redis`]: the replay from Redis, `409` on a miss) |
//! | `POST tools/call` or `GET` while the Redis store is unreachable | `503` + `Retry-After` (never an empty `200`) |
//! | `GET` without `Last-Event-ID` | `405` (no standalone server-to-client stream) |
//! | `DELETE` | `204`, the session ends |
//! | no `Mcp-Session-Id` (except `initialize`) / an unknown or expired one | `400` / `404` |
//! | `MCP-Protocol-Version` unsupported, or not the session's version | `400` |
//! | a body over [`ServerConfig::max_request_bytes`] | `413` |
//!
//! [`ServerMode::Stateless`] answers MCP 2026-07-28 instead, with no sessions (see the `stateless`
//! module's table: `server/discover`, SSE without event ids, `GET`/`DELETE` `405`, the `ask` tool's
//! `input_required` rounds, routing headers that disagree with the body `400` `-32020`), and with
//! [`ServerConfig::tasks`] on the extension `io.modelcontextprotocol/tasks` (the [`tasks`]
//! module's table: tasks for clients that declare it, `tasks/get` with the result inline, JSON or
//! SSE).
//!
//! Tools: `big_result` (`size`, default [`ServerConfig::result_size`], at most
//! [`ServerConfig::max_result_size`]; `seed`): progress notifications, then one text result of exactly
//! [`expected_result`] bytes; `progress` (`count`, at most [`ServerConfig::max_progress_count`]): `count`
//! progress notifications, then [`expected_progress_result`]. Progress notifications carry the request's
//! `_meta.progressToken`, or the request id when it gave none.
//!
//! **Several instances.** Instances given one [`SessionDirectory`] ([`ServerConfig::sessions`]) know
//! each other's sessions, as behind a load balancer with a shared session database; the
//! [`balancer`] module routes each resume to another instance than the one that served the cut
//! response. With [`ServerStore::Memory`] that instance holds none of the stream (a miss); with a
//! shared [`ServerStore::Redis`] it replays it.
//!
//! A `tools/call` response is produced whole when the request arrives: every event is appended to the
//! session's [`ReplayBuffer`] (so it can be replayed however the connection ends), then written from its
//! stored frame — the big result as one `Bytes` body frame, which hyper writes with few large writes.
//!
//! **Protocol versions.** `2025-11-25` and `2025-06-18` ([`ProtocolVersion`]). `initialize` answers the
//! client's version when it is supported, else the newest. A session on `2025-11-25` gets a priming event
//! (an id, empty data, `retry`) at the start of every SSE stream the server opens, as the official SDKs
//! send it; `tools/call` streams carry one in either version. Later requests may send
//! `MCP-Protocol-Version`; without it the session's version applies.
//!
//! **Limits** (each a [`ServerConfig`] setter, with a default): request body bytes, `size` and `count`
//! arguments (checked before anything is allocated for them), live sessions (least recently used evicted
//! first), session idle time, call records kept per session for [`ServerMode::Restart`], concurrent
//! connections (further connections wait in the listen backlog), and the time a client may take to send
//! a request head (hyper's header read timeout, on a tokio timer). Each session's replay memory is bounded
//! by its [`replay::BufferConfig`]. Session ids are 128 bits from the operating system's random source. The
//! global session map is locked only to find, add or remove a session; building and encoding a response
//! (megabytes for `big_result`) happens under that session's own lock.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use ssegate_testkit::server::{ServerConfig, ServerMode};
//!
//! let mut config = ServerConfig::default();
//! config.mode(ServerMode::Strict).result_size(64 << 10).retry_ms(10);
//! let server = config.start("127.0.0.1:0".parse().unwrap()).await?;
//! println!("MCP endpoint: {}", server.url());
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

pub mod balancer;
mod stateless;
pub mod tasks;
pub(crate) mod tools;

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full, LengthLimitError, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{Value, json};
use ssegate::replay::{
    self, Miss, MissReason, RedisStore, ReplayBuffer, ReplayStore, StoreError, StreamId,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{Instrument, debug, debug_span, field, info_span, warn};

pub use stateless::{MAX_ASK_ROUNDS, VERSION_2026_07_28};
pub use tasks::{
    CLIENT_CAPABILITIES, HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, RELATED_TASK,
    TASKS_EXTENSION, TaskSupport,
};
use tools::{Call, Tool};
pub use tools::{
    DEFAULT_RESULT_SIZE, DEFAULT_SEED, expected_progress_result, expected_result,
    expected_result_2026_07_28, progress_notification, prose,
};

/// The endpoint path.
pub const MCP_PATH: &str = "/mcp";
/// The session header.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The resume header.
pub const LAST_EVENT_ID: &str = "last-event-id";
/// The protocol version header of requests after `initialize`.
pub const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";

/// How long a graceful shutdown waits for open connections before aborting them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// An MCP protocol revision this server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ProtocolVersion {
    /// `2025-06-18`.
    V2025_06_18,
    /// `2025-11-25`: every SSE stream the server opens starts with a priming event.
    V2025_11_25,
}

impl ProtocolVersion {
    /// Every supported version, oldest first.
    pub const SUPPORTED: [ProtocolVersion; 2] =
        [ProtocolVersion::V2025_06_18, ProtocolVersion::V2025_11_25];

    /// The newest supported version.
    pub const LATEST: ProtocolVersion = ProtocolVersion::V2025_11_25;

    /// The version string, e.g. `2025-11-25`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
        }
    }

    /// The version a server answers to `initialize` asking for `requested`: that version when it is
    /// supported, else the newest.
    pub fn negotiate(requested: Option<&str>) -> ProtocolVersion {
        requested
            .and_then(|r| r.parse().ok())
            .unwrap_or(ProtocolVersion::LATEST)
    }

    /// Whether every SSE stream the server opens starts with a priming event.
    pub fn primes_every_stream(self) -> bool {
        self >= ProtocolVersion::V2025_11_25
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A protocol version string this server does not speak.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedVersion(pub String);

impl fmt::Display for UnsupportedVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unsupported MCP protocol version {:?} (supported: 2025-06-18, 2025-11-25)",
            self.0
        )
    }
}

impl std::error::Error for UnsupportedVersion {}

impl FromStr for ProtocolVersion {
    type Err = UnsupportedVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProtocolVersion::SUPPORTED
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnsupportedVersion(s.to_owned()))
    }
}

/// What the server does with `GET` + `Last-Event-ID`: the correct mitigation and the behaviours seen in
/// the field (see DESIGN.md, "The problem, precisely").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServerMode {
    /// Replays every event after the id; on a miss answers `409 Conflict` with `Retry-After` and a
    /// JSON-RPC error body naming the reason. The correct behaviour.
    Strict,
    /// [`Strict`](Self::Strict) with a replay budget that holds whole results (at least four results
    /// and a per-event cap above one): the correct server a client can resume against in place.
    Buffered,
    /// Ignores `Last-Event-ID` and re-runs the call that opened the id's stream: a new stream, new ids,
    /// the whole response again (priming, progress, result). The failure of a server that lost its
    /// buffer and "helpfully" starts over. An id whose stream it never opened: `409`.
    Restart,
    /// Like [`Strict`](Self::Strict), but the newest event of each stream is pinned outside the byte
    /// budget ([`replay::BufferConfig::pin_last`] >= 1), so the event a cut interrupted — typically the big
    /// result, which no budget holds — is re-sent whole under its original id. Correct SSE, and exactly
    /// what corrupts a client that appends the replay to its partial buffer. Misses the pin cannot
    /// cover (events before the newest one were evicted): `409`.
    Boundary,
    /// Replays when it can; on a miss answers `200 text/event-stream` with an empty body and closes
    /// (seen with rmcp and the Python SDK).
    Empty,
    /// Re-sends the `Last-Event-ID` event itself, then the events after it (rmcp): the client sees a
    /// duplicate. Pins the two newest events of each stream; a miss is `409`.
    Resend,
    /// Speaks only MCP 2026-07-28 ([`VERSION_2026_07_28`]), as the specification describes it: no
    /// sessions, `server/discover` instead of `initialize`, every request carrying its version in
    /// `_meta`, SSE streams without event ids (nothing can be resumed), `GET` and `DELETE` answered
    /// `405`. A cut response is lost; the only way to its result is to run the call again.
    Stateless,
    /// [`Stateless`](Self::Stateless), offering the tasks extension ([`TaskSupport::Offer`] unless
    /// [`ServerConfig::tasks`] says otherwise): a client that declares it gets a task handle and
    /// reads the result with `tasks/get`, which it can read again after a cut.
    Tasks,
}

impl ServerMode {
    /// Every mode, in table order.
    pub const ALL: [ServerMode; 8] = [
        ServerMode::Strict,
        ServerMode::Buffered,
        ServerMode::Restart,
        ServerMode::Boundary,
        ServerMode::Empty,
        ServerMode::Resend,
        ServerMode::Stateless,
        ServerMode::Tasks,
    ];

    /// The lower-case name (`strict`, `buffered`, `restart`, `boundary`, `empty`, `resend`,
    /// `stateless`, `tasks`).
    pub fn as_str(self) -> &'static str {
        match self {
            ServerMode::Strict => "strict",
            ServerMode::Buffered => "buffered",
            ServerMode::Restart => "restart",
            ServerMode::Boundary => "boundary",
            ServerMode::Empty => "empty",
            ServerMode::Resend => "resend",
            ServerMode::Stateless => "stateless",
            ServerMode::Tasks => "tasks",
        }
    }

    /// Whether the server speaks MCP 2026-07-28 statelessly ([`ServerMode::Stateless`],
    /// [`ServerMode::Tasks`]).
    pub fn is_stateless(self) -> bool {
        matches!(self, ServerMode::Stateless | ServerMode::Tasks)
    }

    /// How many newest events per stream this mode pins outside the replay budget.
    fn pins(self) -> usize {
        match self {
            ServerMode::Boundary => 1,
            ServerMode::Resend => 2,
            ServerMode::Strict
            | ServerMode::Buffered
            | ServerMode::Restart
            | ServerMode::Empty
            | ServerMode::Stateless
            | ServerMode::Tasks => 0,
        }
    }
}

impl fmt::Display for ServerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode name that is not one of [`ServerMode::ALL`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownMode(pub String);

impl fmt::Display for UnknownMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown server mode {:?} (expected strict, buffered, restart, boundary, empty, resend, stateless or tasks)",
            self.0
        )
    }
}

impl std::error::Error for UnknownMode {}

impl FromStr for ServerMode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ServerMode::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownMode(s.to_owned()))
    }
}

/// What [`ServerConfig::tools_list_fault`] does to the `tools/list` JSON answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BodyFault {
    /// Only the first N bytes are sent: a whole HTTP body whose JSON was cut.
    Truncate(usize),
    /// These bytes follow the answer: two values run together, or whitespace.
    Append(Bytes),
}

/// Where the server keeps the events it sent, for `GET` + `Last-Event-ID` ([`ServerConfig::store`]).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum ServerStore {
    /// A [`ReplayBuffer`] per session in this process (the default): only this instance can replay.
    /// Every [`ServerMode`] applies.
    #[default]
    Memory,
    /// A [`RedisStore`] shared by every instance: a resume may land on any of them. `tools/call`
    /// streams are appended to Redis and every resume is replayed from it, whatever the
    /// [`ServerMode`] (the mode's pins and restarts are in-memory behaviours); a miss is `409`, an
    /// unreachable Redis `503` with `Retry-After` (never an empty `200`), on `POST` as on `GET`.
    /// `tools/list` streams stay in the session's in-memory buffer.
    Redis(RedisStore),
}

impl ServerStore {
    /// `memory` or `redis`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ServerStore::Memory => "memory",
            ServerStore::Redis(_) => "redis",
        }
    }
}

/// A session table shared by several server instances in one process ([`ServerConfig::sessions`]):
/// what a load-balanced deployment keeps in a shared database, so that every instance knows every
/// session (its id and protocol version). Replay stores are not shared through it: with
/// [`ServerStore::Memory`], an instance that learns a session here starts with an empty buffer.
/// Cheap to clone (one table). Holds at most [`capacity`](Self::new) sessions, forgetting the oldest
/// first.
#[derive(Clone, Debug)]
pub struct SessionDirectory {
    inner: Arc<Mutex<DirectoryInner>>,
}

#[derive(Debug)]
struct DirectoryInner {
    capacity: usize,
    versions: HashMap<String, ProtocolVersion>,
    order: VecDeque<String>,
}

impl Default for SessionDirectory {
    /// A table of at most 4096 sessions.
    fn default() -> Self {
        SessionDirectory::new(4096)
    }
}

impl SessionDirectory {
    /// An empty table holding at most `capacity` sessions (at least 1).
    pub fn new(capacity: usize) -> SessionDirectory {
        SessionDirectory {
            inner: Arc::new(Mutex::new(DirectoryInner {
                capacity: capacity.max(1),
                versions: HashMap::new(),
                order: VecDeque::new(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, DirectoryInner> {
        // Every update is complete before the lock is released.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sessions known.
    pub fn len(&self) -> usize {
        self.lock().versions.len()
    }

    /// Whether no session is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The protocol version of session `id`, when known.
    pub fn version(&self, id: &str) -> Option<ProtocolVersion> {
        self.lock().versions.get(id).copied()
    }

    fn insert(&self, id: &str, version: ProtocolVersion) {
        let mut d = self.lock();
        if d.versions.insert(id.to_owned(), version).is_none() {
            d.order.push_back(id.to_owned());
        }
        while d.versions.len() > d.capacity {
            let Some(oldest) = d.order.pop_front() else {
                break;
            };
            d.versions.remove(&oldest);
        }
    }

    fn remove(&self, id: &str) {
        let mut d = self.lock();
        if d.versions.remove(id).is_some() {
            d.order.retain(|s| s != id);
        }
    }
}

/// The server's settings. Setters take `&mut self` and chain; [`ServerConfig::start`] binds and serves.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    mode: ServerMode,
    result_size: usize,
    seed: u64,
    replay: replay::BufferConfig,
    retry_ms: u64,
    progress_count: u64,
    tools_list_sse: bool,
    tools_list_fault: Option<BodyFault>,
    max_result_size: usize,
    max_progress_count: u64,
    max_request_bytes: usize,
    max_sessions: usize,
    session_idle_timeout: Duration,
    max_calls_per_session: usize,
    max_connections: usize,
    header_read_timeout: Duration,
    store: ServerStore,
    sessions: Option<SessionDirectory>,
    tasks: TaskSupport,
    task_work: Duration,
    task_ttl: Option<Duration>,
    task_poll_interval: Duration,
    task_reads_sse: bool,
    max_tasks: usize,
    task_failure: Option<(i64, String)>,
}

impl Default for ServerConfig {
    /// `Strict`, a 4 MiB result, 3 progress notifications, `retry: 250`, and a replay buffer of 64 slots,
    /// a 1 MiB budget and a 1 MiB per-event cap (so the big result evicts the older events and is itself
    /// never kept, as in the field report), `Retry-After` 1 s. Limits: `size` at most 64 MiB, `count` at
    /// most 10,000, request bodies of 1 MiB, 128 sessions idle for at most 10 minutes, 8 call records per
    /// session, 256 concurrent connections, 30 s to send a request head. Tasks off; when on, a task
    /// works for 100 ms, lives 60 s, suggests polling every 50 ms, is read as JSON, and at most 64
    /// are kept.
    fn default() -> Self {
        ServerConfig {
            mode: ServerMode::Strict,
            result_size: DEFAULT_RESULT_SIZE,
            seed: DEFAULT_SEED,
            replay: replay::BufferConfig::default(),
            retry_ms: 250,
            progress_count: 3,
            tools_list_sse: false,
            tools_list_fault: None,
            max_result_size: 64 << 20,
            max_progress_count: 10_000,
            max_request_bytes: 1 << 20,
            max_sessions: 128,
            session_idle_timeout: Duration::from_secs(600),
            max_calls_per_session: 8,
            max_connections: 256,
            header_read_timeout: Duration::from_secs(30),
            store: ServerStore::Memory,
            sessions: None,
            tasks: TaskSupport::Off,
            task_work: Duration::from_millis(100),
            task_ttl: Some(Duration::from_secs(60)),
            task_poll_interval: Duration::from_millis(50),
            task_reads_sse: false,
            max_tasks: 64,
            task_failure: None,
        }
    }
}

impl ServerConfig {
    /// The resume behaviour.
    pub fn mode(&mut self, mode: ServerMode) -> &mut Self {
        self.mode = mode;
        self
    }

    /// The default `size` of `big_result`'s text, in bytes (not checked against
    /// [`max_result_size`](Self::max_result_size), which bounds what a request may ask for).
    pub fn result_size(&mut self, bytes: usize) -> &mut Self {
        self.result_size = bytes;
        self
    }

    /// The default `seed` of `big_result`'s prose.
    pub fn seed(&mut self, seed: u64) -> &mut Self {
        self.seed = seed;
        self
    }

    /// Each session's replay buffer limits. The mode may raise [`replay::BufferConfig::pin_last`]
    /// (`Boundary` to 1, `Resend` to 2), never lower it.
    pub fn replay(&mut self, config: replay::BufferConfig) -> &mut Self {
        self.replay = config;
        self
    }

    /// The `retry:` field of the priming event, in milliseconds.
    pub fn retry_ms(&mut self, ms: u64) -> &mut Self {
        self.retry_ms = ms;
        self
    }

    /// How many progress notifications `big_result` sends (and `progress` by default).
    pub fn progress_count(&mut self, n: u64) -> &mut Self {
        self.progress_count = n;
        self
    }

    /// Answer `tools/list` as an SSE stream instead of JSON.
    pub fn tools_list_sse(&mut self, yes: bool) -> &mut Self {
        self.tools_list_sse = yes;
        self
    }

    /// Damage the `tools/list` JSON answer as a broken server or proxy does (default: none). The HTTP
    /// message stays well formed: its `Content-Length` is the damaged body's.
    pub fn tools_list_fault(&mut self, fault: Option<BodyFault>) -> &mut Self {
        self.tools_list_fault = fault;
        self
    }

    /// The largest `size` a `big_result` request may ask for; larger is a `-32602` error.
    pub fn max_result_size(&mut self, bytes: usize) -> &mut Self {
        self.max_result_size = bytes;
        self
    }

    /// The largest `count` a `progress` request may ask for; larger is a `-32602` error.
    pub fn max_progress_count(&mut self, n: u64) -> &mut Self {
        self.max_progress_count = n;
        self
    }

    /// The largest POST body read; a larger one is answered `413`.
    pub fn max_request_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_request_bytes = bytes;
        self
    }

    /// The most live sessions; `initialize` at the cap evicts the least recently used one (at least 1).
    pub fn max_sessions(&mut self, n: usize) -> &mut Self {
        self.max_sessions = n.max(1);
        self
    }

    /// How long a session may go without a request before it expires (then `404`).
    pub fn session_idle_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.session_idle_timeout = timeout;
        self
    }

    /// How many calls per session [`ServerMode::Restart`] remembers (to re-run them on a resume); the
    /// oldest is forgotten first, and a resume of a forgotten call is a `409`.
    pub fn max_calls_per_session(&mut self, n: usize) -> &mut Self {
        self.max_calls_per_session = n;
        self
    }

    /// The most connections served at once (at least 1); more wait in the listen backlog.
    pub fn max_connections(&mut self, n: usize) -> &mut Self {
        self.max_connections = n.clamp(1, Semaphore::MAX_PERMITS);
        self
    }

    /// How long a client may take to send a request head before the connection is closed.
    pub fn header_read_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.header_read_timeout = timeout;
        self
    }

    /// Where sent events are kept for resumption: [`ServerStore::Memory`] (the default) or a shared
    /// [`ServerStore::Redis`].
    pub fn store(&mut self, store: ServerStore) -> &mut Self {
        self.store = store;
        self
    }

    /// A session table shared with other instances (none by default: sessions are this instance's
    /// own). Sessions opened here are added to it; a request naming a session this instance does not
    /// hold, but the table does, adopts it (with an empty in-memory buffer); `DELETE` on any instance
    /// removes it, and a session the table no longer knows is gone (`404`) on every instance.
    pub fn sessions(&mut self, directory: SessionDirectory) -> &mut Self {
        self.sessions = Some(directory);
        self
    }

    /// Whether tool calls may run as MCP tasks (default [`TaskSupport::Off`]): on 2026-07-28
    /// ([`ServerMode::Stateless`]) the extension `io.modelcontextprotocol/tasks`, on the session modes
    /// the experimental tasks of 2025-11-25 (see the `tasks` module's tables).
    pub fn tasks(&mut self, support: TaskSupport) -> &mut Self {
        self.tasks = support;
        self
    }

    /// How long a task stays `working` after its creation (and, for `ask`, after each answer)
    /// before the next read runs the tool (default 100 ms). A 2025-11-25 `tasks/result` waits at
    /// most this long.
    pub fn task_work(&mut self, work: Duration) -> &mut Self {
        self.task_work = work;
        self
    }

    /// How long a task is kept after its creation, whatever its status (`None`: until evicted by
    /// [`max_tasks`](Self::max_tasks); default 60 s). After it the task is unknown (`-32602`). A
    /// 2025-11-25 client may ask for a shorter one.
    pub fn task_ttl(&mut self, ttl: Option<Duration>) -> &mut Self {
        self.task_ttl = ttl;
        self
    }

    /// The polling interval tasks suggest (`pollIntervalMs` / `pollInterval`; default 50 ms).
    pub fn task_poll_interval(&mut self, interval: Duration) -> &mut Self {
        self.task_poll_interval = interval;
        self
    }

    /// Answer task reads as an SSE stream of one event instead of JSON (default: JSON). On
    /// 2026-07-28 `tasks/get` (an event without id); on 2025-11-25 `tasks/result` (a stream of the
    /// session with event ids in its replay buffer, primed as the version says; `tasks/get` stays
    /// JSON, as that specification asks).
    pub fn task_reads_sse(&mut self, yes: bool) -> &mut Self {
        self.task_reads_sse = yes;
        self
    }

    /// The most tasks kept at once (at least 1; default 64); creating one more forgets the oldest.
    pub fn max_tasks(&mut self, n: usize) -> &mut Self {
        self.max_tasks = n.max(1);
        self
    }

    /// Make every task end `failed` with this JSON-RPC error (code, message) when its work time is
    /// up, instead of running the tool (default: none; the tool runs and the task completes).
    pub fn task_failure(&mut self, error: Option<(i64, String)>) -> &mut Self {
        self.task_failure = error;
        self
    }

    /// The replay limits each session actually uses (with the mode's pins applied).
    pub fn effective_replay(&self) -> replay::BufferConfig {
        let mut c = self.replay.clone();
        let pins = c.pin_last.max(self.mode.pins());
        c.pin_last(pins);
        if self.mode == ServerMode::Buffered {
            // Whole results with their framing, several calls deep.
            let event = self.result_size + (64 << 10);
            let (per_event, total) = (c.max_event_bytes, c.max_session_bytes);
            c.max_event_bytes(per_event.max(event))
                .max_session_bytes(total.max(4 * event));
        }
        c
    }

    /// Binds `addr` (use `127.0.0.1:0` for an ephemeral loopback port) and serves on the current tokio
    /// runtime until [`RunningServer::shutdown`] or drop.
    pub async fn start(&self, addr: SocketAddr) -> io::Result<RunningServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(self.clone()));
        let (stop, stopped) = watch::channel(false);
        let span = info_span!("mcp_server", %addr, mode = %self.mode);
        let task =
            tokio::spawn(accept_loop(listener, Arc::clone(&shared), stopped).instrument(span));
        Ok(RunningServer {
            addr,
            shared,
            stop,
            task,
        })
    }
}

/// A snapshot of the server's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerStats {
    /// TCP connections accepted.
    pub connections: u64,
    /// HTTP requests handled.
    pub requests: u64,
    /// Sessions opened by `initialize`.
    pub sessions_opened: u64,
    /// Sessions ended by `DELETE`.
    pub sessions_deleted: u64,
    /// Sessions dropped after [`ServerConfig::session_idle_timeout`] without a request.
    pub sessions_expired: u64,
    /// Sessions evicted (least recently used) to admit a new one at [`ServerConfig::max_sessions`].
    pub sessions_evicted: u64,
    /// SSE streams opened (`tools/call` responses, restarts, `tools/list` streams).
    pub streams: u64,
    /// `GET` + `Last-Event-ID` requests.
    pub resumes: u64,
    /// Resumes answered from the replay buffer (including `Resend`'s).
    pub replays: u64,
    /// Resumes answered `409` (a replay miss).
    pub misses: u64,
    /// Resumes answered by re-running the call (`Restart`).
    pub restarts: u64,
    /// Resumes answered with an empty `200` (`Empty` on a miss).
    pub empty_replies: u64,
    /// Requests refused with JSON-RPC `-32602` (an argument out of range).
    pub invalid_params: u64,
    /// Sessions this instance learned from the shared [`SessionDirectory`] (opened by another one).
    pub sessions_adopted: u64,
    /// Requests answered `503` because the replay store could not be reached.
    pub store_unavailable: u64,
    /// Tool calls run (`tools/call` requests with valid arguments, and [`ServerMode::Restart`]'s
    /// re-runs): how many times a tool had its effect. A task counts once, when its tool runs
    /// (the first read after its work time), however often it is read.
    pub calls: u64,
    /// Tasks created ([`ServerConfig::tasks`]).
    pub tasks_created: u64,
    /// Task reads answered: `tasks/get` (both generations) and `tasks/result` (2025-11-25).
    pub task_reads: u64,
    /// Tasks cancelled by `tasks/cancel` before they ended.
    pub tasks_cancelled: u64,
}

impl ServerStats {
    /// Every counter as a JSON object keyed by its field name (`{"connections": 2, "requests": 5,
    /// ..., "calls": 1, ...}`), as `ssegate-testkit serve` answers `stats`.
    pub fn to_json(&self) -> Value {
        // Destructured whole, so a new counter cannot be left out.
        let ServerStats {
            connections,
            requests,
            sessions_opened,
            sessions_deleted,
            sessions_expired,
            sessions_evicted,
            streams,
            resumes,
            replays,
            misses,
            restarts,
            empty_replies,
            invalid_params,
            sessions_adopted,
            store_unavailable,
            calls,
            tasks_created,
            task_reads,
            tasks_cancelled,
        } = *self;
        json!({
            "connections": connections,
            "requests": requests,
            "sessions_opened": sessions_opened,
            "sessions_deleted": sessions_deleted,
            "sessions_expired": sessions_expired,
            "sessions_evicted": sessions_evicted,
            "streams": streams,
            "resumes": resumes,
            "replays": replays,
            "misses": misses,
            "restarts": restarts,
            "empty_replies": empty_replies,
            "invalid_params": invalid_params,
            "sessions_adopted": sessions_adopted,
            "store_unavailable": store_unavailable,
            "calls": calls,
            "tasks_created": tasks_created,
            "task_reads": task_reads,
            "tasks_cancelled": tasks_cancelled,
        })
    }
}

#[derive(Debug, Default)]
struct Stats {
    connections: AtomicU64,
    requests: AtomicU64,
    sessions_opened: AtomicU64,
    sessions_deleted: AtomicU64,
    sessions_expired: AtomicU64,
    sessions_evicted: AtomicU64,
    streams: AtomicU64,
    resumes: AtomicU64,
    replays: AtomicU64,
    misses: AtomicU64,
    restarts: AtomicU64,
    empty_replies: AtomicU64,
    invalid_params: AtomicU64,
    sessions_adopted: AtomicU64,
    store_unavailable: AtomicU64,
    calls: AtomicU64,
    tasks_created: AtomicU64,
    tasks_cancelled: AtomicU64,
    task_reads: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Stats {
    fn snapshot(&self) -> ServerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ServerStats {
            connections: get(&self.connections),
            requests: get(&self.requests),
            sessions_opened: get(&self.sessions_opened),
            sessions_deleted: get(&self.sessions_deleted),
            sessions_expired: get(&self.sessions_expired),
            sessions_evicted: get(&self.sessions_evicted),
            streams: get(&self.streams),
            resumes: get(&self.resumes),
            replays: get(&self.replays),
            misses: get(&self.misses),
            restarts: get(&self.restarts),
            empty_replies: get(&self.empty_replies),
            invalid_params: get(&self.invalid_params),
            sessions_adopted: get(&self.sessions_adopted),
            store_unavailable: get(&self.store_unavailable),
            calls: get(&self.calls),
            tasks_created: get(&self.tasks_created),
            tasks_cancelled: get(&self.tasks_cancelled),
            task_reads: get(&self.task_reads),
        }
    }
}

/// A server accepting connections. Dropping it stops the server too (without waiting).
#[derive(Debug)]
pub struct RunningServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningServer {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.addr, MCP_PATH)
    }

    /// The mode it runs in.
    pub fn mode(&self) -> ServerMode {
        self.shared.config.mode
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &ServerConfig {
        &self.shared.config
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> ServerStats {
        self.shared.stats.snapshot()
    }

    /// Live sessions (expired ones are dropped first).
    pub fn session_count(&self) -> usize {
        let mut sessions = self.shared.lock();
        self.shared.prune_expired(&mut sessions);
        sessions.len()
    }

    /// Live tasks (those past their ttl are forgotten first).
    pub fn task_count(&self) -> usize {
        self.shared.tasks.len()
    }

    /// Stops accepting, lets open connections finish their response (up to 2 s), then aborts them.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// One session's mutable state, behind its own lock.
#[derive(Debug)]
struct Session {
    replay: ReplayBuffer,
    /// The calls [`ServerMode::Restart`] may re-run, oldest first, at most
    /// [`ServerConfig::max_calls_per_session`].
    calls: VecDeque<(StreamId, Call)>,
}

/// A session in the map: what requests read without its lock, and its state.
#[derive(Debug)]
struct SessionEntry {
    version: ProtocolVersion,
    /// Milliseconds since [`Shared::epoch`] of the last request (for expiry and eviction).
    last_used: AtomicU64,
    state: Mutex<Session>,
}

impl SessionEntry {
    fn lock(&self) -> MutexGuard<'_, Session> {
        // Every update of a session is complete before the lock is released, or harmless when cut
        // short by a panic (a stream left open), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

type Sessions = HashMap<String, Arc<SessionEntry>>;

#[derive(Debug)]
struct Shared {
    config: ServerConfig,
    replay: replay::BufferConfig,
    /// The global session map: locked only to find, add or remove a session, never while a response
    /// is built.
    sessions: Mutex<Sessions>,
    stats: Stats,
    epoch: Instant,
    connections: Arc<Semaphore>,
    tasks: tasks::TaskStore,
}

impl Shared {
    fn new(mut config: ServerConfig) -> Shared {
        if config.mode == ServerMode::Tasks && !config.tasks.is_on() {
            config.tasks = TaskSupport::Offer;
        }
        Shared {
            replay: config.effective_replay(),
            connections: Arc::new(Semaphore::new(config.max_connections)),
            config,
            sessions: Mutex::new(HashMap::new()),
            stats: Stats::default(),
            epoch: Instant::now(),
            tasks: tasks::TaskStore::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Sessions> {
        // A panic while holding the lock leaves the map consistent (every update is one insert/remove).
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn expired(&self, entry: &SessionEntry, now: u64) -> bool {
        let idle = now.saturating_sub(entry.last_used.load(Ordering::Relaxed));
        u128::from(idle) > self.config.session_idle_timeout.as_millis()
    }

    fn prune_expired(&self, sessions: &mut Sessions) {
        let now = self.now_ms();
        let before = sessions.len();
        sessions.retain(|_, e| !self.expired(e, now));
        for _ in sessions.len()..before {
            bump(&self.stats.sessions_expired);
        }
    }

    /// The live session `id`, marked as used now; an expired one is removed. A session this instance
    /// does not hold but the shared [`SessionDirectory`] knows is adopted, with an empty buffer.
    fn session(&self, id: &str) -> Option<Arc<SessionEntry>> {
        let now = self.now_ms();
        {
            let mut sessions = self.lock();
            if let Some(entry) = sessions.get(id) {
                // Ended (or forgotten) through the shared directory by another instance.
                let gone = self
                    .config
                    .sessions
                    .as_ref()
                    .is_some_and(|d| d.version(id).is_none());
                if gone {
                    sessions.remove(id);
                    return None;
                }
                if self.expired(entry, now) {
                    sessions.remove(id);
                    bump(&self.stats.sessions_expired);
                    if let Some(d) = &self.config.sessions {
                        d.remove(id);
                    }
                    return None;
                }
                entry.last_used.store(now, Ordering::Relaxed);
                return Some(Arc::clone(entry));
            }
        }
        let version = self.config.sessions.as_ref()?.version(id)?;
        debug!(session = id, "adopted a session from the shared directory");
        bump(&self.stats.sessions_adopted);
        let entry = self.new_entry(version);
        self.insert_local(id.to_owned(), entry);
        self.lock().get(id).map(Arc::clone)
    }

    fn new_entry(&self, version: ProtocolVersion) -> SessionEntry {
        SessionEntry {
            version,
            last_used: AtomicU64::new(self.now_ms()),
            state: Mutex::new(Session {
                replay: ReplayBuffer::new(self.replay.clone()),
                calls: VecDeque::new(),
            }),
        }
    }

    /// Adds a session, and to the shared directory when there is one.
    fn insert(&self, id: String, entry: SessionEntry) {
        if let Some(d) = &self.config.sessions {
            d.insert(&id, entry.version);
        }
        self.insert_local(id, entry);
    }

    /// Adds a session here: expired ones are dropped first, then the least recently used while at the
    /// cap.
    fn insert_local(&self, id: String, entry: SessionEntry) {
        let mut sessions = self.lock();
        self.prune_expired(&mut sessions);
        while sessions.len() >= self.config.max_sessions {
            let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, e)| e.last_used.load(Ordering::Relaxed))
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            sessions.remove(&oldest);
            bump(&self.stats.sessions_evicted);
            debug!(session = %oldest, "evicted the least recently used session");
        }
        sessions.insert(id, Arc::new(entry));
    }

    fn remove(&self, id: &str) -> bool {
        if let Some(d) = &self.config.sessions {
            d.remove(id);
        }
        self.lock().remove(id).is_some()
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    'serve: loop {
        // A connection slot first: at the cap, further connections wait in the listen backlog.
        let permit = loop {
            tokio::select! {
                permit = Arc::clone(&shared.connections).acquire_owned() => match permit {
                    Ok(p) => break p,
                    Err(_) => break 'serve,
                },
                _ = stopped.changed() => break 'serve,
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    bump(&shared.stats.connections);
                    let span = debug_span!("mcp_conn", %peer);
                    let task = serve_connection(stream, Arc::clone(&shared), stopped.clone());
                    conns.spawn(async move {
                        let _permit = permit;
                        task.await;
                    }.instrument(span));
                }
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = stopped.changed() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while conns.join_next().await.is_some() {}
    });
    if drained.await.is_err() {
        conns.abort_all();
    }
    debug!("server stopped");
}

async fn serve_connection(
    stream: TcpStream,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let header_read_timeout = shared.config.header_read_timeout;
    let service = service_fn(move |req| {
        let shared = Arc::clone(&shared);
        let span = debug_span!("mcp_request", method = %req.method(), rpc = field::Empty, session = field::Empty);
        async move { Ok::<_, Infallible>(handle(&shared, req).await) }.instrument(span)
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = stopped.changed() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        // A client or proxy that resets mid-response lands here: expected in fault-injection runs, as
        // is a client too slow to send its request head.
        debug!(error = %e, "connection ended with an error");
    }
}

type Body = BoxBody<Bytes, Infallible>;

fn full(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn json(status: StatusCode, v: &Value) -> Response<Body> {
    full(
        status,
        "application/json",
        serde_json::to_vec(v).expect("a JSON value serializes"),
    )
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(Empty::new().boxed());
    *r.status_mut() = status;
    r
}

fn rpc_error(
    status: StatusCode,
    id: &Value,
    code: i64,
    message: &str,
    data: Option<Value>,
) -> Response<Body> {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    json(status, &json!({"jsonrpc": "2.0", "id": id, "error": error}))
}

/// `200 text/event-stream` whose body is exactly `frames`, one body frame each (no copy).
fn sse(frames: Vec<Bytes>) -> Response<Body> {
    let body = StreamBody::new(futures_util::stream::iter(
        frames
            .into_iter()
            .map(|f| Ok::<_, Infallible>(Frame::data(f))),
    ));
    let mut r = Response::new(body.boxed());
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

fn conflict(miss: &Miss, last_event_id: &str) -> Response<Body> {
    let data = json!({
        "reason": miss.reason.as_str(),
        "lastEventId": last_event_id,
        "missing": miss.missing,
        "retryAfterMs": miss.retry_after.as_millis() as u64,
    });
    let mut r = rpc_error(
        StatusCode::CONFLICT,
        &Value::Null,
        -32000,
        &miss.to_string(),
        Some(data),
    );
    // Retry-After is whole seconds; round up so a client never retries early.
    let secs = miss.retry_after.as_millis().div_ceil(1000);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs as u64));
    r
}

/// What a request's headers say about its session.
#[derive(Debug)]
struct Ctx {
    session: Option<String>,
    /// `MCP-Protocol-Version`, when sent.
    version: Option<Result<ProtocolVersion, UnsupportedVersion>>,
}

impl Ctx {
    fn from_headers(headers: &HeaderMap) -> Ctx {
        let text = |name: &str| {
            headers
                .get(name)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        };
        Ctx {
            session: text(SESSION_HEADER),
            version: text(PROTOCOL_VERSION_HEADER).map(|v| v.parse()),
        }
    }
}

async fn handle(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    bump(&shared.stats.requests);
    if req.uri().path() != MCP_PATH {
        return full(StatusCode::NOT_FOUND, "text/plain", "not found\n");
    }
    let ctx = Ctx::from_headers(req.headers());
    if let Some(s) = &ctx.session {
        tracing::Span::current().record("session", s.as_str());
    }
    if shared.config.mode.is_stateless() {
        return match *req.method() {
            Method::POST => stateless::post(shared, req).await,
            _ => {
                let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("POST"));
                r
            }
        };
    }
    match *req.method() {
        Method::POST => post(shared, &ctx, req).await,
        Method::GET => resume(shared, &ctx, req.headers()).await,
        Method::DELETE => delete(shared, &ctx),
        _ => {
            let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            r
        }
    }
}

/// Why a request's session headers are not acceptable.
#[derive(Clone, Debug)]
enum Reject {
    MissingSession,
    UnknownSession,
    /// `MCP-Protocol-Version` names a version this server does not speak, or not the session's.
    BadVersion {
        got: String,
        session: ProtocolVersion,
    },
}

impl Reject {
    fn response(&self) -> Response<Body> {
        match self {
            Reject::MissingSession => rpc_error(
                StatusCode::BAD_REQUEST,
                &Value::Null,
                -32600,
                "missing Mcp-Session-Id",
                None,
            ),
            Reject::UnknownSession => rpc_error(
                StatusCode::NOT_FOUND,
                &Value::Null,
                -32001,
                "session not found",
                None,
            ),
            Reject::BadVersion { got, session } => rpc_error(
                StatusCode::BAD_REQUEST,
                &Value::Null,
                -32600,
                "unsupported MCP-Protocol-Version",
                Some(json!({
                    "got": got,
                    "session": session.as_str(),
                    "supported": ProtocolVersion::SUPPORTED.map(ProtocolVersion::as_str),
                })),
            ),
        }
    }
}

/// Checks the session headers: `400` when the session header is missing, `404` when the session is
/// unknown or expired, `400` when `MCP-Protocol-Version` is not the session's version.
fn check_session(shared: &Shared, ctx: &Ctx) -> Result<(String, Arc<SessionEntry>), Reject> {
    let id = ctx.session.as_deref().ok_or(Reject::MissingSession)?;
    let entry = shared.session(id).ok_or(Reject::UnknownSession)?;
    let bad = |got: &str| Reject::BadVersion {
        got: got.to_owned(),
        session: entry.version,
    };
    match &ctx.version {
        None => {}
        Some(Ok(v)) if *v == entry.version => {}
        Some(Ok(v)) => return Err(bad(v.as_str())),
        Some(Err(UnsupportedVersion(v))) => return Err(bad(v)),
    }
    Ok((id.to_owned(), entry))
}

/// A session or task id: 128 bits from the operating system's random source, as 32 hex digits.
fn random_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn internal_error(id: &Value, what: &str) -> Response<Body> {
    rpc_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        id,
        -32603,
        "internal error",
        Some(Value::from(what)),
    )
}

/// Reads a `POST` body (at most [`ServerConfig::max_request_bytes`]) as one JSON-RPC object, or the
/// error answer: `413`, or `400` with `-32700` / `-32600`.
async fn read_message(
    shared: &Shared,
    req: Request<Incoming>,
) -> Result<Value, Box<Response<Body>>> {
    let limit = shared.config.max_request_bytes;
    let body = match Limited::new(req.into_body(), limit).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return Err(Box::new(full(
                StatusCode::PAYLOAD_TOO_LARGE,
                "text/plain",
                format!("request body larger than {limit} bytes\n"),
            )));
        }
        Err(_) => {
            return Err(Box::new(full(
                StatusCode::BAD_REQUEST,
                "text/plain",
                "unreadable body\n",
            )));
        }
    };
    match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            -32600,
            "expected one JSON-RPC object",
            None,
        ))),
        Err(_) => Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            -32700,
            "parse error",
            None,
        ))),
    }
}

async fn post(shared: &Shared, ctx: &Ctx, req: Request<Incoming>) -> Response<Body> {
    let msg = match read_message(shared, req).await {
        Ok(m) => m,
        Err(answer) => return *answer,
    };
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    tracing::Span::current().record("rpc", method);
    let id = msg.get("id").cloned();
    if method == "initialize" {
        return initialize(shared, &msg, id.unwrap_or(Value::Null));
    }
    let (session, entry) = match check_session(shared, ctx) {
        Ok(s) => s,
        Err(e) => return e.response(),
    };
    // Notifications (no id) and responses (no method) are accepted and not answered.
    let Some(id) = id.filter(|_| !method.is_empty()) else {
        return empty(StatusCode::ACCEPTED);
    };
    if let Some(answer) =
        tasks::experimental_method(shared, &session, &entry, method, &msg, &id).await
    {
        return answer;
    }
    match method {
        "ping" => json(
            StatusCode::OK,
            &json!({"jsonrpc": "2.0", "id": id, "result": {}}),
        ),
        "tools/list" => {
            let mut list = tools::tool_list();
            let support = match shared.config.tasks {
                TaskSupport::Off => None,
                TaskSupport::Offer => Some("optional"),
                TaskSupport::Require => Some("required"),
            };
            if let (Some(support), Some(tools)) = (support, list["tools"].as_array_mut()) {
                for tool in tools {
                    tool["execution"] = json!({"taskSupport": support});
                }
            }
            let response = json!({"jsonrpc": "2.0", "id": id, "result": list});
            if !shared.config.tools_list_sse {
                let mut body = serde_json::to_vec(&response).expect("a JSON value serializes");
                match &shared.config.tools_list_fault {
                    Some(BodyFault::Truncate(n)) => body.truncate(*n),
                    Some(BodyFault::Append(more)) => body.extend_from_slice(more),
                    None => {}
                }
                return full(StatusCode::OK, "application/json", body);
            }
            let data = serde_json::to_vec(&response).expect("a JSON value serializes");
            match one_event_stream(shared, &entry, &data) {
                Ok(frames) => sse(frames),
                Err(e) => internal_error(&id, &e),
            }
        }
        "tools/call" => tools_call(shared, &session, &entry, &msg, id).await,
        _ => rpc_error(StatusCode::OK, &id, -32601, "method not found", None),
    }
}

fn initialize(shared: &Shared, msg: &Value, id: Value) -> Response<Body> {
    let session = match random_id() {
        Ok(s) => s,
        Err(e) => {
            warn!(error = %e, "no randomness for a session id");
            return internal_error(&id, "no random source for a session id");
        }
    };
    let version = ProtocolVersion::negotiate(msg["params"]["protocolVersion"].as_str());
    shared.insert(session.clone(), shared.new_entry(version));
    bump(&shared.stats.sessions_opened);
    tracing::Span::current().record("session", session.as_str());
    let mut result = json!({
        "protocolVersion": version.as_str(),
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "ssegate-loopback", "version": env!("CARGO_PKG_VERSION")},
    });
    if shared.config.tasks.is_on() {
        result["capabilities"]["tasks"] = tasks::experimental_capabilities();
    }
    let mut r = json(
        StatusCode::OK,
        &json!({"jsonrpc": "2.0", "id": id, "result": result}),
    );
    r.headers_mut().insert(
        SESSION_HEADER,
        HeaderValue::from_str(&session).expect("hex is a valid header"),
    );
    r
}

/// An integer argument: absent (or `null`) is `default`; anything but an integer in `0..=max` is
/// refused, naming the argument and the bound.
fn int_arg(args: &Value, name: &str, default: u64, max: u64) -> Result<u64, Value> {
    match &args[name] {
        Value::Null => Ok(default),
        v => v
            .as_u64()
            .filter(|&n| n <= max)
            .ok_or_else(|| json!({"argument": name, "minimum": 0, "maximum": max})),
    }
}

/// The call a `tools/call` request asks for, or its JSON-RPC error answer (an unknown tool, an
/// argument out of range); counted in [`ServerStats::calls`]: the tool runs now.
fn parse_call(shared: &Shared, msg: &Value, id: Value) -> Result<Call, Box<Response<Body>>> {
    let call = parse_tool(shared, msg, id)?;
    bump(&shared.stats.calls);
    Ok(call)
}

/// [`parse_call`] without running it (a task runs it later).
fn parse_tool(shared: &Shared, msg: &Value, id: Value) -> Result<Call, Box<Response<Body>>> {
    let params = &msg["params"];
    let args = &params["arguments"];
    let config = &shared.config;
    let tool = match params["name"].as_str() {
        Some("big_result") => {
            let max_size = u64::try_from(config.max_result_size).unwrap_or(u64::MAX);
            let default_size = u64::try_from(config.result_size).unwrap_or(u64::MAX);
            int_arg(args, "size", default_size, max_size).and_then(|size| {
                let seed = int_arg(args, "seed", config.seed, u64::MAX)?;
                Ok(Tool::BigResult {
                    // `size` <= max_result_size, a usize.
                    size: usize::try_from(size).unwrap_or(config.max_result_size),
                    seed,
                    progress: config.progress_count,
                })
            })
        }
        Some("progress") => int_arg(
            args,
            "count",
            config.progress_count.min(config.max_progress_count),
            config.max_progress_count,
        )
        .map(|count| Tool::Progress { count }),
        _ => {
            return Err(Box::new(rpc_error(
                StatusCode::OK,
                &id,
                -32602,
                "unknown tool",
                Some(params["name"].clone()),
            )));
        }
    };
    let tool = match tool {
        Ok(t) => t,
        Err(data) => {
            bump(&shared.stats.invalid_params);
            return Err(Box::new(rpc_error(
                StatusCode::OK,
                &id,
                -32602,
                "invalid params",
                Some(data),
            )));
        }
    };
    let token = params["_meta"]
        .get("progressToken")
        .cloned()
        .unwrap_or_else(|| id.clone());
    Ok(Call {
        request_id: id,
        token,
        tool,
        stateless: shared.config.mode.is_stateless(),
    })
}

async fn tools_call(
    shared: &Shared,
    session: &str,
    entry: &SessionEntry,
    msg: &Value,
    id: Value,
) -> Response<Body> {
    let call = match parse_tool(shared, msg, id.clone()) {
        Ok(call) => call,
        Err(answer) => return *answer,
    };
    let call = match tasks::experimental_call(shared, session, msg, &id, call) {
        Ok(task) => return task,
        Err(call) => call,
    };
    bump(&shared.stats.calls);
    if let ServerStore::Redis(store) = &shared.config.store {
        return match run_call_redis(shared, store.clone(), &call).await {
            Ok(frames) => sse(frames),
            Err(retry_after) => unavailable(shared, retry_after),
        };
    }
    match run_call(shared, entry, call) {
        Ok(frames) => sse(frames),
        Err((id, e)) => internal_error(&id, &e),
    }
}

/// Appends the priming event of a new stream: an id, empty data and the `retry` field.
fn prime(
    shared: &Shared,
    replay: &mut ReplayBuffer,
    stream: StreamId,
) -> Result<Bytes, replay::AppendError> {
    replay
        .append_with_retry(stream, None, b"", Some(shared.config.retry_ms))
        .map(|a| a.frame)
}

/// A new stream of one event (`tools/list` as SSE), primed when the session's version asks for it.
fn one_event_stream(
    shared: &Shared,
    entry: &SessionEntry,
    data: &[u8],
) -> Result<Vec<Bytes>, String> {
    let mut s = entry.lock();
    let stream = s.replay.open_stream();
    let mut write = || {
        let mut frames = Vec::with_capacity(2);
        if entry.version.primes_every_stream() {
            frames.push(prime(shared, &mut s.replay, stream)?);
        }
        frames.push(s.replay.append(stream, None, data)?.frame);
        Ok::<_, replay::AppendError>(frames)
    };
    let frames = write();
    s.replay.close_stream(stream);
    drop(s);
    bump(&shared.stats.streams);
    frames.map_err(|e| format!("{e:?}"))
}

/// Produces a call's whole response into a new stream of the session's replay buffer; returns the
/// frames to write. Only the session's own lock is held while the frames (megabytes) are encoded.
fn run_call(
    shared: &Shared,
    entry: &SessionEntry,
    call: Call,
) -> Result<Vec<Bytes>, (Value, String)> {
    // Build the payloads (megabytes of prose) before taking any lock.
    let messages = call.messages();
    let mut s = entry.lock();
    let stream = s.replay.open_stream();
    let mut write = || {
        // `messages` is bounded by `max_progress_count`, checked before the call was built.
        let mut frames = Vec::with_capacity(messages.len() + 1);
        frames.push(prime(shared, &mut s.replay, stream)?);
        for m in &messages {
            let appended = s.replay.append(stream, None, m)?;
            if appended.oversized {
                debug!(id = %appended.id, bytes = appended.frame.len(), "event exceeds the replay cap");
            }
            frames.push(appended.frame);
        }
        Ok::<_, replay::AppendError>(frames)
    };
    let frames = write();
    s.replay.close_stream(stream);
    let frames = match frames {
        Ok(f) => f,
        Err(e) => return Err((call.request_id, format!("{e:?}"))),
    };
    let keep = shared.config.max_calls_per_session;
    if shared.config.mode == ServerMode::Restart && keep > 0 {
        while s.calls.len() >= keep {
            s.calls.pop_front();
        }
        s.calls.push_back((stream, call));
    }
    drop(s);
    bump(&shared.stats.streams);
    debug!(%stream, events = frames.len(), "tools/call stream produced");
    Ok(frames)
}

/// Produces a call's whole response into a new stream of the shared Redis store; returns the frames
/// to write, or the retry hint when Redis cannot be reached (or refuses the stream it just opened).
async fn run_call_redis(
    shared: &Shared,
    mut store: RedisStore,
    call: &Call,
) -> Result<Vec<Bytes>, Duration> {
    let retry_after = store.config().retry_after;
    let messages = call.messages();
    let stream = store.open_stream().await.map_err(|e| match e {
        StoreError::Unavailable { retry_after } => retry_after,
        _ => retry_after,
    })?;
    let append_failed = |e: replay::AppendError| match e {
        replay::AppendError::Unavailable { retry_after } => retry_after,
        other => {
            warn!(error = %other, "the Redis store refused an append");
            retry_after
        }
    };
    let mut frames = Vec::with_capacity(messages.len() + 1);
    let prime = store
        .append(&stream, None, b"", Some(shared.config.retry_ms))
        .await
        .map_err(append_failed)?;
    frames.push(prime.frame);
    for m in &messages {
        let appended = store
            .append(&stream, None, m, None)
            .await
            .map_err(append_failed)?;
        frames.push(appended.frame);
    }
    // Closing only marks the end; a failure here leaves the events replayable.
    if let Err(e) = store.close_stream(&stream).await {
        debug!(error = %e, "closing the Redis stream failed");
    }
    bump(&shared.stats.streams);
    debug!(%stream, events = frames.len(), "tools/call stream produced into Redis");
    Ok(frames)
}

/// `503 Service Unavailable` with `Retry-After`: the replay store cannot be reached.
fn unavailable(shared: &Shared, retry_after: Duration) -> Response<Body> {
    bump(&shared.stats.store_unavailable);
    let mut r = rpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        &Value::Null,
        -32000,
        "replay store unavailable",
        Some(json!({"retryAfterMs": u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX)})),
    );
    let secs = retry_after.as_millis().div_ceil(1000).max(1);
    r.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(u64::try_from(secs).unwrap_or(u64::MAX)),
    );
    r
}

/// A resume served from the shared Redis store, whatever the mode: the replay, or `409` on a miss,
/// or `503` when Redis cannot be reached.
async fn resume_redis(shared: &Shared, mut store: RedisStore, last: &str) -> Response<Body> {
    let stats = &shared.stats;
    match store.replay_after(last).await {
        Ok(replay) => {
            bump(&stats.replays);
            debug!(frames = replay.frames.len(), "replayed from Redis");
            sse(replay.frames)
        }
        Err(miss) if miss.reason == MissReason::Unavailable => {
            debug!("Redis unavailable: 503");
            unavailable(shared, miss.retry_after)
        }
        Err(miss) => {
            bump(&stats.misses);
            debug!(reason = %miss.reason, "Redis replay miss answered 409");
            conflict(&miss, last)
        }
    }
}

async fn resume(shared: &Shared, ctx: &Ctx, headers: &HeaderMap) -> Response<Body> {
    let (_, entry) = match check_session(shared, ctx) {
        Ok(s) => s,
        Err(e) => return e.response(),
    };
    let Some(last) = headers.get(LAST_EVENT_ID) else {
        let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
        return r;
    };
    let Ok(last) = last.to_str() else {
        return full(
            StatusCode::BAD_REQUEST,
            "text/plain",
            "Last-Event-ID is not visible ASCII\n",
        );
    };
    let stats = &shared.stats;
    bump(&stats.resumes);
    let mode = shared.config.mode;
    if let ServerStore::Redis(store) = &shared.config.store {
        let span = debug_span!("resume", %mode, last_event_id = last);
        return resume_redis(shared, store.clone(), last)
            .instrument(span)
            .await;
    }
    let _span = debug_span!("resume", %mode, last_event_id = last).entered();
    if mode == ServerMode::Restart {
        let call = replay::parse_id(last).and_then(|(stream, _)| {
            entry
                .lock()
                .calls
                .iter()
                .find(|(s, _)| *s == stream)
                .map(|(_, c)| c.clone())
        });
        let Some(call) = call else {
            let miss = Miss {
                reason: MissReason::Unknown,
                missing: None,
                retry_after: shared.replay.retry_after,
            };
            bump(&stats.misses);
            return conflict(&miss, last);
        };
        return match run_call(shared, &entry, call) {
            Ok(frames) => {
                bump(&stats.restarts);
                bump(&stats.calls);
                debug!("restarted the call under new ids");
                sse(frames)
            }
            Err((id, e)) => internal_error(&id, &e),
        };
    }
    let replayed = {
        let s = entry.lock();
        let after = s.replay.replay_after(last);
        if mode == ServerMode::Resend {
            after.and_then(|mut r| {
                let own = s.replay.frame(last).ok_or_else(|| Miss {
                    reason: MissReason::Evicted,
                    missing: Some(last.to_owned()),
                    retry_after: shared.replay.retry_after,
                })?;
                r.frames.insert(0, own);
                Ok(r)
            })
        } else {
            after
        }
    };
    match replayed {
        Ok(replay) => {
            bump(&stats.replays);
            debug!(frames = replay.frames.len(), "replayed");
            sse(replay.frames)
        }
        Err(miss) if mode == ServerMode::Empty => {
            bump(&stats.empty_replies);
            debug!(reason = %miss.reason, "replay miss answered with an empty 200");
            sse(Vec::new())
        }
        Err(miss) => {
            bump(&stats.misses);
            debug!(reason = %miss.reason, "replay miss answered 409");
            conflict(&miss, last)
        }
    }
}

fn delete(shared: &Shared, ctx: &Ctx) -> Response<Body> {
    let (session, _) = match check_session(shared, ctx) {
        Ok(s) => s,
        Err(e) => return e.response(),
    };
    if shared.remove(&session) {
        bump(&shared.stats.sessions_deleted);
    }
    empty(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(shared: &Shared, version: ProtocolVersion) -> SessionEntry {
        SessionEntry {
            version,
            last_used: AtomicU64::new(shared.now_ms()),
            state: Mutex::new(Session {
                replay: ReplayBuffer::new(shared.replay.clone()),
                calls: VecDeque::new(),
            }),
        }
    }

    #[test]
    fn stats_to_json_names_every_counter() {
        let stats = ServerStats {
            calls: 3,
            misses: 2,
            ..ServerStats::default()
        };
        let v = stats.to_json();
        let object = v.as_object().expect("an object");
        assert_eq!(object.len(), 19);
        assert_eq!(v["calls"], 3);
        assert_eq!(v["misses"], 2);
        assert!(
            object
                .iter()
                .all(|(k, n)| n.is_u64() && (n == 0 || k == "calls" || k == "misses"))
        );
    }

    /// The response of a big call is built and encoded while another thread holds the global session
    /// lock: building it must not need that lock.
    #[test]
    fn a_call_is_encoded_outside_the_global_session_lock() {
        let mut config = ServerConfig::default();
        config.mode(ServerMode::Restart);
        let shared = Arc::new(Shared::new(config));
        shared.insert("s".to_owned(), entry(&shared, ProtocolVersion::LATEST));
        let session = shared.session("s").expect("just inserted");
        let held = shared.lock();
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                let call = Call {
                    request_id: json!(1),
                    token: json!(1),
                    tool: Tool::BigResult {
                        size: 4 << 20,
                        seed: 1,
                        progress: 3,
                    },
                    stateless: false,
                };
                let frames = run_call(&shared, &session, call).map(|f| f.len());
                let _ = tx.send(frames);
            })
        };
        let got = rx.recv_timeout(Duration::from_secs(30));
        drop(held);
        worker.join().expect("the worker does not panic");
        assert_eq!(got.expect("finished while the map was locked"), Ok(5));
        assert_eq!(shared.lock().len(), 1);
        assert_eq!(shared.session("s").expect("live").lock().calls.len(), 1);
    }

    #[test]
    fn versions_negotiate_to_the_clients_or_the_newest() {
        use ProtocolVersion::*;
        assert_eq!(ProtocolVersion::negotiate(Some("2025-06-18")), V2025_06_18);
        assert_eq!(ProtocolVersion::negotiate(Some("2025-11-25")), V2025_11_25);
        assert_eq!(ProtocolVersion::negotiate(Some("2024-11-05")), V2025_11_25);
        assert_eq!(ProtocolVersion::negotiate(None), V2025_11_25);
        assert!(V2025_11_25.primes_every_stream() && !V2025_06_18.primes_every_stream());
        assert_eq!(
            "2025-03-26".parse::<ProtocolVersion>().unwrap_err().0,
            "2025-03-26"
        );
    }

    #[test]
    fn int_args_are_bounded_before_use() {
        let args = json!({"a": 5, "b": 6, "c": -1, "d": "7", "e": 1.5, "f": null});
        assert_eq!(int_arg(&args, "a", 1, 5), Ok(5));
        assert!(int_arg(&args, "b", 1, 5).is_err());
        assert!(int_arg(&args, "c", 1, 5).is_err());
        assert!(int_arg(&args, "d", 1, 5).is_err());
        assert!(int_arg(&args, "e", 1, 5).is_err());
        assert_eq!(int_arg(&args, "f", 1, 5), Ok(1));
        assert_eq!(int_arg(&args, "missing", 1, 5), Ok(1));
        assert_eq!(int_arg(&json!(null), "a", 2, 5), Ok(2));
    }

    #[test]
    fn the_session_directory_is_bounded_oldest_first() {
        let d = SessionDirectory::new(2);
        d.insert("a", ProtocolVersion::V2025_06_18);
        d.insert("b", ProtocolVersion::LATEST);
        d.insert("a", ProtocolVersion::V2025_06_18); // known already: not a new entry
        assert_eq!(d.len(), 2);
        d.insert("c", ProtocolVersion::LATEST);
        assert_eq!(d.len(), 2);
        assert_eq!(d.version("a"), None);
        assert_eq!(d.version("b"), Some(ProtocolVersion::LATEST));
        d.remove("b");
        assert_eq!((d.len(), d.version("c").is_some()), (1, true));
        assert_eq!(SessionDirectory::new(0).lock().capacity, 1);
    }

    /// A session opened on one instance is adopted by another sharing the directory, with an empty
    /// buffer; a `DELETE` on either forgets it for both.
    #[test]
    fn instances_sharing_a_directory_adopt_each_others_sessions() {
        let d = SessionDirectory::default();
        let mut config = ServerConfig::default();
        config.sessions(d.clone());
        let (a, b) = (Shared::new(config.clone()), Shared::new(config));
        a.insert("s".to_owned(), a.new_entry(ProtocolVersion::V2025_06_18));
        let adopted = b.session("s").expect("known through the directory");
        assert_eq!(adopted.version, ProtocolVersion::V2025_06_18);
        assert_eq!(adopted.lock().replay.streams(), 0);
        assert_eq!(b.stats.snapshot().sessions_adopted, 1);
        assert!(b.session("t").is_none());
        assert!(b.remove("s"));
        assert!(d.is_empty());
        assert!(a.session("s").is_none(), "ended for every instance");
        assert!(Shared::new(ServerConfig::default()).session("s").is_none());
    }

    #[test]
    fn session_ids_are_random_hex() {
        let a = random_id().unwrap();
        let b = random_id().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
