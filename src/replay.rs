//! Server-side replay buffer: what an MCP Streamable HTTP server keeps so that a client can resume a cut
//! stream with `GET` + `Last-Event-ID`.
//!
//! Each event is stored as its encoded SSE frame (one [`Bytes`]), so a replay hands out refcounted clones
//! of the very bytes that were first written. Ids are `<stream>-<seq>`: unique across the session's
//! streams, naming the stream they belong to, with a numeric per-stream sequence (starting at 0) so that
//! a client can check order. [`ReplayBuffer::replay_after`] returns every frame after an id, or a typed
//! [`Miss`] — never a silent fresh stream.
//!
//! Memory is bounded by a byte budget and an event-count cap (a ring of 64 slots by default). Eviction is
//! oldest-first across the whole session. An event larger than the per-event cap (or the whole budget)
//! cannot be kept: [`Appended::oversized`] says so at append time, and a later replay that needs it is a
//! [`MissReason::TooLarge`] miss. Optionally the newest events of each stream are pinned outside the
//! budget ([`Config::pin_last`]), so the event a cut most likely interrupted can always be re-sent whole.
//!
//! ```
//! use ssegate::replay::{Config, MissReason, ReplayBuffer};
//!
//! let mut config = Config::default();
//! config.max_bytes(64).max_events(2);
//! let mut buf = ReplayBuffer::new(config);
//! let s = buf.open_stream();
//! let a = buf.append(s, None, b"{\"n\":1}").unwrap();
//! let b = buf.append(s, None, b"{\"n\":2}").unwrap();
//! assert_eq!(a.id, "1-0");
//! assert_eq!(&b.frame[..], b"id: 1-1\ndata: {\"n\":2}\n\n");
//! assert_eq!(buf.replay_after("1-0").unwrap().frames, vec![b.frame.clone()]);
//! buf.append(s, None, b"{\"n\":3}").unwrap(); // a third slot: 1-0 is evicted
//! buf.append(s, None, b"{\"n\":4}").unwrap(); // and then 1-1
//! assert_eq!(buf.replay_after("1-0").unwrap_err().reason, MissReason::Evicted);
//! assert_eq!(buf.replay_after("1-9").unwrap_err().reason, MissReason::Unknown);
//! ```
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

/// Limits of a [`ReplayBuffer`]. Setters take `&mut self` and chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    max_bytes: usize,
    max_events: usize,
    max_event_bytes: usize,
    retry_after: Duration,
    pin_last: usize,
    max_streams: usize,
}

impl Default for Config {
    /// 1 MiB and 64 events of budget, a 1 MiB per-event cap, `retry_after` 1 s, nothing pinned, 64 streams.
    fn default() -> Self {
        Config {
            max_bytes: 1 << 20,
            max_events: 64,
            max_event_bytes: 1 << 20,
            retry_after: Duration::from_secs(1),
            pin_last: 0,
            max_streams: 64,
        }
    }
}

