//! `replay_buffer`: arbitrary sequences of open / close / forget / append / replay / frame
//! operations under arbitrary limits, against a model that keeps every event in a flat list and
//! recomputes everything by linear scans. Every answer must match the model's, and every replayed
//! frame decodes back to the event that was appended.
//!
//! Besides the model, the invariants of the replay contract are checked on the buffer's own
//! answers, independently of how either computes them:
//!
//! 1. an event that is not stored never evicts another: an append whose admitted event is dropped
//!    as too large leaves every held event held (same count, same budget bytes, same frames);
//! 2. `replay_after` returns exactly the stored suffix (consecutive ids after the cursor, as many as
//!    were appended since) or a miss naming the first event after the cursor that is not held, every
//!    event between the cursor and it being held;
//! 3. memory is bounded: budget bytes <= `max_bytes`, budgeted events <= `max_events`, streams <=
//!    `max_streams` (at least 1), remembered too-large events <= `max_too_large`, held events <=
//!    `max_events` + `pin_last` per stream.

use std::collections::BTreeMap;

use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use ssegate::replay::{self, AppendError, FrameError, MissReason, ReplayBuffer, StreamId};
use ssegate::sse::Decoder;

const EVENT_TYPES: [Option<&str>; 6] = [
    None,
    Some("message"),
    Some("progress"),
    Some(""),
    Some("a\nb"),
    Some("\r"),
];

/// The buffer's limits (each taken modulo a small bound).
#[derive(Arbitrary, Clone, Debug)]
pub struct Limits {
    pub max_bytes: u16,
    pub max_events: u8,
    pub max_event_bytes: u16,
    pub pin_last: u8,
    pub max_streams: u8,
    pub max_too_large: u8,
}

/// One operation on the buffer and the model.
#[derive(Arbitrary, Clone, Debug)]
pub enum Op {
    Open,
    Close(u8),
    Forget(u8),
    Append {
        stream: u8,
        event: u8,
        data: Vec<u8>,
        retry: Option<u32>,
    },
    /// Append `len` copies of `byte` (so a small input reaches events of any size).
    AppendSized {
        stream: u8,
        event: u8,
        byte: u8,
        len: u16,
    },
    /// Replay after event `seq` of stream `stream` (both may name nothing).
    ReplayAfter {
        stream: u8,
        seq: u8,
    },
    /// Replay after an arbitrary id string (malformed ones included).
    ReplayRaw(String),
    Frame {
        stream: u8,
        seq: u8,
    },
}

/// A whole case: limits, then operations.
#[derive(Arbitrary, Clone, Debug)]
pub struct Case {
    pub limits: Limits,
    pub ops: Vec<Op>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// Among the newest `pin_last` of its stream: outside the budget.
    Pinned,
    Budgeted,
    Evicted,
    TooLarge,
    /// Dropped as too large, then forgotten beyond `max_too_large`: its miss says `evicted`.
    ForgottenTooLarge,
}

#[derive(Debug)]
struct MEvent {
    stream: u64,
    seq: u64,
    frame: Vec<u8>,
    held: Held,
    data: Vec<u8>,
    event: Option<&'static str>,
}

#[derive(Debug, Default)]
struct MStream {
    next_seq: u64,
    closed: bool,
}

/// The model: all events in append order (so "oldest" is "first in the list").
#[derive(Debug)]
struct Model {
    max_bytes: usize,
    max_events: usize,
    cap: usize,
    pin_last: usize,
    max_streams: usize,
    max_too_large: usize,
    streams: BTreeMap<u64, MStream>,
    next_stream: u64,
    events: Vec<MEvent>,
}

impl Model {
    fn used(&self) -> usize {
        self.events
            .iter()
            .filter(|e| e.held == Held::Budgeted)
            .map(|e| e.frame.len())
            .sum()
    }

    fn budgeted(&self) -> usize {
        self.events
            .iter()
            .filter(|e| e.held == Held::Budgeted)
            .count()
    }

