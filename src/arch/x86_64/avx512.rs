//! AVX-512F + AVX-512BW kernels: a 64-byte block in one register, mask registers straight from the
//! compares.

use std::arch::x86_64::{
    __m512i, _mm_loadu_si128, _mm512_and_si512, _mm512_broadcast_i32x4, _mm512_cmpeq_epi8_mask,
    _mm512_cmple_epu8_mask, _mm512_cmplt_epi8_mask, _mm512_loadu_si512, _mm512_maskz_loadu_epi8,
    _mm512_movepi8_mask, _mm512_or_si512, _mm512_set1_epi8, _mm512_shuffle_epi8, _mm512_srli_epi16,
    _mm512_sub_epi8, _mm512_test_epi8_mask, _mm512_xor_si512,
};

use crate::arch::generic::{Vector, kernel_entry_points, stops};

/// Proof that this CPU runs AVX-512F, AVX-512BW, BMI1 and PCLMULQDQ: only [`Avx512::detect`]
/// creates one, and every kernel and every [`Vector`] operation of this file is a safe method on
/// it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx512(());

impl Avx512 {
    /// The token, when run-time detection finds every feature the kernels enable.
    pub(crate) fn detect() -> Option<Avx512> {
        (std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("pclmulqdq"))
        .then_some(Avx512(()))
    }
}

kernel_entry_points!(Avx512, "avx512f,avx512bw,bmi1,pclmulqdq");

/// A block is one register; a mask is the mask register a compare gives (bit `p` is byte `p`).
impl Vector for Avx512 {
    type V = __m512i;
    type Mask = u64;

    #[inline(always)]
    fn load(self, block: &[u8; 64]) -> __m512i {
        // SAFETY: the token proves AVX-512F; the load reads the 64 bytes of `block`, with no
        // alignment requirement.
        unsafe { _mm512_loadu_si512(block.as_ptr().cast()) }
    }

    #[inline(always)]
    fn splat(self, byte: u8) -> __m512i {
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_set1_epi8(byte as i8) }
    }

    #[inline(always)]
    fn table(self, table: &[u8; 16]) -> __m512i {
        // SAFETY: the token proves AVX-512F; the 128-bit unaligned load reads the 16 bytes of
        // `table`.
        unsafe { _mm512_broadcast_i32x4(_mm_loadu_si128(table.as_ptr().cast())) }
    }

    #[inline(always)]
    fn or(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_or_si512(a, b) }
    }

    #[inline(always)]
    fn and(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_and_si512(a, b) }
    }

    #[inline(always)]
    fn xor(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: the token proves AVX-512F.
        unsafe { _mm512_xor_si512(a, b) }
    }

    #[inline(always)]
    fn sub(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: the token proves AVX-512BW.
        unsafe { _mm512_sub_epi8(a, b) }
    }

    #[inline(always)]
    fn lookup_low(self, table: __m512i, v: __m512i) -> __m512i {
        // SAFETY: the token proves AVX-512BW. A byte with its top bit set shuffles in 0.
        unsafe { _mm512_shuffle_epi8(table, v) }
    }

    #[inline(always)]
    fn lookup_high(self, table: __m512i, v: __m512i) -> __m512i {
        // SAFETY: the token proves AVX-512BW.
        let high = unsafe { _mm512_srli_epi16::<4>(v) };
        self.lookup_low(table, self.and(high, self.splat(0x0f)))
    }

    #[inline(always)]
    fn eq(self, a: __m512i, b: __m512i) -> u64 {
        // SAFETY: the token proves AVX-512BW.
        unsafe { _mm512_cmpeq_epi8_mask(a, b) }
    }

    #[inline(always)]
    fn le(self, a: __m512i, b: __m512i) -> u64 {
        // SAFETY: the token proves AVX-512BW.
        unsafe { _mm512_cmple_epu8_mask(a, b) }
    }

    #[inline(always)]
    fn lt_signed(self, a: __m512i, b: __m512i) -> u64 {
        // SAFETY: the token proves AVX-512BW.
        unsafe { _mm512_cmplt_epi8_mask(a, b) }
    }

    #[inline(always)]
    fn high(self, v: __m512i) -> u64 {
        // SAFETY: the token proves AVX-512BW.
        unsafe { _mm512_movepi8_mask(v) }
    }

    #[inline(always)]
    fn bit5(self, v: __m512i) -> u64 {
        // SAFETY: the token proves AVX-512BW.
        unsafe { _mm512_test_epi8_mask(v, _mm512_set1_epi8(0x20)) }
    }

    #[inline(always)]
    fn or_mask(self, a: u64, b: u64) -> u64 {
        a | b
    }

    #[inline(always)]
    fn bits(self, m: u64) -> u64 {
        m
    }

    #[inline(always)]
    fn first(self, m: u64) -> Option<u32> {
        (m != 0).then(|| m.trailing_zeros())
    }

    #[inline(always)]
    fn prefix_xor(self, x: u64) -> u64 {
        // SAFETY: the token proves PCLMULQDQ.
        unsafe { super::prefix_xor(x) }
    }

    /// One masked load.
    #[inline(always)]
    fn scan_rest<const NON_ASCII: bool>(self, bytes: &[u8], from: usize) -> usize {
        let n = bytes.len();
        if from < n {
            let live = (1u64 << (n - from)) - 1;
            // SAFETY: the token proves AVX-512BW; masked-off lanes are not read (AVX-512BW masked
            // loads suppress faults there), and the `n - from < 64` live lanes are inside `bytes`.
            let v = unsafe { _mm512_maskz_loadu_epi8(live, bytes.as_ptr().add(from).cast()) };
            let m = stops::<Self, NON_ASCII>(self, v) & live;
            if m != 0 {
                return from + m.trailing_zeros() as usize;
            }
        }
        n
    }
}
