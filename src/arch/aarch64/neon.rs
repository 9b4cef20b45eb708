//! NEON kernels: a 64-byte block as four 16-byte vectors.
//!
//! NEON has no `movemask`. A comparison leaves 0x00 or 0xff in each lane, and its bits are gathered
//! two ways:
//!
//! - **64-bit block masks** ([`Vector::bits`], simdjson's `to_bitmask`): each of the four vectors
//!   is and-ed with the lane weights `1, 2, 4, ..., 128` (twice), then three rounds of pairwise
//!   additions (`vpaddq_u8`) fold 64 lanes into 8 bytes, byte `k` holding the bits of lanes
//!   `8k..8k + 8`.
//! - **The first hit of a search** ([`first_hit`]): `vshrn_n_u16::<4>` narrows the 16 lanes to a
//!   64-bit word with 4 bits per lane, whose `trailing_zeros() / 4` is the lane.
//! - **16-bit masks** ([`mask_16`], for `either_16`): the weighted lanes of each half summed by
//!   `vaddv_u8`.
//!
//! The prefix XOR of the quote mask (a carry-less multiply on x86-64) is the portable shift ladder:
//! `PMULL` belongs to the optional AES extension, which the AArch64 baseline does not include.

use std::arch::aarch64::{
    uint8x16_t, vaddv_u8, vandq_u8, vceqq_u8, vcleq_u8, vcltq_s8, vcltzq_s8, vdupq_n_u8,
    vdupq_n_u64, veorq_u8, vget_high_u8, vget_lane_u64, vget_low_u8, vgetq_lane_u64, vld1q_u8,
    vmaxvq_u8, vorrq_u8, vpaddq_u8, vqtbl1q_u8, vreinterpret_u64_u8, vreinterpretq_s8_u8,
    vreinterpretq_u8_u64, vreinterpretq_u16_u8, vreinterpretq_u64_u8, vshrn_n_u16, vshrq_n_u8,
    vsubq_u8, vtstq_u8,
};

use crate::arch::generic::{Vector, kernel_entry_points, stops};
use crate::arch::{bits, portable};

/// The NEON kernels. NEON is baseline on every AArch64 target this module is compiled for, so the
/// token carries no run-time proof; it exists for the dispatch's uniformity.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Neon(());

impl Neon {
    /// The token: always there (NEON is enabled at compile time).
    pub(crate) fn new() -> Neon {
        Neon(())
    }
}

kernel_entry_points!(Neon, "neon");

