//! Bit logic on 64-bit block masks shared by every kernel: which bytes a backslash run escapes, and
//! which bytes lie inside a string. Pure functions of the masks (and an explicit carry), so the
//! portable reference and the vector kernels compute them identically.
#![forbid(unsafe_code)]

const EVEN: u64 = 0x5555_5555_5555_5555;

/// The escaped-byte mask of a 64-byte block from its backslash mask, carrying odd runs across blocks
/// (simdjson's `find_escaped`; `carry` is 0 or 1). Branchy when the block has no backslash, which is
/// the common case in structure-dense JSON.
#[inline(always)]
#[cfg_attr(not(any(ssegate_x86_kernels, ssegate_neon_kernels)), allow(dead_code))]
pub(crate) fn escapes(backslash: u64, carry: &mut u64) -> u64 {
    if backslash == 0 {
        let escaped = *carry;
        *carry = 0;
        return escaped;
    }
    let (escaped, out) = escapes_branchless(backslash, *carry);
    *carry = out;
    escaped
}

/// [`escapes`] without its no-backslash branch (which prose mispredicts): the escaped mask and the
/// carry out.
#[inline(always)]
pub(crate) fn escapes_branchless(backslash: u64, carry: u64) -> (u64, u64) {
    let backslash = backslash & !carry;
    let follows_escape = (backslash << 1) | carry;
    let odd_starts = backslash & !EVEN & !follows_escape;
    let (even_starts, overflow) = odd_starts.overflowing_add(backslash);
    let invert = even_starts << 1;
    ((EVEN ^ invert) & follows_escape, u64::from(overflow))
}

/// The carry out of [`escapes_branchless`] without its dependency on the carry in, except for a
/// block of 64 backslashes: the parity of the backslash run that ends the block (a run that starts
/// after a non-backslash byte is not touched by the carry in). A loop that carries escapes from block
/// to block then waits one conditional move per block instead of the whole escape computation.
#[inline(always)]
pub(crate) fn escapes_carry_out(backslash: u64, carry: u64) -> u64 {
    let run = (!backslash).leading_zeros();
    if run == 64 { carry } else { u64::from(run & 1) }
}

/// Prefix XOR by shifts (bit `i` of the result is the parity of the set bits at or below `i`): the
/// portable stand-in for the carry-less multiply the x86-64 kernels use, and the NEON kernels' own
/// (`PMULL` is not in the AArch64 baseline).
#[cfg(any(test, ssegate_neon_kernels))]
#[inline(always)]
pub(crate) fn prefix_xor(mut x: u64) -> u64 {
    for shift in [1, 2, 4, 8, 16, 32] {
        x ^= x << shift;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::tests::scaled;

    /// The byte-at-a-time definition: a backslash not itself escaped escapes the next byte.
    fn naive_escapes(backslash: u64, carry: u64) -> (u64, u64) {
        let mut escaped = 0;
        let mut pending = carry == 1;
        for p in 0..64 {
            if pending {
                escaped |= 1 << p;
                pending = false;
            } else if backslash >> p & 1 == 1 {
                pending = true;
            }
        }
        (escaped, u64::from(pending))
    }

    #[test]
    fn escapes_match_the_byte_definition() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..scaled(100_000, 300) {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let backslash = match round % 3 {
                0 => s & s.rotate_left(17) | s.rotate_left(31) & s.rotate_left(5),
                1 => s,
                _ => !0 << (s % 64),
            };
            for carry in [0, 1] {
                let want = naive_escapes(backslash, carry);
                assert_eq!(escapes_branchless(backslash, carry), want, "{backslash:#x}");
                assert_eq!(
                    escapes_carry_out(backslash, carry),
                    want.1,
                    "{backslash:#x}"
                );
                let mut c = carry;
                assert_eq!((escapes(backslash, &mut c), c), want, "{backslash:#x}");
            }
        }
        assert_eq!(naive_escapes(0, 1), (1, 0));
    }

    #[test]
    fn prefix_xor_is_parity() {
        let mut s = 1u64;
        for _ in 0..scaled(10_000, 100) {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let p = prefix_xor(s);
            for i in 0..64 {
                let parity = (s & (!0u64 >> (63 - i))).count_ones() & 1;
                assert_eq!(u64::from(parity), p >> i & 1);
            }
        }
    }
}
