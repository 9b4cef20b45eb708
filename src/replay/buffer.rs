//! The in-memory replay buffer: one session's streams, bounded.
//!
//! Memory is bounded by a byte budget and an event-count cap across the session's streams (eviction
//! is oldest-first), a cap on the streams remembered, and a cap on the too-large events remembered
//! (so that their misses say `too_large`). An event that cannot be kept is flagged at append time
//! ([`Appended::oversized`]) and never evicts another event. Optionally the newest events of each
//! stream are pinned outside the budget ([`BufferConfig::pin_last`]).
//!
//! What the buffer holds is therefore at most: [`BufferConfig::max_session_bytes`] of budgeted frames, plus the
//! pinned frames ([`BufferConfig::pin_last`] per stream, at most [`BufferConfig::max_streams`] streams), plus a
//! constant per budgeted event, per pinned event, per remembered too-large event and per stream.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use bytes::Bytes;

use super::frame::{check_event, encode_unchecked};
use super::{AppendError, Appended, Miss, MissReason, Replay};

/// Limits of a [`ReplayBuffer`]. Setters take `&mut self` and chain; each limit reads as the field of
/// the same name.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BufferConfig {
    /// The byte budget: total encoded frame bytes kept across the session's streams (pinned events
    /// aside). Default 1 MiB.
    pub max_session_bytes: usize,
    /// The event-count cap: how many events the budget holds across the session's streams. Default 64.
    pub max_session_events: usize,
    /// The per-event cap: a larger frame is never kept in the budget. Default 1 MiB.
    pub max_event_bytes: usize,
    /// The delay a [`Miss`] tells the client to wait before it tries again. Default 1 s.
    pub retry_after: Duration,
    /// How many newest events of each stream are pinned outside the budget. Default 0.
    pub pin_last: usize,
    /// How many streams the buffer remembers, open or closed. Default 64.
    pub max_streams: usize,
    /// How many dropped too-large events the buffer remembers (so that a replay that needs one is a
    /// [`MissReason::TooLarge`] miss rather than an [`MissReason::Evicted`] one). Default 64.
    pub max_too_large: usize,
}

impl Default for BufferConfig {
    /// 1 MiB and 64 events of budget, a 1 MiB per-event cap, `retry_after` 1 s, nothing pinned, 64
    /// streams, 64 remembered too-large events.
    fn default() -> Self {
        BufferConfig {
            max_session_bytes: 1 << 20,
            max_session_events: 64,
            max_event_bytes: 1 << 20,
            retry_after: Duration::from_secs(1),
            pin_last: 0,
            max_streams: 64,
            max_too_large: 64,
        }
    }
}

impl BufferConfig {
    /// Sets [`BufferConfig::max_session_bytes`], the byte budget.
    pub fn max_session_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_session_bytes = bytes;
        self
    }

    /// Sets [`BufferConfig::max_session_events`], the event-count cap.
    pub fn max_session_events(&mut self, events: usize) -> &mut Self {
        self.max_session_events = events;
        self
    }

    /// Sets [`BufferConfig::max_event_bytes`], the per-event cap: an event whose frame is larger is flagged
    /// [`Appended::oversized`] and is not kept in the budget (the server knows at once that this
    /// event cannot be replayed). It evicts nothing.
    pub fn max_event_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_event_bytes = bytes;
        self
    }

    /// Sets [`BufferConfig::retry_after`], the delay a [`Miss`] asks for (a `Retry-After` header).
    pub fn retry_after(&mut self, delay: Duration) -> &mut Self {
        self.retry_after = delay;
        self
    }

    /// Sets [`BufferConfig::pin_last`]: pins the `n` newest events of each stream outside the byte budget
    /// and the event cap, whatever their size. An event enters the budget (and may evict, or be
    /// dropped as oversized) only when `n` newer events of its stream have been appended. Pins survive
    /// [`ReplayBuffer::close_stream`] — a client resumes a stream after the server finished writing
    /// it — and are released when the stream is forgotten (see [`BufferConfig::max_streams`]).
    pub fn pin_last(&mut self, n: usize) -> &mut Self {
        self.pin_last = n;
        self
    }

    /// Sets [`BufferConfig::max_streams`]: opening one more stream forgets the oldest closed stream, or if
    /// none is closed the oldest open one (a server that never closes its streams cannot grow the
    /// buffer), with everything it holds. At least one stream is always remembered.
    pub fn max_streams(&mut self, n: usize) -> &mut Self {
        self.max_streams = n;
        self
    }

    /// Sets [`BufferConfig::max_too_large`]: how many dropped too-large events are remembered; beyond it
    /// the oldest is forgotten and a replay that needs it is an [`MissReason::Evicted`] miss.
    pub fn max_too_large(&mut self, n: usize) -> &mut Self {
        self.max_too_large = n;
        self
    }

    /// The largest frame the budget can ever hold.
    fn event_cap(&self) -> usize {
        self.max_event_bytes.min(self.max_session_bytes)
    }
}

