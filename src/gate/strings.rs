//! Whole-block string skipping for the exact recogniser: consumes the [`StringMasks`] the kernels
//! produce and turns each 64-byte block into "still inside the string", "the string closes here" or
//! "look closer", then checks the skipped bytes' UTF-8 in bulk.
//!
//! [`skip`] is entered at a *clean point* of a string (between two characters, not inside an escape or
//! a UTF-8 sequence) and returns another clean point, so the exact recogniser's scalar automaton can take
//! over there and judge anything unusual (an error, a piece boundary) byte by byte with precise offsets.
#![forbid(unsafe_code)]

use crate::arch::{Kernels, StringMasks, escapes_branchless, escapes_carry_out};

/// Skips string content with the block kernels, starting at a clean point of a string. Returns how many
/// bytes are proven valid string content, and whether the closing quote ended them; the rest (an error,
/// fewer than 64 bytes left) is for the scalar automaton. The portable build skips nothing: its
/// automaton is the reference.
#[inline]
pub(crate) fn skip(kernels: Kernels, bytes: &[u8]) -> Skip {
    let mut run = Run::default();
    let mut at = 0;
    loop {
        // Common blocks in one kernel call, their masks kept in registers; a block that needs the
        // careful look stops the call and is classified again on its own.
        let common = kernels.string_blocks(
            &bytes[at..],
            #[inline(always)]
            |_, m| run.block(m),
        );
        at += common.end;
        run.non_ascii |= u64::from(common.non_ascii);
        if at + 64 > bytes.len() {
            return run.finish(bytes, at);
        }
        let block = &bytes[at..at + 64];
        let mut more = false;
        kernels.string_blocks(block, |_, m| {
            more = run.block_careful(block, at, m);
            false
        });
        if !more {
            return run.finish(bytes, at);
        }
        at += 64;
    }
}

/// What one [`skip`] call achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Skip {
    /// Bytes proven to be valid string content (plus the closing quote when `closed`).
    pub(crate) len: usize,
    /// Whether the string closed (its quote is the last of the `len` bytes).
    pub(crate) closed: bool,
}

/// State carried from one block to the next inside a string.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Carry {
    /// 1 when the previous block ended with an odd backslash run (its last backslash is pending).
    esc: u64,
    /// Bits 0..=3: positions of this block that must be hex digits of a `\u` escape begun before it.
    hex: u64,
}

impl Carry {
    /// How far back from the block boundary the escape left pending by the previous block began.
    #[inline(always)]
    fn backoff(self) -> usize {
        if self.esc != 0 {
            1
        } else if self.hex != 0 {
            6 - self.hex.count_ones() as usize
        } else {
            0
        }
    }
}

/// Loop state of one [`skip`] call.
#[derive(Debug, Default)]
struct Run {
    carry: Carry,
    /// Offset of the closing quote, once found.
    close: Option<usize>,
    /// The non-ASCII bytes of the accepted blocks, or-ed together: when any, UTF-8 is checked from
    /// the start.
    non_ascii: u64,
}

impl Run {
    /// Judges a common block (plain text, simple escapes, non-ASCII) in one branch-free pass. `true`:
    /// the block is valid string content and the string goes on. `false`: the block has a closing
    /// quote, a `\u` escape or something invalid, and needs [`Run::block_careful`]; the carry is
    /// left as it was before the block. Its non-ASCII bytes are the kernel's to report
    /// ([`Blocks::non_ascii`](crate::arch::Blocks)).
    ///
    /// It reads three masks, the fewest the kernels can make for it (each is one compare into a
    /// mask register, and those compares bound the loop): an unescaped byte must not be a quote
    /// or a control byte, an escaped one must be a simple escape (a control byte is not).
    #[inline(always)]
    fn block(&mut self, m: StringMasks) -> bool {
        let (escaped, _) = escapes_branchless(m.backslash, self.carry.esc);
        // The carry out from the last run's parity: the next block waits for a conditional move,
        // not for this block's escape arithmetic.
        let esc_out = escapes_carry_out(m.backslash, self.carry.esc);
        let unusual =
            (m.quote_or_control & !escaped) | (escaped & !m.simple_escape) | self.carry.hex;
        if unusual != 0 {
            return false;
        }
        self.carry.esc = esc_out;
        true
    }

