//! The portable code: always compiled, the only code under `--cfg ssegate_disable_simd`, and
//! the reference every kernel is tested against. SWAR string scanning and the short searches run in
//! every build; the block masks have no portable kernel (the gate's byte automata, such as its
//! fast path's `Stage1::inside_scalar`, do that work without masks), so their byte-at-a-time
//! definitions below are compiled for the tests only.
#![forbid(unsafe_code)]

#[cfg(test)]
use super::{JsonMasks, StringCarry, StringMasks, Structurals};

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// High bit set in each byte of `w` that is zero. Borrows only propagate upwards from a true zero byte,
/// so the lowest flagged byte is always correct (higher ones may be false positives).
#[inline(always)]
fn zero_bytes(w: u64) -> u64 {
    w.wrapping_sub(LO) & !w & HI
}

/// High bit set in each byte of `w` that stops a string scan (lowest flag exact, as in [`zero_bytes`]).
#[inline(always)]
fn stops<const NON_ASCII: bool>(w: u64) -> u64 {
    let quote = zero_bytes(w ^ (LO * u64::from(b'"')));
    let backslash = zero_bytes(w ^ (LO * u64::from(b'\\')));
    let control = w.wrapping_sub(LO * 0x20) & !w & HI;
    let high = if NON_ASCII { w & HI } else { 0 };
    quote | backslash | control | high
}

#[inline(always)]
fn is_stop<const NON_ASCII: bool>(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20 || (NON_ASCII && b >= 0x80)
}

/// See [`Kernels::scan_string`](super::Kernels::scan_string).
pub(crate) fn scan_string<const NON_ASCII: bool>(bytes: &[u8]) -> usize {
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let w = u64::from_le_bytes(word.try_into().expect("chunks_exact(8) yields 8 bytes"));
        let m = stops::<NON_ASCII>(w);
        if m != 0 {
            return at + (m.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    scan_tail::<NON_ASCII>(bytes, at)
}

/// Byte-at-a-time scan of `bytes[from..]`.
#[inline]
pub(crate) fn scan_tail<const NON_ASCII: bool>(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| is_stop::<NON_ASCII>(b))
        .map_or(bytes.len(), |k| from + k)
}

/// Whether `hay` holds a CR or LF (the reference for the SSE2 kernel, and the code where it is absent).
#[inline]
pub(crate) fn has_line_end(hay: &[u8]) -> bool {
    hay.iter().any(|&b| b == b'\n' || b == b'\r')
}

/// The bytes of `head` equal to `a` or to `b` (bit `i` is byte `i`): the reference for the SSE2
/// and NEON kernels.
#[cfg_attr(any(ssegate_x86_kernels, ssegate_neon_kernels), allow(dead_code))]
#[inline]
pub(crate) fn either_16(head: &[u8; 16], a: u8, b: u8) -> u32 {
    head.iter()
        .enumerate()
        .fold(0, |m, (i, &x)| m | (u32::from(x == a || x == b) << i))
}

// The block masks by their definitions, byte by byte: what every block kernel must compute.

/// The string masks of one block, byte by byte from their definitions.
#[cfg(test)]
pub(crate) fn string_masks(block: &[u8]) -> StringMasks {
    let mut m = StringMasks::default();
    for (p, &b) in block.iter().enumerate() {
        let bit = 1u64 << p;
        let set = |mask: &mut u64, yes: bool| {
            if yes {
                *mask |= bit;
            }
        };
        set(&mut m.quote_or_control, b == b'"' || b < 0x20);
        set(&mut m.quote, b == b'"');
        set(&mut m.backslash, b == b'\\');
        set(&mut m.control, b < 0x20);
        set(&mut m.non_ascii, b >= 0x80);
        set(&mut m.simple_escape, b"\"\\/bfnrt".contains(&b));
        set(&mut m.u, b == b'u');
    }
    m
}

/// The structurals of whole blocks, from a byte-at-a-time automaton (escape, then string state).
#[cfg(test)]
pub(crate) fn structurals(bytes: &[u8], carry: &mut StringCarry) -> Vec<Structurals> {
    let mut out = Vec::new();
    for block in bytes.chunks_exact(64) {
        let mut s = Structurals::default();
        for (p, &b) in block.iter().enumerate() {
            let bit = 1u64 << p;
            if b == b'{' || b == b'[' {
                s.opens |= bit;
            }
            if b & 0x20 != 0 {
                s.curly |= bit;
            }
            if carry.escaped != 0 {
                carry.escaped = 0;
                continue;
            }
            match b {
                b'\\' => carry.escaped = 1,
                b'"' => carry.in_string = !carry.in_string,
                b'{' | b'[' | b'}' | b']' if carry.in_string == 0 => s.brackets |= bit,
                _ => {}
            }
        }
        out.push(s);
    }
    out
}

/// The JSON masks of whole blocks, from the same byte automaton.
#[cfg(test)]
pub(crate) fn json_masks(bytes: &[u8], carry: &mut StringCarry) -> Vec<JsonMasks> {
    let mut out = Vec::new();
    for block in bytes.chunks_exact(64) {
        let mut m = JsonMasks::default();
        for (p, &b) in block.iter().enumerate() {
            let bit = 1u64 << p;
            let set = |mask: &mut u64, yes: bool| {
                if yes {
                    *mask |= bit;
                }
            };
            set(&mut m.ws, matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
            set(&mut m.backslash, b == b'\\');
            set(&mut m.control, b < 0x20);
            set(&mut m.non_ascii, b >= 0x80);
            // Escaped or not: outside strings an escape is an error the walker finds first.
            set(&mut m.ops, carry.in_string == 0 && b"{}[]:,".contains(&b));
            set(&mut m.open, b == b'{' || b == b'[');
            set(&mut m.close, b == b'}' || b == b']');
            set(&mut m.curly, b == b'{' || b == b'}');
            set(&mut m.colon, b == b':');
            set(&mut m.comma, b == b',');
            set(&mut m.digit, b.is_ascii_digit());
            set(&mut m.zero, b == b'0');
            set(&mut m.minus, b == b'-');
            set(&mut m.dot, b == b'.');
            if carry.escaped != 0 {
                carry.escaped = 0;
                m.in_string |= carry.in_string & bit;
                continue;
            }
            match b {
                b'\\' => carry.escaped = 1,
                b'"' => {
                    m.quotes |= bit;
                    carry.in_string = !carry.in_string;
                }
                _ => {}
            }
            m.in_string |= carry.in_string & bit;
        }
        out.push(m);
    }
    out
}
