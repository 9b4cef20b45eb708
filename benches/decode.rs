//! Decoder throughput against a `memcpy` of the same bytes and the peer SSE crates, in the same
//! group (DESIGN.md's table): one 4 MiB event in 16 KiB and in 64-byte chunks, 100k progress events
//! of ~200 B, and one 4 MiB structure-dense message. Peers are driven as their users drive them:
//! `futures::executor::block_on` over a `futures::stream::iter` of pre-sliced `Bytes` chunks.
//!
//! `cargo bench --bench decode -- --warm-up-time 1 --measurement-time 2`
//!
//! `eventsource-stream` rescans its whole buffer on every chunk (quadratic in the event size), so on
//! the 4 MiB groups it runs on a 256 KiB cut of the same event (`eventsource-stream_256KiB`, its own
//! throughput): its per-byte figure there flatters it, and is still the slowest.
//!
//! Each group also times `drop_chunks`: dropping the owned chunks without decoding them, one
//! refcount decrement each. Any decoder handed owned chunks pays it, so it is the floor under every
//! row (it dominates with 64-byte chunks). `benches/alloc.rs` counts the allocations.

mod common;

use std::hint::black_box;

use bytes::Bytes;
use common::{DECODERS, Run, big_event, dense_event, progress_events, slices};
use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main,
};

fn bench_decoder(g: &mut BenchmarkGroup<'_, WallTime>, id: &str, run: Run, chunks: &[Bytes]) {
    // The transport hands the decoder owned chunks: cloning the pre-sliced Vec is setup, untimed.
    g.bench_function(id, |b| {
        b.iter_batched(
            || chunks.to_vec(),
            |chunks| black_box(run(chunks)),
            BatchSize::LargeInput,
        )
    });
}

fn group(c: &mut Criterion, name: &str, input: &[u8], chunk: usize, events: usize) {
    let bytes = Bytes::copy_from_slice(input);
    let chunks = slices(&bytes, chunk);
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Bytes(input.len() as u64));
    g.sample_size(10);
    let mut dst = vec![0u8; input.len()];
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&bytes));
            black_box(&dst);
        })
    });
    g.bench_function("drop_chunks", |b| {
        b.iter_batched(|| chunks.to_vec(), drop, BatchSize::LargeInput)
    });
    for (id, run) in DECODERS {
        if id == "eventsource-stream" && events == 1 {
            // Quadratic: a 256 KiB cut of the same event (see the module docs).
            let mut small = input[..256 << 10].to_vec();
            small.extend_from_slice(b"\"}\n\n");
            let small = Bytes::from(small);
            let small_chunks = slices(&small, chunk);
            assert_eq!(run(small_chunks.clone()), 1, "{id} on {name}");
            g.throughput(Throughput::Bytes(small.len() as u64));
            bench_decoder(&mut g, "eventsource-stream_256KiB", run, &small_chunks);
            g.throughput(Throughput::Bytes(input.len() as u64));
            continue;
        }
        assert_eq!(run(chunks.clone()), events, "{id} on {name}");
        bench_decoder(&mut g, id, run, &chunks);
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
    group(
        c,
        "dense_4mib_event_16k_chunks",
        &dense_event(4 << 20),
        16 << 10,
        1,
    );
}

criterion_group!(decode, benches);
criterion_main!(decode);
