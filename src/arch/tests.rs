//! Every kernel against the portable reference ([`portable`]): block masks, string scans and short
//! searches, on random and exhaustive inputs at every alignment, for each instruction set this
//! machine runs. An instruction set a test cannot run is reported, never skipped in silence
//! ([`isas_under_test`]).
#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Mutex;

use super::*;

/// The instruction sets a differential test runs: the available ones, [`Isa::Portable`] first.
///
/// A test that cannot run one says so on stderr, once per test and instruction set (written to
/// `std::io::stderr()` directly: libtest captures `eprintln!` of passing tests). With the
/// environment variable `CI` set, an x86-64 host without AVX2 fails the test (every CI machine
/// here has it, and without it no vector kernel is tested); a missing AVX-512 is only reported.
pub(crate) fn isas_under_test() -> Vec<Isa> {
    static REPORTED: Mutex<BTreeSet<(String, Isa)>> = Mutex::new(BTreeSet::new());
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a kernel test");
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    let mut run = Vec::new();
    for &isa in Isa::all() {
        if isa.is_available() {
            run.push(isa);
            continue;
        }
        let (why, required) = why_not_available(isa);
        let first = REPORTED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert((test.to_owned(), isa));
        if first {
            let _ = writeln!(
                std::io::stderr().lock(),
                "ssegate: {test}: the {} kernels are NOT TESTED: {why}",
                isa.name()
            );
        }
        assert!(
            !(ci && required),
            "CI is set and the {} kernels cannot run: {why}",
            isa.name()
        );
    }
    run
}

/// `full` natively and `small` under Miri, which interprets every intrinsic thousands of times
/// slower than the CPU runs it: the same checks on fewer inputs.
pub(crate) const fn scaled(full: usize, small: usize) -> usize {
    if cfg!(miri) { small } else { full }
}

/// The kernels of [`isas_under_test`].
pub(crate) fn kernels_under_test() -> Vec<Kernels> {
    isas_under_test()
        .into_iter()
        .filter_map(Kernels::new)
        .collect()
}

/// Why `isa` cannot run here (it is not available), and whether that fails a run under `CI`:
/// only an x86-64 CPU without AVX2 does.
fn why_not_available(isa: Isa) -> (&'static str, bool) {
    #[cfg(target_arch = "x86_64")]
    let cpu_has_avx2 = std::arch::is_x86_feature_detected!("avx2");
    #[cfg(not(target_arch = "x86_64"))]
    let cpu_has_avx2 = false;
    match isa {
        Isa::Portable => ("the portable code always runs", false),
        Isa::Neon if cfg!(not(target_arch = "aarch64")) => ("not an AArch64 build", false),
        Isa::Neon if cfg!(ssegate_disable_simd) => (
            "the ssegate_disable_simd cfg compiles the kernels out",
            false,
        ),
        // An AArch64 build without NEON (a soft-float target) has no NEON kernels compiled in.
        Isa::Neon => ("this AArch64 target does not enable NEON", false),
        Isa::Avx2 | Isa::Avx512 if cfg!(not(target_arch = "x86_64")) => {
            ("not an x86-64 build", false)
        }
        // Miri's feature detection sees the features the build enables, not the host CPU's.
        Isa::Avx2 | Isa::Avx512 if cfg!(miri) && !cfg!(ssegate_disable_simd) => (
            "Miri sees only the target features the build enables \
             (RUSTFLAGS=-Ctarget-feature=+avx2,+pclmulqdq,+avx512f,+avx512bw,+bmi1)",
            isa == Isa::Avx2,
        ),
        Isa::Avx2 | Isa::Avx512 if cfg!(ssegate_disable_simd) && cpu_has_avx2 => (
            "the ssegate_disable_simd cfg compiles the kernels out",
            false,
        ),
        Isa::Avx2 | Isa::Avx512 if cfg!(ssegate_disable_simd) => (
            "the ssegate_disable_simd cfg compiles the kernels out, and this CPU lacks AVX2",
            isa == Isa::Avx2,
        ),
        Isa::Avx2 => ("this CPU lacks AVX2 or PCLMULQDQ", true),
        Isa::Avx512 => (
            "this CPU lacks AVX-512F, AVX-512BW, BMI1 or PCLMULQDQ",
            false,
        ),
    }
}

