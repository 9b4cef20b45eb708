//! `ssegate probe`: tells an MCP server operator how their server behaves on resumption.
//!
//! The probe opens a session, lists the tools, and calls one tool three times: once whole (the
//! baseline: where each event starts and ends), once cut in the middle of the largest event with
//! data, once cut at the event boundary before it (a stream with no event with data, one that
//! ends after its priming event, is called twice and cut once, after its last event). After each
//! cut it closes its own connection, waits as a client would (the server's `retry:`, at least
//! 250 ms, at most the replay timeout), resumes with `GET` + `Last-Event-ID` and classifies what
//! the server sent as exactly one [`Behaviour`].
//!
//! Each round is judged by ssegate's own [`Guard`], fed what the probe read (the bytes before the
//! cut, the disconnect, the reconnect response, the resumed bytes) as they arrive, with the call's
//! request id as the response it must deliver. A round is resumable exactly when the guard accepts
//! the resumed stream and the response arrives: a refusal is reported as the behaviour it shows
//! (see [`classify`] for the mapping), with the guard's words as evidence; what the server did is
//! described in more detail only for the streams the guard accepts. [`classify`] is the same
//! judgement over captured bytes, without a network.
//!
//! Every read is bounded: bytes and events per connection ([`ProbeConfig::max_bytes`],
//! [`ProbeConfig::max_events`]), the decoder's limits ([`ProbeConfig::decoder`]), the replay timeout
//! and one deadline for the whole probe ([`ProbeConfig::timeout`]). The probe keeps no event data:
//! per connection it keeps counters, the largest event's position and what the ids look like, so
//! its memory is the decoder's bounded buffer and the guard's bounded windows, whatever the server
//! sends. A limit reached, a transport error and a decoder drop are reported as such, never read as
//! the end of a stream.
#![forbid(unsafe_code)]

use std::fmt;
use std::pin::pin;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use reqwest::header::{self, HeaderValue};
use serde_json::{Value, json};
use ssegate::client::{
    CallOptions, Client, ClientConfig, ClientError, PROTOCOL_2026_07_28, PROTOCOL_VERSION,
    Protocol, Retry, STATELESS_VERSIONS, TASKS_EXTENSION, TaskErrorKind, TaskGeneration, TaskMode,
};
use ssegate::message::{RpcId, RpcKind};
use ssegate::resume::{
    Answer, EndCause, Failure, NumberedId, Output, ReconnectResponse, Refusal, RefusalKind,
    Restart, ResumableStream, Skip, StreamConfig,
};
use ssegate::sse::DecodeError;
use tokio::time::Instant;
use tracing::debug;

/// What the server did after a cut, one per round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Behaviour {
    /// Continued strictly after the `Last-Event-ID`.
    Continues,
    /// Replayed the interrupted event whole under its id, then went on.
    ReplaysEvent,
    /// Re-sent events already received, unchanged (the `Last-Event-ID` event itself, as rmcp
    /// does, or earlier ones), then went on.
    ResendsCursor,
    /// Started a new stream: events already received came again under new ids, or an id already
    /// received came again with other content.
    Restarted,
    /// Answered with another stream's events: ids of the same numbered shape naming another
    /// stream, ids going backwards, or a second, different response to the call.
    OtherStream,
    /// `200`, no event (or no response), closed.
    Empty,
    /// `200`, nothing (or no message) within the replay timeout.
    HeldOpen,
    /// The replay skipped the interrupted event.
    Reordered,
    /// `409` or `410`, an `event: error` answer, or another status or content type.
    Conflict,
    /// `429` or `503`: busy (the probe does not retry).
    Busy,
    /// `404`: the session is gone.
    Gone,
    /// No event id to resume from: the events carry none, or the cut came before the first one was
    /// complete.
    NoIds,
    /// The stream carries a message that is not one complete JSON value.
    Corrupt,
    /// A read reached one of the probe's limits (bytes or events per connection) or the decoder
    /// dropped an event over its limits, before the response.
    OverLimit,
    /// The connection failed while the probe read it (reset, broken chunked encoding, TLS), or the
    /// resume request failed before a response head.
    TransportError,
}

impl Behaviour {
    /// The name `--json` prints.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Behaviour::Continues => "continues",
            Behaviour::ReplaysEvent => "replays-event",
            Behaviour::ResendsCursor => "resends-cursor",
            Behaviour::Restarted => "restarted",
            Behaviour::OtherStream => "other-stream",
            Behaviour::Empty => "empty",
            Behaviour::HeldOpen => "held-open",
            Behaviour::Reordered => "reordered",
            Behaviour::Conflict => "conflict",
            Behaviour::Busy => "busy",
            Behaviour::Gone => "gone",
            Behaviour::NoIds => "no-ids",
            Behaviour::Corrupt => "corrupt",
            Behaviour::OverLimit => "over-limit",
            Behaviour::TransportError => "transport-error",
        }
    }

    /// Whether a client can resume in place against this behaviour: the guard accepted the resumed
    /// stream and the response arrived.
    pub(crate) fn is_resumable(self) -> bool {
        matches!(
            self,
            Behaviour::Continues | Behaviour::ReplaysEvent | Behaviour::ResendsCursor
        )
    }
}

impl fmt::Display for Behaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a round cut its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CutAt {
    /// In the middle of the largest event with data.
    MidEvent,
    /// At the event boundary before it.
    Boundary,
}

impl CutAt {
    /// The name `--json` prints.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CutAt::MidEvent => "mid-event",
            CutAt::Boundary => "boundary",
        }
    }
}

/// A limit that ended a read before the response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Limit {
    /// [`ProbeConfig::max_bytes`]: bytes read on one connection.
    Bytes(u64),
    /// [`ProbeConfig::max_events`]: events read on one connection.
    Events(u64),
    /// The decoder dropped an event over one of its limits ([`ProbeConfig::decoder`]): the
    /// message it carried is lost.
    Decoder(DecodeError),
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Bytes(n) => write!(f, "the --max-bytes limit of {n} bytes per connection"),
            Limit::Events(n) => write!(f, "the --max-events limit of {n} events per connection"),
            Limit::Decoder(DecodeError::EventTooLarge { limit, .. }) => write!(
                f,
                "the largest event exceeds the decoder limit of {limit} bytes (dropped)"
            ),
            Limit::Decoder(DecodeError::LineTooLong { limit, .. }) => write!(
                f,
                "a line exceeds the decoder limit of {limit} bytes (its event dropped)"
            ),
            Limit::Decoder(DecodeError::BlockTooLarge { limit, .. }) => write!(
                f,
                "an event block exceeds the decoder limit of {limit} bytes on the wire (dropped)"
            ),
            Limit::Decoder(DecodeError::FieldTooLong { limit, .. }) => write!(
                f,
                "an id, event or retry value exceeds the decoder limit of {limit} bytes (its event dropped)"
            ),
            Limit::Decoder(e) => write!(f, "the decoder dropped an event: {e}"),
        }
    }
}

/// One round: a cut, a resume, a classification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Round {
    /// Where the connection was cut.
    pub(crate) cut: CutAt,
    /// What the server did.
    pub(crate) behaviour: Behaviour,
    /// What showed it, in words (the guard's refusal, when it refused).
    pub(crate) evidence: String,
    /// The limit that stopped a read of this round before the response, if one did.
    pub(crate) limit: Option<Limit>,
}

/// How the server numbers its event ids, as observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum IdScheme {
    /// Numbers that start again on each stream (`0, 1, 2` or rmcp's `N/<stream>`).
    PerStreamNumbers,
    /// Numbers from one counter shared by the session's streams.
    SessionNumbers,
    /// Anything else (uuids, `<stream>_<ms>_<random>`, ...).
    Opaque,
    /// No ids at all.
    None,
}

impl IdScheme {
    /// The name `--json` prints.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            IdScheme::PerStreamNumbers => "per-stream numbers",
            IdScheme::SessionNumbers => "session-wide numbers",
            IdScheme::Opaque => "opaque",
            IdScheme::None => "none",
        }
    }
}

/// Which generation of tasks a server offers for `tools/call`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Tasks {
    /// None.
    None,
    /// The experimental tasks of 2025-11-25 (`capabilities.tasks.requests.tools.call`).
    Experimental,
    /// The `io.modelcontextprotocol/tasks` extension of 2026-07-28.
    Extension,
}

impl Tasks {
    /// The name in the JSON report: `none`, `2025-11-25` or `io.modelcontextprotocol/tasks`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Tasks::None => "none",
            Tasks::Experimental => "2025-11-25",
            Tasks::Extension => TASKS_EXTENSION,
        }
    }

    /// The tasks a server's capabilities offer (`stateless`: from `server/discover`).
    pub(crate) fn from_capabilities(capabilities: &Value, stateless: bool) -> Tasks {
        if stateless {
            if capabilities["extensions"].get(TASKS_EXTENSION).is_some() {
                return Tasks::Extension;
            }
        } else if capabilities["tasks"]["requests"]["tools"]
            .get("call")
            .is_some()
        {
            return Tasks::Experimental;
        }
        Tasks::None
    }
}

