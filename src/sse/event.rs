//! The decoder's output types: [`Event`], its [`Data`] rope, and the [`PartialEvent`] left at a cut.
#![forbid(unsafe_code)]

use bytes::{BufMut, Bytes, BytesMut};
use smallvec::SmallVec;

/// The one line feed every static join points at: a `static`, so that its address is unique and a
/// join segment can be told from a copied `"\n"` by pointer.
pub(crate) static JOIN: [u8; 1] = *b"\n";

/// The static line feed that joins two `data` lines inside a [`Data`] rope.
pub(crate) const LF: Bytes = Bytes::from_static(&JOIN);

/// The event type MCP servers give every event, as a static value (cloned and dropped without a
/// refcount).
pub(crate) const MESSAGE: Bytes = Bytes::from_static(b"message");

/// An event's data: a rope of [`Bytes`] segments.
///
/// The decoder builds it from slices of the input chunks (no copy) for pieces of at least
/// [`DecoderConfig::copy_below`](super::DecoderConfig::copy_below) bytes, joined by static `"\n"` segments, and
/// copies smaller pieces, with their joins, into small owned segments: a segment and a pinned chunk
/// cost more than copying a few dozen bytes, and would let tiny pieces hold memory out of all
/// proportion to the data. A `data:` line that ends the event in the chunk where it sits is always
/// one slice of that chunk. Nothing else is copied until [`Data::contiguous`] is asked for a rope
/// of more than one segment.
///
/// Equality, hashing and [`Data::eq_bytes`] look at the bytes only, never at how they
/// are split into segments: `"ab"` equals `"a"` + `"b"`.
#[derive(Clone, Default)]
pub struct Data(Repr);

/// A [`Data`] rope's storage, sized for the common case: one segment inline, so an event moves as a
/// few words and not as an inline array (a multi-segment rope is one allocation, made by events whose
/// pieces were big enough to be sliced rather than copied).
#[derive(Clone)]
enum Repr {
    /// No segment (an empty `Bytes`) or exactly one (never empty).
    One(Bytes),
    /// Two segments or more, none empty.
    Many(Box<Rope>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::One(Bytes::new())
    }
}

/// The segments of a rope of two or more, and their total length.
#[derive(Clone)]
struct Rope {
    segments: SmallVec<[Bytes; 4]>,
    len: usize,
}

impl Data {
    /// An empty rope.
    pub const fn new() -> Self {
        Data(Repr::One(Bytes::new()))
    }

    /// Appends one segment (test hook: ropes are the decoder's to build).
    #[cfg(feature = "__testing")]
    #[doc(hidden)]
    pub fn push(&mut self, segment: Bytes) {
        self.push_segment(segment);
    }

    /// Appends one segment (empty segments are dropped: they carry no bytes).
    #[inline]
    pub(crate) fn push_segment(&mut self, segment: Bytes) {
        if segment.is_empty() {
            return;
        }
        match &mut self.0 {
            Repr::One(first) if first.is_empty() => *first = segment,
            Repr::One(first) => {
                let first = std::mem::take(first);
                let len = first.len() + segment.len();
                let mut segments = SmallVec::new();
                segments.push(first);
                segments.push(segment);
                self.0 = Repr::Many(Box::new(Rope { segments, len }));
            }
            Repr::Many(rope) => {
                rope.len += segment.len();
                rope.segments.push(segment);
            }
        }
    }

