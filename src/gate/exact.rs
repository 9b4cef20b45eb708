//! The exact streaming recogniser: a JSON (RFC 8259) pushdown automaton fed byte ranges of any size.
//!
//! The control state is one small enum plus a bit-stack of container kinds; nothing recurses, nesting
//! costs one bit per level. String contents are skipped with the SIMD scanner
//! ([`Kernels::scan_string`]) and the block skipper ([`strings::skip`]) and validated as UTF-8 in bulk, so
//! prose-heavy messages cost little more than the fast path.
//!
//! Error offsets do not depend on how the input was cut: each names the byte where the offending token
//! starts to be wrong (for bad UTF-8, the first byte of the sequence that cannot be completed).
#![forbid(unsafe_code)]

use super::strings;
use super::{InvalidReason, Verdict, is_ws};
use crate::arch::{Isa, JsonMasks, Kernels, StringCarry};

/// Where the automaton is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    /// Top level, before the value (whitespace allowed).
    Start,
    /// Just after `[`: a value or `]`.
    ArrFirst,
    /// After `,` in an array or `:` in an object: a value.
    Value,
    /// Just after `{`: a key or `}`.
    ObjFirst,
    /// After `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After a value inside a container: `,` or the closer.
    After,
    /// The top-level value is complete: only whitespace may follow.
    Done,
    /// Inside a string (a key when `key` is set).
    Str,
    /// Inside a string, just after a backslash.
    Esc,
    /// Inside a `\u` escape, `n` hex digits still to come.
    Hex(u8),
    /// Inside a multi-byte UTF-8 sequence: `need` continuation bytes to come, the next in `lo..=hi`.
    Utf8 {
        need: u8,
        lo: u8,
        hi: u8,
    },
    /// Number states, named after what was just read.
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
    /// Inside `true`, `false` or `null`; `rest` is what is still expected.
    Lit(&'static [u8]),
    /// A complete value followed by non-whitespace (absorbing).
    Trailing,
    /// Not JSON (absorbing); the reason is in `Exact::reason`.
    Invalid,
}

/// How many top-level keys [`TopKeys`] records before it gives up.
pub(crate) const MAX_TOP_KEYS: usize = 16;

/// The message offsets of the opening quotes of a top-level object's keys, in order, recorded by the
/// recogniser as it goes: the JSON-RPC peek jumps to them instead of re-reading the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TopKeys {
    at: [u64; MAX_TOP_KEYS],
    len: u8,
    /// More keys than `at` holds: the record is incomplete and must not be used.
    overflow: bool,
}

impl TopKeys {
    const EMPTY: TopKeys = TopKeys {
        at: [0; MAX_TOP_KEYS],
        len: 0,
        overflow: false,
    };

    /// Records the next top-level key's opening quote.
    #[inline]
    fn push(&mut self, at: u64) {
        match self.at.get_mut(usize::from(self.len)) {
            Some(slot) => {
                *slot = at;
                self.len += 1;
            }
            None => self.overflow = true,
        }
    }

    /// The recorded offsets, or `None` when there were more keys than fit.
    pub(crate) fn offsets(&self) -> Option<&[u64]> {
        (!self.overflow).then(|| &self.at[..usize::from(self.len)])
    }
}

/// The exact recogniser's state.
#[derive(Clone, Debug)]
pub(crate) struct Exact {
    st: St,
    /// Whether the open string is an object key.
    key: bool,
    depth: usize,
    /// Bit `d` set: the container at depth `d + 1` is an object.
    stack: Vec<u64>,
    max_depth: usize,
    /// Bytes consumed before the current `feed` call.
    offset: u64,
    /// Message offset of the first byte of the UTF-8 sequence open in `St::Utf8`.
    utf8_start: u64,
    reason: Option<InvalidReason>,
    kernels: Kernels,
    keys: TopKeys,
    /// Blocks the block grammar check declined to the per-token walker.
    #[cfg(test)]
    declined_blocks: usize,
}

impl Exact {
    pub(crate) fn new(max_depth: usize, kernels: Kernels) -> Exact {
        Exact {
            st: St::Start,
            key: false,
            depth: 0,
            stack: Vec::new(),
            max_depth,
            offset: 0,
            utf8_start: 0,
            reason: None,
            kernels,
            keys: TopKeys::EMPTY,
            #[cfg(test)]
            declined_blocks: 0,
        }
    }

    pub(crate) fn isa(&self) -> Isa {
        self.kernels.isa()
    }

    pub(crate) fn reset(&mut self) {
        self.st = St::Start;
        self.key = false;
        self.depth = 0;
        self.offset = 0;
        self.reason = None;
        self.keys.len = 0;
        self.keys.overflow = false;
    }

    /// The top-level keys seen so far (meaningful once the verdict is `Complete`).
    pub(crate) fn top_keys(&self) -> &TopKeys {
        &self.keys
    }

    /// A key's opening quote at message offset `at`: recorded when the key is a top-level one.
    #[inline]
    fn key_at(&mut self, at: u64) {
        if self.depth == 1 {
            self.keys.push(at);
        }
    }

    /// Makes the next fed byte count as message offset `offset` (the fast path hands a top-level scalar
    /// over to this recogniser after skipping leading whitespace itself).
    pub(crate) fn set_offset(&mut self, offset: u64) {
        self.offset = offset;
    }

    pub(crate) fn reason(&self) -> Option<&InvalidReason> {
        self.reason.as_ref()
    }

    pub(crate) fn verdict(&self) -> Verdict {
        match self.st {
            St::Done => Verdict::Complete,
            St::Zero | St::Int | St::Frac | St::ExpDigits if self.depth == 0 => Verdict::Complete,
            St::Trailing => Verdict::Trailing,
            St::Invalid => Verdict::Invalid,
            _ => Verdict::Incomplete,
        }
    }

    #[cold]
    #[inline(never)]
    fn fail(&mut self, reason: InvalidReason) {
        self.st = St::Invalid;
        self.reason = Some(reason);
    }

    #[inline]
    fn string_done(&mut self) {
        if self.key {
            self.st = St::Colon;
        } else {
            self.value_done();
        }
    }

    #[inline]
    fn value_done(&mut self) {
        self.st = if self.depth == 0 { St::Done } else { St::After };
    }

    #[inline]
    fn top_is_object(&self) -> bool {
        let d = self.depth - 1;
        self.stack[d / 64] >> (d % 64) & 1 == 1
    }

