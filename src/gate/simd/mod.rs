//! The gate's SIMD layer: kernels that turn bytes into per-block bitmasks, and the dispatch to them.
//!
//! A kernel only classifies bytes. For each whole 64-byte block it computes masks (bit `p` is byte
//! `p`) and hands them to a *sink*, a closure supplied by the consumer, the way simdjson's stage 1 hands
//! structurals on to stage 2:
//!
//! - [`StringMasks`] (quote, backslash, control, non-ASCII, simple escape, `u`) for skipping string
//!   contents, consumed by the exact recogniser's string skipper (`gate::strings`);
//! - [`Structurals`] (brackets outside strings, which of them open, which are curly), with the
//!   in-string and escape state carried across blocks in a [`StringCarry`], consumed by the
//!   bracket-balancing fast path (`gate::stage1`).
//!
//! The sink runs inlined in the kernel's `#[target_feature]` context, so there is no call per block,
//! yet nothing here knows the consumers' types: the dependencies go one way (`exact`, `stage1`,
//! `strings` → `simd`).
//!
//! Two short searches live here too, for the SSE decoder and the JSON-RPC peek: [`has_line_end`]
//! (a tiny chunk has a CR or LF) and [`find_either`] (the first of two bytes, tested 16 at a time
//! in the first 256 bytes before a call into `memchr`). Their kernel is SSE2 (`x86_64::sse2`), part
//! of every x86-64 CPU, so it needs no token and no detection.
//!
//! Dispatch invariant as a type: a [`Kernels`] value holds a token per instruction set
//! (`x86_64::avx512::Avx512`, `x86_64::avx2::Avx2`) that only run-time feature detection can create,
//! and the kernels are safe methods on their token. The best choice is detected once per process
//! ([`Isa::detect`], cached in an atomic). `--cfg ssegate_disable_simd` and Miri leave only the portable
//! code in [`scalar`], which is also the reference every kernel is tested against.

mod bits;
pub(crate) mod scalar;
#[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
mod x86_64;

use std::sync::atomic::{AtomicU8, Ordering};

pub(crate) use bits::{escapes_branchless, escapes_carry_out};

/// Whether `hay` holds a CR or LF: the SSE2 kernel on x86-64 (every x86-64 CPU has SSE2, so there is
/// no dispatch), byte by byte elsewhere and below 16 bytes. For short haystacks, the decoder's tiny
/// chunks, where a call into `memchr` costs more than the search.
#[inline]
pub(crate) fn has_line_end(hay: &[u8]) -> bool {
    #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
    return x86_64::sse2::has_line_end(hay);
    #[cfg(not(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri))))]
    return scalar::has_line_end(hay);
}

/// The bytes of `head` equal to `a` or to `b` (bit `i` is byte `i`): SSE2 on x86-64, byte by byte
/// elsewhere.
#[inline]
pub(crate) fn either_16(head: &[u8; 16], a: u8, b: u8) -> u32 {
    #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
    return x86_64::sse2::either_16(head, a, b);
    #[cfg(not(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri))))]
    return scalar::either_16(head, a, b);
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

/// An instruction set the gate's kernels can run on ([`Gate::with_isa`](crate::gate::Gate::with_isa)
/// picks one explicitly, for benchmarks and for testing a kernel the detection would not choose;
/// [`Config::max_isa`](crate::gate::Config::max_isa) caps the detection). Ordered from the least to
/// the most capable: `Portable < Avx2 < Avx512`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Portable Rust (SWAR string scanning, byte-at-a-time bracket balancing): always available.
    Portable,
    /// AVX2 and PCLMULQDQ (x86-64).
    Avx2,
    /// AVX-512F, AVX-512BW and PCLMULQDQ (x86-64).
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
        Kernels::new(self).is_some()
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
    #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
    Avx2(x86_64::avx2::Avx2),
    /// AVX-512F + AVX-512BW + PCLMULQDQ kernels.
    #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
    Avx512(x86_64::avx512::Avx512),
}

impl Kernels {
    /// The kernels of `isa`, or `None` when this CPU (or this build) cannot run them.
    pub(crate) fn new(isa: Isa) -> Option<Kernels> {
        match isa {
            Isa::Portable => Some(Kernels::Portable),
            #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
            Isa::Avx2 => x86_64::avx2::Avx2::detect().map(Kernels::Avx2),
            #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
            Isa::Avx512 => x86_64::avx512::Avx512::detect().map(Kernels::Avx512),
            #[cfg(not(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri))))]
            Isa::Avx2 | Isa::Avx512 => None,
        }
    }

