//! The gate against memcpy and simd-json, one criterion group per 4 MiB input: a prose-heavy tool
//! result and a structure-dense array of records. `gate_exact/<isa>` is the path the guard ships
//! (the exact recogniser); `gate_fast/<isa>` is bracket balancing alone.
//!
//! `cargo bench --bench gate -- --warm-up-time 0.5 --measurement-time 1`

mod common;

use std::hint::black_box;

use bytes::Bytes;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use ssegate::gate::{GateConfig, Isa};
use ssegate::message::{Message, Parser};
use ssegate::sse::{Data, Decoder};

const SIZE: usize = 4 << 20;
const CHUNK: usize = 16 << 10;

/// A structure-dense array of small objects and numbers.
fn dense() -> Vec<u8> {
    let mut out = common::rows(b"[".to_vec(), SIZE - 200);
    out.push(b']');
    out
}

fn sse_frame(json: &[u8]) -> Bytes {
    let mut out = b"id: 1\nevent: message\ndata: ".to_vec();
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

fn group(c: &mut Criterion, name: &str, json: Vec<u8>) {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Bytes(json.len() as u64));
    g.sample_size(20);

    common::memcpy(&mut g, &json);

    for isa in Isa::available().rev() {
        for exact in [false, true] {
            let mut gate = GateConfig::new().exact(exact).max_isa(isa).build();
            let id = format!(
                "gate_{}/{}",
                if exact { "exact" } else { "fast" },
                isa.name()
            );
            g.bench_function(id, |b| {
                b.iter(|| {
                    gate.reset();
                    for chunk in black_box(&json).chunks(CHUNK) {
                        gate.feed(chunk);
                    }
                    assert_eq!(gate.verdict(), ssegate::gate::Verdict::Complete);
                })
            });
        }
    }

    common::simd_json_parse(&mut g, "simd_json_parse", &json);

    let mut parser = Parser::new();
    let msg = Message::new(Data::from(Bytes::from(json.clone())));
    g.bench_function("parse_value", |b| {
        b.iter(|| {
            let v = msg.parse_value(&mut parser).unwrap();
            black_box(&v);
        })
    });

    // Chunks as a transport delivers them: each its own allocation, made fresh for every iteration
    // (outside the timing), so dropping a chunk really frees it.
    let frame = sse_frame(&json);
    let chunks = || common::chunks(&frame, CHUNK);
    let mut gate = GateConfig::new().build();
    g.bench_function("decode_gate_parse", |b| {
        b.iter_batched(
            chunks,
            |chunks| {
                let mut decoder = Decoder::new();
                let mut parsed = 0;
                for chunk in chunks {
                    decoder.feed(chunk);
                    while let Some(event) = decoder.next_event() {
                        let event = event.unwrap();
                        assert_eq!(gate.check(&event.data), ssegate::gate::Verdict::Complete);
                        let msg = Message::new(event.data);
                        let v = msg.parse_value(&mut parser).unwrap();
                        black_box(&v);
                        parsed += 1;
                    }
                }
                assert_eq!(parsed, 1);
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    group(c, "prose_4MiB", common::prose_result(SIZE));
    group(c, "dense_4MiB", dense());
}

criterion_group!(gate_benches, benches);
criterion_main!(gate_benches);