    fn open(&mut self) -> u64 {
        let id = self.next_stream;
        self.next_stream += 1;
        self.streams.insert(id, MStream::default());
        // Beyond the cap: the oldest closed stream goes, or else the oldest open one.
        while self.streams.len() > self.max_streams.max(1) {
            let oldest = self
                .streams
                .iter()
                .find(|(_, s)| s.closed)
                .or_else(|| self.streams.iter().next())
                .map(|(k, _)| *k)
                .unwrap();
            self.forget(oldest);
        }
        id
    }

    fn forget(&mut self, stream: u64) {
        if self.streams.remove(&stream).is_some() {
            self.events.retain(|e| e.stream != stream);
        }
    }

    fn append(
        &mut self,
        stream: u64,
        event: Option<&'static str>,
        data: &[u8],
        retry: Option<u64>,
    ) -> Result<(String, u64, Vec<u8>, bool), AppendError> {
        let s = match self.streams.get_mut(&stream) {
            Some(s) if s.closed => return Err(AppendError::Closed),
            Some(s) => s,
            None => return Err(AppendError::UnknownStream),
        };
        if let Some(offset) = event.and_then(|e| e.bytes().position(|b| b == b'\r' || b == b'\n')) {
            return Err(AppendError::Frame(FrameError::EventLineEnd { offset }));
        }
        let seq = s.next_seq;
        s.next_seq += 1;
        let id = format!("{stream}-{seq}");
        let frame = encode(&id, event, data, retry);
        let oversized = frame.len() > self.cap;
        self.events.push(MEvent {
            stream,
            seq,
            frame: frame.clone(),
            held: Held::Pinned,
            data: data.to_vec(),
            event,
        });
        if let Some(unpinned) = seq.checked_sub(self.pin_last as u64) {
            self.admit(stream, unpinned);
        }
        Ok((id, seq, frame, oversized))
    }

    fn admit(&mut self, stream: u64, seq: u64) {
        let Some(i) = self
            .events
            .iter()
            .position(|e| e.stream == stream && e.seq == seq && e.held == Held::Pinned)
        else {
            return;
        };
        let len = self.events[i].frame.len();
        if len > self.cap || self.max_events == 0 {
            // Never kept, and it evicts nothing. Remembered as too large within the cap.
            while self.max_too_large > 0
                && self
                    .events
                    .iter()
                    .filter(|e| e.held == Held::TooLarge)
                    .count()
                    >= self.max_too_large
            {
                let oldest = self
                    .events
                    .iter()
                    .position(|e| e.held == Held::TooLarge)
                    .unwrap();
                self.events[oldest].held = Held::ForgottenTooLarge;
            }
            self.events[i].held = if self.max_too_large > 0 {
                Held::TooLarge
            } else {
                Held::ForgottenTooLarge
            };
            return;
        }
        while self.used() + len > self.max_bytes || self.budgeted() + 1 > self.max_events {
            let oldest = self
                .events
                .iter()
                .position(|e| e.held == Held::Budgeted)
                .unwrap();
            self.events[oldest].held = Held::Evicted;
        }
        self.events[i].held = Held::Budgeted;
    }

    fn find(&self, stream: u64, seq: u64) -> Option<&MEvent> {
        self.events
            .iter()
            .find(|e| e.stream == stream && e.seq == seq)
    }

