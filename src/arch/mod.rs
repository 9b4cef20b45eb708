//! Every SIMD kernel of the crate and the CPU detection that picks them, laid out as memchr's
//! `arch/`: [`portable`] is the scalar code (always compiled, the reference every kernel is tested
//! against, and all there is under `--cfg ssegate_disable_simd`); `x86_64/` holds one
//! instruction set per file (`sse2`, `avx2`, `avx512`), and `aarch64/` the NEON kernels (`neon`).
//! The block kernels are written once, in `generic`, over its `Vector` trait (the operations an
//! instruction set offers on a 64-byte block); each instruction set's file implements that trait
//! on its token and instantiates the kernels in its `#[target_feature]` entry points.
//! Nothing here knows its consumers: `gate`,
//! `sse` and `message` import from `arch`, never the reverse.
//!
//! Kernels only classify or find bytes, and whatever crosses a block or a call (inside a string, an
//! odd backslash run) is carried explicitly by the caller ([`StringCarry`]), so a byte is classified
//! once however the input is chunked. Two families:
//!
//! - **Block classification** for the JSON gate. For each whole 64-byte block a kernel computes
//!   masks (bit `p` is byte `p`) and hands them to a *sink*, a closure supplied by the consumer, the
//!   way simdjson's stage 1 hands structurals on to stage 2: [`StringMasks`] for skipping string
//!   contents (the gate's string skipper), [`Structurals`] for bracket balancing (its fast path) and
//!   [`JsonMasks`] for the exact recogniser's structural walker. The sink runs inlined in the
//!   kernel's `#[target_feature]` context, so there is no call per block. [`Kernels::scan_string`]
//!   finds the end of a string's plain run.
//! - **Short searches** for the SSE decoder and the JSON-RPC peek: [`has_line_end`] (a tiny chunk
//!   has a CR or LF), [`find_either`] (the first of two bytes, tested 16 at a time in the first 256
//!   bytes before a call into `memchr`) and [`find_line_end`]. Their kernel is SSE2
//!   (`x86_64::sse2`), part of every x86-64 CPU, so it needs no token and no detection; on AArch64
//!   it is NEON (`aarch64::neon`), likewise baseline.
//!
//! Dispatch invariant as a type: a [`Kernels`] value holds a token per instruction set
//! (`x86_64::avx512::Avx512`, `x86_64::avx2::Avx2`) that only run-time feature detection can create,
//! and the kernels are safe methods on their token. NEON is baseline on AArch64 (the module is
//! compiled only where `target_feature = "neon"` is on), so its token (`aarch64::neon::Neon`) needs
//! no detection. The best choice is detected once per process
//! ([`Isa::detect`], cached in an atomic). `unsafe` code lives in the kernel files only: this module
//! denies it everywhere else.
//!
//! Which kernel sets a build compiles is decided once, by the build script (`build.rs`), as two
//! cfgs: `ssegate_x86_kernels` (x86-64) and `ssegate_neon_kernels` (AArch64 with NEON); neither is
//! set under `--cfg ssegate_disable_simd`. Miri runs the kernels too (its feature detection sees
//! the target features the build enables, so an x86-64 build under Miri picks the portable code
//! unless `-Ctarget-feature=+avx2,...` is given); `.ci/run`'s `miri-kernels` step runs the kernel
//! tests that way.
#![deny(unsafe_code)]

#[cfg(ssegate_neon_kernels)]
#[allow(unsafe_code)]
mod aarch64;
mod bits;
#[cfg(any(ssegate_x86_kernels, ssegate_neon_kernels))]
mod generic;
pub(crate) mod portable;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(ssegate_x86_kernels)]
#[allow(unsafe_code)]
mod x86_64;

use std::sync::atomic::{AtomicU8, Ordering};

pub(crate) use bits::{escapes_branchless, escapes_carry_out};

