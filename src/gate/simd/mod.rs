//! Instruction-set dispatch for the gate's two kernels: the string scanner (first quote, backslash,
//! control byte and optionally non-ASCII byte) and the stage-1 bracket balancer.
//!
//! The choice is made once per process ([`Isa::detect`], cached in an atomic): AVX-512BW, then
//! AVX2 + PCLMULQDQ, then the portable code in [`scalar`], which is also the reference every kernel is
//! tested against. `--cfg ssegate_disable_simd` and Miri force the portable path.

pub(crate) mod scalar;
#[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
mod x86_64;

use std::sync::atomic::{AtomicU8, Ordering};

use super::stage1::Stage1;

/// An instruction set the gate's kernels can run on.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isa {
    /// Portable Rust (SWAR string scanning, byte-at-a-time bracket balancing): always available.
    Portable,
    /// AVX2 and PCLMULQDQ (x86-64).
    Avx2,
    /// AVX-512BW and PCLMULQDQ (x86-64).
    Avx512,
}

/// 0: not detected yet; otherwise `Isa as u8 + 1`.
static DETECTED: AtomicU8 = AtomicU8::new(0);

impl Isa {
    /// Every variant, best last.
    pub const ALL: [Isa; 3] = [Isa::Portable, Isa::Avx2, Isa::Avx512];

    /// The best instruction set this CPU supports (detected once, then cached).
    pub fn detect() -> Isa {
        match DETECTED.load(Ordering::Relaxed) {
            1 => Isa::Portable,
            2 => Isa::Avx2,
            3 => Isa::Avx512,
            _ => {
                let isa = if Isa::Avx512.is_available() {
                    Isa::Avx512
                } else if Isa::Avx2.is_available() {
                    Isa::Avx2
                } else {
                    Isa::Portable
                };
                DETECTED.store(isa as u8 + 1, Ordering::Relaxed);
                isa
            }
        }
    }

    /// Whether this CPU, and this build, can run `self`.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("pclmulqdq")
            }
            #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
            Isa::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("pclmulqdq")
            }
            #[cfg(not(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri))))]
            Isa::Avx2 | Isa::Avx512 => false,
        }
    }

    /// A short lower-case name (`portable`, `avx2`, `avx512`), for bench ids.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }
}

/// Index of the first byte of `bytes` that is `"`, `\`, below 0x20, or (with `NON_ASCII`) at least 0x80;
/// `bytes.len()` when there is none.
#[inline]
pub(crate) fn scan_string<const NON_ASCII: bool>(isa: Isa, bytes: &[u8]) -> usize {
    match isa {
        #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
        // SAFETY: a gate only holds `Isa::Avx512` after `Isa::is_available` said the CPU has AVX-512BW
        // (`Config::build` / `Config::build_with_isa`).
        Isa::Avx512 => unsafe { x86_64::avx512::scan_string::<NON_ASCII>(bytes) },
        #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
        // SAFETY: as above, `Isa::Avx2` is only held after detection found AVX2.
        Isa::Avx2 => unsafe { x86_64::avx2::scan_string::<NON_ASCII>(bytes) },
        _ => scalar::scan_string::<NON_ASCII>(bytes),
    }
}

/// Runs the stage-1 bracket balancer over `bytes` while `state` is inside the top-level container;
/// returns how many bytes it consumed (all of them, unless the top-level container closed or the input
/// became invalid).
#[inline]
pub(crate) fn stage1_inside(isa: Isa, state: &mut Stage1, bytes: &[u8]) -> usize {
    match isa {
        #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
        // SAFETY: a gate only holds `Isa::Avx512` after `Isa::is_available` found AVX-512BW and PCLMULQDQ.
        Isa::Avx512 => unsafe { x86_64::avx512::stage1_inside(state, bytes) },
        #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
        // SAFETY: a gate only holds `Isa::Avx2` after `Isa::is_available` found AVX2 and PCLMULQDQ.
        Isa::Avx2 => unsafe { x86_64::avx2::stage1_inside(state, bytes) },
        _ => state.inside_scalar(bytes, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every available kernel's string scanner against the byte-at-a-time definition, at every length
    /// and alignment mod 64, with the stop byte at every position.
    #[test]
    fn scan_string_matches_naive() {
        let naive = |bytes: &[u8], non_ascii: bool| {
            bytes
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20 || (non_ascii && b >= 0x80))
                .unwrap_or(bytes.len())
        };
        let mut buf = vec![b'a'; 64 + 200];
        for isa in Isa::ALL.into_iter().filter(|i| i.is_available()) {
            for align in 0..64 {
                for len in 0..200usize {
                    for stop in [b'"', b'\\', 0x00, 0x1f, 0x80, 0xff, b' ', 0x7f] {
                        for at in (0..len).step_by(7).chain([len.saturating_sub(1)]) {
                            buf.fill(b'a');
                            if at < len {
                                buf[align + at] = stop;
                            }
                            let s = &buf[align..align + len];
                            assert_eq!(
                                scan_string::<true>(isa, s),
                                naive(s, true),
                                "{isa:?} {align} {len} {at}"
                            );
                            assert_eq!(
                                scan_string::<false>(isa, s),
                                naive(s, false),
                                "{isa:?} {align} {len} {at}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn detect_is_cached_and_available() {
        let isa = Isa::detect();
        assert!(isa.is_available());
        assert_eq!(Isa::detect(), isa);
        if cfg!(any(ssegate_disable_simd, miri, not(target_arch = "x86_64"))) {
            assert_eq!(isa, Isa::Portable);
        }
    }
}