    /// Opens a container; `false` (and the state set to `Invalid`) when over the depth limit.
    #[inline]
    fn push(&mut self, object: bool, at: u64) -> bool {
        if self.depth >= self.max_depth {
            self.fail(InvalidReason::TooDeep {
                limit: self.max_depth,
                offset: at,
            });
            return false;
        }
        let d = self.depth;
        let word = d / 64;
        if word == self.stack.len() {
            self.stack.push(0);
        }
        let bit = 1u64 << (d % 64);
        if object {
            self.stack[word] |= bit;
        } else {
            self.stack[word] &= !bit;
        }
        self.depth = d + 1;
        self.st = if object { St::ObjFirst } else { St::ArrFirst };
        true
    }

    /// Closes the open container with `b` (`]` or `}`) if it matches.
    #[inline]
    fn close(&mut self, b: u8, at: u64) {
        if self.top_is_object() == (b == b'}') {
            self.depth -= 1;
            self.value_done();
        } else {
            self.fail(InvalidReason::Mismatched { offset: at });
        }
    }

    /// Begins the value whose first byte is `b`.
    #[inline]
    fn begin_value(&mut self, b: u8, at: u64) {
        self.st = match b {
            b'{' => {
                self.push(true, at);
                return;
            }
            b'[' => {
                self.push(false, at);
                return;
            }
            b'"' => {
                self.key = false;
                St::Str
            }
            b'-' => St::Minus,
            b'0' => St::Zero,
            b'1'..=b'9' => St::Int,
            b't' => St::Lit(b"rue"),
            b'f' => St::Lit(b"alse"),
            b'n' => St::Lit(b"ull"),
            _ => return self.fail(InvalidReason::Syntax { offset: at }),
        };
    }

