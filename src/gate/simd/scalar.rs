//! Portable kernels: SWAR string scanning. The portable stage-1 path is `Stage1::inside_scalar`.
#![forbid(unsafe_code)]

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

/// See [`super::Kernels::scan_string`].
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
/// kernel.
#[cfg_attr(
    all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)),
    allow(dead_code)
)]
#[inline]
pub(crate) fn either_16(head: &[u8; 16], a: u8, b: u8) -> u32 {
    head.iter()
        .enumerate()
        .fold(0, |m, (i, &x)| m | (u32::from(x == a || x == b) << i))
}
