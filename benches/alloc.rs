//! Heap bytes allocated per event, ssegate against the peer crates, with a counting global
//! allocator: the zero-copy claim as a number. Not a criterion bench; it prints a table.
//!
//! `cargo bench --bench alloc`
//!
//! The input chunks are allocated before counting starts (a transport hands them over, each chunk
//! its own allocation); what is counted is every allocation the decoder (and, for peers, its
//! `Stream` plumbing) makes while turning those chunks into events, each event dropped as soon as
//! it is yielded. ssegate's copies of pieces under `DecoderConfig::copy_below` show up here.

mod common;

use bytes::Bytes;
use common::{DECODERS, big_event, dense_event, progress_events};
use ssegate_oracles::alloc::{Counting, Span};

// Counts every allocation (a grown buffer counts its growth); see `ssegate_oracles::alloc`.
#[global_allocator]
static GLOBAL: Counting = Counting;

fn measure(run: common::Run, chunks: Vec<Bytes>) -> (u64, u64, usize) {
    let span = Span::process();
    let events = run(chunks);
    (span.allocated(), span.allocations(), events)
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument filters decoders by name.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let big = big_event(4 << 20);
    let mut small_big = big[..256 << 10].to_vec();
    small_big.extend_from_slice(b"\"}\n\n");
    let inputs: [(&str, Vec<u8>, usize, Vec<u8>); 4] = [
        (
            "one 4 MiB event, 16 KiB chunks",
            big.clone(),
            16 << 10,
            small_big.clone(),
        ),
        ("one 4 MiB event, 64 B chunks", big, 64, small_big),
        (
            "100k events of ~200 B, 16 KiB chunks",
            progress_events(100_000),
            16 << 10,
            Vec::new(),
        ),
        (
            "dense 4 MiB event, 16 KiB chunks",
            dense_event(4 << 20),
            16 << 10,
            Vec::new(),
        ),
    ];
    println!(
        "{:<38} {:<22} {:>8} {:>16} {:>12} {:>14}",
        "input", "decoder", "events", "bytes allocated", "allocations", "bytes/event"
    );
    for (name, input, chunk, cut) in &inputs {
        for (id, run) in DECODERS {
            if !filter.is_empty() && !filter.iter().any(|f| id.contains(f.as_str())) {
                continue;
            }
            // eventsource-stream is quadratic in time on one big event: the 256 KiB cut.
            let (id, input) = if id == "eventsource-stream" && !cut.is_empty() {
                ("eventsource-stream_256KiB", cut)
            } else {
                (id, input)
            };
            let chunks = common::chunks(input, *chunk);
            let (b, n, events) = measure(run, chunks);
            println!(
                "{name:<38} {id:<22} {events:>8} {b:>16} {n:>12} {:>14.1}",
                b as f64 / events.max(1) as f64
            );
        }
    }
}