    /// Consumes `bytes`, the next piece of the message.
    ///
    /// With block kernels, whole 64-byte blocks in the states between tokens go through the structural
    /// walker ([`Exact::walk`]); whatever it declines (and everything on the portable build) goes
    /// through the byte automaton ([`Exact::feed_bytes`]), which hands back to the walker once it is
    /// between tokens again.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        let n = bytes.len();
        let base = self.offset;
        if !self.kernels.has_blocks() || n < TAIL_MIN {
            self.feed_bytes::<false>(bytes, usize::MAX);
            self.offset = base + n as u64;
            return;
        }
        let mut i = 0;
        while i < n {
            // After a walk that got nowhere, let the byte automaton take a block's worth before
            // trying again, so input the walker cannot take costs little more than the automaton.
            let mut yield_after = WALK_RETRY;
            if n - i >= TAIL_MIN && self.walkable() {
                self.offset = base + i as u64;
                let walked = if n - i >= 64 {
                    self.walk(&bytes[i..])
                } else {
                    self.walk_tail(&bytes[i..])
                };
                i += walked;
                if walked >= 64 {
                    yield_after = 1;
                }
                if i == n {
                    break;
                }
            }
            self.offset = base + i as u64;
            i += self.feed_bytes::<true>(&bytes[i..], yield_after);
        }
        self.offset = base + n as u64;
    }

    /// Whether the automaton is between tokens, where the walker can start.
    #[inline]
    fn walkable(&self) -> bool {
        matches!(
            self.st,
            St::Start | St::Value | St::ArrFirst | St::ObjFirst | St::Key | St::Colon | St::After
        )
    }

    /// The structural walker (simdjson's stage 2 over the kernels' stage-1 masks): runs the grammar on
    /// the structural characters, string delimiters and scalar tokens of whole 64-byte blocks instead
    /// of byte by byte. It takes only what it can prove valid (strings without escapes, control or
    /// non-ASCII bytes; complete numbers and literals inside one block) and stops in front of anything
    /// else, with the state exactly as the byte automaton would have it there; the byte automaton then
    /// judges that token (errors, offsets and all). Returns the bytes consumed.
    fn walk(&mut self, bytes: &[u8]) -> usize {
        let kernels = self.kernels;
        let mut carry = StringCarry::default();
        let mut declined = None;
        // Bytes at the start of the next block that belong to a scalar token already judged.
        let mut skip = 0;
        let done = kernels.json_blocks(
            bytes,
            &mut carry,
            #[inline(always)]
            |at, m| match self.walk_block(bytes, at, m, &mut skip, usize::MAX) {
                Ok(()) => true,
                Err(p) => {
                    declined = Some(at + p);
                    false
                }
            },
        );
        // A walk that ran out of whole blocks right after a token that ended in the bytes beyond them
        // consumed those bytes too.
        declined.unwrap_or(done + skip)
    }

    /// [`Exact::walk`] over a piece of fewer than 64 bytes (`tail`): it is copied into one block
    /// padded with spaces, which change no state between tokens. The walker takes what it can prove
    /// there and declines a scalar token that touches the end of the tail (the next piece may
    /// continue it); a string still open at the end stays open, as in a whole block. The bytes after
    /// a longer piece's whole blocks go through the byte automaton instead: for a tail that is mostly
    /// string, as small messages' often are, its string scan measured cheaper than a padded block.
    fn walk_tail(&mut self, tail: &[u8]) -> usize {
        let len = tail.len();
        let mut block = [b' '; 64];
        block[..len].copy_from_slice(tail);
        let kernels = self.kernels;
        let mut carry = StringCarry::default();
        let mut declined = None;
        let mut skip = 0;
        let done = kernels.json_blocks(
            &block,
            &mut carry,
            #[inline(always)]
            |at, m| match self.walk_block(&block, at, m, &mut skip, len) {
                Ok(()) => true,
                Err(p) => {
                    declined = Some(at + p);
                    false
                }
            },
        );
        // Without block kernels nothing was walked: all of it is the byte automaton's.
        let walked = if done == 64 { len } else { 0 };
        declined.unwrap_or(walked).min(len)
    }

    /// One block of [`Exact::walk`] (`bytes[at..at + 64]`); `Err(p)`: stopped in front of byte `p`
    /// of the block. A scalar token reaching `limit` (the end of a padded tail) is declined.
    #[inline(always)]
    fn walk_block(
        &mut self,
        bytes: &[u8],
        at: usize,
        m: JsonMasks,
        skip: &mut usize,
        limit: usize,
    ) -> Result<(), usize> {
        let block = &bytes[at..at + 64];
        let scalar = !(m.ws | m.ops | m.quotes | m.in_string);
        let unusual = m.control | m.backslash | m.non_ascii;
        let opening = m.quotes & m.in_string;
        let closing = m.quotes & !m.in_string;
        let mut from = *skip;
        *skip = 0;
        let in_str = self.st == St::Str;
        if in_str && closing | unusual == 0 {
            // The whole block is plain text of a string that began in an earlier block.
            return Ok(());
        }
        // A string open at the block's start is the grammar check's too (no branch on it: whether
        // a block starts inside a string is a coin toss in structure-dense input).
        match self.grammar_block(bytes, at, &m, from, limit) {
            Some(skipped) => {
                *skip = skipped;
                return Ok(());
            }
            None => self.declined(),
        }
        if in_str {
            // A string that began in an earlier block of this walk.
            let end = first_or_64(closing);
            if unusual & below(end) != 0 {
                return Err(0);
            }
            // Never taken: a block with neither a closing quote nor an unusual byte is plain string
            // text, which the test at the top of this function took whole. Kept so that release
            // builds stay in bounds were that ever not so.
            debug_assert!(end < 64);
            if end == 64 {
                return Ok(());
            }
            self.string_done();
            from = end + 1;
        }
        let mut events = (m.ops | opening | (scalar & !(scalar << 1))) & !below(from);
        while events != 0 {
            let p = events.trailing_zeros() as usize;
            // The byte tells the event: a quote is an opening quote (closing ones are not events), a
            // structural character is one (inside strings they are not events), anything else
            // starts a scalar token. One dispatch per event.
            match block[p] {
                b'"' => {
                    let key = match self.st {
                        St::Start | St::Value | St::ArrFirst => false,
                        St::ObjFirst | St::Key => true,
                        _ => return Err(p),
                    };
                    let end = first_or_64(closing & after(p));
                    if unusual & below(end) & after(p) != 0 {
                        return Err(p);
                    }
                    if key {
                        self.key_at(self.offset + (at + p) as u64);
                    }
                    self.key = key;
                    if end == 64 {
                        self.st = St::Str;
                        return Ok(());
                    }
                    self.string_done();
                    events &= after(end);
                }
                b @ (b'{' | b'[') => {
                    if !matches!(self.st, St::Start | St::Value | St::ArrFirst)
                        || self.depth >= self.max_depth
                    {
                        return Err(p);
                    }
                    self.push(b == b'{', 0);
                    events &= events - 1;
                }
                b @ (b'}' | b']') => {
                    if !matches!(self.st, St::ArrFirst | St::ObjFirst | St::After)
                        || self.top_is_object() != (b == b'}')
                    {
                        return Err(p);
                    }
                    self.depth -= 1;
                    self.value_done();
                    events &= events - 1;
                }
                b':' => {
                    if self.st != St::Colon {
                        return Err(p);
                    }
                    self.st = St::Value;
                    events &= events - 1;
                }
                b',' => {
                    if self.st != St::After {
                        return Err(p);
                    }
                    self.st = if self.top_is_object() {
                        St::Key
                    } else {
                        St::Value
                    };
                    events &= events - 1;
                }
                _ => {
                    // A scalar token: a whole number or literal.
                    if !matches!(self.st, St::Start | St::Value | St::ArrFirst) {
                        return Err(p);
                    }
                    let end = first_or_64(!scalar & after(p));
                    if end == 64 {
                        // The token goes on into the next block.
                        let Some(len) = scalar_over_end(bytes, at, p) else {
                            return Err(p);
                        };
                        self.value_done();
                        *skip = len;
                        return Ok(());
                    }
                    if at + end >= limit || !scalar_token(&block[p..end]) {
                        return Err(p);
                    }
                    self.value_done();
                    events &= !below(end);
                }
            }
        }
        Ok(())
    }

    /// The whole grammar of block `bytes[at..at + 64]` from byte `from` on, at once, with mask
    /// arithmetic instead of one step per token (the per-token walk in [`Exact::walk_block`] is the
    /// fallback). Returns `None`, with the state untouched, unless the block is provably valid JSON
    /// continuing from the current state; then the state is the one at the end of the block, and the
    /// result is how many bytes of the next block belong to a scalar token that ran over its end
    /// (judged here, as the walker does).
    ///
    /// How: every token end drops a marker on the byte after it; adding the marker to the
    /// whitespace mask carries it over the whitespace onto the next token's first byte. Each kind of
    /// token end lands only on the token starts the grammar allows after it (after a value inside
    /// an object: `,` or `}`; after a key: `:`; ...). Whether a comma or a value sits in an object
    /// or an array comes from one pass over the block's brackets, the only per-token loop left.
    /// Keys are the strings that land after `{` or an object's `,`. Numbers are checked with masks
    /// (sign, leading zero, fraction; exponents are left to the walker), literals by comparison.
    /// What it does not take: escapes, control or non-ASCII bytes in strings, exponents, scalar
    /// tokens that reach `limit`, a top-level scalar, anything after the top-level value, a depth of
    /// 63 or more, and every error.
    #[inline(always)]
    fn grammar_block(
        &mut self,
        bytes: &[u8],
        at: usize,
        m: &JsonMasks,
        from: usize,
        limit: usize,
    ) -> Option<usize> {
        let entry_str = self.st == St::Str;
        // Never taken: a walk starts only between tokens (`walkable`), and each block the walker
        // takes leaves it between tokens, in `Done` (the top-level value closed) or in `Str` (a
        // string runs on); a block it cannot take ends the walk. The guard keeps any other state
        // away from the successor rules below, which do not know it.
        debug_assert!(self.walkable() || self.st == St::Done || entry_str);
        if !self.walkable() && self.st != St::Done && !entry_str {
            return None;
        }
        let block = &bytes[at..at + 64];
        let live = !below(from);
        let in_str = m.in_string & live;
        let open_q = m.quotes & in_str;
        let close_q = m.quotes & !m.in_string & live;
        if (m.control | m.backslash | m.non_ascii) & (in_str | close_q) != 0 {
            return None;
        }
        let ops = m.ops & live;
        let lb = ops & m.open & m.curly;
        let lk = ops & m.open & !m.curly;
        let rb = ops & m.close & m.curly;
        let rk = ops & m.close & !m.curly;
        let col = ops & m.colon;
        let com = ops & m.comma;

        // Scalar tokens: starts, ends (inclusive), and the one running over the block's end.
        let scal = !(m.ws | m.ops | m.quotes | m.in_string) & live;
        let ss = scal & !(scal << 1);
        let se = scal & !(scal >> 1);
        let mut over = 0;
        let mut skipped = 0;
        if scal >> 63 == 1 {
            let start = 64 - (!scal).leading_zeros() as usize;
            skipped = scalar_over_end(bytes, at, start)?;
            over = !below(start);
        }
        if limit < 64 && se >> (limit - 1) & 1 == 1 {
            return None;
        }
        if !scalars_valid(block, m, scal & !over, ss, se) {
            return None;
        }

        let Contexts {
            obj,
            top0,
            top1,
            entry_in_obj,
            depth,
            stack,
        } = self.contexts(m, ops, live)?;

        // Successors: each kind of token end, carried over whitespace onto the next token start.
        let ws = m.ws;
        let land = |ends: u64| ws.wrapping_add(ends) & !ws;
        let entry = 1u64 << from;
        let entry_st = self.st;
        let at_entry = |st: St| {
            if std::mem::discriminant(&entry_st) == std::mem::discriminant(&st) {
                entry
            } else {
                0
            }
        };
        let value_start = lb | lk | open_q | ss;
        let after_lb = land((lb << 1) | at_entry(St::ObjFirst));
        let after_obj_comma = land(((com & obj) << 1) | at_entry(St::Key));
        // A key string open at the block's start: its bytes from bit 0 carry its key mark to its
        // closing quote like an opening quote's (`from` is 0 there: no scalar ran over into it).
        let entry_key = u64::from(entry_str && self.key);
        let keys = ((after_lb | after_obj_comma) & open_q) | entry_key;
        let key_end = in_str.wrapping_add(keys) & close_q;
        let value_end = rb | rk | (close_q & !key_end) | se;
        let entry_after = at_entry(St::After);
        let entry_obj = if entry_in_obj { entry_after } else { 0 };
        let entry_arr = entry_after & !entry_obj;
        let bad = (after_lb & !(open_q | rb))
            | (after_obj_comma & !open_q)
            | (land((lk << 1) | at_entry(St::ArrFirst)) & !(value_start | rk))
            | (land((col << 1) | at_entry(St::Value)) & !value_start)
            | (land((com & !obj) << 1) & !value_start)
            | (land((key_end << 1) | at_entry(St::Colon)) & !col)
            | (land(((value_end & obj) << 1) | entry_obj) & !(com | rb))
            | (land(((value_end & !obj & !top0) << 1) | entry_arr) & !(com | rk))
            | land(((value_end & top0) << 1) | at_entry(St::Done))
            | (land(at_entry(St::Start)) & !(lb | lk));
        if bad != 0 {
            return None;
        }

        // The state after the block's last token.
        let ends = lb | lk | rb | rk | col | com | close_q | se;
        let (st, key) = if in_str >> 63 == 1 {
            // The string the block ends in opened here, or (no opening quote) at the entry.
            let key = match open_q {
                // Never taken: with no opening quote the string was open at the entry and fills
                // the whole block, and a block of string text without an unusual byte (the only
                // kind this check accepts) was taken before the check (`Exact::walk_block`).
                0 => self.key,
                _ => keys & (1u64 << (63 - open_q.leading_zeros())) != 0,
            };
            (St::Str, key)
        } else if ends == 0 {
            (self.st, self.key)
        } else {
            let last = 1u64 << (63 - ends.leading_zeros());
            let st = if last & lb != 0 {
                St::ObjFirst
            } else if last & lk != 0 {
                St::ArrFirst
            } else if last & col != 0 {
                St::Value
            } else if last & com != 0 {
                if last & obj != 0 { St::Key } else { St::Value }
            } else if last & key_end != 0 {
                St::Colon
            } else if last & top0 != 0 {
                St::Done
            } else {
                St::After
            };
            (st, self.key)
        };
        // Each top-level key once: one open at the entry was recorded where it opened.
        let mut top_keys = keys & !entry_key & top1;
        while top_keys != 0 {
            let p = top_keys.trailing_zeros();
            top_keys &= top_keys - 1;
            self.keys.push(self.offset + (at as u64) + u64::from(p));
        }
        match self.stack.first_mut() {
            Some(word) => *word = stack,
            None => self.stack.push(stack),
        }
        self.depth = depth;
        self.st = st;
        self.key = key;
        Some(skipped)
    }

    /// The container context of each byte of a block from `live` on, after the token there (so a
    /// closer is in its parent's context): in an object, at depth 0, at depth 1; and the depth and the
    /// first stack word after the block. `None` when the depth would go below 0, above 62 or above the
    /// limit. The block's brackets are the one sequential step of the grammar check, branch-free: the
    /// container kinds are bits of one word, bit d for the container at depth d (set: an object), bit
    /// 0 for the top level (not an object).
    ///
    /// A closer of the wrong kind needs no check here: the token before it (or the block's entry
    /// state) may land only on the closer of its own container's kind, and the successor rules in
    /// [`Exact::grammar_block`] reject the block. (Removing a kind check here made no test fail; it
    /// was redundant.)
    #[inline(always)]
    fn contexts(&self, m: &JsonMasks, ops: u64, live: u64) -> Option<Contexts> {
        let opens = m.open & ops;
        let deepest = self.depth + opens.count_ones() as usize;
        if deepest > 62 || deepest > self.max_depth {
            return None;
        }
        let entry_depth = self.depth as i32;
        let mut depth = entry_depth;
        let mut stack = self.stack.first().copied().unwrap_or(0) << 1;
        let entry_in_obj = stack >> depth & 1;
        let mut in_obj = entry_in_obj;
        let mut obj = live & 0u64.wrapping_sub(in_obj);
        let mut lowest = depth;
        let mut brackets = (m.open | m.close) & ops;
        while brackets != 0 {
            let p = brackets.trailing_zeros();
            brackets &= brackets - 1;
            let open = opens >> p & 1;
            let curly = m.curly >> p & 1;
            // An opener writes its kind at the new depth (one and-not and one or on the chain from
            // bracket to bracket; the masks come from the depth alone).
            let slot = (depth + 1) as u32 & 63;
            let bit = open << slot;
            stack = (stack & !bit) | (curly << slot & bit);
            depth += 2 * open as i32 - 1;
            lowest = lowest.min(depth);
            let now = stack >> (depth as u32 & 63) & 1;
            obj ^= (!0u64 << p) & 0u64.wrapping_sub(now ^ in_obj);
            in_obj = now;
        }
        // Redundant with the successor rules (a closer at depth 0 follows the top-level start or
        // the top-level value, after which no closer may land), and kept as a guard: the depth
        // written back must never be negative.
        if lowest < 0 {
            return None;
        }
        // Depth 0 and 1 matter only in the blocks that reach them (where the top-level value
        // closes, and where the top-level keys are): a second pass there.
        let (mut top0, mut top1) = (0, 0);
        if lowest <= 1 {
            let mut d = entry_depth;
            top0 = live & 0u64.wrapping_sub(u64::from(d == 0));
            top1 = live & 0u64.wrapping_sub(u64::from(d == 1));
            let mut brackets = (m.open | m.close) & ops;
            while brackets != 0 {
                let p = brackets.trailing_zeros();
                brackets &= brackets - 1;
                let was = (u64::from(d == 0), u64::from(d == 1));
                d += 2 * (opens >> p & 1) as i32 - 1;
                let flip = !0u64 << p;
                top0 ^= flip & 0u64.wrapping_sub(u64::from(d == 0) ^ was.0);
                top1 ^= flip & 0u64.wrapping_sub(u64::from(d == 1) ^ was.1);
            }
        }
        Some(Contexts {
            obj,
            top0,
            top1,
            entry_in_obj: entry_in_obj == 1,
            depth: depth as usize,
            stack: stack >> 1,
        })
    }

    /// Counts a block the grammar check left to the per-token walker (tests assert on it).
    #[inline(always)]
    fn declined(&mut self) {
        #[cfg(test)]
        {
            self.declined_blocks += 1;
        }
    }

    /// The byte automaton: consumes `bytes` (at message offset `self.offset`), or (with `YIELD`) returns
    /// early, between tokens with at least 64 bytes left and at least `yield_after` consumed, for the
    /// walker. Returns the bytes consumed.
    fn feed_bytes<const YIELD: bool>(&mut self, bytes: &[u8], yield_after: usize) -> usize {
        let n = bytes.len();
        let base = self.offset;
        let mut i = 0;
        while i < n {
            if YIELD && i >= yield_after && n - i >= 64 && self.walkable() {
                return i;
            }
            let b = bytes[i];
            let at = base + i as u64;
            match self.st {
                St::Trailing | St::Invalid => break,
                St::Start | St::Value => {
                    if !is_ws(b) {
                        self.begin_value(b, at);
                    }
                    i += 1;
                }
                St::ArrFirst => {
                    if !is_ws(b) {
                        if b == b']' || b == b'}' {
                            self.close(b, at);
                        } else {
                            self.begin_value(b, at);
                        }
                    }
                    i += 1;
                }
                St::ObjFirst | St::Key => {
                    if !is_ws(b) {
                        if b == b'"' {
                            self.key_at(at);
                            self.key = true;
                            self.st = St::Str;
                        } else if self.st == St::ObjFirst && (b == b'}' || b == b']') {
                            self.close(b, at);
                        } else {
                            self.fail(InvalidReason::Syntax { offset: at });
                        }
                    }
                    i += 1;
                }
                St::Colon => {
                    if !is_ws(b) {
                        if b == b':' {
                            self.st = St::Value;
                        } else {
                            self.fail(InvalidReason::Syntax { offset: at });
                        }
                    }
                    i += 1;
                }
                St::After => {
                    match b {
                        b' ' | b'\t' | b'\n' | b'\r' => {}
                        b',' => {
                            self.st = if self.top_is_object() {
                                St::Key
                            } else {
                                St::Value
                            }
                        }
                        b']' | b'}' => self.close(b, at),
                        _ => self.fail(InvalidReason::Syntax { offset: at }),
                    }
                    i += 1;
                }
                St::Done => {
                    if !is_ws(b) {
                        self.st = St::Trailing;
                        break;
                    }
                    i += 1;
                }
                St::Str => {
                    // Stay here across the common stops (simple escapes, whole UTF-8 sequences) so prose
                    // costs one scanner call per stop and no trip through the state dispatch.
                    loop {
                        i += self.kernels.scan_string::<true>(&bytes[i..]);
                        if i == n {
                            break;
                        }
                        if bytes[i] != b'"' && self.kernels.has_blocks() {
                            // A string with escapes or non-ASCII text: whole 64-byte blocks at a time.
                            // The kernel stops at a clean point short of anything it cannot vouch for,
                            // which the byte-level code below then judges (it stops again only if
                            // nothing was skipped, so every round makes progress).
                            let skip = strings::skip(self.kernels, &bytes[i..]);
                            i += skip.len;
                            if skip.closed {
                                self.string_done();
                                break;
                            }
                            if skip.len != 0 {
                                continue;
                            }
                        }
                        let at = base + i as u64;
                        match bytes[i] {
                            b'"' => {
                                self.string_done();
                                i += 1;
                                break;
                            }
                            b'\\' => match bytes.get(i + 1) {
                                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                                    i += 2
                                }
                                _ => {
                                    self.st = St::Esc;
                                    i += 1;
                                    break;
                                }
                            },
                            0..=0x1f => {
                                self.fail(InvalidReason::ControlCharacter { offset: at });
                                break;
                            }
                            _ => match utf8_char(&bytes[i..]) {
                                Some(len) => i += len,
                                None => {
                                    // The run begins with a sequence `utf8_char` refused, so
                                    // it leaves the string: to `Utf8` (a sequence cut by the
                                    // end of the piece) or `Invalid`. The state dispatch above
                                    // takes it from there.
                                    i = self.utf8_run(bytes, i);
                                    break;
                                }
                            },
                        }
                    }
                }
                St::Esc => {
                    match b {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.st = St::Str,
                        b'u' => self.st = St::Hex(4),
                        _ => self.fail(InvalidReason::Syntax { offset: at }),
                    }
                    i += 1;
                }
                St::Hex(k) => {
                    if b.is_ascii_hexdigit() {
                        self.st = if k == 1 { St::Str } else { St::Hex(k - 1) };
                    } else {
                        self.fail(InvalidReason::Syntax { offset: at });
                    }
                    i += 1;
                }
                St::Utf8 { .. } => {
                    self.utf8_step(b, at);
                    i += 1;
                }
                St::Minus => {
                    match b {
                        b'0' => self.st = St::Zero,
                        b'1'..=b'9' => self.st = St::Int,
                        _ => self.fail(InvalidReason::Syntax { offset: at }),
                    }
                    i += 1;
                }
                St::Zero | St::Int => {
                    match b {
                        b'0'..=b'9' if self.st == St::Int => {
                            // Digit runs are the bulk of dense numeric JSON.
                            i += 1;
                            while i < n && bytes[i].is_ascii_digit() {
                                i += 1;
                            }
                        }
                        b'.' => {
                            self.st = St::Dot;
                            i += 1;
                        }
                        b'e' | b'E' => {
                            self.st = St::Exp;
                            i += 1;
                        }
                        // The number ended; `b` is judged by the state after a value.
                        _ => self.value_done(),
                    }
                }
                St::Dot => {
                    if b.is_ascii_digit() {
                        self.st = St::Frac;
                    } else {
                        self.fail(InvalidReason::Syntax { offset: at });
                    }
                    i += 1;
                }
                St::Frac => match b {
                    b'0'..=b'9' => i += 1,
                    b'e' | b'E' => {
                        self.st = St::Exp;
                        i += 1;
                    }
                    _ => self.value_done(),
                },
                St::Exp => {
                    match b {
                        b'+' | b'-' => self.st = St::ExpSign,
                        b'0'..=b'9' => self.st = St::ExpDigits,
                        _ => self.fail(InvalidReason::Syntax { offset: at }),
                    }
                    i += 1;
                }
                St::ExpSign => {
                    if b.is_ascii_digit() {
                        self.st = St::ExpDigits;
                    } else {
                        self.fail(InvalidReason::Syntax { offset: at });
                    }
                    i += 1;
                }
                St::ExpDigits => {
                    if b.is_ascii_digit() {
                        i += 1;
                    } else {
                        self.value_done();
                    }
                }
                St::Lit(rest) => {
                    if b == rest[0] {
                        if rest.len() == 1 {
                            self.value_done();
                        } else {
                            self.st = St::Lit(&rest[1..]);
                        }
                    } else {
                        self.fail(InvalidReason::Syntax { offset: at });
                    }
                    i += 1;
                }
            }
        }
        n
    }

    /// Validates the run of string bytes starting at the non-ASCII byte `bytes[start]` up to the next quote,
    /// backslash or control byte (or the end of `bytes`), in bulk; returns where scanning resumes.
    fn utf8_run(&mut self, bytes: &[u8], start: usize) -> usize {
        let end = start + self.kernels.scan_string::<false>(&bytes[start..]);
        match std::str::from_utf8(&bytes[start..end]) {
            // Never taken: the run begins with a sequence `utf8_char` refused, and the two agree
            // on what a UTF-8 sequence is.
            Ok(_) => end,
            Err(e) => {
                let bad = start + e.valid_up_to();
                if e.error_len().is_none() && end == bytes.len() {
                    // A sequence cut by the end of this piece: carry it in the state.
                    for (k, &b) in bytes[bad..end].iter().enumerate() {
                        self.utf8_step(b, self.offset + (bad + k) as u64);
                    }
                } else {
                    self.fail(InvalidReason::Utf8 {
                        offset: self.offset + bad as u64,
                    });
                }
                end
            }
        }
    }

    /// One byte of a string through the UTF-8 automaton (used only at piece boundaries). A byte that
    /// breaks an open sequence is reported at the sequence's first byte, as [`Exact::utf8_run`] reports
    /// it when the whole sequence arrives in one piece.
    fn utf8_step(&mut self, b: u8, at: u64) {
        match self.st {
            St::Utf8 { need, lo, hi } => {
                if b < lo || b > hi {
                    self.fail(InvalidReason::Utf8 {
                        offset: self.utf8_start,
                    });
                } else if need == 1 {
                    self.st = St::Str;
                } else {
                    self.st = St::Utf8 {
                        need: need - 1,
                        lo: 0x80,
                        hi: 0xBF,
                    };
                }
            }
            _ => {
                self.utf8_start = at;
                self.st = match b {
                    0xC2..=0xDF => St::Utf8 {
                        need: 1,
                        lo: 0x80,
                        hi: 0xBF,
                    },
                    0xE0 => St::Utf8 {
                        need: 2,
                        lo: 0xA0,
                        hi: 0xBF,
                    },
                    0xED => St::Utf8 {
                        need: 2,
                        lo: 0x80,
                        hi: 0x9F,
                    },
                    0xE1..=0xEF => St::Utf8 {
                        need: 2,
                        lo: 0x80,
                        hi: 0xBF,
                    },
                    0xF0 => St::Utf8 {
                        need: 3,
                        lo: 0x90,
                        hi: 0xBF,
                    },
                    0xF1..=0xF3 => St::Utf8 {
                        need: 3,
                        lo: 0x80,
                        hi: 0xBF,
                    },
                    0xF4 => St::Utf8 {
                        need: 3,
                        lo: 0x80,
                        hi: 0x8F,
                    },
                    // Never taken: these states are entered only from `utf8_run`, for a
                    // sequence `str::from_utf8` found cut short by the end of the piece
                    // (`error_len() == None`), so its first byte leads a sequence; a byte that
                    // cannot lead one is `Invalid` there. Kept as the typed error.
                    _ => return self.fail(InvalidReason::Utf8 { offset: at }),
                };
            }
        }
    }
}

