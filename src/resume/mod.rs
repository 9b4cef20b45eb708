//! The sans-IO resumable stream: one state machine for one logical SSE stream (a POST response and
//! all its resumptions, or a standalone `GET` stream) that owns the [`Decoder`], the [`Gate`] and
//! the resumption guard, and makes every reconnect decision.
//!
//! It does no IO and reads no clock. The driver (an HTTP client, `ssegate check`, the
//! [`futures::Stream` adapter](crate::sse), your own transport) tells it what happened and when:
//!
//! | driver calls | when |
//! | --- | --- |
//! | [`ResumableStream::feed`] | a body chunk arrived |
//! | [`ResumableStream::connection_ended`] | the body ended or failed |
//! | [`ResumableStream::reconnect_response`] | a reconnect request got its status and headers |
//! | [`ResumableStream::reconnect_failed`] | a reconnect request failed before a response head |
//! | [`ResumableStream::handle_timeout`] | the deadline of [`ResumableStream::poll_timeout`] passed |
//!
//! and after each call drains [`ResumableStream::poll`], which hands back one [`Output`] at a time:
//! messages to deliver, events skipped, the cursor moving, a connection to drop
//! ([`Output::Disconnected`]), a reconnect to send now ([`Output::Reconnect`], with the
//! `Last-Event-ID` as raw bytes), the end of the stream, or a terminal [`Failure`]. Timing rules
//! (the server's `retry`, `Retry-After` in both forms, clamps, jittered backoff, the replay timeout
//! that runs while no bytes arrive, the idle timeout) live here, so a driver never guesses them.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use bytes::Bytes;
//! use ssegate::message::RpcId;
//! use ssegate::resume::{EndCause, Output, ReconnectResponse, ResumableStream};
//!
//! let mut stream = ResumableStream::new();
//! stream.expect_response(RpcId::Number(1));
//! let now = Instant::now();
//! // The response is cut inside its result event, after an event with id 7.
//! stream.feed(Bytes::from_static(b"id: 7\ndata:\n\nid: 8\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"res"), now);
//! stream.connection_ended(EndCause::Error, now);
//! let mut reconnect = None;
//! let mut now = now;
//! loop {
//!     match stream.poll() {
//!         Some(Output::Reconnect(r)) => { reconnect = Some(r); break; }
//!         Some(_) => {}
//!         None => {
//!             now = stream.poll_timeout().expect("a reconnect is scheduled");
//!             stream.handle_timeout(now);
//!         }
//!     }
//! }
//! assert_eq!(reconnect.unwrap().last_event_id.as_deref(), Some(&b"7"[..]));
//! // The server replays the interrupted event whole.
//! stream.reconnect_response(&ReconnectResponse::event_stream(), now);
//! stream.feed(Bytes::from_static(b"id: 8\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"), now);
//! let Some(Output::Deliver(d)) = stream.poll() else { panic!() };
//! assert_eq!(d.message.len(), 36);
//! ```
//!
//! # Decisions
//!
//! The stream decides through its guard, on evidence.
//!
//! A false refusal makes the client renegotiate and re-issue the call (the tool runs twice), so the
//! guard refuses a resumed stream only on evidence:
//!
//! - the interrupted event's id was known and the first message after the resume carries another
//!   id ([`RefusalKind::Gap`]);
//! - an id already delivered comes back with other content, a message already delivered comes back
//!   under a new id as the first message after a resume, or the ids of a stream that has shown one
//!   numbered shape consistently go backwards or name another stream after a resume
//!   ([`RefusalKind::StreamRestarted`] with its [`Restart`] reason);
//! - a second, different response to an answered request anywhere in the session, or (for a request
//!   never registered) on the same stream ([`RefusalKind::DuplicateResponse`]);
//! - a resumed connection that brings no event at all (ends, or stays silent for the replay
//!   timeout) while a response is outstanding ([`RefusalKind::ReplayMissed`]).
//!
//! Event ids are opaque: they are compared for equality (as seeded hashes) and ordered only once a
//! stream's ids have shown one numbered shape (`17`, `17/<stream>`, `<stream>-17`, `<ms>-<seq>`) at
//! least twice, strictly increasing on one stream part. The ids of the first connection count,
//! priming ids included; uuids (`8-4-4-4-12` hex) never parse as a shape. Numbers need not be
//! contiguous (MCP servers may number all streams of a session with one counter); "exactly
//! `cursor + 1`" is required only with [`GuardConfig::contiguous_ids`]. After a resume a single earlier
//! id is evidence enough when the shape names its stream: a message id of the same shape naming
//! another stream (`5/B` after `0/A`, `B-5` after `A-0`) is another stream's event, and the same
//! stream going back is a restart. A priming event's content (empty) proves nothing either way,
//! wherever it comes.
//!
//! ## What the ids cannot show
//!
//! Opaque ids (uuids, `<stream>_<ms>_<random>`) and ids without a stream part (`17`, one counter
//! for the session) carry no stream identity: a server that answers a resume with another
//! stream's new events under such ids is indistinguishable, by its ids, from one that continues.
//! What still catches it is content: an event id already seen with other content, a message
//! already delivered under a new id as the first message after the resume, and a second response
//! to a request the session (or, unregistered, the stream) already answered with other content.
//!
//! ## Decision table (as built)
//!
//! | moment | condition | decision |
//! | --- | --- | --- |
//! | event | non-empty data, `Complete`, id not in the window | `Deliver`; cursor := id |
//! | event | empty data with an id (priming), anywhere | `Cursor(id)`; proves nothing either way |
//! | event | empty data, no id | `Skip(KeepAlive)` (not an event for the replay checks) |
//! | event | verdict `Incomplete` / `Trailing` / `Invalid` | `IncompleteMessage` / `TrailingBytes` / `InvalidMessage` |
//! | event | id in the window, same content hash | `Skip(ExactReplay)` |
//! | event | id in the window, other content | `StreamRestarted(IdReused)` |
//! | event | response to a requested id already answered in the session | identical: `Skip(DuplicateResponse)`; else `DuplicateResponse` |
//! | event | response to an id never registered, already answered on this stream (the last [`GuardConfig::unrequested_window`] such ids; never a `null` id; notifications and the server's requests are not responses) | identical: `Skip(DuplicateResponse)`; else `DuplicateResponse`; an id past the window is delivered as new |
//! | event | `event: error`, first event of a resumed connection | `ReplayUnavailable { status: None }` |
//! | event | `event: error` elsewhere, data not a complete JSON value | `Skip(ErrorFrame)` |
//! | decode error | the decoder dropped an event over a limit | `Output::Dropped`; the stream goes on (`GuardedStream` and the client end a call whose response is outstanding with it) |
//! | disconnect | at a boundary, or a partial event (`Verified`) | `Resume { last_event_id: cursor, needed }` |
//! | disconnect | partial event, `Strict` | `PartialEvent` |
//! | disconnect | no cursor, a response outstanding | `Unresumable` |
//! | disconnect | resumed connection with no event, no partial, response outstanding | `ReplayMissed { waited: None }` |
//! | reconnect | `404` / `409`, `410` / `429`, `503` / other or not SSE | `SessionExpired` / `ReplayUnavailable` / `Busy` (transient) / `UnexpectedResponse` |
//! | timeout | resumed connection with no event yet, response outstanding | `ReplayMissed { waited }` |
//! | first message after a resume | the interrupted message's id was known (id line and data had arrived) and this is another id | `Gap` |
//! | first message after a resume | its content equals a message in the window, under a new id | `StreamRestarted(MessageRepeated)` |
//! | first event with an id after a resume, [`GuardConfig::contiguous_ids`] | not `cursor + 1` in the cursor's shape | `Gap` |
//! | message after any resume | numbered stream: id not above the highest / other stream part | `StreamRestarted(Backwards / OtherStream)` |
//! | message after any resume | one earlier id (a priming one counts) of `N/<stream>` or `<stream>-N` shape: same stream not above it / another stream part | `StreamRestarted(Backwards / OtherStream)` |
//!
//! "Outstanding" means registered with [`ResumableStream::expect_response`] and not answered anywhere in
//! the session's [`Registry`] (nor forgotten): a response delivered on another stream of the
//! session ends this stream's need to resume.
//!
//! ## `event: error`
//!
//! An `event: error` frame is the server's refusal to resume only as the answer to a resume: the
//! first event of a resumed connection ([`RefusalKind::ReplayUnavailable`], with the reconnect response's
//! `Retry-After`, if any). Elsewhere it is not JSON-RPC by its type alone: one whose data is a
//! complete JSON value is judged like any other event (and delivered with its event type), any
//! other is skipped ([`Skip::ErrorFrame`]). Its data is never searched for a delay.
#![forbid(unsafe_code)]

