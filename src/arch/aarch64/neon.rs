//! NEON kernels: a 64-byte block as four 16-byte vectors.
//!
//! NEON has no `movemask`. A comparison leaves 0x00 or 0xff in each lane, and its bits are gathered
//! two ways:
//!
//! - **64-bit block masks** ([`Quad::mask`], simdjson's `to_bitmask`): each of the four vectors is
//!   and-ed with the lane weights `1, 2, 4, ..., 128` (twice), then three rounds of pairwise additions
//!   (`vpaddq_u8`) fold 64 lanes into 8 bytes, byte `k` holding the bits of lanes `8k..8k + 8`.
//! - **The first hit of a search** ([`first_hit`]): `vshrn_n_u16::<4>` narrows the 16 lanes to a
//!   64-bit word with 4 bits per lane, whose `trailing_zeros() / 4` is the lane.
//! - **16-bit masks** ([`mask_16`], for `either_16`): the weighted lanes of each half summed by
//!   `vaddv_u8`.
//!
//! The prefix XOR of the quote mask (a carry-less multiply on x86-64) is the portable shift ladder:
//! `PMULL` belongs to the optional AES extension, which the AArch64 baseline does not include.

use std::arch::aarch64::{
    uint8x16_t, vaddv_u8, vandq_u8, vceqq_u8, vcleq_u8, vcltq_s8, vcltq_u8, vcltzq_s8, vdupq_n_s8,
    vdupq_n_u8, vdupq_n_u64, veorq_u8, vget_high_u8, vget_lane_u64, vget_low_u8, vgetq_lane_u64,
    vld1q_u8, vmaxvq_u8, vorrq_u8, vpaddq_u8, vqtbl1q_u8, vreinterpret_u64_u8, vreinterpretq_s8_u8,
    vreinterpretq_u8_u64, vreinterpretq_u16_u8, vreinterpretq_u64_u8, vshrn_n_u16, vshrq_n_u8,
    vsubq_u8, vtstq_u8,
};

use crate::arch::bits::{escapes, prefix_xor};
use crate::arch::{
    Blocks, ESCAPE_HI, ESCAPE_LO, JsonMasks, StringCarry, StringMasks, Structurals, WHITESPACE,
    portable,
};

/// The NEON kernels. NEON is baseline on every AArch64 target this module is compiled for, so the
/// token carries no run-time proof; it exists for the dispatch's uniformity.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Neon(());

impl Neon {
    /// The token: always there (NEON is enabled at compile time).
    pub(crate) fn new() -> Neon {
        Neon(())
    }

    /// See [`Kernels::scan_string`](crate::arch::Kernels::scan_string).
    #[inline]
    pub(crate) fn scan_string<const NON_ASCII: bool>(self, bytes: &[u8]) -> usize {
        // SAFETY: NEON is enabled at compile time (this module's `cfg`), so every CPU this build
        // runs on has it.
        unsafe { scan_string::<NON_ASCII>(bytes) }
    }

    /// See [`Kernels::string_blocks`](crate::arch::Kernels::string_blocks).
    #[inline]
    pub(crate) fn string_blocks(
        self,
        bytes: &[u8],
        sink: impl FnMut(usize, StringMasks) -> bool,
    ) -> Blocks {
        // SAFETY: NEON is enabled at compile time (this module's `cfg`), so every CPU this build
        // runs on has it.
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
        // SAFETY: NEON is enabled at compile time (this module's `cfg`), so every CPU this build
        // runs on has it.
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
        // SAFETY: NEON is enabled at compile time (this module's `cfg`), so every CPU this build
        // runs on has it.
        unsafe { structural_blocks(bytes, carry, sink) }
    }
}

/// Loads the 16 bytes of `bytes`.
#[inline]
#[target_feature(enable = "neon")]
fn load16(bytes: &[u8; 16]) -> uint8x16_t {
    // SAFETY: `vld1q_u8` reads exactly 16 bytes from the pointer, here the whole of a `[u8; 16]`,
    // with no alignment requirement (this function enables NEON).
    unsafe { vld1q_u8(bytes.as_ptr()) }
}

/// A 64-byte block as four vectors, lane `16k + j` in lane `j` of vector `k`.
#[derive(Clone, Copy)]
struct Quad([uint8x16_t; 4]);