/// What [`Exact::contexts`] found in a block.
struct Contexts {
    /// Bytes inside an object (after the token there).
    obj: u64,
    /// Bytes at depth 0.
    top0: u64,
    /// Bytes at depth 1.
    top1: u64,
    /// Whether the block began inside an object.
    entry_in_obj: bool,
    /// The depth after the block.
    depth: usize,
    /// The first word of the kinds stack after the block.
    stack: u64,
}

/// After a walk that consumed less than a block, how many bytes the byte automaton takes before it
/// hands back to the walker.
const WALK_RETRY: usize = 64;

/// The shortest piece tail worth copying into a padded block for the walker ([`Exact::walk_tail`]);
/// shorter tails go through the byte automaton.
const TAIL_MIN: usize = 16;

/// Bits `0..end` (all of them when `end` is 64).
#[inline(always)]
fn below(end: usize) -> u64 {
    if end >= 64 { !0 } else { (1u64 << end) - 1 }
}

/// Bits above `p` (`p < 64`).
#[inline(always)]
fn after(p: usize) -> u64 {
    (!0u64 << p) << 1
}

/// Index of the lowest set bit, or 64.
#[inline(always)]
fn first_or_64(mask: u64) -> usize {
    mask.trailing_zeros() as usize
}

/// Whether `b` continues a scalar token: not whitespace, a structural character or a quote (the
/// complement of what the kernels' masks set outside strings).
#[inline(always)]
fn is_scalar_byte(b: u8) -> bool {
    !matches!(
        b,
        b' ' | b'\t' | b'\n' | b'\r' | b'{' | b'}' | b'[' | b']' | b':' | b',' | b'"'
    )
}

