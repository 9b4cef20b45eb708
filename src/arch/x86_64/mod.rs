//! x86-64 kernels, one instruction set per file. Each file defines a token type that only run-time
//! feature detection can create, implements the generic kernels' `Vector` trait on it and exposes
//! its kernels as safe methods on it; the `unsafe` calls into intrinsics and `#[target_feature]`
//! functions are justified by the token's existence and live only here.

pub(crate) mod avx2;
pub(crate) mod avx512;
pub(crate) mod sse2;

use std::arch::x86_64::{
    __m128i, _mm_clmulepi64_si128, _mm_cvtsi128_si64, _mm_set_epi64x, _mm_set1_epi8,
};

/// Prefix XOR of `quotes` (bit `i` of the result is the parity of quotes at or below `i`): a carry-less
/// multiply by all ones.
#[inline]
#[target_feature(enable = "pclmulqdq")]
fn prefix_xor(quotes: u64) -> u64 {
    let a: __m128i = _mm_set_epi64x(0, quotes as i64);
    let ones = _mm_set1_epi8(-1);
    _mm_cvtsi128_si64(_mm_clmulepi64_si128::<0>(a, ones)) as u64
}