/// How long the probe waits for a `server/discover` answer before it concludes the server does not
/// speak 2026-07-28.
const STATELESS_CHECK: Duration = Duration::from_secs(10);

/// Whether a task's result can be read again after a read of it was cut (a server offering tasks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TaskReread {
    /// A read cut half-way, then a whole read: the same result, byte for byte.
    Repeatable,
    /// The read after the cut did not give the result back: why.
    NotRepeatable(String),
    /// The call was answered directly, not with a task (the server decides; on 2025-11-25 the
    /// tool's `execution.taskSupport` must allow one).
    NoTask,
}

impl TaskReread {
    /// The name in the JSON report: `repeatable`, `not-repeatable` or `no-task`.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            TaskReread::Repeatable => "repeatable",
            TaskReread::NotRepeatable(_) => "not-repeatable",
            TaskReread::NoTask => "no-task",
        }
    }
}

/// What the probe learnt about the server itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServerInfo {
    /// Every protocol version the server accepted, newest first: 2026-07-28 when it answered
    /// `server/discover`, and the version it chose in `initialize`.
    pub(crate) protocol_versions: Vec<String>,
    /// The tasks it offers for `tools/call` (the newest generation, when both).
    pub(crate) tasks: Tasks,
    /// When it offers tasks: whether a task's result reads again after a cut read (the tool is
    /// called once more, as a task).
    pub(crate) task_reread: Option<TaskReread>,
    /// The protocol version the resumption rounds ran on (the `initialize` one; `None` for a
    /// server that speaks 2026-07-28 only, which has no resumption to probe).
    pub(crate) protocol_version: Option<String>,
    /// Whether it gave an `Mcp-Session-Id`.
    pub(crate) session: bool,
    /// Whether its streams open with a priming event (an id, empty data).
    pub(crate) priming: bool,
    /// The `retry:` it sends, in ms.
    pub(crate) retry_ms: Option<u64>,
    /// How it numbers ids.
    pub(crate) id_scheme: IdScheme,
    /// The tool the probe called.
    pub(crate) tool: String,
}

/// The cut rounds on one protocol version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct VersionRounds {
    /// The version (`2026-07-28`, ...).
    pub(crate) version: String,
    /// Whether it is stateless (2026-07-28: no session, no resumption in the specification).
    pub(crate) stateless: bool,
    /// Whether its streams open with a priming event (an id, empty data).
    pub(crate) priming: bool,
    /// The `retry:` it sends, in ms.
    pub(crate) retry_ms: Option<u64>,
    /// How it numbers ids.
    pub(crate) id_scheme: IdScheme,
    /// One round per cut.
    pub(crate) rounds: Vec<Round>,
}

impl VersionRounds {
    /// Whether every round was resumable.
    pub(crate) fn resumable(&self) -> bool {
        !self.rounds.is_empty() && self.rounds.iter().all(|r| r.behaviour.is_resumable())
    }
}

/// The probe's findings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Report {
    /// The server.
    pub(crate) server: ServerInfo,
    /// One round per cut, on the 2025 revision of [`ServerInfo::protocol_version`] (the one
    /// with resumption): what [`Report::resumable`] judges.
    pub(crate) rounds: Vec<Round>,
    /// The rounds on 2026-07-28, when the server speaks it: a stream with no event ids, as the
    /// specification says, is [`Behaviour::NoIds`]; a server that ids and replays them anyway is
    /// judged as on the 2025 revisions.
    pub(crate) stateless: Option<VersionRounds>,
}

impl Report {
    /// Whether every round was resumable.
    pub(crate) fn resumable(&self) -> bool {
        !self.rounds.is_empty() && self.rounds.iter().all(|r| r.behaviour.is_resumable())
    }

    /// What a client must do with this server, in words.
    pub(crate) fn advice(&self) -> String {
        let stateless = self.stateless.as_ref().map(|v| {
            if v.resumable() {
                "on 2026-07-28 it ids and replays its streams, which the specification does not \
                 provide for; a guarded client resumes them as on the 2025 revisions, other \
                 clients lose the request on a cut"
            } else {
                "on 2026-07-28 a cut loses (cancels) the request: a guarded client re-issues only \
                 calls that are safe to repeat and reports the others as outcome unknown; a result \
                 survives a cut only as a task"
            }
        });
        if self.server.protocol_version.is_none() {
            return format!(
                "2026-07-28 only: {}",
                stateless.unwrap_or("nothing to resume")
            );
        }
        match stateless {
            Some(s) => format!("{}; {s}", self.session_advice()),
            None => self.session_advice(),
        }
    }

    /// The advice for the 2025-era rounds.
    fn session_advice(&self) -> String {
        if self.resumable() {
            return "resume in place with Last-Event-ID; discard a partial event before the replay and drop \
                    exact replays (ssegate's guard does both)"
                .to_owned();
        }
        let worst = self
            .rounds
            .iter()
            .find(|r| !r.behaviour.is_resumable())
            .map(|r| r.behaviour);
        match worst {
            Some(Behaviour::NoIds) => "a cut loses the response: the server sends no event id before its \
                                       result; give events ids (a priming event first) and keep a replay buffer"
                .to_owned(),
            Some(
                Behaviour::Restarted
                | Behaviour::Reordered
                | Behaviour::OtherStream
                | Behaviour::Corrupt,
            ) => "a client that appends the resumed stream corrupts results; a guarded client must refuse \
                  the stream and renegotiate (re-running only idempotent tools); fix the server's replay \
                  store: a resume must continue the stream whose id it names"
                .to_owned(),
            Some(Behaviour::Busy) => "the server answered the resume as busy; a client retries after \
                                      Retry-After: probe again when the server is not loaded"
                .to_owned(),
            Some(Behaviour::OverLimit) => "the probe stopped at one of its limits before the response: \
                                           raise --max-bytes, --max-events or the decoder's limits, or \
                                           the server streams without end"
                .to_owned(),
            Some(Behaviour::TransportError) => "a connection failed while the probe read it; a client \
                                                sees the same cut: check the server and what is in front \
                                                of it, then probe again"
                .to_owned(),
            _ => "a cut loses the response: a client must renegotiate and may re-run only idempotent tools; keep \
                  a replay buffer that holds whole results, shared by all instances"
                .to_owned(),
        }
    }

    /// The report as the `--json` object.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "server": {
                "protocolVersions": self.server.protocol_versions,
                "tasks": self.server.tasks.as_str(),
                "taskReread": self.server.task_reread.as_ref().map(TaskReread::as_str),
                "taskRereadEvidence": match &self.server.task_reread {
                    Some(TaskReread::NotRepeatable(why)) => Some(why.as_str()),
                    _ => None,
                },
                "protocolVersion": self.server.protocol_version,
                "session": self.server.session,
                "priming": self.server.priming,
                "retryMs": self.server.retry_ms,
                "idScheme": self.server.id_scheme.as_str(),
                "tool": self.server.tool,
            },
            "rounds": self.rounds.iter().map(round_json).collect::<Vec<_>>(),
            "versions": self.by_version().map(|v| json!({
                "version": v.version,
                "stateless": v.stateless,
                "priming": v.priming,
                "retryMs": v.retry_ms,
                "idScheme": v.id_scheme.as_str(),
                "rounds": v.rounds.iter().map(round_json).collect::<Vec<_>>(),
                "verdict": if v.resumable() { "resumable" } else { "not-resumable" },
            })).collect::<Vec<_>>(),
            "verdict": if self.resumable() { "resumable" } else { "not-resumable" },
            "advice": self.advice(),
        })
    }

    /// The rounds per protocol version, newest first: 2026-07-28 when the server speaks it, then
    /// the 2025 revision of the resumption rounds.
    pub(crate) fn by_version(&self) -> impl Iterator<Item = VersionRounds> + '_ {
        let session = self
            .server
            .protocol_version
            .as_ref()
            .map(|version| VersionRounds {
                version: version.clone(),
                stateless: false,
                priming: self.server.priming,
                retry_ms: self.server.retry_ms,
                id_scheme: self.server.id_scheme,
                rounds: self.rounds.clone(),
            });
        self.stateless.iter().cloned().chain(session)
    }
}

fn round_json(r: &Round) -> Value {
    json!({
        "cut": r.cut.as_str(),
        "behaviour": r.behaviour.as_str(),
        "evidence": r.evidence,
        "limit": r.limit.as_ref().map(ToString::to_string),
    })
}