/// A scalar token that starts at byte `p` of block `bytes[at..at + 64]` and runs over its end: how
/// many bytes of the next block belong to it, when the token ends within those bytes (fewer than 64)
/// and is exactly one number or literal; `None` otherwise (including when `bytes` ends first).
#[inline]
fn scalar_over_end(bytes: &[u8], at: usize, p: usize) -> Option<usize> {
    let from = at + 64;
    let len = bytes
        .get(from..)?
        .iter()
        .position(|&b| !is_scalar_byte(b))?;
    (len < 64 && scalar_token(&bytes[at + p..from + len])).then_some(len)
}

/// Whether the scalar tokens `scal` of a block (each whole inside it; `ss` and `se` mark token
/// starts and inclusive ends) are all numbers without exponents or `true`, `false`, `null`. Numbers
/// are checked with masks: only digits, `-` and `.`; one sign, at the start; no leading zero; at most
/// one fraction, with a digit on each side; a digit last. (A sign followed by a non-digit, or a dot
/// followed by one, breaks one of those rules already.)
#[inline(always)]
fn scalars_valid(block: &[u8], m: &JsonMasks, scal: u64, ss: u64, se: u64) -> bool {
    let ss = ss & scal;
    let num_start = ss & (m.digit | m.minus);
    let lit_start = ss & !num_start;
    // A run's bits, cleared by the carry from its start: the literal tokens; the rest are numbers.
    let lit = scal & !scal.wrapping_add(lit_start);
    let num = scal & !lit;
    let dots = m.dot & num;
    let int_start = (num_start & !m.minus) | ((m.minus & num_start) << 1);
    let bad = (num & !(m.digit | m.minus | m.dot))
        | (m.minus & num & !ss)
        | (dots & !(m.digit << 1))
        // A second dot: the carry from after the first one clears the rest of its token.
        | (num & !num.wrapping_add(dots << 1) & m.dot)
        | (((m.zero & int_start) << 1) & m.digit)
        | (se & num & !m.digit);
    if bad != 0 {
        return false;
    }
    let mut l = lit_start;
    while l != 0 {
        let p = l.trailing_zeros() as usize;
        l &= l - 1;
        let end = first_or_64(se & !below(p));
        if !literal(&block[p..], end + 1 - p) {
            return false;
        }
    }
    true
}

