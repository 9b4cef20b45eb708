//! The one model of MCP servers answering a resumed SSE stream, shared by `tests/guard_prop.rs`
//! and the `guard_model` fuzz target.
//!
//! The model states what servers DO, independently of how the guard decides: a tool call's event
//! log (a priming event or not, progress notifications, the result), ids from one of the id
//! schemes seen in the field, a cut at any byte, and, for each resume, the bytes a server with a
//! given behaviour sends. The client either registers the call's request id with the guard or
//! does not (then the guard is not told that a response is owed, and the client resumes by itself
//! until a response to its call has arrived). The real decoder and guard are driven with them,
//! and the outcome is checked against properties stated in the model's terms:
//!
//! - always: every delivered message is one the server sent, none twice, in the server's order,
//!   never torn (it is byte-for-byte one of the log's messages); a finished exchange has delivered
//!   the response;
//! - a correct server (whatever its ids, priming and cut points) is never refused under
//!   [`Policy::Verified`] once an event had arrived before the first cut, and the exchange
//!   finishes with every message delivered exactly once; under [`Policy::Strict`] it is refused
//!   only for a cut inside an event;
//! - a server that answers a needed resume with nothing (empty `200`, or held open) is refused when
//!   the call was registered (otherwise nothing tells the guard a response is owed); one that
//!   reuses an id with other content is refused, and so is a second, different response to the
//!   call, registered or not;
//!   one that answers with another stream's events is refused when its ids name their stream
//!   (`<n>/<stream>`, `<stream>-<n>`) and any id arrived before the cut.
//!
//! The only excuse is information the client cannot have: with opaque ids and a cut whose
//! interrupted event's `id:` line had not arrived, a server that swaps two new events is
//! indistinguishable from one that produced them in that order.
//!
//! Further scenario parts, each decoded from bytes after the ones above (zeros, so absent, in
//! inputs that end before them):
//!
//! - how one resume's `GET` is answered ([`Answer`]), with or without `Retry-After`; what the guard
//!   must decide is the decision table's `reconnect` row in `ssegate::resume`: `200` with an event
//!   stream (the media type in any letter case, with parameters) is read; `404` means the session
//!   is gone (`SessionExpired`), `409`/`410` that the server cannot replay (`ReplayUnavailable` with
//!   its status and `Retry-After`), `429`/`503` that the same resume is to be tried again after the
//!   delay (`Busy`, which does not fail the guard and does not call for a new session); any other
//!   status, and a `200` that is not an event stream, is `UnexpectedResponse` with the status and
//!   content type. An event stream whose first event is `event: error` is the server saying in
//!   band that it cannot replay (`ReplayUnavailable` without a status, with the `Retry-After` of the
//!   response that opened it). Every delay the guard hands back for a reconnect is the last one the
//!   server asked for (`Retry-After`; the model's server never sends `retry:`), zero before it asks;
//! - [`GuardConfig::contiguous_ids`]: a server whose ids number the stream contiguously
//!   (per-stream numbers, with a priming event at most at the start) is never refused for it; one
//!   that skips the interrupted event or swaps two new events is refused (`Gap`) whether the
//!   interrupted event's id was known or not; ids that break the promise may be refused as a `Gap`;
//! - two different JSON-RPC error responses with a `null` id (answers to unparseable requests)
//!   among the progress notifications: delivered like any message, never taken for a second
//!   response;
//! - a decoder `max_event` limit just above the largest message, and one progress notification
//!   over it: that event is dropped (`DecodeLimit`, which does not fail the guard and does not call
//!   for a new session) every time it arrives, wherever a cut falls (also when it is the replay of
//!   the interrupted event), and a correct server's exchange still finishes with every other
//!   message delivered once.
//!
//! Once the guard has refused a stream, it keeps refusing with the same refusal: the model goes on
//! feeding what the server sent and asks again at the disconnect, the reconnect and the replay
//! timeout, and nothing more may be delivered.
//!
//! Inputs are raw bytes ([`Scenario::from_bytes`]), so that a fuzzer and a property test share one
//! decoding; bytes past the end read as zeros.

use std::fmt::Write as _;
use std::time::Duration;

use bytes::Bytes;

use ssegate::guard::{
    ConnectionEnd, Decision, Guard, GuardConfig, Policy, ReconnectResponse, Refusal, RefusalKind,
    Registry,
};
use ssegate::message::RpcId;
use ssegate::sse::{DecodeError, Decoder, DecoderConfig};

use ssegate_rng::SplitMix64;

/// Reads choices from raw bytes; zeros once exhausted.
struct Bits<'a> {
    data: &'a [u8],
    at: usize,
}

impl Bits<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn below(&mut self, n: usize) -> usize {
        usize::from(self.u16()) % n.max(1)
    }
}

/// The id scheme of the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ids {
    /// Per-stream contiguous numbers: `0`, `1`, ...
    Plain,
    /// rmcp: `<n>/<request>`.
    Rmcp,
    /// `<stream>-<n>` (the loopback server).
    Dashed,
    /// One counter for all the session's streams: this stream gets increasing, non-contiguous ids.
    SessionCounter,
    /// uuid4 per event (Python SDK).
    Uuid,
    /// uuid4 per event whose last group is all digits.
    UuidDigits,
    /// TypeScript SDK: `<stream>_<ms>_<random>`.
    Ts,
}

impl Ids {
    const ALL: [Ids; 7] = [
        Ids::Plain,
        Ids::Rmcp,
        Ids::Dashed,
        Ids::SessionCounter,
        Ids::Uuid,
        Ids::UuidDigits,
        Ids::Ts,
    ];

    /// Ids that carry no order a client could rely on.
    pub fn is_opaque(self) -> bool {
        matches!(self, Ids::Uuid | Ids::UuidDigits | Ids::Ts)
    }

    /// Ids that name their stream in a numbered shape (`<n>/<stream>`, `<stream>-<n>`): one id
    /// before a cut tells this stream's events from another's.
    pub fn name_the_stream(self) -> bool {
        matches!(self, Ids::Rmcp | Ids::Dashed)
    }
}

/// When the server sends priming events (empty data, a fresh id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priming {
    /// Never.
    Never,
    /// At the start of the stream only.
    First,
    /// At the start of every connection it opens, resumes included (a fresh id each time).
    EveryOpen,
    /// At the start of the stream, and on a resume at the start of the live tail, after what it
    /// had stored was replayed (Python SDK 2.x).
    LiveTail,
}