use std::fmt;
use std::time::{Duration, Instant};

use crate::hash::Xxh3;
use bytes::Bytes;

use crate::contract;
use crate::gate::{Gate, Verdict};
use crate::guard::{self, ConnectionEnd, Decision, Guard};
use crate::inspect::EventInfo;
use crate::message::RpcId;
use crate::sse::{self, Decoder};

// The guard's types a driver of the stream names: its settings, its outputs and its refusals.
pub use crate::guard::{
    DEFAULT_UNREQUESTED_WINDOW, Delivery, GuardConfig, Policy, ReconnectResponse, Refusal,
    RefusalKind, Registry, Restart, Resume, Skip, Stats, parse_retry_after,
};

#[cfg(feature = "guarded-stream")]
pub mod stream;

/// Settings of a [`ResumableStream`]. A setter is named after its setting, takes `&mut self` and
/// chains; a part with settings of its own is read with `<part>_ref()` and edited in place with
/// `<part>_mut()`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct StreamConfig {
    decoder: sse::DecoderConfig,
    guard: GuardConfig,
    replay_timeout: Duration,
    default_retry: Duration,
    max_delay: Duration,
    min_delay: Duration,
    idle_timeout: Option<Duration>,
    max_resumes: u32,
    max_stalled_resumes: u32,
    max_reconnect_attempts: u32,
    backoff: Duration,
    keep_open: bool,
    jitter_seed: Option<u64>,
    gate_ahead: usize,
}

// Defaults of [`StreamConfig::idle_timeout`] and [`StreamConfig::min_delay`], defined with every
// other default in the contract.
pub use crate::contract::{DEFAULT_IDLE_TIMEOUT, DEFAULT_MIN_DELAY};

impl Default for StreamConfig {
    /// The decoder's and the guard's defaults; a 10 s replay timeout; a 1 s reconnect delay until
    /// the server asks for another; server delays clamped to 60 s, and never below
    /// 250 ms (jittered up to +50 %); a 300 s idle timeout; 32 resumes per stream, at most 4 in a
    /// row without progress; 6 reconnect attempts per resume with a 250 ms jittered exponential
    /// backoff; jitter seeded from the OS; the stream finishes when nothing is outstanding.
    fn default() -> Self {
        StreamConfig {
            decoder: sse::DecoderConfig::default(),
            guard: GuardConfig::default(),
            replay_timeout: contract::DEFAULT_REPLAY_TIMEOUT,
            default_retry: contract::DEFAULT_RETRY,
            max_delay: contract::DEFAULT_MAX_DELAY,
            min_delay: DEFAULT_MIN_DELAY,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            max_resumes: contract::DEFAULT_MAX_RESUMES,
            max_stalled_resumes: contract::DEFAULT_MAX_STALLED_RESUMES,
            max_reconnect_attempts: contract::DEFAULT_MAX_RECONNECT_ATTEMPTS,
            backoff: contract::DEFAULT_BACKOFF,
            keep_open: false,
            jitter_seed: None,
            gate_ahead: AHEAD_MIN,
        }
    }
}

impl StreamConfig {
    /// The decoder's limits (replaces them; [`StreamConfig::decoder_mut`] edits them in place).
    pub fn decoder(&mut self, config: sse::DecoderConfig) -> &mut Self {
        self.decoder = config;
        self
    }

    /// The decoder's limits.
    pub fn decoder_ref(&self) -> &sse::DecoderConfig {
        &self.decoder
    }

    /// The decoder's limits, to edit in place.
    pub fn decoder_mut(&mut self) -> &mut sse::DecoderConfig {
        &mut self.decoder
    }

