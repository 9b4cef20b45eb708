//! The resumption guard: it owns every decision about a stream's events and reconnects.
//!
//! Feed it, in order, what happens to one SSE response stream and its resumptions: each dispatched
//! [`Event`] ([`Guard::on_event`]), each connection end ([`Guard::on_disconnect`], with the decoder's
//! partial event), each reconnect response ([`Guard::on_reconnect`]), a replay timeout
//! ([`Guard::on_replay_timeout`]) and an event the decoder dropped over a limit
//! ([`Guard::on_decode_error`]). Every call returns a decision or a typed [`Refusal`]; once it
//! has refused (any refusal but [`RefusalKind::Busy`] and [`RefusalKind::DecodeLimit`]), the guard keeps refusing
//! with the same error until [`Guard::reset`]. It never hands out a message that is not exactly
//! one complete JSON value, and never continues a resumed stream when the evidence says it is not
//! the one that was cut.
//!
//! One guard serves one stream: a POST response stream and its `GET` + `Last-Event-ID` resumptions,
//! or the standalone `GET` stream. The streams of one MCP session share a [`Registry`] of the
//! requests still outstanding and of the responses already delivered.
//!
//! The guard is the lower layer of [`ResumableStream`](crate::resume::ResumableStream), the engine
//! to drive: the stream owns the decoder, the gate, all timing (replay timeout, default delay,
//! clamps, backoff) and the reconnect loop, and hands each decision to this guard. Use the guard
//! alone only to judge events with timing of your own. Its decisions, the evidence each rests on and
//! what event ids can and cannot show are listed once, in the [stream's
//! documentation](crate::resume#decisions).
#![forbid(unsafe_code)]

mod ids;
mod reconnect;
mod registry;

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use smallvec::SmallVec;

use crate::gate::{self, Gate, Isa, Verdict};
use crate::hash::{Xxh3, xxh3_64};
use crate::message::{Message, RpcId, RpcKind, RpcPeek};
use crate::sse::{Data, DecodeError, Decoder, Event, PartialEvent};

pub use ids::NumberedId;
pub(crate) use ids::random_seed;
use ids::{Shape, Window, not_next};
pub use reconnect::{ReconnectResponse, parse_retry_after};
pub use registry::Registry;
use registry::Response;

/// What the guard does with a cut that happened while an event was half received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Refuse any reconnect while a partial event was held ([`RefusalKind::PartialEvent`]).
    Strict,
    /// Discard the partial event, resume, and verify the replay: the first replayed message must
    /// be the interrupted one (when its id was seen); an id already delivered must carry identical
    /// content.
    #[default]
    Verified,
}

/// Guard settings: what counts as evidence, and the gate messages are judged with. Timing (the
/// replay timeout, the default reconnect delay, clamps) is the stream's
/// ([`resume::StreamConfig`](crate::resume::StreamConfig)), and the session registry is given where a guard
/// is built ([`Session`](crate::resume::Session)).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct GuardConfig {
    policy: Policy,
    window: usize,
    unrequested_window: usize,
    contiguous_ids: bool,
    gate: gate::GateConfig,
}

/// Default of [`GuardConfig::unrequested_window`]: as many response ids as a [`Registry`] remembers
/// answered requests by default.
pub const DEFAULT_UNREQUESTED_WINDOW: usize = 4096;

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            policy: Policy::Verified,
            window: 4096,
            unrequested_window: DEFAULT_UNREQUESTED_WINDOW,
            contiguous_ids: false,
            gate: gate::GateConfig::default(),
        }
    }
}

impl GuardConfig {
    /// The partial-event policy (default [`Policy::Verified`]).
    pub fn policy(&mut self, policy: Policy) -> &mut Self {
        self.policy = policy;
        self
    }

    /// How many recent event ids are remembered with their content hash for replay deduplication
    /// (default 4096, at least 1; a few words each, whatever the id's length). A private
    /// [`Registry`] remembers as many answered request ids.
    pub fn window(&mut self, ids: usize) -> &mut Self {
        self.window = ids.max(1);
        self
    }

    /// How many ids of responses to requests that were never registered (with
    /// [`ResumableStream::expect_response`](crate::resume::ResumableStream::expect_response), in
    /// the stream's [`Registry`]) are remembered with their content
    /// hash (default [`DEFAULT_UNREQUESTED_WINDOW`], at least 1; a few words each, whatever the id's
    /// length), so that a second response to one of them is judged like one to an answered request:
    /// skipped when identical ([`Skip::DuplicateResponse`]), refused when different
    /// ([`RefusalKind::DuplicateResponse`]). The memory is this stream's (a copy on another stream of
    /// the session is not compared) and holds only ids such responses had (notifications and the
    /// server's own requests are not responses; `null` ids, the answers to unparseable requests, are
    /// never compared). Beyond the limit the oldest id is forgotten first: a second response to a
    /// forgotten id is delivered as a first one would be, never refused on missing evidence.
    pub fn unrequested_window(&mut self, ids: usize) -> &mut Self {
        self.unrequested_window = ids.max(1);
        self
    }

    /// Whether the server numbers each stream contiguously (default `false`). When set, the first
    /// new event after a resume whose id has the cursor's numbered shape must be exactly
    /// `cursor + 1`, else [`RefusalKind::Gap`]. Leave it off for servers that number all the streams of a
    /// session with one counter (MCP only requires ids to be unique across a session).
    pub fn contiguous_ids(&mut self, contiguous: bool) -> &mut Self {
        self.contiguous_ids = contiguous;
        self
    }

    /// The deepest nesting of arrays and objects a message may have (default 1024, the gate's):
    /// a deeper one is refused as [`RefusalKind::InvalidMessage`] with
    /// [`InvalidReason::TooDeep`](crate::gate::InvalidReason::TooDeep). The guard's memory for
    /// nesting is one byte per level in use, so a server that nests deeper than the default can be
    /// met by raising this (the application's own parser has its own limit too).
    pub fn max_depth(&mut self, levels: usize) -> &mut Self {
        self.gate.max_depth(levels);
        self
    }

    /// The most capable instruction set the guard's gate may run on (default: the best this CPU
    /// has; see [`gate::GateConfig::max_isa`]). Decisions are the same on every instruction set.
    pub fn max_isa(&mut self, isa: Isa) -> &mut Self {
        self.gate.max_isa(isa);
        self
    }

