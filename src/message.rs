//! A complete message and its parse: [`Message`] holds the bytes of one JSON-RPC message (the event's
//! data rope, zero-copy) and parses it on demand with `simd-json`, through a reusable [`Parser`].
//!
//! ```
//! use ssegate::message::{Message, Parser, RpcId, RpcKind};
//! use simd_json::prelude::*;
//!
//! let msg = Message::new(r#"{"jsonrpc":"2.0","id":7,"result":{"text":"hi"}}"#.into());
//! let peek = msg.jsonrpc_peek();
//! assert_eq!((peek.kind, peek.id), (RpcKind::Response, Some(RpcId::Number(7))));
//!
//! let mut parser = Parser::new();
//! let value = msg.parse_value(&mut parser).unwrap();
//! assert_eq!(value["result"]["text"].as_str(), Some("hi"));
//! ```
#![forbid(unsafe_code)]

use std::fmt;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use simd_json::{BorrowedValue, Buffers, Deserializer, INPUT_PADDING, Tape};

use crate::gate::TopKeys;
use crate::sse::Data;

/// One complete JSON-RPC message (or batch): the bytes of an event's data, as the decoder's rope of
/// `Bytes` slices. Nothing is copied until a parse or [`Message::to_bytes`] asks for contiguous bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    data: Data,
}

/// Why a message did not parse.
#[derive(Debug)]
#[non_exhaustive]
pub enum MessageError {
    /// The message has no bytes.
    Empty,
    /// simd-json rejected the text or could not map it onto the requested type.
    Json {
        /// Byte offset simd-json reported.
        offset: usize,
        /// simd-json's error.
        source: simd_json::Error,
    },
}

impl fmt::Display for MessageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MessageError::Empty => f.write_str("empty message"),
            MessageError::Json { offset, source } => {
                write!(f, "message does not parse at byte {offset}: {source}")
            }
        }
    }
}

impl std::error::Error for MessageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MessageError::Json { source, .. } => Some(source),
            MessageError::Empty => None,
        }
    }
}

impl MessageError {
    #[cold]
    fn json(source: simd_json::Error) -> MessageError {
        MessageError::Json {
            offset: source.index(),
            source,
        }
    }
}

/// Reusable parse state: simd-json's [`Buffers`], its tape, and one padded scratch buffer that receives the
/// message bytes (simd-json unescapes in place, so the bytes are copied exactly once, padding included).
pub struct Parser {
    buffers: Buffers,
    scratch: Vec<u8>,
    tape: Option<Tape<'static>>,
}

impl fmt::Debug for Parser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parser")
            .field("scratch_capacity", &self.scratch.capacity())
            .finish_non_exhaustive()
    }
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}

impl Parser {
    /// A parser with empty buffers (they grow to the largest message seen and are kept).
    pub fn new() -> Parser {
        Parser {
            buffers: Buffers::default(),
            scratch: Vec::new(),
            tape: Some(Tape::null()),
        }
    }

    /// Copies `data` into the padded scratch buffer and builds simd-json's tape over it; `f` gets the
    /// tape's deserializer. The tape allocation is kept for the next message.
    fn with_deserializer<'p, R>(
        &'p mut self,
        data: &Data,
        f: impl FnOnce(&mut Deserializer<'p>) -> Result<R, simd_json::Error>,
    ) -> Result<R, MessageError> {
        if data.is_empty() {
            return Err(MessageError::Empty);
        }
        let Parser {
            buffers,
            scratch,
            tape: kept,
        } = self;
        scratch.clear();
        scratch.reserve(data.len() + INPUT_PADDING);
        data.copy_to(scratch);
        let len = scratch.len();
        scratch.resize(len + INPUT_PADDING, b' ');
        let mut tape: Tape<'p> = kept.take().unwrap_or_else(Tape::null).reset();
        let filled = simd_json::fill_tape_padded(scratch, len, buffers, &mut tape);
        let mut de = Deserializer::from_tape(tape);
        let out = filled.and_then(|()| f(&mut de));
        *kept = Some(de.into_tape().reset());
        out.map_err(MessageError::json)
    }
}

impl Message {
    /// Wraps an event's data (which the gate judged `Complete`).
    pub fn new(data: Data) -> Message {
        Message { data }
    }