/// Why the probe could not run.
#[derive(Debug)]
pub(crate) enum ProbeError {
    /// The client failed (connect, TLS, initialize, tools/list, a status).
    Client(ClientError),
    /// No tool to call: none named, and none takes no required arguments.
    NoTool,
    /// The tool answered `application/json`, or its stream carries no event with data.
    NoStream(String),
    /// The whole probe did not finish within [`ProbeConfig::timeout`].
    Timeout(Duration),
    /// The baseline call's stream reached a limit before its response, so there is nothing
    /// whole to cut.
    Limit {
        /// Bytes read on that connection.
        bytes: u64,
        /// Events read on that connection.
        events: u64,
        /// Which limit.
        limit: Limit,
    },
    /// The baseline call's stream failed while the probe read it.
    Transport {
        /// Bytes read on that connection before the error.
        bytes: u64,
        /// The transport's error.
        source: reqwest::Error,
    },
    /// The guard refused the baseline call's stream itself (a message that is not one complete
    /// JSON value, ...): there is nothing sound to cut.
    Refused(Refusal),
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::Client(e) => e.fmt(f),
            ProbeError::NoTool => write!(
                f,
                "no tool to call: name one with --tool (and --args), none takes no required arguments"
            ),
            ProbeError::NoStream(what) => write!(f, "nothing to cut: {what}"),
            ProbeError::Timeout(after) => write!(
                f,
                "the probe did not finish within {} (--timeout): the server held a stream open \
                 without finishing it, trickled it, or answered too slowly",
                seconds(*after)
            ),
            ProbeError::Limit {
                bytes,
                events,
                limit,
            } => write!(
                f,
                "the baseline call's stream stopped after {bytes} bytes and {events} events \
                 without its response: {limit}"
            ),
            ProbeError::Transport { bytes, source } => write!(
                f,
                "the baseline call's stream failed after {bytes} bytes: {}",
                chain(source)
            ),
            ProbeError::Refused(e) => {
                write!(f, "the guard refuses the baseline call's stream: {e}")
            }
        }
    }
}