impl Priming {
    const ALL: [Priming; 4] = [
        Priming::Never,
        Priming::First,
        Priming::EveryOpen,
        Priming::LiveTail,
    ];
}

/// What the server does on the first resume (later resumes are answered faithfully).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Continues strictly after `Last-Event-ID`.
    Correct,
    /// Re-sends the `Last-Event-ID` event first, then continues (rmcp).
    ResendLast,
    /// Re-sends already-seen events (newest first) under their ids, then continues (TypeScript
    /// example store).
    ResendSeen,
    /// The rest of the call, the response included, arrives on the session's standalone `GET`
    /// stream; the resume gets an empty `200`.
    ResponseElsewhere,
    /// Lost its buffer: a new stream, new ids, the whole call again, with a priming event.
    RestartPriming,
    /// The same without a priming event.
    RestartBare,
    /// Sends the first two new events in swapped order.
    OutOfOrder,
    /// Lost its buffer: `200` with an empty body.
    EmptyBody,
    /// Lost its buffer: `200` held open with keep-alive comments only (the replay timeout fires).
    HeldOpen,
    /// Skips the first event after `Last-Event-ID`.
    SkipInterrupted,
    /// Re-sends the `Last-Event-ID` event's id with other content, then continues.
    ReuseId,
    /// Continues correctly, then sends a second, different response to the call under a new id.
    SecondResponse,
    /// Answers with another stream's new events (a store shared across sessions that names
    /// streams by request id): its own progress and a different result for the same request id,
    /// under that stream's ids, which go on from where that stream's counter is.
    ForeignStream,
}

impl Behaviour {
    const ALL: [Behaviour; 13] = [
        Behaviour::Correct,
        Behaviour::ResendLast,
        Behaviour::ResendSeen,
        Behaviour::ResponseElsewhere,
        Behaviour::RestartPriming,
        Behaviour::RestartBare,
        Behaviour::OutOfOrder,
        Behaviour::EmptyBody,
        Behaviour::HeldOpen,
        Behaviour::SkipInterrupted,
        Behaviour::ReuseId,
        Behaviour::SecondResponse,
        Behaviour::ForeignStream,
    ];

    /// Whether this is a correct server behaviour.
    pub fn is_correct(self) -> bool {
        matches!(
            self,
            Behaviour::Correct
                | Behaviour::ResendLast
                | Behaviour::ResendSeen
                | Behaviour::ResponseElsewhere
        )
    }
}

/// How the server answers one resume's `GET`: the status and headers, and for an in-band refusal
/// the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `200 text/event-stream`: the body is the behaviour's reply.
    EventStream,
    /// `200` with `Text/Event-Stream; charset=utf-8`: the same media type.
    EventStreamParams,
    /// `200` with another content type (a JSON body, a page).
    NotEventStream(&'static str),
    /// `200` without a content type.
    NoContentType,
    /// `404`: the session is gone.
    NotFound,
    /// `409` or `410`: the server cannot replay.
    CannotReplay(u16),
    /// `429` or `503` (as many times as [`Scenario::busy_times`]), then the same resume is
    /// answered `200 text/event-stream`.
    Busy(u16),
    /// Any other status.
    Other(u16),
    /// `200 text/event-stream` whose first event is `event: error` (data JSON or text): the server
    /// cannot replay and says so in the stream.
    ErrorEvent,
}

impl Answer {
    /// Index 0 (the byte an older input reads as zero) is the plain event stream.
    const ALL: [Answer; 15] = [
        Answer::EventStream,
        Answer::EventStreamParams,
        Answer::NotEventStream("application/json"),
        Answer::NotEventStream("text/html; charset=utf-8"),
        Answer::NoContentType,
        Answer::NotFound,
        Answer::CannotReplay(409),
        Answer::CannotReplay(410),
        Answer::Busy(429),
        Answer::Busy(503),
        Answer::Other(500),
        Answer::Other(204),
        Answer::Other(302),
        Answer::Other(400),
        Answer::ErrorEvent,
    ];

    /// The response head.
    fn head(self, retry_after: Option<Duration>) -> ReconnectResponse {
        let (status, content_type) = match self {
            Answer::EventStream | Answer::ErrorEvent => (200, Some(SSE)),
            Answer::EventStreamParams => (200, Some("Text/Event-Stream; charset=utf-8")),
            Answer::NotEventStream(ct) => (200, Some(ct)),
            Answer::NoContentType => (200, None),
            Answer::NotFound => (404, Some("text/plain")),
            Answer::CannotReplay(s) | Answer::Busy(s) => (s, Some("application/json")),
            Answer::Other(s) => (s, None),
        };
        ReconnectResponse::new(status, retry_after, content_type.map(str::to_owned))
    }

    /// What the guard must decide about the head, in the model's terms (the `reconnect` row of
    /// the decision table in `ssegate::resume`): `None` when the body is to be read.
    fn refusal(self, retry_after: Option<Duration>) -> Option<RefusalKind> {
        let head = self.head(retry_after);
        match self {
            Answer::EventStream | Answer::EventStreamParams | Answer::ErrorEvent => None,
            Answer::NotEventStream(_) | Answer::NoContentType | Answer::Other(_) => {
                Some(RefusalKind::UnexpectedResponse {
                    status: head.status,
                    content_type: head.content_type,
                })
            }
            Answer::NotFound => Some(RefusalKind::SessionExpired),
            Answer::CannotReplay(status) => Some(RefusalKind::ReplayUnavailable {
                status: Some(status),
                retry_after,
            }),
            Answer::Busy(status) => Some(RefusalKind::Busy {
                status,
                retry_after,
            }),
        }
    }
}

/// A progress notification over the decoder's `max_event` limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Oversized {
    /// Its place among the progress notifications (modulo their number + 1).
    pub at: usize,
    /// The limit is the largest other message's length plus this.
    pub slack: usize,
    /// The oversized message is at least this many bytes over the limit, plus one.
    pub over: usize,
}

