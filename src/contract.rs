//! The wire contract: what every ssegate surface answers with, defined once.
//!
//! The Rust client, the rmcp adapter ([`rmcp`](crate#features)), `ssegate bridge` and the Python
//! package report the same situation the same way. They read this module (the Python package
//! through constants its extension exports) and write none of it as a literal:
//!
//! - the JSON-RPC error [`Code`]s ssegate answers with, one meaning each ([`Code::for_answer`]
//!   picks one),
//! - the word in an error's `data.kind` ([`Kind`]) and `data.outcome` ([`Outcome`]), and the other
//!   `data` keys ([`data`]),
//! - the stable words of the engine's enums (`as_str` on [`Failure`](crate::resume::Failure),
//!   [`RefusalKind`](crate::resume::RefusalKind), [`Restart`](crate::resume::Restart),
//!   [`Skip`](crate::resume::Skip), [`DecodeError`](crate::sse::DecodeError) and
//!   [`RpcKind`](crate::message::RpcKind), each with the list of its words),
//! - the default limits (`DEFAULT_*`; the `Default` impls use them),
//! - the MCP constants the surfaces need: protocol versions, `_meta` keys, header names.
//!
//! # Error codes
//!
//! | code | [`Code`] | `data.kind` | meaning |
//! | --- | --- | --- | --- |
//! | `-32050` | [`Code::OutcomeUnknown`] | any | a `tools/call` (or a request the caller said must not be re-sent) was sent and its answer lost; it was not sent again: the tool may have run |
//! | `-32051` | [`Code::Unavailable`] | `setup`, `unreachable`, `http`, `status`, `redirect`, `timeout`, `reconnect-failed`, `tasks`, `task`, `task-cancelled`, `auth` | the server could not be reached, did not take the request, or gave no answer in time |
//! | `-32052` | [`Code::ServerProtocol`] | `protocol`, `invalid-response` | the server broke the protocol (a torn, invalid or foreign answer) |
//! | `-32053` | [`Code::Refused`] | `refused`, `too-many-resumes`, `no-progress` | the answer's stream was refused: it could not be resumed as the same stream |
//!
//! A `tools/call` whose outcome is unknown is always `-32050`, whatever the kind: that is what an
//! application must not re-run blindly. A call that ran as a task and failed (`task-failed`) is
//! answered with the server's own error.
//!
//! # Error data
//!
//! Every error ssegate answers with has `data` with at least [`data::KIND`] (a [`Kind`] word),
//! [`data::OUTCOME`] (an [`Outcome`] word: `unknown`, the server may have acted; `not-run`, it did
//! not take the request; `failed`, it answered with a failure), [`data::METHOD`] and
//! [`data::REASON`] (one line). When the engine refused the stream, [`data::REFUSAL`] names the
//! [`RefusalKind`](crate::resume::RefusalKind). A surface may add keys of its own.
#![forbid(unsafe_code)]

use std::fmt;
use std::time::Duration;

/// [`Code::OutcomeUnknown`]'s value.
pub const OUTCOME_UNKNOWN: i32 = -32_050;
/// [`Code::Unavailable`]'s value.
pub const UNAVAILABLE: i32 = -32_051;
/// [`Code::ServerProtocol`]'s value.
pub const SERVER_PROTOCOL: i32 = -32_052;
/// [`Code::Refused`]'s value.
pub const REFUSED: i32 = -32_053;

/// JSON-RPC 2.0's own error codes, as ssegate's surfaces answer with them.
pub mod jsonrpc {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i32 = -32_700;
    /// The JSON sent is not a valid request object.
    pub const INVALID_REQUEST: i32 = -32_600;
    /// The method does not exist.
    pub const METHOD_NOT_FOUND: i32 = -32_601;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: i32 = -32_602;
    /// Internal JSON-RPC error.
    pub const INTERNAL_ERROR: i32 = -32_603;
    /// MCP's code for a request the peer did not answer in time (the SDKs' `REQUEST_TIMEOUT`).
    pub const REQUEST_TIMEOUT: i32 = -32_001;
    /// MCP 2026-07-28: the server does not speak the request's protocol version.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32_022;
}

