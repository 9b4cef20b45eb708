//! What the probe reports: the behaviours, the rounds, the server, the JSON object.

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};
use ssegate::client::{ClientError, TASKS_EXTENSION};
use ssegate::resume::Refusal;
use ssegate::sse::DecodeError;

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
pub(crate) const STATELESS_CHECK: Duration = Duration::from_secs(10);

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
    /// Whether the 2025-era session was on the 2024-11-05 HTTP+SSE transport (else Streamable
    /// HTTP).
    pub(crate) legacy_sse: bool,
}

impl ServerInfo {
    /// The transport's word in the JSON report: `streamable-http` or `sse`.
    pub(crate) fn transport_word(&self) -> &'static str {
        if self.legacy_sse {
            "sse"
        } else {
            "streamable-http"
        }
    }

    /// The transport, in words.
    pub(crate) fn transport_name(&self) -> &'static str {
        if self.legacy_sse {
            "HTTP+SSE (2024-11-05)"
        } else {
            "Streamable HTTP"
        }
    }
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
    pub(crate) fn session_advice(&self) -> String {
        if self.server.legacy_sse {
            return "the 2024-11-05 HTTP+SSE transport has no resumption: a cut stream ends the \
                    session and loses every request in flight (a guarded client re-issues only \
                    calls that are safe to repeat and reports the others as outcome unknown); \
                    serve Streamable HTTP with a replay buffer"
                .to_owned();
        }
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
                "transport": self.server.transport_word(),
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

pub(crate) fn round_json(r: &Round) -> Value {
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

pub(crate) fn seconds(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// An error and its sources, `: `-separated (reqwest's own text hides the cause).
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}