/// One scenario: a tool call's stream, its cuts, and the server's behaviour.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The id scheme.
    pub ids: Ids,
    /// The priming style.
    pub priming: Priming,
    /// The behaviour on the first resume.
    pub behaviour: Behaviour,
    /// Progress notifications before the result.
    pub progress: usize,
    /// Length of the result's text.
    pub result_len: usize,
    /// The first cut, as a byte offset (modulo the stream's length + 1).
    pub first_cut: usize,
    /// Cuts of the faithful replies, one per resume (`None`: the reply arrives whole), as a
    /// fraction of the reply (1..=len bytes arrive: a reply cut before its first byte is an empty
    /// `200`).
    pub reply_cuts: Vec<Option<u16>>,
    /// The guard's policy is [`Policy::Strict`].
    pub strict: bool,
    /// Bytes per chunk fed to the decoder.
    pub chunk: usize,
    /// `data` before `id` in each event (rmcp).
    pub id_after_data: bool,
    /// Seed of the random parts of ids.
    pub seed: u64,
    /// The client registered the call's request id with the guard (`Guard::expect_response`).
    pub registered: bool,
    /// How the resume of round [`Scenario::answer_round`] is answered (the others:
    /// [`Answer::EventStream`]).
    pub answer: Answer,
    /// Which resume (0: the first) gets [`Scenario::answer`].
    pub answer_round: usize,
    /// The `Retry-After` of that answer.
    pub retry_after: Option<Duration>,
    /// How many times an [`Answer::Busy`] is given before the resume is answered.
    pub busy_times: usize,
    /// The data of an [`Answer::ErrorEvent`] is a JSON-RPC error (else plain text).
    pub error_json: bool,
    /// The guard is built with [`GuardConfig::contiguous_ids`].
    pub contiguous: bool,
    /// Two different error responses with a `null` id come among the progress notifications.
    pub null_errors: bool,
    /// One progress notification is over the decoder's `max_event` limit.
    pub oversized: Option<Oversized>,
}

impl Scenario {
    /// Decodes a scenario from raw bytes (any bytes are a scenario).
    pub fn from_bytes(data: &[u8]) -> Scenario {
        let mut b = Bits { data, at: 0 };
        let ids = Ids::ALL[b.below(Ids::ALL.len())];
        let priming = Priming::ALL[b.below(Priming::ALL.len())];
        let behaviour = Behaviour::ALL[b.below(Behaviour::ALL.len())];
        let progress = b.below(5);
        let result_len = b.below(3000);
        let first_cut = usize::from(b.u16()) | (usize::from(b.u8()) << 16);
        let flags = b.u8();
        let chunk = match b.u8() {
            0..=31 => 1,
            n @ 32..=223 => usize::from(n - 30),
            _ => usize::MAX,
        };
        let seed = u64::from(b.u16()) | (u64::from(b.u16()) << 16);
        let rounds = b.below(5);
        let reply_cuts = (0..rounds)
            .map(|_| {
                let c = b.u16();
                (c & 1 == 1).then_some(c >> 1)
            })
            .collect();
        Scenario {
            ids,
            priming,
            behaviour,
            progress,
            result_len,
            first_cut,
            reply_cuts,
            strict: flags & 1 == 1,
            chunk,
            id_after_data: flags & 2 == 2,
            seed,
            // A quarter of the scenarios: the registered call is the guard's main use.
            registered: flags & 0b1100 != 0b1100,
            answer: Answer::EventStream,
            answer_round: 0,
            retry_after: None,
            busy_times: 1,
            error_json: false,
            contiguous: false,
            null_errors: false,
            oversized: None,
        }
        .extended(&mut b)
    }

    /// The scenario parts read after the reply cuts (all absent when the bytes are zeros).
    fn extended(mut self, b: &mut Bits<'_>) -> Scenario {
        self.answer = Answer::ALL[usize::from(b.u8()) % Answer::ALL.len()];
        let more = b.u8();
        let delay = b.u8();
        let oversized = b.u8();
        let sizes = b.u16();
        self.answer_round = usize::from(more & 3);
        self.retry_after = (more & 4 != 0).then(|| Duration::from_secs(u64::from(delay)));
        self.contiguous = more & 8 != 0;
        self.null_errors = more & 16 != 0;
        self.busy_times = 1 + usize::from(more >> 5 & 1);
        self.error_json = more & 64 != 0;
        self.oversized = (oversized & 1 != 0).then_some(Oversized {
            at: usize::from(oversized >> 1),
            slack: usize::from(sizes & 0xFF) % 64,
            over: usize::from(sizes >> 8) * 8,
        });
        self
    }

    /// The server's ids number the stream contiguously (what [`GuardConfig::contiguous_ids`]
    /// promises): per-stream numbers, a priming event at most at the start (the model's later
    /// priming ids come from the counter past the whole log).
    pub fn contiguous_promise_kept(&self) -> bool {
        matches!(self.ids, Ids::Plain | Ids::Rmcp | Ids::Dashed)
            && matches!(self.priming, Priming::Never | Priming::First)
    }

    /// The decoder's `max_event` limit, when one is set.
    pub fn max_event(&self) -> Option<usize> {
        let o = self.oversized?;
        let largest = normal_messages(self).iter().map(String::len).max()?;
        Some(largest + o.slack)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Ev {
    id: String,
    data: String,
}

/// The server's id generator for one stream.
#[derive(Clone, Debug)]
struct IdGen {
    ids: Ids,
    rng: SplitMix64,
    stream: u32,
    n: u64,
}

impl IdGen {
    fn uuid(&mut self, digits: bool) -> String {
        let a = self.rng.next();
        let b = self.rng.next();
        let last = if digits {
            format!("{:012}", b % 1_000_000_000_000)
        } else {
            format!("{:012x}", b & 0xFFFF_FFFF_FFFF)
        };
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{last}",
            a >> 32,
            (a >> 16) & 0xFFFF,
            a & 0xFFF,
            0x8000 | ((b >> 48) & 0x3FFF),
        )
    }

    fn next(&mut self) -> String {
        let n = self.n;
        self.n += 1;
        match self.ids {
            Ids::Plain => n.to_string(),
            Ids::Rmcp => format!("{n}/{}", self.stream),
            Ids::Dashed => format!("s{}-{n}", self.stream),
            Ids::SessionCounter => {
                // Other streams of the session take the numbers in between.
                self.n += self.rng.next() % 3;
                (u64::from(self.stream) * 1000 + n).to_string()
            }
            Ids::Uuid => self.uuid(false),
            Ids::UuidDigits => self.uuid(true),
            Ids::Ts => {
                let r = self.rng.next();
                format!(
                    "st{}_{}_{:x}",
                    self.stream,
                    1_733_000_000_000 + n * 7,
                    r & 0xFF_FFFF
                )
            }
        }
    }

    /// The generator of a new stream of the same server.
    fn restarted(&self) -> IdGen {
        IdGen {
            ids: self.ids,
            rng: SplitMix64(self.rng.0 ^ 0x5EED),
            stream: self.stream + 1,
            // A session-wide counter goes on; per-stream counters start again.
            n: if self.ids == Ids::SessionCounter {
                self.n
            } else {
                0
            },
        }
    }
}

fn progress_message(p: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"t","progress":{p}}}}}"#
    )
}