    /// A gate as the guard judges messages with: exact verdicts, this configuration's nesting limit
    /// and instruction-set cap.
    pub(crate) fn gate(&self) -> Gate {
        self.gate.build()
    }

    /// A guard with these settings and a private registry (of [`GuardConfig::window`] answered ids).
    pub(crate) fn guard(&self) -> Guard {
        self.build_with(Registry::with_window(self.window), false)
    }

    /// A guard with these settings that shares `registry` (outstanding requests and answered
    /// responses) with the session's other streams.
    pub(crate) fn guard_in(&self, registry: &Registry) -> Guard {
        self.build_with(registry.clone(), true)
    }

    /// [`GuardConfig::guard`] (test hook).
    #[cfg(feature = "__testing")]
    #[doc(hidden)]
    pub fn build(&self) -> Guard {
        self.guard()
    }

    /// [`GuardConfig::guard_in`] (test hook).
    #[cfg(feature = "__testing")]
    #[doc(hidden)]
    pub fn build_in(&self, registry: &Registry) -> Guard {
        self.guard_in(registry)
    }

    fn build_with(&self, registry: Registry, shared: bool) -> Guard {
        #[cfg(not(feature = "__testing"))]
        let _ = shared;
        let recent = Window::new(random_seed());
        Guard {
            config: self.clone(),
            #[cfg(feature = "__testing")]
            gate: self.gate(),
            phase: Phase::Streaming,
            cursor: None,
            last_seen_id: recent.key(b""),
            retry: None,
            recent,
            unrequested: Window::new(random_seed()),
            shape: Shape::default(),
            registry,
            #[cfg(feature = "__testing")]
            shared,
            mine: SmallVec::new(),
            conn: Connection::default(),
            ever_resumed: false,
            stats: Stats::default(),
        }
    }
}

/// What the guard decided about one event.
#[derive(Debug)]
#[non_exhaustive]
#[must_use = "a Deliver decision carries the message"]
pub enum Decision {
    /// A complete, new message: hand it to the application.
    Deliver(Delivery),
    /// Nothing to deliver, for the reason given.
    Skip(Skip),
    /// An event with empty data and its own id (a priming event): the cursor moved to this id.
    Cursor(Bytes),
}

/// A message the guard let through.
#[derive(Debug)]
#[non_exhaustive]
pub struct Delivery {
    /// The message: exactly one complete JSON value, still pointing into the input chunks.
    pub message: Message,
    /// The event's own id, if it had one.
    pub event_id: Option<Bytes>,
    /// The event type, `None` for the default `message`.
    pub event_type: Option<Bytes>,
    /// The message's top-level JSON-RPC shape.
    pub rpc: RpcPeek,
}

/// Why an event was not delivered. `Display` says it in a few words.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Skip {
    /// The id was already delivered with identical content: a replay.
    ExactReplay {
        /// The replayed event id.
        id: Bytes,
    },
    /// A second, identical response to a request that was already answered in the session (or, for
    /// a request never registered, on this stream: [`GuardConfig::unrequested_window`]).
    DuplicateResponse {
        /// The JSON-RPC request id.
        rpc_id: RpcId,
    },
    /// An event with empty data and no id of its own: nothing to do.
    KeepAlive,
    /// An `event: error` frame that is not the answer to a resume and whose data is not a
    /// complete JSON value: it carries no message (see [`resume`](crate::resume#event-error)).
    ErrorFrame {
        /// Its own id, if it had one (the cursor does not move to it).
        id: Option<Bytes>,
    },
}

impl Skip {
    /// Every [`Skip::as_str`] word.
    pub const WORDS: [&'static str; 4] = [
        "exact-replay",
        "duplicate-response",
        "keep-alive",
        "error-frame",
    ];

    /// A stable word for the skip: `exact-replay`, `duplicate-response`, `keep-alive`, `error-frame`.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Skip::ExactReplay { .. } => "exact-replay",
            Skip::DuplicateResponse { .. } => "duplicate-response",
            Skip::KeepAlive => "keep-alive",
            Skip::ErrorFrame { .. } => "error-frame",
        }
    }
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skip::ExactReplay { id } => write!(f, "exact replay of {}", show(id)),
            Skip::DuplicateResponse { rpc_id } => {
                write!(f, "duplicate response to request {rpc_id}")
            }
            Skip::KeepAlive => f.write_str("keep-alive"),
            Skip::ErrorFrame { .. } => f.write_str("event: error frame with no JSON message"),
        }
    }
}

/// Where to reconnect after a connection end.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resume {
    /// The `Last-Event-ID` to send (the cursor), `None` when no id was ever received.
    pub last_event_id: Option<Bytes>,
    /// How long to wait first. From the guard: the server's last `retry:` or
    /// `Retry-After`, zero when it gave none. From the stream
    /// ([`Output::Disconnected`](crate::resume::Output::Disconnected)): the delay it will wait,
    /// its default applied, raised to its floor and clamped ([`resume::StreamConfig`](crate::resume::StreamConfig)).
    pub delay: Duration,
    /// The partial event that was discarded (never completed by a later connection).
    pub discarded: Option<PartialEvent>,
    /// Whether a response this stream must deliver is still outstanding in the session (without
    /// one, reconnecting is optional: a response that arrived on another stream of the session
    /// counts as delivered).
    pub needed: bool,
}

/// How a connection ended, as the decoder saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectionEnd {
    /// The open block at the end, if the cut was not at an event boundary.
    pub partial: Option<PartialEvent>,
    /// The decoder's committed last event id (it also moves on id-only blocks the guard never sees).
    pub last_event_id: Bytes,
    /// The decoder's reconnection time from the last valid `retry:` field.
    pub retry: Option<u64>,
}

impl ConnectionEnd {
    /// Ends the decoder's connection ([`Decoder::finish`]) and captures what the guard needs.
    /// Drain [`Decoder::next_event`] first.
    pub fn from_decoder(decoder: &mut Decoder) -> Self {
        let partial = decoder.finish();
        ConnectionEnd {
            partial,
            last_event_id: decoder.last_event_id().clone(),
            retry: decoder.retry(),
        }
    }
}

/// Counters a caller can report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Events seen.
    pub events: u64,
    /// Messages delivered.
    pub delivered: u64,
    /// Bytes of delivered messages.
    pub delivered_bytes: u64,
    /// Events skipped as exact replays, duplicate responses or error frames.
    pub skipped: u64,
    /// Partial events discarded at cuts.
    pub discarded_partials: u64,
    /// Bytes of discarded partial events.
    pub discarded_bytes: u64,
    /// Reconnects the guard allowed.
    pub resumes: u64,
}