impl Quad {
    #[inline]
    #[target_feature(enable = "neon")]
    fn load(block: &[u8; 64]) -> Quad {
        let (parts, _) = block.as_chunks::<16>();
        Quad([
            load16(&parts[0]),
            load16(&parts[1]),
            load16(&parts[2]),
            load16(&parts[3]),
        ])
    }

    /// `f` applied to each vector.
    #[inline]
    #[target_feature(enable = "neon")]
    fn map(self, f: impl Fn(uint8x16_t) -> uint8x16_t) -> Quad {
        let [a, b, c, d] = self.0;
        Quad([f(a), f(b), f(c), f(d)])
    }

    /// The 64-bit mask of a comparison result (every lane 0x00 or 0xff): bit `p` is lane `p`.
    #[inline]
    #[target_feature(enable = "neon")]
    fn mask(self) -> u64 {
        // Lane `j` of each vector keeps bit `j % 8` (little-endian bytes 0x01, 0x02, ..., 0x80).
        let weights = vreinterpretq_u8_u64(vdupq_n_u64(0x8040_2010_0804_0201));
        let [a, b, c, d] = self.map(|v| vandq_u8(v, weights)).0;
        // Pairs, quads, then octets: the eight low bytes are the mask, byte `k` lanes `8k..8k + 8`.
        let ab = vpaddq_u8(a, b);
        let cd = vpaddq_u8(c, d);
        let abcd = vpaddq_u8(ab, cd);
        let folded = vpaddq_u8(abcd, abcd);
        vgetq_lane_u64::<0>(vreinterpretq_u64_u8(folded))
    }

    /// The mask of the lanes equal to `byte`.
    #[inline]
    #[target_feature(enable = "neon")]
    fn eq(self, byte: u8) -> u64 {
        let t = vdupq_n_u8(byte);
        self.map(|v| vceqq_u8(v, t)).mask()
    }

    /// The four vectors or-ed together.
    #[inline]
    #[target_feature(enable = "neon")]
    fn any(self) -> uint8x16_t {
        let [a, b, c, d] = self.0;
        vorrq_u8(vorrq_u8(a, b), vorrq_u8(c, d))
    }
}

/// The mask of the lanes at or above 0x80 (their sign bit).
#[inline]
#[target_feature(enable = "neon")]
fn high_bits(v: uint8x16_t) -> uint8x16_t {
    vcltzq_s8(vreinterpretq_s8_u8(v))
}

/// The index of the first 0xff lane of a comparison result, `None` when every lane is 0: four bits
/// per lane by a narrowing shift.
#[inline]
#[target_feature(enable = "neon")]
fn first_hit(v: uint8x16_t) -> Option<usize> {
    let nibbles = vget_lane_u64::<0>(vreinterpret_u64_u8(vshrn_n_u16::<4>(vreinterpretq_u16_u8(
        v,
    ))));
    (nibbles != 0).then(|| (nibbles.trailing_zeros() / 4) as usize)
}

/// The 16-bit mask of a comparison result: the weighted lanes of each half, summed across.
#[inline]
#[target_feature(enable = "neon")]
fn mask_16(v: uint8x16_t) -> u32 {
    let weights = vreinterpretq_u8_u64(vdupq_n_u64(0x8040_2010_0804_0201));
    let w = vandq_u8(v, weights);
    u32::from(vaddv_u8(vget_low_u8(w))) | (u32::from(vaddv_u8(vget_high_u8(w))) << 8)
}

/// Whether `hay` holds a CR or LF: 16-byte blocks, the last one overlapping the others (a haystack
/// shorter than 16 bytes is tested byte by byte).
#[inline]
pub(crate) fn has_line_end(hay: &[u8]) -> bool {
    // SAFETY: NEON is enabled at compile time (this module's `cfg`).
    unsafe { has_line_end_neon(hay) }
}

/// See [`has_line_end`].
#[inline]
#[target_feature(enable = "neon")]
fn has_line_end_neon(hay: &[u8]) -> bool {
    let Some(last) = hay.last_chunk::<16>() else {
        return portable::has_line_end(hay);
    };
    let (lf, cr) = (vdupq_n_u8(b'\n'), vdupq_n_u8(b'\r'));
    let eol = |block: &[u8; 16]| {
        let v = load16(block);
        vorrq_u8(vceqq_u8(v, lf), vceqq_u8(v, cr))
    };
    let (blocks, _) = hay.as_chunks::<16>();
    let acc = blocks
        .iter()
        .fold(eol(last), |acc, b| vorrq_u8(acc, eol(b)));
    vmaxvq_u8(acc) != 0
}

