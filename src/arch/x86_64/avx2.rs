//! AVX2 + PCLMULQDQ kernels: a 64-byte block as two 32-byte halves.

use std::arch::x86_64::{
    __m256i, _mm_loadu_si128, _mm256_and_si256, _mm256_broadcastsi128_si256, _mm256_cmpeq_epi8,
    _mm256_cmpgt_epi8, _mm256_loadu_si256, _mm256_max_epu8, _mm256_movemask_epi8, _mm256_or_si256,
    _mm256_set1_epi8, _mm256_shuffle_epi8, _mm256_slli_epi16, _mm256_srli_epi16, _mm256_sub_epi8,
    _mm256_xor_si256,
};

use crate::arch::generic::{Vector, kernel_entry_points, stops};
use crate::arch::portable;

/// Proof that this CPU runs AVX2 and PCLMULQDQ: only [`Avx2::detect`] creates one, and every kernel
/// and every [`Vector`] operation of this file is a safe method on it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// The token, when run-time detection finds every feature the kernels enable.
    pub(crate) fn detect() -> Option<Avx2> {
        (std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("pclmulqdq"))
        .then_some(Avx2(()))
    }
}

kernel_entry_points!(Avx2, "avx2,pclmulqdq");

/// The bits of the lanes' top bits (a comparison's lanes are 0x00 or 0xff).
#[inline(always)]
fn movemask(_: Avx2, v: __m256i) -> u64 {
    // SAFETY: the token proves AVX2.
    u64::from(unsafe { _mm256_movemask_epi8(v) } as u32)
}

/// A block is two halves, `[bytes 0..32, bytes 32..64]`; a mask is two vectors whose lanes' top
/// bits are the mask (`_mm256_movemask_epi8` reads them).
impl Vector for Avx2 {
    type V = [__m256i; 2];
    type Mask = [__m256i; 2];

    #[inline(always)]
    fn load(self, block: &[u8; 64]) -> Self::V {
        let p = block.as_ptr();
        // SAFETY: the token proves AVX2; both 32-byte loads are inside `block`, and `loadu` has no
        // alignment requirement.
        unsafe {
            [
                _mm256_loadu_si256(p.cast()),
                _mm256_loadu_si256(p.add(32).cast()),
            ]
        }
    }

    #[inline(always)]
    fn splat(self, byte: u8) -> Self::V {
        // SAFETY: the token proves AVX2.
        let v = unsafe { _mm256_set1_epi8(byte as i8) };
        [v, v]
    }

    #[inline(always)]
    fn table(self, table: &[u8; 16]) -> Self::V {
        // SAFETY: the token proves AVX2; the 128-bit unaligned load reads the 16 bytes of `table`.
        let v = unsafe { _mm256_broadcastsi128_si256(_mm_loadu_si128(table.as_ptr().cast())) };
        [v, v]
    }

    #[inline(always)]
    fn or(self, a: Self::V, b: Self::V) -> Self::V {
        // SAFETY: the token proves AVX2.
        unsafe { [_mm256_or_si256(a[0], b[0]), _mm256_or_si256(a[1], b[1])] }
    }

    #[inline(always)]
    fn and(self, a: Self::V, b: Self::V) -> Self::V {
        // SAFETY: the token proves AVX2.
        unsafe { [_mm256_and_si256(a[0], b[0]), _mm256_and_si256(a[1], b[1])] }
    }

    #[inline(always)]
    fn xor(self, a: Self::V, b: Self::V) -> Self::V {
        // SAFETY: the token proves AVX2.
        unsafe { [_mm256_xor_si256(a[0], b[0]), _mm256_xor_si256(a[1], b[1])] }
    }

    #[inline(always)]
    fn sub(self, a: Self::V, b: Self::V) -> Self::V {
        // SAFETY: the token proves AVX2.
        unsafe { [_mm256_sub_epi8(a[0], b[0]), _mm256_sub_epi8(a[1], b[1])] }
    }

