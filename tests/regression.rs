//! Replays every input under `tests/regression/<target>/` through the oracle of the fuzz target of
//! the same name: the oracles are `ssegate_oracles::fuzz`, the functions the fuzz targets call, so
//! a crash found by `cargo fuzz` and copied here fails `cargo test` exactly as it failed the fuzzer
//! (and passes once fixed). The directories also hold seed inputs that exercise edge cases.
//!
//! With `SSEGATE_FUZZ_CORPUS` set to a corpus directory (`fuzz/corpus`), each test also replays
//! the inputs of that directory's `<target>/`: `.ci/aarch64` does so under qemu, so that the NEON
//! kernels, which no fuzzer runs, meet the whole committed corpus through the same oracles.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use ssegate_oracles::fuzz as oracles;

/// The files of `dir`, sorted; at least one.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no inputs in {}", dir.display());
    names
}

fn replay(target: &str, oracle: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/regression")
        .join(target);
    let mut names = inputs(&dir);
    if let Some(corpus) = std::env::var_os("SSEGATE_FUZZ_CORPUS") {
        let corpus = inputs(&Path::new(&corpus).join(target));
        eprintln!(
            "{target}: also the {} inputs of the fuzz corpus",
            corpus.len()
        );
        names.extend(corpus);
    }
    let failed: Vec<String> = names
        .iter()
        .filter(|path| {
            let data = std::fs::read(path).expect("readable input");
            catch_unwind(AssertUnwindSafe(|| oracle(&data))).is_err()
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} {target} inputs fail their oracle:\n{}",
        failed.len(),
        names.len(),
        failed.join("\n")
    );
}

#[test]
fn sse_chunking() {
    replay("sse_chunking", oracles::sse_chunking);
}

#[test]
fn gate_differential() {
    replay("gate_differential", oracles::gate_differential);
}

#[test]
fn guard_model() {
    replay("guard_model", oracles::guard_model);
}

#[test]
fn replay_buffer() {
    replay("replay_buffer", oracles::replay_buffer);
}

#[test]
fn resume_ahead() {
    replay("resume_ahead", oracles::resume_ahead);
}