/// Whether `hay` holds a CR or LF: the SSE2 kernel on x86-64 (every x86-64 CPU has SSE2, so there is
/// no dispatch), byte by byte elsewhere and below 16 bytes. For short haystacks, the decoder's tiny
/// chunks, where a call into `memchr` costs more than the search.
#[inline]
pub(crate) fn has_line_end(hay: &[u8]) -> bool {
    #[cfg(ssegate_x86_kernels)]
    return x86_64::sse2::has_line_end(hay);
    #[cfg(ssegate_neon_kernels)]
    return aarch64::neon::has_line_end(hay);
    #[cfg(not(any(ssegate_x86_kernels, ssegate_neon_kernels)))]
    return portable::has_line_end(hay);
}

/// The bytes of `head` equal to `a` or to `b` (bit `i` is byte `i`): SSE2 on x86-64, byte by byte
/// elsewhere; NEON on AArch64.
#[inline]
fn either_16(head: &[u8; 16], a: u8, b: u8) -> u32 {
    #[cfg(ssegate_x86_kernels)]
    return x86_64::sse2::either_16(head, a, b);
    #[cfg(ssegate_neon_kernels)]
    return aarch64::neon::either_16(head, a, b);
    #[cfg(not(any(ssegate_x86_kernels, ssegate_neon_kernels)))]
    return portable::either_16(head, a, b);
}

/// The first byte of `hay` equal to `a` or to `b`, for searches that usually end early (line ends
/// of short SSE lines, the closing quote of a JSON key): up to [`INLINE_SEARCH`] bytes are tested
/// inline, 16 at a time ([`either_16`]; the last block overlaps the one before it), before the rest
/// is handed to `memchr`, whose set-up costs more than a short hit.
#[inline]
pub(crate) fn find_either(hay: &[u8], a: u8, b: u8) -> Option<usize> {
    // A haystack shorter than 16 bytes has no whole block and no last one.
    let Some(last) = hay.last_chunk::<16>() else {
        return hay.iter().position(|&x| x == a || x == b);
    };
    let mut at = 0;
    while let Some(block) = hay[at..].first_chunk::<16>() {
        if at >= INLINE_SEARCH {
            return memchr::memchr2(a, b, &hay[at..]).map(|i| i + at);
        }
        if let m @ 1.. = either_16(block, a, b) {
            return Some(at + m.trailing_zeros() as usize);
        }
        at += 16;
    }
    // Fewer than 16 bytes are left: the last 16 bytes hold them, after `16 - left` bytes already
    // known not to match.
    let seen = 16 - (hay.len() - at);
    let m = either_16(last, a, b) >> seen;
    (m != 0).then(|| at + m.trailing_zeros() as usize)
}

/// How many leading bytes [`find_either`] tests inline before calling `memchr`.
const INLINE_SEARCH: usize = 256;

/// The first CR or LF in `hay` ([`find_either`]).
#[inline]
pub(crate) fn find_line_end(hay: &[u8]) -> Option<usize> {
    find_either(hay, b'\r', b'\n')
}

/// An instruction set the gate's kernels can run on ([`GateConfig::max_isa`](crate::gate::GateConfig::max_isa)
/// caps the detection; with an [available](Isa::is_available) one it picks exactly that one, for
/// benchmarks and for testing a kernel the detection would not choose). Ordered from the least to
/// the most capable: `Portable < Neon < Avx2 < Avx512`. A CPU runs the instruction sets of its own
/// architecture only, so a cap from another architecture's range still means "up to this much":
/// on AArch64, `Avx2` or `Avx512` as a cap allows NEON; on x86-64, `Neon` allows only the portable
/// code.
///
/// New instruction sets (other architectures' among them) are added as new variants: match with a
/// wildcard arm, and list them with [`Isa::all`] or [`Isa::available`]. The position of a new variant
/// in the order, and so its `as u8` value, is not stable across versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Isa {
    /// Portable Rust (SWAR string scanning, byte-at-a-time bracket balancing): always available.
    Portable,
    /// NEON, 128-bit Advanced SIMD (AArch64, where it is baseline: no run-time detection).
    Neon,
    /// AVX2 and PCLMULQDQ (x86-64).
    Avx2,
    /// AVX-512F, AVX-512BW and PCLMULQDQ (x86-64).
    Avx512,
}

