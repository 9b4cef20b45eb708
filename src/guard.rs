//! The resumption guard: it owns every decision about a stream's events and reconnects.
//!
//! Feed it, in order, what happens to one SSE response stream and its resumptions: each dispatched
//! [`Event`] ([`Guard::on_event`]), each connection end ([`Guard::on_disconnect`], with the decoder's
//! partial event), each reconnect response ([`Guard::on_reconnect`]) and a replay timeout
//! ([`Guard::on_replay_timeout`]). Every call returns a decision or a typed [`TornBoundary`]; once it
//! has refused, the guard keeps refusing with the same error until [`Guard::reset`]. It never hands
//! out a message that is not exactly one complete JSON value, and never continues a resumed stream
//! it cannot prove continues the one that was cut.
//!
//! One guard serves one stream: a POST response stream and its `GET` + `Last-Event-ID` resumptions.
//! Event ids are opaque strings; the guard orders them only when both ids have the same numeric
//! shape and stream part (`17`, `17/req-3`, `stream-17`), and deduplicates by id and content hash
//! for every id shape.
#![forbid(unsafe_code)]

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use smallvec::SmallVec;
use xxhash_rust::xxh3::Xxh3;

use crate::gate::{Gate, Verdict};
use crate::message::{Message, RpcId, RpcKind, RpcPeek};
use crate::sse::{Data, Decoder, Event, PartialEvent};

/// What the guard does with a cut that happened while an event was half received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Refuse any reconnect while a partial event was held ([`Torn::PartialEvent`]).
    Strict,
    /// Discard the partial event, resume, and verify the replay: the first replayed event must be
    /// the interrupted one (when its id was seen) or `cursor + 1` (numeric ids); an id already
    /// delivered must carry identical content.
    #[default]
    Verified,
}

/// Guard settings; `Config::default().build()` is [`Guard::new`].
#[derive(Clone, Debug)]
pub struct Config {
    policy: Policy,
    window: usize,
    replay_timeout: Duration,
    default_retry: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            policy: Policy::Verified,
            window: 4096,
            replay_timeout: Duration::from_secs(10),
            default_retry: Duration::from_secs(1),
        }
    }
}

impl Config {
    /// The partial-event policy (default [`Policy::Verified`]).
    pub fn policy(&mut self, policy: Policy) -> &mut Self {
        self.policy = policy;
        self
    }

    /// How many recent event ids (and JSON-RPC response ids) are remembered with their content
    /// hash for replay deduplication (default 4096, at least 1).
    pub fn window(&mut self, ids: usize) -> &mut Self {
        self.window = ids.max(1);
        self
    }

    /// How long a resumed connection may go without an event while a response is outstanding
    /// before the caller should report [`Guard::on_replay_timeout`] (default 10 s).
    pub fn replay_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.replay_timeout = timeout;
        self
    }

    /// Reconnect delay used until the server sends `retry:` or `Retry-After` (default 1 s).
    pub fn default_retry(&mut self, delay: Duration) -> &mut Self {
        self.default_retry = delay;
        self
    }

    /// A guard with these settings.
    pub fn build(&self) -> Guard {
        Guard {
            config: self.clone(),
            gate: Gate::new(),
            phase: Phase::Streaming,
            cursor: None,
            last_seen_id: Bytes::new(),
            retry: None,
            recent: Window::default(),
            answered: HashMap::new(),
            answered_order: VecDeque::new(),
            outstanding: SmallVec::new(),
            stats: Stats::default(),
        }
    }
}

/// What the guard decided about one event.
#[derive(Debug)]
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

/// Why an event was not delivered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
    /// The id was already delivered with identical content: a replay.
    ExactReplay {
        /// The replayed event id.
        id: Bytes,
    },
    /// A second, identical response to a request that was already answered.
    DuplicateResponse {
        /// The JSON-RPC request id.
        rpc_id: RpcId,
    },
    /// An event with empty data and no id of its own: nothing to do.
    KeepAlive,
}