fn result_message(len: usize) -> String {
    let text: String = "lorem \\\"ipsum\\\" dolor \\n sit amet "
        .chars()
        .cycle()
        .take(len)
        .collect();
    let text = text.trim_end_matches('\\');
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#
    )
}

fn null_error_message(code: i32, message: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":{code},"message":"{message}"}}}}"#)
}

/// A progress notification of exactly `len` bytes, or as short as it can be.
fn long_progress_message(p: usize, len: usize) -> String {
    let head = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"t","progress":{p},"message":""#
    );
    let tail = r#""}}"#;
    let pad = len.saturating_sub(head.len() + tail.len());
    format!("{head}{}{tail}", "x".repeat(pad))
}

/// The call's messages but the oversized one: the progress notifications (with the `null`-id
/// errors after the first), then the result.
fn normal_messages(s: &Scenario) -> Vec<String> {
    let mut out: Vec<String> = (0..s.progress).map(progress_message).collect();
    if s.null_errors {
        let at = out.len().min(1);
        out.insert(at, null_error_message(-32600, "Invalid Request"));
        out.insert(at, null_error_message(-32700, "Parse error"));
    }
    out.push(result_message(s.result_len));
    out
}

/// The call's messages, in order: the progress notifications, then the result.
fn messages(s: &Scenario) -> Vec<String> {
    let mut out = normal_messages(s);
    if let (Some(o), Some(limit)) = (s.oversized, s.max_event()) {
        let at = o.at % out.len();
        out.insert(at, long_progress_message(900 + at, limit + 1 + o.over));
    }
    out
}

fn build_log(idgen: &mut IdGen, priming: bool, messages: &[String]) -> Vec<Ev> {
    let mut log = Vec::new();
    if priming {
        log.push(Ev {
            id: idgen.next(),
            data: String::new(),
        });
    }
    for m in messages {
        log.push(Ev {
            id: idgen.next(),
            data: m.clone(),
        });
    }
    log
}

fn frame(e: &Ev, id_after_data: bool) -> String {
    if id_after_data {
        format!("data: {}\nid: {}\n\n", e.data, e.id)
    } else {
        format!("id: {}\ndata: {}\n\n", e.id, e.data)
    }
}

/// What a cut at `cut` bytes into the frames of `evs` leaves the client with.
#[derive(Clone, Copy, Debug, Default)]
struct CutInfo {
    /// Events received whole.
    complete: usize,
    /// The cut fell inside an event.
    mid_event: bool,
    /// ... a message, after its `id:` line and a first byte of its data had arrived (the client
    /// knows which message was interrupted).
    id_known: bool,
}

fn cut_info(evs: &[Ev], id_after_data: bool, cut: usize) -> CutInfo {
    let mut at = 0;
    for (i, e) in evs.iter().enumerate() {
        let len = frame(e, id_after_data).len();
        if cut < at + len {
            let into = cut - at;
            let id_line = 5 + e.id.len();
            let data_line = 7 + e.data.len();
            // Where the id line ends, and where the first data byte does ("data: " is 6 bytes).
            let (id_end, data_start) = if id_after_data {
                (data_line + id_line, 6)
            } else {
                (id_line, id_line + 6)
            };
            return CutInfo {
                complete: i,
                mid_event: into > 0,
                id_known: !e.data.is_empty() && into >= id_end && into > data_start,
            };
        }
        at += len;
    }
    CutInfo {
        complete: evs.len(),
        ..CutInfo::default()
    }
}

/// The server side of the model.
struct Server {
    log: Vec<Ev>,
    idgen: IdGen,
    priming: Priming,
    /// Priming ids sent on resumed connections that are not in the log, with the log position a
    /// resume from them continues after.
    primings: Vec<(String, usize)>,
    /// The server lost the log (after a restart, the old ids are unknown).
    lost_old: Option<Vec<Ev>>,
    /// Ids of another stream's events it answered a resume with.
    foreign: Vec<String>,
}

/// One reply to a resume.
enum Reply {
    /// `200` with these events (and the reply may be cut, when `faithful`).
    Events { evs: Vec<Ev>, faithful: bool },
    /// `200` with an empty body.
    Empty,
    /// `200` held open with keep-alive comments only.
    HeldOpen,
}

impl Server {
    fn position(&self, last: &str) -> Option<usize> {
        if let Some(i) = self.log.iter().position(|e| e.id == last) {
            return Some(i);
        }
        self.primings
            .iter()
            .find(|(id, _)| id == last)
            .map(|&(_, i)| i)
    }

    /// The faithful reply to a resume from log position `i`; `mid_event`: the cut that led here
    /// fell inside an event (the server had produced the interrupted event).
    fn faithful(&mut self, i: usize, mid_event: bool, prefix: Vec<Ev>) -> Vec<Ev> {
        let mut out = Vec::new();
        if self.priming == Priming::EveryOpen {
            let id = self.idgen.next();
            self.primings.push((id.clone(), i));
            out.push(Ev {
                id,
                data: String::new(),
            });
        }
        out.extend(prefix);
        if self.priming == Priming::LiveTail {
            // What was stored is replayed, then the live tail opens with a stored priming event.
            let stored_end = (i + 1 + usize::from(mid_event)).min(self.log.len());
            out.extend(self.log[i + 1..stored_end].iter().cloned());
            let priming = Ev {
                id: self.idgen.next(),
                data: String::new(),
            };
            self.log.insert(stored_end, priming);
            out.extend(self.log[stored_end..].iter().cloned());
        } else {
            out.extend(self.log[i + 1..].iter().cloned());
        }
        out
    }