/// One stream of a session (one `tools/call` response, or one resumed restart of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(u64);

impl StreamId {
    /// The stream number, as it appears before the `-` in its event ids.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Splits an event id of the form `<stream>-<seq>` (both decimal) into its parts.
pub fn parse_id(id: &str) -> Option<(StreamId, u64)> {
    let (stream, seq) = id.split_once('-')?;
    let decimal = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !decimal(stream) || !decimal(seq) {
        return None;
    }
    Some((StreamId(stream.parse().ok()?), seq.parse().ok()?))
}

/// Formats the event id of event `seq` of `stream`.
pub fn format_id(stream: StreamId, seq: u64) -> String {
    format!("{}-{}", stream.0, seq)
}

#[derive(Debug)]
struct Stored {
    frame: Bytes,
    /// Session-wide append order: eviction is oldest-first by this.
    order: u64,
    /// Whether the frame counts against the budget (false while pinned).
    budgeted: bool,
}

#[derive(Debug, Default)]
struct StreamState {
    next_seq: u64,
    closed: bool,
    /// The events held, pinned or budgeted, by sequence number.
    events: BTreeMap<u64, Stored>,
    /// Remembered events dropped because they could never fit: seq -> append order.
    too_large: BTreeMap<u64, u64>,
}

/// Per-session store of sent SSE frames for `Last-Event-ID` resumption (see the
/// [module docs](super)).
#[derive(Debug)]
pub struct ReplayBuffer {
    config: BufferConfig,
    streams: BTreeMap<u64, StreamState>,
    /// The closed streams among `streams`, oldest first.
    closed: BTreeSet<u64>,
    next_stream: u64,
    next_order: u64,
    /// The budgeted events, oldest first: order -> (stream, seq).
    ring: BTreeMap<u64, (u64, u64)>,
    /// The remembered too-large events, oldest first: order -> (stream, seq).
    too_large: BTreeMap<u64, (u64, u64)>,
    used_bytes: usize,
    pinned_bytes: usize,
}

impl Default for ReplayBuffer {
    fn default() -> Self {
        ReplayBuffer::new(BufferConfig::default())
    }
}

impl ReplayBuffer {
    /// An empty buffer with these limits.
    pub fn new(config: BufferConfig) -> Self {
        ReplayBuffer {
            config,
            streams: BTreeMap::new(),
            closed: BTreeSet::new(),
            next_stream: 1,
            next_order: 0,
            ring: BTreeMap::new(),
            too_large: BTreeMap::new(),
            used_bytes: 0,
            pinned_bytes: 0,
        }
    }

    /// The limits.
    pub fn config(&self) -> &BufferConfig {
        &self.config
    }

    /// Opens a new stream (stream numbers start at 1). If more than [`BufferConfig::max_streams`] streams are
    /// then remembered, the oldest closed one is forgotten, or if none is closed the oldest open one.
    pub fn open_stream(&mut self) -> StreamId {
        let id = self.next_stream;
        self.next_stream += 1;
        self.streams.insert(id, StreamState::default());
        while self.streams.len() > self.config.max_streams.max(1) {
            let oldest = match self.closed.first() {
                Some(&closed) => closed,
                None => *self
                    .streams
                    .keys()
                    .next()
                    .expect("more streams than the cap"),
            };
            self.forget_stream(StreamId(oldest));
        }
        StreamId(id)
    }