    /// The message bytes, as a rope of the input chunks.
    pub fn data(&self) -> &Data {
        &self.data
    }

    /// Gives the rope back.
    pub fn into_data(self) -> Data {
        self.data
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the message has no bytes.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The bytes as one contiguous `Bytes` (a refcount bump for a one-segment rope, one copy otherwise).
    #[must_use]
    pub fn to_bytes(&self) -> Bytes {
        self.data.contiguous()
    }

    /// A reader over the message's bytes in place ([`bytes::Buf`] and [`std::io::Read`]), for a parser
    /// that reads, such as `serde_json::from_reader`: no copy of the rope is made first.
    pub fn reader(&self) -> crate::sse::DataReader<'_> {
        self.data.reader()
    }

    /// Parses into a simd-json borrowed value whose strings borrow from `parser`'s scratch buffer.
    pub fn parse_value<'p>(
        &self,
        parser: &'p mut Parser,
    ) -> Result<BorrowedValue<'p>, MessageError> {
        parser.with_deserializer(&self.data, |de| serde::Deserialize::deserialize(de))
    }

    /// Parses into any owned serde type, reusing `parser`'s buffers.
    pub fn deserialize_with<T: DeserializeOwned>(
        &self,
        parser: &mut Parser,
    ) -> Result<T, MessageError> {
        parser.with_deserializer(&self.data, |de| T::deserialize(de))
    }

    /// Parses into any owned serde type with a fresh [`Parser`] (use [`Message::deserialize_with`] in loops).
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T, MessageError> {
        self.deserialize_with(&mut Parser::new())
    }

    /// The message with its top-level `id` value replaced by `id` (the new id's JSON text: `7`,
    /// `"req-7"`; it is not checked), sharing every other byte with this one: the rope is sliced
    /// around the old id and nothing is copied. For a proxy that answers under the id its own
    /// client asked with. Only the members before `id` are scanned (their values skipped, not
    /// parsed); `None` when the message is not an object with an `id` member.
    ///
    /// ```
    /// use ssegate::message::Message;
    /// use ssegate::sse::Data;
    ///
    /// let m = Message::new(Data::from(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#));
    /// let m = m.with_id(&br#""host-1""#[..]).unwrap();
    /// assert!(m.data().eq_bytes(br#"{"jsonrpc":"2.0","id":"host-1","result":{}}"#));
    /// ```
    #[must_use]
    pub fn with_id(&self, id: impl Into<Bytes>) -> Option<Message> {
        let (start, end) = id_span(&self.data)?;
        let mut data = Data::new();
        let mut id = Some(id.into());
        let mut at = 0;
        for seg in self.data.segments() {
            let (from, to) = (at, at + seg.len());
            at = to;
            if from < start {
                data.push_segment(seg.slice(..start.min(to) - from));
            }
            if to > end {
                // Every piece before the old id is in; the new id goes before the first after it.
                if let Some(id) = id.take() {
                    data.push_segment(id);
                }
                data.push_segment(seg.slice(end.max(from) - from..));
            }
        }
        if let Some(id) = id {
            data.push_segment(id);
        }
        Some(Message::new(data))
    }

    /// Reads only the top-level `id`, `method`, `result` and `error` keys, skipping nested values and
    /// string contents, without a parse. Meant for a message the gate judged `Complete`; on anything else
    /// it answers [`RpcKind::Other`] rather than fail.
    pub fn jsonrpc_peek(&self) -> RpcPeek {
        peek(&self.data).unwrap_or(RpcPeek::OTHER)
    }
}

/// [`Message::jsonrpc_peek`] of `data`, reading only the top-level keys at the offsets `keys` holds
/// (the gate's record, made while it judged the message `Complete`) when there is a complete record.
pub(crate) fn peek_recorded(data: &Data, keys: Option<&TopKeys>) -> RpcPeek {
    match keys.and_then(TopKeys::offsets) {
        Some(at) => peek_keys(data, at),
        None => peek(data),
    }
    .unwrap_or(RpcPeek::OTHER)
}

impl From<Data> for Message {
    fn from(data: Data) -> Self {
        Message::new(data)
    }
}

