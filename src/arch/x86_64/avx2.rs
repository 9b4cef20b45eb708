//! AVX2 + PCLMULQDQ kernels: 64-byte blocks as two 32-byte halves.

use std::arch::x86_64::{
    __m256i, _mm_loadu_si128, _mm256_and_si256, _mm256_broadcastsi128_si256, _mm256_cmpeq_epi8,
    _mm256_cmpgt_epi8, _mm256_loadu_si256, _mm256_max_epu8, _mm256_min_epu8, _mm256_movemask_epi8,
    _mm256_or_si256, _mm256_set1_epi8, _mm256_setzero_si256, _mm256_shuffle_epi8,
    _mm256_slli_epi16, _mm256_srli_epi16, _mm256_sub_epi8, _mm256_xor_si256,
};

use super::prefix_xor;
use crate::arch::bits::escapes;
use crate::arch::{
    Blocks, ESCAPE_HI, ESCAPE_LO, JsonMasks, StringCarry, StringMasks, Structurals, WHITESPACE,
    portable,
};

/// Proof that this CPU runs AVX2 and PCLMULQDQ: only [`Avx2::detect`] creates one, and every kernel of
/// this file is a safe method on it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// The token, when run-time detection finds every feature the kernels below enable.
    pub(crate) fn detect() -> Option<Avx2> {
        (std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("pclmulqdq"))
        .then_some(Avx2(()))
    }

    /// See [`Kernels::scan_string`](crate::arch::Kernels::scan_string).
    #[inline]
    pub(crate) fn scan_string<const NON_ASCII: bool>(self, bytes: &[u8]) -> usize {
        // SAFETY: `self` exists, so `detect` found AVX2.
        unsafe { scan_string::<NON_ASCII>(bytes) }
    }

    /// See [`Kernels::string_blocks`](crate::arch::Kernels::string_blocks).
    #[inline]
    pub(crate) fn string_blocks(
        self,
        bytes: &[u8],
        sink: impl FnMut(usize, StringMasks) -> bool,
    ) -> Blocks {
        // SAFETY: `self` exists, so `detect` found AVX2.
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
        // SAFETY: `self` exists, so `detect` found AVX2 and PCLMULQDQ.
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
        // SAFETY: `self` exists, so `detect` found AVX2 and PCLMULQDQ.
        unsafe { structural_blocks(bytes, carry, sink) }
    }
}

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

/// The stop mask of one 32-byte vector (see `Kernels::scan_string`).
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

/// See [`Kernels::scan_string`](crate::arch::Kernels::scan_string).
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn scan_string<const NON_ASCII: bool>(bytes: &[u8]) -> usize {
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
    portable::scan_tail::<NON_ASCII>(bytes, i)
}

