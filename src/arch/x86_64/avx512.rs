//! AVX-512F + AVX-512BW kernels: 64-byte blocks, mask registers straight from the compares.

use std::arch::x86_64::{
    __m512i, _mm_loadu_si128, _mm512_and_si512, _mm512_broadcast_i32x4, _mm512_cmpeq_epi8_mask,
    _mm512_cmple_epu8_mask, _mm512_cmplt_epi8_mask, _mm512_cmplt_epu8_mask, _mm512_loadu_si512,
    _mm512_maskz_loadu_epi8, _mm512_movepi8_mask, _mm512_or_si512, _mm512_set1_epi8,
    _mm512_setzero_si512, _mm512_shuffle_epi8, _mm512_srli_epi16, _mm512_sub_epi8,
    _mm512_test_epi8_mask, _mm512_xor_si512,
};

use super::prefix_xor;
use crate::arch::bits::escapes;
use crate::arch::{
    Blocks, ESCAPE_HI, ESCAPE_LO, JsonMasks, StringCarry, StringMasks, Structurals, WHITESPACE,
};

/// Proof that this CPU runs AVX-512F, AVX-512BW, BMI1 and PCLMULQDQ: only [`Avx512::detect`] creates
/// one, and every kernel of this file is a safe method on it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx512(());

impl Avx512 {
    /// The token, when run-time detection finds every feature the kernels below enable.
    pub(crate) fn detect() -> Option<Avx512> {
        (std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("pclmulqdq"))
        .then_some(Avx512(()))
    }

    /// See [`Kernels::scan_string`](crate::arch::Kernels::scan_string).
    #[inline]
    pub(crate) fn scan_string<const NON_ASCII: bool>(self, bytes: &[u8]) -> usize {
        // SAFETY: `self` exists, so `detect` found AVX-512F and AVX-512BW.
        unsafe { scan_string::<NON_ASCII>(bytes) }
    }

    /// See [`Kernels::string_blocks`](crate::arch::Kernels::string_blocks).
    #[inline]
    pub(crate) fn string_blocks(
        self,
        bytes: &[u8],
        sink: impl FnMut(usize, StringMasks) -> bool,
    ) -> Blocks {
        // SAFETY: `self` exists, so `detect` found AVX-512F, AVX-512BW and BMI1.
        unsafe { string_blocks(bytes, sink) }
    }

    /// See [`Kernels::json_blocks`](crate::arch::Kernels::json_blocks).
    #[inline]
    pub(crate) fn json_blocks(
        self,
        bytes: &[u8],
        carry: &mut StringCarry,
        sink: impl FnMut(usize, JsonMasks) -> bool,
    ) -> usize {
        // SAFETY: `self` exists, so `detect` found AVX-512F, AVX-512BW and PCLMULQDQ.
        unsafe { json_blocks(bytes, carry, sink) }
    }

    /// See [`Kernels::structural_blocks`](crate::arch::Kernels::structural_blocks).
    #[inline]
    pub(crate) fn structural_blocks(
        self,
        bytes: &[u8],
        carry: &mut StringCarry,
        sink: impl FnMut(usize, Structurals) -> bool,
    ) -> usize {
        // SAFETY: `self` exists, so `detect` found AVX-512F, AVX-512BW and PCLMULQDQ.
        unsafe { structural_blocks(bytes, carry, sink) }
    }
}

/// The stop mask of one 64-byte vector (see `Kernels::scan_string`).
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

/// `"` or below 0x20 in one compare: flipping bit 1 maps `"` to 0x20 and keeps 0x00-0x1f in place
/// as a set, so these are exactly the bytes `b ^ 2 <= 0x20`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn quote_or_control(v: __m512i) -> u64 {
    _mm512_cmple_epu8_mask(
        _mm512_xor_si512(v, _mm512_set1_epi8(2)),
        _mm512_set1_epi8(0x20),
    )
}

/// See [`Kernels::scan_string`](crate::arch::Kernels::scan_string).
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn scan_string<const NON_ASCII: bool>(bytes: &[u8]) -> usize {
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

/// See [`Kernels::structural_blocks`](crate::arch::Kernels::structural_blocks).
///
/// # Safety
/// The CPU must support AVX-512F, AVX-512BW and PCLMULQDQ.
#[target_feature(enable = "avx512f,avx512bw,pclmulqdq")]
unsafe fn structural_blocks<F: FnMut(usize, Structurals) -> bool>(
    bytes: &[u8],
    carry: &mut StringCarry,
    mut sink: F,
) -> usize {
    let n = bytes.len();
    let ptr = bytes.as_ptr();
    let quote_v = _mm512_set1_epi8(b'"' as i8);
    let backslash_v = _mm512_set1_epi8(b'\\' as i8);
    let bit5 = _mm512_set1_epi8(0x20);
    let open_v = _mm512_set1_epi8(b'{' as i8);
    let close_v = _mm512_set1_epi8(b'}' as i8);
    let mut i = 0;
    // The carries live in registers inside the loop and go back to `carry` on exit.
    let (mut esc_carry, mut str_carry) = (carry.escaped, carry.in_string);
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
        let mut esc_next = esc_carry;
        let escaped = escapes(backslash, &mut esc_next);
        let in_string = prefix_xor(quote & !escaped) ^ str_carry;
        let brackets = (opens | closes) & !in_string & !escaped;
        if !sink(
            i,
            Structurals {
                brackets,
                opens,
                curly,
            },
        ) {
            break;
        }
        esc_carry = esc_next;
        str_carry = ((in_string as i64) >> 63) as u64;
        i += 64;
    }
    (carry.escaped, carry.in_string) = (esc_carry, str_carry);
    i
}