/// Where to reconnect after a connection end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resume {
    /// The `Last-Event-ID` to send (the cursor), `None` when no id was ever received.
    pub last_event_id: Option<Bytes>,
    /// How long to wait first: the last `retry:` or `Retry-After`, else the configured default.
    pub delay: Duration,
    /// The partial event that was discarded (never completed by a later connection).
    pub discarded: Option<PartialEvent>,
    /// Whether a response is still outstanding (without one, reconnecting is optional).
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

/// The response to a reconnect (`GET` + `Last-Event-ID`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReconnectResponse {
    /// HTTP status code.
    pub status: u16,
    /// The `Retry-After` header, if present and in seconds.
    pub retry_after: Option<Duration>,
    /// The `Content-Type` header, if present.
    pub content_type: Option<String>,
}

/// Counters a caller can report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events seen.
    pub events: u64,
    /// Messages delivered.
    pub delivered: u64,
    /// Bytes of delivered messages.
    pub delivered_bytes: u64,
    /// Events skipped as exact replays or duplicate responses.
    pub skipped: u64,
    /// Partial events discarded at cuts.
    pub discarded_partials: u64,
    /// Bytes of discarded partial events.
    pub discarded_bytes: u64,
    /// Reconnects the guard allowed.
    pub resumes: u64,
}

/// The guard refused: what happened, where the stream stood, and what is still unanswered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornBoundary {
    /// What went wrong, with the numbers.
    pub kind: Torn,
    /// The cursor (last fully processed event id) at the refusal.
    pub cursor: Option<Bytes>,
    /// Requests still waiting for a response: re-issue them after renegotiating.
    pub outstanding: Vec<RpcId>,
}

/// The refusals, one per row of the decision table.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Torn {
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
    /// The server is not continuing the stream that was cut: an id was reused with other content,
    /// went backwards, changed stream, or a fresh stream (priming event) started.
    StreamRestarted {
        /// The id that shows it.
        got: Bytes,
        /// Which check fired.
        why: &'static str,
    },
    /// A second, different response to an already-answered request.
    DuplicateResponse {
        /// The JSON-RPC request id.
        rpc_id: RpcId,
        /// The event id carrying it.
        event_id: Option<Bytes>,
    },
    /// The replay does not start where the cut stream stopped.
    Gap {
        /// The id the first replayed event had to carry.
        expected: String,
        /// The id it carried (`None`: no id).
        got: Option<Bytes>,
    },
    /// `404` on reconnect: the session is gone.
    SessionExpired,
    /// `409`/`410` on reconnect, or an `event: error` frame: the server cannot replay.
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
    /// The decoder dropped an event over one of its limits: the message is lost.
    DecodeLimit {
        /// The decoder's error, as text.
        error: String,
    },
}

impl TornBoundary {
    /// Whether the caller must open a new session (new `initialize`, new `Mcp-Session-Id`) and
    /// re-issue the outstanding requests. `Busy` only asks to retry the same resume later, and a
    /// decoder limit asks for a larger limit; every other refusal means the stream is lost.
    pub fn must_renegotiate(&self) -> bool {
        !matches!(self.kind, Torn::Busy { .. } | Torn::DecodeLimit { .. })
    }