    fn reply(
        &mut self,
        last: &str,
        behaviour: Behaviour,
        mid_event: bool,
        messages: &[String],
    ) -> Result<Reply, String> {
        let Some(i) = self.position(last) else {
            if self
                .lost_old
                .as_ref()
                .is_some_and(|old| old.iter().any(|e| e.id == last))
            {
                // A restarted server does not know the old stream's ids any more.
                return Ok(Reply::Empty);
            }
            if self.foreign.iter().any(|id| *id == last) {
                // Another stream's id: this stream's store has nothing after it.
                return Ok(Reply::Empty);
            }
            return Err(format!(
                "the guard resumed from {last:?}, an id the server never sent"
            ));
        };
        let faithful = |s: &mut Server, prefix| Reply::Events {
            evs: s.faithful(i, mid_event, prefix),
            faithful: true,
        };
        Ok(match behaviour {
            Behaviour::Correct => faithful(self, Vec::new()),
            Behaviour::ResendLast => {
                let last = vec![self.log[i].clone()];
                faithful(self, last)
            }
            Behaviour::ResendSeen => {
                let seen = self.log[..=i].iter().rev().cloned().collect();
                faithful(self, seen)
            }
            Behaviour::ResponseElsewhere | Behaviour::EmptyBody => Reply::Empty,
            Behaviour::HeldOpen => Reply::HeldOpen,
            Behaviour::RestartPriming | Behaviour::RestartBare => {
                let mut idgen = self.idgen.restarted();
                let log = build_log(&mut idgen, behaviour == Behaviour::RestartPriming, messages);
                self.lost_old = Some(std::mem::replace(&mut self.log, log.clone()));
                self.idgen = idgen;
                self.primings.clear();
                Reply::Events {
                    evs: log,
                    faithful: false,
                }
            }
            Behaviour::OutOfOrder => {
                let mut evs = self.log[i + 1..].to_vec();
                if evs.len() >= 2 {
                    evs.swap(0, 1);
                }
                Reply::Events {
                    evs,
                    faithful: false,
                }
            }
            Behaviour::SkipInterrupted => Reply::Events {
                evs: self.log.get(i + 2..).unwrap_or(&[]).to_vec(),
                faithful: false,
            },
            Behaviour::ForeignStream => {
                let mut other = self.idgen.restarted();
                other.n += 5;
                let foreign = [
                    progress_message(500 + i),
                    result_message(messages[messages.len() - 1].len() + 7),
                ];
                let evs = build_log(&mut other, false, &foreign);
                self.foreign.extend(evs.iter().map(|e| e.id.clone()));
                Reply::Events {
                    evs,
                    faithful: false,
                }
            }
            Behaviour::SecondResponse => {
                let mut evs = self.log[i + 1..].to_vec();
                evs.push(Ev {
                    id: self.idgen.next(),
                    data: result_message(messages[messages.len() - 1].len() + 1),
                });
                Reply::Events {
                    evs,
                    faithful: false,
                }
            }
            Behaviour::ReuseId => {
                let mut evs = vec![Ev {
                    id: self.log[i].id.clone(),
                    data: progress_message(1000 + i),
                }];
                evs.extend(self.log[i + 1..].iter().cloned());
                Reply::Events {
                    evs,
                    faithful: false,
                }
            }
        })
    }
}

/// Whether `m` is a response to the call (request id 1): the result, or another server's.
fn is_call_response(m: &[u8]) -> bool {
    m.starts_with(br#"{"jsonrpc":"2.0","id":1,"#)
}

/// What happened to one scenario.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Messages delivered on the call's stream, in order.
    pub delivered: Vec<Bytes>,
    /// Messages delivered on the session's `GET` stream.
    pub delivered_elsewhere: Vec<Bytes>,
    /// The refusal, if the guard refused.
    pub refused: Option<RefusalKind>,
    /// The exchange finished: no response outstanding at a connection end.
    pub finished: bool,
    /// The first cut came after at least one whole event (not one over the decoder's limit).
    pub event_before_cut: bool,
    /// The response was still outstanding at the first cut.
    pub response_outstanding_at_cut: bool,
    /// Some cut fell inside an event.
    pub mid_event_cut: bool,
    /// The first cut fell inside an event whose `id:` line had arrived.
    pub first_cut_id_known: bool,
    /// The scenario ran out of rounds without finishing.
    pub stalled: bool,
    /// The call was not registered and the client had no `Last-Event-ID` to resume from (no
    /// event before the cut): the guard, not told of the call, had nothing to refuse.
    pub lost: bool,
    /// [`Scenario::answer`] was given (at [`Scenario::answer_round`]), with the refusal the model
    /// demands for it (`None`: the body is read).
    pub answered: Option<Option<RefusalKind>>,
    /// `Busy` refusals the guard reported (each checked as it came).
    pub busy: usize,
    /// Events the decoders dropped over `max_event` (each checked as it came).
    pub dropped: usize,
    /// A resumed connection of the call's stream had an event dropped before it delivered a
    /// message.
    pub dropped_on_resume: bool,
    /// Events in the first resume's reply when the server misbehaved in its order (out of order,
    /// skip the interrupted event).
    pub reordered_reply: Option<usize>,
}

/// Feeds `body` in `chunk`-byte pieces; returns the stream refusal, if the guard refused (now or
/// before). A
/// `DecodeLimit` is checked and counted, and the feeding goes on. After a refusal the rest of the
/// body is still fed: every decision must then be that same refusal. `dropped_first` is set when
/// an event is dropped before any message is delivered.
fn feed(
    guard: &mut Guard,
    decoder: &mut Decoder,
    body: &[u8],
    chunk: usize,
    out: &mut Vec<Bytes>,
    dropped: &mut usize,
    mut dropped_first: Option<&mut bool>,
) -> Result<Option<Refusal>, String> {
    let body = Bytes::copy_from_slice(body);
    // A guard that refused already must keep refusing.
    let mut refused: Option<Refusal> = guard.failure().cloned();
    let delivered = out.len();
    let mut at = 0;
    while at < body.len() {
        let end = at.saturating_add(chunk).min(body.len());
        decoder.feed(body.slice(at..end));
        at = end;
        while let Some(ev) = decoder.next_event() {
            let decision = match ev {
                Ok(ev) => guard.on_event(ev),
                Err(e) => {
                    let r = guard.on_decode_error(&e);
                    if refused.is_none() {
                        decode_limit(guard, &e, &r)?;
                        *dropped += 1;
                        if let Some(flag) = dropped_first.as_deref_mut()
                            && delivered == out.len()
                        {
                            *flag = true;
                        }
                        continue;
                    }
                    Err(r)
                }
            };
            match (decision, &refused) {
                (Ok(Decision::Deliver(d)), None) => out.push(d.message.data().contiguous()),
                (Ok(_), None) => {}
                (Err(e), None) => {
                    if !e.must_renegotiate() {
                        return Err(format!(
                            "an event was answered with a transient refusal: {e}"
                        ));
                    }
                    if guard.failure() != Some(&e) {
                        return Err(format!("a refusal the guard does not keep: {e}"));
                    }
                    refused = Some(e);
                }
                (Ok(d), Some(r)) => {
                    return Err(format!("after the refusal {r}, the guard decided {d:?}"));
                }
                (Err(e), Some(r)) if e != *r => {
                    return Err(format!(
                        "after the refusal {r}, the guard refused again: {e}"
                    ));
                }
                (Err(_), Some(_)) => {}
            }
        }
    }
    Ok(refused)
}

