//! Names the SIMD kernel sets this build compiles, so that `src/arch` says it once:
//!
//! - `ssegate_x86_kernels`: the x86-64 kernels (SSE2, AVX2, AVX-512; the latter two picked at run
//!   time by feature detection);
//! - `ssegate_neon_kernels`: the AArch64 NEON kernels, on targets where NEON is enabled (it is
//!   baseline on every AArch64 target but the soft-float ones).
//!
//! Neither is set under `--cfg ssegate_disable_simd` (the portable code only), which cargo passes to
//! build scripts as `CARGO_CFG_SSEGATE_DISABLE_SIMD`. The environment variable
//! `SSEGATE_DISABLE_SIMD=1` at build time does the same for this crate alone (the script then sets
//! `ssegate_disable_simd` itself): unlike `RUSTFLAGS`, it leaves every dependency's build as it is,
//! so a portable-only test run shares the target directory of a normal one.
use std::env;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(ssegate_x86_kernels)");
    println!("cargo::rustc-check-cfg=cfg(ssegate_neon_kernels)");
    println!("cargo::rerun-if-env-changed=SSEGATE_DISABLE_SIMD");
    if env::var_os("CARGO_CFG_SSEGATE_DISABLE_SIMD").is_some() {
        return;
    }
    if env::var("SSEGATE_DISABLE_SIMD").is_ok_and(|v| !v.is_empty() && v != "0") {
        println!("cargo::rustc-cfg=ssegate_disable_simd");
        return;
    }
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let features = env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    match arch.as_str() {
        "x86_64" => println!("cargo::rustc-cfg=ssegate_x86_kernels"),
        "aarch64" if features.split(',').any(|f| f == "neon") => {
            println!("cargo::rustc-cfg=ssegate_neon_kernels");
        }
        _ => {}
    }
}
