//! The fast path: simdjson stage-1 style bracket balancing, resumable across pieces.
//!
//! Carried state: whether the next byte is escaped (odd backslash run), whether we are inside a string,
//! the nesting depth and the kind of every open container. A byte after an odd backslash run is inert
//! everywhere (inside strings or not), exactly as the SIMD kernels' escape mask makes it, so the portable
//! path here and every kernel agree byte for byte. The kernels process 64-byte blocks and call
//! [`escapes`], [`Stage1::brackets`] and [`Stage1::bracket_slow`]; whatever is shorter than a
//! block goes through [`Stage1::inside_scalar`].
#![forbid(unsafe_code)]

use super::exact::Exact;
use super::simd::{self, Isa, scalar};
use super::{InvalidReason, Verdict, is_ws};

/// What the fast path has seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Only whitespace so far.
    Before,
    /// Inside the top-level array or object.
    Inside,
    /// The top-level container closed; only whitespace since.
    After,
    /// The top-level value is not a container: the exact recogniser has the rest.
    Delegated,
    /// Non-whitespace after the top-level container (absorbing).
    Trailing,
    /// Mismatched bracket or too deep (absorbing).
    Invalid,
}

/// Slack the kinds stack keeps above the current depth: one 64-byte block can open 64 containers.
const BLOCK_SLACK: usize = 66;

/// The fast path's state. Fields are crate-visible for the kernels.
#[derive(Clone, Debug)]
pub(crate) struct Stage1 {
    pub(crate) phase: Phase,
    /// Open containers (>= 1 while `Inside`).
    pub(crate) depth: usize,
    /// `kinds[d]` is 1 when the container at depth `d` is an object, 0 for an array (`kinds[0]` unused).
    /// Slots above `depth` hold garbage.
    pub(crate) kinds: Vec<u8>,
    /// All ones when the bytes consumed so far end inside a string, else 0.
    pub(crate) in_string: u64,
    /// 1 when the next byte is escaped (the consumed bytes end with an odd backslash run), else 0.
    pub(crate) escaped: u64,
    pub(crate) max_depth: usize,
    /// Message offset of the first byte of the piece being processed (then: bytes consumed).
    pub(crate) offset: u64,
    reason: Option<InvalidReason>,
    isa: Isa,
}

impl Stage1 {
    pub(crate) fn new(max_depth: usize, isa: Isa) -> Stage1 {
        Stage1 {
            phase: Phase::Before,
            depth: 0,
            kinds: Vec::new(),
            in_string: 0,
            escaped: 0,
            max_depth,
            offset: 0,
            reason: None,
            isa,
        }
    }

    pub(crate) fn reset(&mut self) {
        self.phase = Phase::Before;
        self.depth = 0;
        self.in_string = 0;
        self.escaped = 0;
        self.offset = 0;
        self.reason = None;
    }

    pub(crate) fn delegated(&self) -> bool {
        self.phase == Phase::Delegated
    }

    pub(crate) fn verdict(&self, exact: &Exact) -> Verdict {
        match self.phase {
            Phase::Before | Phase::Inside => Verdict::Incomplete,
            Phase::After => Verdict::Complete,
            Phase::Delegated => exact.verdict(),
            Phase::Trailing => Verdict::Trailing,
            Phase::Invalid => Verdict::Invalid,
        }
    }

    pub(crate) fn reason<'a>(&'a self, exact: &'a Exact) -> Option<&'a InvalidReason> {
        match self.phase {
            Phase::Delegated => exact.reason(),
            _ => self.reason.as_ref(),
        }
    }

    /// Consumes the next piece; a top-level scalar is handed to `exact`.
    pub(crate) fn feed(&mut self, bytes: &[u8], exact: &mut Exact) {
        let base = self.offset;
        let n = bytes.len();
        let mut i = 0;
        while i < n {
            match self.phase {
                Phase::Before => {
                    while i < n && is_ws(bytes[i]) {
                        i += 1;
                    }
                    if i == n {
                        break;
                    }
                    let b = bytes[i];
                    if b == b'{' || b == b'[' {
                        self.depth = 0;
                        self.phase = Phase::Inside;
                        self.bracket_slow(true, b == b'{', base + i as u64);
                        i += 1;
                    } else {
                        self.phase = Phase::Delegated;
                        exact.reset();
                        exact.set_offset(base + i as u64);
                        exact.feed(&bytes[i..]);
                        i = n;
                    }
                }
                Phase::Inside => {
                    self.offset = base + i as u64;
                    i += simd::stage1_inside(self.isa, self, &bytes[i..]);
                }
                Phase::After => {
                    while i < n && is_ws(bytes[i]) {
                        i += 1;
                    }
                    if i < n {
                        self.phase = Phase::Trailing;
                    }
                    break;
                }
                Phase::Delegated => {
                    exact.feed(&bytes[i..]);
                    i = n;
                }
                Phase::Trailing | Phase::Invalid => break,
            }
        }
        self.offset = base + n as u64;
    }

