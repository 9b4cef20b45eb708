//! The block kernels, each written once over [`Vector`], the operations an instruction set offers
//! on a 64-byte block. The instruction set files (`x86_64::avx2`, `x86_64::avx512`,
//! `aarch64::neon`) implement [`Vector`] on their token and call [`kernel_entry_points!`], which
//! writes the `#[target_feature]` entry points that instantiate the kernels below. Everything here
//! is `#[inline(always)]`, so it is compiled inside those entry points, with their features.
#![forbid(unsafe_code)]

use crate::arch::bits::escapes;
use crate::arch::{
    Blocks, ESCAPE_HI, ESCAPE_LO, JsonMasks, StringCarry, StringMasks, Structurals, WHITESPACE,
};

/// The operations of one instruction set on a 64-byte block, implemented by its token (a value
/// only run-time detection creates, or for NEON the compile-time target, so every method is safe:
/// the token proves the CPU runs them).
///
/// Comparisons give a lane mask ([`Vector::Mask`]), kept in the instruction set's own form (a
/// vector of lanes, or a mask register) until [`Vector::bits`] turns it into a `u64` whose bit `p`
/// is byte `p`. Unsigned byte order throughout, unless a name says otherwise.
pub(crate) trait Vector: Copy {
    /// A 64-byte block in registers.
    type V: Copy;
    /// A lane mask of a block.
    type Mask: Copy;

