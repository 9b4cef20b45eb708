//! SplitMix64, the one seeded generator of ssegate's tools and tests: the demo's cut plans, the
//! fault proxy's random cuts, the `big_result` prose (`ssegate-testkit`, which re-exports this
//! crate as `ssegate_testkit::rng`), `ssegate events --split-random SEED` (`ssegate-cli`) and the
//! guard model's server ids (the unpublished `ssegate-oracles`). One crate, no dependencies, so
//! each of them draws the same sequence from the same seed. Its sequences are part of what a seed
//! reproduces, so they must not change.
#![forbid(unsafe_code)]
#![deny(missing_docs, missing_debug_implementations)]

/// SplitMix64 (Steele, Lea and Flood): the state advances by the golden gamma, and each output is
/// the state mixed. The field is the state: a generator made from a seed is `SplitMix64(seed)`,
/// and from seed 0 the first value is `0xE220_A839_7B1D_CDAF`.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The generator seeded with `seed`.
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next value of the sequence.
    #[allow(clippy::should_implement_trait)] // an endless sequence: no `Option`.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value below `n` (not quite uniform: the remainder of [`SplitMix64::next`]).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    /// The reference outputs of SplitMix64 from seed 0 and 1234567: the sequences seeds reproduce.
    #[test]
    fn known_sequence() {
        let mut rng = SplitMix64(0);
        assert_eq!(
            [rng.next(), rng.next(), rng.next()],
            [
                0xE220_A839_7B1D_CDAF,
                0x6E78_9E6A_A1B9_65F4,
                0x06C4_5D18_8009_454F
            ]
        );
        let mut rng = SplitMix64(1_234_567);
        assert_eq!(rng.next(), 6_457_827_717_110_365_317);
        assert_eq!(rng.below(10), 3_203_168_211_198_807_973 % 10);
    }
}
