//! Event ids as the guard sees them: keyed hashes for the bounded windows, and the numbered shapes
//! whose order the guard may infer once a stream has shown one consistently.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use bytes::Bytes;

use super::Restart;
use crate::message::RpcId;

/// A pass-through `Hasher` for keys that already are (seeded) xxh3 hashes: no SipHash per event.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used by `u64` keys; this keeps the hasher total for any other key.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A map keyed by a hash the caller already computed.
pub(crate) type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// A per-instance random seed, so that a server cannot choose ids that collide in the windows'
/// pass-through hash tables (the keys are seeded xxh3, the table uses them as they are).
pub(crate) fn random_seed() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(0x0053_5345_4741_5445_u64)
}

/// Seeded hash of an id.
pub(crate) fn id_key(seed: u64, id: &[u8]) -> u64 {
    crate::hash::xxh3_64_with_seed(id, seed)
}

/// Seeded hash of a JSON-RPC id and the length of its text: ids of different JSON types (`7`,
/// `"7"`) never share a key, and nothing of the id is kept.
pub(crate) fn rpc_id_key(seed: u64, id: &RpcId) -> (u64, usize) {
    let number;
    let (tag, bytes): (u64, &[u8]) = match id {
        RpcId::Number(n) => {
            number = n.to_le_bytes();
            (1, &number)
        }
        RpcId::String(s) => (2, s.as_bytes()),
        RpcId::Null => (3, &[]),
        RpcId::Raw(s) => (4, s.as_bytes()),
    };
    (
        crate::hash::xxh3_64_with_seed(bytes, seed ^ tag),
        bytes.len(),
    )
}

/// One remembered event: its content hash, and whether it carried a message (not a priming event).
#[derive(Clone, Copy, Debug)]
struct Seen {
    content: u64,
    message: bool,
}

/// Recent event ids (as seeded hashes) with their content hash, bounded to `cap` entries, oldest
/// evicted first.
///
/// Keyed by a hash of the id rather than the id itself: an id is a slice of its input chunk, and
/// holding thousands of them would keep thousands of chunks alive. Each entry costs a few words,
/// whatever the id's length. The per-event work is one probe to insert and one to evict; asking
/// whether a content hash was delivered ([`Window::has_message`], once per resume) scans the ring.
#[derive(Debug)]
pub(crate) struct Window {
    seed: u64,
    /// The remembered entries, oldest first.
    order: VecDeque<Entry>,
    ids: KeyMap<Seen>,
}

/// One entry of [`Window::order`].
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    seen: Seen,
}

impl Window {
    pub(crate) fn new(seed: u64) -> Self {
        Window {
            seed,
            order: VecDeque::new(),
            ids: KeyMap::default(),
        }
    }

    /// The window's key for `id` (its seeded hash): computed once per event, for [`Window::get`]
    /// and [`Window::insert`].
    pub(crate) fn key(&self, id: &[u8]) -> u64 {
        id_key(self.seed, id)
    }

    /// The window's key for a JSON-RPC id (its seeded hash, [`rpc_id_key`]), for [`Window::get`]
    /// and [`Window::insert`] of a window of response ids.
    pub(crate) fn rpc_key(&self, id: &RpcId) -> u64 {
        rpc_id_key(self.seed, id).0
    }

    /// The content hash remembered for the id whose [`Window::key`] is `key`.
    pub(crate) fn get(&self, key: u64) -> Option<u64> {
        self.ids.get(&key).map(|s| s.content)
    }

    /// Whether a remembered message (not a priming event) had this content hash.
    pub(crate) fn has_message(&self, content: u64) -> bool {
        self.order
            .iter()
            .any(|e| e.seen.message && e.seen.content == content)
    }

    /// Remembers the id whose [`Window::key`] is `key` (a key already remembered keeps its entry).
    pub(crate) fn insert(&mut self, key: u64, content: u64, message: bool, cap: usize) {
        let seen = Seen { content, message };
        match self.ids.entry(key) {
            std::collections::hash_map::Entry::Occupied(_) => return,
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(seen);
            }
        }
        self.order.push_back(Entry { key, seen });
        if self.order.len() == cap && self.ids.capacity() < 2 * cap + 2 {
            // Full for the first time: from now on every insert evicts. Room for twice the
            // entries lets the table clean up its tombstones in place, so the steady state never
            // allocates (a table at more than half its capacity is rebuilt larger instead).
            self.ids.reserve(cap + 2);
        }
        while self.order.len() > cap {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            self.ids.remove(&old.key);
        }
    }
}