/// A dropped event is reported as itself, does not fail the guard and needs no new session.
fn decode_limit(guard: &Guard, error: &DecodeError, r: &Refusal) -> Result<(), String> {
    let reported = matches!(&r.kind, RefusalKind::DecodeLimit { error: e } if e == error);
    if !reported || r.must_renegotiate() || guard.failure().is_some() {
        return Err(format!(
            "the decoder dropped an event ({error}); the guard said {r} (failed: {})",
            guard.failure().is_some()
        ));
    }
    if !matches!(error, DecodeError::EventTooLarge { .. }) {
        return Err(format!(
            "only max_event is set, the decoder reported {error}"
        ));
    }
    Ok(())
}

/// Once refused, the guard answers the connection end, a reconnect and a replay timeout with the
/// same refusal.
fn keeps_refusing(guard: &mut Guard, decoder: &mut Decoder, r: &Refusal) -> Result<(), String> {
    let end = guard.on_disconnect(ConnectionEnd::from_decoder(decoder));
    let head = guard.on_reconnect(&Answer::EventStream.head(None));
    let timeout = guard.on_replay_timeout(REPLAY_TIMEOUT);
    if end.as_ref().err() != Some(r)
        || head.as_ref().err() != Some(r)
        || timeout.err().as_ref() != Some(r)
    {
        return Err(format!(
            "after the refusal {r}, the guard answered the disconnect with {end:?} and the reconnect with {head:?}"
        ));
    }
    Ok(())
}

/// The requests the call's stream still owes: the call, when it was registered and no response to
/// it was delivered anywhere in the session.
fn owed(s: &Scenario, out: &Outcome) -> Vec<RpcId> {
    let answered = out
        .delivered
        .iter()
        .chain(&out.delivered_elsewhere)
        .any(|m| is_call_response(m));
    if s.registered && !answered {
        vec![RpcId::Number(1)]
    } else {
        Vec::new()
    }
}

/// A stream refusal calls for a new session and names the call as still owed when it was
/// registered and no response to it was delivered anywhere in the session (`Refusal::outstanding`);
/// then the guard keeps it ([`keeps_refusing`]).
fn settled(
    guard: &mut Guard,
    decoder: &mut Decoder,
    r: &Refusal,
    s: &Scenario,
    out: &Outcome,
) -> Result<(), String> {
    let owed = owed(s, out);
    if !r.must_renegotiate() || r.outstanding != owed {
        return Err(format!(
            "the refusal {r} (renegotiate: {}) names {:?} as outstanding; the call owes {owed:?}",
            r.must_renegotiate(),
            r.outstanding
        ));
    }
    keeps_refusing(guard, decoder, r)
}

fn frames(evs: &[Ev], id_after_data: bool) -> String {
    evs.iter().fold(String::new(), |mut s, e| {
        let _ = write!(s, "{}", frame(e, id_after_data));
        s
    })
}

const SSE: &str = "text/event-stream";

/// The wait a held-open resume is reported after (the stream's default replay timeout).
const REPLAY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The data of an [`Answer::ErrorEvent`]'s event.
fn error_data(json: bool) -> String {
    if json {
        null_error_message(-32000, "replay unavailable")
    } else {
        "replay unavailable".to_owned()
    }
}

/// The body of an [`Answer::ErrorEvent`].
fn error_event(json: bool) -> String {
    format!("event: error\ndata: {}\n\n", error_data(json))
}

fn limited_decoder(s: &Scenario) -> Decoder {
    let mut config = DecoderConfig::default();
    if let Some(limit) = s.max_event() {
        config.max_event(limit);
    }
    config.build()
}