/// A refusal: of the stream by the guard, of a resume by the server ([`RefusalKind::Busy`]) or of one
/// event by the decoder ([`RefusalKind::DecodeLimit`]); what happened, where the stream stood, and what
/// is still unanswered.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal {
    /// What went wrong, with the numbers.
    pub kind: RefusalKind,
    /// The cursor (last fully processed event id) at the refusal.
    pub cursor: Option<Bytes>,
    /// Requests this stream still had to deliver: re-issue them (after renegotiating when
    /// [`Refusal::must_renegotiate`]).
    pub outstanding: Vec<RpcId>,
}

/// Which evidence showed that the server restarted the stream instead of resuming it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Restart {
    /// An id already delivered came back with different content.
    IdReused,
    /// In a stream whose ids showed one numbered shape, an id at or before the highest one seen
    /// (and no longer in the replay window), after a resume.
    Backwards,
    /// In a stream whose ids showed one numbered shape, an id of that shape naming another
    /// stream part, after a resume.
    OtherStream,
    /// The first message after a resume is one already delivered, under a new id.
    MessageRepeated,
}

impl Restart {
    /// Every [`Restart::as_str`] word.
    pub const WORDS: [&'static str; 4] =
        ["id-reused", "backwards", "other-stream", "message-repeated"];

    /// A stable word for the evidence: `id-reused`, `backwards`, `other-stream`, `message-repeated`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Restart::IdReused => "id-reused",
            Restart::Backwards => "backwards",
            Restart::OtherStream => "other-stream",
            Restart::MessageRepeated => "message-repeated",
        }
    }
}

impl fmt::Display for Restart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Restart::IdReused => "reuses an id already delivered with different content",
            Restart::Backwards => "goes back to or before the highest id of this numbered stream",
            Restart::OtherStream => "belongs to another stream than this numbered stream",
            Restart::MessageRepeated => "re-sends a message already delivered under a new id",
        })
    }
}

/// What was refused, one kind per row of the decision table. Two kinds do not end the stream:
/// [`RefusalKind::Busy`] (the server refused the resume for now; the same resume is tried again)
/// and [`RefusalKind::DecodeLimit`] (the decoder refused one event; the stream goes on). Every other
/// kind is the guard refusing the stream ([`Refusal::must_renegotiate`] says what follows).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalKind {
    /// `Strict` policy: the connection was cut with a partial event held.
    PartialEvent {
        /// Bytes of the open block.
        bytes: u64,
        /// Its id, if the `id:` line had arrived.
        id: Option<Bytes>,
    },
    /// A dispatched event's data is a proper prefix of a JSON text.
    IncompleteMessage {
        /// The event id.
        id: Option<Bytes>,
        /// Data bytes.
        bytes: usize,
    },
    /// A dispatched event's data is one JSON value followed by more bytes: the signature of a
    /// resumed stream appended onto a partial event.
    TrailingBytes {
        /// The event id.
        id: Option<Bytes>,
        /// Data bytes.
        bytes: usize,
    },
    /// A dispatched event's data is not JSON.
    InvalidMessage {
        /// The event id.
        id: Option<Bytes>,
        /// Data bytes.
        bytes: usize,
    },
    /// The server is not continuing the stream that was cut.
    StreamRestarted {
        /// The id of the event that shows it (`None`: it had none).
        got: Option<Bytes>,
        /// Which evidence.
        why: Restart,
    },
    /// A second, different response to an already-answered request (registered and answered in the
    /// session, or never registered and answered on this stream:
    /// [`GuardConfig::unrequested_window`]).
    DuplicateResponse {
        /// The JSON-RPC request id.
        rpc_id: RpcId,
        /// The event id carrying it.
        event_id: Option<Bytes>,
    },
    /// The replay does not start where the cut stream stopped.
    Gap {
        /// The id the first replayed event had to carry: the interrupted event's, or `cursor + 1`
        /// with [`GuardConfig::contiguous_ids`]. (Boxed, not `Bytes`, to keep the error small.)
        expected: Box<[u8]>,
        /// The id it carried (`None`: no id).
        got: Option<Bytes>,
    },
    /// `404` on reconnect: the session is gone.
    SessionExpired,
    /// `409`/`410` on reconnect, or an `event: error` frame as the answer to a resume: the server
    /// cannot replay.
    ReplayUnavailable {
        /// The status code; `None` for an `event: error` frame.
        status: Option<u16>,
        /// The server's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// `429`/`503` on reconnect: try the same resume again after the delay.
    Busy {
        /// The status code.
        status: u16,
        /// The server's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// The resumed connection brought no event while a response was outstanding.
    ReplayMissed {
        /// `None`: the body ended with no event; `Some`: nothing arrived in this long.
        waited: Option<Duration>,
    },
    /// A cut while a request was outstanding before any event id was committed (the stream carries
    /// none, or the cut came before the first event was complete): there is no `Last-Event-ID` to
    /// resume from, so the response is lost.
    Unresumable {
        /// Bytes of the partial event that was lost, if any.
        partial_bytes: u64,
        /// The interrupted event's id, when its `id:` line had arrived.
        partial_id: Option<Bytes>,
    },
    /// The reconnect answered something other than an event stream.
    UnexpectedResponse {
        /// The status code.
        status: u16,
        /// The content type.
        content_type: Option<String>,
    },
    /// The decoder dropped an event over one of its limits: whatever message it carried is lost.
    /// The guard does not fail: the stream goes on at the next event, as the decoder does.
    DecodeLimit {
        /// The decoder's error.
        error: DecodeError,
    },
}

impl RefusalKind {
    /// Every [`RefusalKind::as_str`] word.
    pub const WORDS: [&'static str; 14] = [
        "partial-event",
        "incomplete-message",
        "trailing-bytes",
        "invalid-message",
        "stream-restarted",
        "duplicate-response",
        "gap",
        "session-expired",
        "replay-unavailable",
        "busy",
        "replay-missed",
        "unresumable",
        "unexpected-response",
        "decode-limit",
    ];

    /// A stable word for the kind, one per variant (the `data.refusal` of an error answer:
    /// [`contract`](crate::contract)).
    pub const fn as_str(&self) -> &'static str {
        match self {
            RefusalKind::PartialEvent { .. } => "partial-event",
            RefusalKind::IncompleteMessage { .. } => "incomplete-message",
            RefusalKind::TrailingBytes { .. } => "trailing-bytes",
            RefusalKind::InvalidMessage { .. } => "invalid-message",
            RefusalKind::StreamRestarted { .. } => "stream-restarted",
            RefusalKind::DuplicateResponse { .. } => "duplicate-response",
            RefusalKind::Gap { .. } => "gap",
            RefusalKind::SessionExpired => "session-expired",
            RefusalKind::ReplayUnavailable { .. } => "replay-unavailable",
            RefusalKind::Busy { .. } => "busy",
            RefusalKind::ReplayMissed { .. } => "replay-missed",
            RefusalKind::Unresumable { .. } => "unresumable",
            RefusalKind::UnexpectedResponse { .. } => "unexpected-response",
            RefusalKind::DecodeLimit { .. } => "decode-limit",
        }
    }
}

