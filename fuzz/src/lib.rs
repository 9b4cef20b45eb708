//! The fuzz targets' oracles, shared with the crate's `tests/regression.rs` (which compiles
//! `oracles/` into itself), so a crash input replayed by `cargo test` runs exactly the checks the
//! fuzzer ran. Each entry point takes the raw fuzz input and panics when an oracle fails.

mod oracles;

pub use oracles::{gate_differential, guard_model, replay_buffer, resume_ahead, sse_chunking};