    /// The guard's settings: policy, id windows, contiguous ids, the gate's nesting limit and
    /// instruction-set cap (replaces them; [`StreamConfig::guard_mut`] edits them in place).
    pub fn guard(&mut self, config: GuardConfig) -> &mut Self {
        self.guard = config;
        self
    }

    /// The guard's settings, to edit in place.
    pub fn guard_mut(&mut self) -> &mut GuardConfig {
        &mut self.guard
    }

    /// The guard's settings.
    pub fn guard_ref(&self) -> &GuardConfig {
        &self.guard
    }

    /// How long a resumed connection may bring no byte while a response it owes is outstanding,
    /// before the stream refuses it ([`RefusalKind::ReplayMissed`]); runs from the last byte received,
    /// not from the reconnect (default 10 s).
    pub fn replay_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.replay_timeout = timeout;
        self
    }

    /// The reconnect delay until the server asks for one with `retry:` or `Retry-After`
    /// (default 1 s), raised to [`StreamConfig::min_delay`] and clamped by [`StreamConfig::max_delay`] like any.
    pub fn default_retry(&mut self, delay: Duration) -> &mut Self {
        self.default_retry = delay;
        self
    }

    /// The delay before repeating a request the server answered `429`/`503` (a driver's retry of
    /// its own request, outside any stream): the server's `asked` delay or the first backoff
    /// step, raised to the jittered floor and clamped like a reconnect's. The jitter comes from
    /// [`StreamConfig::jitter_seed`] when one is set (the same delay for the same seed), else
    /// from the OS.
    #[cfg(feature = "client")]
    pub(crate) fn busy_delay(&self, asked: Option<Duration>) -> Duration {
        let seed = self.jitter_seed.unwrap_or_else(crate::guard::random_seed);
        // One SplitMix64 step: unlike a first xorshift step, it spreads a small seed's bits over
        // the whole fraction.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let jitter = ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64;
        self.bounded(asked.unwrap_or(self.backoff), jitter)
    }

    /// `delay` raised to the floor ([`StreamConfig::min_delay`], jittered up by `jitter / 2`,
    /// `jitter` in [0, 1)) and clamped to [`StreamConfig::max_delay`].
    fn bounded(&self, delay: Duration, jitter: f64) -> Duration {
        let floor = self.min_delay.mul_f64(1.0 + jitter / 2.0);
        delay.max(floor).min(self.max_delay)
    }

    /// The longest delay a server may ask for with `retry:` or `Retry-After` (default 60 s): a
    /// hostile or confused server cannot park the client for longer.
    pub fn max_delay(&mut self, delay: Duration) -> &mut Self {
        self.max_delay = delay;
        self
    }

    /// The shortest delay before any reconnect (default 250 ms), whatever the server's `retry:`
    /// or `Retry-After` says (`retry: 0` would otherwise make a reconnect storm), jittered up to
    /// +50 % so that clients cut together do not reconnect together. Never above
    /// [`StreamConfig::max_delay`].
    pub fn min_delay(&mut self, delay: Duration) -> &mut Self {
        self.min_delay = delay;
        self
    }

    /// A connection that brings no byte for this long is treated as cut and resumed (default
    /// [`DEFAULT_IDLE_TIMEOUT`], 300 s; `None`: never; servers that send keep-alive comments make a
    /// few seconds safe).
    pub fn idle_timeout(&mut self, timeout: Option<Duration>) -> &mut Self {
        self.idle_timeout = timeout;
        self
    }

    /// The idle timeout, to read (for a driver that watches silence itself).
    #[cfg(feature = "client")]
    pub(crate) fn idle_timeout_ref(&self) -> Option<Duration> {
        self.idle_timeout
    }

    /// Most resumes over the stream's life (default 32).
    pub fn max_resumes(&mut self, n: u32) -> &mut Self {
        self.max_resumes = n;
        self
    }

    /// Most resumes in a row after which no event moved the cursor or delivered a message
    /// (default 4): a proxy that always cuts at the same byte cannot loop forever.
    pub fn max_stalled_resumes(&mut self, n: u32) -> &mut Self {
        self.max_stalled_resumes = n;
        self
    }

    /// Most attempts at one reconnect when the request fails before a response head
    /// (connection refused, reset) or is answered `429`/`503` (default 6).
    pub fn max_reconnect_attempts(&mut self, n: u32) -> &mut Self {
        self.max_reconnect_attempts = n.max(1);
        self
    }

    /// The first backoff step after a failed reconnect attempt, doubled at each further one and
    /// jittered to 50-100 % (default 250 ms); never above [`StreamConfig::max_delay`].
    pub fn backoff(&mut self, delay: Duration) -> &mut Self {
        self.backoff = delay;
        self
    }

    /// Reconnect even when no response is outstanding (a standalone `GET` stream the application
    /// keeps listening to). Default `false`: such a stream finishes at its end.
    pub fn keep_open(&mut self, keep_open: bool) -> &mut Self {
        self.keep_open = keep_open;
        self
    }

    /// Seed of the backoff jitter (default: none, and every stream built takes its own from the
    /// OS, so that a fleet of clients, or the streams of one client, do not retry in lockstep; set
    /// it for reproducible tests).
    pub fn jitter_seed(&mut self, seed: u64) -> &mut Self {
        self.jitter_seed = Some(seed);
        self
    }

    /// Judge and hash an event's data as it arrives, in steps of at least `from` data bytes
    /// (default 4096), so that a big message's verdict is ready when its blank line arrives: the
    /// delivery then waits for the bytes of the last step only, not for a pass over the whole
    /// message. `usize::MAX` judges every message at dispatch. Decisions are the same either way.
    pub fn gate_ahead(&mut self, from: usize) -> &mut Self {
        self.gate_ahead = from;
        self
    }

    /// The first state of a jitter generator: [`StreamConfig::jitter_seed`], else from the OS
    /// (never zero, which xorshift would keep).
    fn jitter_state(&self) -> u64 {
        self.jitter_seed.unwrap_or_else(crate::guard::random_seed) | 1
    }

    /// A stream with these settings (its guard with a private registry).
    pub fn build(&self) -> ResumableStream {
        self.with_guard(self.guard.guard())
    }

    /// A stream with these settings whose guard shares `registry` with the session's other
    /// streams ([`Session`] builds its streams this way).
    pub fn build_in(&self, registry: &Registry) -> ResumableStream {
        self.with_guard(self.guard.guard_in(registry))
    }

    /// A stream with these settings around a guard the caller built (its settings win over
    /// [`StreamConfig::guard`]); `ResumableStream::into_guard` hands it back (test hook).
    #[cfg(feature = "__testing")]
    #[doc(hidden)]
    pub fn build_with_guard(&self, guard: Guard) -> ResumableStream {
        self.with_guard(guard)
    }

    fn with_guard(&self, guard: Guard) -> ResumableStream {
        ResumableStream {
            decoder: self.decoder.build(),
            gate: guard.settings().gate(),
            guard,
            config: self.clone(),
            state: State::Open { last_byte: None },
            end: None,
            reconnect_due: None,
            resumes: 0,
            stalled: 0,
            progressed: false,
            attempts: 0,
            rng: self.jitter_state(),
            observe: false,
            resumable: true,
            last_event: None,
            pending: None,
            ahead: Ahead::default(),
        }
    }
}

