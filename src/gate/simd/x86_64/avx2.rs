//! AVX2 + PCLMULQDQ kernels: 64-byte blocks as two 32-byte halves.

use std::arch::x86_64::{
    __m256i, _mm256_and_si256, _mm256_cmpeq_epi8, _mm256_cmpgt_epi8, _mm256_loadu_si256,
    _mm256_max_epu8, _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8,
};

use super::prefix_xor;
use crate::gate::simd::scalar;
use crate::gate::stage1::{Phase, Stage1, escapes};

/// Loads 32 bytes at `ptr`.
///
/// # Safety
/// `ptr..ptr + 32` must be readable.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load(ptr: *const u8) -> __m256i {
    // SAFETY: the caller guarantees 32 readable bytes; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(ptr.cast()) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn bits(v: __m256i) -> u64 {
    u64::from(_mm256_movemask_epi8(v) as u32)
}

/// The stop mask of one 32-byte vector (see `simd::scan_string`).
#[inline]
#[target_feature(enable = "avx2")]
fn stop_mask<const NON_ASCII: bool>(v: __m256i) -> u64 {
    let quote = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8));
    let backslash = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8));
    let low = if NON_ASCII {
        // Signed `0x20 > v`: control bytes and every byte >= 0x80.
        _mm256_cmpgt_epi8(_mm256_set1_epi8(0x20), v)
    } else {
        // Unsigned `v <= 0x1f`  <=>  max(v, 0x1f) == 0x1f.
        let c = _mm256_set1_epi8(0x1f);
        _mm256_cmpeq_epi8(_mm256_max_epu8(v, c), c)
    };
    bits(_mm256_or_si256(_mm256_or_si256(quote, backslash), low))
}

/// See `simd::scan_string`.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn scan_string<const NON_ASCII: bool>(bytes: &[u8]) -> usize {
    let n = bytes.len();
    let ptr = bytes.as_ptr();
    let mut i = 0;
    while i + 64 <= n {
        // SAFETY: `i + 64 <= n`: both 32-byte loads are inside `bytes`.
        let (a, b) = unsafe { (load(ptr.add(i)), load(ptr.add(i + 32))) };
        let m = stop_mask::<NON_ASCII>(a) | (stop_mask::<NON_ASCII>(b) << 32);
        if m != 0 {
            return i + m.trailing_zeros() as usize;
        }
        i += 64;
    }
    if i + 32 <= n {
        // SAFETY: `i + 32 <= n`.
        let m = stop_mask::<NON_ASCII>(unsafe { load(ptr.add(i)) });
        if m != 0 {
            return i + m.trailing_zeros() as usize;
        }
        i += 32;
    }
    scalar::scan_tail::<NON_ASCII>(bytes, i)
}

/// See `simd::stage1_inside`.
///
/// # Safety
/// The CPU must support AVX2 and PCLMULQDQ.
#[target_feature(enable = "avx2,pclmulqdq")]
pub(crate) unsafe fn stage1_inside(st: &mut Stage1, bytes: &[u8]) -> usize {
    let n = bytes.len();
    let ptr = bytes.as_ptr();
    let quote_v = _mm256_set1_epi8(b'"' as i8);
    let backslash_v = _mm256_set1_epi8(b'\\' as i8);
    let bit5 = _mm256_set1_epi8(0x20);
    let open_v = _mm256_set1_epi8(b'{' as i8);
    let close_v = _mm256_set1_epi8(b'}' as i8);
    let mut i = 0;
    // The carries live in registers inside the loop and go back to `st` on every exit.
    let (mut esc_carry, mut str_carry) = (st.escaped, st.in_string);
    while i + 64 <= n {
        // SAFETY: `i + 64 <= n`: both 32-byte loads are inside `bytes`.
        let (lo, hi) = unsafe { (load(ptr.add(i)), load(ptr.add(i + 32))) };
        let quote =
            bits(_mm256_cmpeq_epi8(lo, quote_v)) | (bits(_mm256_cmpeq_epi8(hi, quote_v)) << 32);
        let backslash = bits(_mm256_cmpeq_epi8(lo, backslash_v))
            | (bits(_mm256_cmpeq_epi8(hi, backslash_v)) << 32);
        let (flo, fhi) = (_mm256_or_si256(lo, bit5), _mm256_or_si256(hi, bit5));
        let opens =
            bits(_mm256_cmpeq_epi8(flo, open_v)) | (bits(_mm256_cmpeq_epi8(fhi, open_v)) << 32);
        let closes =
            bits(_mm256_cmpeq_epi8(flo, close_v)) | (bits(_mm256_cmpeq_epi8(fhi, close_v)) << 32);
        let curly = bits(_mm256_cmpeq_epi8(_mm256_and_si256(lo, bit5), bit5))
            | (bits(_mm256_cmpeq_epi8(_mm256_and_si256(hi, bit5), bit5)) << 32);
        let escaped = escapes(backslash, &mut esc_carry);
        let in_string = prefix_xor(quote & !escaped) ^ str_carry;
        str_carry = ((in_string as i64) >> 63) as u64;
        let structural = (opens | closes) & !in_string & !escaped;
        if structural != 0 {
            st.reserve_block();
        }
        if structural != 0
            && let Some(p) = st.brackets(structural, opens, curly)
        {
            let at = st.offset + (i as u64) + u64::from(p);
            st.bracket_slow((opens >> p) & 1 == 1, (curly >> p) & 1 == 1, at);
            if st.phase != Phase::Inside {
                (st.escaped, st.in_string) = (esc_carry, str_carry);
                return i + p as usize + 1;
            }
        }
        i += 64;
    }
    (st.escaped, st.in_string) = (esc_carry, str_carry);
    i + st.inside_scalar(&bytes[i..], i)
}
