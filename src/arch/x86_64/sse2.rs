//! SSE2 kernels: part of every x86-64 CPU, so they need no token and no run-time detection.

use std::arch::x86_64::{
    __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
};

/// Whether `hay` holds a CR or LF: 16-byte blocks, the last one overlapping the others (a haystack
/// shorter than 16 bytes is tested byte by byte).
#[inline]
pub(crate) fn has_line_end(hay: &[u8]) -> bool {
    let Some(last) = hay.len().checked_sub(16) else {
        return crate::arch::portable::has_line_end(hay);
    };
    // SAFETY: SSE2 is part of the x86-64 baseline, so its intrinsics run on every CPU this code is
    // built for. Each load reads 16 bytes starting at `hay[last]` or at an exact 16-byte block of
    // `hay`, all in bounds (`last + 16 == hay.len()`), and `_mm_loadu_si128` has no alignment
    // requirement.
    unsafe {
        let lf = _mm_set1_epi8(b'\n' as i8);
        let cr = _mm_set1_epi8(b'\r' as i8);
        let eol = |p: *const u8| -> __m128i {
            let v = _mm_loadu_si128(p.cast());
            _mm_or_si128(_mm_cmpeq_epi8(v, lf), _mm_cmpeq_epi8(v, cr))
        };
        // The last 16 bytes, overlapping the blocks, cover the remainder.
        let mut acc = eol(hay.as_ptr().add(last));
        for block in hay.chunks_exact(16) {
            acc = _mm_or_si128(acc, eol(block.as_ptr()));
        }
        _mm_movemask_epi8(acc) != 0
    }
}

/// The bytes of `head` equal to `a` or to `b` (bit `i` is byte `i`).
#[inline]
pub(crate) fn either_16(head: &[u8; 16], a: u8, b: u8) -> u32 {
    // SAFETY: SSE2 is part of the x86-64 baseline; the load reads exactly the 16 bytes of `head`,
    // with no alignment requirement.
    unsafe {
        let v = _mm_loadu_si128(head.as_ptr().cast());
        let hit = _mm_or_si128(
            _mm_cmpeq_epi8(v, _mm_set1_epi8(a as i8)),
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8)),
        );
        _mm_movemask_epi8(hit) as u32
    }
}
