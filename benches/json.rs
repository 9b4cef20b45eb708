//! The JSON side: the completeness gate against `memcpy`, `serde_json` and `simd_json` full parses,
//! the same two crates' validation-only paths (no value built), and the naive client that re-parses
//! its accumulated buffer on every chunk, one criterion group per input: a prose-heavy 4 MiB tool
//! result and a 4 MiB structure-dense message.
//!
//! `cargo bench --bench json -- --warm-up-time 1 --measurement-time 2`
//!
//! The naive client is quadratic in the message size, so it runs on a 256 KiB message of the same
//! shape (`naive_reparse_per_16k_chunk_256KiB`, its own throughput) so that the bench finishes; at
//! 4 MiB it would be another ~16x slower per byte.

mod common;

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use ssegate::gate::{Gate, Verdict};

const SIZE: usize = 4 << 20;
const CHUNK: usize = 16 << 10;

/// A JSON-RPC result whose bulk is a structure-dense array of small objects and numbers.
fn dense(size: usize) -> Vec<u8> {
    let mut out = common::rows(
        br#"{"jsonrpc":"2.0","id":4,"result":{"rows":["#.to_vec(),
        size.saturating_sub(200),
    );
    out.extend_from_slice(b"]}}");
    out
}

/// The naive client: append each chunk, try a full parse, until one succeeds.
fn naive_reparse(json: &[u8]) -> usize {
    let mut buf = Vec::new();
    let mut attempts = 0;
    for chunk in json.chunks(CHUNK) {
        buf.extend_from_slice(chunk);
        attempts += 1;
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&buf) {
            black_box(&v);
            return attempts;
        }
    }
    panic!("the message never parsed");
}

fn group(c: &mut Criterion, name: &str, make: fn(usize) -> Vec<u8>) {
    let json = make(SIZE);
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Bytes(json.len() as u64));
    g.sample_size(10);

    common::memcpy(&mut g, &json);

    let mut gate = Gate::new();
    g.bench_function("ssegate_gate", |b| {
        b.iter(|| {
            gate.reset();
            for chunk in black_box(&json).chunks(CHUNK) {
                gate.feed(chunk);
            }
            assert_eq!(gate.verdict(), Verdict::Complete);
        })
    });

    g.bench_function("serde_json_value", |b| {
        b.iter(|| black_box(serde_json::from_slice::<serde_json::Value>(black_box(&json)).unwrap()))
    });

    common::simd_json_parse(&mut g, "simd_json_borrowed", &json);

    // The validators: the same grammar check with no value built. `serde_json_validate` walks the
    // input once, byte by byte, into `IgnoredAny`; `simd_json_tape` is simd-json's stage 1 and
    // stage 2 (structural indexes, then the tape, strings unescaped into its buffers). They are
    // what an exact verdict costs elsewhere, and the peers of `ssegate_gate`.
    g.bench_function("serde_json_validate", |b| {
        b.iter(|| {
            black_box(serde_json::from_slice::<serde::de::IgnoredAny>(black_box(&json)).unwrap())
        })
    });

    let mut buffers = simd_json::Buffers::new(json.len());
    g.bench_function("simd_json_tape", |b| {
        b.iter_batched_ref(
            || json.clone(),
            |input| {
                let tape = simd_json::to_tape_with_buffers(input, &mut buffers).unwrap();
                black_box(&tape);
            },
            BatchSize::LargeInput,
        )
    });

    let small = make(256 << 10);
    assert!(naive_reparse(&small) > 1);
    g.throughput(Throughput::Bytes(small.len() as u64));
    g.bench_function("naive_reparse_per_16k_chunk_256KiB", |b| {
        b.iter(|| black_box(naive_reparse(black_box(&small))))
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    group(c, "json_prose_4mib", common::prose_result);
    group(c, "json_dense_4mib", dense);
}

criterion_group!(json, benches);
criterion_main!(json);