/// An event id read as one of the numbered shapes whose order the guard may infer: `17`,
/// `17/<stream>` (rmcp), `<stream>-17`, or `<ms>-<seq>` (a Redis stream id). Uuids and every other
/// id are opaque ([`NumberedId::parse`] gives `None`). The one parser of id shapes: the guard's
/// decisions and the reports of tools (`ssegate probe`) read ids through it.
///
/// ```
/// use ssegate::inspect::NumberedId;
///
/// let a = NumberedId::parse(b"3/req-7").unwrap();
/// let b = NumberedId::parse(b"4/req-7").unwrap();
/// assert!(a.same_stream(&b) && b.number() > a.number());
/// assert!(!a.same_stream(&NumberedId::parse(b"4/req-8").unwrap()));
/// assert!(NumberedId::parse(b"0b1c2d3e-4f50-4617-8a9b-123456789012").is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NumberedId {
    /// 0: `17`; 1: `17/<stream>` (rmcp); 2: `<stream>-17`; 3: `<ms>-<seq>` (a Redis stream id).
    shape: u8,
    /// Hash of the stream part (empty for shapes 0 and 3).
    stream: u64,
    n: u128,
}

fn digits(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    let mut n = 0u64;
    for &d in b {
        let v = d.wrapping_sub(b'0');
        if v > 9 {
            return None;
        }
        n = n * 10 + u64::from(v);
    }
    Some(n)
}