/// How a connection ended, as the driver saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EndCause {
    /// The body ended cleanly.
    Eof,
    /// The body failed (reset, read error, TLS error).
    Error,
}

/// What [`ResumableStream::reconnect_response`] asks the driver to do with the response's body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use = "the body is read only when the answer is Read"]
pub enum Answer {
    /// Read the body and [`feed`](ResumableStream::feed) it.
    Read,
    /// Drop the body; [`poll`](ResumableStream::poll) schedules another attempt or fails.
    Drop,
}

/// A reconnect to send now: `GET` with `Accept: text/event-stream` and `Last-Event-ID`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reconnect {
    /// The `Last-Event-ID` header's exact bytes (`None`: no id was ever received; send none).
    pub last_event_id: Option<Bytes>,
    /// Which attempt at this resume it is (1 for the first).
    pub attempt: u32,
}

/// Why the stream stopped for good.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// The guard refused (see [`RefusalKind`] for every case).
    Refused(Refusal),
    /// The stream was resumed [`StreamConfig::max_resumes`] times.
    TooManyResumes {
        /// Resumes made.
        resumes: u32,
        /// Requests still unanswered.
        outstanding: Vec<RpcId>,
    },
    /// [`StreamConfig::max_stalled_resumes`] resumes in a row moved nothing forward.
    NoProgress {
        /// Resumes in a row without progress.
        resumes: u32,
        /// Requests still unanswered.
        outstanding: Vec<RpcId>,
    },
    /// Every attempt at a reconnect failed before a response head, or was answered `429`/`503`.
    ReconnectFailed {
        /// Attempts made.
        attempts: u32,
        /// The last `Busy` refusal, when the server answered at all.
        last: Option<Refusal>,
        /// Requests still unanswered.
        outstanding: Vec<RpcId>,
    },
}

impl Failure {
    /// Every [`Failure::as_str`] word.
    pub const WORDS: [&'static str; 4] = [
        "refused",
        "too-many-resumes",
        "no-progress",
        "reconnect-failed",
    ];

    /// A stable word for the failure: `refused`, `too-many-resumes`, `no-progress`,
    /// `reconnect-failed` (the [`Kind`](crate::contract::Kind) an error answer reports).
    pub const fn as_str(&self) -> &'static str {
        self.kind().as_str()
    }

    /// The [`Kind`](crate::contract::Kind) an error answer reports for this failure.
    pub const fn kind(&self) -> crate::contract::Kind {
        use crate::contract::Kind;
        match self {
            Failure::Refused(_) => Kind::Refused,
            Failure::TooManyResumes { .. } => Kind::TooManyResumes,
            Failure::NoProgress { .. } => Kind::NoProgress,
            Failure::ReconnectFailed { .. } => Kind::ReconnectFailed,
        }
    }

    /// Whether the caller must open a new session to get the outstanding responses (always, except
    /// for a decoder limit: see [`Refusal::must_renegotiate`]).
    pub fn must_renegotiate(&self) -> bool {
        match self {
            Failure::Refused(e) => e.must_renegotiate(),
            _ => true,
        }
    }

    /// The guard's refusal, if that is what stopped the stream.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Failure::Refused(e) => Some(e),
            Failure::ReconnectFailed { last, .. } => last.as_ref(),
            _ => None,
        }
    }

    /// Requests still unanswered when the stream stopped.
    pub fn outstanding(&self) -> &[RpcId] {
        match self {
            Failure::Refused(e) => &e.outstanding,
            Failure::TooManyResumes { outstanding, .. }
            | Failure::NoProgress { outstanding, .. }
            | Failure::ReconnectFailed { outstanding, .. } => outstanding,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Refused(e) => e.fmt(f),
            Failure::TooManyResumes { resumes, .. } => {
                write!(f, "gave up after {resumes} resumes of one stream")
            }
            Failure::NoProgress { resumes, .. } => write!(
                f,
                "{resumes} resumes in a row brought no complete event: the cut repeats"
            ),
            Failure::ReconnectFailed {
                attempts,
                last: Some(e),
                ..
            } => write!(f, "{attempts} reconnect attempts failed; last: {e}"),
            Failure::ReconnectFailed { attempts, .. } => {
                write!(f, "{attempts} reconnect attempts failed at the transport")
            }
        }
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.refusal().map(|e| e as _)
    }
}

/// One thing the stream hands the driver. See the [module docs](self).
#[derive(Debug)]
#[non_exhaustive]
#[must_use]
pub enum Output {
    /// A complete, new message: hand it to the application.
    Deliver(Delivery),
    /// An event that carries nothing new (exact replay, duplicate response, keep-alive).
    Skip(Skip),
    /// A priming event (empty data, own id): the cursor moved.
    Cursor(Bytes),
    /// The decoder dropped an event over one of its limits, and the stream goes on at the next
    /// event (the message it carried is lost).
    Dropped(Dropped),
    /// The connection is over for the stream (its end was reported, or it went idle): drop it. A
    /// reconnect follows after `delay` (the server's, clamped by [`StreamConfig::max_delay`]), via
    /// [`Output::Reconnect`].
    Disconnected(Resume),
    /// Send the reconnect request now.
    Reconnect(Reconnect),
    /// The stream ended with nothing outstanding.
    Finished,
    /// The stream stopped for good.
    Failed(Failure),
}