/// 0: not detected yet; otherwise `Isa as u8 + 1`.
static DETECTED: AtomicU8 = AtomicU8::new(0);

impl Isa {
    /// Every instruction set this version of the crate has kernels for, on any architecture, least
    /// capable first. [`Isa::available`] keeps the ones this CPU and this build can run.
    pub fn all() -> &'static [Isa] {
        &[Isa::Portable, Isa::Neon, Isa::Avx2, Isa::Avx512]
    }

    /// The instruction sets this CPU and this build can run ([`Isa::is_available`]), least capable
    /// first: [`Isa::Portable`] always, then the ones run-time detection finds.
    pub fn available() -> impl DoubleEndedIterator<Item = Isa> {
        Isa::all().iter().copied().filter(|isa| isa.is_available())
    }

    /// The best instruction set this CPU supports (detected once, then cached).
    pub fn detect() -> Isa {
        let cached = DETECTED.load(Ordering::Relaxed);
        if let Some(&isa) = Isa::all().iter().find(|&&isa| isa as u8 + 1 == cached) {
            return isa;
        }
        let isa = Isa::available().next_back().unwrap_or(Isa::Portable);
        DETECTED.store(isa as u8 + 1, Ordering::Relaxed);
        isa
    }

    /// Whether this CPU, and this build, can run `self`.
    pub fn is_available(self) -> bool {
        Kernels::new(self).is_some()
    }

    /// A short lower-case name (`portable`, `neon`, `avx2`, `avx512`), for bench ids.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Neon => "neon",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }
}

/// The string-skipping masks of one 64-byte block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StringMasks {
    /// `"` or below 0x20: the bytes that end a string, or are an error in one, where not escaped
    /// (one compare: `b ^ 2 <= 0x20`).
    pub(crate) quote_or_control: u64,
    /// `"`.
    pub(crate) quote: u64,
    /// `\`.
    pub(crate) backslash: u64,
    /// Below 0x20.
    pub(crate) control: u64,
    /// At least 0x80.
    pub(crate) non_ascii: u64,
    /// One of `"\/bfnrt`: a backslash and this byte are a whole escape (`u`, which needs four hex
    /// digits after it, is not one of them).
    pub(crate) simple_escape: u64,
    /// `u`.
    pub(crate) u: u64,
}

/// Where [`Kernels::string_blocks`] stopped, and what it saw on the way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Blocks {
    /// The offset of the block the sink refused, or of the first byte not in a whole block.
    pub(crate) end: usize,
    /// Whether a byte of the blocks the sink accepted is at or above 0x80.
    pub(crate) non_ascii: bool,
}

/// The brackets of one 64-byte block that are structural (outside strings, not escaped).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Structurals {
    /// `{`, `[`, `}` and `]` outside strings and not right after an odd backslash run.
    pub(crate) brackets: u64,
    /// `{` and `[` anywhere (meaningful where `brackets` is set).
    pub(crate) opens: u64,
    /// Bytes with bit 5 set: `{` and `}` among the brackets (meaningful where `brackets` is set).
    pub(crate) curly: u64,
}

/// The JSON classification of one 64-byte block, for the exact recogniser's structural walker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct JsonMasks {
    /// Quotes not escaped by an odd backslash run: the string delimiters.
    pub(crate) quotes: u64,
    /// Bytes inside strings, opening quote included, closing quote excluded.
    pub(crate) in_string: u64,
    /// `{`, `}`, `[`, `]`, `:` and `,` outside strings (escaped ones too: outside strings, the
    /// backslash before them is already an error).
    pub(crate) ops: u64,
    /// JSON whitespace (space, tab, LF, CR), anywhere.
    pub(crate) ws: u64,
    /// `\`, anywhere.
    pub(crate) backslash: u64,
    /// Below 0x20, anywhere.
    pub(crate) control: u64,
    /// At least 0x80, anywhere.
    pub(crate) non_ascii: u64,
    /// `{` or `[`, anywhere (the grammar check keeps the ones outside strings).
    pub(crate) open: u64,
    /// `}` or `]`, anywhere.
    pub(crate) close: u64,
    /// `{` or `}`, anywhere.
    pub(crate) curly: u64,
    /// `:`, anywhere.
    pub(crate) colon: u64,
    /// `,`, anywhere.
    pub(crate) comma: u64,
    /// `0` to `9`, anywhere.
    pub(crate) digit: u64,
    /// `0`, anywhere.
    pub(crate) zero: u64,
    /// `-`, anywhere.
    pub(crate) minus: u64,
    /// `.`, anywhere.
    pub(crate) dot: u64,
}