/// Whether `id` is a uuid in its text form (`8-4-4-4-12` hex digits): random, so opaque even
/// when its last group happens to be all digits (it would otherwise read as `<stream>-<n>` with a
/// random stream part per event).
fn is_uuid(id: &[u8]) -> bool {
    id.len() == 36
        && id.iter().enumerate().all(|(i, &b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// Parses `id` as one of the numbered shapes, or `None` (an opaque id, uuids included).
pub(crate) fn seq(id: &[u8]) -> Option<NumberedId> {
    let stream = |part: &[u8]| crate::hash::xxh3_64(part);
    if is_uuid(id) {
        return None;
    }
    if let Some(n) = digits(id) {
        return Some(NumberedId {
            shape: 0,
            stream: 0,
            n: u128::from(n),
        });
    }
    if let Some(slash) = id.iter().position(|&b| b == b'/')
        && let Some(n) = digits(&id[..slash])
    {
        return Some(NumberedId {
            shape: 1,
            stream: stream(&id[slash + 1..]),
            n: u128::from(n),
        });
    }
    let dash = id.iter().rposition(|&b| b == b'-')?;
    let n = digits(&id[dash + 1..])?;
    if dash == 0 {
        return None;
    }
    if let Some(ms) = digits(&id[..dash]) {
        return Some(NumberedId {
            shape: 3,
            stream: 0,
            n: (u128::from(ms) << 64) | u128::from(n),
        });
    }
    Some(NumberedId {
        shape: 2,
        stream: stream(&id[..dash]),
        n: u128::from(n),
    })
}

impl NumberedId {
    /// `id` as a numbered shape, or `None` for an opaque id.
    pub fn parse(id: &[u8]) -> Option<NumberedId> {
        seq(id)
    }

    /// The number, ordered within one stream part (for `<ms>-<seq>`: the two numbers in order).
    pub fn number(&self) -> u128 {
        self.n
    }

    /// Whether both ids have the same shape and the same stream part, so their numbers compare.
    pub fn same_stream(&self, other: &NumberedId) -> bool {
        self.shape == other.shape && self.stream == other.stream
    }

    fn same_stream_as(self, other: NumberedId) -> bool {
        self.shape == other.shape && self.stream == other.stream
    }

    /// Both ids have a shape that names its stream (`17/<stream>`, `<stream>-17`), and the names
    /// differ.
    fn other_stream(self, other: NumberedId) -> bool {
        matches!(self.shape, 1 | 2) && self.shape == other.shape && self.stream != other.stream
    }
}

/// What the stream's ids have shown so far (its message ids, and the priming ids of its first
/// connection). Order is inferred in `Numbered`: two or more ids of one shape and stream part,
/// strictly increasing. After a resume, one id is evidence enough for two rules: a later id of the
/// same shape and stream part that does not increase goes back, and an id of the same shape that
/// names another stream (`5/B` after `0/A`, `B-5` after `A-0`) belongs to another stream. Any id
/// that breaks that on a first connection makes the stream opaque for good (the ids only looked
/// numbered); after a resume the same break is a restart.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) enum Shape {
    #[default]
    Unknown,
    One(NumberedId),
    Numbered(NumberedId),
    Opaque,
}

impl Shape {
    /// Takes in a new message id. `resumed`: the stream has been resumed at least once, so a break
    /// in a numbered stream is evidence of a restart rather than of opaque ids.
    pub(crate) fn observe(&mut self, id: &[u8], resumed: bool) -> Option<Restart> {
        match self {
            // Opaque for good: the id is not parsed.
            Shape::Opaque => return None,
            // The common case of a numbered stream, `17` after `16`, in one pass over the digits
            // (an id of digits alone is never a uuid, which has dashes).
            Shape::Numbered(high) if high.shape == 0 => {
                if let Some(n) = digits(id).map(u128::from)
                    && n > high.n
                {
                    high.n = n;
                    return None;
                }
            }
            _ => {}
        }
        let Some(s) = seq(id) else {
            *self = Shape::Opaque;
            return None;
        };
        match *self {
            Shape::Opaque => None,
            Shape::Unknown => {
                *self = Shape::One(s);
                None
            }
            Shape::One(a) => {
                if a.same_stream_as(s) && s.n > a.n {
                    *self = Shape::Numbered(s);
                    return None;
                }
                // One id does not make a numbered stream, but after a resume the same stream part
                // going back, or a stream part named differently in the same shape, cannot be a
                // coincidence of opaque ids (uuids never parse as a shape).
                if resumed && a.same_stream_as(s) {
                    return Some(Restart::Backwards);
                }
                if resumed && a.other_stream(s) {
                    return Some(Restart::OtherStream);
                }
                *self = Shape::Opaque;
                None
            }
            Shape::Numbered(high) => {
                let broken = if high.shape != s.shape {
                    None
                } else if high.stream != s.stream {
                    Some(Restart::OtherStream)
                } else if s.n <= high.n {
                    Some(Restart::Backwards)
                } else {
                    *self = Shape::Numbered(s);
                    return None;
                };
                if resumed && broken.is_some() {
                    return broken;
                }
                *self = Shape::Opaque;
                None
            }
        }
    }
}

/// `cursor + 1` in the cursor's own shape, when `got` has that shape and stream part and is not it.
pub(crate) fn not_next(cursor: &[u8], got: &[u8]) -> Option<Bytes> {
    let c = seq(cursor)?;
    let g = seq(got)?;
    if !c.same_stream_as(g) || g.n == c.n + 1 {
        return None;
    }
    let text = String::from_utf8_lossy(cursor);
    let next = match c.shape {
        0 => (c.n + 1).to_string(),
        1 => {
            let (_, stream) = text.split_once('/')?;
            format!("{}/{stream}", c.n + 1)
        }
        _ => {
            let (stream, _) = text.rsplit_once('-')?;
            format!("{stream}-{}", (c.n + 1) & u128::from(u64::MAX))
        }
    };
    Some(Bytes::from(next))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window against a model (a map and a queue), with keys crowded onto few home slots so
    /// that probe runs wrap around the table and deletions shift entries back.
    #[test]
    fn window_matches_a_model() {
        for cap in [1, 2, 3, 7, 16, 100] {
            let mut w = Window::new(1);
            let mut model: VecDeque<(u64, u64)> = VecDeque::new();
            let mut x = 0x9E37_79B9_7F4A_7C15_u64;
            for step in 0..5000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Few distinct keys (repeats are kept, not re-inserted), crowded low bits.
                let key = ((x >> 40) % 300) << 32 | (x % 5) | 0xF0;
                let content = step;
                if w.get(key).is_none() {
                    if model.len() >= cap {
                        model.pop_front();
                    }
                    model.push_back((key, content));
                }
                w.insert(key, content, step % 2 == 0, cap);
                assert_eq!(w.order.len(), model.len());
                assert_eq!(w.ids.len(), model.len());
                for &(k, c) in &model {
                    assert_eq!(w.get(k), Some(c), "cap {cap} step {step}");
                }
                let probe = ((x >> 20) % 300) << 32 | (x % 5) | 0xF0;
                let expect = model.iter().find(|(k, _)| *k == probe).map(|&(_, c)| c);
                assert_eq!(w.get(probe), expect, "cap {cap} step {step}");
            }
        }
    }

    #[test]
    fn shapes() {
        assert_eq!(seq(b"17").map(|s| (s.shape, s.n)), Some((0, 17)));
        assert_eq!(seq(b"17/req-3").map(|s| (s.shape, s.n)), Some((1, 17)));
        assert_eq!(seq(b"s1-4").map(|s| (s.shape, s.n)), Some((2, 4)));
        assert_eq!(seq(b"1733000000000-2").map(|s| s.shape), Some(3));
        assert!(seq(b"st1_1007_ab").is_none());
        assert!(seq(b"-4").is_none());
        assert!(seq(b"0b1c2d3e-4f50-4617-8a9b-12345678901x").is_none());
        assert_eq!(not_next(b"3/r", b"5/r").as_deref(), Some(b"4/r".as_slice()));
        assert_eq!(not_next(b"3/r", b"4/r"), None);
        assert_eq!(not_next(b"s-3", b"s-9").as_deref(), Some(b"s-4".as_slice()));
    }

    #[test]
    fn a_uuid_with_a_numeric_last_group_stays_opaque() {
        let mut shape = Shape::default();
        assert_eq!(
            shape.observe(b"0b1c2d3e-4f50-4617-8a9b-123456789012", true),
            None
        );
        assert_eq!(
            shape.observe(b"9f8e7d6c-5b4a-4392-8170-654321098765", true),
            None
        );
        assert!(matches!(shape, Shape::Opaque));
    }

    #[test]
    fn a_numbered_stream_going_back_is_a_restart_only_after_a_resume() {
        let mut shape = Shape::default();
        for id in [b"s-1", b"s-2"] {
            assert_eq!(shape.observe(id, false), None);
        }
        let mut first = shape;
        assert_eq!(first.observe(b"s-1", false), None);
        assert!(matches!(first, Shape::Opaque));
        assert_eq!(shape.observe(b"s-1", true), Some(Restart::Backwards));
        assert_eq!(shape.observe(b"t-9", true), Some(Restart::OtherStream));
    }
}