    #[inline(always)]
    fn lookup_low(self, table: Self::V, v: Self::V) -> Self::V {
        // SAFETY: the token proves AVX2. A byte with its top bit set shuffles in 0.
        unsafe {
            [
                _mm256_shuffle_epi8(table[0], v[0]),
                _mm256_shuffle_epi8(table[1], v[1]),
            ]
        }
    }

    #[inline(always)]
    fn lookup_high(self, table: Self::V, v: Self::V) -> Self::V {
        let nibble = self.splat(0x0f);
        // SAFETY: the token proves AVX2.
        let high = unsafe { [_mm256_srli_epi16::<4>(v[0]), _mm256_srli_epi16::<4>(v[1])] };
        self.lookup_low(table, self.and(high, nibble))
    }

    #[inline(always)]
    fn eq(self, a: Self::V, b: Self::V) -> Self::Mask {
        // SAFETY: the token proves AVX2.
        unsafe { [_mm256_cmpeq_epi8(a[0], b[0]), _mm256_cmpeq_epi8(a[1], b[1])] }
    }

    #[inline(always)]
    fn le(self, a: Self::V, b: Self::V) -> Self::Mask {
        // Unsigned `a <= b`  <=>  max(a, b) == b.
        // SAFETY: the token proves AVX2.
        let max = unsafe { [_mm256_max_epu8(a[0], b[0]), _mm256_max_epu8(a[1], b[1])] };
        self.eq(max, b)
    }

    #[inline(always)]
    fn lt_signed(self, a: Self::V, b: Self::V) -> Self::Mask {
        // SAFETY: the token proves AVX2.
        unsafe { [_mm256_cmpgt_epi8(b[0], a[0]), _mm256_cmpgt_epi8(b[1], a[1])] }
    }

    #[inline(always)]
    fn high(self, v: Self::V) -> Self::Mask {
        v
    }

    #[inline(always)]
    fn bit5(self, v: Self::V) -> Self::Mask {
        // Shifting each 16-bit lane left by 2 moves bit 5 of each byte to its top bit.
        // SAFETY: the token proves AVX2.
        unsafe { [_mm256_slli_epi16::<2>(v[0]), _mm256_slli_epi16::<2>(v[1])] }
    }

    #[inline(always)]
    fn or_mask(self, a: Self::Mask, b: Self::Mask) -> Self::Mask {
        self.or(a, b)
    }

    #[inline(always)]
    fn bits(self, m: Self::Mask) -> u64 {
        movemask(self, m[0]) | (movemask(self, m[1]) << 32)
    }

    #[inline(always)]
    fn first(self, m: Self::Mask) -> Option<u32> {
        let bits = self.bits(m);
        (bits != 0).then(|| bits.trailing_zeros())
    }

    #[inline(always)]
    fn prefix_xor(self, x: u64) -> u64 {
        // SAFETY: the token proves PCLMULQDQ.
        unsafe { super::prefix_xor(x) }
    }

    /// One 32-byte vector, then byte by byte.
    #[inline(always)]
    fn scan_rest<const NON_ASCII: bool>(self, bytes: &[u8], from: usize) -> usize {
        if let Some(half) = bytes[from..].first_chunk::<32>() {
            // SAFETY: the token proves AVX2; the load reads the 32 bytes of `half`, with no
            // alignment requirement.
            let v = unsafe { _mm256_loadu_si256(half.as_ptr().cast()) };
            // The stops of `v`: those of the block `v` twice, whose second half goes unused.
            let m = movemask(self, stops::<Self, NON_ASCII>(self, [v, v])[0]);
            if m != 0 {
                return from + m.trailing_zeros() as usize;
            }
            return portable::scan_tail::<NON_ASCII>(bytes, from + 32);
        }
        portable::scan_tail::<NON_ASCII>(bytes, from)
    }
}