/// Runs a scenario through the real decoder and guard.
pub fn play(s: &Scenario) -> Result<Outcome, String> {
    let msgs = messages(s);
    let mut idgen = IdGen {
        ids: s.ids,
        rng: SplitMix64::new(s.seed),
        stream: 1,
        n: 0,
    };
    let log = build_log(&mut idgen, s.priming != Priming::Never, &msgs);
    let mut server = Server {
        log,
        idgen,
        priming: s.priming,
        primings: Vec::new(),
        lost_old: None,
        foreign: Vec::new(),
    };
    let session = Registry::new();
    let policy = if s.strict {
        Policy::Strict
    } else {
        Policy::Verified
    };
    let mut guard = GuardConfig::default()
        .policy(policy)
        .contiguous_ids(s.contiguous)
        .build_in(&session);
    if s.registered {
        guard.expect_response(RpcId::Number(1));
    }
    let mut get_guard = GuardConfig::default().build_in(&session);
    let mut decoder = limited_decoder(s);
    let mut out = Outcome::default();
    let limit = s.max_event().unwrap_or(usize::MAX);
    // The last delay the server asked for.
    let mut asked: Option<Duration> = None;

    let wire = frames(&server.log, s.id_after_data);
    let cut = s.first_cut % (wire.len() + 1);
    let info = cut_info(&server.log, s.id_after_data, cut);
    // An event the decoder drops over its limit gives the client nothing, perhaps not even its id.
    out.event_before_cut = server.log[..info.complete]
        .iter()
        .any(|e| e.data.len() <= limit);
    out.response_outstanding_at_cut = info.complete < server.log.len();
    out.mid_event_cut = info.mid_event;
    out.first_cut_id_known = info.id_known;
    let mut last_cut = info;
    if let Some(r) = feed(
        &mut guard,
        &mut decoder,
        &wire.as_bytes()[..cut],
        s.chunk,
        &mut out.delivered,
        &mut out.dropped,
        None,
    )? {
        settled(&mut guard, &mut decoder, &r, s, &out)?;
        out.refused = Some(r.kind);
        return Ok(out);
    }
    for round in 0..12 {
        let resume = match guard.on_disconnect(ConnectionEnd::from_decoder(&mut decoder)) {
            Ok(r) => r,
            Err(e) => {
                settled(&mut guard, &mut decoder, &e, s, &out)?;
                out.refused = Some(e.kind);
                return Ok(out);
            }
        };
        if resume.delay != asked.unwrap_or_default() {
            return Err(format!(
                "the guard asks to wait {:?} before reconnecting; the server asked for {asked:?}",
                resume.delay
            ));
        }
        let needed = if s.registered {
            resume.needed
        } else {
            // The client knows its call is unanswered; the guard does not.
            !out.delivered
                .iter()
                .chain(&out.delivered_elsewhere)
                .any(|m| is_call_response(m))
        };
        if !needed {
            out.finished = true;
            return Ok(out);
        }
        let Some(last) = resume.last_event_id else {
            if s.registered {
                return Err("a needed resume without a Last-Event-ID".into());
            }
            out.lost = true;
            return Ok(out);
        };
        let last = String::from_utf8_lossy(&last).into_owned();
        let behaviour = if round == 0 {
            s.behaviour
        } else {
            Behaviour::Correct
        };
        if behaviour == Behaviour::ResponseElsewhere {
            // The rest of the call (the response included) goes out on the GET stream.
            let at = server.position(&last).unwrap_or(usize::MAX);
            let rest: Vec<Ev> = server.log[at.saturating_add(1).min(server.log.len())..]
                .iter()
                .filter(|e| !e.data.is_empty())
                .enumerate()
                .map(|(k, e)| Ev {
                    id: format!("get-{k}"),
                    data: e.data.clone(),
                })
                .collect();
            let body = frames(&rest, s.id_after_data);
            if let Some(t) = feed(
                &mut get_guard,
                // The GET stream's decoder has the same limits.
                &mut limited_decoder(s),
                body.as_bytes(),
                s.chunk,
                &mut out.delivered_elsewhere,
                &mut out.dropped,
                None,
            )? {
                return Err(format!("the GET stream refused the response: {t}"));
            }
        }
        let reply = server.reply(&last, behaviour, last_cut.mid_event, &msgs)?;
        if round == 0
            && let Reply::Events { evs, .. } = &reply
            && matches!(
                behaviour,
                Behaviour::OutOfOrder | Behaviour::SkipInterrupted
            )
        {
            out.reordered_reply = Some(evs.len());
        }
        let (answer, retry_after) = if round == s.answer_round {
            out.answered = Some(s.answer.refusal(s.retry_after));
            (s.answer, s.retry_after)
        } else {
            (Answer::EventStream, None)
        };
        let mut head = answer.head(retry_after);
        if let Answer::Busy(_) = answer {
            for _ in 0..s.busy_times {
                let e = match guard.on_reconnect(&head) {
                    Ok(()) => return Err(format!("{head:?} was read as an event stream")),
                    Err(e) => e,
                };
                asked = retry_after.or(asked);
                // Transient: the same resume is tried again after the delay, on the same session.
                if Some(&e.kind) != answer.refusal(retry_after).as_ref()
                    || e.outstanding != owed(s, &out)
                    || e.must_renegotiate()
                    || e.retry_after() != retry_after
                    || guard.failure().is_some()
                    || guard.server_retry() != asked
                {
                    return Err(format!(
                        "{head:?} was answered {e} (failed: {}, the server's delay {:?})",
                        guard.failure().is_some(),
                        guard.server_retry()
                    ));
                }
                out.busy += 1;
            }
            head = Answer::EventStream.head(None);
        }
        asked = head.retry_after.or(asked);
        let (body, cut_evs) = match reply {
            _ if answer == Answer::ErrorEvent => (error_event(s.error_json), None),
            Reply::Empty => (String::new(), None),
            Reply::HeldOpen => (": keep-alive\n\n: keep-alive\n\n".into(), None),
            Reply::Events { evs, faithful } => {
                let body = frames(&evs, s.id_after_data);
                let cut = match s.reply_cuts.get(round) {
                    Some(Some(f)) if faithful && !body.is_empty() => {
                        1 + usize::from(*f) % body.len()
                    }
                    _ => body.len(),
                };
                (body[..cut].to_string(), Some((evs, cut)))
            }
        };
        if let Err(e) = guard.on_reconnect(&head) {
            if guard.failure() != Some(&e) {
                return Err(format!(
                    "{head:?} was refused with {e}, which the guard does not keep"
                ));
            }
            // A client that reads the body anyway gets nothing from it.
            if let Some(r) = feed(
                &mut guard,
                &mut decoder,
                body.as_bytes(),
                s.chunk,
                &mut out.delivered,
                &mut out.dropped,
                None,
            )? && r != e
            {
                return Err(format!("{head:?} was refused with {e}, then with {r}"));
            }
            settled(&mut guard, &mut decoder, &e, s, &out)?;
            out.refused = Some(e.kind);
            return Ok(out);
        }
        if let Some((evs, cut)) = &cut_evs {
            last_cut = cut_info(evs, s.id_after_data, *cut);
            out.mid_event_cut |= last_cut.mid_event;
        }
        if let Some(r) = feed(
            &mut guard,
            &mut decoder,
            body.as_bytes(),
            s.chunk,
            &mut out.delivered,
            &mut out.dropped,
            Some(&mut out.dropped_on_resume),
        )? {
            settled(&mut guard, &mut decoder, &r, s, &out)?;
            out.refused = Some(r.kind);
            return Ok(out);
        }
        if behaviour == Behaviour::HeldOpen && answer != Answer::ErrorEvent {
            // The connection never ends: without a refusal at the timeout, the client waits forever.
            if let Err(e) = guard.on_replay_timeout(REPLAY_TIMEOUT) {
                settled(&mut guard, &mut decoder, &e, s, &out)?;
                out.refused = Some(e.kind);
            } else {
                out.stalled = true;
            }
            return Ok(out);
        }
    }
    out.stalled = true;
    Ok(out)
}