impl Refusal {
    /// Whether the caller must open a new session (new `initialize`, new `Mcp-Session-Id`) and
    /// re-issue the outstanding requests. `Busy` only asks to retry the same resume later; a
    /// decoder limit loses one event on a healthy stream (a request whose response it was stays in
    /// [`Refusal::outstanding`]: re-issue it with a larger limit, on the same session); every
    /// other refusal means the stream is lost.
    pub fn must_renegotiate(&self) -> bool {
        !matches!(
            self.kind,
            RefusalKind::Busy { .. } | RefusalKind::DecodeLimit { .. }
        )
    }

    /// The delay the server asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self.kind {
            RefusalKind::ReplayUnavailable { retry_after, .. }
            | RefusalKind::Busy { retry_after, .. } => retry_after,
            _ => None,
        }
    }
}
fn show(id: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(id))
}

fn show_opt(id: &Option<Bytes>) -> String {
    id.as_deref().map_or_else(|| "(none)".to_string(), show)
}

impl fmt::Display for RefusalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefusalKind::PartialEvent { bytes, id } => write!(
                f,
                "connection cut inside an event ({bytes} bytes held, event id {}); strict policy refuses to resume",
                show_opt(id)
            ),
            RefusalKind::IncompleteMessage { id, bytes } => {
                write!(
                    f,
                    "event {} carries an incomplete JSON message ({bytes} bytes)",
                    show_opt(id)
                )
            }
            RefusalKind::TrailingBytes { id, bytes } => write!(
                f,
                "event {} carries one JSON value followed by more bytes ({bytes} bytes): a resumed stream appended onto a partial event",
                show_opt(id)
            ),
            RefusalKind::InvalidMessage { id, bytes } => {
                write!(
                    f,
                    "event {} carries invalid JSON ({bytes} bytes)",
                    show_opt(id)
                )
            }
            RefusalKind::StreamRestarted { got, why } => {
                write!(
                    f,
                    "the server restarted the stream instead of resuming it: event {} {why}",
                    show_opt(got)
                )
            }
            RefusalKind::DuplicateResponse { rpc_id, event_id } => write!(
                f,
                "a second, different response to request {rpc_id} arrived in event {}",
                show_opt(event_id)
            ),
            RefusalKind::Gap { expected, got } => write!(
                f,
                "the replay does not continue the stream: expected event {}, got {}",
                show(expected),
                show_opt(got)
            ),
            RefusalKind::SessionExpired => write!(f, "the session is gone (404 on reconnect)"),
            RefusalKind::ReplayUnavailable {
                status,
                retry_after,
            } => {
                match status {
                    Some(s) => write!(f, "the server cannot replay the stream ({s})")?,
                    None => write!(f, "the server cannot replay the stream (event: error)")?,
                }
                if let Some(d) = retry_after {
                    write!(f, "; retry after {} ms", d.as_millis())?;
                }
                Ok(())
            }
            RefusalKind::Busy {
                status,
                retry_after,
            } => {
                write!(f, "the server is busy ({status})")?;
                if let Some(d) = retry_after {
                    write!(f, "; retry the resume after {} ms", d.as_millis())?;
                }
                Ok(())
            }
            RefusalKind::ReplayMissed { waited: None } => {
                write!(
                    f,
                    "the resumed connection ended without an event while a response was outstanding"
                )
            }
            RefusalKind::ReplayMissed { waited: Some(d) } => write!(
                f,
                "no event arrived within {} ms of resuming while a response was outstanding",
                d.as_millis()
            ),
            RefusalKind::Unresumable {
                partial_bytes,
                partial_id: None,
            } => write!(
                f,
                "the stream was cut with a response outstanding ({partial_bytes} bytes of a partial event lost) and it carries no event ids to resume from"
            ),
            RefusalKind::Unresumable {
                partial_bytes,
                partial_id: Some(id),
            } => write!(
                f,
                "the stream was cut inside its first event {} ({partial_bytes} bytes lost) before any event was complete, so there is no Last-Event-ID to resume from",
                show(id)
            ),
            RefusalKind::UnexpectedResponse {
                status,
                content_type,
            } => write!(
                f,
                "the reconnect answered {status} with content type {}",
                content_type.as_deref().unwrap_or("(none)")
            ),
            RefusalKind::DecodeLimit { error } => {
                write!(f, "an event was dropped by the decoder: {error}")
            }
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; cursor {}", self.kind, show_opt(&self.cursor))?;
        if !self.outstanding.is_empty() {
            f.write_str("; outstanding requests [")?;
            for (i, id) in self.outstanding.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{id}")?;
            }
            f.write_str("]")?;
        }
        if self.must_renegotiate() {
            f.write_str(
                "; this stream cannot deliver them: re-issue only what is safe to run again",
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for Refusal {
    /// The decoder's error behind a [`RefusalKind::DecodeLimit`]; no other kind has a cause
    /// outside the guard.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            RefusalKind::DecodeLimit { error } => Some(error),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
enum Phase {
    /// Events continue the stream in place.
    Streaming,
    /// A reconnect was allowed and no new message has been accepted since (priming events and
    /// exact replays do not count): the first one must show that the stream continues.
    Verifying {
        /// The interrupted event's id, when its `id:` line had arrived: the first new message
        /// must carry it.
        partial_id: Option<Bytes>,
        /// An event was dropped over a decode limit since the resume. It is taken to be the
        /// replay of the interrupted one, whose id the guard never saw: the next id cannot be
        /// checked against the cursor ([`GuardConfig::contiguous_ids`]).
        dropped: bool,
    },
    /// The guard refused; it keeps refusing with the same error.
    Failed(Box<Refusal>),
}

/// The current connection.
#[derive(Clone, Debug, Default)]
struct Connection {
    /// It is a resume (`GET` + `Last-Event-ID`), not the stream's first connection.
    resumed: bool,
    /// Events with an id or data it brought (keep-alives excluded).
    events: u64,
    /// The `Retry-After` of the response that opened it.
    retry_after: Option<Duration>,
}

/// The content hash remembered for an event the decoder dropped over a limit: its content was
/// never read. A later event under the same id that is not dropped again differs from it (unless
/// its hash is this value, a 2^-64 chance), as a restart does.
const DROPPED: u64 = 0x5EED_D20F_FED0_0D1E;

/// The resumption guard. See the [module docs](self).
#[derive(Debug)]
pub struct Guard {
    config: GuardConfig,
    #[cfg(feature = "__testing")]
    gate: Gate,
    phase: Phase,
    cursor: Option<Bytes>,
    /// The window's key (a hash under the guard's random seed) of the `id` of the last event handed
    /// to `on_event`, to notice id-only blocks at a disconnect. A hash, not the id: keeping the id
    /// cost a refcount increment, a decrement and a comparison call per event. Two ids with the same
    /// key (a 2^-64 chance, which a server cannot steer: it does not know the seed) would leave the
    /// cursor one id-only block behind; the server then replays events the window recognises and
    /// skips, and nothing is lost.
    last_seen_id: u64,
    retry: Option<Duration>,
    recent: Window,
    /// Ids of responses to requests not registered in the registry, with their content hash
    /// ([`GuardConfig::unrequested_window`]).
    unrequested: Window,
    shape: Shape,
    registry: Registry,
    #[cfg(feature = "__testing")]
    /// The registry is the session's (built with [`GuardConfig::build_in`]), not this guard's own.
    shared: bool,
    /// The requests whose responses this stream is expected to deliver.
    mine: SmallVec<[RpcId; 2]>,
    conn: Connection,
    ever_resumed: bool,
    stats: Stats,
}

impl Default for Guard {
    fn default() -> Self {
        Guard::new()
    }
}

/// Content hash of an event's data: xxh3 over the segments, no copy, the same for any chunking.
fn content_hash(data: &Data) -> u64 {
    match data.segments() {
        [] => xxh3_64(b""),
        [one] => xxh3_64(one),
        _ => {
            let mut h = Xxh3::new();
            for chunk in data.chunks() {
                h.update(chunk);
            }
            h.digest()
        }
    }
}

/// The JSON-RPC peek of a message `gate` has just judged `Complete` (`None` for any other verdict),
/// made from the top-level keys the gate recorded: only those keys and the `id` are read.
pub(crate) fn gated_peek(gate: &Gate, data: &Data) -> Option<RpcPeek> {
    (gate.verdict() == Verdict::Complete)
        .then(|| crate::message::peek_recorded(data, gate.top_keys()))
}

/// Judges `data` with `gate`, and for data in several segments hashes it in the same pass. Data in
/// one segment (or none) is not hashed here: its hash is a separate pass whatever is done, so the
/// guard takes it only when a rule can read it ([`Guard::decide`]).
pub(crate) fn gate_and_hash(gate: &mut Gate, data: &Data) -> (Verdict, Option<u64>) {
    match data.segments() {
        [] | [_] => (gate.check(data), None),
        _ => {
            let mut h = Xxh3::new();
            let verdict = gate.check_with(data, |segment| h.update(segment));
            (verdict, Some(h.digest()))
        }
    }
}

impl Guard {
    /// A guard with the default [`GuardConfig`].
    pub fn new() -> Guard {
        GuardConfig::default().guard()
    }

    #[cfg(feature = "__testing")]
    /// Settings to build a guard from.
    pub fn config() -> GuardConfig {
        GuardConfig::default()
    }

    /// Registers a request whose response this stream must deliver (and, in the session's
    /// [`Registry`], as outstanding).
    pub fn expect_response(&mut self, id: RpcId) {
        if !self.mine.contains(&id) {
            self.mine.push(id.clone());
        }
        self.registry.expect(id);
    }

    #[cfg(feature = "__testing")]
    /// The session registry this guard uses.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Requests this stream must still deliver: registered with [`Guard::expect_response`] and not
    /// answered anywhere in the session (nor forgotten).
    pub fn outstanding(&self) -> Vec<RpcId> {
        let mut mine = self.mine.clone();
        self.registry.retain_outstanding(&mut mine);
        mine.into_vec()
    }

    /// The last fully processed event id: the `Last-Event-ID` to resume from.
    pub fn cursor(&self) -> Option<&Bytes> {
        self.cursor.as_ref()
    }

    /// The reconnect delay the server asked for last (`retry:`, or a reconnect's `Retry-After`);
    /// `None` until it asks. The stream applies its default and bounds
    /// ([`resume::StreamConfig`](crate::resume::StreamConfig)).
    pub fn server_retry(&self) -> Option<Duration> {
        self.retry
    }

    /// Whether the current connection is a resume that has not brought an event yet: the replay
    /// timeout runs ([`Guard::on_replay_timeout`]).
    pub fn is_resuming(&self) -> bool {
        self.conn.resumed && self.conn.events == 0 && !matches!(self.phase, Phase::Failed(_))
    }

    /// The refusal the guard is stuck on, if any.
    pub fn failure(&self) -> Option<&Refusal> {
        match &self.phase {
            Phase::Failed(e) => Some(e),
            _ => None,
        }
    }

    #[cfg(feature = "__testing")]
    /// The instruction set the guard's gate runs on ([`GuardConfig::max_isa`] caps it).
    pub fn gate_isa(&self) -> Isa {
        self.gate.isa()
    }

    /// The guard's settings.
    pub(crate) fn settings(&self) -> &GuardConfig {
        &self.config
    }

    /// Counters so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    #[cfg(feature = "__testing")]
    /// Forgets the stream (after a renegotiation): cursor, dedup windows and the refusal. Keeps
    /// the settings and the requests this stream had to deliver, which the caller re-issues. A
    /// private registry starts afresh with them; a shared one is kept as it is.
    pub fn reset(&mut self) {
        let mine = self.outstanding();
        let registry = self.registry.clone();
        let shared = self.shared;
        *self = self.config.build_with(registry.clone(), shared);
        if !shared {
            registry.clear();
        }
        for id in mine {
            self.expect_response(id);
        }
    }

    #[cold]
    fn boundary(&self, kind: RefusalKind) -> Refusal {
        Refusal {
            kind,
            cursor: self.cursor.clone(),
            outstanding: self.outstanding(),
        }
    }

    #[cold]
    fn refuse(&mut self, kind: RefusalKind) -> Refusal {
        let err = self.boundary(kind);
        self.phase = Phase::Failed(Box::new(err.clone()));
        err
    }

    fn check_failed(&self) -> Result<(), Refusal> {
        match &self.phase {
            Phase::Failed(e) => Err((**e).clone()),
            _ => Ok(()),
        }
    }

    /// Whether a response this stream must deliver is still outstanding in the session; drops
    /// the ones answered elsewhere or forgotten.
    fn needed(&mut self) -> bool {
        self.registry.retain_outstanding(&mut self.mine);
        !self.mine.is_empty()
    }

    #[cfg(feature = "__testing")]
    /// Gates `event`'s data itself and decides. See [`Guard::on_event_with_verdict`].
    pub fn on_event(&mut self, event: Event) -> Result<Decision, Refusal> {
        // Empty data is `Incomplete` (and not looked at): only non-empty data can be a message.
        let (verdict, hash) = gate_and_hash(&mut self.gate, &event.data);
        let rpc = gated_peek(&self.gate, &event.data);
        self.decide(event, verdict, hash, rpc)
    }

    #[cfg(feature = "__testing")]
    /// Decides about one dispatched event whose data the caller already gated.
    pub fn on_event_with_verdict(
        &mut self,
        event: Event,
        verdict: Verdict,
    ) -> Result<Decision, Refusal> {
        self.decide(event, verdict, None, None)
    }

    /// The decision about one dispatched event: `verdict` is the gate's, `hash` is [`content_hash`]
    /// of the data when the caller took it on the gate's pass ([`gate_and_hash`]), `rpc` the
    /// JSON-RPC peek when the caller made it from the gate's key record ([`gated_peek`]; otherwise a
    /// message is peeked here), so nothing reads the message again.
    ///
    /// The content hash is read by the rules on an event's own id (the replay window: exact replay,
    /// id reused), on the first message after a resume (its interrupted id, a message repeated
    /// under a new id) and on a response's JSON-RPC id (duplicate responses). An event with none of
    /// these (a notification or a request without an event id, on a stream that is not verifying a
    /// resume) is never hashed: `hash` is taken here, from `event`'s data, only when a rule reads
    /// it.
    pub(crate) fn decide(
        &mut self,
        mut event: Event,
        verdict: Verdict,
        hash: Option<u64>,
        rpc: Option<RpcPeek>,
    ) -> Result<Decision, Refusal> {
        self.check_failed()?;
        self.stats.events += 1;
        // The id's window key: the last seen id, and the key of the event's own id when it has one.
        let key = self.recent.key(&event.last_event_id);
        self.last_seen_id = key;
        if let Some(ms) = event.retry {
            self.retry = Some(Duration::from_millis(ms));
        }
        // Moved out, not cloned: nothing below reads `event.id` (a refcount pair saved per event).
        let own_id = (event.has_own_id && !event.last_event_id.is_empty())
            .then(|| std::mem::take(&mut event.last_event_id));
        if event.event.as_deref() == Some(b"error".as_slice()) {
            if self.conn.resumed && self.conn.events == 0 {
                return Err(self.refuse(RefusalKind::ReplayUnavailable {
                    status: None,
                    retry_after: self.conn.retry_after,
                }));
            }
            if event.data.is_empty() || verdict != Verdict::Complete {
                self.stats.skipped += 1;
                return Ok(Decision::Skip(Skip::ErrorFrame { id: own_id }));
            }
        }
        let Some(id) = own_id.as_ref().filter(|_| event.data.is_empty()) else {
            if event.data.is_empty() {
                return Ok(Decision::Skip(Skip::KeepAlive));
            }
            let key = own_id.as_ref().map(|_| key);
            return self.on_message(event, verdict, own_id, key, hash, rpc);
        };
        // A priming event: it moves the cursor and proves nothing about the content, wherever it
        // comes. Its own id reads the hash (the replay window).
        let hash = hash.unwrap_or_else(|| content_hash(&event.data));
        self.conn.events += 1;
        if let Some(seen) = self.recent.get(key) {
            return self.replayed(id, seen, hash);
        }
        // Its id shows the stream's id shape before any cut (`0/A` then `1/A`; a lone `0/A` before
        // a result), so that a resume answered with another stream's ids is evidence. After a
        // resume a fresh priming id proves nothing (some servers open every connection with one).
        if !self.ever_resumed {
            let _ = self.shape.observe(id, false);
        }
        if matches!(self.phase, Phase::Verifying { dropped: false, .. }) {
            self.check_contiguous(id)?;
        }
        self.recent.insert(key, hash, false, self.config.window);
        self.cursor = own_id.clone();
        Ok(Decision::Cursor(id.clone()))
    }

    /// An id already remembered: an exact replay, or a restart.
    fn replayed(&mut self, id: &Bytes, seen: u64, hash: u64) -> Result<Decision, Refusal> {
        if seen == hash {
            self.stats.skipped += 1;
            return Ok(Decision::Skip(Skip::ExactReplay { id: id.clone() }));
        }
        Err(self.refuse(RefusalKind::StreamRestarted {
            got: Some(id.clone()),
            why: Restart::IdReused,
        }))
    }

    /// With [`GuardConfig::contiguous_ids`], a new id after a resume must be `cursor + 1`.
    fn check_contiguous(&mut self, id: &Bytes) -> Result<(), Refusal> {
        if !self.config.contiguous_ids {
            return Ok(());
        }
        let expected = self.cursor.as_deref().and_then(|c| not_next(c, id));
        match expected {
            Some(expected) => Err(self.refuse(RefusalKind::Gap {
                expected: expected.to_vec().into_boxed_slice(),
                got: Some(id.clone()),
            })),
            None => Ok(()),
        }
    }

    fn on_message(
        &mut self,
        event: Event,
        verdict: Verdict,
        own_id: Option<Bytes>,
        key: Option<u64>,
        hash: Option<u64>,
        rpc: Option<RpcPeek>,
    ) -> Result<Decision, Refusal> {
        self.conn.events += 1;
        // The rules on the event's own id and on a resume read the content hash: taken now. A
        // response's id reads it too; taken below, once the peek shows one (other messages without
        // an id of their own are never hashed).
        let hash = match hash {
            None if own_id.is_some() || matches!(self.phase, Phase::Verifying { .. }) => {
                Some(content_hash(&event.data))
            }
            hash => hash,
        };
        if let (Some(id), Some(key)) = (&own_id, key)
            && let Some(seen) = self.recent.get(key)
        {
            return self.replayed(id, seen, hash.expect("hashed: the event has its own id"));
        }
        if let Phase::Verifying {
            partial_id,
            dropped,
        } = &self.phase
        {
            let (partial_id, dropped) = (partial_id.clone(), *dropped);
            let hash = hash.expect("hashed: the stream is verifying a resume");
            self.verify_first(partial_id, dropped, own_id.as_ref(), hash)?;
            self.phase = Phase::Streaming;
        }
        if let Some(id) = &own_id
            && let Some(why) = self.shape.observe(id, self.ever_resumed)
        {
            return Err(self.refuse(RefusalKind::StreamRestarted {
                got: own_id.clone(),
                why,
            }));
        }
        let bytes = event.data.len();
        match verdict {
            Verdict::Complete => {}
            Verdict::Incomplete => {
                return Err(self.refuse(RefusalKind::IncompleteMessage { id: own_id, bytes }));
            }
            Verdict::Trailing => {
                return Err(self.refuse(RefusalKind::TrailingBytes { id: own_id, bytes }));
            }
            Verdict::Invalid => {
                return Err(self.refuse(RefusalKind::InvalidMessage { id: own_id, bytes }));
            }
        }
        let message = Message::new(event.data);
        let rpc = rpc.unwrap_or_else(|| message.jsonrpc_peek());
        let mut hash = hash;
        if let (RpcKind::Response, Some(rpc_id)) = (rpc.kind, &rpc.id) {
            let content = *hash.get_or_insert_with(|| content_hash(message.data()));
            let answer = match self.registry.answer(rpc_id, content) {
                Response::Unrequested => self.unrequested(rpc_id, content),
                answer => answer,
            };
            match answer {
                Response::Identical => {
                    self.stats.skipped += 1;
                    self.remember(own_id, key, hash);
                    return Ok(Decision::Skip(Skip::DuplicateResponse {
                        rpc_id: rpc_id.clone(),
                    }));
                }
                Response::Different => {
                    return Err(self.refuse(RefusalKind::DuplicateResponse {
                        rpc_id: rpc_id.clone(),
                        event_id: own_id,
                    }));
                }
                Response::New | Response::Unrequested => self.mine.retain(|o| o != rpc_id),
            }
        }
        self.remember(own_id.clone(), key, hash);
        self.stats.delivered += 1;
        self.stats.delivered_bytes += bytes as u64;
        Ok(Decision::Deliver(Delivery {
            message,
            event_id: own_id,
            event_type: event.event,
            rpc,
        }))
    }

    /// A response to a request the registry does not know: compared with an earlier response to the
    /// same id on this stream (within [`GuardConfig::unrequested_window`]), and remembered when it is
    /// the first. `Identical` and `Different` as for an answered request; `Unrequested` otherwise.
    fn unrequested(&mut self, rpc_id: &RpcId, hash: u64) -> Response {
        if *rpc_id == RpcId::Null {
            // Error responses to unparseable requests: any number of them may differ.
            return Response::Unrequested;
        }
        let key = self.unrequested.rpc_key(rpc_id);
        match self.unrequested.get(key) {
            Some(seen) if seen == hash => Response::Identical,
            Some(_) => Response::Different,
            None => {
                self.unrequested
                    .insert(key, hash, true, self.config.unrequested_window);
                Response::Unrequested
            }
        }
    }

    /// Remembers a delivered (or identically re-sent) message under its own id, whose window key
    /// is `key`, and moves the cursor there.
    fn remember(&mut self, own_id: Option<Bytes>, key: Option<u64>, hash: Option<u64>) {
        if let (Some(id), Some(key)) = (own_id, key) {
            let hash = hash.expect("hashed: the event has its own id");
            self.recent.insert(key, hash, true, self.config.window);
            self.cursor = Some(id);
        }
    }

    /// The first new message after a resume must continue the stream that was cut.
    fn verify_first(
        &mut self,
        partial_id: Option<Bytes>,
        dropped: bool,
        got: Option<&Bytes>,
        hash: u64,
    ) -> Result<(), Refusal> {
        if partial_id.is_some() && partial_id.as_ref() == got {
            return Ok(());
        }
        if self.recent.has_message(hash) {
            return Err(self.refuse(RefusalKind::StreamRestarted {
                got: got.cloned(),
                why: Restart::MessageRepeated,
            }));
        }
        if let Some(expected) = partial_id {
            return Err(self.refuse(RefusalKind::Gap {
                expected: expected.to_vec().into_boxed_slice(),
                got: got.cloned(),
            }));
        }
        match got {
            Some(id) if !dropped => self.check_contiguous(id),
            _ => Ok(()),
        }
    }

    /// The connection ended (cleanly or cut). Returns where and when to reconnect, or a refusal.
    pub fn on_disconnect(&mut self, end: ConnectionEnd) -> Result<Resume, Refusal> {
        self.check_failed()?;
        if let Some(ms) = end.retry {
            self.retry = Some(Duration::from_millis(ms));
        }
        let partial = end.partial.filter(|p| p.bytes > 0);
        let needed = self.needed();
        if self.conn.resumed && self.conn.events == 0 && partial.is_none() && needed {
            return Err(self.refuse(RefusalKind::ReplayMissed { waited: None }));
        }
        let mut partial_id = None;
        match &self.phase {
            Phase::Verifying { partial_id: p, .. } => partial_id = p.clone(),
            // An id-only block after the last event committed an id the guard never saw as an event.
            Phase::Streaming if self.recent.key(&end.last_event_id) != self.last_seen_id => {
                self.cursor = (!end.last_event_id.is_empty()).then(|| end.last_event_id.clone());
                self.last_seen_id = self.recent.key(&end.last_event_id);
            }
            _ => {}
        }
        if let Some(p) = &partial {
            if self.config.policy == Policy::Strict {
                return Err(self.refuse(RefusalKind::PartialEvent {
                    bytes: p.bytes,
                    id: p.id.clone(),
                }));
            }
            self.stats.discarded_partials += 1;
            self.stats.discarded_bytes += p.bytes;
            // The interrupted event must come next only if it was a message (some data had
            // arrived: a cut priming event proves nothing) and not the replay of an event already
            // delivered.
            if let Some(id) = &p.id
                && p.data_len > 0
                && self.recent.get(self.recent.key(id)).is_none()
            {
                partial_id = Some(id.clone());
            }
        }
        if self.cursor.is_none() && needed {
            let partial_bytes = partial.as_ref().map_or(0, |p| p.bytes);
            let partial_id = partial.and_then(|p| p.id);
            return Err(self.refuse(RefusalKind::Unresumable {
                partial_bytes,
                partial_id,
            }));
        }
        self.phase = Phase::Verifying {
            partial_id,
            dropped: false,
        };
        self.conn = Connection {
            resumed: true,
            ..Connection::default()
        };
        self.ever_resumed = true;
        self.stats.resumes += u64::from(needed);
        Ok(Resume {
            last_event_id: self.cursor.clone(),
            delay: self.retry.unwrap_or_default(),
            discarded: partial,
            needed,
        })
    }

    /// The reconnect was answered: checks the status and content type before any event is read.
    pub fn on_reconnect(&mut self, response: &ReconnectResponse) -> Result<(), Refusal> {
        self.check_failed()?;
        if let Some(d) = response.retry_after {
            self.retry = Some(d);
        }
        let retry_after = response.retry_after;
        self.conn.retry_after = retry_after;
        match response.status {
            200 => {
                let is_sse = response
                    .content_type
                    .as_deref()
                    .and_then(|ct| ct.split(';').next())
                    .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("text/event-stream"));
                if is_sse {
                    Ok(())
                } else {
                    Err(self.refuse(RefusalKind::UnexpectedResponse {
                        status: 200,
                        content_type: response.content_type.clone(),
                    }))
                }
            }
            404 => Err(self.refuse(RefusalKind::SessionExpired)),
            409 | 410 => Err(self.refuse(RefusalKind::ReplayUnavailable {
                status: Some(response.status),
                retry_after,
            })),
            // Transient: the same resume may be tried again, so the guard does not fail.
            429 | 503 => Err(self.boundary(RefusalKind::Busy {
                status: response.status,
                retry_after,
            })),
            status => Err(self.refuse(RefusalKind::UnexpectedResponse {
                status,
                content_type: response.content_type.clone(),
            })),
        }
    }

    /// The resumed connection has brought no event for `waited` (at least the replay timeout).
    /// Refuses when a response this stream must deliver is outstanding; a connection that brought
    /// any event (a priming event included) is not waiting for its replay any more.
    pub fn on_replay_timeout(&mut self, waited: Duration) -> Result<(), Refusal> {
        self.check_failed()?;
        if self.is_resuming() && self.needed() {
            return Err(self.refuse(RefusalKind::ReplayMissed {
                waited: Some(waited),
            }));
        }
        Ok(())
    }

    /// The decoder dropped an event over a limit ([`RefusalKind::DecodeLimit`]): reports the loss without
    /// failing the guard. The decoder has resynchronised at the next blank line and the guard
    /// goes on with the next event; the cursor stays where it was (at a disconnect it moves to the
    /// dropped event's id if the decoder committed it, so a resume does not fetch it again).
    /// After a resume, the dropped event is taken to be the replay of the interrupted one.
    ///
    /// The dropped event's own id ([`DecodeError::id`]), when the decoder read it, is remembered
    /// as seen: a later cut inside a re-sent copy of it is then a replay of a known event, not an
    /// interrupted one the next connection must continue with.
    pub fn on_decode_error(&mut self, error: &DecodeError) -> Refusal {
        if let Err(e) = self.check_failed() {
            return e;
        }
        if let Some(id) = error.id().filter(|id| !id.is_empty()) {
            let key = self.recent.key(id);
            if self.recent.get(key).is_none() {
                self.recent.insert(key, DROPPED, false, self.config.window);
            }
        }
        self.conn.events += 1;
        if let Phase::Verifying {
            partial_id,
            dropped,
        } = &mut self.phase
        {
            *partial_id = None;
            *dropped = true;
        }
        self.boundary(RefusalKind::DecodeLimit {
            error: error.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[test]
    fn a_decode_limit_refusal_has_the_decoder_error_as_its_source() {
        use std::error::Error as _;
        let error = DecodeError::EventTooLarge {
            limit: 8,
            offset: 0,
            id: None,
        };
        let refusal = Refusal {
            kind: RefusalKind::DecodeLimit {
                error: error.clone(),
            },
            cursor: None,
            outstanding: vec![],
        };
        let source = refusal.source().expect("a source");
        assert_eq!(source.downcast_ref::<DecodeError>(), Some(&error));
        let gone = Refusal {
            kind: RefusalKind::SessionExpired,
            cursor: None,
            outstanding: vec![],
        };
        assert!(gone.source().is_none());
    }

    /// The hash taken on the gate's pass is the content hash of the whole message however it is
    /// cut, and the verdict is the gate's own.
    #[test]
    fn gate_and_hash_is_the_content_hash_for_any_rope() {
        let text = br#"{"jsonrpc":"2.0","id":3,"result":{"text":"a \"long\" text, cut anywhere"}}"#;
        let whole = xxh3_64(text);
        let mut gate = Gate::new();
        for a in 0..=text.len() {
            for b in a..=text.len() {
                let mut data = Data::new();
                for piece in [&text[..a], &text[a..b], &text[b..]] {
                    if !piece.is_empty() {
                        data.push_segment(Bytes::copy_from_slice(piece));
                    }
                }
                let (verdict, hash) = gate_and_hash(&mut gate, &data);
                // One segment is hashed only where a rule reads it (`Guard::decide`), alike.
                assert_eq!(hash.is_some(), data.segments().len() > 1, "cut at {a}, {b}");
                assert_eq!(
                    (verdict, hash.unwrap_or_else(|| content_hash(&data))),
                    (Verdict::Complete, whole),
                    "cut at {a}, {b}"
                );
            }
        }
        assert_eq!(gate_and_hash(&mut gate, &Data::new()).1, None);
        assert_eq!(content_hash(&Data::new()), xxh3_64(b""));
    }
}
