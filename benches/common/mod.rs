//! What the benches share: MCP-shaped JSON and SSE inputs, chunks of them as a transport hands
//! them over, the baseline rows every group measures against, and (with the `stream` feature, which
//! the `decode` and `alloc` benches need) ssegate and the peer decoders as functions ([`decoders`]).
#![allow(dead_code)]

#[cfg(feature = "stream")]
mod decoders;

use std::hint::black_box;

use bytes::Bytes;
use criterion::measurement::WallTime;
use criterion::{BatchSize, BenchmarkGroup};
// Not every bench uses the decoders.
#[cfg(feature = "stream")]
#[allow(unused_imports)]
pub(crate) use decoders::*;

/// The `memcpy` row: a copy of `input`, the floor each group's throughputs are compared with.
pub(crate) fn memcpy(g: &mut BenchmarkGroup<'_, WallTime>, input: &[u8]) {
    let mut dst = vec![0u8; input.len()];
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(input));
            black_box(&dst);
        })
    });
}

/// A row `id`: simd-json's full parse of `json` into a borrowed value (its buffers reused; the
/// input copied outside the timing, as the parse writes into it).
pub(crate) fn simd_json_parse(g: &mut BenchmarkGroup<'_, WallTime>, id: &str, json: &[u8]) {
    let mut buffers = simd_json::Buffers::new(json.len());
    g.bench_function(id, |b| {
        b.iter_batched_ref(
            || json.to_vec(),
            |input| {
                let v = simd_json::to_borrowed_value_with_buffers(input, &mut buffers).unwrap();
                black_box(&v);
            },
            BatchSize::LargeInput,
        )
    });
}

/// A tool result as MCP servers send it (the TypeScript SDK's frame: `event: message`, `id:`, one
/// `data:` line): one JSON-RPC response, its text a JSON string of prose with escapes.
pub(crate) fn big_event(size: usize) -> Vec<u8> {
    let mut text = String::new();
    let prose = "The quick brown fox jumps over the lazy dog; \\\"quoted\\\" text, a path C:\\\\tmp\\\\x, \
                 numbers 12345.678 and a line break\\n. ";
    while text.len() < size {
        text.push_str(prose);
    }
    text.truncate(size);
    format!(
        "event: message\nid: 17\ndata: {{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}],\"isError\":false}}}}\n\n"
    )
    .into_bytes()
}

/// One JSON-RPC result whose bulk is a structure-dense array of small objects (~4 MiB), in the same
/// frame as [`big_event`].
pub(crate) fn dense_event(size: usize) -> Vec<u8> {
    let mut out = rows(
        b"event: message\nid: 18\ndata: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{\"rows\":["
            .to_vec(),
        size,
    );
    out.extend_from_slice(b"]}}\n\n");
    out
}

/// `out` followed by small JSON objects, comma-separated, until it is at least `size` bytes long:
/// the bulk of the structure-dense inputs.
pub(crate) fn rows(mut out: Vec<u8>, size: usize) -> Vec<u8> {
    let mut i = 0u64;
    while out.len() < size {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(
            format!(
                r#"{{"id":{i},"v":[{},{}.5,-3],"ok":true,"t":"x{}"}}"#,
                i % 1000,
                i % 7,
                i % 13
            )
            .as_bytes(),
        );
        i += 1;
    }
    out
}

/// A JSON-RPC tool result of about `size` bytes whose bulk is one long text string with escapes
/// (quotes, newlines, tabs, backslashes) and some non-ASCII.
pub(crate) fn prose_result(size: usize) -> Vec<u8> {
    let mut text = String::with_capacity(size);
    let mut i = 0u64;
    while text.len() < size.saturating_sub(200) {
        text.push_str(&format!(
            "Paragraph {i}: the server said \"resume from here\" and the client\tappended the replay \
             onto a partial event, so the JSON looked complete but was not — a path like C:\\tmp\\x.\n"
        ));
        i += 1;
    }
    let v = serde_json::json!({"jsonrpc": "2.0", "id": 42, "result": {"content": [{"type": "text", "text": text}], "isError": false}});
    serde_json::to_vec(&v).unwrap()
}

/// `n` progress notifications, ~200 bytes each, in the same frame as [`big_event`].
pub(crate) fn progress_events(n: usize) -> Vec<u8> {
    let mut out = String::new();
    for i in 0..n {
        out.push_str(&format!(
            "event: message\nid: {i}\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":\"req-42\",\"progress\":{i},\"total\":{n},\"message\":\"Processing item {i} of {n}\"}}}}\n\n"
        ));
    }
    out.into_bytes()
}

/// `input` in chunks of `size` bytes as a transport hands them over: each chunk its own
/// allocation (not a slice of one shared buffer), so that dropping a chunk frees it and a chunk a
/// decoder keeps pins its own bytes only.
pub(crate) fn chunks(input: &[u8], size: usize) -> Vec<Bytes> {
    input.chunks(size).map(Bytes::copy_from_slice).collect()
}

/// Fresh copies of `chunks` (each its own allocation again), for one timed iteration.
pub(crate) fn fresh(chunks: &[Bytes]) -> Vec<Bytes> {
    chunks.iter().map(|c| Bytes::copy_from_slice(c)).collect()
}
