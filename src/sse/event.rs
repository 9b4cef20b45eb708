//! The decoder's output types: [`Event`], its [`Data`] rope, and the [`PartialEvent`] left at a cut.
#![forbid(unsafe_code)]

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;

/// The static line feed that joins two `data` lines inside a [`Data`] rope.
pub(crate) const LF: Bytes = Bytes::from_static(b"\n");

/// An event's data: a rope of [`Bytes`] slices of the input chunks, joined by static `"\n"` segments.
///
/// A `data:` line that sits inside one chunk is exactly one segment (a refcounted slice of that chunk);
/// a line that spans chunks is one segment per chunk. Nothing is copied until [`Data::contiguous`] is
/// asked for a rope of more than one segment.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Data {
    segments: SmallVec<[Bytes; 3]>,
    len: usize,
}

impl Data {
    /// An empty rope.
    pub const fn new() -> Self {
        Data {
            segments: SmallVec::new_const(),
            len: 0,
        }
    }

    /// Appends one segment (empty segments are dropped: they carry no bytes).
    #[inline]
    pub fn push(&mut self, segment: Bytes) {
        if !segment.is_empty() {
            self.len += segment.len();
            self.segments.push(segment);
        }
    }

    /// Total length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the rope holds no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segments, in order.
    #[inline]
    pub fn segments(&self) -> &[Bytes] {
        &self.segments
    }

    /// Iterates the segments as byte slices.
    pub fn chunks(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.segments.iter().map(|s| s.as_ref())
    }

    /// The data as one contiguous [`Bytes`]: a refcount bump when the rope has at most one segment,
    /// one copy otherwise.
    #[must_use]
    pub fn contiguous(&self) -> Bytes {
        match self.segments.len() {
            0 => Bytes::new(),
            1 => self.segments[0].clone(),
            _ => {
                let mut out = BytesMut::with_capacity(self.len);
                for s in &self.segments {
                    out.extend_from_slice(s);
                }
                out.freeze()
            }
        }
    }

    /// Copies the data into `out` (appending), reserving once.
    pub fn copy_to(&self, out: &mut Vec<u8>) {
        out.reserve(self.len);
        for s in &self.segments {
            out.extend_from_slice(s);
        }
    }

    /// Whether the data equals `other` byte for byte, without copying either side.
    pub fn eq_bytes(&self, other: &[u8]) -> bool {
        if other.len() != self.len {
            return false;
        }
        let mut rest = other;
        for s in &self.segments {
            let (head, tail) = rest.split_at(s.len());
            if head != s.as_ref() {
                return false;
            }
            rest = tail;
        }
        true
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
            .field("len", &self.len)
            .field("segments", &self.segments.len())
            .field("head", &String::from_utf8_lossy(&head))
            .finish()
    }
}

impl From<Bytes> for Data {
    #[inline]
    fn from(b: Bytes) -> Self {
        let mut d = Data::new();
        d.push(b);
        d
    }
}

impl From<&'static str> for Data {
    fn from(s: &'static str) -> Self {
        Data::from(Bytes::from_static(s.as_bytes()))
    }
}

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The event type from the `event` field, `None` when absent or empty (the type is then `message`).
    pub event: Option<Bytes>,
    /// The data: `data` lines joined with LF, the final LF removed.
    pub data: Data,
    /// The last event id at dispatch (the WHATWG "last event ID"; empty when none was ever set or it
    /// was reset by an empty `id` field). It persists across events.
    pub id: Bytes,
    /// Whether this event's own block carried an `id` field (as opposed to inheriting the last id).
    pub has_own_id: bool,
    /// The reconnection time from a valid `retry` field in this event's block, if there was one.
    pub retry: Option<u64>,
}

impl Event {
    /// The event type, with the WHATWG default `message` when absent.
    pub fn event_type(&self) -> &[u8] {
        match &self.event {
            Some(t) => t,
            None => b"message",
        }
    }
}

/// What was still open when the input ended without a blank line: it is never dispatched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartialEvent {
    /// Bytes of the open block received (every field line and line end since the last blank line,
    /// plus the unterminated line in progress).
    pub bytes: u64,
    /// Data bytes the block had accumulated (as they would have appeared in [`Event::data`]).
    pub data_len: u64,
    /// The `id` field's value if the block's `id` line had arrived complete before the cut.
    pub id: Option<Bytes>,
}
