//! Decoder throughput against a `memcpy` of the same bytes, in the same group (DESIGN.md's table):
//! one 4 MiB event in 16 KiB and in 64-byte chunks, and 100k progress events of ~200 B.
//!
//! `cargo bench --bench decode -- --warm-up-time 1 --measurement-time 3`
//!
//! Each group also times `drop_chunks`: dropping the owned chunks without decoding them, one
//! refcount decrement each. Any decoder that is handed owned chunks pays it, so it is the floor
//! under `ssegate` (it dominates with 64-byte chunks). Before timing, a counting allocator checks
//! that decoding allocates nothing per event.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use ssegate::sse::Decoder;

/// The system allocator, counting allocations (and reallocations) so the setup can check them.
struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`, which upholds the `GlobalAlloc` contract.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's guarantees for `layout` are passed on as they are.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation goes through it).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `dealloc`; `new_size` is the caller's, valid for `layout.align()`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A tool result as MCP servers send it: one JSON-RPC response on one `data:` line, its text a
/// JSON string of prose with escapes.
fn big_event(size: usize) -> Vec<u8> {
    let mut text = String::new();
    let prose = "The quick brown fox jumps over the lazy dog; \\\"quoted\\\" text, a path C:\\\\tmp\\\\x, \
                 numbers 12345.678 and a line break\\n. ";
    while text.len() < size {
        text.push_str(prose);
    }
    text.truncate(size);
    format!(
        "id: 17\ndata: {{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}],\"isError\":false}}}}\n\n"
    )
    .into_bytes()
}

/// `n` progress notifications with ids, ~200 bytes each.
fn progress_events(n: usize) -> Vec<u8> {
    let mut out = String::new();
    for i in 0..n {
        out.push_str(&format!(
            "id: {i}\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":\"req-42\",\"progress\":{i},\"total\":{n},\"message\":\"Processing item {i} of {n}\"}}}}\n\n"
        ));
    }
    out.into_bytes()
}

fn slices(input: &Bytes, size: usize) -> Vec<Bytes> {
    (0..input.len())
        .step_by(size)
        .map(|at| input.slice(at..(at + size).min(input.len())))
        .collect()
}

fn decode_all(chunks: Vec<Bytes>) -> usize {
    let mut d = Decoder::new();
    let mut n = 0;
    for c in chunks {
        d.feed(c);
        while let Some(r) = d.next_event() {
            black_box(&r);
            n += 1;
        }
    }
    n
}

fn group(c: &mut Criterion, name: &str, input: &[u8], chunk: usize, events: usize) {
    let bytes = Bytes::copy_from_slice(input);
    let chunks = slices(&bytes, chunk);
    let owned = chunks.clone();
    let before = ALLOCS.load(Ordering::Relaxed);
    assert_eq!(decode_all(owned), events);
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    // The chunk queue, the rope's doubling growth for an event of many segments (O(log n)), and an
    // `id` cut by a chunk boundary, which is joined into its own small buffer (about one chunk
    // boundary in 20 here): never one per event.
    assert!(
        allocs <= 8 + 2 * (chunks.len().ilog2() as usize) + chunks.len() / 16,
        "{name}: {allocs} allocations for {events} events in {} chunks",
        chunks.len()
    );
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Bytes(input.len() as u64));
    g.sample_size(20);
    let mut dst = vec![0u8; input.len()];
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&bytes));
            black_box(&dst);
        })
    });
    g.bench_function("drop_chunks", |b| {
        b.iter_batched(
            || chunks.clone(),
            |chunks| drop(black_box(chunks)),
            BatchSize::LargeInput,
        )
    });
    // The transport hands the decoder owned chunks: cloning the pre-sliced Vec is setup, untimed.
    g.bench_function("ssegate", |b| {
        b.iter_batched(
            || chunks.clone(),
            |chunks| black_box(decode_all(chunks)),
            BatchSize::LargeInput,
        )
    });
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
}

criterion_group!(decode, benches);
criterion_main!(decode);
