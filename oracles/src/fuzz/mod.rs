//! The fuzz targets' oracles: one function per target (`fuzz/fuzz_targets/<name>.rs`), raw input
//! in, panic on an oracle violation. The library's `tests/regression.rs` replays every input under
//! `tests/regression/<target>/` through the same function, so a crash found by `cargo fuzz` fails
//! `cargo test` exactly as it failed the fuzzer.
//!
//! The byte-oriented targets (`sse_chunking`, `gate_differential`, `resume_ahead`) read a small header so that seed
//! inputs are the test vectors themselves with two bytes in front:
//!
//! ```text
//! byte 0      configuration bits (target specific; 0 = defaults)
//! byte 1      number of cut points n (mod 17)
//! 2n bytes    cut points, u16 little-endian, each taken modulo (payload length + 1)
//! rest        the payload: SSE bytes, or a JSON text
//! ```
//!
//! The structured targets (`guard_model`, `replay_buffer`) decode their input with `arbitrary`,
//! exactly as `libfuzzer_sys::fuzz_target!` does for a typed argument.

mod gate_differential;
mod guard_model;
pub mod replay_buffer;
mod resume_ahead;
mod sse_chunking;

pub use gate_differential::gate_differential;
pub use guard_model::guard_model;
pub use replay_buffer::replay_buffer;
pub use resume_ahead::resume_ahead;
pub use sse_chunking::sse_chunking;

/// The header of a byte-oriented input: `(config, sorted cut points, payload)`.
fn split_header(data: &[u8]) -> (u8, Vec<usize>, &[u8]) {
    let config = data.first().copied().unwrap_or(0);
    let n = usize::from(data.get(1).copied().unwrap_or(0) % 17);
    let rest = data.get(2..).unwrap_or(&[]);
    let take = (2 * n).min(rest.len() & !1);
    let (raw, payload) = rest.split_at(take);
    let mut cuts: Vec<usize> = raw
        .chunks_exact(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])) % (payload.len() + 1))
        .collect();
    cuts.sort_unstable();
    (config, cuts, payload)
}

/// `payload` as pieces ending at each cut (and at the end); empty pieces included.
fn pieces<'a>(payload: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&payload.len())) {
        out.push(&payload[at..cut]);
        at = cut;
    }
    out
}