    /// Judges the block at `at` (`block`) that [`Run::block`] declined. `true`: valid string content,
    /// the string goes on. `false`: stop here (the string closed, see [`Run::finish`], or the block
    /// needs the scalar automaton's careful look; the carry is then left as it was before the block).
    #[inline(never)]
    fn block_careful(&mut self, block: &[u8], at: usize, m: StringMasks) -> bool {
        let (escaped, esc_carry) = escapes_branchless(m.backslash, self.carry.esc);
        let closing = m.quote & !escaped;
        // Everything up to and including the closing quote is string; what follows is not our business.
        let upto = if closing == 0 {
            !0
        } else {
            closing ^ (closing - 1)
        };
        let escaped = escaped & upto;
        let u = escaped & m.u;
        let mut hex = self.carry.hex;
        let mut hex_out = 0;
        if u != 0 {
            hex |= (u << 1) | (u << 2) | (u << 3) | (u << 4);
            hex_out = (u >> 60) | (u >> 61) | (u >> 62) | (u >> 63);
        }
        let mut bad = m.control | (escaped & !(m.simple_escape | m.u));
        // `\u` escapes are rare in text: check their digits one by one.
        let mut h = hex & upto;
        while h != 0 {
            let p = h.trailing_zeros() as usize;
            h &= h - 1;
            if !block[p].is_ascii_hexdigit() {
                bad |= 1 << p;
            }
        }
        if bad & upto != 0 {
            return false;
        }
        self.non_ascii |= m.non_ascii & upto;
        if closing != 0 {
            self.close = Some(at + closing.trailing_zeros() as usize);
            return false;
        }
        self.carry = Carry {
            esc: esc_carry,
            hex: hex_out,
        };
        true
    }

    /// The kernel's answer once its block loop stopped at block boundary `at`.
    fn finish(self, bytes: &[u8], at: usize) -> Skip {
        let (end, closed) = match self.close {
            Some(q) => (q, true),
            None => (at - self.carry.backoff(), false),
        };
        let valid = if self.non_ascii != 0 {
            utf8_valid_prefix(&bytes[..end], !closed)
        } else {
            end
        };
        if closed && valid == end {
            Skip {
                len: end + 1,
                closed: true,
            }
        } else {
            Skip {
                len: valid,
                closed: false,
            }
        }
    }
}

/// Length of the longest prefix of `bytes` that is whole, valid UTF-8 and ends at a character boundary
/// (with `trim`, a sequence cut short by the end is left out rather than counted as invalid).
fn utf8_valid_prefix(bytes: &[u8], trim: bool) -> usize {
    let end = if trim {
        complete_prefix(bytes)
    } else {
        bytes.len()
    };
    let bytes = &bytes[..end];
    if simdutf8::basic::from_utf8(bytes).is_ok() {
        return end;
    }
    match simdutf8::compat::from_utf8(bytes) {
        // Never taken while the two validators agree: `basic` just refused these bytes.
        Ok(_) => end,
        Err(e) => e.valid_up_to(),
    }
}

/// `bytes.len()` minus a trailing UTF-8 lead byte (and its continuation bytes) whose sequence would need
/// more bytes than are there.
fn complete_prefix(bytes: &[u8]) -> usize {
    let n = bytes.len();
    for back in 1..=n.min(3) {
        let b = bytes[n - back];
        if b < 0x80 {
            break;
        }
        if b >= 0xC0 {
            let need = if b >= 0xF0 {
                4
            } else if b >= 0xE0 {
                3
            } else {
                2
            };
            return if need > back { n - back } else { n };
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_prefix_trims_only_cut_sequences() {
        assert_eq!(complete_prefix(b"ab"), 2);
        assert_eq!(complete_prefix(b"a\xc3"), 1);
        assert_eq!(complete_prefix(b"a\xc3\xa9"), 3);
        assert_eq!(complete_prefix(b"a\xe2\x80"), 1);
        assert_eq!(complete_prefix(b"\xf0\x9f\x98"), 0);
        assert_eq!(complete_prefix(b"\xf0\x9f\x98\x80"), 4);
        assert_eq!(complete_prefix(b"\x80\x80\x80"), 3);
        assert_eq!(utf8_valid_prefix(b"ab\xe2\x80", true), 2);
        assert_eq!(utf8_valid_prefix(b"ab\xe2\x80", false), 2);
        assert_eq!(utf8_valid_prefix(b"ab\xffcd", true), 2);
    }
}