impl std::error::Error for ProbeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ProbeError::Client(e) => Some(e),
            ProbeError::Transport { source, .. } => Some(source),
            ProbeError::Refused(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ClientError> for ProbeError {
    fn from(e: ClientError) -> Self {
        ProbeError::Client(e)
    }
}

fn seconds(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// An error and its sources, `: `-separated (reqwest's own text hides the cause).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// The probe's settings. Setters take `&mut self` and chain. The engine's settings (the
/// decoder's limits, the replay timeout, the guard's) are the client's:
/// [`ClientConfig::stream_mut`].
#[derive(Clone, Debug)]
pub(crate) struct ProbeConfig {
    client: ClientConfig,
    tool: Option<String>,
    args: Value,
    timeout: Duration,
    max_bytes: u64,
    max_events: u64,
}

impl Default for ProbeConfig {
    /// The client's defaults, the first tool without required arguments, `{}`, 120 s for the
    /// whole probe, at most 256 MiB and 100 000 events per connection.
    fn default() -> Self {
        ProbeConfig {
            client: ClientConfig::default(),
            tool: None,
            args: json!({}),
            timeout: Duration::from_secs(120),
            max_bytes: 256 << 20,
            max_events: 100_000,
        }
    }
}

impl ProbeConfig {
    /// The client settings (headers, bearer token, roots, and the stream's: the replay timeout
    /// a resumed connection may bring no message for before it counts as held open, the
    /// decoder's limits).
    pub(crate) fn client(&mut self, client: ClientConfig) -> &mut Self {
        self.client = client;
        self
    }

    /// The tool to call.
    pub(crate) fn tool(&mut self, name: impl Into<String>, args: Value) -> &mut Self {
        self.tool = Some(name.into());
        self.args = args;
        self
    }

    /// The deadline of the whole probe, from connecting to the last round (default 120 s); past
    /// it the probe fails with [`ProbeError::Timeout`], however slowly the server trickles.
    pub(crate) fn timeout(&mut self, timeout: Duration) -> &mut Self {
        self.timeout = timeout;
        self
    }

    /// Most body bytes read on one connection (default 256 MiB, room for a tool result of tens of
    /// MiB); a read that reaches it stops and says so.
    pub(crate) fn max_bytes(&mut self, bytes: u64) -> &mut Self {
        self.max_bytes = bytes.max(1);
        self
    }

    /// Most events read on one connection (default 100 000); a read that reaches it stops and says
    /// so.
    pub(crate) fn max_events(&mut self, events: u64) -> &mut Self {
        self.max_events = events.max(1);
        self
    }
}

/// The ids of one connection, as far as the id scheme needs them: whether they all share one
/// stream part and strictly increase, read with the guard's own parser ([`NumberedId`]: a uuid
/// whose last group happens to be digits is opaque), and the first and last of them.
#[derive(Clone, Debug, Default)]
struct IdTrack {
    count: u64,
    numbers: Option<Numbers>,
    broken: bool,
}

#[derive(Clone, Copy, Debug)]
struct Numbers {
    first: NumberedId,
    last: NumberedId,
}

impl IdTrack {
    fn push(&mut self, id: &[u8]) {
        self.count += 1;
        if self.broken {
            return;
        }
        let Some(n) = NumberedId::parse(id) else {
            self.broken = true;
            return;
        };
        match &mut self.numbers {
            None => self.numbers = Some(Numbers { first: n, last: n }),
            Some(s) if s.last.same_stream(&n) && n.number() > s.last.number() => s.last = n,
            Some(_) => self.broken = true,
        }
    }

    fn numbers(&self) -> Option<&Numbers> {
        self.numbers.as_ref().filter(|_| !self.broken)
    }
}

fn id_scheme(first: &IdTrack, second: &IdTrack) -> IdScheme {
    if first.count == 0 {
        return IdScheme::None;
    }
    match (first.numbers(), second.numbers()) {
        // A second stream under the same stream part that starts above the first one's last id
        // shares its counter.
        (Some(a), Some(b))
            if a.last.same_stream(&b.first) && b.first.number() > a.last.number() =>
        {
            IdScheme::SessionNumbers
        }
        (Some(_), Some(_)) => IdScheme::PerStreamNumbers,
        (Some(_), None) if second.count == 0 => IdScheme::PerStreamNumbers,
        _ => IdScheme::Opaque,
    }
}

/// An id for the evidence: lossy UTF-8, quoted, at most 64 characters of it.
fn show(id: Option<&[u8]>) -> String {
    const MAX: usize = 64;
    let Some(id) = id else {
        return "(none)".to_owned();
    };
    let text = String::from_utf8_lossy(id);
    if text.chars().count() <= MAX {
        return format!("{text:?}");
    }
    let head: String = text.chars().take(MAX).collect();
    format!("{head:?}... ({} bytes)", id.len())
}

/// What one connection of the stream brought. Counters and positions only: no event data, no
/// slice of a transport buffer.
#[derive(Clone, Debug, Default)]
struct Tally {
    /// Body bytes fed.
    bytes: u64,
    /// Events dispatched or dropped by the decoder.
    events: u64,
    /// Events with data.
    messages: u64,
    /// Events with an id and empty data.
    primings: u64,
    /// Whether the first event was a priming event.
    first_priming: Option<bool>,
    /// The decoder's offset after the last event (where the next one starts).
    last_end: u64,
    /// The largest event with data: its data bytes and where it starts and ends in the body.
    largest: Option<(usize, u64, u64)>,
    ids: IdTrack,
    /// The first event the decoder dropped over a limit.
    dropped: Option<DecodeError>,
}

/// Which connection of a round the stream is reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The call's own stream, up to the cut.
    Before,
    /// The resumed connection.
    After,
}

/// What the guard made of the resumed connection up to its first new message.
#[derive(Clone, Debug, Default)]
struct Resumed {
    /// The `Last-Event-ID` of the resume (the guard's cursor at the cut).
    cursor: Option<Bytes>,
    /// The interrupted message's id, when the cut came inside an event with data and an id.
    interrupted: Option<Bytes>,
    /// Messages re-sent unchanged before the first new one (exact replays, identical responses).
    resent: u64,
    /// The id of the first of them.
    first_resent: Option<Option<Bytes>>,
    /// The id of the first new message delivered (`Some(None)`: it had no id).
    first_new: Option<Option<Bytes>>,
    /// The stream's reconnect delay at the cut: the server's `retry:` or `Retry-After`, else the
    /// stream's default, raised to its floor and clamped.
    delay: Duration,
}

/// How the last read of a round ended.
#[derive(Debug)]
enum End {
    /// The body ended cleanly.
    Eof,
    /// The body failed (or the resume request did, before a response head).
    Error(String),
    /// No message within the replay timeout.
    Silent(Duration),
    /// A limit stopped the read.
    Limit(Limit),
    /// The guard decided (refused, or the response arrived): nothing more to read.
    Decided,
}

/// One call's stream in the engine every client of ssegate runs: a [`ResumableStream`] (decoder,
/// gate and guard) expecting the call's response, and what the probe keeps of each connection.
/// The probe does the IO and keeps its own clock: it cuts where it wants, resumes at once, and
/// waits for a message as long as the stream's replay timeout. The sans-IO core of the probe and
/// of [`classify`].
#[derive(Debug)]
struct Watch {
    stream: ResumableStream,
    request: RpcId,
    phase: Phase,
    conn: Tally,
    refusal: Option<(Phase, Refusal)>,
    answered: bool,
    resumed: Resumed,
    /// Said first in the round's evidence (the call's stream ended before the cut point).
    note: Option<String>,
    /// The instant the driver last told the stream about (bytes, a cut, a reconnect): the probe
    /// hands the stream the time of its last message, so the stream's replay timeout runs from
    /// there, as the probe's does.
    now: std::time::Instant,
}

impl Watch {
    fn new(request: RpcId, config: &StreamConfig) -> Watch {
        let mut config = config.clone();
        // The probe judges one reconnect answer: a busy server is reported, not retried.
        config.max_reconnect_attempts(1);
        let mut stream = config.build();
        stream.expect_response(request.clone());
        // The probe resumes even when the response arrived before its cut.
        stream.keep_open(true);
        stream.observe_events(true);
        Watch {
            stream,
            request,
            phase: Phase::Before,
            conn: Tally::default(),
            refusal: None,
            answered: false,
            resumed: Resumed::default(),
            note: None,
            now: std::time::Instant::now(),
        }
    }

    /// Whether reading on is pointless: the guard refused, or (with `answer`) the response came
    /// or the decoder dropped an event over its limits (the probe cannot judge past a lost event).
    fn decided(&self, answer: bool) -> bool {
        self.refusal.is_some() || (answer && (self.answered || self.conn.dropped.is_some()))
    }

    fn refuse(&mut self, e: Refusal) {
        self.refusal.get_or_insert((self.phase, e));
    }

    fn fail(&mut self, failure: Failure) {
        match failure.refusal() {
            Some(e) => self.refuse(e.clone()),
            // The stream's own limits (resumes, reconnect attempts) are not the server's doing;
            // the probe resumes once per round, so they do not come up.
            None => debug!(%failure, "the stream stopped"),
        }
    }

    /// A body chunk: fed to the stream, whose outputs are taken at most `max_events` events per
    /// connection, until the guard refuses.
    fn feed(&mut self, chunk: Bytes, max_events: u64) {
        self.conn.bytes += chunk.len() as u64;
        self.stream.feed(chunk, self.now);
        self.drain(max_events);
    }

    /// Takes the stream's outputs about events; a connection end's outputs are taken by the
    /// caller that reported it.
    fn drain(&mut self, max_events: u64) {
        while self.conn.events < max_events && self.refusal.is_none() {
            let Some(output) = self.stream.poll() else {
                break;
            };
            self.on_output(output);
        }
    }

    fn on_output(&mut self, output: Output) {
        let after = self.phase == Phase::After;
        let fresh = after && self.resumed.first_new.is_none();
        match output {
            Output::Deliver(d) => {
                self.tally();
                if fresh {
                    self.resumed.first_new = Some(d.event_id.clone());
                }
                if d.rpc.kind == RpcKind::Response && d.rpc.id.as_ref() == Some(&self.request) {
                    self.answered = true;
                }
            }
            Output::Skip(skip) => {
                let had_data = self.tally();
                match skip {
                    Skip::ExactReplay { id } if fresh && had_data => {
                        self.resumed.resent += 1;
                        self.resumed.first_resent.get_or_insert(Some(id));
                    }
                    Skip::DuplicateResponse { .. } if fresh => {
                        self.resumed.resent += 1;
                        self.resumed.first_resent.get_or_insert(None);
                    }
                    _ => {}
                }
            }
            Output::Cursor(_) => {
                self.tally();
            }
            Output::Dropped(dropped) => {
                self.conn.events += 1;
                self.conn.dropped.get_or_insert(dropped.error);
            }
            Output::Failed(failure) => {
                // A refusal about an event counts it; one at a connection end does not.
                if self.stream.last_event().is_some() {
                    self.tally();
                }
                self.fail(failure);
            }
            _ => {}
        }
    }

    /// Counts the event the stream just decided on; returns whether it had data.
    fn tally(&mut self) -> bool {
        let Some(event) = self.stream.last_event() else {
            return false;
        };
        let conn = &mut self.conn;
        conn.events += 1;
        let len = event.bytes;
        if let Some(id) = &event.id {
            conn.ids.push(id);
        }
        let priming = event.id.is_some() && len == 0;
        conn.first_priming.get_or_insert(priming);
        conn.primings += u64::from(priming);
        conn.messages += u64::from(len > 0);
        let (start, end) = (conn.last_end, event.end);
        conn.last_end = end;
        if len > 0 && conn.largest.is_none_or(|(l, _, _)| len > l) {
            conn.largest = Some((len, start, end));
        }
        len > 0
    }

    /// The connection ended (`cause`) as the probe stopped reading it: the stream decides
    /// whether and from where to resume. Returns the `Last-Event-ID` of the reconnect the stream
    /// asks for, if it asks for one.
    fn end_connection(&mut self, cause: EndCause) -> Option<Option<Bytes>> {
        self.stream.connection_ended(cause, self.now);
        loop {
            match self.stream.poll() {
                Some(Output::Disconnected(resume)) => {
                    if self.phase == Phase::Before {
                        self.resumed.interrupted = resume
                            .discarded
                            .filter(|p| p.data_len > 0)
                            .and_then(|p| p.id);
                        self.resumed.cursor = resume.last_event_id;
                        self.resumed.delay = resume.delay;
                    }
                }
                Some(Output::Reconnect(r)) => return Some(r.last_event_id),
                Some(Output::Finished) => return None,
                Some(output) => {
                    let failed = matches!(output, Output::Failed(_));
                    self.on_output(output);
                    if failed {
                        return None;
                    }
                }
                None => {
                    // The stream waits before it reconnects; the probe does not.
                    let at = self.stream.poll_timeout()?;
                    self.now = self.now.max(at);
                    self.stream.handle_timeout(self.now);
                }
            }
        }
    }

    /// The probe dropped the call's connection: the stream decides whether and from where to
    /// resume. Returns the `Last-Event-ID` to send, if there is one.
    fn cut(&mut self) -> Option<Bytes> {
        let cursor = self.end_connection(EndCause::Error).flatten();
        if self.refusal.is_none() {
            self.phase = Phase::After;
            self.conn = Tally::default();
        }
        cursor
    }

    /// The resume's response head. Returns whether to read its body.
    fn reconnect(&mut self, response: &ReconnectResponse) -> bool {
        if self.refusal.is_some() {
            return false;
        }
        match self.stream.reconnect_response(response, self.now) {
            Answer::Read => true,
            Answer::Drop => {
                self.drain(u64::MAX);
                false
            }
        }
    }

    /// A message arrived at `at` (the probe's clock): the stream's replay timeout runs from there.
    fn message_at(&mut self, at: std::time::Instant) {
        self.now = self.now.max(at);
    }

    /// The server's `retry:` field, in ms: the stream reads it at the connection's end.
    fn retry_ms(&mut self) -> Option<u64> {
        if self.stream.is_open() {
            let _ = self.end_connection(EndCause::Eof);
        }
        self.stream.server_retry().map(|d| d.as_millis() as u64)
    }

    /// The round's verdict once its last read ended.
    fn finish(mut self, cut: CutAt, end: End) -> Round {
        if self.refusal.is_none() && !self.answered {
            match &end {
                End::Eof => {
                    let _ = self.end_connection(EndCause::Eof);
                }
                End::Silent(waited) => {
                    let at = self.now + *waited;
                    self.stream.handle_timeout(at);
                    self.drain(u64::MAX);
                }
                _ => {}
            }
        }
        let conn = &self.conn;
        let mut notes: Vec<String> = self.note.iter().cloned().collect();
        if self.phase == Phase::After && conn.primings > 0 && self.refusal.is_none() {
            notes.push(format!("{} priming event(s)", conn.primings));
        }
        if let Some(e) = &conn.dropped {
            notes.push(Limit::Decoder(e.clone()).to_string());
        }
        let round = |behaviour, evidence: String, limit| Round {
            cut,
            behaviour,
            evidence: if notes.is_empty() {
                evidence
            } else {
                format!("{}; {evidence}", notes.join("; "))
            },
            limit,
        };
        if let Some((phase, e)) = &self.refusal {
            let when = match phase {
                Phase::Before => "before the cut",
                Phase::After => "on the resume",
            };
            return round(refused(&e.kind), format!("{when}, guard: {}", e.kind), None);
        }
        if self.answered {
            let (behaviour, evidence) = self.resumed.describe();
            return round(behaviour, evidence, None);
        }
        let seen = format!(
            "{} bytes, {} event(s), {} with data",
            conn.bytes, conn.events, conn.messages
        );
        match end {
            End::Error(e) => round(
                Behaviour::TransportError,
                format!("the resumed connection failed after {seen}: {e}"),
                None,
            ),
            End::Limit(limit) => round(
                Behaviour::OverLimit,
                format!(
                    "the resumed connection stopped after {seen}, before the response: {limit}"
                ),
                Some(limit),
            ),
            _ if conn.dropped.is_some() => {
                let limit = conn.dropped.clone().map(Limit::Decoder);
                round(
                    Behaviour::OverLimit,
                    format!("200 and {seen}, but not the response"),
                    limit,
                )
            }
            End::Silent(waited) => round(
                Behaviour::HeldOpen,
                format!(
                    "200 and {seen}, but no response and no message within {} ms",
                    waited.as_millis()
                ),
                None,
            ),
            End::Eof | End::Decided => round(
                Behaviour::Empty,
                format!("200 and {seen}, then the stream ended without the response"),
                None,
            ),
        }
    }
}

impl Resumed {
    /// What a server whose resumed stream the guard accepted did, in words.
    fn describe(&self) -> (Behaviour, String) {
        let cursor = show(self.cursor.as_deref());
        if self.resent > 0 {
            let first = self.first_resent.clone().flatten();
            if first.is_some() && first == self.cursor {
                return (
                    Behaviour::ResendsCursor,
                    format!(
                        "re-sent the Last-Event-ID event {cursor} first, unchanged, then went on"
                    ),
                );
            }
            return (
                Behaviour::ResendsCursor,
                format!(
                    "re-sent {} already-received event(s) first (from {}), unchanged, then went on",
                    self.resent,
                    show(first.as_deref())
                ),
            );
        }
        match &self.first_new {
            Some(id) if id.is_some() && *id == self.interrupted => (
                Behaviour::ReplaysEvent,
                format!(
                    "replayed the interrupted event {} whole",
                    show(id.as_deref())
                ),
            ),
            Some(id) => (
                Behaviour::Continues,
                format!(
                    "went on after {cursor} with the new event {}",
                    show(id.as_deref())
                ),
            ),
            None => (
                Behaviour::Continues,
                "the response had arrived before the cut; the resume re-sent nothing".to_owned(),
            ),
        }
    }
}

/// The behaviour a guard refusal shows.
fn refused(kind: &RefusalKind) -> Behaviour {
    match kind {
        RefusalKind::SessionExpired => Behaviour::Gone,
        RefusalKind::ReplayUnavailable { .. } | RefusalKind::UnexpectedResponse { .. } => {
            Behaviour::Conflict
        }
        RefusalKind::Busy { .. } => Behaviour::Busy,
        RefusalKind::ReplayMissed { waited: None } => Behaviour::Empty,
        RefusalKind::ReplayMissed { waited: Some(_) } => Behaviour::HeldOpen,
        RefusalKind::Unresumable { .. } => Behaviour::NoIds,
        RefusalKind::StreamRestarted {
            why: Restart::IdReused | Restart::MessageRepeated,
            ..
        } => Behaviour::Restarted,
        RefusalKind::StreamRestarted { .. } | RefusalKind::DuplicateResponse { .. } => {
            Behaviour::OtherStream
        }
        RefusalKind::Gap { .. } => Behaviour::Reordered,
        RefusalKind::DecodeLimit { .. } => Behaviour::OverLimit,
        _ => Behaviour::Corrupt,
    }
}

/// Classifies one round from captured bytes, as the live probe does: `before` is what the call's
/// stream brought up to the cut, `response` the resume's status and headers, `after` its body (read
/// only when the guard accepts the response head), `request` the call's JSON-RPC id.
///
/// A [`Guard`] that expects `request`'s response is fed the events of `before`, the disconnect,
/// `response` and the events of `after`; the round is resumable
/// ([`Behaviour::is_resumable`]) exactly when the guard refuses nothing and the response is
/// delivered, as `ssegate check --request-id` judges the same two connections. A refusal maps to
/// a behaviour:
///
/// | the guard's refusal | behaviour |
/// | --- | --- |
/// | `StreamRestarted(IdReused / MessageRepeated)` | [`Behaviour::Restarted`] |
/// | `StreamRestarted(OtherStream / Backwards)`, `DuplicateResponse` | [`Behaviour::OtherStream`] |
/// | `Gap` | [`Behaviour::Reordered`] |
/// | `IncompleteMessage`, `TrailingBytes`, `InvalidMessage` | [`Behaviour::Corrupt`] |
/// | `ReplayMissed` (ended / silent) | [`Behaviour::Empty`] / [`Behaviour::HeldOpen`] |
/// | `Unresumable` | [`Behaviour::NoIds`] |
/// | `SessionExpired` | [`Behaviour::Gone`] |
/// | `ReplayUnavailable`, `UnexpectedResponse` | [`Behaviour::Conflict`] |
/// | `Busy` | [`Behaviour::Busy`] |
///
/// Without a refusal and without the response, the round is [`Behaviour::Empty`] (or
/// [`Behaviour::OverLimit`] when the decoder dropped an event). With the response, the guard's
/// decisions on the resumed connection say how the server went on: events re-sent unchanged first
/// ([`Behaviour::ResendsCursor`]), the interrupted event whole ([`Behaviour::ReplaysEvent`]), or
/// new events ([`Behaviour::Continues`]).
#[cfg(test)]
pub(crate) fn classify(
    cut: CutAt,
    before: &[u8],
    response: &ReconnectResponse,
    after: &[u8],
    request: RpcId,
) -> Round {
    let mut watch = Watch::new(request, &StreamConfig::default());
    watch.feed(Bytes::copy_from_slice(before), u64::MAX);
    let _ = watch.cut();
    if watch.reconnect(response) {
        watch.feed(Bytes::copy_from_slice(after), u64::MAX);
    }
    watch.finish(cut, End::Eof)
}

#[derive(Clone, Copy, Debug)]
struct Limits {
    max_bytes: u64,
    max_events: u64,
}

/// Why a read stopped.
#[derive(Debug)]
enum Stop {
    /// The body ended cleanly.
    Eof,
    /// The body failed.
    Error(reqwest::Error),
    /// The cut point was reached.
    Cut,
    /// The guard refused, or the response came (when asked to stop there).
    Decided,
    /// A limit.
    Limit(Limit),
    /// No message within the replay timeout.
    Silent(Duration),
}

/// Reads `body` into `watch` until the cut point `until` (a body byte count), the guard's decision
/// (its refusal, or with `answer` the response), a limit, the end, an error or, with `replay`, no
/// message for that long.
async fn pump<S>(
    body: &mut S,
    watch: &mut Watch,
    limits: Limits,
    until: Option<u64>,
    replay: Option<Duration>,
    answer: bool,
) -> Stop
where
    S: Stream<Item = reqwest::Result<Bytes>> + Unpin,
{
    let mut last_message = Instant::now();
    loop {
        if watch.decided(answer) {
            return Stop::Decided;
        }
        let bytes = watch.conn.bytes;
        if until.is_some_and(|at| bytes >= at) {
            return Stop::Cut;
        }
        if bytes >= limits.max_bytes {
            return Stop::Limit(Limit::Bytes(limits.max_bytes));
        }
        if watch.conn.events >= limits.max_events {
            return Stop::Limit(Limit::Events(limits.max_events));
        }
        let next = match replay {
            Some(t) => match tokio::time::timeout_at(last_message + t, body.next()).await {
                Ok(next) => next,
                Err(_) => return Stop::Silent(last_message.elapsed()),
            },
            None => body.next().await,
        };
        let mut chunk = match next {
            None => return Stop::Eof,
            Some(Err(e)) => return Stop::Error(e),
            Some(Ok(chunk)) => chunk,
        };
        let room = until.unwrap_or(u64::MAX).min(limits.max_bytes) - bytes;
        if chunk.len() as u64 > room {
            chunk.truncate(room as usize);
        }
        let messages = watch.conn.messages;
        watch.feed(chunk, limits.max_events);
        if watch.conn.messages > messages {
            last_message = Instant::now();
            watch.message_at(last_message.into_std());
        }
    }
}

/// Runs the probe against `url`, within [`ProbeConfig::timeout`].
pub(crate) async fn probe(url: &str, config: &ProbeConfig) -> Result<Report, ProbeError> {
    match tokio::time::timeout(config.timeout, run(url, config)).await {
        Ok(result) => result,
        Err(_) => Err(ProbeError::Timeout(config.timeout)),
    }
}

async fn run(url: &str, config: &ProbeConfig) -> Result<Report, ProbeError> {
    let limits = Limits {
        max_bytes: config.max_bytes,
        max_events: config.max_events,
    };
    let mut client_config = config.client.clone();
    client_config.reuse_connections(false);
    let setting = client_config.protocol_ref().clone();
    let pinned_stateless =
        matches!(&setting, Protocol::Only(v) if STATELESS_VERSIONS.contains(&v.as_str()));
    // Which eras the server speaks: 2026-07-28 (stateless) first, under a short deadline so a
    // broken server cannot spend the probe's.
    let mut versions = Vec::new();
    let mut tasks = Tasks::None;
    let mut stateless_client = None;
    let mut stateless_error = None;
    if matches!(setting, Protocol::Auto) || pinned_stateless {
        let mut stateless = client_config.clone();
        stateless
            .protocol_version(PROTOCOL_2026_07_28)
            .call_timeout(Some(STATELESS_CHECK.min(config.timeout)));
        match Client::connect(url, stateless).await {
            Ok(c) => {
                versions.extend(c.protocol_version());
                if let Some(caps) = c.server_capabilities() {
                    tasks = Tasks::from_capabilities(&caps, true);
                }
                stateless_client = Some(c);
            }
            Err(e) => {
                debug!(error = %e, "no 2026-07-28");
                stateless_error = Some(e);
            }
        }
    }
    // The resumption rounds of the 2025 revisions run on an `initialize` session.
    let mut session_client = None;
    if !pinned_stateless {
        if matches!(setting, Protocol::Auto) {
            client_config.protocol_version(PROTOCOL_VERSION);
        }
        match Client::connect(url, client_config).await {
            Ok(c) => {
                versions.extend(c.protocol_version());
                if tasks == Tasks::None
                    && let Some(caps) = c.server_capabilities()
                {
                    tasks = Tasks::from_capabilities(&caps, false);
                }
                session_client = Some(c);
            }
            // A 2026-07-28-only server: no `initialize` session.
            Err(e) if stateless_client.is_some() => debug!(error = %e, "no 2025-era session"),
            Err(e) => return Err(e.into()),
        }
    }
    let Some(first) = session_client.as_ref().or(stateless_client.as_ref()) else {
        return Err(stateless_error.map_or(ProbeError::NoTool, ProbeError::Client));
    };
    let tool = match &config.tool {
        Some(t) => t.clone(),
        None => first_tool(first).await?,
    };
    let mut info = ServerInfo {
        protocol_versions: versions,
        tasks,
        task_reread: None,
        protocol_version: None,
        session: false,
        priming: false,
        retry_ms: None,
        id_scheme: IdScheme::None,
        tool: tool.clone(),
    };
    // A task server: does a task's result read again after a cut read?
    let task_client = match tasks {
        Tasks::Extension => stateless_client.as_ref(),
        Tasks::Experimental => session_client.as_ref(),
        Tasks::None => None,
    };
    if let Some(client) = task_client {
        info.task_reread = Some(task_reread(client, &tool, &config.args).await);
    }
    let mut rounds = Vec::new();
    if let Some(client) = session_client {
        let path = cut_rounds(&client, &tool, config, limits).await?;
        info.protocol_version = client.protocol_version();
        info.session = client.session_id().is_some();
        info.priming = path.priming;
        info.retry_ms = path.retry_ms;
        info.id_scheme = path.id_scheme;
        rounds = path.rounds;
        let _ = client.close().await;
    }
    let stateless = match stateless_client {
        Some(client) => {
            if config.tool.is_none() {
                // The tool's headers (`Mcp-Param-*`) come from the 2026-07-28 tool list.
                client.list_tools().await?;
            }
            Some(cut_rounds(&client, &tool, config, limits).await?)
        }
        None => None,
    };
    Ok(Report {
        server: info,
        rounds,
        stateless,
    })
}

/// Calls `tool` as a task, reads its result again with the read cut half-way (the answer's first
/// half, then the connection dropped), then reads it whole, and compares with the first result.
async fn task_reread(client: &Client, tool: &str, args: &Value) -> TaskReread {
    let mut options = CallOptions::default();
    options.tasks(TaskMode::Require).retry(Retry::Never);
    let params = json!({"name": tool, "arguments": args});
    let first = match client.call_with("tools/call", params, &options).await {
        Ok(r) => r,
        Err(ClientError::Task(e)) if e.kind == TaskErrorKind::Unsupported => {
            return TaskReread::NoTask;
        }
        Err(e) => return TaskReread::NotRepeatable(format!("the call as a task failed: {e}")),
    };
    let Some(task) = first.outcome.task.clone() else {
        return TaskReread::NoTask;
    };
    let (method, mut params) = match task.generation() {
        TaskGeneration::Extension => (
            "tasks/get",
            json!({"_meta": {"io.modelcontextprotocol/clientCapabilities":
                {"extensions": {TASKS_EXTENSION: {}}}}}),
        ),
        _ => ("tasks/result", json!({})),
    };
    params["taskId"] = json!(task.id());
    let read = json!({"jsonrpc": "2.0", "id": 1_000_100, "method": method, "params": params});
    match raw_post(client, &read).await {
        Ok(res) => {
            let half = first.message.len() / 2;
            let mut body = pin!(res.bytes_stream());
            let mut got = 0;
            while got < half {
                match body.next().await {
                    Some(Ok(chunk)) => got += chunk.len(),
                    _ => break,
                }
            }
            debug!(got, "task read cut");
        }
        Err(e) => return TaskReread::NotRepeatable(format!("the read to cut failed: {e}")),
    }
    match client.resume_task(&task, &CallOptions::default()).await {
        Ok(again) if result_bytes(&again.message) == result_bytes(&first.message) => {
            TaskReread::Repeatable
        }
        Ok(again) => TaskReread::NotRepeatable(format!(
            "read again after a cut, the result differs ({} bytes, then {})",
            first.message.len(),
            again.message.len()
        )),
        Err(e) => TaskReread::NotRepeatable(format!("read again after a cut: {e}")),
    }
}

/// A response's bytes after its id: `,"result":...`.
fn result_bytes(message: &ssegate::message::Message) -> Bytes {
    let bytes = message.to_bytes();
    match memchr::memmem::find(&bytes, b",\"result\":") {
        Some(at) => bytes.slice(at..),
        None => bytes,
    }
}

/// The first tool that takes no required arguments.
async fn first_tool(client: &Client) -> Result<String, ProbeError> {
    let tools = client.list_tools().await?;
    tools
        .iter()
        .find(|t| {
            t["inputSchema"]["required"]
                .as_array()
                .is_none_or(|r| r.is_empty())
        })
        .and_then(|t| t["name"].as_str())
        .map(str::to_owned)
        .ok_or(ProbeError::NoTool)
}

/// The cut rounds on `client`'s protocol version: a baseline call to find where to cut, then one
/// call cut in the middle of its largest event and one at the boundary before it, each resumed
/// and judged.
async fn cut_rounds(
    client: &Client,
    tool: &str,
    config: &ProbeConfig,
    limits: Limits,
) -> Result<VersionRounds, ProbeError> {
    let version = client.protocol_version().unwrap_or_default();
    let stateless = client.is_stateless();
    let call = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": config.args}})
    };
    // The baseline: the whole stream, to find where to cut.
    let res = raw_post(client, &call(1_000_001)).await?;
    if stateless && !is_sse(&res) {
        // On 2026-07-28 a JSON answer is as the specification allows: nothing to resume.
        let content_type = res
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        return Ok(VersionRounds {
            version,
            stateless,
            priming: false,
            retry_ms: None,
            id_scheme: IdScheme::None,
            rounds: vec![Round {
                cut: CutAt::MidEvent,
                behaviour: Behaviour::NoIds,
                evidence: format!(
                    "the call is answered with a whole body ({}), not an event stream: a cut \
                     loses the request",
                    content_type.as_deref().unwrap_or("no content type")
                ),
                limit: None,
            }],
        });
    }
    let res = expect_sse(res, tool)?;
    let stream = config.client.stream_ref();
    let mut base = Watch::new(RpcId::Number(1_000_001), stream);
    let stop = pump(
        &mut pin!(res.bytes_stream()),
        &mut base,
        limits,
        None,
        None,
        true,
    )
    .await;
    if let Some((_, e)) = base.refusal.take() {
        return Err(ProbeError::Refused(e));
    }
    if !base.answered {
        let (bytes, events) = (base.conn.bytes, base.conn.events);
        let limit = match stop {
            Stop::Error(source) => return Err(ProbeError::Transport { bytes, source }),
            _ if base.conn.dropped.is_some() => base.conn.dropped.clone().map(Limit::Decoder),
            Stop::Limit(limit) => Some(limit),
            _ => None,
        };
        if let Some(limit) = limit {
            return Err(ProbeError::Limit {
                bytes,
                events,
                limit,
            });
        }
    }
    // Cut in the middle of the largest event with data and at the boundary before it; a stream
    // with no event with data (a priming event, then the end) is cut once, after its last event.
    let cuts = match base.conn.largest {
        Some((_, start, end)) => vec![
            (CutAt::MidEvent, start + (end - start) / 2),
            (CutAt::Boundary, start),
        ],
        None if base.conn.events > 0 && !base.answered => {
            vec![(CutAt::Boundary, base.conn.last_end)]
        }
        None => {
            return Err(ProbeError::NoStream(format!(
                "the stream of {tool} has no event with data"
            )));
        }
    };
    let mut rounds = Vec::new();
    let mut second_ids = IdTrack::default();
    for (n, (cut, at)) in cuts.into_iter().enumerate() {
        let id = 1_000_002 + n as i64;
        let res = expect_sse(raw_post(client, &call(id)).await?, tool)?;
        let mut watch = Watch::new(RpcId::Number(id), stream);
        // The call's body is dropped with this statement, before any resume: the cut closes the
        // call's connection, as a client's cut does. A server still holding the request's stream
        // open on it answers a resume differently (the Python SDK ends the resume with no event).
        let stop = pump(
            &mut pin!(res.bytes_stream()),
            &mut watch,
            limits,
            Some(at),
            None,
            false,
        )
        .await;
        if n == 0 {
            second_ids = watch.conn.ids.clone();
        }
        let round = match stop {
            Stop::Cut => resume_round(client, watch, cut, limits).await,
            // The server ended its stream before the cut point: a cut all the same.
            Stop::Eof => {
                watch.note = Some(format!(
                    "the call's stream ended after {} bytes, before the cut at byte {at}",
                    watch.conn.bytes
                ));
                resume_round(client, watch, cut, limits).await
            }
            Stop::Decided => watch.finish(cut, End::Decided),
            Stop::Error(e) => early(
                cut,
                &watch,
                at,
                Behaviour::TransportError,
                "failed",
                chain(&e),
                None,
            ),
            Stop::Limit(limit) => early(
                cut,
                &watch,
                at,
                Behaviour::OverLimit,
                "stopped",
                limit.to_string(),
                Some(limit),
            ),
            Stop::Silent(_) => unreachable!("no replay timeout before the cut"),
        };
        rounds.push(round);
    }
    Ok(VersionRounds {
        version,
        stateless,
        priming: base.conn.first_priming == Some(true),
        retry_ms: base.retry_ms(),
        id_scheme: id_scheme(&base.conn.ids, &second_ids),
        rounds,
    })
}