/// Under `CI`, a missing AVX-512 is only reported, and a missing AVX2 fails the run on an x86-64
/// build with its kernels compiled in (there, an unavailable AVX2 means the CPU lacks it).
#[test]
fn only_a_missing_avx2_fails_under_ci() {
    assert!(!why_not_available(Isa::Avx512).1);
    if cfg!(ssegate_x86_kernels) {
        assert!(why_not_available(Isa::Avx2).1);
    }
}

/// Every instruction set is listed once, in declaration order (which [`Isa::detect`]'s cache and
/// the capability order rely on), under its own name; the available ones are among them,
/// the portable code first.
#[test]
fn isa_lists_are_consistent() {
    let all = Isa::all();
    for (i, isa) in all.iter().enumerate() {
        assert_eq!(*isa as usize, i, "{isa:?}");
    }
    assert!(all.windows(2).all(|w| w[0] < w[1]));
    let names: BTreeSet<&str> = all.iter().map(|isa| isa.name()).collect();
    assert_eq!(names.len(), all.len());
    let available: Vec<Isa> = Isa::available().collect();
    assert_eq!(available.first(), Some(&Isa::Portable));
    assert!(
        available
            .iter()
            .all(|isa| all.contains(isa) && isa.is_available())
    );
    assert_eq!(available.last(), Some(&Isa::detect()));
    assert_eq!(isas_under_test(), available);
}

/// Every kernel's JSON masks and carries against the byte automaton, across blocks and calls.
#[test]
fn json_blocks_match_naive() {
    for kernels in kernels_under_test().into_iter().filter(|k| k.has_blocks()) {
        for seed in 0..scaled(300, 8) as u64 {
            let alphabet: &[u8] = if seed % 2 == 0 {
                b"\"\\{}[]:,ab \t\n\r1e-.0\x01\xc3\xa9"
            } else {
                b"\\\\\\\"[{:"
            };
            let bytes = random_bytes(seed, 64 * 9, alphabet);
            let mut carry = StringCarry {
                escaped: seed / 2 % 2,
                in_string: if seed / 4 % 2 == 1 { !0 } else { 0 },
            };
            let mut want_carry = carry;
            let want = portable::json_masks(&bytes, &mut want_carry);
            let mut got = Vec::new();
            for half in [&bytes[..64 * 4], &bytes[64 * 4..]] {
                let stop = kernels.json_blocks(half, &mut carry, |_, m| {
                    got.push(m);
                    true
                });
                assert_eq!(stop, half.len());
            }
            assert_eq!(got, want, "{kernels:?} seed {seed}");
            assert_eq!(carry, want_carry, "{kernels:?} seed {seed}");
            let mut carry2 = StringCarry::default();
            let mut want2 = StringCarry::default();
            portable::json_masks(&bytes[..128], &mut want2);
            let stop = kernels.json_blocks(&bytes, &mut carry2, |at, _| at < 128);
            assert_eq!((stop, carry2), (128, want2), "{kernels:?} seed {seed}");
        }
    }
}

fn random_bytes(seed: u64, len: usize, alphabet: &[u8]) -> Vec<u8> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (s >> 33) as usize;
            if r.is_multiple_of(16) {
                (r >> 8) as u8
            } else {
                alphabet[(r >> 4) % alphabet.len()]
            }
        })
        .collect()
}

const ALPHABET: &[u8] = b"\"\\{}[]:,abu nrt/0\x01\xc3\xa9\x7f";

/// Every kernel's string masks against the definitions, on random blocks at every alignment.
#[test]
fn string_blocks_match_naive() {
    for kernels in kernels_under_test() {
        for seed in 0..scaled(200, 4) as u64 {
            let len = 64 * 5 + (seed as usize % 64);
            let bytes = random_bytes(seed, len + 64, ALPHABET);
            for align in [0, 1, 31, 63] {
                let input = &bytes[align..align + len];
                let mut seen = Vec::new();
                let stop = kernels.string_blocks(input, |at, m| {
                    seen.push((at, m));
                    true
                });
                if !kernels.has_blocks() {
                    assert_eq!(stop, Blocks::default());
                    continue;
                }
                assert_eq!(stop.end, len / 64 * 64, "{kernels:?}");
                assert_eq!(seen.len(), len / 64);
                for (at, m) in seen {
                    assert_eq!(
                        m,
                        portable::string_masks(&input[at..at + 64]),
                        "{kernels:?} {at}"
                    );
                }
                let high = |end: usize| input[..end].iter().any(|&b| b >= 0x80);
                assert_eq!(stop.non_ascii, high(stop.end), "{kernels:?}");
                // A refusing sink stops the scan at the block it refused, whose bytes are not
                // counted.
                let stop = kernels.string_blocks(input, |at, _| at < 128);
                assert_eq!(stop.end, 128, "{kernels:?}");
                assert_eq!(stop.non_ascii, high(128), "{kernels:?}");
            }
        }
    }
}