/// An event the decoder dropped over one of its limits ([`Output::Dropped`]): the message it
/// carried is lost, the stream goes on. Not a refusal: a driver that needs the lost message (its
/// request is in [`Dropped::outstanding`]) ends the call with [`Dropped::into_refusal`], and
/// re-issues it with a larger limit on the same session.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Dropped {
    /// The decoder's error: which limit, and the dropped event's id when it was read.
    pub error: sse::DecodeError,
    /// The cursor after the drop.
    pub cursor: Option<Bytes>,
    /// Requests this stream still had to deliver when the event was dropped.
    pub outstanding: Vec<RpcId>,
}

impl Dropped {
    /// The refusal a driver ends a call with when the dropped event may have been its response
    /// ([`RefusalKind::DecodeLimit`]; [`Refusal::must_renegotiate`] is `false`).
    pub fn into_refusal(self) -> Refusal {
        Refusal {
            kind: RefusalKind::DecodeLimit { error: self.error },
            cursor: self.cursor,
            outstanding: self.outstanding,
        }
    }
}

impl fmt::Display for Dropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Worded as the refusal a driver may end the call with, so reports read the same.
        self.clone().into_refusal().fmt(f)
    }
}

#[derive(Clone, Debug)]
enum State {
    /// A connection is open: bytes are fed. `last_byte` is the last time a byte (or the response
    /// head) arrived; `None` until the first.
    Open { last_byte: Option<Instant> },
    /// Waiting to reconnect until `until`.
    Waiting { until: Instant },
    /// A reconnect was handed out; waiting for its response head.
    Reconnecting,
    /// Finished or failed: nothing more happens.
    Done,
}

/// The sans-IO resumable stream. See the [module docs](self).
#[derive(Debug)]
pub struct ResumableStream {
    decoder: Decoder,
    gate: Gate,
    guard: Guard,
    config: StreamConfig,
    state: State,
    /// A connection end reported by the driver, processed once the decoder's events are drained.
    end: Option<Instant>,
    /// A reconnect whose delay has passed, to hand out at the next poll.
    reconnect_due: Option<Reconnect>,
    resumes: u32,
    stalled: u32,
    progressed: bool,
    attempts: u32,
    rng: u64,
    pub(crate) observe: bool,
    /// `false`: a cut with a response outstanding ends the stream ([`ResumableStream::resumable`]).
    resumable: bool,
    pub(crate) last_event: Option<EventInfo>,
    /// A failure decided outside `poll`, handed out by the next one.
    pending: Option<Output>,
    ahead: Ahead,
}

/// Default of [`StreamConfig::gate_ahead`]: open data shorter than this is gated at dispatch only (a small
/// message is usually dispatched from the chunk that brought it, and one-shot hashing is cheaper for
/// it than the streaming state), and longer data is gated in steps of at least this many bytes.
const AHEAD_MIN: usize = 4096;

/// The gate and the content hash running ahead of dispatch over the data of the decoder's open
/// block, as the chunks are scanned ([`ResumableStream::gate_ahead`]): a big message's verdict and
/// hash are ready when its blank line arrives, instead of costing a pass over the whole message
/// then, and each chunk is read again while it is still in cache.
#[derive(Default)]
struct Ahead {
    /// The decoder block (its open-data serial) whose data the gate is reading, if any.
    serial: Option<u64>,
    /// Data bytes of that block fed so far.
    fed: usize,
    hash: Xxh3,
}

impl fmt::Debug for Ahead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ahead")
            .field("serial", &self.serial)
            .field("fed", &self.fed)
            .finish_non_exhaustive()
    }
}

impl Default for ResumableStream {
    fn default() -> Self {
        ResumableStream::new()
    }
}

impl ResumableStream {
    /// A stream with the default [`StreamConfig`], its first connection open.
    pub fn new() -> ResumableStream {
        StreamConfig::default().build()
    }

    /// Settings to build a stream from.
    pub fn config() -> StreamConfig {
        StreamConfig::default()
    }

    /// Registers a request whose response this stream must deliver.
    pub fn expect_response(&mut self, id: RpcId) {
        self.guard.expect_response(id);
    }

    /// Reconnects even when nothing is outstanding (see [`StreamConfig::keep_open`]).
    pub fn keep_open(&mut self, on: bool) {
        self.config.keep_open = on;
    }

    /// Whether a cut stream may be resumed (default `true`). `false` for a protocol without
    /// resumption (MCP 2026-07-28: closing a response stream cancels the request): a cut with a
    /// response outstanding ends the stream with [`RefusalKind::Unresumable`] at once, whatever ids
    /// the stream carried, and no reconnect is asked for. Everything else is decided as on a
    /// resumable stream (the gate judges every message, the guard refuses a second, different
    /// response to one id).
    pub fn resumable(&mut self, on: bool) {
        self.resumable = on;
    }

    /// The cursor: the id of the last event processed, sent as `Last-Event-ID` on a resume.
    pub fn cursor(&self) -> Option<&Bytes> {
        self.guard.cursor()
    }

    /// The requests this stream must still deliver (answered anywhere in the session: not
    /// outstanding).
    pub fn outstanding(&self) -> Vec<RpcId> {
        self.guard.outstanding()
    }

    /// The delay the server last asked for: its `retry:` field, or a reconnect response's
    /// `Retry-After` (before the stream's clamps and floor).
    pub fn server_retry(&self) -> Option<Duration> {
        self.guard.server_retry()
    }

    /// The stream's counters: events, deliveries, skips, discarded partial events, resumes.
    pub fn stats(&self) -> Stats {
        self.guard.stats()
    }

    /// The guard (test hook).
    #[cfg(feature = "__testing")]
    #[doc(hidden)]
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// The instruction set the stream's gate runs on: the guard's settings decide it
    /// ([`GuardConfig::max_isa`]).
    pub fn gate_isa(&self) -> crate::gate::Isa {
        self.gate.isa()
    }

    /// The replay timeout in force ([`StreamConfig::replay_timeout`]).
    pub fn replay_timeout(&self) -> Duration {
        self.config.replay_timeout
    }