/// What the structural classification carries from one byte to the next across blocks and pieces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StringCarry {
    /// 1 when the next byte is escaped (the bytes so far end with an odd backslash run), else 0.
    /// A byte after an odd backslash run is inert everywhere, inside strings or not.
    pub(crate) escaped: u64,
    /// All ones when the bytes so far end inside a string, else 0.
    pub(crate) in_string: u64,
}

/// The kernels one gate runs, with the proof that this CPU can run them.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kernels {
    /// The portable code: SWAR string scanning; no block kernels (the consumers' byte-level
    /// automata are the reference).
    Portable,
    /// AVX2 + PCLMULQDQ kernels.
    #[cfg(ssegate_x86_kernels)]
    Avx2(x86_64::avx2::Avx2),
    /// AVX-512F + AVX-512BW + PCLMULQDQ kernels.
    #[cfg(ssegate_x86_kernels)]
    Avx512(x86_64::avx512::Avx512),
    /// NEON kernels (AArch64 baseline).
    #[cfg(ssegate_neon_kernels)]
    Neon(aarch64::neon::Neon),
}

/// `$call` on the kernels of `$kernels` (bound to `$k`), or `$portable` for the portable code.
macro_rules! on_kernels {
    ($kernels:expr, |$k:ident| $call:expr, $portable:block) => {
        match $kernels {
            Kernels::Portable => $portable,
            #[cfg(ssegate_x86_kernels)]
            Kernels::Avx2($k) => $call,
            #[cfg(ssegate_x86_kernels)]
            Kernels::Avx512($k) => $call,
            #[cfg(ssegate_neon_kernels)]
            Kernels::Neon($k) => $call,
        }
    };
}