    /// The 64 bytes of `block`.
    fn load(self, block: &[u8; 64]) -> Self::V;
    /// `byte` in every lane.
    fn splat(self, byte: u8) -> Self::V;
    /// `table` in every 16-byte lane group, for [`Vector::lookup_low`] and
    /// [`Vector::lookup_high`].
    fn table(self, table: &[u8; 16]) -> Self::V;
    /// `a | b`.
    fn or(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a & b`.
    fn and(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a ^ b`.
    fn xor(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a - b`, wrapping.
    fn sub(self, a: Self::V, b: Self::V) -> Self::V;
    /// The entries of `table` at each byte's low nibble (a byte at or above 0x80 may find 0
    /// instead).
    fn lookup_low(self, table: Self::V, v: Self::V) -> Self::V;
    /// The entries of `table` at each byte's high nibble.
    fn lookup_high(self, table: Self::V, v: Self::V) -> Self::V;

    /// `a == b`.
    fn eq(self, a: Self::V, b: Self::V) -> Self::Mask;
    /// `a <= b`.
    fn le(self, a: Self::V, b: Self::V) -> Self::Mask;
    /// `a < b` with both as signed bytes.
    fn lt_signed(self, a: Self::V, b: Self::V) -> Self::Mask;
    /// The bytes at or above 0x80.
    fn high(self, v: Self::V) -> Self::Mask;
    /// The bytes with bit 5 (0x20) set.
    fn bit5(self, v: Self::V) -> Self::Mask;
    /// `a | b` on masks.
    fn or_mask(self, a: Self::Mask, b: Self::Mask) -> Self::Mask;
    /// The mask as bits: bit `p` is byte `p`.
    fn bits(self, m: Self::Mask) -> u64;
    /// The first byte set in `m`, if any.
    fn first(self, m: Self::Mask) -> Option<u32>;

    /// Prefix XOR (bit `i` of the result is the parity of the set bits of `x` at or below `i`).
    fn prefix_xor(self, x: u64) -> u64;
    /// The first stop of `bytes[from..]`, fewer than 64 bytes, or `bytes.len()` (see
    /// [`scan_string`]): the instruction set's narrower vectors, or its masked loads.
    fn scan_rest<const NON_ASCII: bool>(self, bytes: &[u8], from: usize) -> usize;

    /// The mask of the bytes equal to `byte`.
    #[inline(always)]
    fn eq_byte(self, v: Self::V, byte: u8) -> u64 {
        self.bits(self.eq(v, self.splat(byte)))
    }
}

/// The stops of a string scan in one block (see [`Kernels::scan_string`](super::Kernels::scan_string)).
#[inline(always)]
pub(crate) fn stops<S: Vector, const NON_ASCII: bool>(s: S, v: S::V) -> S::Mask {
    let quote = s.eq(v, s.splat(b'"'));
    let backslash = s.eq(v, s.splat(b'\\'));
    let low = if NON_ASCII {
        // Signed `v < 0x20`: control bytes and every byte >= 0x80.
        s.lt_signed(v, s.splat(0x20))
    } else {
        s.le(v, s.splat(0x1f))
    };
    s.or_mask(s.or_mask(quote, backslash), low)
}

/// See [`Kernels::scan_string`](super::Kernels::scan_string).
#[inline(always)]
pub(crate) fn scan_string<S: Vector, const NON_ASCII: bool>(s: S, bytes: &[u8]) -> usize {
    let (blocks, _) = bytes.as_chunks::<64>();
    for (k, block) in blocks.iter().enumerate() {
        if let Some(p) = s.first(stops::<S, NON_ASCII>(s, s.load(block))) {
            return k * 64 + p as usize;
        }
    }
    s.scan_rest::<NON_ASCII>(bytes, blocks.len() * 64)
}

/// See [`Kernels::string_blocks`](super::Kernels::string_blocks).
#[inline(always)]
pub(crate) fn string_blocks<S: Vector>(
    s: S,
    bytes: &[u8],
    mut sink: impl FnMut(usize, StringMasks) -> bool,
) -> Blocks {
    let (lo_t, hi_t) = (s.table(&ESCAPE_LO), s.table(&ESCAPE_HI));
    let (zero, space, two) = (s.splat(0), s.splat(0x20), s.splat(2));
    // Every accepted block or-ed together: bit 7 of a byte says whether any of them was non-ASCII.
    let mut high = zero;
    let mut i = 0;
    let (blocks, _) = bytes.as_chunks::<64>();
    for block in blocks {
        let v = s.load(block);
        // Bytes >= 0x80 find 0 in the high-nibble table, whatever their low nibble finds.
        let class = s.and(s.lookup_low(lo_t, v), s.lookup_high(hi_t, v));
        let masks = StringMasks {
            // `"` or below 0x20: flipping bit 1 maps `"` to 0x20 and keeps 0x00-0x1f in place as
            // a set.
            quote_or_control: s.bits(s.le(s.xor(v, two), space)),
            quote: s.eq_byte(v, b'"'),
            backslash: s.eq_byte(v, b'\\'),
            control: s.bits(s.le(v, s.splat(0x1f))),
            non_ascii: s.bits(s.high(v)),
            simple_escape: !s.bits(s.eq(class, zero)),
            u: s.eq_byte(v, b'u'),
        };
        if !sink(i, masks) {
            break;
        }
        high = s.or(high, v);
        i += 64;
    }
    Blocks {
        end: i,
        non_ascii: s.bits(s.high(high)) != 0,
    }
}

/// See [`Kernels::structural_blocks`](super::Kernels::structural_blocks).
#[inline(always)]
pub(crate) fn structural_blocks<S: Vector>(
    s: S,
    bytes: &[u8],
    carry: &mut StringCarry,
    mut sink: impl FnMut(usize, Structurals) -> bool,
) -> usize {
    let bit5 = s.splat(0x20);
    let mut i = 0;
    // The carries live in registers inside the loop and go back to `carry` on exit.
    let (mut esc_carry, mut str_carry) = (carry.escaped, carry.in_string);
    let (blocks, _) = bytes.as_chunks::<64>();
    for block in blocks {
        let v = s.load(block);
        // `[` | 0x20 == `{` and `]` | 0x20 == `}`; no other byte maps there.
        let folded = s.or(v, bit5);
        let (opens, closes) = (s.eq_byte(folded, b'{'), s.eq_byte(folded, b'}'));
        let curly = s.bits(s.bit5(v));
        let mut esc_next = esc_carry;
        let escaped = escapes(s.eq_byte(v, b'\\'), &mut esc_next);
        let in_string = s.prefix_xor(s.eq_byte(v, b'"') & !escaped) ^ str_carry;
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

/// See [`Kernels::json_blocks`](super::Kernels::json_blocks).
#[inline(always)]
pub(crate) fn json_blocks<S: Vector>(
    s: S,
    bytes: &[u8],
    carry: &mut StringCarry,
    mut sink: impl FnMut(usize, JsonMasks) -> bool,
) -> usize {
    let bit5 = s.splat(0x20);
    let (zero_v, nine_v, c) = (s.splat(b'0'), s.splat(9), s.splat(0x1f));
    let ws_t = s.table(&WHITESPACE);
    let mut i = 0;
    let (mut esc_carry, mut str_carry) = (carry.escaped, carry.in_string);
    let (blocks, _) = bytes.as_chunks::<64>();
    for block in blocks {
        let v = s.load(block);
        let backslash = s.eq_byte(v, b'\\');
        // `[` | 0x20 == `{` and `]` | 0x20 == `}`; no other byte maps there.
        let folded = s.or(v, bit5);
        let (open, close) = (s.eq_byte(folded, b'{'), s.eq_byte(folded, b'}'));
        let (colon, comma) = (s.eq_byte(v, b':'), s.eq_byte(v, b','));
        let ops = open | close | colon | comma;
        // One lookup by the low nibble: only a whitespace byte finds itself in the table (a byte
        // >= 0x80 finds 0, or a table entry that is not itself).
        let ws = s.bits(s.eq(s.lookup_low(ws_t, v), v));
        let mut esc_next = esc_carry;
        let escaped = escapes(backslash, &mut esc_next);
        let quotes = s.eq_byte(v, b'"') & !escaped;
        let in_string = s.prefix_xor(quotes) ^ str_carry;
        let masks = JsonMasks {
            quotes,
            in_string,
            ops: ops & !in_string,
            ws,
            backslash,
            control: s.bits(s.le(v, c)),
            non_ascii: s.bits(s.high(v)),
            open,
            close,
            // Of the brackets, `{` and `}` are the ones with bit 5 set.
            curly: (open | close) & s.bits(s.bit5(v)),
            colon,
            comma,
            // Unsigned `v - '0' <= 9`.
            digit: s.bits(s.le(s.sub(v, zero_v), nine_v)),
            zero: s.eq_byte(v, b'0'),
            minus: s.eq_byte(v, b'-'),
            dot: s.eq_byte(v, b'.'),
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

/// The kernels' entry points for one instruction set's token `$token`: for each kernel above, a
/// `#[target_feature]` function with the features `$features` (every feature the token proves the
/// CPU runs) that instantiates it, and a safe method on the token that calls that function.
macro_rules! kernel_entry_points {
    ($token:ty, $features:literal) => {
        impl $token {
            $crate::arch::generic::kernel_entry_points!(@entry $token, $features,
                scan_string<const NON_ASCII: bool>[NON_ASCII](bytes: &[u8]) -> usize);
            $crate::arch::generic::kernel_entry_points!(@entry $token, $features,
                string_blocks<>[](
                    bytes: &[u8],
                    sink: impl FnMut(usize, $crate::arch::StringMasks) -> bool
                ) -> $crate::arch::Blocks);
            $crate::arch::generic::kernel_entry_points!(@entry $token, $features,
                json_blocks<>[](
                    bytes: &[u8],
                    carry: &mut $crate::arch::StringCarry,
                    sink: impl FnMut(usize, $crate::arch::JsonMasks) -> bool
                ) -> usize);
            $crate::arch::generic::kernel_entry_points!(@entry $token, $features,
                structural_blocks<>[](
                    bytes: &[u8],
                    carry: &mut $crate::arch::StringCarry,
                    sink: impl FnMut(usize, $crate::arch::Structurals) -> bool
                ) -> usize);
        }
    };
    // One kernel `$name`, with its const generics (declared in `<...>`, passed in `[...]`).
    (@entry $token:ty, $features:literal,
        $name:ident<$(const $c:ident: $cty:ty),*>[$($cv:ident),*]($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty) => {
        #[doc = concat!(
            "See [`Kernels::", stringify!($name), "`](crate::arch::Kernels::", stringify!($name), ")."
        )]
        #[inline]
        pub(crate) fn $name<$(const $c: $cty),*>(self, $($arg: $ty),*) -> $ret {
            #[target_feature(enable = $features)]
            fn kernel<$(const $c: $cty),*>(s: $token, $($arg: $ty),*) -> $ret {
                $crate::arch::generic::$name::<$token, $($cv),*>(s, $($arg),*)
            }
            // SAFETY: `self` exists, so the CPU runs every feature of `$features` (the token's
            // contract).
            unsafe { kernel::<$($cv),*>(self, $($arg),*) }
        }
    };
}
pub(crate) use kernel_entry_points;