    /// The delay the server asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self.kind {
            Torn::ReplayUnavailable { retry_after, .. } | Torn::Busy { retry_after, .. } => {
                retry_after
            }
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

impl fmt::Display for Torn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Torn::PartialEvent { bytes, id } => write!(
                f,
                "connection cut inside an event ({bytes} bytes held, event id {}); strict policy refuses to resume",
                show_opt(id)
            ),
            Torn::IncompleteMessage { id, bytes } => {
                write!(
                    f,
                    "event {} carries an incomplete JSON message ({bytes} bytes)",
                    show_opt(id)
                )
            }
            Torn::TrailingBytes { id, bytes } => write!(
                f,
                "event {} carries one JSON value followed by more bytes ({bytes} bytes): a resumed stream appended onto a partial event",
                show_opt(id)
            ),
            Torn::InvalidMessage { id, bytes } => {
                write!(
                    f,
                    "event {} carries invalid JSON ({bytes} bytes)",
                    show_opt(id)
                )
            }
            Torn::StreamRestarted { got, why } => {
                write!(
                    f,
                    "the server restarted the stream instead of resuming it: event {} {why}",
                    show(got)
                )
            }
            Torn::DuplicateResponse { rpc_id, event_id } => write!(
                f,
                "a second, different response to request {rpc_id} arrived in event {}",
                show_opt(event_id)
            ),
            Torn::Gap { expected, got } => write!(
                f,
                "the replay does not continue the stream: expected event {expected}, got {}",
                show_opt(got)
            ),
            Torn::SessionExpired => write!(f, "the session is gone (404 on reconnect)"),
            Torn::ReplayUnavailable {
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
            Torn::Busy {
                status,
                retry_after,
            } => {
                write!(f, "the server is busy ({status})")?;
                if let Some(d) = retry_after {
                    write!(f, "; retry the resume after {} ms", d.as_millis())?;
                }
                Ok(())
            }
            Torn::ReplayMissed { waited: None } => {
                write!(
                    f,
                    "the resumed connection ended without an event while a response was outstanding"
                )
            }
            Torn::ReplayMissed { waited: Some(d) } => write!(
                f,
                "no event arrived within {} ms of resuming while a response was outstanding",
                d.as_millis()
            ),
            Torn::Unresumable {
                partial_bytes,
                partial_id: None,
            } => write!(
                f,
                "the stream was cut with a response outstanding ({partial_bytes} bytes of a partial event lost) and it carries no event ids to resume from"
            ),
            Torn::Unresumable {
                partial_bytes,
                partial_id: Some(id),
            } => write!(
                f,
                "the stream was cut inside its first event {} ({partial_bytes} bytes lost) before any event was complete, so there is no Last-Event-ID to resume from",
                show(id)
            ),
            Torn::UnexpectedResponse {
                status,
                content_type,
            } => write!(
                f,
                "the reconnect answered {status} with content type {}",
                content_type.as_deref().unwrap_or("(none)")
            ),
            Torn::DecodeLimit { error } => {
                write!(f, "an event was dropped by the decoder: {error}")
            }
        }
    }
}

impl fmt::Display for TornBoundary {
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
            f.write_str("; renegotiate the session and re-issue them")?;
        }
        Ok(())
    }
}

impl std::error::Error for TornBoundary {}

#[derive(Clone, Debug)]
enum Phase {
    /// Events continue the stream in place.
    Streaming,
    /// A reconnect was allowed; no new event has been accepted since (exact replays do not count).
    Resuming {
        /// The interrupted event's id, when its `id:` line had arrived.
        partial_id: Option<Bytes>,
    },
    /// The guard refused; it keeps refusing with the same error.
    Failed(Box<TornBoundary>),
}

/// Recent event ids with their content hash, bounded.
///
/// Keyed by a hash of the id rather than the id itself: an id is a slice of its input chunk, and
/// holding thousands of them would keep thousands of chunks alive.
#[derive(Debug, Default)]
struct Window {
    order: VecDeque<u64>,
    hashes: HashMap<u64, u64>,
}

fn id_key(id: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(id)
}

impl Window {
    fn get(&self, id: &[u8]) -> Option<u64> {
        self.hashes.get(&id_key(id)).copied()
    }

    fn insert(&mut self, id: &[u8], hash: u64, cap: usize) {
        let key = id_key(id);
        if self.hashes.insert(key, hash).is_none() {
            self.order.push_back(key);
            while self.order.len() > cap {
                if let Some(old) = self.order.pop_front() {
                    self.hashes.remove(&old);
                }
            }
        }
    }
}