/// Every byte value, in four blocks and at three rotations, against the definitions: the lookups
/// (the nibble tables, the quote-or-control compare) are exhaustively right, not only on the random alphabet.
#[test]
fn string_masks_cover_every_byte() {
    for kernels in kernels_under_test().into_iter().filter(|k| k.has_blocks()) {
        for rotation in [0, 1, 63] {
            let input: Vec<u8> = (0..=255u8).cycle().skip(rotation).take(256).collect();
            let mut seen = 0;
            kernels.string_blocks(&input, |at, m| {
                assert_eq!(
                    m,
                    portable::string_masks(&input[at..at + 64]),
                    "{kernels:?} {at}"
                );
                seen += 1;
                true
            });
            assert_eq!(seen, 4, "{kernels:?}");
            let high = |end: usize| input[..end].iter().any(|&b| b >= 0x80);
            for blocks in 1..=4 {
                let scan = kernels.string_blocks(&input[..64 * blocks], |_, _| true);
                assert_eq!(scan.non_ascii, high(64 * blocks), "{kernels:?}");
            }
        }
    }
}

/// Every byte value, in four blocks and at three rotations, through the JSON classification
/// (the random alphabets above cover only the bytes JSON gives a meaning).
#[test]
fn json_masks_cover_every_byte() {
    for kernels in kernels_under_test().into_iter().filter(|k| k.has_blocks()) {
        for rotation in [0, 1, 63] {
            let input: Vec<u8> = (0..=255u8).cycle().skip(rotation).take(256).collect();
            let mut want_carry = StringCarry::default();
            let want = portable::json_masks(&input, &mut want_carry);
            let mut carry = StringCarry::default();
            let mut got = Vec::new();
            kernels.json_blocks(&input, &mut carry, |_, m| {
                got.push(m);
                true
            });
            assert_eq!(got, want, "{kernels:?} rotation {rotation}");
            assert_eq!(carry, want_carry, "{kernels:?} rotation {rotation}");
        }
    }
}

