//! xxh3, the one hash family of the crate: the content hash of an event's data (one-shot or streamed
//! over segments, the same value for any chunking), seeded hashes of ids and the 128-bit stream
//! names of the Redis replay store.
//!
//! twox-hash selects its AVX2 stripe kernel at run time, so a binary built for baseline x86-64 hashes
//! big messages at AVX2 speed (twice its SSE2 speed on a 4 MiB result; docs/PERFORMANCE.md). The
//! values are xxh3's: the tests compare them with a second implementation (xxhash-rust), so content
//! hashes and stored stream names do not change with the implementation.
#![forbid(unsafe_code)]

use std::fmt;
use std::hash::Hasher;

use twox_hash::xxhash3_64::{RawHasher, SecretBuffer};

/// xxh3-64 of `bytes` with the default seed and secret.
#[inline]
pub(crate) fn xxh3_64(bytes: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(bytes)
}

/// xxh3-64 of `bytes` under `seed`.
#[inline]
pub(crate) fn xxh3_64_with_seed(bytes: &[u8], seed: u64) -> u64 {
    twox_hash::XxHash3_64::oneshot_with_seed(seed, bytes)
}

/// xxh3-128 of `bytes` with the default seed and secret.
#[cfg(any(feature = "rmcp-server", test))]
pub(crate) fn xxh3_128(bytes: &[u8]) -> u128 {
    twox_hash::XxHash3_128::oneshot(bytes)
}

/// Streaming xxh3-64 with the default seed and secret: no allocation (the secret is the static
/// default, the stripe buffer is inline).
#[derive(Clone)]
pub(crate) struct Xxh3(RawHasher<&'static [u8; twox_hash::xxhash3_64::DEFAULT_SECRET_LENGTH]>);

impl Xxh3 {
    pub(crate) fn new() -> Xxh3 {
        Xxh3(RawHasher::new(SecretBuffer::default()))
    }

    /// Starts over, as if new.
    #[inline]
    pub(crate) fn reset(&mut self) {
        *self = Xxh3::new();
    }

    #[inline]
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    /// The hash of everything written since the start.
    #[inline]
    pub(crate) fn digest(&self) -> u64 {
        self.0.finish()
    }
}

impl Default for Xxh3 {
    fn default() -> Xxh3 {
        Xxh3::new()
    }
}

impl fmt::Debug for Xxh3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Xxh3").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic bytes (an LCG), so the tests need no random source.
    fn bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (x >> 56) as u8
            })
            .collect()
    }

    /// The lengths where xxh3 changes method (0, 1-3, 4-8, 9-16, 17-128, 129-240, long), where the
    /// streaming state's 256-byte buffer fills, and where a 1024-byte block of stripes ends.
    const LENGTHS: &[usize] = &[
        0,
        1,
        3,
        4,
        8,
        9,
        16,
        17,
        128,
        129,
        240,
        241,
        255,
        256,
        257,
        1023,
        1024,
        1025,
        4096,
        65_537,
        1 << 20,
    ];

    /// Every value equals a second, independent implementation's (xxhash-rust): hashes that are
    /// compared across the crate's versions and stored in Redis do not change.
    #[test]
    fn values_match_xxhash_rust() {
        for (k, &len) in LENGTHS.iter().enumerate() {
            let b = bytes(len, k as u64);
            assert_eq!(xxh3_64(&b), xxhash_rust::xxh3::xxh3_64(&b), "len {len}");
            for seed in [0, 1, 0x5EED_0000_0000_0001] {
                assert_eq!(
                    xxh3_64_with_seed(&b, seed),
                    xxhash_rust::xxh3::xxh3_64_with_seed(&b, seed),
                    "len {len} seed {seed}"
                );
            }
            assert_eq!(xxh3_128(&b), xxhash_rust::xxh3::xxh3_128(&b), "len {len}");
        }
    }

    /// Streaming gives the one-shot value for any way of cutting the input, after a reset too.
    #[test]
    fn streaming_is_chunking_independent() {
        let mut h = Xxh3::new();
        for (k, &len) in LENGTHS.iter().enumerate() {
            let b = bytes(len, 100 + k as u64);
            let want = xxhash_rust::xxh3::xxh3_64(&b);
            for step in [1, 7, 63, 64, 65, 255, 256, 4096, usize::MAX] {
                h.update(b"stale bytes a reset must forget");
                h.reset();
                let mut at = 0;
                let mut n = 0;
                while at < b.len() {
                    // Steps that vary, so pieces straddle the buffer's and the stripes' edges.
                    let take = step.saturating_add(n % 3).min(b.len() - at);
                    h.update(&b[at..at + take]);
                    at += take;
                    n += 1;
                }
                assert_eq!(h.digest(), want, "len {len} step {step}");
            }
        }
    }
}