/// A round whose call stream stopped before the cut point.
fn early(
    cut: CutAt,
    watch: &Watch,
    at: u64,
    behaviour: Behaviour,
    what: &str,
    detail: String,
    limit: Option<Limit>,
) -> Round {
    Round {
        cut,
        behaviour,
        evidence: format!(
            "the call's stream {what} after {} bytes and {} event(s), before the cut at byte {at}: \
             {detail}",
            watch.conn.bytes, watch.conn.events
        ),
        limit,
    }
}

/// The call's answer, which must be an event stream.
fn expect_sse(res: reqwest::Response, tool: &str) -> Result<reqwest::Response, ProbeError> {
    if is_sse(&res) {
        Ok(res)
    } else {
        Err(ProbeError::NoStream(format!(
            "tools/call {tool} answered {:?}, not an event stream",
            res.headers().get(header::CONTENT_TYPE)
        )))
    }
}

fn is_sse(res: &reqwest::Response) -> bool {
    res.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
}

/// Cuts the round's stream where the probe stopped reading (the caller has dropped its
/// connection), resumes, and judges the answer.
///
/// The resume waits as a client's does, never in the instant of the cut: the stream's reconnect
/// delay (the server's `retry:` or `Retry-After`, else the default, raised to the jittered floor
/// of [`StreamConfig::min_delay`], 250 ms by default), capped at the replay timeout. A server
/// learns of the cut only when it reads the closed connection: a resume that overtakes that finds
/// the request's stream still attached, and the Python SDK (under FastMCP too) then ends the
/// resume with no event.
async fn resume_round(client: &Client, mut watch: Watch, cut: CutAt, limits: Limits) -> Round {
    let replay_timeout = watch.stream.replay_timeout();
    let Some(cursor) = watch.cut() else {
        return watch.finish(cut, End::Decided);
    };
    tokio::time::sleep(watch.resumed.delay.min(replay_timeout)).await;
    let res = match client.get_raw(&cursor).await {
        Ok(res) => res,
        Err(e) => {
            let why = format!("the resume request failed: {}", chain(&e));
            return watch.finish(cut, End::Error(why));
        }
    };
    let header = |name| res.headers().get(name).map(HeaderValue::as_bytes);
    let response = ReconnectResponse::from_raw(
        res.status().as_u16(),
        header(header::RETRY_AFTER),
        header(header::CONTENT_TYPE),
        SystemTime::now(),
    );
    if !watch.reconnect(&response) {
        return watch.finish(cut, End::Decided);
    }
    let stop = pump(
        &mut pin!(res.bytes_stream()),
        &mut watch,
        limits,
        None,
        Some(replay_timeout),
        true,
    )
    .await;
    let end = match stop {
        Stop::Eof => End::Eof,
        Stop::Error(e) => End::Error(chain(&e)),
        Stop::Limit(limit) => End::Limit(limit),
        Stop::Silent(waited) => End::Silent(waited),
        Stop::Decided | Stop::Cut => End::Decided,
    };
    watch.finish(cut, end)
}