/// Every kernel's structurals and carries against the byte automaton, across blocks and calls.
#[test]
fn structural_blocks_match_naive() {
    for kernels in kernels_under_test().into_iter().filter(|k| k.has_blocks()) {
        for seed in 0..scaled(300, 8) as u64 {
            let alphabet: &[u8] = if seed % 2 == 0 {
                ALPHABET
            } else {
                b"\\\\\\\"[{"
            };
            let bytes = random_bytes(seed, 64 * 9, alphabet);
            let mut carry = StringCarry {
                escaped: seed / 2 % 2,
                in_string: if seed / 4 % 2 == 1 { !0 } else { 0 },
            };
            let mut want_carry = carry;
            let want = portable::structurals(&bytes, &mut want_carry);
            // Two calls, split at a block boundary: the carry crosses calls.
            let mut got = Vec::new();
            for half in [&bytes[..64 * 4], &bytes[64 * 4..]] {
                let stop = kernels.structural_blocks(half, &mut carry, |_, s| {
                    got.push(s);
                    true
                });
                assert_eq!(stop, half.len());
            }
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.brackets, w.brackets, "{kernels:?} seed {seed} block {k}");
                assert_eq!(g.opens & g.brackets, w.opens & w.brackets);
                assert_eq!(g.curly & g.brackets, w.curly & w.brackets);
            }
            assert_eq!(got.len(), want.len());
            assert_eq!(carry, want_carry, "{kernels:?} seed {seed}");
            // Refused at block 2: the carry is the state after block 1.
            let mut carry2 = StringCarry::default();
            let mut want2 = StringCarry::default();
            portable::structurals(&bytes[..128], &mut want2);
            let stop = kernels.structural_blocks(&bytes, &mut carry2, |at, _| at < 128);
            assert_eq!((stop, carry2), (128, want2), "{kernels:?} seed {seed}");
        }
    }
}

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
    for kernels in kernels_under_test() {
        for align in (0..64).step_by(scaled(1, 31)) {
            for len in (0..200usize).step_by(scaled(1, 23)) {
                // Under Miri, every other stop byte, alternating with the length and alignment.
                let stops = [b'"', b'\\', 0x00, 0x1f, 0x80, 0xff, b' ', 0x7f];
                for &stop in stops
                    .iter()
                    .skip(scaled(0, (align + len) % 2))
                    .step_by(scaled(1, 2))
                {
                    for at in (0..len)
                        .step_by(scaled(7, 61))
                        .chain([len.saturating_sub(1)])
                    {
                        buf.fill(b'a');
                        if at < len {
                            buf[align + at] = stop;
                        }
                        let s = &buf[align..align + len];
                        assert_eq!(
                            kernels.scan_string::<true>(s),
                            naive(s, true),
                            "{kernels:?} {align} {len} {at}"
                        );
                        assert_eq!(
                            kernels.scan_string::<false>(s),
                            naive(s, false),
                            "{kernels:?} {align} {len} {at}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn escape_tables_match_the_grammar() {
    for b in 0..=255u8 {
        let class = ESCAPE_LO[usize::from(b & 0x0f)] & ESCAPE_HI[usize::from(b >> 4)];
        let want = b"\"\\/bfnrt".contains(&b);
        assert_eq!(class != 0, want, "{b:#04x}");
    }
}

#[test]
fn detect_is_cached_and_available() {
    let isa = Isa::detect();
    assert!(isa.is_available());
    assert_eq!(Isa::detect(), isa);
    assert_eq!(Kernels::best_up_to(Isa::Avx512).isa(), isa);
    if cfg!(any(
        ssegate_disable_simd,
        not(any(target_arch = "x86_64", target_arch = "aarch64"))
    )) {
        assert_eq!(isa, Isa::Portable);
    }
    // NEON is baseline on AArch64: the detection always picks it, and nothing else is available.
    if cfg!(ssegate_neon_kernels) {
        assert_eq!(isa, Isa::Neon);
        assert_eq!(
            Isa::available().collect::<Vec<_>>(),
            [Isa::Portable, Isa::Neon]
        );
    }
    // On x86-64, a NEON cap leaves the portable code only; on AArch64 an x86 cap allows NEON.
    assert_eq!(
        Kernels::best_up_to(Isa::Neon).isa(),
        Isa::available()
            .rfind(|&i| i <= Isa::Neon)
            .unwrap_or(Isa::Portable)
    );
}

/// The short-search kernels against the byte definition: every length up to 300 (past the inline
/// part of `find_either`, into its `memchr` hand-off) with one CR, LF, quote or backslash at
/// every position (and none), then random haystacks of bytes next to them (0x0B, 0x8A, 0x8D,
/// 0x22 ^ 0x80, ...), at every offset into the buffer. Line ends are searched as the decoder
/// searches them, quotes and backslashes as the peek does.
#[test]
fn short_search_kernels_match_the_byte_definition() {
    let check = |h: &[u8]| {
        for (a, b) in [(b'\r', b'\n'), (b'"', b'\\')] {
            let first = h.iter().position(|&x| x == a || x == b);
            assert_eq!(find_either(h, a, b), first, "{h:?}");
            if let Some(head) = h.first_chunk::<16>() {
                let want = (0..16).fold(0u32, |m, i| {
                    m | (u32::from(head[i] == a || head[i] == b) << i)
                });
                assert_eq!(either_16(head, a, b), want, "{h:?}");
                assert_eq!(portable::either_16(head, b, a), want, "{h:?}");
            }
        }
        let eol = h.iter().position(|&x| x == b'\n' || x == b'\r');
        assert_eq!(find_line_end(h), eol, "{h:?}");
        assert_eq!(has_line_end(h), eol.is_some(), "{h:?}");
    };
    for len in (0..300).step_by(scaled(1, 37)) {
        let mut h = vec![b'a'; len];
        check(&h);
        for p in (0..len).step_by(scaled(1, 23)) {
            for stop in [b'\n', b'\r', b'"', b'\\'] {
                h[p] = stop;
                check(&h);
                h[p] = b'a';
            }
        }
    }
    let stops = [b'\n', b'\r', b'"', b'\\'];
    let near = [
        0x0b, 0x0c, 0x09, 0x8a, 0x8d, 0xa2, 0xdc, 0x23, 0x5d, b'x', 0xff, 0,
    ];
    for seed in 0..scaled(2000, 6) as u64 {
        let mut buf = random_bytes(seed, 160, &near);
        // Zero, one or two stops.
        for k in 0..(seed % 3) {
            let at = (seed as usize * 37 + k as usize * 53) % buf.len();
            buf[at] = stops[(seed + k) as usize % 4];
        }
        for start in 0..17 {
            check(&buf[start..]);
            check(&buf[start..start + (seed as usize % 70)]);
        }
    }
}