    /// Marks a stream finished: no more events may be appended. What it holds stays replayable (a
    /// client typically resumes after the server has written the whole response).
    pub fn close_stream(&mut self, stream: StreamId) {
        if let Some(s) = self.streams.get_mut(&stream.0) {
            s.closed = true;
            self.closed.insert(stream.0);
        }
    }

    /// Forgets a stream and everything it holds; a later replay of it is an [`MissReason::Evicted`] miss.
    pub fn forget_stream(&mut self, stream: StreamId) {
        let Some(state) = self.streams.remove(&stream.0) else {
            return;
        };
        self.closed.remove(&stream.0);
        for stored in state.events.into_values() {
            if stored.budgeted {
                self.ring.remove(&stored.order);
                self.used_bytes -= stored.frame.len();
            } else {
                self.pinned_bytes -= stored.frame.len();
            }
        }
        for order in state.too_large.into_values() {
            self.too_large.remove(&order);
        }
    }

    /// Appends a message event (no `event:` type when `event` is `None`) and returns its id and frame.
    pub fn append(
        &mut self,
        stream: StreamId,
        event: Option<&str>,
        data: &[u8],
    ) -> Result<Appended, AppendError> {
        self.append_with_retry(stream, event, data, None)
    }

    /// Appends an event that also carries a `retry:` field (the priming event: empty data and `retry`).
    pub fn append_with_retry(
        &mut self,
        stream: StreamId,
        event: Option<&str>,
        data: &[u8],
        retry: Option<u64>,
    ) -> Result<Appended, AppendError> {
        let state = match self.streams.get_mut(&stream.0) {
            Some(s) if s.closed => return Err(AppendError::Closed),
            Some(s) => s,
            None => return Err(AppendError::UnknownStream),
        };
        if let Some(event) = event {
            check_event(event)?;
        }
        let seq = state.next_seq;
        state.next_seq += 1;
        let id = format_id(stream, seq);
        // The id is digits and `-`: nothing to check.
        let frame = encode_unchecked(Some(id.as_bytes()), event, data, retry);
        let oversized = frame.len() > self.config.event_cap();
        let order = self.next_order;
        self.next_order += 1;
        self.pinned_bytes += frame.len();
        let stored = Stored {
            frame: frame.clone(),
            order,
            budgeted: false,
        };
        state.events.insert(seq, stored);
        // The event that just left the pinned window (with pin_last 0: the new event itself).
        if let Some(unpinned) = seq.checked_sub(self.config.pin_last as u64) {
            self.admit(stream.0, unpinned);
        }
        Ok(Appended {
            id,
            seq,
            frame,
            oversized,
        })
    }

    /// Moves a pinned event into the budget, evicting oldest-first to make room. An event that can
    /// never fit (over the per-event cap or the whole budget, or a zero event cap) is dropped at once
    /// and evicts nothing: an event that is not stored never evicts another.
    fn admit(&mut self, stream: u64, seq: u64) {
        let Some(state) = self.streams.get_mut(&stream) else {
            return;
        };
        let Some(stored) = state.events.get(&seq) else {
            return;
        };
        let len = stored.frame.len();
        let order = stored.order;
        self.pinned_bytes -= len;
        let fits = len <= self.config.event_cap() && self.config.max_session_events > 0;
        if !fits {
            state.events.remove(&seq);
            self.remember_too_large(stream, seq, order);
            return;
        }
        while self.used_bytes + len > self.config.max_session_bytes
            || self.ring.len() + 1 > self.config.max_session_events
        {
            // `fits` guarantees that an empty ring has room.
            self.evict_oldest();
        }
        let state = self.streams.get_mut(&stream).expect("stream checked above");
        let stored = state.events.get_mut(&seq).expect("event checked above");
        stored.budgeted = true;
        self.ring.insert(order, (stream, seq));
        self.used_bytes += len;
    }

