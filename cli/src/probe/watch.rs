//! One call's stream as the probe watches it: a `ResumableStream` expecting the call's response,
//! and what the probe keeps of each connection (counters and positions, no event data).

use std::time::Duration;

use bytes::Bytes;
use ssegate::inspect::{self, NumberedId};
use ssegate::message::{RpcId, RpcKind};
use ssegate::resume::{
    Answer, EndCause, Failure, Output, ReconnectResponse, Refusal, RefusalKind, Restart,
    ResumableStream, Skip, StreamConfig,
};
use ssegate::sse::DecodeError;
use tracing::debug;

use super::engine::*;

/// The ids of one connection, as far as the id scheme needs them: whether they all share one
/// stream part and strictly increase, read with the guard's own parser ([`NumberedId`]: a uuid
/// whose last group happens to be digits is opaque), and the first and last of them.
#[derive(Clone, Debug, Default)]
pub(crate) struct IdTrack {
    pub(crate) count: u64,
    pub(crate) numbers: Option<Numbers>,
    pub(crate) broken: bool,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Numbers {
    pub(crate) first: NumberedId,
    pub(crate) last: NumberedId,
}

impl IdTrack {
    pub(crate) fn push(&mut self, id: &[u8]) {
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

    pub(crate) fn numbers(&self) -> Option<&Numbers> {
        self.numbers.as_ref().filter(|_| !self.broken)
    }
}

pub(crate) fn id_scheme(first: &IdTrack, second: &IdTrack) -> IdScheme {
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
pub(crate) fn show(id: Option<&[u8]>) -> String {
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
pub(crate) struct Tally {
    /// Body bytes fed.
    pub(crate) bytes: u64,
    /// Events dispatched or dropped by the decoder.
    pub(crate) events: u64,
    /// Events with data.
    pub(crate) messages: u64,
    /// Events with an id and empty data.
    pub(crate) primings: u64,
    /// Whether the first event was a priming event.
    pub(crate) first_priming: Option<bool>,
    /// The decoder's offset after the last event (where the next one starts).
    pub(crate) last_end: u64,
    /// The largest event with data: its data bytes and where it starts and ends in the body.
    pub(crate) largest: Option<(usize, u64, u64)>,
    pub(crate) ids: IdTrack,
    /// The first event the decoder dropped over a limit.
    pub(crate) dropped: Option<DecodeError>,
}

/// Which connection of a round the stream is reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The call's own stream, up to the cut.
    Before,
    /// The resumed connection.
    After,
}

/// What the guard made of the resumed connection up to its first new message.
#[derive(Clone, Debug, Default)]
pub(crate) struct Resumed {
    /// The `Last-Event-ID` of the resume (the guard's cursor at the cut).
    pub(crate) cursor: Option<Bytes>,
    /// The interrupted message's id, when the cut came inside an event with data and an id.
    pub(crate) interrupted: Option<Bytes>,
    /// Messages re-sent unchanged before the first new one (exact replays, identical responses).
    pub(crate) resent: u64,
    /// The id of the first of them.
    pub(crate) first_resent: Option<Option<Bytes>>,
    /// The id of the first new message delivered (`Some(None)`: it had no id).
    pub(crate) first_new: Option<Option<Bytes>>,
    /// The stream's reconnect delay at the cut: the server's `retry:` or `Retry-After`, else the
    /// stream's default, raised to its floor and clamped.
    pub(crate) delay: Duration,
}

/// How the last read of a round ended.
#[derive(Debug)]
pub(crate) enum End {
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
pub(crate) struct Watch {
    pub(crate) stream: ResumableStream,
    pub(crate) request: RpcId,
    pub(crate) phase: Phase,
    pub(crate) conn: Tally,
    pub(crate) refusal: Option<(Phase, Refusal)>,
    pub(crate) answered: bool,
    pub(crate) resumed: Resumed,
    /// Said first in the round's evidence (the call's stream ended before the cut point).
    pub(crate) note: Option<String>,
    /// The instant the driver last told the stream about (bytes, a cut, a reconnect): the probe
    /// hands the stream the time of its last message, so the stream's replay timeout runs from
    /// there, as the probe's does.
    pub(crate) now: std::time::Instant,
}

impl Watch {
    pub(crate) fn new(request: RpcId, config: &StreamConfig) -> Watch {
        let mut config = config.clone();
        // The probe judges one reconnect answer: a busy server is reported, not retried.
        config.max_reconnect_attempts(1);
        let mut stream = config.build();
        stream.expect_response(request.clone());
        // The probe resumes even when the response arrived before its cut.
        stream.keep_open(true);
        inspect::observe_events(&mut stream, true);
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
    pub(crate) fn decided(&self, answer: bool) -> bool {
        self.refusal.is_some() || (answer && (self.answered || self.conn.dropped.is_some()))
    }

    pub(crate) fn refuse(&mut self, e: Refusal) {
        self.refusal.get_or_insert((self.phase, e));
    }

    pub(crate) fn fail(&mut self, failure: Failure) {
        match failure.refusal() {
            Some(e) => self.refuse(e.clone()),
            // The stream's own limits (resumes, reconnect attempts) are not the server's doing;
            // the probe resumes once per round, so they do not come up.
            None => debug!(%failure, "the stream stopped"),
        }
    }

    /// A body chunk: fed to the stream, whose outputs are taken at most `max_events` events per
    /// connection, until the guard refuses.
    pub(crate) fn feed(&mut self, chunk: Bytes, max_events: u64) {
        self.conn.bytes += chunk.len() as u64;
        self.stream.feed(chunk, self.now);
        self.drain(max_events);
    }

    /// Takes the stream's outputs about events; a connection end's outputs are taken by the
    /// caller that reported it.
    pub(crate) fn drain(&mut self, max_events: u64) {
        while self.conn.events < max_events && self.refusal.is_none() {
            let Some(output) = self.stream.poll() else {
                break;
            };
            self.on_output(output);
        }
    }

    pub(crate) fn on_output(&mut self, output: Output) {
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
                if inspect::last_event(&self.stream).is_some() {
                    self.tally();
                }
                self.fail(failure);
            }
            _ => {}
        }
    }

    /// Counts the event the stream just decided on; returns whether it had data.
    pub(crate) fn tally(&mut self) -> bool {
        let Some(event) = inspect::last_event(&self.stream) else {
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
    pub(crate) fn end_connection(&mut self, cause: EndCause) -> Option<Option<Bytes>> {
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
    pub(crate) fn cut(&mut self) -> Option<Bytes> {
        let cursor = self.end_connection(EndCause::Error).flatten();
        if self.refusal.is_none() {
            self.phase = Phase::After;
            self.conn = Tally::default();
        }
        cursor
    }

    /// The resume's response head. Returns whether to read its body.
    pub(crate) fn reconnect(&mut self, response: &ReconnectResponse) -> bool {
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
    pub(crate) fn message_at(&mut self, at: std::time::Instant) {
        self.now = self.now.max(at);
    }

    /// The server's `retry:` field, in ms: the stream reads it at the connection's end.
    pub(crate) fn retry_ms(&mut self) -> Option<u64> {
        if self.stream.is_open() {
            let _ = self.end_connection(EndCause::Eof);
        }
        self.stream.server_retry().map(|d| d.as_millis() as u64)
    }

    /// The round's verdict once its last read ended.
    pub(crate) fn finish(mut self, cut: CutAt, end: End) -> Round {
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
    pub(crate) fn describe(&self) -> (Behaviour, String) {
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
pub(crate) fn refused(kind: &RefusalKind) -> Behaviour {
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