/// Whether the first `len` bytes of `rest` are exactly `true`, `false` or `null`.
#[inline(always)]
fn literal(rest: &[u8], len: usize) -> bool {
    match rest.first_chunk::<8>() {
        Some(w) => {
            let w = u64::from_le_bytes(*w);
            let word = |lit: &[u8]| {
                let mut b = [0; 8];
                b[..lit.len()].copy_from_slice(lit);
                u64::from_le_bytes(b)
            };
            const TRUE: u64 = 0x6575_7274;
            const NULL: u64 = 0x6c6c_756e;
            const FALSE: u64 = 0x65_736c_6166;
            debug_assert_eq!(
                (word(b"true"), word(b"null"), word(b"false")),
                (TRUE, NULL, FALSE)
            );
            let four = w as u32 as u64;
            let five = w & 0xff_ffff_ffff;
            (len == 4 && (four == TRUE || four == NULL)) || (len == 5 && five == FALSE)
        }
        None => {
            let t = &rest[..len];
            t == b"true" || t == b"false" || t == b"null"
        }
    }
}

/// Whether `t` (non-empty) is exactly one JSON number or literal.
#[inline(always)]
fn scalar_token(t: &[u8]) -> bool {
    match t[0] {
        b't' => t == b"true",
        b'f' => t == b"false",
        b'n' => t == b"null",
        _ => number_token(t),
    }
}

