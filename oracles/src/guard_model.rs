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
//! Inputs are raw bytes ([`Scenario::from_bytes`]), so that a fuzzer and a property test share one
//! decoding; bytes past the end read as zeros.

use std::fmt::Write as _;

use bytes::Bytes;

use ssegate::guard::{
    ConnectionEnd, Decision, Guard, GuardConfig, Policy, ReconnectResponse, RefusalKind, Registry,
};
use ssegate::message::RpcId;
use ssegate::sse::Decoder;

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
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Ev {
    id: String,
    data: String,
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The server's id generator for one stream.
#[derive(Clone, Debug)]
struct IdGen {
    ids: Ids,
    rng: u64,
    stream: u32,
    n: u64,
}

impl IdGen {
    fn uuid(&mut self, digits: bool) -> String {
        let a = splitmix(&mut self.rng);
        let b = splitmix(&mut self.rng);
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
                self.n += splitmix(&mut self.rng) % 3;
                (u64::from(self.stream) * 1000 + n).to_string()
            }
            Ids::Uuid => self.uuid(false),
            Ids::UuidDigits => self.uuid(true),
            Ids::Ts => {
                let r = splitmix(&mut self.rng);
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
            rng: self.rng ^ 0x5EED,
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

/// The call's messages, in order: the progress notifications, then the result.
fn messages(s: &Scenario) -> Vec<String> {
    let mut out: Vec<String> = (0..s.progress).map(progress_message).collect();
    out.push(result_message(s.result_len));
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
                Reply::Events {
                    evs: build_log(&mut other, false, &foreign),
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
    /// The first cut came after at least one whole event.
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
}

fn feed(
    guard: &mut Guard,
    decoder: &mut Decoder,
    body: &[u8],
    chunk: usize,
    out: &mut Vec<Bytes>,
) -> Result<(), RefusalKind> {
    let body = Bytes::copy_from_slice(body);
    let mut at = 0;
    while at < body.len() {
        let end = at.saturating_add(chunk).min(body.len());
        decoder.feed(body.slice(at..end));
        at = end;
        while let Some(ev) = decoder.next_event() {
            let decision = match ev {
                Ok(ev) => guard.on_event(ev),
                Err(e) => Err(guard.on_decode_error(&e)),
            };
            match decision {
                Ok(Decision::Deliver(d)) => out.push(d.message.data().contiguous()),
                Ok(_) => {}
                Err(e) => return Err(e.kind),
            }
        }
    }
    Ok(())
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

/// Runs a scenario through the real decoder and guard.
pub fn play(s: &Scenario) -> Result<Outcome, String> {
    let msgs = messages(s);
    let mut idgen = IdGen {
        ids: s.ids,
        rng: s.seed,
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
    };
    let session = Registry::new();
    let policy = if s.strict {
        Policy::Strict
    } else {
        Policy::Verified
    };
    let mut guard = GuardConfig::default().policy(policy).build_in(&session);
    if s.registered {
        guard.expect_response(RpcId::Number(1));
    }
    let mut get_guard = GuardConfig::default().build_in(&session);
    let mut decoder = Decoder::new();
    let mut out = Outcome::default();

    let wire = frames(&server.log, s.id_after_data);
    let cut = s.first_cut % (wire.len() + 1);
    let info = cut_info(&server.log, s.id_after_data, cut);
    out.event_before_cut = info.complete > 0;
    out.response_outstanding_at_cut = info.complete < server.log.len();
    out.mid_event_cut = info.mid_event;
    out.first_cut_id_known = info.id_known;
    let mut last_cut = info;
    if let Err(t) = feed(
        &mut guard,
        &mut decoder,
        &wire.as_bytes()[..cut],
        s.chunk,
        &mut out.delivered,
    ) {
        out.refused = Some(t);
        return Ok(out);
    }
    for round in 0..12 {
        let resume = match guard.on_disconnect(ConnectionEnd::from_decoder(&mut decoder)) {
            Ok(r) => r,
            Err(e) => {
                out.refused = Some(e.kind);
                return Ok(out);
            }
        };
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
            if let Err(t) = feed(
                &mut get_guard,
                &mut Decoder::new(),
                body.as_bytes(),
                s.chunk,
                &mut out.delivered_elsewhere,
            ) {
                return Err(format!("the GET stream refused the response: {t}"));
            }
        }
        let reply = server.reply(&last, behaviour, last_cut.mid_event, &msgs)?;
        let ok = ReconnectResponse::new(200, None, Some(SSE.into()));
        if let Err(e) = guard.on_reconnect(&ok) {
            out.refused = Some(e.kind);
            return Ok(out);
        }
        let (body, cut_evs) = match reply {
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
        if let Some((evs, cut)) = &cut_evs {
            last_cut = cut_info(evs, s.id_after_data, *cut);
            out.mid_event_cut |= last_cut.mid_event;
        }
        if let Err(t) = feed(
            &mut guard,
            &mut decoder,
            body.as_bytes(),
            s.chunk,
            &mut out.delivered,
        ) {
            out.refused = Some(t);
            return Ok(out);
        }
        if behaviour == Behaviour::HeldOpen {
            // The connection never ends: without a refusal at the timeout, the client waits forever.
            if let Err(e) = guard.on_replay_timeout(REPLAY_TIMEOUT) {
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
    let out = play(s)?;
    let msgs: Vec<Bytes> = messages(s).into_iter().map(Bytes::from).collect();
    let response = msgs.last().cloned().unwrap_or_default();
    let fail = |what: &str| Err(format!("{what}\nscenario: {s:?}\noutcome: {out:?}"));

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
        if resumed_for_response && s.ids.name_the_stream() && out.refused.is_none() {
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
            (Some(_), _) => return fail("a correct server was refused"),
        }
        if !out.finished {
            return fail("a correct server's exchange did not finish");
        }
        if all.len() != msgs.len() {
            return fail("a finished exchange with a correct server lost messages");
        }
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
    let reused = s.behaviour == Behaviour::ReuseId;
    if resumed_for_response
        && reused
        && !matches!(out.refused, Some(RefusalKind::StreamRestarted { .. }))
    {
        return fail("an id reused with other content was not refused");
    }
    if resumed_for_response
        && s.behaviour == Behaviour::SecondResponse
        && !matches!(out.refused, Some(RefusalKind::DuplicateResponse { .. }))
    {
        return fail("a second, different response was not refused");
    }
    Ok(())
}

/// [`check`] on the scenario decoded from `data`; panics with the violation (fuzz entry point).
pub fn check_bytes(data: &[u8]) {
    if let Err(e) = check(&Scenario::from_bytes(data)) {
        panic!("guard model violated: {e}");
    }
}