/// POSTs a raw JSON-RPC request on the session; the probe reads the answer itself.
async fn raw_post(client: &Client, body: &Value) -> Result<reqwest::Response, ClientError> {
    let res = client.post_raw(body).await?;
    if res.status().is_success() {
        Ok(res)
    } else {
        Err(ClientError::Status {
            during: "probe call",
            status: res.status().as_u16(),
            body: String::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::check::capture::{self as check, Connection};

    fn scheme(a: &[&str], b: &[&str]) -> IdScheme {
        let track = |ids: &[&str]| {
            let mut t = IdTrack::default();
            for id in ids {
                t.push(id.as_bytes());
            }
            t
        };
        id_scheme(&track(a), &track(b))
    }

    #[test]
    fn id_schemes_are_read_from_two_streams() {
        assert_eq!(
            scheme(&["0", "1", "2"], &["0", "1"]),
            IdScheme::PerStreamNumbers
        );
        assert_eq!(
            scheme(&["0/7", "1/7"], &["0/8", "1/8"]),
            IdScheme::PerStreamNumbers
        );
        assert_eq!(
            scheme(&["a-0", "a-1"], &["b-0"]),
            IdScheme::PerStreamNumbers
        );
        // All digits on both sides of the dash is a Redis stream id (`<ms>-<seq>`), one counter,
        // as the guard reads it.
        assert_eq!(scheme(&["2-0", "2-1"], &["3-0"]), IdScheme::SessionNumbers);
        assert_eq!(
            scheme(&["1", "3", "5"], &["8", "10"]),
            IdScheme::SessionNumbers
        );
        assert_eq!(
            scheme(
                &[
                    "0b1c2d3e-4f50-4617-8a9b-123456789012",
                    "7c1d2d3e-4f50-4617-8a9b-223456789012"
                ],
                &["9b1c2d3e-4f50-4617-8a9b-323456789012"]
            ),
            IdScheme::Opaque,
            "uuids whose last group is digits are not numbered ids"
        );
        assert_eq!(
            scheme(&["s_1700000000_ab", "s_1700000001_cd"], &[]),
            IdScheme::Opaque
        );
        assert_eq!(scheme(&[], &[]), IdScheme::None);
    }

    /// Whether `ssegate check --request-id 7` (a `ResumableStream` over the connections) accepts
    /// the capture: no refusal, and the response delivered.
    fn guard_accepts(connections: &[Connection]) -> bool {
        let summary = check::check(
            connections,
            &StreamConfig::default(),
            &[RpcId::Number(7)],
            |_| {},
        );
        summary.errors == 0 && summary.unanswered.is_empty()
    }

    /// [`classify`] of a two-connection capture, with the stream fed in chunks of `step` bytes.
    fn classify_in_steps(connections: &[Connection], step: usize) -> Round {
        let [before, after] = connections else {
            panic!("two connections");
        };
        let response = after
            .response
            .clone()
            .unwrap_or_else(ReconnectResponse::event_stream);
        if step == usize::MAX {
            return classify(
                CutAt::MidEvent,
                &before.body,
                &response,
                &after.body,
                RpcId::Number(7),
            );
        }
        let mut watch = Watch::new(RpcId::Number(7), &StreamConfig::default());
        for piece in before.body.chunks(step) {
            watch.feed(Bytes::copy_from_slice(piece), u64::MAX);
        }
        let _ = watch.cut();
        if watch.reconnect(&response) {
            for piece in after.body.chunks(step) {
                watch.feed(Bytes::copy_from_slice(piece), u64::MAX);
            }
        }
        watch.finish(CutAt::MidEvent, End::Eof)
    }

    fn assert_agrees(name: &str, connections: &[Connection]) -> Round {
        let accepted = guard_accepts(connections);
        let round = classify_in_steps(connections, usize::MAX);
        assert_eq!(
            round.behaviour.is_resumable(),
            accepted,
            "{name}: classified {round:?}, the guard {}",
            if accepted { "accepts" } else { "refuses" }
        );
        for step in [1, 2, 7, 64] {
            let chunked = classify_in_steps(connections, step);
            assert_eq!(
                chunked.behaviour, round.behaviour,
                "{name}: fed in chunks of {step}"
            );
        }
        round
    }

    fn progress(n: u32) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"t","progress":{n}}}}}"#
        )
    }

    /// The foreign-stream resume: the call's stream `a` (a priming event, and a progress
    /// notification unless `priming_only`), resumed with stream `b`'s progress and a result to the
    /// same request id from another session.
    fn foreign(ids: [&str; 4], priming_only: bool) -> Vec<Connection> {
        let [a0, a1, b5, b6] = ids;
        let mut before = format!("id: {a0}\ndata:\n\n");
        if !priming_only {
            before += &format!("id: {a1}\ndata: {}\n\n", progress(1));
        }
        let after = format!(
            "id: {b5}\ndata: {}\n\nid: {b6}\ndata: {}\n\n",
            progress(2),
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"another session"}]}}"#
        );
        vec![
            Connection::new(None, Bytes::from(before)),
            Connection::new(Some(ReconnectResponse::event_stream()), Bytes::from(after)),
        ]
    }

    /// Every two-connection capture of the library's `tests/data/captures` is resumable exactly
    /// when the guard accepts it, whatever the chunking; and the foreign-stream resumes are not.
    #[test]
    fn classification_agrees_with_the_guard() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/captures");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "sse"))
            .collect();
        files.sort();
        let mut seen = 0;
        for path in &files {
            let capture = Bytes::from(std::fs::read(path).unwrap());
            let connections = check::split_capture(&capture).unwrap();
            if connections.len() != 2 {
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy();
            let round = assert_agrees(&name, &connections);
            seen += 1;
            let want = match &*name {
                "faulty-restart.sse" => Some(Behaviour::Restarted),
                "faulty-skips-interrupted.sse" => Some(Behaviour::Reordered),
                "session-counter.sse" | "priming-on-resume.sse" | "uuid-digit-groups.sse" => {
                    Some(Behaviour::Continues)
                }
                _ => None,
            };
            if let Some(want) = want {
                assert_eq!(round.behaviour, want, "{name}: {round:?}");
            }
        }
        assert!(seen >= 5, "only {seen} two-connection captures");
        for ids in [["0/A", "1/A", "5/B", "6/B"], ["A-0", "A-1", "B-5", "B-6"]] {
            for priming_only in [false, true] {
                let name = format!("foreign stream {ids:?}, priming only: {priming_only}");
                let round = assert_agrees(&name, &foreign(ids, priming_only));
                assert_eq!(round.behaviour, Behaviour::OtherStream, "{name}: {round:?}");
                assert!(round.evidence.contains("guard"), "{name}: {round:?}");
            }
        }
    }

    /// The same stream resumed by a server that continues it is resumable, and each way of going on
    /// is told apart by the guard's decisions.
    #[test]
    fn accepted_resumes_are_described() {
        let before = format!(
            "id: 0/A\ndata:\n\nid: 1/A\ndata: {}\n\nid: 2/A\ndata: {{\"jsonrpc\":\"2.0\",\"id\":7,\"res",
            progress(1)
        );
        let result = r#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
        let run = |after: String| {
            classify(
                CutAt::MidEvent,
                before.as_bytes(),
                &ReconnectResponse::event_stream(),
                after.as_bytes(),
                RpcId::Number(7),
            )
        };
        let round = run(format!("id: 2/A\ndata: {result}\n\n"));
        assert_eq!(round.behaviour, Behaviour::ReplaysEvent, "{round:?}");
        let round = run(format!(
            "id: 1/A\ndata: {}\n\nid: 2/A\ndata: {result}\n\n",
            progress(1)
        ));
        assert_eq!(round.behaviour, Behaviour::ResendsCursor, "{round:?}");
        assert!(
            round.evidence.contains("Last-Event-ID event \"1/A\""),
            "{round:?}"
        );
        // The interrupted event skipped: a gap.
        let round = run(format!("id: 3/A\ndata: {result}\n\n"));
        assert_eq!(round.behaviour, Behaviour::Reordered, "{round:?}");
        // The interrupted event's id with other content... is the replay of another event.
        let round = run(format!("id: 1/A\ndata: {}\n\n", progress(9)));
        assert_eq!(round.behaviour, Behaviour::Restarted, "{round:?}");
        // Nothing but priming events, then the end.
        let round = run("id: 9/A\ndata:\n\n".to_owned());
        assert_eq!(round.behaviour, Behaviour::Empty, "{round:?}");
        let round = classify(
            CutAt::MidEvent,
            before.as_bytes(),
            &ReconnectResponse::new(404, None, None),
            b"",
            RpcId::Number(7),
        );
        assert_eq!(round.behaviour, Behaviour::Gone, "{round:?}");
        // No id before the cut.
        let round = classify(
            CutAt::MidEvent,
            b"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"res",
            &ReconnectResponse::event_stream(),
            result.as_bytes(),
            RpcId::Number(7),
        );
        assert_eq!(round.behaviour, Behaviour::NoIds, "{round:?}");
    }

    fn lines(chunk: &'static [u8]) -> impl Stream<Item = reqwest::Result<Bytes>> + Unpin {
        futures_util::stream::repeat_with(move || Ok(Bytes::from_static(chunk)))
    }

    /// Reads stop at their limits and say which: an endless data line is dropped by the decoder
    /// (and the read stops there), endless comments stop at the byte limit, endless tiny events at
    /// the event limit, a resume that sends only priming events at the replay timeout.
    #[tokio::test]
    async fn every_read_is_bounded() {
        let limits = Limits {
            max_bytes: 1 << 20,
            max_events: 1000,
        };
        let mut small = StreamConfig::default();
        small.decoder_mut().max_line(64 << 10).max_event(64 << 10);
        let mut watch = Watch::new(RpcId::Number(7), &small);
        let mut body = pin!(
            futures_util::stream::once(async { Ok(Bytes::from_static(b"data: ")) })
                .chain(lines(&[b'x'; 4096]))
        );
        let stop = pump(&mut body, &mut watch, limits, None, None, true).await;
        assert!(matches!(stop, Stop::Decided), "{stop:?}");
        assert!(
            matches!(watch.conn.dropped, Some(DecodeError::LineTooLong { .. })),
            "{:?}",
            watch.conn.dropped
        );
        assert!(watch.conn.bytes < 80 << 10, "{}", watch.conn.bytes);

        let mut watch = Watch::new(RpcId::Number(7), &small);
        let stop = pump(&mut lines(b": k\n"), &mut watch, limits, None, None, true).await;
        assert!(
            matches!(stop, Stop::Limit(Limit::Bytes(n)) if n == 1 << 20),
            "{stop:?}"
        );
        assert_eq!(watch.conn.bytes, 1 << 20);

        let mut watch = Watch::new(RpcId::Number(7), &StreamConfig::default());
        let stop = pump(
            &mut lines(b"data: {}\n\n"),
            &mut watch,
            limits,
            None,
            None,
            true,
        )
        .await;
        assert!(matches!(stop, Stop::Limit(Limit::Events(1000))), "{stop:?}");
        assert_eq!(watch.conn.events, 1000);

        let mut watch = Watch::new(RpcId::Number(7), &StreamConfig::default());
        watch.feed(Bytes::from_static(b"id: 1\ndata: {}\n\n"), u64::MAX);
        assert_eq!(watch.cut().as_deref(), Some(&b"1"[..]));
        assert!(watch.reconnect(&ReconnectResponse::event_stream()));
        let primings = futures_util::stream::unfold(2u64, |n| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Some((Ok(Bytes::from(format!("id: {n}\ndata:\n\n"))), n + 1))
        });
        let mut primings = pin!(primings);
        let replay = Some(Duration::from_millis(200));
        let stop = pump(&mut primings, &mut watch, limits, None, replay, true).await;
        let Stop::Silent(waited) = stop else {
            panic!("{stop:?}")
        };
        assert!(watch.conn.primings > 3);
        let round = watch.finish(CutAt::Boundary, End::Silent(waited));
        assert_eq!(round.behaviour, Behaviour::HeldOpen, "{round:?}");
    }
}
