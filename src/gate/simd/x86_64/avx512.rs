//! AVX-512BW kernels: 64-byte blocks, mask registers straight from the compares.

use std::arch::x86_64::{
    __m512i, _mm512_cmpeq_epi8_mask, _mm512_cmplt_epi8_mask, _mm512_cmplt_epu8_mask,
    _mm512_loadu_si512, _mm512_maskz_loadu_epi8, _mm512_or_si512, _mm512_set1_epi8,
    _mm512_test_epi8_mask,
};

use super::prefix_xor;
use crate::gate::stage1::{Phase, Stage1, escapes};

/// The stop mask of one 64-byte vector (see `simd::scan_string`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn stop_mask<const NON_ASCII: bool>(v: __m512i) -> u64 {
    let quote = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8));
    let backslash = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8));
    // Signed `< 0x20` is true for control bytes and for every byte >= 0x80.
    let low = if NON_ASCII {
        _mm512_cmplt_epi8_mask(v, _mm512_set1_epi8(0x20))
    } else {
        _mm512_cmplt_epu8_mask(v, _mm512_set1_epi8(0x20))
    };
    quote | backslash | low
}

/// See `simd::scan_string`.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn scan_string<const NON_ASCII: bool>(bytes: &[u8]) -> usize {
    let n = bytes.len();
    let ptr = bytes.as_ptr();
    let mut i = 0;
    while i + 64 <= n {
        // SAFETY: `i + 64 <= n`, so the 64 bytes read are inside `bytes`.
        let v = unsafe { _mm512_loadu_si512(ptr.add(i).cast()) };
        let m = stop_mask::<NON_ASCII>(v);
        if m != 0 {
            return i + m.trailing_zeros() as usize;
        }
        i += 64;
    }
    if i < n {
        let live = (1u64 << (n - i)) - 1;
        // SAFETY: masked-off lanes are not read (AVX-512BW masked loads suppress faults there), and the
        // `n - i < 64` live lanes are inside `bytes`.
        let v = unsafe { _mm512_maskz_loadu_epi8(live, ptr.add(i).cast()) };
        let m = stop_mask::<NON_ASCII>(v) & live;
        if m != 0 {
            return i + m.trailing_zeros() as usize;
        }
    }
    n
}

/// See `simd::stage1_inside`.
///
/// # Safety
/// The CPU must support AVX-512F, AVX-512BW and PCLMULQDQ.
#[target_feature(enable = "avx512f,avx512bw,pclmulqdq")]
pub(crate) unsafe fn stage1_inside(st: &mut Stage1, bytes: &[u8]) -> usize {
    let n = bytes.len();
    let ptr = bytes.as_ptr();
    let quote_v = _mm512_set1_epi8(b'"' as i8);
    let backslash_v = _mm512_set1_epi8(b'\\' as i8);
    let bit5 = _mm512_set1_epi8(0x20);
    let open_v = _mm512_set1_epi8(b'{' as i8);
    let close_v = _mm512_set1_epi8(b'}' as i8);
    let mut i = 0;
    // The carries live in registers inside the loop and go back to `st` on every exit.
    let (mut esc_carry, mut str_carry) = (st.escaped, st.in_string);
    while i + 64 <= n {
        // SAFETY: `i + 64 <= n`, so the 64 bytes read are inside `bytes`.
        let v = unsafe { _mm512_loadu_si512(ptr.add(i).cast()) };
        let quote = _mm512_cmpeq_epi8_mask(v, quote_v);
        let backslash = _mm512_cmpeq_epi8_mask(v, backslash_v);
        // `[` | 0x20 == `{` and `]` | 0x20 == `}`; no other byte maps there.
        let folded = _mm512_or_si512(v, bit5);
        let opens = _mm512_cmpeq_epi8_mask(folded, open_v);
        let closes = _mm512_cmpeq_epi8_mask(folded, close_v);
        let curly = _mm512_test_epi8_mask(v, bit5);
        let escaped = escapes(backslash, &mut esc_carry);
        let in_string = prefix_xor(quote & !escaped) ^ str_carry;
        str_carry = ((in_string as i64) >> 63) as u64;
        let bits = (opens | closes) & !in_string & !escaped;
        if bits != 0 {
            st.reserve_block();
        }
        if bits != 0
            && let Some(p) = st.brackets(bits, opens, curly)
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
