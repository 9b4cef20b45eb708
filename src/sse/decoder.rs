//! The incremental decoder: [`Decoder`] and its [`DecoderConfig`].
//!
//! Feed chunks with [`Decoder::feed`], pull events with [`Decoder::next_event`] until it returns
//! `None` (more input needed), and call [`Decoder::finish`] when the connection's input ends.
//! Every byte is classified once, wherever the chunk boundaries fall, and event data is handed out
//! as [`Bytes`] slices of the chunks.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

use bytes::Bytes;

use super::event::{Data, Event, LF, MESSAGE, PartialEvent};

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];
/// Longest known field name (`event`, `retry`): a name that is longer is an unknown field.
const NAME_MAX: usize = 5;

/// The longest run of copied pieces whose buffer the decoder keeps for the next run (see
/// [`Decoder::close_small`]).
const KEEP_SMALL: usize = 1024;

/// Pieces shorter than this are copied rather than sliced (see [`DecoderConfig::copy_below`]).
pub(crate) const COPY_BELOW: usize = 256;

/// Chunks up to this many bytes are tested for a line end without a call into `memchr` (an inline
/// SSE2 test of 16-byte blocks). Measured on 4 MiB in 64-byte chunks: 1.89 -> 1.73 ms; at 256-byte
/// chunks either way measured the same, so longer chunks keep `memchr`.
const SHORT_CHUNK: usize = 128;

/// Limits for a [`Decoder`]; every one has a default, and [`DecoderConfig::build`] makes the decoder.
///
/// Exceeding a limit is a typed [`DecodeError`]; the decoder then discards input up to the next
/// blank line and carries on, so no input makes it hold more than the limits (see the module
/// docs of [`crate::sse`] for the memory bound they give).
#[derive(Clone, Debug)]
pub struct DecoderConfig {
    max_line: usize,
    max_event: usize,
    max_field: usize,
    max_block: usize,
    copy_below: usize,
}

impl Default for DecoderConfig {
    fn default() -> Self {
        DecoderConfig {
            max_line: crate::contract::DEFAULT_MAX_LINE,
            max_event: crate::contract::DEFAULT_MAX_EVENT,
            max_field: crate::contract::DEFAULT_MAX_FIELD,
            max_block: crate::contract::DEFAULT_MAX_BLOCK,
            copy_below: COPY_BELOW,
        }
    }
}

impl DecoderConfig {
    /// Longest line, in bytes, line end excluded (default 64 MiB). Applies to every line,
    /// comments and unknown fields included, although those are only scanned, never held.
    pub fn max_line(&mut self, n: usize) -> &mut Self {
        self.max_line = n;
        self
    }

    /// Most data bytes one event may hold: the `data` values plus their LF joins (default 64 MiB).
    pub fn max_event(&mut self, n: usize) -> &mut Self {
        self.max_event = n;
        self
    }

    /// Longest `id`, `event` or `retry` value, in bytes (default 4 KiB): these are the only field
    /// values held besides data.
    pub fn max_field(&mut self, n: usize) -> &mut Self {
        self.max_field = n;
        self
    }

    /// Most wire bytes one open block (an event before its blank line) may take: every line of it,
    /// comments, unknown fields, field names and line ends included (default 80 MiB, room for a
    /// [`DecoderConfig::max_event`] event and its other fields). This is the limit that bounds memory
    /// whatever the input: it caps what the open block can pin, however its bytes are spread over
    /// lines and chunks.
    pub fn max_block(&mut self, n: usize) -> &mut Self {
        self.max_block = n;
        self
    }

    /// Data pieces shorter than this many bytes are copied into a small owned buffer instead of
    /// being kept as a refcounted slice of their chunk (default 256).
    ///
    /// A slice costs a 32-byte segment, a refcount on the chunk and, for whoever reads the rope,
    /// one more piece to step over; copying a piece of a few hundred bytes costs less. The default
    /// comes from `benches/decode.rs` (`tiny_chunks` group): one 4 MiB event fed in chunks of 64 to
    /// 4096 bytes, decoded and then read once segment by segment (what the gate and the content
    /// hash do), copying versus slicing every chunk, on a loaded 2-core VM: copying is as fast or
    /// faster up to 256 bytes (64: 8.2 vs 9.6 ms, noisy; 128: 4.1 vs 4.5; 256: 2.7 vs 2.6-3.2),
    /// they tie at 512 (1.6-1.8 ms each), and slicing wins from 1024 (1.2 vs 1.5 ms; 4096: 0.8 vs
    /// 1.1). Where they tie, copying is the one that bounds memory: a slice pins its whole chunk
    /// and costs a segment, so copying small pieces keeps one byte of data from holding a chunk
    /// (see the memory bound in [`crate::sse`]). Pieces of the last `data` line of an event
    /// that ends in the chunk being scanned are always sliced (that chunk is held anyway).
    pub fn copy_below(&mut self, n: usize) -> &mut Self {
        self.copy_below = n;
        self
    }

    /// A decoder with these limits.
    pub fn build(&self) -> Decoder {
        Decoder {
            config: self.clone(),
            next: None,
            queue: VecDeque::new(),
            cur: Bytes::new(),
            pos: 0,
            chunk_base: 0,
            pending_cr: false,
            eol_known: None,
            state: State::Bom(0),
            name: [0; NAME_MAX],
            name_len: 0,
            line_start: 0,
            open: false,
            block_start: 0,
            block_at: 0,
            discard: false,
            data: Data::new(),
            small: Vec::new(),
            after_big: false,
            has_data: false,
            block_serial: 0,
            tail: 0..0,
            event_type: None,
            own_id: None,
            dropped_id: None,
            has_own_id: false,
            block_retry: None,
            field: Vec::new(),
            field_len: 0,
            retry_value: 0,
            retry_valid: true,
            last_id: Id::Held(Bytes::new()),
            last_id_cache: OnceLock::new(),
            retry: None,
        }
    }
}

