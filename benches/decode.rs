//! Decoder throughput against a `memcpy` of the same bytes and the peer SSE crates, in the same
//! group (DESIGN.md's table): one 4 MiB event in 16 KiB and in 64-byte chunks, 100k progress events
//! of ~200 B in 16 KiB chunks, 10k of them in 64-byte chunks, and one 4 MiB structure-dense message. Peers are driven as their users drive them:
//! `futures::executor::block_on` over a `futures::stream::iter` of owned `Bytes` chunks.
//!
//! `cargo bench --bench decode -- --warm-up-time 0.5 --measurement-time 1`
//!
//! Chunks are built as a transport builds them: each its own allocation, made fresh for every
//! timed run (untimed setup), so that dropping a chunk frees it.
//!
//! `eventsource-stream` rescans its whole buffer on every chunk (quadratic in the event size), so on
//! the 4 MiB groups it runs on a 256 KiB cut of the same event (`eventsource-stream_256KiB`, its own
//! throughput): its per-byte figure there flatters it, and is still the slowest.
//!
//! Each group also times the path a guarded client ships: `ssegate_guarded` (`ResumableStream`:
//! decoder, exact gate, JSON-RPC peek, content hash, replay window, every message delivered),
//! `ssegate_guarded+simd_json` (the same, then the application's simd-json parse of each message)
//! and `ssegate+simd_json` (decode, copy, simd-json parse, no guard: what the guard is priced
//! against).
//!
//! `latency_after_last_chunk_4mib` times what a 4 MiB result costs once its last chunk arrives, with
//! the gate running ahead of dispatch (the default) and reading the message at dispatch.
//!
//! Each group also times `xxh3`: the guard's content hash over the same chunks, hot, with nothing
//! else (a floor under `ssegate_guarded`, which reads every byte for it too).
//!
//! Each group also times `drop_chunks`: dropping the owned chunks without decoding them, one free
//! each. Any decoder handed owned chunks pays it, so it is the floor under every row (it dominates
//! with 64-byte chunks). `benches/alloc.rs` counts the allocations.
//!
//! The `tiny_chunks_<size>` groups pick `DecoderConfig::copy_below`: one 4 MiB event in chunks of `size`
//! bytes, decoded and then read once segment by segment (an xxh3 over the rope, as the guard's
//! content hash reads it), with every chunk sliced (`slice`: `copy_below(0)`) or copied (`copy`:
//! `copy_below(usize::MAX)`).

mod common;

use std::hash::Hasher;
use std::hint::black_box;

use bytes::Bytes;
use common::{
    DECODERS, GUARDED, Run, big_event, chunks, dense_event, fresh, guarded_with, memcpy,
    progress_events,
};
use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main,
};
use ssegate::gate::Isa;
use ssegate::sse::DecoderConfig;
use twox_hash::xxhash3_64::{RawHasher, SecretBuffer};

fn bench_decoder(g: &mut BenchmarkGroup<'_, WallTime>, id: &str, run: Run, chunks: &[Bytes]) {
    // The transport hands the decoder owned chunks: allocating them is setup, untimed.
    g.bench_function(id, |b| {
        b.iter_batched(
            || fresh(chunks),
            |chunks| black_box(run(chunks)),
            BatchSize::LargeInput,
        )
    });
}

/// The content hash's pass alone: the guard's streaming xxh3 over every chunk (hot, as memcpy's
/// input is). A floor under `ssegate_guarded`, which also decodes and gates the same bytes.
fn xxh3(g: &mut BenchmarkGroup<'_, WallTime>, chunks: &[Bytes]) {
    g.bench_function("xxh3", |b| {
        b.iter(|| {
            let mut x = RawHasher::new(SecretBuffer::default());
            for c in black_box(chunks) {
                x.write(c);
            }
            black_box(x.finish())
        })
    });
}

fn group(c: &mut Criterion, name: &str, input: &[u8], chunk: usize, events: usize) {
    let owned = chunks(input, chunk);
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Bytes(input.len() as u64));
    g.sample_size(10);
    memcpy(&mut g, input);
    xxh3(&mut g, &owned);
    g.bench_function("drop_chunks", |b| {
        b.iter_batched(|| fresh(&owned), drop, BatchSize::LargeInput)
    });
    for (id, run) in DECODERS {
        if id == "eventsource-stream" && events == 1 {
            // Quadratic: a 256 KiB cut of the same event (see the module docs).
            let mut small = input[..256 << 10].to_vec();
            small.extend_from_slice(b"\"}\n\n");
            let small_chunks = chunks(&small, chunk);
            assert_eq!(run(fresh(&small_chunks)), 1, "{id} on {name}");
            g.throughput(Throughput::Bytes(small.len() as u64));
            bench_decoder(&mut g, "eventsource-stream_256KiB", run, &small_chunks);
            g.throughput(Throughput::Bytes(input.len() as u64));
            continue;
        }
        assert_eq!(run(fresh(&owned)), events, "{id} on {name}");
        bench_decoder(&mut g, id, run, &owned);
    }
    for (id, run) in GUARDED {
        assert_eq!(run(fresh(&owned)), events, "{id} on {name}");
        bench_decoder(&mut g, id, run, &owned);
    }
    // The prose target is also set for CPUs without AVX-512: the shipped path with the guard's gate
    // capped at AVX2 (`guard::GuardConfig::max_isa`), where the CPU has AVX2.
    if name == "one_4mib_event_16k_chunks" && Isa::Avx2.is_available() {
        let run: Run = |c| {
            let mut guard = ssegate::resume::GuardConfig::default();
            guard.max_isa(Isa::Avx2);
            let stream = ssegate::resume::StreamConfig::default()
                .guard(guard)
                .build();
            assert_eq!(stream.gate_isa(), Isa::Avx2);
            guarded_with(stream, c, false)
        };
        assert_eq!(run(fresh(&owned)), events, "avx2 on {name}");
        bench_decoder(&mut g, "ssegate_guarded_avx2", run, &owned);
    }
    g.finish();
}

