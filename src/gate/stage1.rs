//! The fast path: simdjson stage-1 style bracket balancing, resumable across pieces.
//!
//! Carried state: whether the next byte is escaped (odd backslash run), whether we are inside a string,
//! the nesting depth and the kind of every open container. A byte after an odd backslash run is inert
//! everywhere (inside strings or not), exactly as the kernels' escape mask makes it, so the portable
//! path here and every kernel agree byte for byte. Whole 64-byte blocks come from the kernels as
//! structurals (brackets outside strings) and are balanced here; whatever is shorter than a block,
//! and everything on the portable build, goes through [`Stage1::inside_scalar`]. A top-level value that
//! is not a container is not this engine's business: [`Stage1::feed`] says where it starts and the
//! gate hands it to the exact recogniser.
#![forbid(unsafe_code)]

use super::{InvalidReason, Verdict, is_ws};
use crate::arch::{Kernels, StringCarry, portable};

/// What the fast path has seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Only whitespace so far.
    Before,
    /// Inside the top-level array or object.
    Inside,
    /// The top-level container closed; only whitespace since.
    After,
    /// The top-level value is not a container: the exact recogniser has the rest (and the verdict).
    Delegated,
    /// Non-whitespace after the top-level container (absorbing).
    Trailing,
    /// Mismatched bracket or too deep (absorbing).
    Invalid,
}

/// Slack the kinds stack keeps above the current depth: one 64-byte block can open 64 containers.
const BLOCK_SLACK: usize = 66;

/// The fast path's state.
#[derive(Clone, Debug)]
pub(crate) struct Stage1 {
    phase: Phase,
    /// Open containers (>= 1 while `Inside`).
    depth: usize,
    /// `kinds[d]` is 1 when the container at depth `d` is an object, 0 for an array (`kinds[0]` unused).
    /// Slots above `depth` hold garbage.
    kinds: Vec<u8>,
    /// The string and escape state at the end of the bytes consumed so far.
    carry: StringCarry,
    max_depth: usize,
    /// Message offset of the first byte of the piece being processed (then: bytes consumed).
    offset: u64,
    reason: Option<InvalidReason>,
    kernels: Kernels,
}

impl Stage1 {
    pub(crate) fn new(max_depth: usize, kernels: Kernels) -> Stage1 {
        Stage1 {
            phase: Phase::Before,
            depth: 0,
            kinds: Vec::new(),
            carry: StringCarry::default(),
            max_depth,
            offset: 0,
            reason: None,
            kernels,
        }
    }

    pub(crate) fn reset(&mut self) {
        self.phase = Phase::Before;
        self.depth = 0;
        self.carry = StringCarry::default();
        self.offset = 0;
        self.reason = None;
    }

    /// Bytes fed so far.
    pub(crate) fn consumed(&self) -> u64 {
        self.offset
    }

    pub(crate) fn delegated(&self) -> bool {
        self.phase == Phase::Delegated
    }

    /// The verdict (meaningless once [`Stage1::delegated`]: the exact recogniser's then stands).
    pub(crate) fn verdict(&self) -> Verdict {
        match self.phase {
            Phase::Before | Phase::Inside | Phase::Delegated => Verdict::Incomplete,
            Phase::After => Verdict::Complete,
            Phase::Trailing => Verdict::Trailing,
            Phase::Invalid => Verdict::Invalid,
        }
    }

    pub(crate) fn reason(&self) -> Option<&InvalidReason> {
        self.reason.as_ref()
    }

    /// Consumes the next piece. When the top-level value turns out not to be a container, returns the
    /// index in `bytes` where it starts: the rest of the message is for the exact recogniser (and
    /// nothing more may be fed here).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Option<usize> {
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
                        self.offset = base + n as u64;
                        return Some(i);
                    }
                }
                Phase::Inside => {
                    self.offset = base + i as u64;
                    i += self.inside(&bytes[i..]);
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
                Phase::Delegated | Phase::Trailing | Phase::Invalid => break,
            }
        }
        self.offset = base + n as u64;
        None
    }

    /// Balances `bytes` while inside the top-level container: whole blocks through the kernels'
    /// structurals, the tail byte by byte. Returns how many bytes it consumed (all of them, unless the
    /// top-level container closed or the input became invalid).
    #[inline]
    fn inside(&mut self, bytes: &[u8]) -> usize {
        let kernels = self.kernels;
        let mut carry = self.carry;
        let mut stopped = None;
        let done = kernels.structural_blocks(
            bytes,
            &mut carry,
            #[inline(always)]
            |at, s| {
                if s.brackets == 0 {
                    return true;
                }
                self.reserve_block();
                if let Some(p) = self.brackets(s.brackets, s.opens, s.curly) {
                    let offset = self.offset + (at as u64) + u64::from(p);
                    self.bracket_slow((s.opens >> p) & 1 == 1, (s.curly >> p) & 1 == 1, offset);
                    // `brackets` stops only at a bracket that closes the top-level container
                    // (`After`), goes over the depth limit or mismatches (`Invalid`): the phase
                    // never stays `Inside` here.
                    debug_assert_ne!(self.phase, Phase::Inside);
                    if self.phase != Phase::Inside {
                        stopped = Some(at + p as usize + 1);
                        return false;
                    }
                }
                true
            },
        );
        if let Some(end) = stopped {
            // The top-level container closed or the input is invalid: the carry no longer matters.
            return end;
        }
        self.carry = carry;
        done + self.inside_scalar(&bytes[done..], done)
    }

    /// Makes sure a whole block's worth of opens fits in `kinds` without bounds failures.
    #[inline(always)]
    fn reserve_block(&mut self) {
        if self.kinds.len() < self.depth + BLOCK_SLACK {
            self.kinds.resize(self.depth + BLOCK_SLACK, 0);
        }
    }

    /// Applies the structural brackets `bits` of one block (bit `p` is an opener when set in `opens`, an
    /// object bracket when set in `curly`). Stops at the first bracket that needs care — over the depth
    /// limit, a mismatch, or the top-level close — and returns its bit index, with `depth` as before it.
    /// Requires [`Stage1::reserve_block`].
    #[inline(always)]
    fn brackets(&mut self, mut bits: u64, opens: u64, curly: u64) -> Option<u32> {
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
    fn bracket_slow(&mut self, open: bool, curly: bool, at: u64) {
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

    /// The portable path (and the tail after the kernels' whole blocks): byte at a time, skipping string
    /// contents with the SWAR scanner. `bytes` starts at message offset `self.offset + skip`. Returns bytes consumed.
    fn inside_scalar(&mut self, bytes: &[u8], skip: usize) -> usize {
        let n = bytes.len();
        let mut i = 0;
        while i < n {
            if self.carry.escaped != 0 {
                self.carry.escaped = 0;
                i += 1;
                continue;
            }
            if self.carry.in_string != 0 {
                i += portable::scan_string::<false>(&bytes[i..]);
                if i == n {
                    break;
                }
                match bytes[i] {
                    b'"' => self.carry.in_string = 0,
                    b'\\' => self.carry.escaped = 1,
                    _ => {}
                }
                i += 1;
                continue;
            }
            match bytes[i] {
                b'"' => self.carry.in_string = !0,
                b'\\' => self.carry.escaped = 1,
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
