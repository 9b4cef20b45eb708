//! `sse_memory`: for any input the decoder's heap stays within a small constant times its limits,
//! measured by a counting global allocator (not by the decoder's own counters).
//!
//! Input: byte 0 picks the limit (`1 KiB << (b % 8)`, for `max_line`, `max_event` and
//! `max_block`; `max_field` is at most 4 KiB), byte 1 the chunk size, byte 2 `copy_below`; the rest
//! is a program of `[len: u8][repeat: u16 le][len bytes]` pieces, each piece repeated `repeat`
//! times (the whole stream at most 16 MiB), so a few bytes of input become megabytes of lines,
//! comments or data. Chunks are made one at a time, each its own allocation, as a transport
//! makes them; events are dropped as soon as they are pulled.
#![no_main]

use bytes::Bytes;
use ssegate::sse::DecoderConfig;
use ssegate_oracles::alloc::{Counting, Span};

#[global_allocator]
static GLOBAL: Counting = Counting;

const CHUNKS: [usize; 6] = [1, 7, 64, 300, 4096, 16 << 10];
const COPY_BELOW: [usize; 3] = [64, 256, 1000];
const MAX_STREAM: usize = 16 << 20;

/// The program's pieces, each with its repeat count.
fn program(mut rest: &[u8]) -> Vec<(&[u8], usize)> {
    let mut out = Vec::new();
    while rest.len() >= 3 {
        let len = usize::from(rest[0]);
        let repeat = usize::from(u16::from_le_bytes([rest[1], rest[2]]));
        let body = &rest[3..(3 + len).min(rest.len())];
        rest = &rest[3 + body.len()..];
        if !body.is_empty() {
            out.push((body, repeat));
        }
    }
    out
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let limit = (1usize << 10) << (data[0] % 8);
    let chunk = CHUNKS[usize::from(data[1]) % CHUNKS.len()];
    let copy_below = COPY_BELOW[usize::from(data[2]) % COPY_BELOW.len()];
    let pieces = program(&data[3..]);
    let field = limit.min(4 << 10);

    let span = Span::thread();
    let mut config = DecoderConfig::default();
    config
        .max_line(limit)
        .max_event(limit)
        .max_block(limit)
        .max_field(field)
        .copy_below(copy_below);
    let mut d = config.build();
    // The stream, made chunk by chunk.
    let (mut piece, mut done, mut at, mut total) = (0, 0, 0, 0);
    let mut buf = Vec::with_capacity(chunk);
    loop {
        while buf.len() < chunk && piece < pieces.len() && total < MAX_STREAM {
            let (body, repeat) = pieces[piece];
            let n = (body.len() - at).min(chunk - buf.len());
            buf.extend_from_slice(&body[at..at + n]);
            total += n;
            at += n;
            if at == body.len() {
                at = 0;
                done += 1;
                if done >= repeat {
                    done = 0;
                    piece += 1;
                }
            }
        }
        if buf.is_empty() {
            break;
        }
        d.feed(Bytes::copy_from_slice(&buf));
        buf.clear();
        while let Some(r) = d.next_event() {
            drop(r);
        }
    }
    drop(d.finish());
    drop(d);
    let peak = span.peak();
    // The documented bound, plus the chunk being fed, the one being scanned, this function's own
    // chunk buffer, and a constant for the decoder's fixed-size parts.
    let bound = limit + 4 * limit + 2 * field + 4 * chunk + (64 << 10);
    assert!(
        peak <= bound,
        "peak heap {peak} B over the bound {bound} B (limit {limit}, chunks of {chunk}, copy_below {copy_below}, stream {total} B)"
    );
});