/// Whether `t` is exactly one JSON number: `-? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?`.
#[inline(always)]
fn number_token(t: &[u8]) -> bool {
    let n = t.len();
    let digits = |mut i: usize| {
        while i < n && t[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let mut i = usize::from(t[0] == b'-');
    match t.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(i + 1),
        _ => return false,
    }
    if t.get(i) == Some(&b'.') {
        let j = digits(i + 1);
        if j == i + 1 {
            return false;
        }
        i = j;
    }
    if matches!(t.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(t.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let j = digits(i);
        if j == i {
            return false;
        }
        i = j;
    }
    i == n
}

/// The length of the whole, valid UTF-8 sequence starting `bytes` (whose first byte is >= 0x80), or
/// `None` when it is invalid or cut short (the caller then takes the careful path).
#[inline]
fn utf8_char(bytes: &[u8]) -> Option<usize> {
    let cont = |k: usize| bytes.get(k).is_some_and(|&c| c & 0xC0 == 0x80);
    let b1 = *bytes.get(1)?;
    match bytes[0] {
        0xC2..=0xDF => cont(1).then_some(2),
        0xE0 => ((0xA0..=0xBF).contains(&b1) && cont(2)).then_some(3),
        0xED => ((0x80..=0x9F).contains(&b1) && cont(2)).then_some(3),
        0xE1..=0xEF => (cont(1) && cont(2)).then_some(3),
        0xF0 => ((0x90..=0xBF).contains(&b1) && cont(2) && cont(3)).then_some(4),
        0xF1..=0xF3 => (cont(1) && cont(2) && cont(3)).then_some(4),
        0xF4 => ((0x80..=0x8F).contains(&b1) && cont(2) && cont(3)).then_some(4),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Verdict and reason after feeding `pieces` in turn, checked against the portable reference after
    /// every piece for every available kernel.
    fn same_as_portable(input: &[u8], cuts: &[usize]) -> Result<(), TestCaseError> {
        for isa in crate::arch::tests::isas_under_test()
            .into_iter()
            .filter(|&i| i != Isa::Portable)
        {
            let mut reference = Exact::new(16, Kernels::Portable);
            let mut kernel = Exact::new(16, Kernels::new(isa).unwrap());
            let mut from = 0;
            for &to in cuts.iter().chain([&input.len()]) {
                reference.feed(&input[from..to]);
                kernel.feed(&input[from..to]);
                prop_assert_eq!(
                    kernel.verdict(),
                    reference.verdict(),
                    "{:?} {:?}",
                    isa,
                    cuts
                );
                prop_assert_eq!(kernel.reason(), reference.reason(), "{:?} {:?}", isa, cuts);
                from = to;
            }
        }
        Ok(())
    }

    /// Pieces of string content the kernels' common path handles: text, simple escapes, whole UTF-8.
    const COMMON: &[&[u8]] = &[
        b"a",
        b"plain text ",
        b"0123456789abcdef",
        b"\\\\",
        b"\\\"",
        b"\\/",
        b"\\b",
        b"\\f",
        b"\\n",
        b"\\r",
        b"\\t",
        b"u",
        b"{",
        b"}",
        b"[",
        b"]",
        b":",
        b",",
        b" ",
        b"\xc3\xa9",
        b"\xe2\x80\x94",
        b"\xf0\x9f\x98\x80",
        b"\x7f",
    ];

    /// Pieces that end a string, need the careful path, or are errors.
    const RARE: &[&[u8]] = &[
        b"\"",
        b"\\",
        b"\\u",
        b"\\u00e9",
        b"\\uD83D\\uDE00",
        b"\\u12",
        b"\\x",
        b"\\\xc3\xa9",
        b"0",
        b"F",
        b"g",
        b"\xc3",
        b"\xa9",
        b"\xe2\x80",
        b"\xf0\x9f",
        b"\xed\xa0\x80",
        b"\xc0\xaf",
        b"\xff",
        b"\xf4\x90\x80\x80",
        b"\x01",
        b"\x1f",
        b"\x00",
    ];

    /// Every piece, for the exhaustive position test.
    fn tokens() -> impl Iterator<Item = &'static [u8]> {
        COMMON.iter().chain(RARE).copied()
    }

    /// String content from random picks: about `rare` in 256 pieces come from [`RARE`].
    fn input_of(open: &[u8], picks: &[(u8, u8)], rare: u8, align: usize) -> Vec<u8> {
        let mut buf = vec![b' '; align];
        buf.extend_from_slice(open);
        for &(which, p) in picks {
            let from = if which < rare { RARE } else { COMMON };
            buf.extend_from_slice(from[usize::from(p) % from.len()]);
        }
        buf
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// The string kernels against the portable automaton: random string-heavy inputs at every
        /// alignment, whole, split in two at every point, and in random pieces.
        #[test]
        fn string_kernels_match_portable(
            picks in prop::collection::vec((any::<u8>(), any::<u8>()), 0..160),
            rare in 1u8..64,
            open in prop_oneof![Just(&b"\""[..]), Just(&b"[\""[..]), Just(&b"{\""[..]), Just(&b"[\"a\",\""[..])],
            align in 0usize..64,
            split_seed in any::<u64>(),
        ) {
            let buf = input_of(open, &picks, rare, align);
            // Leading spaces are whitespace before the value: every alignment of the string body is hit.
            let input = &buf[..];
            same_as_portable(input, &[])?;
            for k in 0..=input.len() {
                same_as_portable(input, &[k])?;
            }
            let mut s = split_seed;
            let mut cuts = vec![];
            let mut at = 0;
            loop {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                at += 1 + (s >> 33) as usize % 100;
                if at >= input.len() {
                    break;
                }
                cuts.push(at);
            }
            same_as_portable(input, &cuts)?;
        }
    }

    /// Every token at every position of a long, valid string with escapes and non-ASCII text, at every
    /// alignment mod 64.
    /// Valid JSON of the shapes MCP servers send (no escapes, non-ASCII text or exponents): every
    /// whole block goes through the block grammar check, none is declined to the per-token walker,
    /// at every alignment and with whitespace or without; the verdict is `Complete` and the
    /// top-level keys are recorded where they are.
    #[test]
    fn block_check_takes_plain_json() {
        for kernels in crate::arch::tests::kernels_under_test()
            .into_iter()
            .filter(|k| k.has_blocks())
        {
            block_check_takes_plain_json_on(kernels);
        }
    }

    fn block_check_takes_plain_json_on(kernels: Kernels) {
        for gap in ["", " ", "\n  "] {
            let mut rows = String::new();
            for i in 0..300 {
                if i > 0 {
                    rows.push_str(&format!(",{gap}"));
                }
                rows.push_str(&format!(
                    r#"{{"id":{i},{gap}"v":[{},{}.5,-3,0,-0.25,{gap}100],"ok":true,"t":"x{} y","n":null,"f":false,"e":{{}},"a":[{gap}],"p":{{"q":[[{{}}]]}}}}"#,
                    i % 1000,
                    i % 7,
                    i % 13
                ));
            }
            let message = format!(
                r#"{{"jsonrpc":"2.0",{gap}"id":4,"result":{{"rows":[{rows}],"isError":false}}}}"#
            );
            for align in 0..64 {
                let text = format!("{}{message}", " ".repeat(align));
                let mut e = Exact::new(64, kernels);
                e.feed(text.as_bytes());
                assert_eq!(
                    e.verdict(),
                    Verdict::Complete,
                    "{kernels:?} gap {gap:?} align {align}"
                );
                assert_eq!(
                    e.declined_blocks, 0,
                    "{kernels:?} gap {gap:?} align {align}"
                );
                let keys: Vec<u64> = ["\"jsonrpc\"", "\"id\"", "\"result\""]
                    .iter()
                    .map(|k| text.find(k).unwrap() as u64)
                    .collect();
                assert_eq!(e.top_keys().offsets(), Some(&keys[..]));
            }
        }
    }

    #[test]
    fn string_kernels_every_position_and_alignment() {
        let body: Vec<u8> =
            b"Para \\\"resume\\\" \xe2\x80\x94 C:\\\\tmp\\n\xc3\xa9\xf0\x9f\x98\x80 and so on"
                .iter()
                .copied()
                .cycle()
                .take(150)
                .collect();
        for align in 0..64 {
            for at in 0..=body.len() {
                for token in tokens() {
                    let mut input = vec![b' '; align];
                    input.push(b'"');
                    input.extend_from_slice(&body[..at]);
                    input.extend_from_slice(token);
                    input.extend_from_slice(&body[at..]);
                    input.extend_from_slice(b"\" ");
                    same_as_portable(&input, &[]).unwrap();
                }
            }
        }
    }
}