impl Config {
    /// The byte budget: total encoded frame bytes kept across the session's streams (pinned events aside).
    pub fn max_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_bytes = bytes;
        self
    }

    /// The event-count cap: how many events (slots) the budget holds across the session's streams.
    pub fn max_events(&mut self, events: usize) -> &mut Self {
        self.max_events = events;
        self
    }

    /// The per-event cap: an event whose frame is larger is flagged [`Appended::oversized`] and is not
    /// kept in the budget (the mitigation "one event fits one slot": the server knows at once that this
    /// event cannot be replayed).
    pub fn max_event_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_event_bytes = bytes;
        self
    }

    /// The delay a [`Miss`] tells the client to wait before it tries again (a `Retry-After` header).
    pub fn retry_after(&mut self, delay: Duration) -> &mut Self {
        self.retry_after = delay;
        self
    }

    /// Pins the `n` newest events of each stream outside the byte budget and the event cap, whatever
    /// their size (default 0). An event enters the budget (and may evict, or be dropped as oversized)
    /// only when `n` newer events of its stream have been appended. Pins survive
    /// [`ReplayBuffer::close_stream`] — a client resumes a stream after the server finished writing it —
    /// and are released when the stream is forgotten (see [`Config::max_streams`]).
    pub fn pin_last(&mut self, n: usize) -> &mut Self {
        self.pin_last = n;
        self
    }

    /// How many streams the buffer remembers; opening one more forgets the oldest closed stream and
    /// everything it still holds (default 64).
    pub fn max_streams(&mut self, n: usize) -> &mut Self {
        self.max_streams = n;
        self
    }

    /// The configured byte budget.
    pub fn get_max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The configured event-count cap.
    pub fn get_max_events(&self) -> usize {
        self.max_events
    }

    /// The configured per-event cap.
    pub fn get_max_event_bytes(&self) -> usize {
        self.max_event_bytes
    }

    /// The configured retry delay for misses.
    pub fn get_retry_after(&self) -> Duration {
        self.retry_after
    }

    /// The configured number of pinned events per stream.
    pub fn get_pin_last(&self) -> usize {
        self.pin_last
    }

    /// The largest frame the budget can ever hold.
    fn event_cap(&self) -> usize {
        self.max_event_bytes.min(self.max_bytes)
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

/// What [`ReplayBuffer::append`] did with an event.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "the frame is what must be written to the client"]
pub struct Appended {
    /// The event's id (`<stream>-<seq>`).
    pub id: String,
    /// The event's sequence number in its stream.
    pub seq: u64,
    /// The encoded SSE frame (id, event, retry and data lines, blank line): write exactly these bytes.
    pub frame: Bytes,
    /// Whether the frame exceeds the per-event cap or the whole budget, so that the buffer cannot keep it
    /// once it is no longer pinned: a replay that needs it will be a [`MissReason::TooLarge`] miss.
    pub oversized: bool,
}

/// Why [`ReplayBuffer::append`] refused an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendError {
    /// The stream was closed with [`ReplayBuffer::close_stream`].
    Closed(StreamId),
    /// The stream was never opened by this buffer, or has been forgotten.
    UnknownStream(StreamId),
}

impl fmt::Display for AppendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppendError::Closed(s) => write!(f, "stream {s} is closed"),
            AppendError::UnknownStream(s) => {
                write!(f, "stream {s} is unknown to this replay buffer")
            }
        }
    }
}

impl std::error::Error for AppendError {}

/// The frames to re-send after a `Last-Event-ID`, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replay {
    /// The stream the id belongs to.
    pub stream: StreamId,
    /// The frames of every event after the id, as first written (refcounted clones). May be empty when
    /// the id was the stream's last event.
    pub frames: Vec<Bytes>,
    /// Whether the stream is closed: no event will follow these frames.
    pub closed: bool,
}

/// Why a replay is impossible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissReason {
    /// The id is malformed, names a stream never opened, or an event never sent.
    Unknown,
    /// An event after the id (or the whole stream) was evicted to stay within the budget.
    Evicted,
    /// An event after the id was larger than the per-event cap or the budget, so it was never kept.
    TooLarge,
}

impl MissReason {
    /// A short lower-case name (`unknown`, `evicted`, `too_large`).
    pub fn as_str(self) -> &'static str {
        match self {
            MissReason::Unknown => "unknown",
            MissReason::Evicted => "evicted",
            MissReason::TooLarge => "too_large",
        }
    }
}

impl fmt::Display for MissReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A replay the buffer cannot serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Miss {
    /// Why.
    pub reason: MissReason,
    /// The id of the first event that cannot be replayed, when the stream is known.
    pub missing: Option<String>,
    /// How long the client should wait before it tries again ([`Config::retry_after`]).
    pub retry_after: Duration,
}

impl fmt::Display for Miss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "replay unavailable ({})", self.reason)?;
        if let Some(id) = &self.missing {
            write!(f, ": event {id} is not held")?;
        }
        write!(f, "; retry after {} ms", self.retry_after.as_millis())
    }
}