/// See [`Kernels::string_blocks`](crate::arch::Kernels::string_blocks).
///
/// # Safety
/// The CPU must support AVX-512F, AVX-512BW and BMI1.
#[target_feature(enable = "avx512f,avx512bw,bmi1")]
unsafe fn string_blocks<F: FnMut(usize, StringMasks) -> bool>(bytes: &[u8], mut sink: F) -> Blocks {
    let n = bytes.len();
    let ptr = bytes.as_ptr();
    let quote_v = _mm512_set1_epi8(b'"' as i8);
    let backslash_v = _mm512_set1_epi8(b'\\' as i8);
    let space_v = _mm512_set1_epi8(0x20);
    let u_v = _mm512_set1_epi8(b'u' as i8);
    let nibble = _mm512_set1_epi8(0x0f);
    // SAFETY: both tables are 16 bytes long, exactly what a 128-bit unaligned load reads.
    let (lo_t, hi_t) = unsafe {
        (
            _mm512_broadcast_i32x4(_mm_loadu_si128(ESCAPE_LO.as_ptr().cast())),
            _mm512_broadcast_i32x4(_mm_loadu_si128(ESCAPE_HI.as_ptr().cast())),
        )
    };
    // Every accepted block or-ed together: bit 7 of a byte says whether any of them was non-ASCII.
    let mut high = _mm512_setzero_si512();
    let mut i = 0;
    while i + 64 <= n {
        // SAFETY: `i + 64 <= n`, so the 64 bytes read are inside `bytes`.
        let v = unsafe { _mm512_loadu_si512(ptr.add(i).cast()) };
        // Bytes >= 0x80 select 0 from the low table; their high nibble selects 0 from the high one.
        let class = _mm512_and_si512(
            _mm512_shuffle_epi8(lo_t, v),
            _mm512_shuffle_epi8(hi_t, _mm512_and_si512(_mm512_srli_epi16::<4>(v), nibble)),
        );
        let masks = StringMasks {
            quote_or_control: quote_or_control(v),
            quote: _mm512_cmpeq_epi8_mask(v, quote_v),
            backslash: _mm512_cmpeq_epi8_mask(v, backslash_v),
            control: _mm512_cmplt_epu8_mask(v, space_v),
            non_ascii: _mm512_movepi8_mask(v),
            simple_escape: _mm512_test_epi8_mask(class, class),
            u: _mm512_cmpeq_epi8_mask(v, u_v),
        };
        if !sink(i, masks) {
            break;
        }
        high = _mm512_or_si512(high, v);
        i += 64;
    }
    Blocks {
        end: i,
        non_ascii: _mm512_movepi8_mask(high) != 0,
    }
}

/// See [`Kernels::json_blocks`](crate::arch::Kernels::json_blocks).
///
/// # Safety
/// The CPU must support AVX-512F, AVX-512BW and PCLMULQDQ.
#[target_feature(enable = "avx512f,avx512bw,pclmulqdq")]
unsafe fn json_blocks<F: FnMut(usize, JsonMasks) -> bool>(
    bytes: &[u8],
    carry: &mut StringCarry,
    mut sink: F,
) -> usize {
    let n = bytes.len();
    let ptr = bytes.as_ptr();
    let eq = |v: __m512i, b: u8| _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b as i8));
    let bit5 = _mm512_set1_epi8(0x20);
    let space_v = _mm512_set1_epi8(0x20);
    let zero_v = _mm512_set1_epi8(b'0' as i8);
    let ten_v = _mm512_set1_epi8(10);
    // SAFETY: the table is 16 bytes long, exactly what a 128-bit unaligned load reads.
    let ws_t = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(WHITESPACE.as_ptr().cast()) });
    let mut i = 0;
    let (mut esc_carry, mut str_carry) = (carry.escaped, carry.in_string);
    while i + 64 <= n {
        // SAFETY: `i + 64 <= n`, so the 64 bytes read are inside `bytes`.
        let v = unsafe { _mm512_loadu_si512(ptr.add(i).cast()) };
        let backslash = eq(v, b'\\');
        // `[` | 0x20 == `{` and `]` | 0x20 == `}`; no other byte maps there.
        let folded = _mm512_or_si512(v, bit5);
        let (open, close) = (eq(folded, b'{'), eq(folded, b'}'));
        let (colon, comma) = (eq(v, b':'), eq(v, b','));
        let ops = open | close | colon | comma;
        // One lookup by the low nibble: only a whitespace byte finds itself in the table (a byte
        // >= 0x80 looks up 0).
        let ws = _mm512_cmpeq_epi8_mask(_mm512_shuffle_epi8(ws_t, v), v);
        let mut esc_next = esc_carry;
        let escaped = escapes(backslash, &mut esc_next);
        let quotes = eq(v, b'"') & !escaped;
        let in_string = prefix_xor(quotes) ^ str_carry;
        let masks = JsonMasks {
            quotes,
            in_string,
            ops: ops & !in_string,
            ws,
            backslash,
            control: _mm512_cmplt_epu8_mask(v, space_v),
            non_ascii: _mm512_movepi8_mask(v),
            open,
            close,
            // Of the brackets, `{` and `}` are the ones with bit 5 set.
            curly: (open | close) & _mm512_test_epi8_mask(v, bit5),
            colon,
            comma,
            digit: _mm512_cmplt_epu8_mask(_mm512_sub_epi8(v, zero_v), ten_v),
            zero: eq(v, b'0'),
            minus: eq(v, b'-'),
            dot: eq(v, b'.'),
        };
        if !sink(i, masks) {
            break;
        }
        esc_carry = esc_next;
        str_carry = ((in_string as i64) >> 63) as u64;
        i += 64;
    }
    (carry.escaped, carry.in_string) = (esc_carry, str_carry);
    i
}