    /// `Ok(frames)` or `Err((reason, missing id))`.
    fn replay_after(&self, id: &str) -> Result<Vec<Vec<u8>>, (MissReason, Option<String>)> {
        let Some((stream, seq)) = parse(id) else {
            return Err((MissReason::Unknown, None));
        };
        let Some(s) = self.streams.get(&stream) else {
            let evicted = stream >= 1 && stream < self.next_stream;
            return Err((
                if evicted {
                    MissReason::Evicted
                } else {
                    MissReason::Unknown
                },
                None,
            ));
        };
        if seq >= s.next_seq {
            return Err((MissReason::Unknown, None));
        }
        let mut frames = Vec::new();
        for next in seq + 1..s.next_seq {
            let e = self
                .find(stream, next)
                .expect("every appended event is listed");
            match e.held {
                Held::Pinned | Held::Budgeted => frames.push(e.frame.clone()),
                Held::Evicted | Held::ForgottenTooLarge => {
                    return Err((MissReason::Evicted, Some(format!("{stream}-{next}"))));
                }
                Held::TooLarge => {
                    return Err((MissReason::TooLarge, Some(format!("{stream}-{next}"))));
                }
            }
        }
        Ok(frames)
    }
}

/// `StreamId` has no public constructor: get one the way a server does, from an id string.
fn sid(stream: u64) -> StreamId {
    replay::parse_id(&format!("{stream}-0"))
        .expect("well-formed id")
        .0
}

fn parse(id: &str) -> Option<(u64, u64)> {
    let (a, b) = id.split_once('-')?;
    let decimal = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    if !decimal(a) || !decimal(b) {
        return None;
    }
    Some((a.parse().ok()?, b.parse().ok()?))
}

fn encode(id: &str, event: Option<&str>, data: &[u8], retry: Option<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut field = |name: &[u8], value: &[u8]| {
        out.extend_from_slice(name);
        out.push(b':');
        if !value.is_empty() {
            out.push(b' ');
            out.extend_from_slice(value);
        }
        out.push(b'\n');
    };
    field(b"id", id.as_bytes());
    if let Some(e) = event {
        field(b"event", e.as_bytes());
    }
    if let Some(r) = retry {
        field(b"retry", r.to_string().as_bytes());
    }
    // One `data` line per line of data: CR, LF and CRLF all end a line.
    let text = data.to_vec();
    let mut start = 0;
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'\r' || text[i] == b'\n' {
            field(b"data", &text[start..i]);
            i += if text[i] == b'\r' && text.get(i + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
            start = i;
        } else {
            i += 1;
        }
    }
    field(b"data", &text[start..]);
    out.push(b'\n');
    out
}