/// A limit was exceeded. The event being built is dropped and the decoder skips to the next blank
/// line; the events after it are decoded normally.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// A line was longer than [`DecoderConfig::max_line`].
    LineTooLong {
        /// The limit, in bytes.
        limit: usize,
        /// Stream offset of the start of the line.
        offset: u64,
        /// The dropped block's own `id`, when its `id` line came before the limit was crossed. It
        /// is never committed ([`Decoder::last_event_id`] does not move to it).
        id: Option<Bytes>,
    },
    /// An event's data grew beyond [`DecoderConfig::max_event`].
    EventTooLarge {
        /// The limit, in bytes.
        limit: usize,
        /// Stream offset of the start of the line that crossed the limit.
        offset: u64,
        /// The dropped block's own `id`, when its `id` line came before the limit was crossed. It
        /// is never committed ([`Decoder::last_event_id`] does not move to it).
        id: Option<Bytes>,
    },
    /// An `id`, `event` or `retry` value was longer than [`DecoderConfig::max_field`].
    FieldTooLong {
        /// The limit, in bytes.
        limit: usize,
        /// Stream offset of the start of the line.
        offset: u64,
        /// The dropped block's own `id`, when its `id` line came before the limit was crossed. It
        /// is never committed ([`Decoder::last_event_id`] does not move to it).
        id: Option<Bytes>,
    },
    /// An open block's wire bytes (every line and line end since the last blank line) grew beyond
    /// [`DecoderConfig::max_block`].
    BlockTooLarge {
        /// The limit, in bytes.
        limit: usize,
        /// Stream offset of the start of the line that crossed the limit.
        offset: u64,
        /// The dropped block's own `id`, when its `id` line came before the limit was crossed. It
        /// is never committed ([`Decoder::last_event_id`] does not move to it).
        id: Option<Bytes>,
    },
}

impl DecodeError {
    /// Every [`DecodeError::as_str`] word.
    pub const WORDS: [&'static str; 4] = [
        "line-too-long",
        "event-too-large",
        "field-too-long",
        "block-too-large",
    ];