/// What kind of JSON-RPC message this is, from its top-level keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RpcKind {
    /// An object with `method` and `id`.
    Request,
    /// An object with `method` and no `id`.
    Notification,
    /// An object with `result` or `error`, and `id`.
    Response,
    /// A top-level array.
    Batch,
    /// Anything else.
    Other,
}

impl RpcKind {
    /// Every [`RpcKind::as_str`] word.
    pub const WORDS: [&'static str; 5] = ["request", "notification", "response", "batch", "other"];

    /// A stable word for the shape: `request`, `notification`, `response`, `batch`, `other`.
    pub const fn as_str(self) -> &'static str {
        match self {
            RpcKind::Request => "request",
            RpcKind::Notification => "notification",
            RpcKind::Response => "response",
            RpcKind::Batch => "batch",
            RpcKind::Other => "other",
        }
    }
}

/// A JSON-RPC id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RpcId {
    /// An integer id that fits `i64`.
    Number(i64),
    /// A string id, unescaped.
    String(Box<str>),
    /// `null` (error responses to unparseable requests).
    Null,
    /// Any other id value, as its JSON text (a fraction, a huge integer, ...).
    Raw(Box<str>),
}

impl std::fmt::Display for RpcId {
    /// The id as JSON-RPC would write it: `7`, `"abc"`, `null`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RpcId::Number(n) => write!(f, "{n}"),
            RpcId::String(s) => write_json_string(f, s),
            RpcId::Null => f.write_str("null"),
            RpcId::Raw(raw) => f.write_str(raw),
        }
    }
}

/// `s` as a JSON string: quoted, with `"`, `\\` and the control characters escaped as RFC 8259
/// says (the short forms where there is one, `\u00XX` otherwise); everything else as it is.
fn write_json_string(f: &mut std::fmt::Formatter<'_>, s: &str) -> std::fmt::Result {
    use std::fmt::Write;
    f.write_char('"')?;
    let mut plain = 0;
    for (i, c) in s.char_indices() {
        let short = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            '\u{8}' => "\\b",
            '\u{c}' => "\\f",
            c if c < ' ' => "",
            _ => continue,
        };
        f.write_str(&s[plain..i])?;
        if short.is_empty() {
            write!(f, "\\u{:04x}", c as u32)?;
        } else {
            f.write_str(short)?;
        }
        plain = i + c.len_utf8();
    }
    f.write_str(&s[plain..])?;
    f.write_char('"')
}

/// The result of [`Message::jsonrpc_peek`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RpcPeek {
    /// What the top-level keys say the message is.
    pub kind: RpcKind,
    /// The top-level `id`, when present.
    pub id: Option<RpcId>,
}

impl RpcPeek {
    const OTHER: RpcPeek = RpcPeek {
        kind: RpcKind::Other,
        id: None,
    };
}

/// Scratch for a key or an id while peeking: inline up to 32 bytes, so peeking a message with
/// short keys and ids allocates nothing.
type PeekBuf = smallvec::SmallVec<[u8; 32]>;

/// A byte cursor over the rope's segments.
struct Cursor<'a> {
    segs: &'a [Bytes],
    seg: usize,
    pos: usize,
    /// Message offset of `segs[seg][0]`.
    base: u64,
}