/// A JSON-RPC error code ssegate answers with, in the implementation-defined server error range.
/// One meaning each (the table in the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// `-32050`: a `tools/call` was sent, its answer was lost, and it was not sent again: the tool
    /// may have run.
    OutcomeUnknown,
    /// `-32051`: the server could not be reached, did not take the request, or gave no answer in
    /// time.
    Unavailable,
    /// `-32052`: the server broke the protocol.
    ServerProtocol,
    /// `-32053`: the answer's stream was refused (it could not be resumed as the same stream).
    Refused,
}

impl Code {
    /// Every code, in the order of the table.
    pub const ALL: [Code; 4] = [
        Code::OutcomeUnknown,
        Code::Unavailable,
        Code::ServerProtocol,
        Code::Refused,
    ];

    /// The code's JSON-RPC value.
    pub const fn value(self) -> i32 {
        match self {
            Code::OutcomeUnknown => OUTCOME_UNKNOWN,
            Code::Unavailable => UNAVAILABLE,
            Code::ServerProtocol => SERVER_PROTOCOL,
            Code::Refused => REFUSED,
        }
    }

    /// The code with this value, if it is one of ssegate's.
    pub fn from_value(value: i64) -> Option<Code> {
        Code::ALL
            .into_iter()
            .find(|c| i64::from(c.value()) == value)
    }

    /// A stable word for the code: `outcome-unknown`, `unavailable`, `server-protocol`, `refused`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Code::OutcomeUnknown => "outcome-unknown",
            Code::Unavailable => "unavailable",
            Code::ServerProtocol => "server-protocol",
            Code::Refused => "refused",
        }
    }

    /// The error's `message`, the same on every surface (`data.reason` says more).
    pub const fn message(self) -> &'static str {
        match self {
            Code::OutcomeUnknown => {
                "outcome unknown: the call's answer was lost and it was not sent again; the tool \
                 may have run"
            }
            Code::Unavailable => "the server gave no answer",
            Code::ServerProtocol => "the server broke the protocol",
            Code::Refused => "the answer's stream was refused",
        }
    }

    /// The code of the error answering a `method` request that failed with `kind`, whose outcome
    /// is `outcome`: [`Code::OutcomeUnknown`] for a `tools/call` whose outcome is unknown, else the
    /// kind's own code ([`Kind::code`]).
    pub fn for_answer(method: &str, kind: Kind, outcome: Outcome) -> Code {
        if outcome == Outcome::Unknown && method == method::TOOLS_CALL {
            Code::OutcomeUnknown
        } else {
            kind.code()
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.value(), self.as_str())
    }
}