/// The resumption guard. See the [module docs](self).
#[derive(Debug)]
pub struct Guard {
    config: Config,
    gate: Gate,
    phase: Phase,
    cursor: Option<Bytes>,
    /// The `id` of the last event handed to `on_event`, to notice id-only blocks at a disconnect.
    last_seen_id: Bytes,
    retry: Option<Duration>,
    recent: Window,
    answered: HashMap<RpcId, u64>,
    answered_order: VecDeque<RpcId>,
    outstanding: SmallVec<[RpcId; 2]>,
    stats: Stats,
}

impl Default for Guard {
    fn default() -> Self {
        Guard::new()
    }
}

/// Content hash of an event's data: xxh3 over the segments, no copy.
fn content_hash(data: &Data) -> u64 {
    let mut h = Xxh3::new();
    for chunk in data.chunks() {
        h.update(chunk);
    }
    h.digest()
}

/// The ordered part of an event id: `17`, `17/<stream>` (rmcp) or `<stream>-17`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SeqId<'a> {
    shape: u8,
    stream: &'a [u8],
    n: u64,
}

fn digits(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0')))
}

fn seq_id(id: &[u8]) -> Option<SeqId<'_>> {
    if let Some(n) = digits(id) {
        return Some(SeqId {
            shape: 0,
            stream: b"",
            n,
        });
    }
    if let Some(slash) = id.iter().position(|&b| b == b'/')
        && let Some(n) = digits(&id[..slash])
    {
        return Some(SeqId {
            shape: 1,
            stream: &id[slash + 1..],
            n,
        });
    }
    let dash = id.iter().rposition(|&b| b == b'-')?;
    let n = digits(&id[dash + 1..])?;
    (dash > 0).then_some(SeqId {
        shape: 2,
        stream: &id[..dash],
        n,
    })
}

/// How `id` relates to `cursor` when both are ordered ids of the same shape.
enum Order {
    /// Same shape and stream: the sequence numbers.
    Same { cursor: u64, got: u64 },
    /// Same shape, different stream part: another stream.
    OtherStream,
    /// Not comparable (opaque ids).
    Opaque,
}

fn order(cursor: &[u8], id: &[u8]) -> Order {
    match (seq_id(cursor), seq_id(id)) {
        (Some(c), Some(g)) if c.shape == g.shape && c.stream == g.stream => Order::Same {
            cursor: c.n,
            got: g.n,
        },
        (Some(c), Some(g)) if c.shape == g.shape => Order::OtherStream,
        _ => Order::Opaque,
    }
}

fn next_id(cursor: &[u8]) -> Option<String> {
    let s = seq_id(cursor)?;
    let n = s.n.checked_add(1)?;
    let stream = String::from_utf8_lossy(s.stream);
    Some(match s.shape {
        0 => n.to_string(),
        1 => format!("{n}/{stream}"),
        _ => format!("{stream}-{n}"),
    })
}

impl Guard {
    /// A guard with the default [`Config`].
    pub fn new() -> Guard {
        Config::default().build()
    }

    /// Settings to build a guard from.
    pub fn config() -> Config {
        Config::default()
    }

    /// Registers a request whose response this stream must deliver.
    pub fn expect_response(&mut self, id: RpcId) {
        if !self.outstanding.contains(&id) {
            self.outstanding.push(id);
        }
    }

    /// Requests still waiting for their response.
    pub fn outstanding(&self) -> &[RpcId] {
        &self.outstanding
    }

    /// The last fully processed event id: the `Last-Event-ID` to resume from.
    pub fn cursor(&self) -> Option<&Bytes> {
        self.cursor.as_ref()
    }

    /// The reconnect delay in force (`retry:`, `Retry-After`, else the configured default).
    pub fn retry(&self) -> Duration {
        self.retry.unwrap_or(self.config.default_retry)
    }

    /// The configured replay timeout; report it with [`Guard::on_replay_timeout`].
    pub fn replay_timeout(&self) -> Duration {
        self.config.replay_timeout
    }

    /// Whether a reconnect was allowed and no new event has been accepted since.
    pub fn is_resuming(&self) -> bool {
        matches!(self.phase, Phase::Resuming { .. })
    }