    /// The best kernels this CPU runs among those of instruction set `max` or less.
    pub(crate) fn best_up_to(max: Isa) -> Kernels {
        Isa::ALL
            .into_iter()
            .rev()
            .filter(|&isa| isa <= max)
            .find_map(Kernels::new)
            .unwrap_or(Kernels::Portable)
    }

    /// The instruction set of these kernels.
    pub(crate) fn isa(self) -> Isa {
        match self {
            Kernels::Portable => Isa::Portable,
            #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
            Kernels::Avx2(_) => Isa::Avx2,
            #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
            Kernels::Avx512(_) => Isa::Avx512,
        }
    }

    /// Index of the first byte of `bytes` that is `"`, `\`, below 0x20, or (with `NON_ASCII`) at least
    /// 0x80; `bytes.len()` when there is none.
    #[inline]
    pub(crate) fn scan_string<const NON_ASCII: bool>(self, bytes: &[u8]) -> usize {
        match self {
            Kernels::Portable => scalar::scan_string::<NON_ASCII>(bytes),
            #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
            Kernels::Avx2(k) => k.scan_string::<NON_ASCII>(bytes),
            #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
            Kernels::Avx512(k) => k.scan_string::<NON_ASCII>(bytes),
        }
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
        match self {
            Kernels::Portable => {
                let _ = (bytes, sink);
                Blocks::default()
            }
            #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
            Kernels::Avx2(k) => k.string_blocks(bytes, sink),
            #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
            Kernels::Avx512(k) => k.string_blocks(bytes, sink),
        }
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
        match self {
            Kernels::Portable => {
                let _ = (bytes, sink, carry);
                0
            }
            #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
            Kernels::Avx2(k) => k.json_blocks(bytes, carry, sink),
            #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
            Kernels::Avx512(k) => k.json_blocks(bytes, carry, sink),
        }
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
        match self {
            Kernels::Portable => {
                let _ = (bytes, sink, carry);
                0
            }
            #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
            Kernels::Avx2(k) => k.structural_blocks(bytes, carry, sink),
            #[cfg(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri)))]
            Kernels::Avx512(k) => k.structural_blocks(bytes, carry, sink),
        }
    }
}

/// JSON whitespace by its low nibble, for a byte shuffle: entry `n` is the whitespace byte whose low
/// nibble is `n` (space, tab, LF, CR), and every other entry a byte whose low nibble is not `n`, so
/// a byte is whitespace exactly when it finds itself at its own low nibble.
#[cfg_attr(
    not(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri))),
    allow(dead_code)
)]
const WHITESPACE: [u8; 16] = [
    b' ', 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, b'\t', b'\n', 0x80, 0x80, b'\r', 0x80,
    0x80,
];

/// The simple-escape lookup tables (one 16-byte table per nibble; a byte is a simple escape when its
/// two entries share a bit). Classes: bit 0 `"` `/`; bit 1 `\`; bit 2 `b` `f` `n`; bit 3 `r` `t`.
#[cfg_attr(
    not(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri))),
    allow(dead_code)
)]
const ESCAPE_LO: [u8; 16] = [0, 0, 13, 0, 8, 0, 4, 0, 0, 0, 0, 0, 2, 0, 4, 1];
/// See [`ESCAPE_LO`].
#[cfg_attr(
    not(all(target_arch = "x86_64", not(ssegate_disable_simd), not(miri))),
    allow(dead_code)
)]
const ESCAPE_HI: [u8; 16] = [0, 0, 1, 0, 0, 2, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0];

#[cfg(test)]
mod tests {
    use super::*;

    fn available() -> Vec<Kernels> {
        Isa::ALL.into_iter().filter_map(Kernels::new).collect()
    }

    /// The string masks of one block, byte by byte from their definitions.
    fn naive_string_masks(block: &[u8]) -> StringMasks {
        let mut m = StringMasks::default();
        for (p, &b) in block.iter().enumerate() {
            let bit = 1u64 << p;
            let set = |mask: &mut u64, yes: bool| {
                if yes {
                    *mask |= bit;
                }
            };
            set(&mut m.quote_or_control, b == b'"' || b < 0x20);
            set(&mut m.quote, b == b'"');
            set(&mut m.backslash, b == b'\\');
            set(&mut m.control, b < 0x20);
            set(&mut m.non_ascii, b >= 0x80);
            set(&mut m.simple_escape, b"\"\\/bfnrt".contains(&b));
            set(&mut m.u, b == b'u');
        }
        m
    }