/// What happened to an answer, the word in an error's `data.kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// `setup`: the client could not be set up (a bad URL, certificate or header).
    Setup,
    /// `unreachable`: the connection could not be made; nothing was sent.
    Unreachable,
    /// `http`: the HTTP exchange failed after the request may have been sent.
    Http,
    /// `status`: the server answered with an error status.
    Status,
    /// `redirect`: the server answered with a redirect that is not followed.
    Redirect,
    /// `timeout`: the call's deadline passed.
    Timeout,
    /// `invalid-response`: the response head is not valid HTTP.
    InvalidResponse,
    /// `protocol`: the answer breaks the protocol.
    Protocol,
    /// `refused`: the engine refused the stream (`data.refusal` says why).
    Refused,
    /// `too-many-resumes`: the stream was resumed as often as allowed.
    TooManyResumes,
    /// `no-progress`: resumes in a row brought nothing: the cut repeats.
    NoProgress,
    /// `reconnect-failed`: every attempt at a resume failed.
    ReconnectFailed,
    /// `task-failed`: the call ran as a task and the task failed.
    TaskFailed,
    /// `task-cancelled`: the call's task was cancelled.
    TaskCancelled,
    /// `tasks`: the call had to run as a task and could not (required, or unsupported).
    Tasks,
    /// `task`: the call's task could not be read to its end.
    Task,
    /// `auth`: the client has no token the server accepts (no sign-in, a refused or timed-out
    /// sign-in, a failed token request); the request was not taken.
    Auth,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 17] = [
        Kind::Setup,
        Kind::Unreachable,
        Kind::Http,
        Kind::Status,
        Kind::Redirect,
        Kind::Timeout,
        Kind::InvalidResponse,
        Kind::Protocol,
        Kind::Refused,
        Kind::TooManyResumes,
        Kind::NoProgress,
        Kind::ReconnectFailed,
        Kind::TaskFailed,
        Kind::TaskCancelled,
        Kind::Tasks,
        Kind::Task,
        Kind::Auth,
    ];

    /// The stable word.
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::Setup => "setup",
            Kind::Unreachable => "unreachable",
            Kind::Http => "http",
            Kind::Status => "status",
            Kind::Redirect => "redirect",
            Kind::Timeout => "timeout",
            Kind::InvalidResponse => "invalid-response",
            Kind::Protocol => "protocol",
            Kind::Refused => "refused",
            Kind::TooManyResumes => "too-many-resumes",
            Kind::NoProgress => "no-progress",
            Kind::ReconnectFailed => "reconnect-failed",
            Kind::TaskFailed => "task-failed",
            Kind::TaskCancelled => "task-cancelled",
            Kind::Tasks => "tasks",
            Kind::Task => "task",
            Kind::Auth => "auth",
        }
    }

    /// The kind named by this word.
    pub fn from_word(word: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == word)
    }

    /// The code of an error of this kind when the outcome is not an unknown `tools/call`.
    pub const fn code(self) -> Code {
        match self {
            Kind::Protocol | Kind::InvalidResponse => Code::ServerProtocol,
            Kind::Refused | Kind::TooManyResumes | Kind::NoProgress => Code::Refused,
            Kind::Setup
            | Kind::Unreachable
            | Kind::Http
            | Kind::Status
            | Kind::Redirect
            | Kind::Timeout
            | Kind::ReconnectFailed
            | Kind::TaskFailed
            | Kind::TaskCancelled
            | Kind::Tasks
            | Kind::Task
            | Kind::Auth => Code::Unavailable,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether the server may have acted on a request whose answer is an error: `data.outcome`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// `unknown`: the request may have been taken and run.
    Unknown,
    /// `not-run`: the server did not take the request.
    NotRun,
    /// `failed`: the server answered with a failure.
    Failed,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 3] = [Outcome::Unknown, Outcome::NotRun, Outcome::Failed];

    /// The stable word.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Unknown => "unknown",
            Outcome::NotRun => "not-run",
            Outcome::Failed => "failed",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The keys of an error's `data` object.
pub mod data {
    /// The [`Kind`](super::Kind) word.
    pub const KIND: &str = "kind";
    /// The [`Outcome`](super::Outcome) word.
    pub const OUTCOME: &str = "outcome";
    /// The request's method.
    pub const METHOD: &str = "method";
    /// One line saying what happened.
    pub const REASON: &str = "reason";
    /// The [`RefusalKind`](crate::resume::RefusalKind) word, when the engine refused the stream.
    pub const REFUSAL: &str = "refusal";
    /// The HTTP status, for kind `status`.
    pub const STATUS: &str = "status";
    /// How many messages for the request arrived before its answer was lost (progress...).
    pub const MESSAGES_RECEIVED: &str = "messagesReceived";
    /// The task handle, when the call ran as a task.
    pub const TASK: &str = "task";
    /// Whether a new session is needed before the request is sent again.
    pub const MUST_RENEGOTIATE: &str = "mustRenegotiate";
}

/// MCP method names the surfaces treat specially.
pub mod method {
    /// A tool call: the one method whose lost answer is an unknown outcome.
    pub const TOOLS_CALL: &str = "tools/call";
    /// The 2025-era handshake.
    pub const INITIALIZE: &str = "initialize";
    /// The 2026-07-28 discovery request.
    pub const SERVER_DISCOVER: &str = "server/discover";
}

// The default limits. The `Default` impls read these; every surface that exposes the limit uses
// the same default.

/// Default of [`DecoderConfig::max_line`](crate::sse::DecoderConfig::max_line): 64 MiB.
pub const DEFAULT_MAX_LINE: usize = 64 << 20;
/// Default of [`DecoderConfig::max_event`](crate::sse::DecoderConfig::max_event): 64 MiB.
pub const DEFAULT_MAX_EVENT: usize = 64 << 20;
/// Default of [`DecoderConfig::max_field`](crate::sse::DecoderConfig::max_field): 4 KiB.
pub const DEFAULT_MAX_FIELD: usize = 4 << 10;
/// Default of
/// [`ClientConfig::max_endpoint_event`](crate::client::ClientConfig::max_endpoint_event): the
/// bytes a 2024-11-05 HTTP+SSE stream may bring before its `endpoint` event is complete, 16 KiB.
pub const DEFAULT_MAX_ENDPOINT_EVENT: usize = 16 << 10;
/// Default of [`DecoderConfig::max_block`](crate::sse::DecoderConfig::max_block): 80 MiB.
pub const DEFAULT_MAX_BLOCK: usize = 80 << 20;
/// Default of [`GateConfig::max_depth`](crate::gate::GateConfig::max_depth): 1024 levels of
/// nesting.
pub const DEFAULT_MAX_DEPTH: usize = 1024;
/// The largest `application/json` answer a client reads: 64 MiB.
pub const DEFAULT_MAX_JSON_BODY: usize = 64 << 20;
/// How much of an error answer's body a client reads: 1 KiB.
pub const DEFAULT_MAX_ERROR_BODY: usize = 1024;
/// A call's deadline, from its request to its answer, resumes included: 600 s (room for a 4 MiB
/// result at 7 KB/s).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a connection may take to be made: 10 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a resumed connection may take to bring its first event: 10 s.
pub const DEFAULT_REPLAY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an open connection may bring nothing before it is resumed: 300 s.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// The delay before a resume when the server gave no `retry:`: 1 s.
pub const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// The longest wait before a resume, whatever the server asks: 60 s.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(60);
/// The shortest wait before a resume, whatever the server asks: 250 ms.
pub const DEFAULT_MIN_DELAY: Duration = Duration::from_millis(250);
/// Most resumes of one stream: 32.
pub const DEFAULT_MAX_RESUMES: u32 = 32;
/// Most resumes in a row that bring no complete event: 4.
pub const DEFAULT_MAX_STALLED_RESUMES: u32 = 4;
/// Most attempts at one resume: 6.
pub const DEFAULT_MAX_RECONNECT_ATTEMPTS: u32 = 6;
/// The first wait between failed attempts at one resume (it doubles): 250 ms.
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(250);
/// How long a sign-in may wait for the user to approve: 120 s.
pub const DEFAULT_SIGN_IN_TIMEOUT: Duration = Duration::from_secs(120);
/// Most step-ups (`403 insufficient_scope`, a sign-in for more scopes) for one request: 2.
pub const DEFAULT_MAX_STEP_UPS: u32 = 2;
/// Most attempts at a call whose stream was lost, when re-issuing it is safe: 3.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

// MCP constants.

/// The newest protocol version with `Last-Event-ID` resumption.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// MCP 2026-07-28: stateless, per-request `_meta`, no resumption.
pub const PROTOCOL_2026_07_28: &str = "2026-07-28";
/// The stateless versions ssegate speaks (no session, per-request `_meta`), newest first.
pub const STATELESS_VERSIONS: &[&str] = &[PROTOCOL_2026_07_28];
/// The versions ssegate speaks through an `initialize` handshake and a session, newest first.
pub const INITIALIZE_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];
/// The versions a host may offer in its `initialize` to `ssegate bridge`, newest first:
/// [`INITIALIZE_VERSIONS`] and 2024-11-05, which hosts still send.
pub const HOST_INITIALIZE_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The session header (lower case, as HTTP/2 sends it).
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The protocol version header.
pub const PROTOCOL_HEADER: &str = "mcp-protocol-version";