/// The bytes of `head` equal to `a` or to `b` (bit `i` is byte `i`).
#[inline]
pub(crate) fn either_16(head: &[u8; 16], a: u8, b: u8) -> u32 {
    // SAFETY: NEON is enabled at compile time (this module's `cfg`).
    unsafe { either_16_neon(head, a, b) }
}

/// See [`either_16`].
#[inline]
#[target_feature(enable = "neon")]
fn either_16_neon(head: &[u8; 16], a: u8, b: u8) -> u32 {
    let v = load16(head);
    mask_16(vorrq_u8(
        vceqq_u8(v, vdupq_n_u8(a)),
        vceqq_u8(v, vdupq_n_u8(b)),
    ))
}

/// The stop lanes of one vector (see `Kernels::scan_string`).
#[inline]
#[target_feature(enable = "neon")]
fn stops<const NON_ASCII: bool>(v: uint8x16_t) -> uint8x16_t {
    let quote = vceqq_u8(v, vdupq_n_u8(b'"'));
    let backslash = vceqq_u8(v, vdupq_n_u8(b'\\'));
    let low = if NON_ASCII {
        // Signed `v < 0x20`: control bytes and every byte >= 0x80.
        vcltq_s8(vreinterpretq_s8_u8(v), vdupq_n_s8(0x20))
    } else {
        vcltq_u8(v, vdupq_n_u8(0x20))
    };
    vorrq_u8(vorrq_u8(quote, backslash), low)
}

/// See [`Kernels::scan_string`](crate::arch::Kernels::scan_string): 64 bytes a round (one
/// horizontal maximum decides whether the block has a stop), then 16, then byte by byte.
#[target_feature(enable = "neon")]
fn scan_string<const NON_ASCII: bool>(bytes: &[u8]) -> usize {
    let mut i = 0;
    while let Some(block) = bytes[i..].first_chunk::<64>() {
        let s = Quad::load(block).map(|v| stops::<NON_ASCII>(v));
        if vmaxvq_u8(s.any()) != 0 {
            return i + s.mask().trailing_zeros() as usize;
        }
        i += 64;
    }
    while let Some(block) = bytes[i..].first_chunk::<16>() {
        if let Some(k) = first_hit(stops::<NON_ASCII>(load16(block))) {
            return i + k;
        }
        i += 16;
    }
    portable::scan_tail::<NON_ASCII>(bytes, i)
}

/// The string-skipping masks of one block.
#[inline]
#[target_feature(enable = "neon")]
fn string_masks(q: Quad, lo_t: uint8x16_t, hi_t: uint8x16_t) -> StringMasks {
    let (nibble, space, two) = (vdupq_n_u8(0x0f), vdupq_n_u8(0x20), vdupq_n_u8(2));
    StringMasks {
        // `"` or below 0x20: flipping bit 1 maps `"` to 0x20 and keeps 0x00-0x1f in place as a set.
        quote_or_control: q.map(|v| vcleq_u8(veorq_u8(v, two), space)).mask(),
        quote: q.eq(b'"'),
        backslash: q.eq(b'\\'),
        control: q.map(|v| vcltq_u8(v, space)).mask(),
        non_ascii: q.map(|v| high_bits(v)).mask(),
        // A byte >= 0x80 finds 0 in the high-nibble table, whatever its low nibble finds.
        simple_escape: q
            .map(|v| {
                let class = vandq_u8(
                    vqtbl1q_u8(lo_t, vandq_u8(v, nibble)),
                    vqtbl1q_u8(hi_t, vshrq_n_u8::<4>(v)),
                );
                vtstq_u8(class, class)
            })
            .mask(),
        u: q.eq(b'u'),
    }
}