/// See [`Kernels::structural_blocks`](crate::arch::Kernels::structural_blocks).
///
/// # Safety
/// The CPU must support AVX2 and PCLMULQDQ.
#[target_feature(enable = "avx2,pclmulqdq")]
unsafe fn structural_blocks<F: FnMut(usize, Structurals) -> bool>(
    bytes: &[u8],
    carry: &mut StringCarry,
    mut sink: F,
) -> usize {
    let n = bytes.len();
    let ptr = bytes.as_ptr();
    let quote_v = _mm256_set1_epi8(b'"' as i8);
    let backslash_v = _mm256_set1_epi8(b'\\' as i8);
    let bit5 = _mm256_set1_epi8(0x20);
    let open_v = _mm256_set1_epi8(b'{' as i8);
    let close_v = _mm256_set1_epi8(b'}' as i8);
    let mut i = 0;
    // The carries live in registers inside the loop and go back to `carry` on exit.
    let (mut esc_carry, mut str_carry) = (carry.escaped, carry.in_string);
    while i + 64 <= n {
        // SAFETY: `i + 64 <= n`: both 32-byte loads are inside `bytes`.
        let (lo, hi) = unsafe { (load(ptr.add(i)), load(ptr.add(i + 32))) };
        let quote =
            bits(_mm256_cmpeq_epi8(lo, quote_v)) | (bits(_mm256_cmpeq_epi8(hi, quote_v)) << 32);
        let backslash = bits(_mm256_cmpeq_epi8(lo, backslash_v))
            | (bits(_mm256_cmpeq_epi8(hi, backslash_v)) << 32);
        // `[` | 0x20 == `{` and `]` | 0x20 == `}`; no other byte maps there.
        let (flo, fhi) = (_mm256_or_si256(lo, bit5), _mm256_or_si256(hi, bit5));
        let opens =
            bits(_mm256_cmpeq_epi8(flo, open_v)) | (bits(_mm256_cmpeq_epi8(fhi, open_v)) << 32);
        let closes =
            bits(_mm256_cmpeq_epi8(flo, close_v)) | (bits(_mm256_cmpeq_epi8(fhi, close_v)) << 32);
        let curly = bits(_mm256_cmpeq_epi8(_mm256_and_si256(lo, bit5), bit5))
            | (bits(_mm256_cmpeq_epi8(_mm256_and_si256(hi, bit5), bit5)) << 32);
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

/// The string-skipping masks of one 32-byte vector, in the low 32 bits of each field.
#[inline]
#[target_feature(enable = "avx2")]
fn string_masks(v: __m256i, lo_t: __m256i, hi_t: __m256i) -> StringMasks {
    let c = _mm256_set1_epi8(0x1f);
    // Bytes >= 0x80 select 0 from the low table; their high nibble selects 0 from the high one.
    let class = _mm256_and_si256(
        _mm256_shuffle_epi8(lo_t, v),
        _mm256_shuffle_epi8(
            hi_t,
            _mm256_and_si256(_mm256_srli_epi16::<4>(v), _mm256_set1_epi8(0x0f)),
        ),
    );
    // `"` or below 0x20: flipping bit 1 maps `"` to 0x20 and keeps 0x00-0x1f in place as a set.
    let flipped = _mm256_xor_si256(v, _mm256_set1_epi8(2));
    let space = _mm256_set1_epi8(0x20);
    StringMasks {
        quote_or_control: bits(_mm256_cmpeq_epi8(_mm256_max_epu8(flipped, space), space)),
        quote: bits(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8))),
        backslash: bits(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8))),
        // Unsigned `v <= 0x1f`  <=>  max(v, 0x1f) == 0x1f.
        control: bits(_mm256_cmpeq_epi8(_mm256_max_epu8(v, c), c)),
        non_ascii: bits(v),
        simple_escape: !bits(_mm256_cmpeq_epi8(class, _mm256_setzero_si256())) & 0xffff_ffff,
        u: bits(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'u' as i8))),
    }
}

/// See [`Kernels::string_blocks`](crate::arch::Kernels::string_blocks).
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn string_blocks<F: FnMut(usize, StringMasks) -> bool>(bytes: &[u8], mut sink: F) -> Blocks {
    let n = bytes.len();
    let ptr = bytes.as_ptr();
    // SAFETY: both tables are 16 bytes long, exactly what a 128-bit unaligned load reads.
    let (lo_t, hi_t) = unsafe {
        (
            _mm256_broadcastsi128_si256(_mm_loadu_si128(ESCAPE_LO.as_ptr().cast())),
            _mm256_broadcastsi128_si256(_mm_loadu_si128(ESCAPE_HI.as_ptr().cast())),
        )
    };
    // Every accepted block or-ed together: bit 7 of a byte says whether any of them was non-ASCII.
    let mut high = _mm256_setzero_si256();
    let mut i = 0;
    while i + 64 <= n {
        // SAFETY: `i + 64 <= n`: both 32-byte loads are inside `bytes`.
        let (va, vb) = unsafe { (load(ptr.add(i)), load(ptr.add(i + 32))) };
        let (a, b) = (string_masks(va, lo_t, hi_t), string_masks(vb, lo_t, hi_t));
        let masks = StringMasks {
            quote_or_control: a.quote_or_control | (b.quote_or_control << 32),
            quote: a.quote | (b.quote << 32),
            backslash: a.backslash | (b.backslash << 32),
            control: a.control | (b.control << 32),
            non_ascii: a.non_ascii | (b.non_ascii << 32),
            simple_escape: a.simple_escape | (b.simple_escape << 32),
            u: a.u | (b.u << 32),
        };
        if !sink(i, masks) {
            break;
        }
        high = _mm256_or_si256(high, _mm256_or_si256(va, vb));
        i += 64;
    }
    Blocks {
        end: i,
        non_ascii: _mm256_movemask_epi8(high) != 0,
    }
}