    /// A stable word for the limit: `line-too-long`, `event-too-large`, `field-too-long`,
    /// `block-too-large`.
    pub const fn as_str(&self) -> &'static str {
        match self {
            DecodeError::LineTooLong { .. } => "line-too-long",
            DecodeError::EventTooLarge { .. } => "event-too-large",
            DecodeError::FieldTooLong { .. } => "field-too-long",
            DecodeError::BlockTooLarge { .. } => "block-too-large",
        }
    }

    #[cold]
    fn line_too_long(limit: usize, offset: u64) -> Self {
        DecodeError::LineTooLong {
            limit,
            offset,
            id: None,
        }
    }

    #[cold]
    fn event_too_large(limit: usize, offset: u64) -> Self {
        DecodeError::EventTooLarge {
            limit,
            offset,
            id: None,
        }
    }

    #[cold]
    fn field_too_long(limit: usize, offset: u64) -> Self {
        DecodeError::FieldTooLong {
            limit,
            offset,
            id: None,
        }
    }

    #[cold]
    fn block_too_large(limit: usize, offset: u64) -> Self {
        DecodeError::BlockTooLarge {
            limit,
            offset,
            id: None,
        }
    }

    /// The dropped block's own `id`, when its `id` line came before the limit was crossed.
    pub fn id(&self) -> Option<&Bytes> {
        match self {
            DecodeError::LineTooLong { id, .. }
            | DecodeError::EventTooLarge { id, .. }
            | DecodeError::FieldTooLong { id, .. }
            | DecodeError::BlockTooLarge { id, .. } => id.as_ref(),
        }
    }

    #[cold]
    fn with_id(mut self, own: Option<Bytes>) -> Self {
        match &mut self {
            DecodeError::LineTooLong { id, .. }
            | DecodeError::EventTooLarge { id, .. }
            | DecodeError::FieldTooLong { id, .. }
            | DecodeError::BlockTooLarge { id, .. } => *id = own,
        }
        self
    }

    /// Stream offset of the start of the offending line.
    pub fn offset(&self) -> u64 {
        match *self {
            DecodeError::LineTooLong { offset, .. }
            | DecodeError::EventTooLarge { offset, .. }
            | DecodeError::FieldTooLong { offset, .. }
            | DecodeError::BlockTooLarge { offset, .. } => offset,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::LineTooLong { limit, offset, .. } => write!(
                f,
                "SSE line starting at byte {offset} is longer than {limit} bytes"
            ),
            DecodeError::EventTooLarge { limit, offset, .. } => write!(
                f,
                "SSE event data exceeds {limit} bytes (line starting at byte {offset})"
            ),
            DecodeError::FieldTooLong { limit, offset, .. } => write!(
                f,
                "SSE id/event/retry value on the line starting at byte {offset} is longer than {limit} bytes"
            ),
            DecodeError::BlockTooLarge { limit, offset, .. } => write!(
                f,
                "SSE event block exceeds {limit} bytes on the wire (line starting at byte {offset})"
            ),
        }?;
        match self.id() {
            Some(id) => write!(
                f,
                "; event {:?} dropped, skipping to the next blank line",
                String::from_utf8_lossy(id)
            ),
            None => f.write_str("; event dropped, skipping to the next blank line"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Where the scanner stands inside the current line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Connection start: this many bytes of a leading BOM matched so far.
    Bom(u8),
    /// At the first byte of a line.
    LineStart,
    /// Reading a field name (`name[..name_len]` so far), no colon yet.
    Name,
    /// Just after the colon: one space, if it is next, is dropped.
    Space(Field),
    /// In a known field's value.
    Value(Field),
    /// In a comment, an unknown field, or a line being discarded: scanned, never held.
    Skip,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Data,
    Event,
    Id,
    Retry,
}

/// An `id` value: `cur[start..end]` while the decoder is still in that chunk, or its own [`Bytes`].
///
/// The range form exists because the chunk already holds a refcount: an id that is committed and
/// replaced inside one chunk (the common case: one id per small event) is never sliced for the
/// decoder's own bookkeeping, only once for the event that carries it.
#[derive(Clone, Debug)]
enum Id {
    Cur { start: usize, end: usize },
    Held(Bytes),
}

impl Id {
    /// An `event` field's value at `start` of the chunk being scanned: `None` when empty (the
    /// default type), the static `message` for the type every MCP server sends (no refcount per
    /// event, nothing to copy when the chunk is left), else the range.
    #[inline]
    fn event_type(value: &[u8], start: usize) -> Option<Id> {
        match value {
            [] => None,
            b"message" => Some(Id::Held(MESSAGE)),
            _ => Some(Id::Cur {
                start,
                end: start + value.len(),
            }),
        }
    }

    /// The value, moved out.
    #[inline]
    fn into_bytes(self, cur: &Bytes) -> Bytes {
        match self {
            Id::Cur { start, end } => cur.slice(start..end),
            Id::Held(b) => b,
        }
    }

    #[inline]
    fn get(&self, cur: &Bytes) -> Bytes {
        match self {
            Id::Cur { start, end } => cur.slice(*start..*end),
            Id::Held(b) => b.clone(),
        }
    }

    /// Makes the value independent of the chunk `cur`, which is about to be left: a copy (the
    /// value is at most [`DecoderConfig::max_field`] bytes), so that it pins no chunk.
    #[inline]
    fn detach(&mut self, cur: &Bytes) {
        if let Id::Cur { start, end } = *self {
            *self = Id::Held(Bytes::copy_from_slice(&cur[start..end]));
        }
    }
}

/// Where [`Decoder::scan`] stopped before the end of the chunk.
enum Stop {
    /// A blank line dispatched the open block: [`Decoder::take_event`] builds the event.
    Event,
    Error(DecodeError),
}

/// Incremental, zero-copy SSE decoder (WHATWG "interpreting an event stream").
///
/// ```
/// use bytes::Bytes;
/// use ssegate::sse::Decoder;
///
/// let mut d = Decoder::new();
/// d.feed(Bytes::from_static(b"id: 7\ndata: {\"a\""));
/// assert!(d.next_event().is_none()); // the event is not complete yet
/// d.feed(Bytes::from_static(b":1}\n\n"));
/// let ev = d.next_event().unwrap().unwrap();
/// assert!(ev.data.eq_bytes(br#"{"a":1}"#));
/// assert_eq!(&ev.last_event_id[..], b"7");
/// assert!(d.finish().is_none()); // the input ended at an event boundary
/// ```
#[derive(Debug)]
pub struct Decoder {
    config: DecoderConfig,
    /// Chunks fed but not reached yet, in order: `next` (when set) before `queue`. A chunk goes into
    /// `next` only when nothing else waits; most callers feed one chunk and then drain the events,
    /// so their chunks skip the queue's ring arithmetic.
    next: Option<Bytes>,
    queue: VecDeque<Bytes>,
    /// The chunk being scanned, and where.
    cur: Bytes,
    pos: usize,
    /// Stream offset of `cur[0]`.
    chunk_base: u64,
    /// The last line ended with a CR at the end of a chunk: a LF starting the next one belongs to it.
    pending_cr: bool,
    /// Where the first CR or LF at or after `pos` is (`cur.len()` when none), when a scan already
    /// found out: the next `Value` or `Skip` step uses it instead of scanning again.
    eol_known: Option<usize>,
    state: State,
    name: [u8; NAME_MAX],
    name_len: u8,
    /// Stream offset of the current line's first byte.
    line_start: u64,
    /// A block (non-blank lines since the last blank line) is open, starting at `block_start`.
    open: bool,
    block_start: u64,
    /// `block_start + max_block`: the first stream position past the block's limit.
    block_at: u64,
    /// A limit was hit: skip lines up to the next blank line.
    discard: bool,
    /// Counts the blocks opened: [`OpenData::serial`].
    block_serial: u64,
    // The open block.
    /// Finished segments: slices of at least `copy_below` bytes, static LF joins, closed runs of
    /// `small`.
    data: Data,
    /// The open run of small pieces and joins, copied (closed into `data` before the next slice).
    small: Vec<u8>,
    /// The last thing appended to the data was a slice: a join then is the static LF segment
    /// (otherwise it goes into `small`, so that joins alone never add segments).
    after_big: bool,
    has_data: bool,
    /// The last data segment, still a range of `cur`: slicing it is put off until another segment
    /// follows, the chunk is left, or the event is built (then straight into the event).
    tail: Range<usize>,
    event_type: Option<Id>,
    own_id: Option<Id>,
    /// The `own_id` of a block just dropped over a limit, until the error carries it out.
    dropped_id: Option<Id>,
    /// Whether the block being dispatched had its own `id` (set by `blank_line`).
    has_own_id: bool,
    block_retry: Option<u64>,
    /// An `id` / `event` value that spans chunks, copied (at most `max_field` bytes).
    field: Vec<u8>,
    /// Bytes of the current `id` / `event` / `retry` value so far.
    field_len: usize,
    retry_value: u64,
    retry_valid: bool,
    // Persists across connections.
    /// The committed last event id. While it lies in `cur` it is a range, so that committing an id
    /// costs no refcount operation; it is sliced out when the decoder leaves the chunk.
    last_id: Id,
    /// `last_id` sliced out for [`Decoder::last_event_id`], which only has `&self`.
    last_id_cache: OnceLock<Bytes>,
    retry: Option<u64>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    /// A decoder with the default [`DecoderConfig`].
    pub fn new() -> Decoder {
        DecoderConfig::default().build()
    }

    /// Queues a chunk of the stream (any size; empty chunks are fine). Nothing is scanned until
    /// [`Decoder::next_event`] is called.
    pub fn feed(&mut self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        if self.next.is_none() && self.queue.is_empty() {
            self.next = Some(chunk);
        } else {
            self.queue.push_back(chunk);
        }
    }

    /// The next dispatched event, a limit error, or `None` when every queued byte is consumed and
    /// more input is needed.
    ///
    /// After an error the decoder has already resynchronised: keep calling.
    #[inline]
    pub fn next_event(&mut self) -> Option<Result<Event, DecodeError>> {
        loop {
            if self.pos >= self.cur.len() {
                let next = match self.next.take() {
                    Some(next) => next,
                    None => self.queue.pop_front()?,
                };
                self.leave_chunk();
                self.chunk_base += self.cur.len() as u64;
                self.pos = 0;
                self.eol_known = None;
                if self.state == State::Value(Field::Data) {
                    // The chunk starts inside a data line (never after a CR: that ends the line).
                    match self.absorb(next) {
                        Ok(()) => {
                            // Nothing is left to scan; `chunk_base` is past the absorbed chunk.
                            if !self.cur.is_empty() {
                                self.cur = Bytes::new();
                            }
                        }
                        Err((next, eol)) => {
                            self.cur = next;
                            self.eol_known = Some(eol);
                        }
                    }
                    continue;
                }
                self.cur = next;
                if self.pending_cr {
                    self.pending_cr = false;
                    if self.cur[0] == b'\n' {
                        self.pos = 1;
                        // The LF of a CRLF that ended a block line is one more wire byte of it.
                        if self.open
                            && !self.discard
                            && let Err(e) = self.check_block_end()
                        {
                            return Some(Err(self.carry_dropped_id(e)));
                        }
                    }
                }
                continue;
            }
            // Taking the chunk out lets the scanner borrow it while it updates `self`.
            let cur = std::mem::take(&mut self.cur);
            let r = self.scan(&cur);
            self.cur = cur;
            // The event is built here, in the caller's slot, rather than moved out of `scan`.
            match r {
                None => {}
                Some(Stop::Event) => return Some(Ok(self.take_event())),
                Some(Stop::Error(e)) => return Some(Err(self.carry_dropped_id(e))),
            }
        }
    }

    /// The error of a block just dropped, with the block's own id (a range of `cur` or held).
    #[cold]
    fn carry_dropped_id(&mut self, e: DecodeError) -> DecodeError {
        let id = self.dropped_id.take().map(|id| id.into_bytes(&self.cur));
        e.with_id(id)
    }

    /// Copies out the ids and the event type that are still ranges of `cur`, and moves the data
    /// tail into the rope: the decoder is about to drop `cur`, and keeps nothing that pins it but
    /// data slices of at least `copy_below` bytes.
    #[inline]
    fn leave_chunk(&mut self) {
        if self.cur.is_empty() {
            // Nothing can refer to an empty chunk (a chunk absorbed whole was never `cur`).
            return;
        }
        self.last_id_cache = OnceLock::new();
        self.last_id.detach(&self.cur);
        if let Some(id) = &mut self.own_id {
            id.detach(&self.cur);
        }
        if let Some(t) = &mut self.event_type {
            t.detach(&self.cur);
        }
        if !self.tail.is_empty() {
            let cur = std::mem::take(&mut self.cur);
            self.flush_tail(&cur);
            self.cur = cur;
        }
    }

    /// The open block's data, `tail` included, leaving an empty rope.
    #[inline]
    fn take_data(&mut self) -> Data {
        let tail = std::mem::replace(&mut self.tail, 0..0);
        if self.data.is_empty() && self.small.is_empty() {
            // One segment (the common case): built in place, the rope in `self` untouched.
            return if tail.is_empty() {
                Data::new()
            } else {
                Data::from(self.cur.slice(tail))
            };
        }
        if !tail.is_empty() {
            // The last piece lies in the chunk being scanned, which is held anyway: slicing it
            // pins nothing more, unless it can join an open run of copies.
            if !self.small.is_empty() && tail.len() < self.config.copy_below {
                self.small.extend_from_slice(&self.cur[tail]);
            } else {
                self.close_small();
                self.data.push_segment(self.cur.slice(tail));
            }
        }
        self.close_small();
        self.after_big = false;
        std::mem::take(&mut self.data)
    }

    /// Moves `tail` into the rope (see [`Decoder::push_piece`]).
    #[inline]
    fn flush_tail(&mut self, cur: &Bytes) {
        if !self.tail.is_empty() {
            let tail = std::mem::replace(&mut self.tail, 0..0);
            self.push_piece(cur, tail);
        }
    }

    /// Appends the data piece `cur[piece]` to the rope: a slice when it is at least `copy_below`
    /// bytes and at least as long as the part of `cur` before the block (so that a slice never
    /// pins more bytes outside the block than it holds), a copy into the open run otherwise.
    #[inline]
    fn push_piece(&mut self, cur: &Bytes, piece: Range<usize>) {
        let n = piece.len();
        let before_block = self.block_start.saturating_sub(self.chunk_base);
        if n < self.config.copy_below || (n as u64) < before_block {
            self.small.extend_from_slice(&cur[piece]);
            self.after_big = false;
        } else {
            self.close_small();
            self.data.push_segment(cur.slice(piece));
            self.after_big = true;
        }
    }

    /// The LF that joins two `data` lines: the static segment right after a slice, a byte of the
    /// open run otherwise.
    #[inline]
    fn push_join(&mut self) {
        if self.after_big {
            self.data.push_segment(LF);
            self.after_big = false;
        } else {
            self.small.push(b'\n');
        }
    }

    /// Closes the open run of copies into one owned segment.
    #[inline]
    fn close_small(&mut self) {
        if self.small.is_empty() {
            return;
        }
        // A short run (a small event cut into tiny chunks) is copied out and its buffer kept for
        // the next run: one allocation per run instead of one per growth step of a new buffer,
        // plus the one that turns a buffer with spare room into `Bytes`. A long run is handed
        // over as it is, without a copy, and the decoder keeps at most about `KEEP_SMALL` bytes.
        let segment = if self.small.len() <= KEEP_SMALL {
            let segment = Bytes::copy_from_slice(&self.small);
            self.small.clear();
            segment
        } else {
            Bytes::from(std::mem::take(&mut self.small))
        };
        self.data.push_segment(segment);
    }

    /// The data of the open block as far as it has been scanned, for a reader that works on the data
    /// as it arrives instead of after dispatch (`ResumableStream` gates and hashes ahead).
    pub(crate) fn open_data(&self) -> OpenData<'_> {
        OpenData {
            serial: self.block_serial,
            rope: &self.data,
            small: &self.small,
            tail: &self.cur[self.tail.clone()],
        }
    }

    /// Data bytes of the open block.
    #[inline]
    fn data_len(&self) -> usize {
        self.data.len() + self.small.len() + self.tail.len()
    }

    /// The dispatched event, from the block state [`Decoder::blank_line`] left.
    #[inline]
    fn take_event(&mut self) -> Event {
        Event {
            event: self.event_type.take().map(|t| t.into_bytes(&self.cur)),
            data: self.take_data(),
            last_event_id: self.last_id.get(&self.cur),
            has_own_id: std::mem::take(&mut self.has_own_id),
            retry: self.block_retry.take(),
        }
    }

    /// Ends this connection's input and returns the block still open, if any (it is never
    /// dispatched).
    ///
    /// Call [`Decoder::next_event`] until it returns `None` first: input still queued is dropped
    /// unscanned. The per-connection state (BOM, pending CR, open block, [`Decoder::offset`]) is
    /// reset, while [`Decoder::last_event_id`] and [`Decoder::retry`] are kept, as WHATWG keeps them
    /// across reconnections: the same decoder serves the next connection.
    pub fn finish(&mut self) -> Option<PartialEvent> {
        let partial = match self.state {
            State::Bom(m) if m > 0 => Some(PartialEvent {
                bytes: u64::from(m),
                data_len: 0,
                id: None,
            }),
            _ if self.open => Some(PartialEvent {
                bytes: self.offset() - self.block_start,
                data_len: self.data_len() as u64,
                id: self.own_id.as_ref().map(|id| id.get(&self.cur)),
            }),
            _ => None,
        };
        self.leave_chunk();
        self.next = None;
        self.queue.clear();
        self.cur = Bytes::new();
        self.pos = 0;
        self.chunk_base = 0;
        self.pending_cr = false;
        self.eol_known = None;
        self.state = State::Bom(0);
        self.open = false;
        self.discard = false;
        self.reset_block();
        self.dropped_id = None;
        partial
    }

    /// The committed last event id: set by the `id` field of a block that ended with a blank line.
    pub fn last_event_id(&self) -> &Bytes {
        match &self.last_id {
            Id::Held(b) => b,
            Id::Cur { start, end } => self
                .last_id_cache
                .get_or_init(|| self.cur.slice(*start..*end)),
        }
    }

    /// The reconnection time, in milliseconds, from the last valid `retry` field.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// Bytes of this connection's stream consumed so far.
    pub fn offset(&self) -> u64 {
        self.chunk_base + self.pos as u64
    }

    /// Bytes the decoder holds for the open block (data, field values, name carry), not counting
    /// chunks queued by [`Decoder::feed`]. Never more than the limits allow. This is the decoder's
    /// own count, for tests (a test hook): the memory bound is tested with a counting allocator
    /// (`tests/sse_memory.rs`), which this counter cannot replace.
    #[cfg(feature = "__testing")]
    #[doc(hidden)]
    pub fn held_bytes(&self) -> usize {
        self.data_len() + self.field_len + usize::from(self.name_len)
    }

    fn reset_block(&mut self) {
        self.data = Data::new();
        self.small = Vec::new();
        self.after_big = false;
        self.tail = 0..0;
        self.has_data = false;
        self.event_type = None;
        self.own_id = None;
        self.block_retry = None;
        self.field.clear();
        self.field_len = 0;
        self.name_len = 0;
    }

    /// Scans `cur` from `self.pos`; returns at the first event or error, or at the chunk's end.
    #[inline]
    fn scan(&mut self, cur: &Bytes) -> Option<Stop> {
        let buf: &[u8] = cur;
        let len = buf.len();
        while self.pos < len {
            match self.state {
                State::LineStart => {
                    let b = buf[self.pos];
                    if b == b'\n' || b == b'\r' {
                        self.line_end(buf);
                        if self.blank_line() {
                            return Some(Stop::Event);
                        }
                        continue;
                    }
                    let at = self.offset();
                    if !self.open {
                        self.open_block(at);
                    }
                    self.line_start = at;
                    if self.discard {
                        self.state = State::Skip;
                        continue;
                    }
                    // Fast path: the whole line is in this chunk. Otherwise the rest of the chunk
                    // is known to hold no line end, and the states below do not scan it again.
                    let start = self.pos;
                    match crate::arch::find_line_end(&buf[start..]) {
                        Some(n) => {
                            let r = self.whole_line(cur, start, start + n);
                            self.pos = start + n;
                            self.line_end(buf);
                            if let Err(e) = r {
                                self.enter_discard();
                                self.state = State::LineStart;
                                return Some(Stop::Error(e));
                            }
                            if let Err(e) = self.check_block_end() {
                                return Some(Stop::Error(e));
                            }
                        }
                        None => {
                            self.eol_known = Some(len);
                            if b == b':' {
                                self.state = State::Skip;
                            } else {
                                self.name_len = 0;
                                self.state = State::Name;
                            }
                        }
                    }
                }
                State::Name => {
                    if let Err(e) = self.scan_name(cur) {
                        return Some(Stop::Error(e));
                    }
                }
                State::Space(field) => {
                    if buf[self.pos] == b' ' {
                        self.pos += 1;
                    }
                    self.state = State::Value(field);
                }
                State::Value(field) => {
                    let start = self.pos;
                    let found = self.find_line_end(buf, start);
                    let end = found.unwrap_or(len);
                    let r = self.value_piece(field, cur, start, end, found.is_some());
                    self.pos = end;
                    if let Some(stop) = self.piece_end(buf, found.is_some(), r) {
                        return Some(stop);
                    }
                }
                State::Skip => {
                    let start = self.pos;
                    let found = self.find_line_end(buf, start);
                    let end = found.unwrap_or(len);
                    self.pos = end;
                    if self.discard {
                        if found.is_some() {
                            self.line_end(buf);
                        }
                        continue;
                    }
                    let r = self.line_limit(self.chunk_base + end as u64);
                    if let Some(stop) = self.piece_end(buf, found.is_some(), r) {
                        return Some(stop);
                    }
                }
                State::Bom(m) => {
                    if buf[self.pos] == BOM[usize::from(m)] {
                        self.pos += 1;
                        self.state = if m == 2 {
                            State::LineStart
                        } else {
                            State::Bom(m + 1)
                        };
                    } else if m == 0 {
                        self.state = State::LineStart;
                    } else {
                        // A BOM prefix that is not a BOM starts a line whose name is not ASCII:
                        // an unknown field.
                        self.open_block(0);
                        self.line_start = 0;
                        self.state = State::Skip;
                    }
                }
            }
        }
        None
    }

    /// The first CR or LF in `buf[start..]`, scanned unless already known.
    #[inline]
    fn find_line_end(&mut self, buf: &[u8], start: usize) -> Option<usize> {
        match self.eol_known.take() {
            Some(p) => (p < buf.len()).then_some(p),
            None => crate::arch::find_line_end(&buf[start..]).map(|i| start + i),
        }
    }

    /// A chunk that starts inside a data line, before it becomes the chunk being scanned: when it
    /// holds no line end and breaks no limit, the whole chunk is data and goes into the rope (moved,
    /// or copied when small) without being scanned again. Otherwise it is handed back with where its
    /// first line end is (its length when it has none), for the scanner.
    #[inline]
    fn absorb(&mut self, chunk: Bytes) -> Result<(), (Bytes, usize)> {
        debug_assert!(!self.pending_cr && self.state == State::Value(Field::Data));
        let len = chunk.len();
        // A small chunk (a transport's tiny reads) is tested for a line end inline, without the
        // call into memchr, which costs more than the search itself at this size.
        let eol = if len <= SHORT_CHUNK && !crate::arch::has_line_end(&chunk) {
            None
        } else {
            memchr::memchr2(b'\r', b'\n', &chunk)
        };
        if let Some(p) = eol {
            return Err((chunk, p));
        }
        let end = self.chunk_base + len as u64;
        if end - self.line_start > self.config.max_line as u64
            || end > self.block_at
            || self.data_len() + len > self.config.max_event
        {
            // Let the scanner report the error.
            return Err((chunk, len));
        }
        self.chunk_base = end;
        if len < self.config.copy_below {
            self.small.extend_from_slice(&chunk);
            self.after_big = false;
        } else {
            self.close_small();
            self.data.push_segment(chunk);
            self.after_big = true;
        }
        Ok(())
    }

    /// Opens a block whose first line starts at stream offset `at`.
    #[inline]
    fn open_block(&mut self, at: u64) {
        self.block_serial = self.block_serial.wrapping_add(1);
        self.open = true;
        self.block_start = at;
        self.block_at = at.saturating_add(self.config.max_block as u64);
    }

    /// After the line end of a block line (not blank, not discarded): the block limit, for the
    /// line end's bytes. On error the block is discarded from the next line on.
    #[inline]
    fn check_block_end(&mut self) -> Result<(), DecodeError> {
        if self.offset() > self.block_at {
            let e = DecodeError::block_too_large(self.config.max_block, self.line_start);
            self.enter_discard();
            self.state = State::LineStart;
            return Err(e);
        }
        Ok(())
    }

    /// The limit a piece of the current line breaks first: `n` value bytes of `field` starting at
    /// stream position `value_at`, the line reaching `piece_end`. A piece can break the line limit
    /// and its value's limit at once; the one crossed at the earlier stream position is reported (a
    /// tie goes to the line), so the answer does not depend on where the chunks were cut.
    #[inline]
    fn piece_limit(
        &self,
        field: Field,
        value_at: u64,
        n: usize,
        piece_end: u64,
    ) -> Option<DecodeError> {
        let line_at = self.line_start.saturating_add(self.config.max_line as u64);
        let line_over = piece_end > line_at;
        let block_over = piece_end > self.block_at;
        let (held, limit) = match field {
            Field::Data => (self.data_len(), self.config.max_event),
            Field::Event | Field::Id | Field::Retry => (self.field_len, self.config.max_field),
        };
        let value_over = held.saturating_add(n) > limit;
        if !line_over && !block_over && !value_over {
            return None;
        }
        Some(self.limit_error(
            field,
            line_over.then_some(line_at),
            block_over.then_some(self.block_at),
            value_over.then(|| value_at.saturating_add(limit.saturating_sub(held) as u64)),
        ))
    }

    /// The error for the limits crossed on the current line, each given by the stream position
    /// of its first byte past the limit: the earliest is reported (ties: line, block, value), so
    /// that the answer does not depend on where the chunks were cut.
    #[cold]
    fn limit_error(
        &self,
        field: Field,
        line_at: Option<u64>,
        block_at: Option<u64>,
        value_at: Option<u64>,
    ) -> DecodeError {
        let mut first = (u64::MAX, 3);
        for (rank, at) in [line_at, block_at, value_at].into_iter().enumerate() {
            if let Some(at) = at
                && at < first.0
            {
                first = (at, rank);
            }
        }
        match (first.1, field) {
            (0, _) => DecodeError::line_too_long(self.config.max_line, self.line_start),
            (1, _) => DecodeError::block_too_large(self.config.max_block, self.line_start),
            (_, Field::Data) => {
                DecodeError::event_too_large(self.config.max_event, self.line_start)
            }
            _ => DecodeError::field_too_long(self.config.max_field, self.line_start),
        }
    }

    /// The line and block limits, for a line (or the part of it up to `line_end`) whose value is
    /// not held: comments and unknown fields.
    #[inline]
    fn line_limit(&self, line_end: u64) -> Result<(), DecodeError> {
        let line_at = self.line_start.saturating_add(self.config.max_line as u64);
        let line_over = line_end > line_at;
        let block_over = line_end > self.block_at;
        if line_over || block_over {
            return Err(self.limit_error(
                Field::Data,
                line_over.then_some(line_at),
                block_over.then_some(self.block_at),
                None,
            ));
        }
        Ok(())
    }

    /// A line that lies whole in `cur[start..eol]` (`eol` at its CR or LF), not blank, not discarded.
    #[inline]
    fn whole_line(&mut self, cur: &Bytes, start: usize, eol: usize) -> Result<(), DecodeError> {
        let line = &cur[start..eol];
        let line_end = self.chunk_base + eol as u64;
        // The three lines every MCP event has, recognised by their prefix: a data line inside one
        // chunk becomes the `tail` range (sliced once, when the event is built); an id line the
        // `own_id` range (no slicing at all until dispatch); `event: message` the static type.
        // Three straight-line blocks: one shared block with a dispatch on the field measured ~3 ns
        // per small event slower.
        if line.starts_with(b"data:") {
            let value_start = start + 5 + usize::from(line.get(5) == Some(&b' '));
            self.begin_field(cur, Field::Data)?;
            let n = eol - value_start;
            let value_at = self.chunk_base + value_start as u64;
            if let Some(e) = self.piece_limit(Field::Data, value_at, n, line_end) {
                return Err(e);
            }
            if n > 0 {
                self.flush_tail(cur);
                self.tail = value_start..eol;
            }
            return Ok(());
        }
        if line.starts_with(b"id:") {
            // No `field` pieces can be pending at a line start, so `begin_field` has nothing to do.
            let value_start = start + 3 + usize::from(line.get(3) == Some(&b' '));
            let value = &cur[value_start..eol];
            let value_at = self.chunk_base + value_start as u64;
            if let Some(e) = self.piece_limit(Field::Id, value_at, value.len(), line_end) {
                return Err(e);
            }
            if Self::valid_id(value) {
                self.own_id = Some(if value.is_empty() {
                    Id::Held(Bytes::new())
                } else {
                    Id::Cur {
                        start: value_start,
                        end: eol,
                    }
                });
            }
            return Ok(());
        }
        if line.starts_with(b"event:") {
            let value_start = start + 6 + usize::from(line.get(6) == Some(&b' '));
            let value_at = self.chunk_base + value_start as u64;
            if let Some(e) = self.piece_limit(Field::Event, value_at, eol - value_start, line_end) {
                return Err(e);
            }
            self.event_type = Id::event_type(&cur[value_start..eol], value_start);
            return Ok(());
        }
        // Known names are at most NAME_MAX bytes: only the first NAME_MAX + 1 can hold the colon.
        let head = &line[..line.len().min(NAME_MAX + 1)];
        let (name, value_start) = match head.iter().position(|&c| c == b':') {
            Some(colon) => (&line[..colon], start + colon + 1),
            None if line.len() <= NAME_MAX => (line, eol),
            None => return self.line_limit(line_end),
        };
        let field = match name {
            b"data" => Field::Data,
            b"id" => Field::Id,
            b"event" => Field::Event,
            b"retry" => Field::Retry,
            _ => return self.line_limit(line_end),
        };
        let value_start = if value_start < eol && cur[value_start] == b' ' {
            value_start + 1
        } else {
            value_start
        };
        self.begin_field(cur, field)?;
        self.value_piece(field, cur, value_start, eol, true)
    }

    /// Reads field-name bytes (at most `NAME_MAX + 1`, carried across chunks).
    fn scan_name(&mut self, cur: &Bytes) -> Result<(), DecodeError> {
        let buf: &[u8] = cur;
        while self.pos < buf.len() {
            let c = buf[self.pos];
            if c == b':' || c == b'\n' || c == b'\r' {
                let field = match &self.name[..usize::from(self.name_len)] {
                    b"data" => Some(Field::Data),
                    b"event" => Some(Field::Event),
                    b"id" => Some(Field::Id),
                    b"retry" => Some(Field::Retry),
                    _ => None,
                };
                self.name_len = 0;
                let Some(field) = field else {
                    self.state = State::Skip;
                    return Ok(());
                };
                if c == b':' {
                    self.pos += 1;
                    self.state = State::Space(field);
                } else {
                    // No colon: the value is empty; `Value` finds the line end right here.
                    self.state = State::Value(field);
                }
                return self.begin_field(cur, field);
            }
            if usize::from(self.name_len) == NAME_MAX {
                self.name_len = 0;
                self.state = State::Skip;
                return Ok(());
            }
            self.name[usize::from(self.name_len)] = c;
            self.name_len += 1;
            self.pos += 1;
        }
        Ok(())
    }

    #[inline]
    fn begin_field(&mut self, cur: &Bytes, field: Field) -> Result<(), DecodeError> {
        match field {
            Field::Data => {
                if self.has_data {
                    if self.data_len() + 1 > self.config.max_event {
                        // The join sits at the line's start: only an empty line limit, or a block
                        // limit crossed by the line's first byte, comes first.
                        let at = self.line_start;
                        let e = self.limit_error(
                            Field::Data,
                            (self.config.max_line == 0).then_some(at),
                            (self.block_at <= at).then_some(self.block_at),
                            Some(at),
                        );
                        self.enter_discard();
                        self.state = State::Skip;
                        return Err(e);
                    }
                    self.flush_tail(cur);
                    self.push_join();
                }
                self.has_data = true;
            }
            Field::Event | Field::Id => {
                self.field.clear();
                self.field_len = 0;
            }
            Field::Retry => {
                self.field_len = 0;
                self.retry_value = 0;
                self.retry_valid = true;
            }
        }
        Ok(())
    }

    /// Takes `cur[start..end]` into the current field's value; `complete` when `end` is the line end.
    #[inline]
    fn value_piece(
        &mut self,
        field: Field,
        cur: &Bytes,
        start: usize,
        end: usize,
        complete: bool,
    ) -> Result<(), DecodeError> {
        let n = end - start;
        let value_at = self.chunk_base + start as u64;
        if let Some(e) = self.piece_limit(field, value_at, n, self.chunk_base + end as u64) {
            return Err(e);
        }
        match field {
            Field::Data => {
                if n > 0 {
                    self.flush_tail(cur);
                    self.tail = start..end;
                }
            }
            Field::Event | Field::Id => {
                if complete && self.field.is_empty() {
                    match field {
                        Field::Id => {
                            if Self::valid_id(&cur[start..end]) {
                                self.own_id = Some(if n == 0 {
                                    Id::Held(Bytes::new())
                                } else {
                                    Id::Cur { start, end }
                                });
                            }
                        }
                        _ => self.event_type = Id::event_type(&cur[start..end], start),
                    }
                } else {
                    if n > 0 {
                        self.field_len += n;
                        self.field.extend_from_slice(&cur[start..end]);
                    }
                    if complete {
                        let value = Bytes::copy_from_slice(&self.field);
                        self.field.clear();
                        self.field_len = 0;
                        match field {
                            Field::Id => {
                                if Self::valid_id(&value) {
                                    self.own_id = Some(Id::Held(value));
                                }
                            }
                            _ => {
                                self.event_type = match Id::event_type(&value, 0) {
                                    Some(Id::Cur { .. }) => Some(Id::Held(value)),
                                    other => other,
                                }
                            }
                        }
                    }
                }
            }
            Field::Retry => {
                self.field_len += n;
                for &c in &cur[start..end] {
                    if c.is_ascii_digit() {
                        self.retry_value = self
                            .retry_value
                            .saturating_mul(10)
                            .saturating_add(u64::from(c - b'0'));
                    } else {
                        self.retry_valid = false;
                    }
                }
                if complete {
                    if self.retry_valid && self.field_len > 0 {
                        self.block_retry = Some(self.retry_value);
                        self.retry = Some(self.retry_value);
                    }
                    self.field_len = 0;
                }
            }
        }
        Ok(())
    }

    /// Whether a complete `id` value is taken: WHATWG ignores an id that contains NUL.
    #[inline]
    fn valid_id(value: &[u8]) -> bool {
        // Ids are short: a plain loop beats a call into memchr.
        if value.len() < 64 {
            !value.contains(&0)
        } else {
            memchr::memchr(0, value).is_none()
        }
    }

    /// After a piece of a value, or of a skipped line, that ends at a line end (`at_line_end`) or
    /// at the end of the chunk, with `r` the piece's result: on an error the rest of the block is
    /// discarded (the line ended first when it did end), else a line end ends the line and checks
    /// the block's size.
    #[inline(always)]
    fn piece_end(
        &mut self,
        buf: &[u8],
        at_line_end: bool,
        r: Result<(), DecodeError>,
    ) -> Option<Stop> {
        if let Err(e) = r {
            self.enter_discard();
            if at_line_end {
                self.line_end(buf);
            }
            return Some(Stop::Error(e));
        }
        if at_line_end {
            self.line_end(buf);
            if let Err(e) = self.check_block_end() {
                return Some(Stop::Error(e));
            }
        }
        None
    }

    /// Consumes the CR, LF or CRLF at `self.pos`; a CR at the chunk's end leaves a LF starting the
    /// next chunk to be swallowed.
    #[inline]
    fn line_end(&mut self, buf: &[u8]) {
        let cr = buf[self.pos] == b'\r';
        self.pos += 1;
        if cr {
            if self.pos < buf.len() {
                if buf[self.pos] == b'\n' {
                    self.pos += 1;
                }
            } else {
                self.pending_cr = true;
            }
        }
        self.state = State::LineStart;
    }

    /// A blank line: commits the id; `true` when the block has data and is to be dispatched
    /// ([`Decoder::take_event`]).
    #[inline]
    fn blank_line(&mut self) -> bool {
        self.open = false;
        if self.discard {
            self.discard = false;
            self.reset_block();
            return false;
        }
        self.has_own_id = match self.own_id.take() {
            Some(id) => {
                self.last_id = id;
                if self.last_id_cache.get().is_some() {
                    self.last_id_cache = OnceLock::new();
                }
                true
            }
            None => false,
        };
        if !self.has_data {
            self.event_type = None;
            self.block_retry = None;
            return false;
        }
        self.has_data = false;
        true
    }

    /// After a limit error: drop the block, uncommitted id included (kept aside for the error to
    /// carry), and skip to the next blank line. Some paths call it twice for one error (the field's
    /// own check, then the line's): the second finds no id and keeps the first one's.
    #[cold]
    fn enter_discard(&mut self) {
        if let Some(id) = self.own_id.take() {
            self.dropped_id = Some(id);
        }
        self.reset_block();
        self.discard = true;
        self.state = State::Skip;
    }
}

/// The data bytes of the open block so far ([`Decoder::open_data`]): the rope's finished segments,
/// then the open run of copies, then the piece still in the chunk being scanned.
///
/// Within one block (one `serial`) these bytes are only ever appended to, and they are the first
/// bytes of the dispatched event's data: a reader may take them as they come and only the rest at
/// dispatch. A new block has a new `serial`; a dropped block (limit error, end of input) leaves an
/// empty one until the next opens.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpenData<'a> {
    /// Which block: changes whenever a block opens.
    pub(crate) serial: u64,
    rope: &'a Data,
    small: &'a [u8],
    tail: &'a [u8],
}

impl OpenData<'_> {
    /// Data bytes so far.
    pub(crate) fn len(&self) -> usize {
        self.rope.len() + self.small.len() + self.tail.len()
    }

    /// Hands `f` the bytes from offset `from` on, in order, in as few pieces as they are stored.
    /// The rope is searched from its end, where new bytes are: a reader that comes back after each
    /// chunk pays for the segments it has not read yet, not for the whole rope again.
    pub(crate) fn for_each_from(&self, from: usize, mut f: impl FnMut(&[u8])) {
        let segments = self.rope.segments();
        let rope_len = self.rope.len();
        if from < rope_len {
            let (mut first, mut start) = (segments.len(), rope_len);
            while start > from {
                first -= 1;
                start -= segments[first].len();
            }
            let pieces = segments[first..].iter().map(|b| &b[..]);
            super::event::for_each_from(pieces, from - start, &mut f);
        }
        super::event::for_each_from([self.small, self.tail], from.saturating_sub(rope_len), f);
    }
}
