//! The guard's memory, measured by a counting global allocator (per thread, so the tests of this
//! file can run in parallel): no allocation per event on the steady-state guard path, and
//! responses with huge ids cost the windows a few words each (issue 14, memory 5).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::Bytes;
use ssegate::gate::{Gate, Verdict};
use ssegate::guard::{Config, Decision, Guard, Registry};
use ssegate::message::RpcId;
use ssegate::sse::{Decoder, Event};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

fn note(delta: i64, allocation: bool) {
    // `try_with`: the allocator is also called while a thread's locals are torn down.
    let _ = ALLOCS.try_with(|a| a.set(a.get() + u64::from(allocation)));
    let _ = LIVE.try_with(|l| {
        l.set(l.get() + delta);
        let _ = PEAK.try_with(|p| p.set(p.get().max(l.get())));
    });
}

// SAFETY: every call is forwarded unchanged to `System`; the counters are thread-local cells
// with const initialisers and no destructors, so touching them never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as i64, true);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as i64, true);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as i64), false);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as i64 - layout.size() as i64, true);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

fn live() -> i64 {
    LIVE.with(Cell::get)
}

fn reset_peak() -> i64 {
    let now = live();
    PEAK.with(|p| p.set(now));
    now
}

fn peak() -> i64 {
    PEAK.with(Cell::get)
}

/// `n` small events as a transport delivers them (one chunk each), decoded and gated up front.
fn small_events(from: usize, n: usize) -> Vec<(Event, Verdict)> {
    let mut decoder = Decoder::new();
    let mut gate = Gate::new();
    let mut out = Vec::with_capacity(n);
    for i in from..from + n {
        let frame = match i % 50 {
            0 => format!("id: {i}\ndata:\n\n"),
            1 => "data:\n\n".to_string(),
            // A response to a request nobody made: delivered, not remembered.
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
    let before = allocs();
    for (event, verdict) in events {
        match guard.on_event_with_verdict(event, verdict) {
            Ok(Decision::Deliver(d)) => drop(d),
            Ok(_) => {}
            Err(e) => panic!("refused: {e}"),
        }
    }
    allocs() - before
}

#[test]
fn the_steady_state_guard_path_allocates_nothing_per_event() {
    let mut guard = Config::default().window(1024).build();
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

#[test]
fn two_hundred_responses_with_256_kib_ids_stay_bounded() {
    // Small windows, so that they are full after the first 128 responses: from then on, nothing
    // may grow at all. (Issue 14 reproduced 1000 responses with 1 MiB ids; a quarter of the id
    // size and a fifth of the count keep the debug-build test quick and the window still full.)
    let session = Registry::with_window(64);
    let mut guard = Config::default()
        .window(64)
        .registry(session.clone())
        .build();
    let mut decoder = Decoder::new();
    let mut growth = Vec::with_capacity(200);
    let base = live();
    for i in 0..200 {
        let id = format!("{}{i:04}", "x".repeat(1 << 18));
        // Every other response was requested (the client's own id, released when answered).
        if i % 2 == 0 {
            guard.expect_response(RpcId::String(id.clone().into()));
        }
        let frame =
            format!("id: e{i}\ndata: {{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"result\":{{}}}}\n\n");
        drop(id);
        decoder.feed(Bytes::from(frame));
        let event = decoder
            .next_event()
            .expect("one event")
            .expect("within limits");
        match guard.on_event(event) {
            Ok(Decision::Deliver(d)) => drop(d),
            other => panic!("{other:?}"),
        }
        growth.push(live() - base);
    }
    assert!(session.outstanding().is_empty());
    // A few words per remembered id and event, nothing per id byte (the ids total 50 MB); the
    // cursor and the decoder's last id may pin the newest chunk (256 KiB), twice at most.
    let last = *growth.last().unwrap();
    assert!(
        last < (2 << 18) + (512 << 10),
        "{last} bytes retained after 200 responses"
    );
    let late = growth[199] - growth[149];
    assert!(late <= 0, "{late} bytes more after 50 more responses");

    // And the guard's own peak while handling one such response is a few times the event.
    let id = format!("{}z", "y".repeat(1 << 18));
    guard.expect_response(RpcId::String(id.clone().into()));
    decoder.feed(Bytes::from(format!(
        "id: z\ndata: {{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"result\":{{}}}}\n\n"
    )));
    let event = decoder
        .next_event()
        .expect("one event")
        .expect("within limits");
    let start = reset_peak();
    drop(guard.on_event(event));
    assert!(peak() - start < 1 << 20, "peak {} bytes", peak() - start);
}