    /// Makes sure a whole block's worth of opens fits in `kinds` without bounds failures.
    #[inline(always)]
    pub(crate) fn reserve_block(&mut self) {
        if self.kinds.len() < self.depth + BLOCK_SLACK {
            self.kinds.resize(self.depth + BLOCK_SLACK, 0);
        }
    }

    /// Applies the structural brackets `bits` of one block (bit `p` is an opener when set in `opens`, an
    /// object bracket when set in `curly`). Stops at the first bracket that needs care — over the depth
    /// limit, a mismatch, or the top-level close — and returns its bit index, with `depth` as before it.
    /// Requires [`Stage1::reserve_block`].
    #[inline(always)]
    pub(crate) fn brackets(&mut self, mut bits: u64, opens: u64, curly: u64) -> Option<u32> {
        let kinds = &mut self.kinds[..];
        let max = self.max_depth;
        let mut depth = self.depth;
        while bits != 0 {
            let p = bits.trailing_zeros();
            bits &= bits - 1;
            let open = (opens >> p) & 1 == 1;
            let kind = ((curly >> p) & 1) as u8;
            // For an opener this is the push; for a closer it scribbles above the top (harmless).
            kinds[depth + 1] = kind;
            let careful = if open {
                depth == max
            } else {
                depth == 1 || kinds[depth] != kind
            };
            if careful {
                self.depth = depth;
                return Some(p);
            }
            depth = if open { depth + 1 } else { depth - 1 };
        }
        self.depth = depth;
        None
    }

    /// One bracket, exactly: push, pop, or the typed failure; a pop to depth 0 moves to `After`.
    #[cold]
    pub(crate) fn bracket_slow(&mut self, open: bool, curly: bool, at: u64) {
        let kind = u8::from(curly);
        if open {
            if self.depth >= self.max_depth {
                self.phase = Phase::Invalid;
                self.reason = Some(InvalidReason::TooDeep {
                    limit: self.max_depth,
                    offset: at,
                });
                return;
            }
            if self.kinds.len() < self.depth + 2 {
                self.kinds.resize(self.depth + 2, 0);
            }
            self.depth += 1;
            self.kinds[self.depth] = kind;
        } else if self.kinds[self.depth] != kind {
            self.phase = Phase::Invalid;
            self.reason = Some(InvalidReason::Mismatched { offset: at });
        } else {
            self.depth -= 1;
            if self.depth == 0 {
                self.phase = Phase::After;
            }
        }
    }

    /// The portable path (and every kernel's tail): byte at a time, skipping string contents with the
    /// SWAR scanner. `bytes` starts at message offset `self.offset + skip`. Returns bytes consumed.
    pub(crate) fn inside_scalar(&mut self, bytes: &[u8], skip: usize) -> usize {
        let n = bytes.len();
        let mut i = 0;
        while i < n {
            if self.escaped != 0 {
                self.escaped = 0;
                i += 1;
                continue;
            }
            if self.in_string != 0 {
                i += scalar::scan_string::<false>(&bytes[i..]);
                if i == n {
                    break;
                }
                match bytes[i] {
                    b'"' => self.in_string = 0,
                    b'\\' => self.escaped = 1,
                    _ => {}
                }
                i += 1;
                continue;
            }
            match bytes[i] {
                b'"' => self.in_string = !0,
                b'\\' => self.escaped = 1,
                b @ (b'{' | b'[' | b'}' | b']') => {
                    let at = self.offset + (skip + i) as u64;
                    self.bracket_slow(b & 2 != 0, b & 0x20 != 0, at);
                    if self.phase != Phase::Inside {
                        return i + 1;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        n
    }
}

/// The escaped-byte mask of a 64-byte block from its backslash mask, carrying odd runs across blocks
/// (simdjson's `find_escaped`). Branchy when the block has no backslash, branchless otherwise.
#[inline(always)]
pub(crate) fn escapes(backslash: u64, carry: &mut u64) -> u64 {
    if backslash == 0 {
        let escaped = *carry;
        *carry = 0;
        return escaped;
    }
    const EVEN: u64 = 0x5555_5555_5555_5555;
    let backslash = backslash & !*carry;
    let follows_escape = (backslash << 1) | *carry;
    let odd_starts = backslash & !EVEN & !follows_escape;
    let (even_starts, overflow) = odd_starts.overflowing_add(backslash);
    *carry = u64::from(overflow);
    let invert = even_starts << 1;
    (EVEN ^ invert) & follows_escape
}