/// See [`Kernels::json_blocks`](crate::arch::Kernels::json_blocks).
///
/// # Safety
/// The CPU must support AVX2 and PCLMULQDQ.
#[target_feature(enable = "avx2,pclmulqdq")]
unsafe fn json_blocks<F: FnMut(usize, JsonMasks) -> bool>(
    bytes: &[u8],
    carry: &mut StringCarry,
    mut sink: F,
) -> usize {
    let n = bytes.len();
    let ptr = bytes.as_ptr();
    let bit5 = _mm256_set1_epi8(0x20);
    let c = _mm256_set1_epi8(0x1f);
    let zero_v = _mm256_set1_epi8(b'0' as i8);
    let nine_v = _mm256_set1_epi8(9);
    // SAFETY: the table is 16 bytes long, exactly what a 128-bit unaligned load reads.
    let ws_t = _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(WHITESPACE.as_ptr().cast()) });
    // The 64-bit mask of `byte` in the block held as two halves.
    let eq = |lo: __m256i, hi: __m256i, b: u8| {
        let t = _mm256_set1_epi8(b as i8);
        bits(_mm256_cmpeq_epi8(lo, t)) | (bits(_mm256_cmpeq_epi8(hi, t)) << 32)
    };
    let mut i = 0;
    let (mut esc_carry, mut str_carry) = (carry.escaped, carry.in_string);
    while i + 64 <= n {
        // SAFETY: `i + 64 <= n`: both 32-byte loads are inside `bytes`.
        let (lo, hi) = unsafe { (load(ptr.add(i)), load(ptr.add(i + 32))) };
        let backslash = eq(lo, hi, b'\\');
        // `[` | 0x20 == `{` and `]` | 0x20 == `}`; no other byte maps there.
        let (flo, fhi) = (_mm256_or_si256(lo, bit5), _mm256_or_si256(hi, bit5));
        let (open, close) = (eq(flo, fhi, b'{'), eq(flo, fhi, b'}'));
        let (colon, comma) = (eq(lo, hi, b':'), eq(lo, hi, b','));
        let ops = open | close | colon | comma;
        // Unsigned `v - '0' <= 9`  <=>  min(v - '0', 9) == v - '0'.
        let digit = |v: __m256i| {
            let d = _mm256_sub_epi8(v, zero_v);
            bits(_mm256_cmpeq_epi8(_mm256_min_epu8(d, nine_v), d))
        };
        // One lookup by the low nibble: only a whitespace byte finds itself in the table (a byte
        // >= 0x80 looks up 0).
        let ws = bits(_mm256_cmpeq_epi8(_mm256_shuffle_epi8(ws_t, lo), lo))
            | (bits(_mm256_cmpeq_epi8(_mm256_shuffle_epi8(ws_t, hi), hi)) << 32);
        let mut esc_next = esc_carry;
        let escaped = escapes(backslash, &mut esc_next);
        let quotes = eq(lo, hi, b'"') & !escaped;
        let in_string = prefix_xor(quotes) ^ str_carry;
        // Unsigned `v <= 0x1f`  <=>  max(v, 0x1f) == 0x1f.
        let control = bits(_mm256_cmpeq_epi8(_mm256_max_epu8(lo, c), c))
            | (bits(_mm256_cmpeq_epi8(_mm256_max_epu8(hi, c), c)) << 32);
        let masks = JsonMasks {
            quotes,
            in_string,
            ops: ops & !in_string,
            ws,
            backslash,
            control,
            non_ascii: bits(lo) | (bits(hi) << 32),
            open,
            close,
            // Of the brackets, `{` and `}` are the ones with bit 5 set (moved to bit 7 for the
            // byte mask).
            curly: (open | close)
                & (bits(_mm256_slli_epi16::<2>(lo)) | (bits(_mm256_slli_epi16::<2>(hi)) << 32)),
            colon,
            comma,
            digit: digit(lo) | (digit(hi) << 32),
            zero: eq(lo, hi, b'0'),
            minus: eq(lo, hi, b'-'),
            dot: eq(lo, hi, b'.'),
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