    /// Total length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::One(b) => b.len(),
            Repr::Many(rope) => rope.len,
        }
    }

    /// Whether the rope holds no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The segments, in order (none of them empty).
    #[inline]
    pub fn segments(&self) -> &[Bytes] {
        match &self.0 {
            Repr::One(b) if b.is_empty() => &[],
            Repr::One(b) => std::slice::from_ref(b),
            Repr::Many(rope) => &rope.segments,
        }
    }

    /// Iterates the segments as byte slices.
    pub fn chunks(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.segments().iter().map(|s| s.as_ref())
    }

    /// The data as one contiguous [`Bytes`]: a refcount bump when the rope has at most one segment,
    /// one copy otherwise.
    #[must_use]
    pub fn contiguous(&self) -> Bytes {
        match &self.0 {
            Repr::One(b) => b.clone(),
            Repr::Many(rope) => {
                let mut out = BytesMut::with_capacity(rope.len);
                for s in &rope.segments {
                    out.extend_from_slice(s);
                }
                out.freeze()
            }
        }
    }

    /// Copies the data into `out` (appending), reserving once.
    pub fn copy_to(&self, out: &mut Vec<u8>) {
        out.reserve(self.len());
        for s in self.segments() {
            out.extend_from_slice(s);
        }
    }

    /// Whether the data equals `other` byte for byte, without copying either side.
    pub fn eq_bytes(&self, other: &[u8]) -> bool {
        if other.len() != self.len() {
            return false;
        }
        let mut rest = other;
        for s in self.segments() {
            let (head, tail) = rest.split_at(s.len());
            if head != s.as_ref() {
                return false;
            }
            rest = tail;
        }
        true
    }
}

impl Data {
    /// A reader over the rope's bytes, in place: [`bytes::Buf`] (so `copy_to_bytes` on a one-segment
    /// rope is a refcount bump) and [`std::io::Read`] (for parsers that read, such as
    /// `serde_json::from_reader`). No copy is made until the reader's consumer makes one.
    pub fn reader(&self) -> DataReader<'_> {
        DataReader {
            segments: self.segments(),
            at: 0,
            remaining: self.len(),
        }
    }
}

/// A reader over a [`Data`] rope ([`Data::reader`]).
#[derive(Clone, Debug)]
pub struct DataReader<'a> {
    /// The segments not yet fully read; the first is read from `at`.
    segments: &'a [Bytes],
    at: usize,
    remaining: usize,
}

impl bytes::Buf for DataReader<'_> {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.segments.first().map_or(&[], |s| &s[self.at..])
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end of the rope");
        self.remaining -= cnt;
        while let Some(first) = self.segments.first() {
            let left = first.len() - self.at;
            if cnt < left {
                self.at += cnt;
                return;
            }
            cnt -= left;
            self.segments = &self.segments[1..];
            self.at = 0;
        }
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        // Within the current segment: a refcount bump, not a copy.
        if let Some(first) = self.segments.first()
            && self.at + len <= first.len()
        {
            let out = first.slice(self.at..self.at + len);
            self.advance(len);
            return out;
        }
        let mut out = BytesMut::with_capacity(len);
        out.put(self.take(len));
        out.freeze()
    }
}

impl std::io::Read for DataReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use bytes::Buf;
        let n = buf.len().min(self.chunk().len());
        buf[..n].copy_from_slice(&self.chunk()[..n]);
        self.advance(n);
        Ok(n)
    }
}

impl PartialEq for Data {
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        let mut theirs = other.chunks();
        let mut rest: &[u8] = &[];
        for mut mine in self.chunks() {
            while !mine.is_empty() {
                if rest.is_empty() {
                    // Lengths are equal, so `other` has bytes left while `self` does.
                    match theirs.next() {
                        Some(c) => rest = c,
                        None => return false,
                    }
                }
                let n = mine.len().min(rest.len());
                if mine[..n] != rest[..n] {
                    return false;
                }
                mine = &mine[n..];
                rest = &rest[n..];
            }
        }
        true
    }
}

impl Eq for Data {}

impl PartialEq<[u8]> for Data {
    fn eq(&self, other: &[u8]) -> bool {
        self.eq_bytes(other)
    }
}

impl PartialEq<&[u8]> for Data {
    fn eq(&self, other: &&[u8]) -> bool {
        self.eq_bytes(other)
    }
}

impl std::hash::Hash for Data {
    /// Hashes the length and the bytes in fixed 64-byte blocks, so that the hash does not depend on
    /// the segments, whatever the [`Hasher`](std::hash::Hasher) does with the boundaries of `write`
    /// calls.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        const BLOCK: usize = 64;
        state.write_usize(self.len());
        let mut block = [0u8; BLOCK];
        let mut filled = 0;
        for mut chunk in self.chunks() {
            while !chunk.is_empty() {
                let n = (BLOCK - filled).min(chunk.len());
                block[filled..filled + n].copy_from_slice(&chunk[..n]);
                filled += n;
                chunk = &chunk[n..];
                if filled == BLOCK {
                    state.write(&block);
                    filled = 0;
                }
            }
        }
        state.write(&block[..filled]);
    }
}