    fn remember_too_large(&mut self, stream: u64, seq: u64, order: u64) {
        if self.config.max_too_large == 0 {
            return;
        }
        while self.too_large.len() >= self.config.max_too_large {
            let Some((_, (s, q))) = self.too_large.pop_first() else {
                break;
            };
            if let Some(state) = self.streams.get_mut(&s) {
                state.too_large.remove(&q);
            }
        }
        self.too_large.insert(order, (stream, seq));
        if let Some(state) = self.streams.get_mut(&stream) {
            state.too_large.insert(seq, order);
        }
    }

    fn evict_oldest(&mut self) {
        if let Some((_, (stream, seq))) = self.ring.pop_first() {
            let removed = self
                .streams
                .get_mut(&stream)
                .and_then(|s| s.events.remove(&seq));
            if let Some(stored) = removed {
                self.used_bytes -= stored.frame.len();
            }
        }
    }

    /// The frames of every event after `last_event_id` in its stream, or why they cannot all be given.
    /// Either every later event is returned, in order, or none is. Allocates only the result: the
    /// held events are checked first, so a resume from an id long evicted costs no allocation per
    /// event appended since.
    pub fn replay_after(&self, last_event_id: &str) -> Result<Replay, Miss> {
        let (stream, seq) = self.locate(last_event_id)?;
        let state = &self.streams[&stream.0];
        // Held events are keyed by sequence number: the suffix is complete iff the events held after
        // `seq` are exactly seq + 1, seq + 2, ..., next_seq - 1.
        let mut expected = seq + 1;
        for &held in state.events.range(expected..).map(|(k, _)| k) {
            if held != expected {
                break;
            }
            expected += 1;
        }
        if expected < state.next_seq {
            let reason = if state.too_large.contains_key(&expected) {
                MissReason::TooLarge
            } else {
                MissReason::Evicted
            };
            return Err(self.miss(reason, Some(format_id(stream, expected))));
        }
        // Every event from seq + 1 on is held, so this is the count of frames held, not of events
        // ever appended.
        let mut frames = Vec::with_capacity((state.next_seq - seq - 1) as usize);
        frames.extend(state.events.range(seq + 1..).map(|(_, s)| s.frame.clone()));
        Ok(Replay {
            stream,
            frames,
            closed: state.closed,
        })
    }

    /// The frame of the event `id` itself, if it is still held.
    pub fn frame(&self, id: &str) -> Option<Bytes> {
        let (stream, seq) = parse_id(id)?;
        Some(self.streams.get(&stream.0)?.events.get(&seq)?.frame.clone())
    }

    /// Resolves an id to a stream this buffer knows and a sequence number it has issued.
    fn locate(&self, id: &str) -> Result<(StreamId, u64), Miss> {
        let Some((stream, seq)) = parse_id(id) else {
            return Err(self.miss(MissReason::Unknown, None));
        };
        match self.streams.get(&stream.0) {
            Some(state) if seq < state.next_seq => Ok((stream, seq)),
            Some(_) => Err(self.miss(MissReason::Unknown, None)),
            None if stream.0 >= 1 && stream.0 < self.next_stream => {
                Err(self.miss(MissReason::Evicted, None))
            }
            None => Err(self.miss(MissReason::Unknown, None)),
        }
    }

    #[cold]
    fn miss(&self, reason: MissReason, missing: Option<String>) -> Miss {
        Miss::new(reason, missing, self.config.retry_after)
    }

    /// Frame bytes counted against the budget.
    pub fn used_bytes(&self) -> usize {
        self.used_bytes
    }

    /// Frame bytes held outside the budget by [`BufferConfig::pin_last`].
    pub fn pinned_bytes(&self) -> usize {
        self.pinned_bytes
    }

    /// Events counted against the event cap.
    pub fn budgeted_events(&self) -> usize {
        self.ring.len()
    }