/// Decodes one frame and checks it is the event that was appended (line ends become LF).
fn check_frame(frame: &Bytes, e: &MEvent) {
    let mut d = Decoder::new();
    d.feed(frame.clone());
    let ev = d
        .next_event()
        .expect("a frame is one event")
        .expect("within limits");
    assert!(d.next_event().is_none(), "a frame is exactly one event");
    assert!(d.finish().is_none(), "a frame ends at an event boundary");
    assert_eq!(
        ev.last_event_id,
        format!("{}-{}", e.stream, e.seq).as_bytes(),
        "frame id"
    );
    assert_eq!(
        ev.event.as_deref().filter(|t| !t.is_empty()),
        e.event.filter(|t| !t.is_empty()).map(str::as_bytes)
    );
    let mut expected = Vec::new();
    let mut i = 0;
    while i < e.data.len() {
        if e.data[i] == b'\r' {
            expected.push(b'\n');
            i += if e.data.get(i + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
        } else {
            expected.push(e.data[i]);
            i += 1;
        }
    }
    assert!(
        ev.data.eq_bytes(&expected),
        "frame data decodes back to the appended data"
    );
}

/// The `replay_buffer` oracle (see the module docs).
pub fn replay_buffer(data: &[u8]) {
    let Ok(case) = Case::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    run(&case);
}

/// Runs one case against the model and the invariants; panics on a violation.
pub fn run(case: &Case) {
    let l = &case.limits;
    let mut config = replay::BufferConfig::default();
    config
        .max_session_bytes(usize::from(l.max_bytes % 4096))
        .max_session_events(usize::from(l.max_events % 12))
        .max_event_bytes(usize::from(l.max_event_bytes % 2048))
        .pin_last(usize::from(l.pin_last % 4))
        .max_streams(usize::from(l.max_streams % 5))
        .max_too_large(usize::from(l.max_too_large % 5));
    let mut buf = ReplayBuffer::new(config.clone());
    let mut model = Model {
        max_bytes: config.max_session_bytes,
        max_events: config.max_session_events,
        cap: config.max_event_bytes.min(config.max_session_bytes),
        pin_last: config.pin_last,
        max_streams: config.max_streams,
        max_too_large: config.max_too_large,
        streams: BTreeMap::new(),
        next_stream: 1,
        events: Vec::new(),
    };
    let stream_no = |n: u8, model: &Model| u64::from(n) % (model.next_stream + 1);

    for op in case.ops.iter().take(256) {
        match op {
            Op::Open => {
                let got = buf.open_stream();
                assert_eq!(got.get(), model.open(), "stream numbers");
            }
            Op::Close(n) => {
                let s = stream_no(*n, &model);
                if s >= 1 {
                    buf.close_stream(sid(s));
                    if let Some(m) = model.streams.get_mut(&s) {
                        m.closed = true;
                    }
                }
            }
            Op::Forget(n) => {
                let s = stream_no(*n, &model);
                if s >= 1 {
                    buf.forget_stream(sid(s));
                    model.forget(s);
                }
            }
            Op::Append { .. } | Op::AppendSized { .. } => {
                let (stream, event, data, retry) = match op {
                    Op::Append {
                        stream,
                        event,
                        data,
                        retry,
                    } => (stream, event, data[..data.len().min(1500)].to_vec(), *retry),
                    Op::AppendSized {
                        stream,
                        event,
                        byte,
                        len,
                    } => (stream, event, vec![*byte; usize::from(*len % 5000)], None),
                    _ => unreachable!("matched above"),
                };
                let data = &data[..];
                let s = stream_no(*stream, &model).max(1);
                let event = EVENT_TYPES[usize::from(*event) % EVENT_TYPES.len()];
                let retry = retry.map(u64::from);
                let held_before: Vec<String> = held_ids(&buf, &model);
                let budget_before = buf.used_bytes();
                let got = buf.append_with_retry(sid(s), event, data, retry);
                let want = model.append(s, event, data, retry);
                match (got, want) {
                    (Ok(a), Ok((id, seq, frame, oversized))) => {
                        assert_eq!(
                            (a.id.as_str(), a.seq, &a.frame[..], a.oversized),
                            (id.as_str(), seq, &frame[..], oversized)
                        );
                        check_frame(&a.frame, model.events.last().unwrap());
                        // Invariant 1: the event admitted into the budget by this append (the new
                        // one, or the one that left the pinned window) was dropped as too large:
                        // then nothing else may have been evicted to make room for it.
                        if let Some(admitted) = a.seq.checked_sub(model.pin_last as u64) {
                            let admitted = format!("{s}-{admitted}");
                            if buf.frame(&admitted).is_none() {
                                let held_after = held_ids(&buf, &model);
                                for id in held_before.iter().filter(|id| **id != admitted) {
                                    assert!(
                                        held_after.contains(id),
                                        "dropping {admitted} evicted {id}"
                                    );
                                }
                                assert_eq!(buf.used_bytes(), budget_before, "budget moved");
                            }
                        }
                    }
                    (Err(a), Err(b)) => assert_eq!(a, b),
                    (got, want) => panic!("append: buffer {got:?}, model {want:?}"),
                }
            }
            Op::ReplayAfter { stream, seq } => {
                let id = format!("{}-{}", stream_no(*stream, &model), seq % 16);
                check_replay(&buf, &model, &id);
            }
            Op::ReplayRaw(id) => check_replay(&buf, &model, id),
            Op::Frame { stream, seq } => {
                let (s, q) = (stream_no(*stream, &model), u64::from(*seq % 16));
                let got = buf.frame(&format!("{s}-{q}"));
                let want = model
                    .find(s, q)
                    .filter(|e| matches!(e.held, Held::Pinned | Held::Budgeted))
                    .map(|e| e.frame.clone());
                assert_eq!(got.as_deref(), want.as_deref(), "frame({s}-{q})");
            }
        }
        // Bounds and accounting, after every operation.
        assert!(buf.used_bytes() <= model.max_bytes, "over the byte budget");
        assert!(
            buf.budgeted_events() <= model.max_events,
            "over the event cap"
        );
        assert_eq!(buf.used_bytes(), model.used(), "used bytes");
        assert_eq!(buf.budgeted_events(), model.budgeted(), "budgeted events");
        let pinned: usize = model
            .events
            .iter()
            .filter(|e| e.held == Held::Pinned)
            .map(|e| e.frame.len())
            .sum();
        assert_eq!(buf.pinned_bytes(), pinned, "pinned bytes");
        let held = model
            .events
            .iter()
            .filter(|e| matches!(e.held, Held::Pinned | Held::Budgeted))
            .count();
        assert_eq!(buf.held_events(), held, "held events");
        // Invariant 3: memory bounds, from the limits alone.
        assert!(
            buf.streams() <= model.max_streams.max(1),
            "over the stream cap"
        );
        assert!(
            buf.too_large_events() <= model.max_too_large,
            "over the too-large cap"
        );
        assert!(
            buf.held_events() <= model.max_events + model.pin_last * buf.streams(),
            "more events held than budgeted plus pinned"
        );
    }
}

/// The ids of every appended event the buffer still holds (by asking the buffer).
fn held_ids(buf: &ReplayBuffer, model: &Model) -> Vec<String> {
    model
        .events
        .iter()
        .map(|e| format!("{}-{}", e.stream, e.seq))
        .filter(|id| buf.frame(id).is_some())
        .collect()
}

fn check_replay(buf: &ReplayBuffer, model: &Model, id: &str) {
    let got = buf.replay_after(id);
    // Invariant 2, on the buffer's answer alone: an exact suffix, or a miss naming the first event
    // after the cursor that is not held.
    if let Some((stream, seq)) = parse(id) {
        let appended = model.streams.get(&stream).map_or(0, |s| s.next_seq);
        match &got {
            Ok(r) => {
                assert_eq!(r.frames.len() as u64, appended - seq - 1, "suffix length");
                for (i, f) in r.frames.iter().enumerate() {
                    let want = format!("{stream}-{}", seq + 1 + i as u64);
                    assert_eq!(buf.frame(&want).as_ref(), Some(f), "suffix frame {want}");
                }
            }
            Err(m) => {
                if let Some(missing) = &m.missing {
                    let (ms, mq) = parse(missing).expect("a missing id is well-formed");
                    assert!(
                        ms == stream && mq > seq && mq < appended,
                        "missing {missing}"
                    );
                    assert!(buf.frame(missing).is_none(), "missing {missing} is held");
                    for q in seq + 1..mq {
                        assert!(
                            buf.frame(&format!("{stream}-{q}")).is_some(),
                            "{stream}-{q} before the first missing {missing} is not held"
                        );
                    }
                }
            }
        }
    }
    match (got, model.replay_after(id)) {
        (Ok(r), Ok(frames)) => {
            let got: Vec<&[u8]> = r.frames.iter().map(|f| &f[..]).collect();
            let want: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
            assert_eq!(got, want, "replay_after({id:?}) frames");
            let (s, _) = parse(id).expect("an Ok replay names a stream");
            assert_eq!(r.stream.get(), s);
            assert_eq!(r.closed, model.streams[&s].closed, "closed flag");
        }
        (Err(m), Err((reason, missing))) => {
            assert_eq!(
                (m.reason, m.missing.as_deref()),
                (reason, missing.as_deref()),
                "replay_after({id:?}) miss"
            );
        }
        (got, want) => panic!("replay_after({id:?}): buffer {got:?}, model {want:?}"),
    }
}