impl Kernels {
    /// The kernels of `isa`, or `None` when this CPU (or this build) cannot run them.
    pub(crate) fn new(isa: Isa) -> Option<Kernels> {
        match isa {
            Isa::Portable => Some(Kernels::Portable),
            #[cfg(ssegate_x86_kernels)]
            Isa::Avx2 => x86_64::avx2::Avx2::detect().map(Kernels::Avx2),
            #[cfg(ssegate_x86_kernels)]
            Isa::Avx512 => x86_64::avx512::Avx512::detect().map(Kernels::Avx512),
            #[cfg(ssegate_neon_kernels)]
            Isa::Neon => Some(Kernels::Neon(aarch64::neon::Neon::new())),
            // The instruction sets this build has no kernels for.
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The best kernels this CPU runs among those of instruction set `max` or less.
    pub(crate) fn best_up_to(max: Isa) -> Kernels {
        Isa::all()
            .iter()
            .rev()
            .copied()
            .filter(|&isa| isa <= max)
            .find_map(Kernels::new)
            .unwrap_or(Kernels::Portable)
    }

    /// The instruction set of these kernels.
    pub(crate) fn isa(self) -> Isa {
        match self {
            Kernels::Portable => Isa::Portable,
            #[cfg(ssegate_x86_kernels)]
            Kernels::Avx2(_) => Isa::Avx2,
            #[cfg(ssegate_x86_kernels)]
            Kernels::Avx512(_) => Isa::Avx512,
            #[cfg(ssegate_neon_kernels)]
            Kernels::Neon(_) => Isa::Neon,
        }
    }

    /// Index of the first byte of `bytes` that is `"`, `\`, below 0x20, or (with `NON_ASCII`) at least
    /// 0x80; `bytes.len()` when there is none.
    #[inline]
    pub(crate) fn scan_string<const NON_ASCII: bool>(self, bytes: &[u8]) -> usize {
        on_kernels!(self, |k| k.scan_string::<NON_ASCII>(bytes), {
            portable::scan_string::<NON_ASCII>(bytes)
        })
    }

    /// Whether [`Kernels::string_blocks`] classifies anything (the portable build does not).
    #[inline]
    pub(crate) fn has_blocks(self) -> bool {
        !matches!(self, Kernels::Portable)
    }

    /// Hands the [`StringMasks`] of each whole 64-byte block of `bytes` to `sink(offset, masks)` in
    /// order, until it returns `false`. Returns where that stopped (the offset of the block it
    /// refused, or of the first byte not in a whole block) and whether a block the sink accepted had a
    /// byte at or above 0x80, gathered in a vector register rather than a mask per block. The portable
    /// build classifies nothing and stops at 0.
    #[inline]
    pub(crate) fn string_blocks(
        self,
        bytes: &[u8],
        sink: impl FnMut(usize, StringMasks) -> bool,
    ) -> Blocks {
        on_kernels!(self, |k| k.string_blocks(bytes, sink), {
            let _ = (bytes, sink);
            Blocks::default()
        })
    }

    /// Hands the [`JsonMasks`] of each whole 64-byte block of `bytes` to `sink(offset, masks)` in order,
    /// until it returns `false`, carrying the string state in `carry` (as
    /// [`Kernels::structural_blocks`] does). The portable build classifies nothing and returns 0.
    #[inline]
    pub(crate) fn json_blocks(
        self,
        bytes: &[u8],
        carry: &mut StringCarry,
        sink: impl FnMut(usize, JsonMasks) -> bool,
    ) -> usize {
        on_kernels!(self, |k| k.json_blocks(bytes, carry, sink), {
            let _ = (bytes, sink, carry);
            0
        })
    }

    /// Hands the [`Structurals`] of each whole 64-byte block of `bytes` to `sink(offset, structurals)`
    /// in order, until it returns `false`, carrying the string state in `carry`. Returns the offset of
    /// the block it refused, or of the first byte not in a whole block; `carry` is then the state after
    /// the last block the sink accepted. The portable build classifies nothing and returns 0.
    #[inline]
    pub(crate) fn structural_blocks(
        self,
        bytes: &[u8],
        carry: &mut StringCarry,
        sink: impl FnMut(usize, Structurals) -> bool,
    ) -> usize {
        on_kernels!(self, |k| k.structural_blocks(bytes, carry, sink), {
            let _ = (bytes, sink, carry);
            0
        })
    }
}

/// JSON whitespace by its low nibble, for a byte shuffle: entry `n` is the whitespace byte whose low
/// nibble is `n` (space, tab, LF, CR), and every other entry a byte whose low nibble is not `n`, so
/// a byte is whitespace exactly when it finds itself at its own low nibble.
#[cfg_attr(not(any(ssegate_x86_kernels, ssegate_neon_kernels)), allow(dead_code))]
const WHITESPACE: [u8; 16] = [
    b' ', 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, b'\t', b'\n', 0x80, 0x80, b'\r', 0x80,
    0x80,
];

/// The simple-escape lookup tables (one 16-byte table per nibble; a byte is a simple escape when its
/// two entries share a bit). Classes: bit 0 `"` `/`; bit 1 `\`; bit 2 `b` `f` `n`; bit 3 `r` `t`.
#[cfg_attr(not(any(ssegate_x86_kernels, ssegate_neon_kernels)), allow(dead_code))]
const ESCAPE_LO: [u8; 16] = [0, 0, 13, 0, 8, 0, 4, 0, 0, 0, 0, 0, 2, 0, 4, 1];
/// See [`ESCAPE_LO`].
#[cfg_attr(not(any(ssegate_x86_kernels, ssegate_neon_kernels)), allow(dead_code))]
const ESCAPE_HI: [u8; 16] = [0, 0, 1, 0, 0, 2, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0];