impl std::error::Error for Miss {}

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
    events: BTreeMap<u64, Stored>,
    /// Events dropped because they could never fit (a later replay of them is `TooLarge`).
    too_large: BTreeSet<u64>,
}

/// Per-session store of sent SSE frames for `Last-Event-ID` resumption (see the [module docs](self)).
#[derive(Debug)]
pub struct ReplayBuffer {
    config: Config,
    streams: BTreeMap<u64, StreamState>,
    next_stream: u64,
    next_order: u64,
    /// The budgeted events, oldest first: order -> (stream, seq).
    ring: BTreeMap<u64, (u64, u64)>,
    used_bytes: usize,
    pinned_bytes: usize,
}

impl Default for ReplayBuffer {
    fn default() -> Self {
        ReplayBuffer::new(Config::default())
    }
}

impl ReplayBuffer {
    /// An empty buffer with these limits.
    pub fn new(config: Config) -> Self {
        ReplayBuffer {
            config,
            streams: BTreeMap::new(),
            next_stream: 1,
            next_order: 0,
            ring: BTreeMap::new(),
            used_bytes: 0,
            pinned_bytes: 0,
        }
    }

    /// The limits.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Opens a new stream (stream numbers start at 1). If more than [`Config::max_streams`] streams are
    /// then remembered, the oldest closed one is forgotten.
    pub fn open_stream(&mut self) -> StreamId {
        let id = self.next_stream;
        self.next_stream += 1;
        self.streams.insert(id, StreamState::default());
        while self.streams.len() > self.config.max_streams.max(1) {
            let Some(oldest) = self.streams.iter().find(|(_, s)| s.closed).map(|(k, _)| *k) else {
                break;
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
        }
    }

    /// Forgets a stream and everything it holds; a later replay of it is an [`MissReason::Evicted`] miss.
    pub fn forget_stream(&mut self, stream: StreamId) {
        let Some(state) = self.streams.remove(&stream.0) else {
            return;
        };
        for stored in state.events.into_values() {
            if stored.budgeted {
                self.ring.remove(&stored.order);
                self.used_bytes -= stored.frame.len();
            } else {
                self.pinned_bytes -= stored.frame.len();
            }
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
            Some(s) if s.closed => return Err(AppendError::Closed(stream)),
            Some(s) => s,
            None => return Err(AppendError::UnknownStream(stream)),
        };
        let seq = state.next_seq;
        state.next_seq += 1;
        let id = format_id(stream, seq);
        let frame = encode_frame(Some(&id), event, data, retry);
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

    /// Moves a pinned event into the budget, evicting oldest-first to make room. An event over the
    /// per-event cap is then dropped; one larger than the whole budget first evicts everything, as it
    /// would have overwritten every slot of a ring (the field servers' behaviour).
    fn admit(&mut self, stream: u64, seq: u64) {
        let Some(len) = self
            .streams
            .get(&stream)
            .and_then(|s| s.events.get(&seq))
            .map(|e| e.frame.len())
        else {
            return;
        };
        while !self.ring.is_empty()
            && (self.used_bytes + len > self.config.max_bytes
                || self.ring.len() + 1 > self.config.max_events)
        {
            self.evict_oldest();
        }
        self.pinned_bytes -= len;
        let fits = len <= self.config.event_cap() && self.config.max_events > 0;
        let state = self.streams.get_mut(&stream).expect("stream checked above");
        if fits {
            let stored = state.events.get_mut(&seq).expect("event checked above");
            stored.budgeted = true;
            self.ring.insert(stored.order, (stream, seq));
            self.used_bytes += len;
        } else {
            state.events.remove(&seq);
            state.too_large.insert(seq);
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
    /// Either every later event is returned, in order, or none is.
    pub fn replay_after(&self, last_event_id: &str) -> Result<Replay, Miss> {
        let (stream, seq) = self.locate(last_event_id)?;
        let state = &self.streams[&stream.0];
        let mut frames = Vec::with_capacity((state.next_seq - seq - 1) as usize);
        for next in seq + 1..state.next_seq {
            match state.events.get(&next) {
                Some(stored) => frames.push(stored.frame.clone()),
                None => {
                    let reason = if state.too_large.contains(&next) {
                        MissReason::TooLarge
                    } else {
                        MissReason::Evicted
                    };
                    return Err(self.miss(reason, Some(format_id(stream, next))));
                }
            }
        }
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
        Miss {
            reason,
            missing,
            retry_after: self.config.retry_after,
        }
    }

    /// Frame bytes counted against the budget.
    pub fn used_bytes(&self) -> usize {
        self.used_bytes
    }

    /// Frame bytes held outside the budget by [`Config::pin_last`].
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

    /// Whether the stream is known and closed.
    pub fn is_closed(&self, stream: StreamId) -> bool {
        self.streams.get(&stream.0).is_some_and(|s| s.closed)
    }
}

/// Encodes one SSE event frame: `id: ..\n`, `event: ..\n`, `retry: ..\n` (each when given), then one
/// `data:` line per line of `data`, then the blank line.
///
/// `data` is split at every CR, LF or CRLF, so that a decoder joins the lines back with LF (SSE itself
/// cannot carry a CR in data; compact JSON has no raw line ends at all). Empty data gives one empty
/// `data:` line, so the event is still dispatched (the priming event).
///
/// # Panics
///
/// If `id` or `event` contains CR or LF, or `id` contains NUL (a decoder would split or ignore the field).
pub fn encode_frame(
    id: Option<&str>,
    event: Option<&str>,
    data: &[u8],
    retry: Option<u64>,
) -> Bytes {
    let bad = |s: &str| s.bytes().any(|b| b == b'\r' || b == b'\n');
    if let Some(id) = id {
        assert!(
            !bad(id) && !id.contains('\0'),
            "SSE id must not contain CR, LF or NUL: {id:?}"
        );
    }
    if let Some(event) = event {
        assert!(
            !bad(event),
            "SSE event type must not contain CR or LF: {event:?}"
        );
    }
    let lines = 1 + memchr::memchr2_iter(b'\r', b'\n', data).count();
    let mut cap = 1 + data.len() + lines * "data: \n".len();
    cap +=
        id.map_or(0, |s| s.len() + 5) + event.map_or(0, |s| s.len() + 8) + retry.map_or(0, |_| 28);
    let mut out = BytesMut::with_capacity(cap);
    if let Some(id) = id {
        put_field(&mut out, b"id", id.as_bytes());
    }
    if let Some(event) = event {
        put_field(&mut out, b"event", event.as_bytes());
    }
    if let Some(retry) = retry {
        put_field(&mut out, b"retry", retry.to_string().as_bytes());
    }
    let mut rest = data;
    loop {
        match memchr::memchr2(b'\r', b'\n', rest) {
            Some(i) => {
                put_field(&mut out, b"data", &rest[..i]);
                let crlf = rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n');
                rest = &rest[i + 1 + usize::from(crlf)..];
            }
            None => {
                put_field(&mut out, b"data", rest);
                break;
            }
        }
    }
    out.put_u8(b'\n');
    out.freeze()
}

fn put_field(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    out.put_slice(name);
    if value.is_empty() {
        out.put_u8(b':');
    } else {
        out.put_slice(b": ");
        out.put_slice(value);
    }
    out.put_u8(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(max_bytes: usize, max_events: usize) -> Config {
        let mut c = Config::default();
        c.max_bytes(max_bytes)
            .max_events(max_events)
            .max_event_bytes(max_bytes);
        c
    }

    /// Appends `n` events of `len` data bytes each, returns their appended records.
    fn fill(buf: &mut ReplayBuffer, s: StreamId, n: usize, len: usize) -> Vec<Appended> {
        (0..n)
            .map(|_| buf.append(s, None, &vec![b'x'; len]).unwrap())
            .collect()
    }

    #[test]
    fn encodes_fields_and_splits_lines() {
        assert_eq!(
            &encode_frame(Some("1-0"), None, b"", Some(500))[..],
            b"id: 1-0\nretry: 500\ndata:\n\n"
        );
        assert_eq!(
            &encode_frame(None, Some("message"), b"{}", None)[..],
            b"event: message\ndata: {}\n\n"
        );
        assert_eq!(
            &encode_frame(None, None, b"a\nb\r\nc\rd\n", None)[..],
            b"data: a\ndata: b\ndata: c\ndata: d\ndata:\n\n"
        );
        // A leading space in a line survives: the decoder strips exactly one.
        assert_eq!(&encode_frame(None, None, b" x", None)[..], b"data:  x\n\n");
        // CR at the very end, and a lone CRLF.
        assert_eq!(
            &encode_frame(None, None, b"a\r", None)[..],
            b"data: a\ndata:\n\n"
        );
        assert_eq!(
            &encode_frame(None, None, b"\r\n", None)[..],
            b"data:\ndata:\n\n"
        );
    }

    #[test]
    #[should_panic(expected = "must not contain")]
    fn rejects_line_end_in_id() {
        let _ = encode_frame(Some("1\n2"), None, b"", None);
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
    fn oversized_event_is_flagged_wraps_the_ring_and_misses_too_large() {
        let mut c = config(1000, 64);
        c.max_event_bytes(200)
            .retry_after(Duration::from_millis(250));
        let mut buf = ReplayBuffer::new(c);
        let s = buf.open_stream();
        let prime = buf.append_with_retry(s, None, b"", Some(100)).unwrap();
        let progress = fill(&mut buf, s, 3, 50);
        // Over the per-event cap but within the budget: flagged and dropped, evicts nothing.
        let held = buf.used_bytes();
        let mid = buf.append(s, None, &[b'm'; 300]).unwrap();
        assert!(mid.oversized);
        assert_eq!(buf.used_bytes(), held);
        assert_eq!(
            buf.replay_after(&progress[2].id).unwrap_err().reason,
            MissReason::TooLarge
        );
        // Larger than the whole budget: it wraps the ring, evicting everything, then is dropped.
        let big = buf.append(s, None, &[b'r'; 1500]).unwrap();
        assert!(big.oversized);
        assert_eq!(buf.used_bytes(), 0);
        let miss = buf.replay_after(&mid.id).unwrap_err();
        assert_eq!(miss.reason, MissReason::TooLarge);
        assert_eq!(miss.missing.as_deref(), Some(big.id.as_str()));
        assert_eq!(miss.retry_after, Duration::from_millis(250));
        // Further back, the first missing event is an evicted one.
        assert_eq!(
            buf.replay_after(&prime.id).unwrap_err().reason,
            MissReason::Evicted
        );
        // Events appended after it are fine and replayable from it.
        let after = buf.append(s, None, b"{}").unwrap();
        assert_eq!(buf.replay_after(&big.id).unwrap().frames, vec![after.frame]);
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
        assert_eq!(buf.append(s, None, b"{}"), Err(AppendError::Closed(s)));
        buf.forget_stream(s);
        assert_eq!(
            buf.replay_after("1-0").unwrap_err().reason,
            MissReason::Evicted
        );
        assert_eq!(
            buf.append(s, None, b"{}"),
            Err(AppendError::UnknownStream(s))
        );
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
        let mut c = Config::default();
        c.max_streams(2);
        let mut buf = ReplayBuffer::new(c);
        let a = buf.open_stream();
        let _ = buf.append(a, None, b"{}").unwrap();
        let b = buf.open_stream();
        let _ = buf.append(b, None, b"{}").unwrap();
        let c = buf.open_stream(); // a is still open: nothing to forget
        assert!(buf.replay_after("1-0").is_ok());
        buf.close_stream(a);
        let _d = buf.open_stream();
        assert_eq!(
            buf.replay_after("1-0").unwrap_err().reason,
            MissReason::Evicted
        );
        assert!(buf.replay_after("2-0").is_ok());
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