    /// The guard, for a caller that keeps it beyond the stream (test hook).
    #[cfg(feature = "__testing")]
    #[doc(hidden)]
    pub fn into_guard(self) -> Guard {
        self.guard
    }

    /// Resumes so far.
    pub fn resumes(&self) -> u32 {
        self.resumes
    }

    /// Whether a connection is open and wants its bytes.
    pub fn is_open(&self) -> bool {
        matches!(self.state, State::Open { .. }) && self.end.is_none()
    }

    /// Whether the stream finished or failed.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// A body chunk arrived at `now`. Ignored unless a connection is open (bytes of a connection
    /// the stream already gave up on are never decoded).
    pub fn feed(&mut self, chunk: Bytes, now: Instant) {
        if let State::Open { last_byte } = &mut self.state
            && self.end.is_none()
        {
            *last_byte = Some(now);
            self.decoder.feed(chunk);
        }
    }

    /// The open connection's body ended at `now`. Its events are drained by the next polls, then
    /// the guard decides whether and where to resume.
    pub fn connection_ended(&mut self, cause: EndCause, now: Instant) {
        let _ = cause; // Both causes are a cut to the guard: the blank line decides, not the transport.
        if matches!(self.state, State::Open { .. }) && self.end.is_none() {
            self.end = Some(now);
        }
    }

    /// The reconnect request was answered at `now` with this status and these headers.
    pub fn reconnect_response(&mut self, response: &ReconnectResponse, now: Instant) -> Answer {
        if !matches!(self.state, State::Reconnecting) {
            return Answer::Drop;
        }
        self.last_event = None;
        // A server's delay is clamped before anything sees it: what is reported is what is done.
        let clamped;
        let response = match response.retry_after {
            Some(d) if d > self.config.max_delay => {
                clamped = ReconnectResponse {
                    retry_after: Some(self.config.max_delay),
                    ..response.clone()
                };
                &clamped
            }
            _ => response,
        };
        match self.guard.on_reconnect(response) {
            Ok(()) => {
                self.attempts = 0;
                self.state = State::Open {
                    last_byte: Some(now),
                };
                Answer::Read
            }
            Err(e) if matches!(e.kind, RefusalKind::Busy { .. }) => {
                let asked = e.retry_after();
                self.retry_later(now, asked, Some(e));
                Answer::Drop
            }
            Err(e) => {
                self.pending = Some(self.fail(Failure::Refused(e)));
                Answer::Drop
            }
        }
    }

    /// The reconnect request failed at `now` before a response head (connection refused, reset,
    /// TLS or DNS error): retried with jittered backoff, a bounded number of times.
    pub fn reconnect_failed(&mut self, now: Instant) {
        if matches!(self.state, State::Reconnecting) {
            self.retry_later(now, None, None);
        }
    }