/// Loads the 16 bytes of `bytes`.
#[inline]
#[target_feature(enable = "neon")]
fn load16(bytes: &[u8; 16]) -> uint8x16_t {
    // SAFETY: `vld1q_u8` reads exactly 16 bytes from the pointer, here the whole of a `[u8; 16]`,
    // with no alignment requirement (this function enables NEON).
    unsafe { vld1q_u8(bytes.as_ptr()) }
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

/// `f` on each of the four vectors of a block.
#[inline(always)]
fn map(v: [uint8x16_t; 4], f: impl Fn(uint8x16_t) -> uint8x16_t) -> [uint8x16_t; 4] {
    let [a, b, c, d] = v;
    [f(a), f(b), f(c), f(d)]
}

/// `f` on each pair of vectors of two blocks.
#[inline(always)]
fn zip(
    x: [uint8x16_t; 4],
    y: [uint8x16_t; 4],
    f: impl Fn(uint8x16_t, uint8x16_t) -> uint8x16_t,
) -> [uint8x16_t; 4] {
    [f(x[0], y[0]), f(x[1], y[1]), f(x[2], y[2]), f(x[3], y[3])]
}

/// A block is four vectors, lane `16k + j` in lane `j` of vector `k`; a mask is four comparison
/// results (every lane 0x00 or 0xff).
impl Vector for Neon {
    type V = [uint8x16_t; 4];
    type Mask = [uint8x16_t; 4];

    #[inline(always)]
    fn load(self, block: &[u8; 64]) -> Self::V {
        let (parts, _) = block.as_chunks::<16>();
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        unsafe {
            [
                load16(&parts[0]),
                load16(&parts[1]),
                load16(&parts[2]),
                load16(&parts[3]),
            ]
        }
    }

    #[inline(always)]
    fn splat(self, byte: u8) -> Self::V {
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        [unsafe { vdupq_n_u8(byte) }; 4]
    }

    #[inline(always)]
    fn table(self, table: &[u8; 16]) -> Self::V {
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        [unsafe { load16(table) }; 4]
    }

    #[inline(always)]
    fn or(self, a: Self::V, b: Self::V) -> Self::V {
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        zip(a, b, |x, y| unsafe { vorrq_u8(x, y) })
    }

    #[inline(always)]
    fn and(self, a: Self::V, b: Self::V) -> Self::V {
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        zip(a, b, |x, y| unsafe { vandq_u8(x, y) })
    }

    #[inline(always)]
    fn xor(self, a: Self::V, b: Self::V) -> Self::V {
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        zip(a, b, |x, y| unsafe { veorq_u8(x, y) })
    }

    #[inline(always)]
    fn sub(self, a: Self::V, b: Self::V) -> Self::V {
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        zip(a, b, |x, y| unsafe { vsubq_u8(x, y) })
    }

    #[inline(always)]
    fn lookup_low(self, table: Self::V, v: Self::V) -> Self::V {
        // A table index of 16 or more finds 0: the low nibble alone is the index.
        let low = self.and(v, self.splat(0x0f));
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        zip(table, low, |t, i| unsafe { vqtbl1q_u8(t, i) })
    }

    #[inline(always)]
    fn lookup_high(self, table: Self::V, v: Self::V) -> Self::V {
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        let high = map(v, |x| unsafe { vshrq_n_u8::<4>(x) });
        // SAFETY: as above.
        zip(table, high, |t, i| unsafe { vqtbl1q_u8(t, i) })
    }

    #[inline(always)]
    fn eq(self, a: Self::V, b: Self::V) -> Self::Mask {
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        zip(a, b, |x, y| unsafe { vceqq_u8(x, y) })
    }

    #[inline(always)]
    fn le(self, a: Self::V, b: Self::V) -> Self::Mask {
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        zip(a, b, |x, y| unsafe { vcleq_u8(x, y) })
    }

    #[inline(always)]
    fn lt_signed(self, a: Self::V, b: Self::V) -> Self::Mask {
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        zip(a, b, |x, y| unsafe {
            vcltq_s8(vreinterpretq_s8_u8(x), vreinterpretq_s8_u8(y))
        })
    }

    #[inline(always)]
    fn high(self, v: Self::V) -> Self::Mask {
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        map(v, |x| unsafe { vcltzq_s8(vreinterpretq_s8_u8(x)) })
    }

    #[inline(always)]
    fn bit5(self, v: Self::V) -> Self::Mask {
        let bit5 = self.splat(0x20);
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        zip(v, bit5, |x, b| unsafe { vtstq_u8(x, b) })
    }

    #[inline(always)]
    fn or_mask(self, a: Self::Mask, b: Self::Mask) -> Self::Mask {
        self.or(a, b)
    }

    #[inline(always)]
    fn bits(self, m: Self::Mask) -> u64 {
        // Lane `j` of each vector keeps bit `j % 8` (little-endian bytes 0x01, 0x02, ..., 0x80).
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        let weights = unsafe { vreinterpretq_u8_u64(vdupq_n_u64(0x8040_2010_0804_0201)) };
        let [a, b, c, d] = self.and(m, [weights; 4]);
        // Pairs, quads, then octets: the eight low bytes are the mask, byte `k` lanes `8k..8k + 8`.
        // SAFETY: as above.
        unsafe {
            let ab = vpaddq_u8(a, b);
            let cd = vpaddq_u8(c, d);
            let abcd = vpaddq_u8(ab, cd);
            let folded = vpaddq_u8(abcd, abcd);
            vgetq_lane_u64::<0>(vreinterpretq_u64_u8(folded))
        }
    }

    /// One horizontal maximum says whether there is a hit, before the mask is gathered.
    #[inline(always)]
    fn first(self, m: Self::Mask) -> Option<u32> {
        let [a, b, c, d] = m;
        // SAFETY: NEON is enabled at compile time (this module's `cfg`).
        let any = unsafe { vmaxvq_u8(vorrq_u8(vorrq_u8(a, b), vorrq_u8(c, d))) != 0 };
        any.then(|| self.bits(m).trailing_zeros())
    }

    #[inline(always)]
    fn prefix_xor(self, x: u64) -> u64 {
        bits::prefix_xor(x)
    }

    /// 16 bytes at a time, then byte by byte.
    #[inline(always)]
    fn scan_rest<const NON_ASCII: bool>(self, bytes: &[u8], mut from: usize) -> usize {
        while let Some(part) = bytes[from..].first_chunk::<16>() {
            // SAFETY: NEON is enabled at compile time (this module's `cfg`).
            let v = unsafe { load16(part) };
            // The stops of `v`: those of the block `v` four times, of which one vector is used.
            let s = stops::<Self, NON_ASCII>(self, [v; 4])[0];
            // SAFETY: as above.
            if let Some(k) = unsafe { first_hit(s) } {
                return from + k;
            }
            from += 16;
        }
        portable::scan_tail::<NON_ASCII>(bytes, from)
    }
}