impl std::fmt::Debug for Data {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHOW: usize = 64;
        let head: Vec<u8> = self
            .chunks()
            .flat_map(|c| c.iter().copied())
            .take(SHOW)
            .collect();
        f.debug_struct("Data")
            .field("len", &self.len())
            .field("segments", &self.segments().len())
            .field("head", &String::from_utf8_lossy(&head))
            .finish()
    }
}

impl From<Bytes> for Data {
    #[inline]
    fn from(b: Bytes) -> Self {
        // An empty `Bytes` is the empty rope: `One` holds an empty segment only then.
        Data(Repr::One(b))
    }
}

impl From<&'static str> for Data {
    fn from(s: &'static str) -> Self {
        Data::from(Bytes::from_static(s.as_bytes()))
    }
}

/// One dispatched event.
///
/// Equality and hashing compare the bytes of every field ([`Data`] by bytes, not by segments).
/// The struct may grow: build one with [`Event::new`] and set the fields.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Event {
    /// The event type from the `event` field, `None` when absent or empty (the type is then `message`).
    pub event: Option<Bytes>,
    /// The data: `data` lines joined with LF, the final LF removed.
    pub data: Data,
    /// The last event id at dispatch (the WHATWG "last event ID"; empty when none was ever set or it
    /// was reset by an empty `id` field). It persists across events: an event without an `id` field
    /// of its own inherits it ([`Event::own_id`] is this event's own id).
    pub last_event_id: Bytes,
    /// Whether this event's own block carried an `id` field (as opposed to inheriting the last id).
    pub has_own_id: bool,
    /// The reconnection time from a valid `retry` field in this event's block, if there was one.
    pub retry: Option<u64>,
}

impl Event {
    /// An event of the default type with `data`, no id (empty last event id, no own `id` field)
    /// and no `retry`: set the public fields for anything else.
    pub fn new(data: impl Into<Data>) -> Event {
        Event {
            event: None,
            data: data.into(),
            last_event_id: Bytes::new(),
            has_own_id: false,
            retry: None,
        }
    }

    /// This event's own id: the `id` field of its block, when it had one.
    pub fn own_id(&self) -> Option<&Bytes> {
        self.has_own_id.then_some(&self.last_event_id)
    }

    /// The event type, with the WHATWG default `message` when absent.
    pub fn event_type(&self) -> &[u8] {
        match &self.event {
            Some(t) => t,
            None => b"message",
        }
    }
}

/// What was still open when the input ended without a blank line: it is never dispatched.
///
/// The struct may grow: build one with [`PartialEvent::new`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct PartialEvent {
    /// Bytes of the open block received (every field line and line end since the last blank line,
    /// plus the unterminated line in progress).
    pub bytes: u64,
    /// Data bytes the block had accumulated (as they would have appeared in [`Event::data`]).
    pub data_len: u64,
    /// The `id` field's value if the block's `id` line had arrived complete before the cut.
    pub id: Option<Bytes>,
}

impl PartialEvent {
    /// An open block of `bytes` wire bytes holding `data_len` data bytes, whose `id` line (if any)
    /// had arrived complete.
    pub fn new(bytes: u64, data_len: u64, id: Option<Bytes>) -> PartialEvent {
        PartialEvent {
            bytes,
            data_len,
            id,
        }
    }
}

/// Hands `f` the bytes of `pieces` from offset `from` on, in order, one call per piece (a piece
/// that ends before `from` is skipped, the one holding it is cut there).
pub(crate) fn for_each_from<'a>(
    pieces: impl IntoIterator<Item = &'a [u8]>,
    mut from: usize,
    mut f: impl FnMut(&[u8]),
) {
    for piece in pieces {
        if from >= piece.len() {
            from -= piece.len();
            continue;
        }
        f(&piece[from..]);
        from = 0;
    }
}
