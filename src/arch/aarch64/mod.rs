//! AArch64 kernels. NEON (Advanced SIMD) is part of the AArch64 baseline of every target this module
//! is compiled for (its `cfg` asks for `target_feature = "neon"`), so, as SSE2 on x86-64, it needs no
//! run-time detection: its token is created unconditionally, and the kernels are safe methods on it.
//! The `unsafe` blocks are the vector loads only, each from a fixed-size array.

pub(crate) mod neon;