    /// Events held, pinned or not.
    pub fn held_events(&self) -> usize {
        self.streams.values().map(|s| s.events.len()).sum()
    }

    /// Streams remembered, open or closed.
    pub fn streams(&self) -> usize {
        self.streams.len()
    }

    /// Dropped too-large events remembered (at most [`BufferConfig::max_too_large`]).
    pub fn too_large_events(&self) -> usize {
        self.too_large.len()
    }

    /// Whether the stream is known and closed.
    pub fn is_closed(&self, stream: StreamId) -> bool {
        self.streams.get(&stream.0).is_some_and(|s| s.closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::FrameError;

    fn config(max_session_bytes: usize, max_session_events: usize) -> BufferConfig {
        let mut c = BufferConfig::default();
        c.max_session_bytes(max_session_bytes)
            .max_session_events(max_session_events)
            .max_event_bytes(max_session_bytes);
        c
    }

    /// Appends `n` events of `len` data bytes each, returns their appended records.
    fn fill(buf: &mut ReplayBuffer, s: StreamId, n: usize, len: usize) -> Vec<Appended> {
        (0..n)
            .map(|_| buf.append(s, None, &vec![b'x'; len]).unwrap())
            .collect()
    }

    #[test]
    fn ids_encode_stream_and_sequence() {
        let mut buf = ReplayBuffer::default();
        let a = buf.open_stream();
        let b = buf.open_stream();
        assert_eq!(buf.append(a, None, b"1").unwrap().id, "1-0");
        assert_eq!(buf.append(b, None, b"1").unwrap().id, "2-0");
        assert_eq!(buf.append(a, None, b"2").unwrap().id, "1-1");
        assert_eq!(parse_id("12-34"), Some((StreamId(12), 34)));
        for bad in ["", "1", "-1", "1-", "a-1", "1-+2", "1-2-3", " 1-2"] {
            assert_eq!(parse_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn replay_returns_the_same_frames_after_the_id() {
        let mut buf = ReplayBuffer::default();
        let s = buf.open_stream();
        let prime = buf.append_with_retry(s, None, b"", Some(1000)).unwrap();
        let sent = fill(&mut buf, s, 3, 10);
        let replay = buf.replay_after(&prime.id).unwrap();
        assert_eq!(replay.stream, s);
        assert!(!replay.closed);
        assert_eq!(
            replay.frames,
            sent.iter().map(|a| a.frame.clone()).collect::<Vec<_>>()
        );
        // Zero copy: the replayed frame is the stored allocation itself.
        assert_eq!(replay.frames[0].as_ptr(), sent[0].frame.as_ptr());
        // After the last id: nothing, and the stream's state.
        buf.close_stream(s);
        let tail = buf.replay_after(&sent[2].id).unwrap();
        assert!(tail.frames.is_empty() && tail.closed);
        assert_eq!(buf.frame(&sent[1].id), Some(sent[1].frame.clone()));
    }

    #[test]
    fn evicts_oldest_first_across_streams_by_event_cap() {
        let mut buf = ReplayBuffer::new(config(1 << 20, 3));
        let a = buf.open_stream();
        let b = buf.open_stream();
        let a0 = buf.append(a, None, b"a0").unwrap();
        let b0 = buf.append(b, None, b"b0").unwrap();
        let a1 = buf.append(a, None, b"a1").unwrap();
        let b1 = buf.append(b, None, b"b1").unwrap(); // evicts a0, the oldest in the session
        assert_eq!(buf.budgeted_events(), 3);
        assert_eq!(buf.frame(&a0.id), None);
        assert!(buf.frame(&b0.id).is_some());
        // Replaying after a0 still works: the events *after* it are held.
        assert_eq!(
            buf.replay_after(&a0.id).unwrap().frames,
            vec![a1.frame.clone()]
        );
        let _b2 = buf.append(b, None, b"b2").unwrap(); // evicts b0
        assert_eq!(buf.frame(&b0.id), None);
        assert_eq!(buf.replay_after(&b0.id).unwrap().frames.len(), 2);
        let _a2 = buf.append(a, None, b"a2").unwrap(); // evicts a1
        let miss = buf.replay_after(&a0.id).unwrap_err();
        assert_eq!(
            (miss.reason, miss.missing.as_deref()),
            (MissReason::Evicted, Some("1-1"))
        );
        assert!(buf.replay_after(&b1.id).is_ok());
    }

    #[test]
    fn budget_accounting_counts_frame_bytes() {
        let mut buf = ReplayBuffer::new(config(100, 64));
        let s = buf.open_stream();
        let a = fill(&mut buf, s, 2, 20); // frames "id: 1-N\ndata: <20>\n\n" = 8 + 27 + 1 = 36 bytes
        assert_eq!(a[0].frame.len(), 36);
        assert_eq!(buf.used_bytes(), 72);
        let b = buf.append(s, None, &[b'y'; 20]).unwrap(); // 108 > 100: evicts one
        assert_eq!((buf.used_bytes(), buf.budgeted_events()), (72, 2));
        assert_eq!(buf.frame(&a[0].id), None);
        assert!(!b.oversized);
        // An event exactly the size of the budget empties it and fits.
        let exact = buf.append(s, None, &[b'z'; 100 - 16]).unwrap();
        assert_eq!(exact.frame.len(), 100);
        assert!(!exact.oversized);
        assert_eq!(
            (buf.used_bytes(), buf.budgeted_events(), buf.held_events()),
            (100, 1, 1)
        );
        buf.forget_stream(s);
        assert_eq!(
            (buf.used_bytes(), buf.pinned_bytes(), buf.held_events()),
            (0, 0, 0)
        );
    }

    #[test]
    fn oversized_event_is_flagged_evicts_nothing_and_misses_too_large() {
        let mut c = config(1000, 64);
        c.max_event_bytes(200)
            .retry_after(Duration::from_millis(250));
        let mut buf = ReplayBuffer::new(c);
        let s = buf.open_stream();
        let prime = buf.append_with_retry(s, None, b"", Some(100)).unwrap();
        let progress = fill(&mut buf, s, 3, 50);
        // Over the per-event cap but within the budget: flagged and dropped, evicts nothing.
        let held = (buf.used_bytes(), buf.held_events());
        let mid = buf.append(s, None, &[b'm'; 300]).unwrap();
        assert!(mid.oversized);
        assert_eq!((buf.used_bytes(), buf.held_events()), held);
        assert_eq!(
            buf.replay_after(&progress[2].id).unwrap_err().reason,
            MissReason::TooLarge
        );
        // Larger than the whole budget: dropped too, and it still evicts nothing (an event that is
        // not stored never evicts another).
        let big = buf.append(s, None, &[b'r'; 1500]).unwrap();
        assert!(big.oversized);
        assert_eq!((buf.used_bytes(), buf.held_events()), held);
        let miss = buf.replay_after(&mid.id).unwrap_err();
        assert_eq!(miss.reason, MissReason::TooLarge);
        assert_eq!(miss.missing.as_deref(), Some(big.id.as_str()));
        assert_eq!(miss.retry_after, Duration::from_millis(250));
        // The events before it are all still replayable up to the first too-large one.
        let miss = buf.replay_after(&prime.id).unwrap_err();
        assert_eq!(
            (miss.reason, miss.missing),
            (MissReason::TooLarge, Some(mid.id.clone()))
        );
        assert_eq!(buf.frame(&progress[0].id), Some(progress[0].frame.clone()));
        // Events appended after it are fine and replayable from it.
        let after = buf.append(s, None, b"{}").unwrap();
        assert_eq!(buf.replay_after(&big.id).unwrap().frames, vec![after.frame]);
    }

    #[test]
    fn remembered_too_large_events_are_bounded() {
        let mut c = config(1000, 64);
        c.max_event_bytes(100).max_too_large(2);
        let mut buf = ReplayBuffer::new(c);
        let s = buf.open_stream();
        let first = buf.append(s, None, b"{}").unwrap();
        let big: Vec<_> = (0..5)
            .map(|_| buf.append(s, None, &[b'r'; 200]).unwrap())
            .collect();
        assert_eq!(buf.too_large_events(), 2);
        // The oldest too-large events are forgotten: their miss degrades to `evicted`, still
        // naming the right event; the remembered ones still say `too_large`.
        let miss = buf.replay_after(&first.id).unwrap_err();
        assert_eq!(
            (miss.reason, miss.missing),
            (MissReason::Evicted, Some(big[0].id.clone()))
        );
        let miss = buf.replay_after(&big[2].id).unwrap_err();
        assert_eq!(
            (miss.reason, miss.missing),
            (MissReason::TooLarge, Some(big[3].id.clone()))
        );
        for n in [0, 1] {
            let mut c = config(1000, 64);
            c.max_event_bytes(100).max_too_large(n);
            let mut buf = ReplayBuffer::new(c);
            let s = buf.open_stream();
            for _ in 0..10 {
                let _ = buf.append(s, None, &[b'r'; 200]).unwrap();
            }
            assert_eq!(buf.too_large_events(), n);
        }
        // Forgetting the stream forgets its too-large events.
        buf.forget_stream(s);
        assert_eq!(buf.too_large_events(), 0);
    }

    #[test]
    fn open_streams_are_forgotten_beyond_max_streams() {
        let mut c = BufferConfig::default();
        c.max_streams(3);
        let mut buf = ReplayBuffer::new(c);
        // A server that opens streams and never closes them: the oldest open one goes.
        let streams: Vec<StreamId> = (0..10)
            .map(|_| {
                let s = buf.open_stream();
                let _ = buf.append(s, None, b"{}").unwrap();
                s
            })
            .collect();
        assert_eq!(buf.streams(), 3);
        assert_eq!(buf.held_events(), 3);
        assert_eq!(
            buf.replay_after("1-0").unwrap_err().reason,
            MissReason::Evicted
        );
        assert_eq!(
            buf.append(streams[0], None, b"{}"),
            Err(AppendError::UnknownStream)
        );
        assert!(buf.replay_after("8-0").is_ok());
        // A closed stream goes before any open one, even an older open one.
        buf.close_stream(streams[9]);
        let _ = buf.open_stream();
        assert!(buf.replay_after("8-0").is_ok());
        assert_eq!(
            buf.replay_after("10-0").unwrap_err().reason,
            MissReason::Evicted
        );
        // Zero still remembers the newest stream.
        let mut c = BufferConfig::default();
        c.max_streams(0);
        let mut buf = ReplayBuffer::new(c);
        let a = buf.open_stream();
        let b = buf.open_stream();
        assert!(buf.append(b, None, b"{}").is_ok());
        assert_eq!(buf.append(a, None, b"{}"), Err(AppendError::UnknownStream));
    }

    #[test]
    fn event_type_with_a_line_end_is_a_typed_error_and_uses_no_id() {
        let mut buf = ReplayBuffer::default();
        let s = buf.open_stream();
        assert_eq!(
            buf.append(s, Some("a\nb"), b"{}"),
            Err(AppendError::Frame(FrameError::EventLineEnd { offset: 1 }))
        );
        assert_eq!(buf.append(s, None, b"{}").unwrap().id, "1-0");
    }

    #[test]
    fn replay_from_an_old_id_checks_before_it_collects() {
        let mut buf = ReplayBuffer::new(config(1 << 20, 4));
        let s = buf.open_stream();
        let all = fill(&mut buf, s, 1000, 1);
        let miss = buf.replay_after(&all[0].id).unwrap_err();
        assert_eq!(
            (miss.reason, miss.missing.as_deref()),
            (MissReason::Evicted, Some("1-1"))
        );
        let ok = buf.replay_after(&all[995].id).unwrap();
        assert_eq!(ok.frames.len(), 4);
        assert_eq!(ok.frames.capacity(), ok.frames.len());
    }

    #[test]
    fn unknown_ids_miss_unknown_and_forgotten_streams_miss_evicted() {
        let mut buf = ReplayBuffer::default();
        let s = buf.open_stream();
        let _ = buf.append(s, None, b"{}").unwrap();
        for id in ["", "garbage", "1-1", "1-99", "2-0", "0-0"] {
            assert_eq!(
                buf.replay_after(id).unwrap_err().reason,
                MissReason::Unknown,
                "{id:?}"
            );
        }
        buf.close_stream(s);
        assert_eq!(buf.append(s, None, b"{}"), Err(AppendError::Closed));
        buf.forget_stream(s);
        assert_eq!(
            buf.replay_after("1-0").unwrap_err().reason,
            MissReason::Evicted
        );
        assert_eq!(buf.append(s, None, b"{}"), Err(AppendError::UnknownStream));
    }

    #[test]
    fn pinned_last_event_survives_until_unpinned() {
        let mut c = config(1000, 64);
        c.max_event_bytes(200).pin_last(1);
        let mut buf = ReplayBuffer::new(c);
        let s = buf.open_stream();
        let progress = fill(&mut buf, s, 3, 50);
        let big = buf.append(s, None, &[b'r'; 3000]).unwrap();
        assert!(big.oversized);
        buf.close_stream(s);
        // Pinned outside the budget: the interrupted event is re-sent whole, under its id.
        assert_eq!(buf.pinned_bytes(), big.frame.len());
        assert_eq!(
            buf.replay_after(&progress[2].id).unwrap().frames,
            vec![big.frame.clone()]
        );
        // Another stream does not unpin it (pins are per stream); forgetting the stream does.
        let t = buf.open_stream();
        let _ = fill(&mut buf, t, 5, 50);
        assert!(buf.replay_after(&progress[2].id).is_ok());
        buf.forget_stream(s);
        assert_eq!(
            buf.replay_after(&progress[2].id).unwrap_err().reason,
            MissReason::Evicted
        );
        assert_eq!(buf.pinned_bytes(), buf.frame("2-4").unwrap().len());
    }

    #[test]
    fn unpinning_an_oversized_event_drops_it() {
        let mut c = config(1000, 64);
        c.max_event_bytes(200).pin_last(1);
        let mut buf = ReplayBuffer::new(c);
        let s = buf.open_stream();
        let first = buf.append(s, None, b"{}").unwrap();
        let big = buf.append(s, None, &[b'r'; 3000]).unwrap();
        let last = buf.append(s, None, b"{}").unwrap();
        assert_eq!(buf.pinned_bytes(), last.frame.len());
        let miss = buf.replay_after(&first.id).unwrap_err();
        assert_eq!(
            (miss.reason, miss.missing),
            (MissReason::TooLarge, Some(big.id.clone()))
        );
        assert_eq!(buf.replay_after(&big.id).unwrap().frames, vec![last.frame]);
    }

    #[test]
    fn forgets_oldest_closed_stream_beyond_max_streams() {
        let mut c = BufferConfig::default();
        c.max_streams(2);
        let mut buf = ReplayBuffer::new(c);
        let a = buf.open_stream();
        let _ = buf.append(a, None, b"{}").unwrap();
        let b = buf.open_stream();
        let _ = buf.append(b, None, b"{}").unwrap();
        buf.close_stream(b);
        let c = buf.open_stream(); // b is closed: it goes before the older, open a
        assert!(buf.replay_after("1-0").is_ok());
        assert_eq!(
            buf.replay_after("2-0").unwrap_err().reason,
            MissReason::Evicted
        );
        assert!(!buf.is_closed(c));
    }

    #[test]
    fn zero_event_cap_keeps_nothing() {
        let mut buf = ReplayBuffer::new(config(1000, 0));
        let s = buf.open_stream();
        let a = buf.append(s, None, b"{}").unwrap();
        let _b = buf.append(s, None, b"{}").unwrap();
        assert_eq!(buf.held_events(), 0);
        assert_eq!(
            buf.replay_after(&a.id).unwrap_err().reason,
            MissReason::TooLarge
        );
    }
}
