//! AArch64 kernels. NEON (Advanced SIMD) is part of the AArch64 baseline of every target this module
//! is compiled for (its `cfg` asks for `target_feature = "neon"`), so, as SSE2 on x86-64, it needs no
//! run-time detection: its token is created unconditionally, and the kernels are safe methods on it.
//! The `unsafe` blocks are the calls into NEON intrinsics (and `#[target_feature]` functions) from
//! code compiled for the baseline, which has NEON, and the vector loads, each from a fixed-size
//! array.

pub(crate) mod neon;