/// See [`Kernels::string_blocks`](crate::arch::Kernels::string_blocks).
#[target_feature(enable = "neon")]
fn string_blocks<F: FnMut(usize, StringMasks) -> bool>(bytes: &[u8], mut sink: F) -> Blocks {
    let (lo_t, hi_t) = (load16(&ESCAPE_LO), load16(&ESCAPE_HI));
    // Every accepted block or-ed together: bit 7 of a lane says whether any of them was non-ASCII.
    let mut high = vdupq_n_u8(0);
    let mut i = 0;
    while let Some(block) = bytes[i..].first_chunk::<64>() {
        let q = Quad::load(block);
        if !sink(i, string_masks(q, lo_t, hi_t)) {
            break;
        }
        high = vorrq_u8(high, q.any());
        i += 64;
    }
    Blocks {
        end: i,
        non_ascii: vmaxvq_u8(high) >= 0x80,
    }
}

/// See [`Kernels::structural_blocks`](crate::arch::Kernels::structural_blocks).
#[target_feature(enable = "neon")]
fn structural_blocks<F: FnMut(usize, Structurals) -> bool>(
    bytes: &[u8],
    carry: &mut StringCarry,
    mut sink: F,
) -> usize {
    let bit5 = vdupq_n_u8(0x20);
    let mut i = 0;
    let (mut esc_carry, mut str_carry) = (carry.escaped, carry.in_string);
    while let Some(block) = bytes[i..].first_chunk::<64>() {
        let q = Quad::load(block);
        // `[` | 0x20 == `{` and `]` | 0x20 == `}`; no other byte maps there.
        let folded = q.map(|v| vorrq_u8(v, bit5));
        let (opens, closes) = (folded.eq(b'{'), folded.eq(b'}'));
        let curly = q.map(|v| vtstq_u8(v, bit5)).mask();
        let mut esc_next = esc_carry;
        let escaped = escapes(q.eq(b'\\'), &mut esc_next);
        let in_string = prefix_xor(q.eq(b'"') & !escaped) ^ str_carry;
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

/// See [`Kernels::json_blocks`](crate::arch::Kernels::json_blocks).
#[target_feature(enable = "neon")]
fn json_blocks<F: FnMut(usize, JsonMasks) -> bool>(
    bytes: &[u8],
    carry: &mut StringCarry,
    mut sink: F,
) -> usize {
    let (bit5, nibble, space) = (vdupq_n_u8(0x20), vdupq_n_u8(0x0f), vdupq_n_u8(0x20));
    let (zero_v, nine_v) = (vdupq_n_u8(b'0'), vdupq_n_u8(9));
    let ws_t = load16(&WHITESPACE);
    let mut i = 0;
    let (mut esc_carry, mut str_carry) = (carry.escaped, carry.in_string);
    while let Some(block) = bytes[i..].first_chunk::<64>() {
        let q = Quad::load(block);
        let backslash = q.eq(b'\\');
        // `[` | 0x20 == `{` and `]` | 0x20 == `}`; no other byte maps there.
        let folded = q.map(|v| vorrq_u8(v, bit5));
        let (open, close) = (folded.eq(b'{'), folded.eq(b'}'));
        let (colon, comma) = (q.eq(b':'), q.eq(b','));
        let ops = open | close | colon | comma;
        // One lookup by the low nibble: only a whitespace byte finds itself in the table (the
        // table holds no byte >= 0x80 at the index of its own low nibble).
        let ws = q
            .map(|v| vceqq_u8(vqtbl1q_u8(ws_t, vandq_u8(v, nibble)), v))
            .mask();
        let mut esc_next = esc_carry;
        let escaped = escapes(backslash, &mut esc_next);
        let quotes = q.eq(b'"') & !escaped;
        let in_string = prefix_xor(quotes) ^ str_carry;
        let masks = JsonMasks {
            quotes,
            in_string,
            ops: ops & !in_string,
            ws,
            backslash,
            control: q.map(|v| vcltq_u8(v, space)).mask(),
            non_ascii: q.map(|v| high_bits(v)).mask(),
            open,
            close,
            // Of the brackets, `{` and `}` are the ones with bit 5 set.
            curly: (open | close) & q.map(|v| vtstq_u8(v, bit5)).mask(),
            colon,
            comma,
            // Unsigned `v - '0' <= 9`.
            digit: q.map(|v| vcleq_u8(vsubq_u8(v, zero_v), nine_v)).mask(),
            zero: q.eq(b'0'),
            minus: q.eq(b'-'),
            dot: q.eq(b'.'),
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