    /// The structurals of whole blocks, from a byte-at-a-time automaton (escape, then string state).
    fn naive_structurals(bytes: &[u8], carry: &mut StringCarry) -> Vec<Structurals> {
        let mut out = Vec::new();
        for block in bytes.chunks_exact(64) {
            let mut s = Structurals::default();
            for (p, &b) in block.iter().enumerate() {
                let bit = 1u64 << p;
                if b == b'{' || b == b'[' {
                    s.opens |= bit;
                }
                if b & 0x20 != 0 {
                    s.curly |= bit;
                }
                if carry.escaped != 0 {
                    carry.escaped = 0;
                    continue;
                }
                match b {
                    b'\\' => carry.escaped = 1,
                    b'"' => carry.in_string = !carry.in_string,
                    b'{' | b'[' | b'}' | b']' if carry.in_string == 0 => s.brackets |= bit,
                    _ => {}
                }
            }
            out.push(s);
        }
        out
    }

    /// The JSON masks of whole blocks, from the same byte automaton.
    fn naive_json_masks(bytes: &[u8], carry: &mut StringCarry) -> Vec<JsonMasks> {
        let mut out = Vec::new();
        for block in bytes.chunks_exact(64) {
            let mut m = JsonMasks::default();
            for (p, &b) in block.iter().enumerate() {
                let bit = 1u64 << p;
                let set = |mask: &mut u64, yes: bool| {
                    if yes {
                        *mask |= bit;
                    }
                };
                set(&mut m.ws, matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
                set(&mut m.backslash, b == b'\\');
                set(&mut m.control, b < 0x20);
                set(&mut m.non_ascii, b >= 0x80);
                // Escaped or not: outside strings an escape is an error the walker finds first.
                set(&mut m.ops, carry.in_string == 0 && b"{}[]:,".contains(&b));
                set(&mut m.open, b == b'{' || b == b'[');
                set(&mut m.close, b == b'}' || b == b']');
                set(&mut m.curly, b == b'{' || b == b'}');
                set(&mut m.colon, b == b':');
                set(&mut m.comma, b == b',');
                set(&mut m.digit, b.is_ascii_digit());
                set(&mut m.zero, b == b'0');
                set(&mut m.minus, b == b'-');
                set(&mut m.dot, b == b'.');
                if carry.escaped != 0 {
                    carry.escaped = 0;
                    m.in_string |= carry.in_string & bit;
                    continue;
                }
                match b {
                    b'\\' => carry.escaped = 1,
                    b'"' => {
                        m.quotes |= bit;
                        carry.in_string = !carry.in_string;
                    }
                    _ => {}
                }
                m.in_string |= carry.in_string & bit;
            }
            out.push(m);
        }
        out
    }

    /// Every kernel's JSON masks and carries against the byte automaton, across blocks and calls.
    #[test]
    fn json_blocks_match_naive() {
        for kernels in available().into_iter().filter(|k| k.has_blocks()) {
            for seed in 0..300u64 {
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
                let want = naive_json_masks(&bytes, &mut want_carry);
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
                naive_json_masks(&bytes[..128], &mut want2);
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
        for kernels in available() {
            for seed in 0..200u64 {
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
                            naive_string_masks(&input[at..at + 64]),
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
        for kernels in available().into_iter().filter(|k| k.has_blocks()) {
            for rotation in [0, 1, 63] {
                let input: Vec<u8> = (0..=255u8).cycle().skip(rotation).take(256).collect();
                let mut seen = 0;
                kernels.string_blocks(&input, |at, m| {
                    assert_eq!(
                        m,
                        naive_string_masks(&input[at..at + 64]),
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
        for kernels in available().into_iter().filter(|k| k.has_blocks()) {
            for rotation in [0, 1, 63] {
                let input: Vec<u8> = (0..=255u8).cycle().skip(rotation).take(256).collect();
                let mut want_carry = StringCarry::default();
                let want = naive_json_masks(&input, &mut want_carry);
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
        for kernels in available().into_iter().filter(|k| k.has_blocks()) {
            for seed in 0..300u64 {
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
                let want = naive_structurals(&bytes, &mut want_carry);
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
                naive_structurals(&bytes[..128], &mut want2);
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
        for kernels in available() {
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
        if cfg!(any(ssegate_disable_simd, miri, not(target_arch = "x86_64"))) {
            assert_eq!(isa, Isa::Portable);
        }
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
                    assert_eq!(scalar::either_16(head, b, a), want, "{h:?}");
                }
            }
            let eol = h.iter().position(|&x| x == b'\n' || x == b'\r');
            assert_eq!(find_line_end(h), eol, "{h:?}");
            assert_eq!(has_line_end(h), eol.is_some(), "{h:?}");
        };
        for len in 0..300 {
            let mut h = vec![b'a'; len];
            check(&h);
            for p in 0..len {
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
        for seed in 0..2000 {
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
}
