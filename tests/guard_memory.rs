//! The guard's memory, measured by a counting global allocator (per thread, so the tests of this
//! file can run in parallel): no allocation per event on the steady-state guard path, and
//! responses with huge ids cost the windows a few words each.

use bytes::Bytes;
use ssegate::gate::{Gate, Verdict};
use ssegate::guard::{Decision, Guard, GuardConfig, Registry};
use ssegate::message::RpcId;
use ssegate::sse::{Decoder, Event};
use ssegate_oracles::alloc::{Counting, Span};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// `n` small events as a transport delivers them (one chunk each), decoded and gated up front.
fn small_events(from: usize, n: usize) -> Vec<(Event, Verdict)> {
    let mut decoder = Decoder::new();
    let mut gate = Gate::new();
    let mut out = Vec::with_capacity(n);
    for i in from..from + n {
        let frame = match i % 50 {
            0 => format!("id: {i}\ndata:\n\n"),
            1 => "data:\n\n".to_string(),
            // A response to a request nobody made (each id once): delivered, and remembered in the
            // guard's bounded window of unrequested response ids.
            2 => format!("id: {i}\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{i},\"result\":{{}}}}\n\n"),
            _ => format!(
                "id: {i}\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":7,\"progress\":{i}}}}}\n\n"
            ),
        };
        decoder.feed(Bytes::from(frame));
        while let Some(event) = decoder.next_event() {
            let event = event.expect("within limits");
            let verdict = if event.data.is_empty() {
                Verdict::Incomplete
            } else {
                gate.check(&event.data)
            };
            out.push((event, verdict));
        }
    }
    out
}

fn run(guard: &mut Guard, events: Vec<(Event, Verdict)>) -> u64 {
    let span = Span::thread();
    for (event, verdict) in events {
        match guard.on_event_with_verdict(event, verdict) {
            Ok(Decision::Deliver(d)) => drop(d),
            Ok(_) => {}
            Err(e) => panic!("refused: {e}"),
        }
    }
    span.allocations()
}

#[test]
fn the_steady_state_guard_path_allocates_nothing_per_event() {
    // 200 unrequested responses in the warm-up: that window is full too.
    let mut guard = GuardConfig::default()
        .window(1024)
        .unrequested_window(128)
        .build();
    guard.expect_response(RpcId::Number(-1));
    // Warm-up: the windows fill up to their bound.
    let warm = run(&mut guard, small_events(0, 10_000));
    let events = small_events(10_000, 10_000);
    let steady = run(&mut guard, events);
    let events = small_events(20_000, 20_000);
    let longer = run(&mut guard, events);
    // O(1), not O(events): the windows' tables may be rebuilt a bounded number of times.
    assert!(
        steady <= 8,
        "{steady} allocations for 10k events (warm-up {warm})"
    );
    assert!(longer <= 8, "{longer} allocations for 20k events");
}

/// 1000 in an optimised build; unoptimised, hashing and scanning a gigabyte takes minutes, so
/// 200 (the windows are full after 40 either way).
const RESPONSES: usize = if cfg!(debug_assertions) { 200 } else { 1000 };

#[test]
fn a_thousand_responses_with_1_mib_ids_stay_bounded() {
    // Small windows, so that they are full after the first 40 responses: from then on, nothing
    // may grow at all.
    let session = Registry::with_window(16);
    let mut guard = GuardConfig::default()
        .window(16)
        .unrequested_window(16)
        .build_in(&session);
    let mut decoder = Decoder::new();
    let mut growth = Vec::with_capacity(RESPONSES);
    // One frame template; each response gets its own chunk (as a transport hands them over) with
    // the id's last four bytes rewritten, so that every id differs.
    let prefix = "id: e0000\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"";
    let mut frame = prefix.as_bytes().to_vec();
    frame.resize(prefix.len() + (1 << 20) + 4, b'x');
    frame.extend_from_slice(b"\",\"result\":{}}\n\n");
    let digits = prefix.len() + (1 << 20);
    let base = Span::thread();
    for i in 0..RESPONSES {
        let tag = format!("{i:04}");
        frame[5..9].copy_from_slice(tag.as_bytes());
        frame[digits..digits + 4].copy_from_slice(tag.as_bytes());
        // Every other response was requested (the client's own id, released when answered).
        if i % 2 == 0 {
            let id = std::str::from_utf8(&frame[prefix.len()..digits + 4]).unwrap();
            guard.expect_response(RpcId::String(id.into()));
        }
        decoder.feed(Bytes::copy_from_slice(&frame));
        let event = decoder
            .next_event()
            .expect("one event")
            .expect("within limits");
        // The gate's verdict is not what is measured here (and is slow unoptimised).
        match guard.on_event_with_verdict(event, Verdict::Complete) {
            Ok(Decision::Deliver(d)) => drop(d),
            other => panic!("{other:?}"),
        }
        growth.push(base.held());
    }
    // A few words per remembered id and event, nothing per id byte (the ids total 1 GB); the
    // cursor and the decoder's last id may pin the newest chunk (1 MiB), twice at most.
    let last = *growth.last().unwrap();
    assert!(
        last < (2 << 20) + (512 << 10),
        "{last} bytes retained after {RESPONSES} responses"
    );
    let late = growth[RESPONSES - 1] - growth[RESPONSES / 2 - 1];
    assert!(late <= 0, "{late} bytes more in the second half");
    assert!(session.outstanding().is_empty());

    // And the guard's own peak while handling one such response is a few times the event.
    let id = format!("{}z", "y".repeat(1 << 20));
    guard.expect_response(RpcId::String(id.clone().into()));
    decoder.feed(Bytes::from(format!(
        "id: z\ndata: {{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"result\":{{}}}}\n\n"
    )));
    let event = decoder
        .next_event()
        .expect("one event")
        .expect("within limits");
    let span = Span::thread();
    drop(guard.on_event(event));
    assert!(span.peak() < 4 << 20, "peak {} bytes", span.peak());
}