/// `_meta` keys of MCP 2026-07-28 and of the tasks extension.
pub mod meta {
    /// The request's protocol version.
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// The client's capabilities, on every request.
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// The client's name and version, on every request.
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// The server's name and version, on a `server/discover` result.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// The subscription a notification of `subscriptions/listen` belongs to.
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    /// The task a message belongs to.
    pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
    /// The keys a client stamps on every 2026-07-28 request.
    pub const CLIENT_KEYS: [&str; 3] = [PROTOCOL_VERSION, CLIENT_CAPABILITIES, CLIENT_INFO];
}

/// The tasks extension's identifier (MCP 2026-07-28).
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn kebab(word: &str) -> bool {
        !word.is_empty()
            && !word.starts_with('-')
            && !word.ends_with('-')
            && word.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
    }

    #[test]
    fn every_code_has_one_value_and_one_word() {
        let values: HashSet<i32> = Code::ALL.iter().map(|c| c.value()).collect();
        let words: HashSet<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!((values.len(), words.len()), (4, 4));
        for code in Code::ALL {
            assert_eq!(Code::from_value(code.value().into()), Some(code));
            assert!(
                (-32_099..=-32_000).contains(&code.value()),
                "server error range"
            );
            assert!(kebab(code.as_str()));
        }
        assert_eq!(Code::from_value(-32_000), None);
        assert_eq!(
            [OUTCOME_UNKNOWN, UNAVAILABLE, SERVER_PROTOCOL, REFUSED],
            [-32_050, -32_051, -32_052, -32_053]
        );
    }

    #[test]
    fn every_kind_has_a_distinct_word_that_names_it_back() {
        let words: HashSet<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(words.len(), Kind::ALL.len());
        for kind in Kind::ALL {
            assert!(kebab(kind.as_str()), "{kind}");
            assert_eq!(Kind::from_word(kind.as_str()), Some(kind));
        }
        assert_eq!(Kind::from_word("other"), None);
    }

    #[test]
    fn a_lost_tool_call_is_outcome_unknown_whatever_the_kind() {
        for kind in Kind::ALL {
            assert_eq!(
                Code::for_answer("tools/call", kind, Outcome::Unknown),
                Code::OutcomeUnknown
            );
            // Not a tool call, or a known outcome: the kind's own code.
            assert_eq!(
                Code::for_answer("tools/list", kind, Outcome::Unknown),
                kind.code()
            );
            assert_eq!(
                Code::for_answer("tools/call", kind, Outcome::NotRun),
                kind.code()
            );
        }
        assert_eq!(Kind::Refused.code(), Code::Refused);
        assert_eq!(Kind::Protocol.code(), Code::ServerProtocol);
        assert_eq!(Kind::Unreachable.code(), Code::Unavailable);
    }

    #[test]
    fn the_module_docs_table_lists_every_code_and_kind() {
        let docs = include_str!("contract.rs");
        for code in Code::ALL {
            let row = format!("| `{}` | [`Code::{:?}`] |", code.value(), code);
            let line = docs
                .lines()
                .find(|l| l.contains(&row))
                .unwrap_or_else(|| panic!("no row for {code}"));
            if code != Code::OutcomeUnknown {
                for kind in Kind::ALL.iter().filter(|k| k.code() == code) {
                    if *kind != Kind::TaskFailed {
                        assert!(
                            line.contains(&format!("`{kind}`")),
                            "{kind} not in {code}'s row"
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod words {
    use std::collections::HashSet;
    use std::time::Duration;

    use bytes::Bytes;

    use crate::guard::{Refusal, RefusalKind, Restart, Skip};
    use crate::message::{RpcId, RpcKind};
    use crate::resume::Failure;
    use crate::sse::DecodeError;

    /// `words` lists exactly the distinct `as_str` of `samples` (one sample per variant).
    fn lists_exactly(words: &[&str], said: Vec<&'static str>) {
        let said_set: HashSet<&str> = said.iter().copied().collect();
        assert_eq!(
            said_set.len(),
            said.len(),
            "two variants share a word: {said:?}"
        );
        assert_eq!(said_set, words.iter().copied().collect(), "WORDS vs as_str");
    }

    #[test]
    fn every_variant_of_every_reported_enum_has_its_own_listed_word() {
        let id = Some(Bytes::from_static(b"1"));
        let decode = DecodeError::EventTooLarge {
            limit: 1,
            offset: 0,
            id: None,
        };
        let refusals = vec![
            RefusalKind::PartialEvent {
                bytes: 1,
                id: id.clone(),
            },
            RefusalKind::IncompleteMessage {
                id: id.clone(),
                bytes: 1,
            },
            RefusalKind::TrailingBytes {
                id: id.clone(),
                bytes: 1,
            },
            RefusalKind::InvalidMessage {
                id: id.clone(),
                bytes: 1,
            },
            RefusalKind::StreamRestarted {
                got: id.clone(),
                why: Restart::IdReused,
            },
            RefusalKind::DuplicateResponse {
                rpc_id: RpcId::Number(1),
                event_id: None,
            },
            RefusalKind::Gap {
                expected: Box::new(*b"2"),
                got: None,
            },
            RefusalKind::SessionExpired,
            RefusalKind::ReplayUnavailable {
                status: Some(409),
                retry_after: None,
            },
            RefusalKind::Busy {
                status: 503,
                retry_after: Some(Duration::ZERO),
            },
            RefusalKind::ReplayMissed { waited: None },
            RefusalKind::Unresumable {
                partial_bytes: 0,
                partial_id: None,
            },
            RefusalKind::UnexpectedResponse {
                status: 500,
                content_type: None,
            },
            RefusalKind::DecodeLimit {
                error: decode.clone(),
            },
        ];
        lists_exactly(
            &RefusalKind::WORDS,
            refusals.iter().map(RefusalKind::as_str).collect(),
        );
        let restarts = [
            Restart::IdReused,
            Restart::Backwards,
            Restart::OtherStream,
            Restart::MessageRepeated,
        ];
        lists_exactly(
            &Restart::WORDS,
            restarts.iter().map(|r| r.as_str()).collect(),
        );
        let skips = [
            Skip::ExactReplay {
                id: Bytes::from_static(b"1"),
            },
            Skip::DuplicateResponse {
                rpc_id: RpcId::Number(1),
            },
            Skip::KeepAlive,
            Skip::ErrorFrame { id: None },
        ];
        lists_exactly(&Skip::WORDS, skips.iter().map(Skip::as_str).collect());
        let decodes = [
            DecodeError::LineTooLong {
                limit: 1,
                offset: 0,
                id: None,
            },
            decode,
            DecodeError::FieldTooLong {
                limit: 1,
                offset: 0,
                id: None,
            },
            DecodeError::BlockTooLarge {
                limit: 1,
                offset: 0,
                id: None,
            },
        ];
        lists_exactly(
            &DecodeError::WORDS,
            decodes.iter().map(DecodeError::as_str).collect(),
        );
        let rpc = [
            RpcKind::Request,
            RpcKind::Notification,
            RpcKind::Response,
            RpcKind::Batch,
            RpcKind::Other,
        ];
        lists_exactly(&RpcKind::WORDS, rpc.iter().map(|k| k.as_str()).collect());
        let refusal = Refusal {
            kind: RefusalKind::SessionExpired,
            cursor: None,
            outstanding: vec![],
        };
        let failures = [
            Failure::Refused(refusal),
            Failure::TooManyResumes {
                resumes: 1,
                outstanding: vec![],
            },
            Failure::NoProgress {
                resumes: 1,
                outstanding: vec![],
            },
            Failure::ReconnectFailed {
                attempts: 1,
                last: None,
                outstanding: vec![],
            },
        ];
        lists_exactly(
            &Failure::WORDS,
            failures.iter().map(Failure::as_str).collect(),
        );
        // A failure's word is the kind an error answer reports.
        for f in &failures {
            assert_eq!(super::Kind::from_word(f.as_str()), Some(f.kind()));
        }
    }
}