impl<'a> Cursor<'a> {
    fn new(data: &'a Data) -> Cursor<'a> {
        Cursor {
            segs: data.segments(),
            seg: 0,
            pos: 0,
            base: 0,
        }
    }

    /// Moves forward to message offset `at` (`None` past the end).
    fn seek(&mut self, at: u64) -> Option<()> {
        loop {
            let len = self.segs.get(self.seg)?.len() as u64;
            if at < self.base + len {
                self.pos = usize::try_from(at.checked_sub(self.base)?).ok()?;
                return Some(());
            }
            self.base += len;
            self.seg += 1;
        }
    }

    /// The message offset of the next byte.
    fn offset(&self) -> usize {
        usize::try_from(self.base).unwrap_or(usize::MAX) + self.pos
    }

    fn peek(&mut self) -> Option<u8> {
        while self.seg < self.segs.len() {
            if let Some(&b) = self.segs[self.seg].get(self.pos) {
                return Some(b);
            }
            self.base += self.segs[self.seg].len() as u64;
            self.seg += 1;
            self.pos = 0;
        }
        None
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.pos += 1;
        Some(b)
    }

    fn skip_ws(&mut self) -> Option<u8> {
        loop {
            match self.peek()? {
                b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                b => return Some(b),
            }
        }
    }

    /// After an opening quote: skips to just past the closing quote, jumping with memchr; with `out`,
    /// collects the raw (still escaped) contents.
    fn skip_string(&mut self, mut out: Option<&mut PeekBuf>) -> Option<()> {
        let mut escaped = false;
        loop {
            self.peek()?;
            let seg = &self.segs[self.seg][self.pos..];
            if escaped {
                if let Some(o) = out.as_deref_mut() {
                    o.push(seg[0]);
                }
                escaped = false;
                self.pos += 1;
                continue;
            }
            match find_quote_or_backslash(seg) {
                None => {
                    if let Some(o) = out.as_deref_mut() {
                        o.extend_from_slice(seg);
                    }
                    self.pos += seg.len();
                }
                Some(k) => {
                    if let Some(o) = out.as_deref_mut() {
                        o.extend_from_slice(&seg[..k + usize::from(seg[k] == b'\\')]);
                    }
                    self.pos += k + 1;
                    if seg[k] == b'"' {
                        return Some(());
                    }
                    escaped = true;
                }
            }
        }
    }

    /// Skips one value starting at the current (non-whitespace) byte; with `out`, collects the raw text of
    /// a scalar (strings without their quotes).
    fn skip_value(&mut self, out: Option<&mut PeekBuf>) -> Option<()> {
        match self.next()? {
            b'"' => self.skip_string(out),
            b'{' | b'[' => {
                let mut depth = 1usize;
                while depth > 0 {
                    match self.next()? {
                        b'"' => self.skip_string(None)?,
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => depth -= 1,
                        _ => {}
                    }
                }
                Some(())
            }
            first => {
                let mut out = out;
                if let Some(o) = out.as_deref_mut() {
                    o.push(first);
                }
                while let Some(b) = self.peek() {
                    if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    if let Some(o) = out.as_deref_mut() {
                        o.push(b);
                    }
                    self.pos += 1;
                }
                Some(())
            }
        }
    }
}

/// What the top-level members read so far say.
#[derive(Default)]
struct Members {
    method: bool,
    result: bool,
    id: Option<RpcId>,
}

/// Reads a key into `key`, unescaped (`"\u0069d"` is `"id"`), the cursor just past its opening
/// quote; leaves the cursor just past its closing quote.
fn read_key(c: &mut Cursor<'_>, key: &mut PeekBuf) -> Option<()> {
    key.clear();
    c.skip_string(Some(key))?;
    if key.contains(&b'\\') {
        let text = unescape(std::str::from_utf8(key).ok()?)?;
        key.clear();
        key.extend_from_slice(text.as_bytes());
    }
    Some(())
}

/// Where the top-level `id` value lies in `data` (start, end), reading the members before it.
fn id_span(data: &Data) -> Option<(usize, usize)> {
    let mut c = Cursor::new(data);
    if c.skip_ws()? != b'{' {
        return None;
    }
    c.pos += 1;
    let mut key = PeekBuf::new();
    loop {
        if c.skip_ws()? != b'"' {
            return None;
        }
        c.pos += 1;
        read_key(&mut c, &mut key)?;
        if c.skip_ws()? != b':' {
            return None;
        }
        c.pos += 1;
        c.skip_ws()?;
        let start = c.offset();
        c.skip_value(None)?;
        if key.as_slice() == b"id" {
            return Some((start, c.offset()));
        }
        if c.skip_ws()? != b',' {
            return None;
        }
        c.pos += 1;
    }
}

impl Members {
    /// Reads one member, the cursor just past its key's opening quote. With `skip`, leaves the cursor
    /// after the value; without, it may stop anywhere inside it (the caller jumps to the next key).
    fn read(&mut self, c: &mut Cursor<'_>, key: &mut PeekBuf, skip: bool) -> Option<()> {
        read_key(c, key)?;
        self.value(c, key, skip)
    }