/// Decodes with `copy_below`, then reads the event's data once, segment by segment.
fn decode_and_read(copy_below: usize, chunks: Vec<Bytes>) -> u64 {
    let mut d = DecoderConfig::default().copy_below(copy_below).build();
    let mut h = 0;
    for c in chunks {
        d.feed(c);
        while let Some(r) = d.next_event() {
            let ev = r.expect("no limit is hit");
            // The guard's content hash: twox-hash's streaming xxh3, no allocation.
            let mut x = RawHasher::new(SecretBuffer::default());
            for seg in ev.data.chunks() {
                x.write(seg);
            }
            h ^= x.finish();
        }
    }
    h
}

fn tiny_chunks(c: &mut Criterion) {
    let big = big_event(4 << 20);
    for size in [64, 128, 256, 512, 1024, 4096] {
        let owned = chunks(&big, size);
        let mut g = c.benchmark_group(format!("tiny_chunks_{size}"));
        g.throughput(Throughput::Bytes(big.len() as u64));
        g.sample_size(10);
        memcpy(&mut g, &big);
        for (id, copy_below) in [("slice", 0), ("copy", usize::MAX)] {
            g.bench_function(id, |b| {
                b.iter_batched(
                    || fresh(&owned),
                    |chunks| black_box(decode_and_read(copy_below, chunks)),
                    BatchSize::LargeInput,
                )
            });
        }
        g.finish();
    }
}

/// What a 4 MiB result costs after its last chunk arrives: the time from feeding that chunk to the
/// delivered message, with the gate running ahead of dispatch (the default) and with the gate
/// reading the whole message at dispatch. The earlier chunks are fed in the untimed setup, as the
/// network would have brought them.
fn latency(c: &mut Criterion) {
    use ssegate::resume::{Output, ResumableStream};
    let owned = chunks(&big_event(4 << 20), 16 << 10);
    let mut g = c.benchmark_group("latency_after_last_chunk_4mib");
    g.sample_size(20);
    // Per message: `.ci/bench-ratios.py` compares the two rows' rates.
    g.throughput(Throughput::Elements(1));
    for (id, from) in [("gate_ahead", 4096), ("gate_at_dispatch", usize::MAX)] {
        g.bench_function(id, |b| {
            b.iter_batched(
                || {
                    let now = std::time::Instant::now();
                    let mut stream = ResumableStream::config().gate_ahead(from).build();
                    let mut chunks = fresh(&owned);
                    let last = chunks.pop().expect("chunks");
                    for c in chunks {
                        stream.feed(c, now);
                        while let Some(out) = stream.poll() {
                            assert!(!matches!(out, Output::Deliver(_) | Output::Failed(_)));
                        }
                    }
                    (stream, last, now)
                },
                |(mut stream, last, now)| {
                    stream.feed(last, now);
                    loop {
                        match stream.poll() {
                            Some(Output::Deliver(d)) => break black_box(d),
                            Some(Output::Failed(f)) => panic!("refused: {f}"),
                            Some(_) => {}
                            None => panic!("the message was not delivered"),
                        }
                    }
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    let big = big_event(4 << 20);
    group(c, "one_4mib_event_16k_chunks", &big, 16 << 10, 1);
    group(c, "one_4mib_event_64b_chunks", &big, 64, 1);
    group(
        c,
        "100k_events_200b_16k_chunks",
        &progress_events(100_000),
        16 << 10,
        100_000,
    );
    // Small events cut mid-line, as a slow or proxied connection hands them over.
    group(
        c,
        "10k_events_200b_64b_chunks",
        &progress_events(10_000),
        64,
        10_000,
    );
    group(
        c,
        "dense_4mib_event_16k_chunks",
        &dense_event(4 << 20),
        16 << 10,
        1,
    );
}

criterion_group!(decode, benches, latency, tiny_chunks);
criterion_main!(decode);
