//! The replay buffer's memory, measured by a counting allocator (not by the buffer's own counters):
//! hostile use holds at most the byte budget plus a constant per budgeted event, remembered
//! too-large event and stream; a resume from an old id allocates nothing per event appended since.

use ssegate::replay::{BufferConfig, MissReason, ReplayBuffer};
use ssegate_oracles::alloc::{Counting, Span};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes held since `span` started (nothing held counts as 0).
fn held_since(span: &Span) -> usize {
    span.held().max(0) as usize
}

/// Bookkeeping allowed per budgeted event, remembered too-large event and stream (tree nodes,
/// `Bytes` headers, frame capacity slack): generous, but a constant.
const PER_ITEM: usize = 1024;

// One test function: the allocator is process-wide, so nothing else may run concurrently.
#[test]
fn memory_is_bounded_by_the_limits() {
    // 1. Hostile use: streams opened and never closed, each with a small and an oversized event;
    //    resumes from every id. The old buffer kept every open stream and every too-large id.
    let mut config = BufferConfig::default();
    config
        .max_session_bytes(64 << 10)
        .max_session_events(64)
        .max_event_bytes(16 << 10)
        .max_streams(8)
        .max_too_large(16);
    let base = Span::process();
    let mut buf = ReplayBuffer::new(config.clone());
    let big = vec![b'x'; 20 << 10];
    for n in 0..20_000u64 {
        let s = buf.open_stream();
        let a = buf.append(s, None, b"{\"jsonrpc\":\"2.0\"}").unwrap();
        let b = buf.append(s, Some("message"), &big).unwrap();
        assert!(b.oversized);
        let _ = buf.replay_after(&a.id);
        let _ = buf.replay_after(&format!("{}-0", n / 2 + 1));
    }
    let held = held_since(&base);
    let bound = config.max_session_bytes
        + PER_ITEM * (config.max_session_events + config.max_too_large + config.max_streams);
    assert!(
        held <= bound,
        "hostile use holds {held} bytes, bound {bound}"
    );
    assert!(buf.streams() <= 8 && buf.too_large_events() <= 16);
    drop(buf);
    // One long stream of oversized events: each is remembered as too large, within the cap.
    let base = Span::process();
    let mut buf = ReplayBuffer::new(config.clone());
    let s = buf.open_stream();
    for _ in 0..20_000 {
        let _ = buf.append(s, None, &big).unwrap();
    }
    let held = held_since(&base);
    assert!(
        held <= bound,
        "a stream of oversized events holds {held} bytes, bound {bound}"
    );
    drop(buf);

    // 2. A resume from an id evicted long ago on a long stream: no allocation per event.
    let mut config = BufferConfig::default();
    config.max_session_events(64);
    let mut buf = ReplayBuffer::new(config);
    let s = buf.open_stream();
    for _ in 0..200_000 {
        let _ = buf.append(s, None, b"{}").unwrap();
    }
    let span = Span::process();
    let miss = buf.replay_after("1-0").unwrap_err();
    let peak = span.peak();
    assert_eq!(
        (miss.reason, miss.missing.as_deref()),
        (MissReason::Evicted, Some("1-1"))
    );
    assert!(
        peak <= 256,
        "replay_after from an old id allocated {peak} bytes"
    );
    drop(miss);
    // And a served replay allocates the frames' vector only.
    let span = Span::process();
    let ok = buf.replay_after("1-199935").unwrap();
    let peak = span.peak();
    assert_eq!(ok.frames.len(), 64);
    assert!(
        peak <= 64 * std::mem::size_of::<bytes::Bytes>(),
        "a replay of 64 frames allocated {peak} bytes"
    );
}