    /// Reads the member whose (unescaped) key is `key`, the cursor just past the key's closing quote.
    fn value(&mut self, c: &mut Cursor<'_>, key: &[u8], skip: bool) -> Option<()> {
        if c.skip_ws()? != b':' {
            return None;
        }
        c.pos += 1;
        let first = c.skip_ws()?;
        match key {
            b"id" => {
                let mut raw = PeekBuf::new();
                c.skip_value(Some(&mut raw))?;
                self.id = Some(parse_id(first, &raw)?);
                return Some(());
            }
            b"method" => self.method = true,
            b"result" | b"error" => self.result = true,
            _ => {}
        }
        if skip {
            c.skip_value(None)?;
        }
        Some(())
    }

    fn peek(self) -> RpcPeek {
        let kind = match (self.method, self.result, self.id.is_some()) {
            (true, false, true) => RpcKind::Request,
            (true, false, false) => RpcKind::Notification,
            (false, true, true) => RpcKind::Response,
            _ => RpcKind::Other,
        };
        RpcPeek { kind, id: self.id }
    }
}

/// The peek that reads the whole message: every top-level value is skipped to find the next key.
fn peek(data: &Data) -> Option<RpcPeek> {
    let mut c = Cursor::new(data);
    match c.skip_ws()? {
        b'[' => {
            return Some(RpcPeek {
                kind: RpcKind::Batch,
                id: None,
            });
        }
        b'{' => c.pos += 1,
        _ => return None,
    }
    let mut members = Members::default();
    let mut key = PeekBuf::new();
    loop {
        match c.skip_ws()? {
            b'}' => break,
            b'"' => c.pos += 1,
            _ => return None,
        }
        members.read(&mut c, &mut key, true)?;
        match c.skip_ws()? {
            b',' => c.pos += 1,
            b'}' => break,
            _ => return None,
        }
    }
    Some(members.peek())
}

/// The peek that reads only the top-level keys at `keys` (their opening quotes, as the gate recorded
/// them while judging the message `Complete`) and the `id` value: nothing else of the message is read.
fn peek_keys(data: &Data, keys: &[u64]) -> Option<RpcPeek> {
    if keys.is_empty() {
        // `{}`, or not an object at all: the full peek answers at once.
        return peek(data);
    }
    let mut c = Cursor::new(data);
    let mut members = Members::default();
    let mut key = PeekBuf::new();
    let segs = c.segs;
    for &at in keys {
        c.seek(at)?;
        if c.next()? != b'"' {
            return None;
        }
        // The common key: written plainly, within one segment. Only the four that matter are read
        // on; the others are not even scanned to their end.
        let rest = segs.get(c.seg).map_or(&[][..], |s| &s[c.pos..]);
        match plain_key(rest) {
            Some(name) if is_rpc_key(name) => {
                c.pos += name.len() + 1;
                members.value(&mut c, name, false)?;
            }
            Some(_) => {}
            None => members.read(&mut c, &mut key, false)?,
        }
    }
    Some(members.peek())
}

/// The key at the start of `rest` (just after its opening quote) when it closes in `rest` and has
/// no escape, so its raw text is its value; `None` sends it the long way ([`Members::read`]).
#[inline]
fn plain_key(rest: &[u8]) -> Option<&[u8]> {
    let end = find_quote_or_backslash(rest)?;
    (rest[end] == b'"').then(|| &rest[..end])
}

/// Whether the peek needs this top-level key.
#[inline]
fn is_rpc_key(key: &[u8]) -> bool {
    matches!(key, b"id" | b"method" | b"result" | b"error")
}

/// The first `"` or `\\` in `bytes`: keys and ids are short, so the first 16 bytes are tested inline
/// before the vector search (whose set-up costs more than a short key).
#[inline]
fn find_quote_or_backslash(bytes: &[u8]) -> Option<usize> {
    crate::arch::find_either(bytes, b'"', b'\\')
}

fn parse_id(first: u8, raw: &[u8]) -> Option<RpcId> {
    let text = std::str::from_utf8(raw).ok()?;
    Some(match first {
        b'"' => RpcId::String(unescape(text)?.into()),
        b'n' if text == "null" => RpcId::Null,
        _ => match text.parse::<i64>() {
            Ok(n) => RpcId::Number(n),
            Err(_) => RpcId::Raw(text.into()),
        },
    })
}

/// Unescapes the contents of a JSON string (between the quotes).
fn unescape(s: &str) -> Option<String> {
    if !s.contains('\\') {
        return Some(s.to_owned());
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    let hex4 = |chars: &mut std::str::Chars<'_>| -> Option<u32> {
        let h: String = chars.by_ref().take(4).collect();
        if h.len() == 4 {
            u32::from_str_radix(&h, 16).ok()
        } else {
            None
        }
    };
    while let Some(ch) = chars.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        out.push(match chars.next()? {
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => {
                let hi = hex4(&mut chars)?;
                if (0xD800..0xDC00).contains(&hi) {
                    let rest = chars.as_str();
                    let lo = rest
                        .strip_prefix("\\u")
                        .and_then(|r| u32::from_str_radix(r.get(..4)?, 16).ok());
                    match lo {
                        Some(lo @ 0xDC00..=0xDFFF) => {
                            chars = rest[6..].chars();
                            char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?
                        }
                        _ => char::REPLACEMENT_CHARACTER,
                    }
                } else {
                    char::from_u32(hi).unwrap_or(char::REPLACEMENT_CHARACTER)
                }
            }
            _ => return None,
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rope(parts: &[&'static str]) -> Data {
        let mut d = Data::new();
        for p in parts {
            d.push(Bytes::from_static(p.as_bytes()));
        }
        d
    }

    /// Every way of cutting `text` into a rope of up to three pieces.
    fn ropes(text: &'static str) -> Vec<Data> {
        let b = text.as_bytes();
        let mut out = Vec::new();
        for i in 0..=b.len() {
            for j in i..=b.len() {
                let mut d = Data::new();
                for piece in [&b[..i], &b[i..j], &b[j..]] {
                    d.push(Bytes::from_static(piece));
                }
                out.push(d);
            }
        }
        out
    }

    #[test]
    fn with_id_replaces_the_top_level_id_only_and_shares_the_rest() {
        let cases: &[(&str, &str)] = &[
            (
                r#"{"jsonrpc":"2.0","id":7,"result":{"id":9,"t":"\"id\":1"}}"#,
                r#"{"jsonrpc":"2.0","id":"h","result":{"id":9,"t":"\"id\":1"}}"#,
            ),
            // The id after a result whose strings hold braces, quotes and keys named id.
            (
                r#"{"result":{"s":"}\"id\":{","id":[1]},"jsonrpc":"2.0","id":"a\"b"}"#,
                r#"{"result":{"s":"}\"id\":{","id":[1]},"jsonrpc":"2.0","id":"h"}"#,
            ),
            // Whitespace kept; an escaped key is still `id`.
            (
                r#" { "jsonrpc" : "2.0" , "\u0069d" : 12 , "error" : {} } "#,
                r#" { "jsonrpc" : "2.0" , "\u0069d" : "h" , "error" : {} } "#,
            ),
            (r#"{"id":null}"#, r#"{"id":"h"}"#),
        ];
        for (message, expected) in cases {
            for data in ropes(message) {
                let m = Message::new(data).with_id(&b"\"h\""[..]).expect("an id");
                assert!(m.data().eq_bytes(expected.as_bytes()), "{message}: {m:?}");
            }
        }
        for no_id in [
            r#"{"jsonrpc":"2.0","method":"x","params":{"id":1}}"#,
            "[1]",
            "7",
            "{",
        ] {
            for data in ropes(no_id) {
                assert!(Message::new(data).with_id(&b"1"[..]).is_none(), "{no_id}");
            }
        }
        // Nothing is copied: the pieces around the id are the original chunks' bytes.
        let original = Bytes::from_static(br#"{"id":7,"result":"long"}"#);
        let m = Message::new(Data::from(original.clone()))
            .with_id(&b"8"[..])
            .unwrap();
        let segs = m.data().segments();
        assert_eq!(segs.len(), 3);
        assert_eq!(segs[0].as_ptr(), original.as_ptr());
        assert_eq!(segs[2].as_ptr(), original[7..].as_ptr());
    }

    #[test]
    fn peek_kinds_and_ids() {
        let cases: &[(&str, RpcKind, Option<RpcId>)] = &[
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"id":9}}"#,
                RpcKind::Request,
                Some(RpcId::Number(1)),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":"x"}}"#,
                RpcKind::Notification,
                None,
            ),
            (
                r#"{"result":{"id":3,"s":"\"}"},"jsonrpc":"2.0","id":"a\"\u00e9\ud83d\ude00"}"#,
                RpcKind::Response,
                Some(RpcId::String("a\"é😀".into())),
            ),
            (
                r#" { "jsonrpc" : "2.0" , "id" : null , "error" : {"code":-32700} } "#,
                RpcKind::Response,
                Some(RpcId::Null),
            ),
            (
                r#"{"id":1.5,"result":[1,[2],{"a":"]"}]}"#,
                RpcKind::Response,
                Some(RpcId::Raw("1.5".into())),
            ),
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"a"}]"#,
                RpcKind::Batch,
                None,
            ),
            (r#"{"jsonrpc":"2.0"}"#, RpcKind::Other, None),
            (r#""just a string""#, RpcKind::Other, None),
            (r#"{"id":1,"method""#, RpcKind::Other, None),
        ];
        for (text, kind, id) in cases {
            let whole = Message::new(Data::from(Bytes::from_static(text.as_bytes())));
            let peek = whole.jsonrpc_peek();
            assert_eq!((&peek.kind, &peek.id), (kind, id), "{text}");
            // The same bytes cut into a rope at every point.
            for k in 0..text.len() {
                let m = Message::new(rope(&[&text[..k], &text[k..]]));
                assert_eq!(m.jsonrpc_peek(), peek, "{text} cut at {k}");
            }
        }
    }

    #[test]
    fn parse_value_and_deserialize_reuse_the_parser() {
        use simd_json::prelude::*;
        let mut parser = Parser::new();
        for round in 0..3 {
            let m = Message::new(rope(&[
                r#"{"jsonrpc":"2.0","id":5,"#,
                r#""result":{"text":"a\nb","n":[1,2.5]}}"#,
            ]));
            {
                let v = m.parse_value(&mut parser).unwrap();
                assert_eq!(v["result"]["text"].as_str(), Some("a\nb"), "round {round}");
                assert_eq!(v["id"].as_u64(), Some(5));
            }
            #[derive(serde::Deserialize, PartialEq, Debug)]
            struct Resp {
                id: u64,
                result: serde::de::IgnoredAny,
            }
            let r: Resp = m.deserialize_with(&mut parser).unwrap();
            assert_eq!(r.id, 5);
        }
        let bad = Message::new(Data::from("{\"a\" 1}"));
        let err = bad.parse_value(&mut parser).unwrap_err();
        assert!(matches!(err, MessageError::Json { .. }), "{err}");
        assert!(matches!(
            Message::new(Data::new()).deserialize::<u8>(),
            Err(MessageError::Empty)
        ));
        let top = Message::new(Data::from("42"));
        assert_eq!(top.deserialize::<u32>().unwrap(), 42);
    }

    /// One top-level member: the key as written, the value as written, and what the value means
    /// for the peek when the key is `id` (`None`: not a valid id).
    type Member = (String, String, Option<RpcId>);

    fn member() -> impl proptest::strategy::Strategy<Value = Member> {
        use proptest::prelude::*;
        let key = prop_oneof![
            Just("jsonrpc"),
            Just("id"),
            Just("method"),
            Just("params"),
            Just("result"),
            Just("error"),
            Just("\\u0069d"),
            Just("meth\\u006fd"),
            Just("i\\\"d"),
            Just("x"),
        ];
        let id = prop_oneof![
            any::<i64>().prop_map(|n| (n.to_string(), RpcId::Number(n))),
            "[a-z\"\\\\é]{0,40}"
                .prop_map(|t| { (serde_json::to_string(&t).unwrap(), RpcId::String(t.into())) }),
            Just(("null".to_owned(), RpcId::Null)),
            Just(("1.5e3".to_owned(), RpcId::Raw("1.5e3".into()))),
        ];
        let leaf = prop_oneof![
            any::<i64>().prop_map(serde_json::Value::from),
            "[ -~é\n]{0,200}".prop_map(serde_json::Value::from),
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
        ];
        let value = leaf.prop_recursive(3, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
                prop::collection::btree_map("[a-z\"]{1,8}", inner, 0..6)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        });
        (key, id, value, any::<bool>()).prop_map(|(key, id, value, pretty)| {
            let unescaped: String = serde_json::from_str(&format!("\"{key}\"")).unwrap();
            if unescaped == "id" {
                (key.to_owned(), id.0, Some(id.1))
            } else if pretty {
                (
                    key.to_owned(),
                    serde_json::to_string_pretty(&value).unwrap(),
                    None,
                )
            } else {
                (key.to_owned(), value.to_string(), None)
            }
        })
    }

    /// The peek a JSON-RPC reader would make of these members (last duplicate wins), stated
    /// without the peek's code: kind from which unescaped keys are present.
    fn model(members: &[Member]) -> RpcPeek {
        let names: Vec<String> = members
            .iter()
            .map(|(k, _, _)| serde_json::from_str(&format!("\"{k}\"")).unwrap())
            .collect();
        let has = |n: &str| names.iter().any(|k| k == n);
        let id = members
            .iter()
            .zip(&names)
            .rev()
            .find(|(_, n)| *n == "id")
            .map(|((_, _, id), _)| id.clone().expect("an id member carries its meaning"));
        let kind = match (has("method"), has("result") || has("error"), id.is_some()) {
            (true, false, true) => RpcKind::Request,
            (true, false, false) => RpcKind::Notification,
            (false, true, true) => RpcKind::Response,
            _ => RpcKind::Other,
        };
        RpcPeek { kind, id }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        /// The peek on the gate's recorded keys and the full peek both agree with the model, for
        /// any rope the message is cut into; with at most `MAX_TOP_KEYS` members the recorded path
        /// is the one taken.
        #[test]
        fn peek_on_recorded_keys_matches_the_model(
            members in proptest::collection::vec(member(), 0..20),
            spaced in proptest::prelude::any::<bool>(),
            cuts in proptest::collection::vec(0usize..100_000, 0..4),
        ) {
            let sep = if spaced { " \n " } else { "" };
            let body: Vec<String> = members
                .iter()
                .map(|(k, v, _)| format!("{sep}\"{k}\"{sep}:{sep}{v}{sep}"))
                .collect();
            let text = format!("{sep}{{{}}}{sep}", body.join(","));
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (text.len() + 1)).collect();
            cuts.sort_unstable();
            let mut data = Data::new();
            let mut from = 0;
            for c in cuts.into_iter().chain([text.len()]) {
                if c > from {
                    data.push(Bytes::copy_from_slice(&text.as_bytes()[from..c]));
                    from = c;
                }
            }
            let want = model(&members);
            let message = Message::new(data.clone());
            proptest::prop_assert_eq!(message.jsonrpc_peek(), want.clone(), "{}", text);
            let mut gate = crate::gate::Gate::new();
            proptest::prop_assert_eq!(gate.check(&data), crate::gate::Verdict::Complete);
            let keys = gate.top_keys();
            if members.len() <= crate::gate::MAX_TOP_KEYS {
                let recorded = keys.and_then(TopKeys::offsets).map(<[u64]>::len);
                proptest::prop_assert_eq!(recorded, Some(members.len()), "{}", text);
            }
            let peeked = peek_recorded(&data, keys);
            proptest::prop_assert_eq!(peeked, want, "{}", text);
        }
        /// A string id is written as JSON writes it: serde_json is the oracle.
        #[test]
        fn a_string_id_displays_as_its_json_text(id in "(?s).{0,40}") {
            let shown = RpcId::String(id.clone().into()).to_string();
            proptest::prop_assert_eq!(&shown, &serde_json::to_string(&id).unwrap());
            // And it reads back as the same id.
            let back: String = serde_json::from_str(&shown).unwrap();
            proptest::prop_assert_eq!(back, id);
        }
    }

    #[test]
    fn ids_display_as_json() {
        let cases = [
            (RpcId::Number(-7), "-7".to_owned()),
            (RpcId::Null, "null".to_owned()),
            (RpcId::Raw("1.5".into()), "1.5".to_owned()),
            (
                RpcId::String("a\"b\\c\u{1}\u{7f}é\n\u{8}\u{c}\t\r".into()),
                r#""a\"b\\c\u0001"#.to_owned() + "\u{7f}é" + r#"\n\b\f\t\r""#,
            ),
        ];
        for (id, want) in cases {
            assert_eq!(id.to_string(), want);
        }
    }
}