    /// When the stream next needs [`ResumableStream::handle_timeout`], if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.state {
            State::Waiting { until } => Some(*until),
            State::Open {
                last_byte: Some(at),
            } if self.end.is_none() => {
                let replay = self
                    .awaiting_replay()
                    .then(|| *at + self.config.replay_timeout);
                let idle = self.config.idle_timeout.map(|t| *at + t);
                match (replay, idle) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
            _ => None,
        }
    }

    /// Time passed: `now` is at or after [`ResumableStream::poll_timeout`] (earlier calls do
    /// nothing).
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            State::Waiting { until } if now >= until => {
                self.state = State::Reconnecting;
                self.reconnect_due = Some(Reconnect {
                    last_event_id: self.guard.cursor().cloned(),
                    attempt: self.attempts + 1,
                });
            }
            State::Open {
                last_byte: Some(at),
            } if self.end.is_none() => {
                let waited = now.saturating_duration_since(at);
                if self.awaiting_replay() && waited >= self.config.replay_timeout {
                    if let Err(e) = self.guard.on_replay_timeout(waited) {
                        self.pending = Some(self.fail(Failure::Refused(e)));
                    }
                } else if self.config.idle_timeout.is_some_and(|t| waited >= t) {
                    // An idle connection is a cut: resume it.
                    self.end = Some(now);
                }
            }
            _ => {}
        }
    }

    /// The next thing for the driver to do, or `None` until more input or time.
    pub fn poll(&mut self) -> Option<Output> {
        if let Some(reconnect) = self.reconnect_due.take() {
            return Some(Output::Reconnect(reconnect));
        }
        if let Some(output) = self.pending.take() {
            return Some(output);
        }
        if let State::Open { .. } = self.state {
            if let Some(next) = self.decoder.next_event() {
                return Some(self.on_event(next));
            }
            self.gate_ahead();
            if let Some(now) = self.end.take() {
                return Some(self.on_end(now));
            }
        }
        None
    }

    /// Feeds the gate and the hash the open block's data that arrived since the last call (see
    /// [`Ahead`]); called whenever the decoder has scanned all it was given.
    fn gate_ahead(&mut self) {
        let open = self.decoder.open_data();
        let len = open.len();
        let ahead = &mut self.ahead;
        let fed = if ahead.serial == Some(open.serial) {
            ahead.fed
        } else {
            0
        };
        // In steps of at least `gate_ahead` bytes: tiny chunks are not gated one by one (the
        // decoder gathers them into one run of copies, read in one go here).
        if len.saturating_sub(fed) < self.config.gate_ahead.max(1) {
            return;
        }
        if ahead.serial != Some(open.serial) {
            self.gate.reset();
            ahead.hash.reset();
            ahead.serial = Some(open.serial);
            ahead.fed = 0;
        }
        if len > ahead.fed {
            let gate = &mut self.gate;
            open.for_each_from(ahead.fed, |piece| {
                gate.feed(piece);
                ahead.hash.update(piece);
            });
            ahead.fed = len;
        }
    }

    /// The verdict and content hash of a dispatched event's data: what the gate read ahead of
    /// dispatch plus the rest, or one pass over all of it ([`guard::gate_and_hash`]; data in one
    /// segment is hashed by the guard only where a rule reads the hash).
    fn gate_event(&mut self, data: &sse::Data) -> (Verdict, Option<u64>) {
        let ahead = &mut self.ahead;
        match ahead.serial.take() {
            // The dispatched block is still the decoder's current one until another opens.
            Some(serial)
                if serial == self.decoder.open_data().serial && ahead.fed <= data.len() =>
            {
                let gate = &mut self.gate;
                sse::for_each_from(data.chunks(), ahead.fed, |piece| {
                    gate.feed(piece);
                    ahead.hash.update(piece);
                });
                (gate.verdict(), Some(ahead.hash.digest()))
            }
            _ => guard::gate_and_hash(&mut self.gate, data),
        }
    }

    fn awaiting_replay(&self) -> bool {
        self.guard.is_resuming() && !self.guard.outstanding().is_empty()
    }

    fn on_event(&mut self, next: Result<sse::Event, sse::DecodeError>) -> Output {
        let event = match next {
            Ok(event) => event,
            Err(error) => {
                self.last_event = None;
                let refusal = self.guard.on_decode_error(&error);
                if self.guard.failure().is_some() {
                    return self.fail(Failure::Refused(refusal));
                }
                return Output::Dropped(Dropped {
                    error,
                    cursor: refusal.cursor,
                    outstanding: refusal.outstanding,
                });
            }
        };
        // Empty data comes back `Incomplete` and is not looked at.
        let (verdict, hash) = self.gate_event(&event.data);
        if self.observe {
            self.last_event = Some(EventInfo {
                id: event.has_own_id.then(|| event.last_event_id.clone()),
                event_type: Bytes::copy_from_slice(event.event_type()),
                bytes: event.data.len(),
                verdict: (!event.data.is_empty()).then_some(verdict),
                end: self.decoder.offset(),
            });
        }
        let rpc = guard::gated_peek(&self.gate, &event.data);
        match self.guard.decide(event, verdict, hash, rpc) {
            Ok(Decision::Deliver(d)) => {
                self.progressed = true;
                Output::Deliver(d)
            }
            Ok(Decision::Cursor(id)) => {
                self.progressed = true;
                Output::Cursor(id)
            }
            Ok(Decision::Skip(s)) => Output::Skip(s),
            Err(e) => self.fail(Failure::Refused(e)),
        }
    }

    fn on_end(&mut self, now: Instant) -> Output {
        self.last_event = None;
        let end = ConnectionEnd::from_decoder(&mut self.decoder);
        let mut resume = match self.guard.on_disconnect(end) {
            Ok(resume) => resume,
            Err(e) => return self.fail(Failure::Refused(e)),
        };
        if !resume.needed && !self.config.keep_open {
            self.state = State::Done;
            return Output::Finished;
        }
        if !self.resumable {
            let (partial_bytes, partial_id) = match resume.discarded.take() {
                Some(p) => (p.bytes, p.id),
                None => (0, None),
            };
            let refusal = Refusal {
                kind: RefusalKind::Unresumable {
                    partial_bytes,
                    partial_id,
                },
                cursor: None,
                outstanding: self.guard.outstanding().to_vec(),
            };
            return self.fail(Failure::Refused(refusal));
        }
        let outstanding = || self.guard.outstanding().to_vec();
        if self.resumes >= self.config.max_resumes {
            let failure = Failure::TooManyResumes {
                resumes: self.resumes,
                outstanding: outstanding(),
            };
            return self.fail(failure);
        }
        self.stalled = if self.progressed { 0 } else { self.stalled + 1 };
        if self.stalled >= self.config.max_stalled_resumes.max(1) && resume.needed {
            let failure = Failure::NoProgress {
                resumes: self.stalled,
                outstanding: outstanding(),
            };
            return self.fail(failure);
        }
        self.progressed = false;
        self.resumes += 1;
        self.attempts = 0;
        let asked = self
            .guard
            .server_retry()
            .unwrap_or(self.config.default_retry);
        resume.delay = self.bounded_delay(asked);
        self.state = State::Waiting {
            until: now + resume.delay,
        };
        Output::Disconnected(resume)
    }

    /// Schedules another attempt at the same resume, or fails when the attempts are used up.
    fn retry_later(&mut self, now: Instant, asked: Option<Duration>, busy: Option<Refusal>) {
        self.attempts += 1;
        if self.attempts >= self.config.max_reconnect_attempts {
            let failure = Failure::ReconnectFailed {
                attempts: self.attempts,
                last: busy,
                outstanding: self.guard.outstanding().to_vec(),
            };
            self.pending = Some(self.fail(failure));
            return;
        }
        let delay = asked.unwrap_or_else(|| self.backoff_delay());
        let delay = self.bounded_delay(delay);
        self.state = State::Waiting { until: now + delay };
    }

    /// `delay` raised to the jittered floor ([`StreamConfig::min_delay`]) and clamped to
    /// [`StreamConfig::max_delay`].
    fn bounded_delay(&mut self, delay: Duration) -> Duration {
        let jitter = self.jitter();
        self.config.bounded(delay, jitter)
    }

    /// A uniform fraction in [0, 1) from the stream's generator (seeded by the config).
    fn jitter(&mut self) -> f64 {
        unit_fraction(&mut self.rng)
    }

    /// `backoff * 2^(attempt-1)`, jittered to 50-100 %.
    fn backoff_delay(&mut self) -> Duration {
        let shift = self.attempts.saturating_sub(1).min(16);
        let full = self.config.backoff.saturating_mul(1 << shift);
        full.mul_f64(0.5 + self.jitter() / 2.0)
    }

    #[cold]
    fn fail(&mut self, failure: Failure) -> Output {
        self.state = State::Done;
        self.end = None;
        self.reconnect_due = None;
        Output::Failed(failure)
    }
}

/// The next uniform fraction in [0, 1) of the xorshift64 generator whose state is `state`.
fn unit_fraction(state: &mut u64) -> f64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state >> 11) as f64 / (1u64 << 53) as f64
}

/// The streams of one MCP session: each POST response stream and the standalone `GET` stream.
///
/// Outstanding requests and JSON-RPC response deduplication belong to the session, not to one
/// stream: every stream made here shares one [`Registry`], so a response that arrives on
/// the `GET` stream after its POST stream was cut is recognised (the cut stream needs no resume,
/// and a second copy anywhere is skipped when identical, refused when not). A new session (after a
/// renegotiation) is a new `Session`.
#[derive(Clone, Debug)]
pub struct Session {
    config: StreamConfig,
    registry: Registry,
}