/// Checks the model's properties for one scenario (see the module docs).
pub fn check(s: &Scenario) -> Result<(), String> {
    let out = play(s).map_err(|e| format!("{e}\nscenario: {s:?}"))?;
    let msgs: Vec<Bytes> = messages(s).into_iter().map(Bytes::from).collect();
    let limit = s.max_event().unwrap_or(usize::MAX);
    // What a decoder under the limit can deliver: all but the oversized message.
    let deliverable: Vec<&Bytes> = msgs.iter().filter(|m| m.len() <= limit).collect();
    let response = msgs.last().cloned().unwrap_or_default();
    let fail = |what: &str| Err(format!("{what}\nscenario: {s:?}\noutcome: {out:?}"));

    // How the server answered a resume decides, whatever it did before or would have sent.
    let answer_refused = match &out.answered {
        Some(Some(RefusalKind::Busy { .. })) | Some(None) | None => None,
        Some(Some(kind)) => Some(kind),
    };
    if let Some(kind) = answer_refused
        && out.refused.as_ref() != Some(kind)
    {
        return fail(&format!(
            "the answer to a resume was not refused as {kind:?}"
        ));
    }
    // (Unless its data is over the decoder's limit: dropped, the guard never sees it.)
    let in_band = out.answered.is_some()
        && s.answer == Answer::ErrorEvent
        && error_data(s.error_json).len() <= limit;
    if in_band {
        let kind = RefusalKind::ReplayUnavailable {
            status: None,
            retry_after: s.retry_after,
        };
        if out.refused.as_ref() != Some(&kind) {
            return fail("an event: error answering a resume was not refused as ReplayUnavailable");
        }
    }
    // The server's answer at the first resume replaced the behaviour's reply.
    let answered_first = s.answer_round == 0 && (answer_refused.is_some() || in_band);

    // Never a message the server did not send, never twice, never torn.
    let mut all: Vec<&Bytes> = out
        .delivered
        .iter()
        .chain(&out.delivered_elsewhere)
        .collect();
    let resumed_for_response =
        out.event_before_cut && out.response_outstanding_at_cut && !(s.strict && out.mid_event_cut);
    if s.behaviour == Behaviour::ForeignStream {
        // Ids that name their stream prove the resume is another stream's: refused (as another
        // stream, or as a gap when the interrupted event's id was known) before any of its
        // messages is delivered. Other ids carry no stream identity (see the guard's docs):
        // the client cannot tell, and the model states nothing more.
        if resumed_for_response
            && !answered_first
            && s.oversized.is_none()
            && !s.contiguous
            && s.ids.name_the_stream()
            && out.refused.is_none()
        {
            return fail("another stream's events after a resume were not refused");
        }
        if !s.ids.name_the_stream() {
            return Ok(());
        }
    }
    if let Some(d) = all.iter().find(|d| !msgs.contains(d)) {
        return fail(&format!(
            "delivered a message the server never sent (torn?): {d:?}"
        ));
    }
    if let Some(d) = all.iter().find(|d| d.len() > limit) {
        return fail(&format!(
            "delivered a message over the decoder's limit: {} bytes",
            d.len()
        ));
    }
    all.sort();
    if all.windows(2).any(|w| w[0] == w[1]) {
        return fail("delivered a message twice");
    }
    // In the server's order, unless the client could not know it.
    let unknowable =
        s.behaviour == Behaviour::OutOfOrder && s.ids.is_opaque() && !out.first_cut_id_known;
    let mut next = 0;
    for d in &out.delivered {
        match msgs[next..].iter().position(|m| m == d) {
            Some(p) => next += p + 1,
            None if unknowable => {}
            None => return fail("delivered messages out of order"),
        }
    }
    if out.finished && !all.contains(&&response) {
        return fail("finished without delivering the response");
    }
    if s.oversized.is_none() && out.dropped > 0 {
        return fail("an event was dropped under the default limits");
    }
    // A refusal the client's own settings excuse: `contiguous_ids` for ids that are not.
    let excused = |r: &RefusalKind| {
        s.contiguous && !s.contiguous_promise_kept() && matches!(r, RefusalKind::Gap { .. })
    };
    if s.behaviour.is_correct() {
        if out.stalled {
            return fail("a correct server's exchange did not finish");
        }
        if !out.event_before_cut {
            return Ok(());
        }
        match (&out.refused, s.strict) {
            (None, _) => {}
            (Some(RefusalKind::PartialEvent { .. }), true) if out.mid_event_cut => return Ok(()),
            (Some(r), _) if Some(r) == answer_refused || in_band || excused(r) => return Ok(()),
            (Some(_), _) => return fail("a correct server was refused"),
        }
        if !out.finished {
            return fail("a correct server's exchange did not finish");
        }
        if all.len() != deliverable.len() {
            return fail("a finished exchange with a correct server lost messages");
        }
        if deliverable.len() < msgs.len() && out.dropped == 0 {
            return fail("an event over the decoder's limit was delivered or not reported");
        }
        return Ok(());
    }
    if answered_first || out.refused.as_ref().is_some_and(excused) {
        return Ok(());
    }
    let silent = matches!(s.behaviour, Behaviour::EmptyBody | Behaviour::HeldOpen);
    if resumed_for_response
        && s.registered
        && silent
        && !matches!(out.refused, Some(RefusalKind::ReplayMissed { .. }))
    {
        return fail("an empty or silent resume was not refused");
    }
    // The evidence of the next two is a message of the server's own making, which a decoder
    // limit may drop before the guard sees it.
    let seen = s.oversized.is_none();
    let reused = s.behaviour == Behaviour::ReuseId && seen;
    if resumed_for_response
        && reused
        && !matches!(out.refused, Some(RefusalKind::StreamRestarted { .. }))
    {
        return fail("an id reused with other content was not refused");
    }
    if resumed_for_response
        && s.behaviour == Behaviour::SecondResponse
        && seen
        && !matches!(out.refused, Some(RefusalKind::DuplicateResponse { .. }))
    {
        return fail("a second, different response was not refused");
    }
    // With contiguous ids promised and kept, a skipped or swapped event is a gap, known or not.
    let out_of_place = match s.behaviour {
        Behaviour::SkipInterrupted => out.reordered_reply.is_some_and(|n| n >= 1),
        Behaviour::OutOfOrder => out.reordered_reply.is_some_and(|n| n >= 2),
        _ => false,
    };
    if resumed_for_response
        && out_of_place
        && s.contiguous
        && s.contiguous_promise_kept()
        && s.oversized.is_none()
        && !matches!(out.refused, Some(RefusalKind::Gap { .. }))
    {
        return fail("a skipped or swapped event under contiguous ids was not refused as a gap");
    }
    Ok(())
}

/// [`check`] on the scenario decoded from `data`; panics with the violation (fuzz entry point).
pub fn check_bytes(data: &[u8]) {
    if let Err(e) = check(&Scenario::from_bytes(data)) {
        panic!("guard model violated: {e}");
    }
}