    /// The refusal the guard is stuck on, if any.
    pub fn failure(&self) -> Option<&TornBoundary> {
        match &self.phase {
            Phase::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Forgets the stream (after a renegotiation): cursor, dedup windows and the refusal. Keeps
    /// the settings and the outstanding requests, which the caller re-issues.
    pub fn reset(&mut self) {
        let outstanding = std::mem::take(&mut self.outstanding);
        *self = self.config.build();
        self.outstanding = outstanding;
    }

    #[cold]
    fn refuse(&mut self, kind: Torn) -> TornBoundary {
        let err = TornBoundary {
            kind,
            cursor: self.cursor.clone(),
            outstanding: self.outstanding.to_vec(),
        };
        self.phase = Phase::Failed(Box::new(err.clone()));
        err
    }

    fn check_failed(&self) -> Result<(), TornBoundary> {
        match &self.phase {
            Phase::Failed(e) => Err((**e).clone()),
            _ => Ok(()),
        }
    }

    /// Gates `event`'s data itself and decides. See [`Guard::on_event_with_verdict`].
    pub fn on_event(&mut self, event: Event) -> Result<Decision, TornBoundary> {
        // Only non-empty data can be a message; the verdict is not looked at otherwise.
        let verdict = if event.data.is_empty() {
            Verdict::Incomplete
        } else {
            self.gate.check(&event.data)
        };
        self.on_event_with_verdict(event, verdict)
    }

    /// Decides about one dispatched event whose data the caller already gated.
    pub fn on_event_with_verdict(
        &mut self,
        event: Event,
        verdict: Verdict,
    ) -> Result<Decision, TornBoundary> {
        self.check_failed()?;
        self.stats.events += 1;
        self.last_seen_id = event.id.clone();
        if event.event.as_deref() == Some(b"error".as_slice()) {
            let retry_after = error_frame_retry(&event.data);
            return Err(self.refuse(Torn::ReplayUnavailable {
                status: None,
                retry_after,
            }));
        }
        if let Some(ms) = event.retry {
            self.retry = Some(Duration::from_millis(ms));
        }
        let own_id = (event.has_own_id && !event.id.is_empty()).then(|| event.id.clone());
        let hash = content_hash(&event.data);

        if let Some(id) = &own_id {
            if let Some(seen) = self.recent.get(id) {
                if seen == hash {
                    self.stats.skipped += 1;
                    return Ok(Decision::Skip(Skip::ExactReplay { id: id.clone() }));
                }
                return Err(self.refuse(Torn::StreamRestarted {
                    got: id.clone(),
                    why: "reuses an id already delivered with different content",
                }));
            }
            if let Some(cursor) = &self.cursor
                && let Order::Same { cursor: c, got } = order(cursor, id)
                && got <= c
            {
                return Err(self.refuse(Torn::StreamRestarted {
                    got: id.clone(),
                    why: "goes back to or before the cursor with content not seen recently",
                }));
            }
        }
        if let Phase::Resuming { partial_id, .. } = &self.phase {
            let partial_id = partial_id.clone();
            self.verify_resume(partial_id, own_id.as_ref(), event.data.is_empty())?;
            self.phase = Phase::Streaming;
        }

        if event.data.is_empty() {
            return Ok(match own_id {
                Some(id) => {
                    // Remembered like any event, so a server that re-sends it on resume is an exact replay.
                    self.remember(Some(id.clone()), hash);
                    Decision::Cursor(id)
                }
                None => Decision::Skip(Skip::KeepAlive),
            });
        }
        let bytes = event.data.len();
        match verdict {
            Verdict::Complete => {}
            Verdict::Incomplete => {
                return Err(self.refuse(Torn::IncompleteMessage { id: own_id, bytes }));
            }
            Verdict::Trailing => return Err(self.refuse(Torn::TrailingBytes { id: own_id, bytes })),
            Verdict::Invalid => return Err(self.refuse(Torn::InvalidMessage { id: own_id, bytes })),
        }
        let message = Message::new(event.data);
        let rpc = message.jsonrpc_peek();
        if let (RpcKind::Response, Some(rpc_id)) = (rpc.kind, &rpc.id) {
            match self.answered.get(rpc_id) {
                Some(&seen) if seen == hash => {
                    self.stats.skipped += 1;
                    self.remember(own_id, hash);
                    return Ok(Decision::Skip(Skip::DuplicateResponse {
                        rpc_id: rpc_id.clone(),
                    }));
                }
                Some(_) => {
                    return Err(self.refuse(Torn::DuplicateResponse {
                        rpc_id: rpc_id.clone(),
                        event_id: own_id,
                    }));
                }
                None => {
                    self.answered.insert(rpc_id.clone(), hash);
                    self.answered_order.push_back(rpc_id.clone());
                    if self.answered_order.len() > self.config.window
                        && let Some(old) = self.answered_order.pop_front()
                    {
                        self.answered.remove(&old);
                    }
                    self.outstanding.retain(|o| o != rpc_id);
                }
            }
        }
        self.remember(own_id.clone(), hash);
        self.stats.delivered += 1;
        self.stats.delivered_bytes += bytes as u64;
        Ok(Decision::Deliver(Delivery {
            message,
            event_id: own_id,
            event_type: event.event,
            rpc,
        }))
    }

    fn remember(&mut self, own_id: Option<Bytes>, hash: u64) {
        if let Some(id) = own_id {
            self.recent.insert(&id, hash, self.config.window);
            self.cursor = Some(id);
        }
    }

    /// The first new event after a resume must continue the stream that was cut.
    fn verify_resume(
        &mut self,
        partial_id: Option<Bytes>,
        got: Option<&Bytes>,
        priming: bool,
    ) -> Result<(), TornBoundary> {
        let cursor = self.cursor.clone();
        let Some(got) = got else {
            // An event without an id of its own cannot be placed; refuse only when a place was expected.
            let expected = partial_id
                .as_deref()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .or_else(|| cursor.as_deref().and_then(next_id));
            return match expected {
                Some(expected) => Err(self.refuse(Torn::Gap {
                    expected,
                    got: None,
                })),
                None => Ok(()),
            };
        };
        if partial_id.as_ref() == Some(got) {
            return Ok(());
        }
        let relation = cursor.as_deref().map_or(Order::Opaque, |c| order(c, got));
        let restarted = match relation {
            Order::OtherStream => Some("belongs to another stream"),
            Order::Same { cursor: c, got: g } if g <= c => {
                Some("goes back to or before the cursor")
            }
            _ if priming => Some("opens a fresh stream (a priming event) instead of replaying"),
            _ => None,
        };
        if let Some(why) = restarted {
            return Err(self.refuse(Torn::StreamRestarted {
                got: got.clone(),
                why,
            }));
        }
        if let Some(p) = partial_id {
            return Err(self.refuse(Torn::Gap {
                expected: String::from_utf8_lossy(&p).into_owned(),
                got: Some(got.clone()),
            }));
        }
        match relation {
            Order::Same { cursor: c, got: g } if g != c + 1 => {
                let expected = cursor.as_deref().and_then(next_id).unwrap_or_default();
                Err(self.refuse(Torn::Gap {
                    expected,
                    got: Some(got.clone()),
                }))
            }
            _ => Ok(()),
        }
    }

    /// The connection ended (cleanly or cut). Returns where and when to reconnect, or a refusal.
    pub fn on_disconnect(&mut self, end: ConnectionEnd) -> Result<Resume, TornBoundary> {
        self.check_failed()?;
        if let Some(ms) = end.retry {
            self.retry = Some(Duration::from_millis(ms));
        }
        let partial = end.partial.filter(|p| p.bytes > 0);
        let mut partial_id = None;
        match &self.phase {
            Phase::Resuming { .. } if partial.is_none() && !self.outstanding.is_empty() => {
                return Err(self.refuse(Torn::ReplayMissed { waited: None }));
            }
            Phase::Resuming { partial_id: p } => partial_id = p.clone(),
            // An id-only block after the last event committed an id the guard never saw as an event.
            Phase::Streaming if end.last_event_id != self.last_seen_id => {
                self.cursor = (!end.last_event_id.is_empty()).then(|| end.last_event_id.clone());
                self.last_seen_id = end.last_event_id.clone();
            }
            _ => {}
        }
        if let Some(p) = &partial {
            if self.config.policy == Policy::Strict {
                return Err(self.refuse(Torn::PartialEvent {
                    bytes: p.bytes,
                    id: p.id.clone(),
                }));
            }
            self.stats.discarded_partials += 1;
            self.stats.discarded_bytes += p.bytes;
            if p.id.is_some() {
                partial_id = p.id.clone();
            }
        }
        let needed = !self.outstanding.is_empty();
        if self.cursor.is_none() && needed {
            let partial_bytes = partial.as_ref().map_or(0, |p| p.bytes);
            let partial_id = partial.and_then(|p| p.id);
            return Err(self.refuse(Torn::Unresumable {
                partial_bytes,
                partial_id,
            }));
        }
        self.phase = Phase::Resuming { partial_id };
        self.stats.resumes += u64::from(needed);
        Ok(Resume {
            last_event_id: self.cursor.clone(),
            delay: self.retry(),
            discarded: partial,
            needed,
        })
    }

    /// The reconnect was answered: checks the status and content type before any event is read.
    pub fn on_reconnect(&mut self, response: &ReconnectResponse) -> Result<(), TornBoundary> {
        self.check_failed()?;
        if let Some(d) = response.retry_after {
            self.retry = Some(d);
        }
        let retry_after = response.retry_after;
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
                    Err(self.refuse(Torn::UnexpectedResponse {
                        status: 200,
                        content_type: response.content_type.clone(),
                    }))
                }
            }
            404 => Err(self.refuse(Torn::SessionExpired)),
            409 | 410 => Err(self.refuse(Torn::ReplayUnavailable {
                status: Some(response.status),
                retry_after,
            })),
            // Transient: the same resume may be tried again, so the guard does not fail.
            429 | 503 => Err(TornBoundary {
                kind: Torn::Busy {
                    status: response.status,
                    retry_after,
                },
                cursor: self.cursor.clone(),
                outstanding: self.outstanding.to_vec(),
            }),
            status => Err(self.refuse(Torn::UnexpectedResponse {
                status,
                content_type: response.content_type.clone(),
            })),
        }
    }

    /// The resumed connection has brought no event for `waited` (at least the replay timeout).
    pub fn on_replay_timeout(&mut self, waited: Duration) -> Result<(), TornBoundary> {
        self.check_failed()?;
        match self.phase {
            Phase::Resuming { .. } if !self.outstanding.is_empty() => {
                Err(self.refuse(Torn::ReplayMissed {
                    waited: Some(waited),
                }))
            }
            _ => Ok(()),
        }
    }

    /// The decoder dropped an event over a limit: a message may be lost, so the guard refuses.
    pub fn on_decode_error(&mut self, error: &crate::sse::DecodeError) -> TornBoundary {
        if let Err(e) = self.check_failed() {
            return e;
        }
        self.refuse(Torn::DecodeLimit {
            error: error.to_string(),
        })
    }
}

/// `retry_after_ms` from an `event: error` frame's JSON data, read cheaply.
fn error_frame_retry(data: &Data) -> Option<Duration> {
    let bytes = data.contiguous();
    let key = b"\"retry_after_ms\"";
    let at = memchr::memmem::find(&bytes, key)? + key.len();
    let rest = bytes[at..]
        .iter()
        .skip_while(|b| b.is_ascii_whitespace() || **b == b':');
    let ms = rest
        .take_while(|b| b.is_ascii_digit())
        .fold(0u64, |acc, d| {
            acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
        });
    Some(Duration::from_millis(ms))
}