impl Default for Session {
    fn default() -> Self {
        Session::new(StreamConfig::default())
    }
}

impl Session {
    /// A session whose streams use `config` and share one new registry.
    pub fn new(config: StreamConfig) -> Session {
        Session {
            config,
            registry: Registry::new(),
        }
    }

    /// The registry the session's streams share.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Requests of the session still waiting for a response.
    pub fn outstanding(&self) -> Vec<RpcId> {
        self.registry.outstanding()
    }

    fn stream(&self) -> ResumableStream {
        self.config.build_in(&self.registry)
    }

    /// The stream of a POST's response: it must deliver `request`'s response, unless another
    /// stream of the session does first.
    pub fn request_stream(&self, request: RpcId) -> ResumableStream {
        let mut stream = self.stream();
        stream.expect_response(request);
        stream
    }

    /// The standalone `GET` stream: kept open (resumed even with nothing outstanding).
    pub fn listen_stream(&self) -> ResumableStream {
        let mut stream = self.stream();
        stream.keep_open(true);
        stream
    }

    /// The caller gave up on `request` (cancelled, timed out): no stream needs to resume for it.
    pub fn forget(&self, request: &RpcId) {
        self.registry.forget(request);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The delay before repeating a request answered `429`/`503` is jittered from the stream's
    /// seed when one is set: the same seed, the same delay; another seed, another delay; always
    /// between the floor and 1.5 times it.
    #[cfg(feature = "client")]
    #[test]
    fn busy_delay_follows_the_jitter_seed() {
        let delay = |seed| {
            let mut config = StreamConfig::default();
            config.jitter_seed(seed);
            config.busy_delay(None)
        };
        let floor = DEFAULT_MIN_DELAY;
        for seed in [1, 7, 1 << 40] {
            assert_eq!(delay(seed), delay(seed));
            assert!(delay(seed) >= floor && delay(seed) < floor.mul_f64(1.5));
        }
        assert_ne!(delay(1), delay(7));
    }

    /// One SSE block of the generated streams: mostly an event with an id and one valid message
    /// (so that streams go on long enough to replay), sometimes a torn, doubled or split message,
    /// a comment or an event type.
    fn block() -> impl Strategy<Value = String> {
        let message = (0usize..12_000, any::<u8>(), 0u8..12).prop_map(|(len, id, how)| {
            let text = "x\\\"y é ".repeat(len / 8 + 1);
            let json = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"text":"{text}"}}}}"#);
            match how {
                0 => json[..json.len() / 2].to_owned(),
                1 => format!("{json}{json}"),
                2 => json.replacen(',', "\ndata: ,", 1),
                _ => json,
            }
        });
        let id = prop::option::weighted(0.8, (0u32..50).prop_map(|n| format!("id: {n}\n")));
        let extra = prop_oneof![
            Just(String::new()),
            Just(": keep-alive\n".to_owned()),
            Just("event: message\n".to_owned()),
            Just("data\n".to_owned()),
        ];
        let data = prop::option::weighted(0.9, message.prop_map(|m| format!("data: {m}\n")));
        (id, extra, data).prop_map(|(id, extra, data)| {
            id.unwrap_or_default() + &extra + &data.unwrap_or_default() + "\n"
        })
    }

    /// Drives `stream` over `input` cut at `cuts`, ending the connection at byte `end_at` (resuming
    /// on the rest when a reconnect is asked for), and records every output.
    fn run(
        mut stream: ResumableStream,
        input: &[u8],
        cuts: &[usize],
        end_at: usize,
    ) -> Vec<String> {
        let mut now = Instant::now();
        let mut out = Vec::new();
        let drain = |s: &mut ResumableStream, out: &mut Vec<String>| {
            let mut reconnect = false;
            while let Some(o) = s.poll() {
                reconnect |= matches!(o, Output::Reconnect(_));
                out.push(format!("{o:?}"));
            }
            reconnect
        };
        let mut from = 0;
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        points.push(input.len());
        points.sort_unstable();
        for to in points {
            if to > from {
                stream.feed(Bytes::copy_from_slice(&input[from..to]), now);
                drain(&mut stream, &mut out);
                from = to;
            }
            if from >= end_at && end_at < input.len() && stream.is_open() {
                stream.connection_ended(EndCause::Error, now);
                let mut reconnect = drain(&mut stream, &mut out);
                while !reconnect && let Some(t) = stream.poll_timeout() {
                    now = now.max(t);
                    stream.handle_timeout(now);
                    reconnect = drain(&mut stream, &mut out);
                }
                if reconnect {
                    let _ = stream.reconnect_response(&ReconnectResponse::event_stream(), now);
                    drain(&mut stream, &mut out);
                }
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Gating ahead of dispatch changes nothing the stream decides: every output is the same as
        /// with the gate run once over each dispatched event, for any chunking, limit errors
        /// (a small `max_event` drops blocks the gate was reading) and a connection cut anywhere.
        #[test]
        fn gating_ahead_decides_as_gating_at_dispatch(
            blocks in prop::collection::vec(block(), 1..8),
            cuts in prop::collection::vec(0usize..1_000_000, 0..12),
            end_at in 0usize..1_000_000,
            small_limit in any::<bool>(),
            replay in prop::option::of(0usize..8),
            step in prop_oneof![Just(1usize), 2usize..300, Just(4096)],
        ) {
            // A block sent again, as a server replays an event: the guard compares content hashes
            // taken on different paths (ahead in one copy, at dispatch in the other).
            let mut blocks = blocks;
            if let Some(again) = replay.and_then(|k| blocks.get(k).cloned()) {
                blocks.push(again);
            }
            let input = blocks.concat().into_bytes();
            let mut config = ResumableStream::config();
            if small_limit {
                config.decoder(crate::sse::DecoderConfig::default().max_event(9_000).clone());
            }
            config.max_resumes(3);
            let ahead = config.clone().gate_ahead(step).build();
            let at_dispatch = config.clone().gate_ahead(usize::MAX).build();
            let end_at = end_at % (input.len() + 1);
            let want = run(at_dispatch, &input, &cuts, end_at);
            let got = run(ahead, &input, &cuts, end_at);
            prop_assert_eq!(got, want);
        }
    }
}
