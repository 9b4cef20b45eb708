//! The decoder's memory bound, measured by a counting global allocator (not by the decoder's own
//! counters, which share the limits' blind spots): for hostile inputs fed as a transport feeds them
//! (each chunk its own allocation, handed over and dropped by the decoder), the heap in use never
//! exceeds a small constant times what the limits let the open block hold, plus the chunks in
//! flight.

use bytes::Bytes;
use ssegate::sse::{DecodeError, Decoder, DecoderConfig};
use ssegate_oracles::alloc::{Counting, Span};

// Measured per thread (`Span::thread`): each test runs on its own thread and frees what it
// allocates on that thread.
#[global_allocator]
static GLOBAL: Counting = Counting;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// What one run saw.
#[derive(Debug)]
struct Seen {
    events: usize,
    errors: Vec<DecodeError>,
    input: usize,
    /// Peak heap in use during the run, above what was in use before it.
    peak: usize,
}

/// Feeds the chunks `next_chunk` makes (a fresh allocation each, as a transport's), pulling and
/// dropping every event; measures the peak heap.
fn run(config: &DecoderConfig, mut next_chunk: impl FnMut(usize) -> Option<Vec<u8>>) -> Seen {
    let span = Span::thread();
    let mut d: Decoder = config.build();
    let mut seen = Seen {
        events: 0,
        errors: Vec::new(),
        input: 0,
        peak: 0,
    };
    let mut i = 0;
    while let Some(chunk) = next_chunk(i) {
        i += 1;
        seen.input += chunk.len();
        d.feed(Bytes::from(chunk));
        while let Some(r) = d.next_event() {
            match r {
                Ok(_) => seen.events += 1,
                Err(e) => seen.errors.push(e),
            }
        }
    }
    drop(d.finish());
    drop(d);
    seen.peak = span.peak();
    seen
}

/// `period` repeated into chunks of about `chunk` bytes, `lines` times in all.
fn repeated(
    period: &'static [u8],
    lines: usize,
    chunk: usize,
) -> impl FnMut(usize) -> Option<Vec<u8>> {
    let per_chunk = (chunk / period.len()).max(1);
    let mut left = lines;
    move |_| {
        if left == 0 {
            return None;
        }
        let n = per_chunk.min(left);
        left -= n;
        Some(period.repeat(n))
    }
}

fn small_limits(limit: usize) -> DecoderConfig {
    let mut c = DecoderConfig::default();
    c.max_line(limit)
        .max_event(limit)
        .max_block(limit)
        .max_field(4 * KIB);
    c
}

/// The promise: at most this many bytes for what the open block may hold under `max_block`, plus
/// the chunks in flight (the one being fed and the one being scanned).
fn bound(max_block: usize, chunk: usize) -> usize {
    4 * max_block + 4 * chunk + 64 * KIB
}

#[test]
fn eight_million_data_x_lines() {
    // 56 MB of input, 16 MB of data (each `x` and its join), no blank line: before the data was
    // coalesced, every line cost two 32-byte segments and a chunk refcount (891 MB resident).
    let lines = 8_000_000;
    let seen = run(
        &DecoderConfig::default(),
        repeated(b"data:x\n", lines, 16 * KIB),
    );
    assert_eq!(seen.input, 7 * lines);
    assert!(seen.errors.is_empty() && seen.events == 0, "{seen:?}");
    let data = 2 * lines;
    assert!(
        seen.peak <= 3 * data + MIB,
        "peak {} B for {data} B of data ({seen:?})",
        seen.peak
    );
    assert!(
        seen.peak <= seen.input,
        "peak {} over the input size",
        seen.peak
    );

    // Under a 1 MiB block limit the block is dropped at 1 MiB and the rest skipped.
    let seen = run(
        &small_limits(MIB),
        repeated(b"data:x\n", lines / 8, 16 * KIB),
    );
    assert!(matches!(
        seen.errors[..],
        [DecodeError::BlockTooLarge { limit: MIB, .. }]
    ));
    assert!(seen.peak <= bound(MIB, 16 * KIB), "{seen:?}");
}

#[test]
fn a_data_flood_of_empty_lines() {
    // `data:` lines add one join each: 8 MB of data in 48 MB of input.
    let lines = 8_000_000;
    let seen = run(
        &DecoderConfig::default(),
        repeated(b"data:\n", lines, 16 * KIB),
    );
    assert!(seen.errors.is_empty(), "{seen:?}");
    assert!(seen.peak <= 3 * lines + MIB, "{seen:?}");

    let seen = run(
        &small_limits(MIB),
        repeated(b"data:\n", lines / 8, 16 * KIB),
    );
    assert_eq!(seen.errors.len(), 1, "{seen:?}");
    assert!(seen.peak <= bound(MIB, 16 * KIB), "{seen:?}");
}

#[test]
fn one_data_byte_per_comment_padded_chunk() {
    // Each 16 KiB chunk: one data byte, then a comment filling the chunk. Slices of the data bytes
    // would pin every chunk (32 MiB here); copies pin none.
    const CHUNK: usize = 16 * KIB;
    let chunks = 2048;
    let make = |i: usize| {
        (i < chunks).then(|| {
            let mut c = b"data:x\n:".to_vec();
            c.resize(CHUNK - 1, b'c');
            c.push(b'\n');
            c
        })
    };
    let seen = run(&DecoderConfig::default(), make);
    assert!(seen.errors.is_empty(), "{seen:?}");
    assert!(seen.peak <= 4 * CHUNK + 64 * KIB, "{seen:?}");

    // A slice-everything decoder (`copy_below(0)`) keeps every chunk: the test can fail.
    let mut slicing = DecoderConfig::default();
    slicing.copy_below(0);
    let seen = run(&slicing, make);
    assert!(seen.peak >= chunks * CHUNK, "{seen:?}");
}

#[test]
fn huge_comments_and_unknown_fields_hold_nothing() {
    const CHUNK: usize = 16 * KIB;
    for head in [&b":"[..], b"foo: ", b"datax: "] {
        // One 48 MiB line, under the default line limit: scanned, never held.
        let total = 48 * MIB / CHUNK;
        let make = |i: usize| {
            (i <= total).then(|| match i {
                0 => head.to_vec(),
                i if i == total => b"\n\ndata: after\n\n".to_vec(),
                _ => vec![b'c'; CHUNK],
            })
        };
        let seen = run(&DecoderConfig::default(), make);
        assert!(seen.errors.is_empty(), "{seen:?}");
        assert_eq!(seen.events, 1);
        assert!(seen.peak <= 4 * CHUNK + 64 * KIB, "{seen:?}");

        // Many such lines in one block: the block limit ends it.
        let line = |i: usize| {
            (i < 64).then(|| {
                let mut l = head.to_vec();
                l.resize(256 * KIB, b'c');
                l.push(b'\n');
                l
            })
        };
        let seen = run(&small_limits(MIB), line);
        assert!(
            matches!(
                seen.errors[..],
                [DecodeError::BlockTooLarge { limit: MIB, .. }]
            ),
            "{seen:?}"
        );
        assert!(seen.peak <= bound(MIB, 256 * KIB), "{seen:?}");
    }
}

#[test]
fn many_tiny_chunks() {
    // One 4 MiB event fed in chunks of 1, 16 and 64 bytes: each chunk is copied, not kept as a
    // segment and a refcount.
    let mut event = b"id: 1\ndata: ".to_vec();
    event.resize(4 * MIB, b'a');
    event.extend_from_slice(b"\n\n");
    for size in [16, 64, 255] {
        let mut at = 0;
        let make = |_| {
            (at < event.len()).then(|| {
                let end = (at + size).min(event.len());
                let c = event[at..end].to_vec();
                at = end;
                c
            })
        };
        let seen = run(&DecoderConfig::default(), make);
        assert_eq!(seen.events, 1);
        // The dispatched event (4 MiB) is alive at the peak, in a buffer grown by doubling.
        assert!(
            seen.peak <= 3 * 4 * MIB + 64 * KIB,
            "chunks of {size}: {seen:?}"
        );
    }
    // Byte-sized chunks of a long run of tiny events: nothing accumulates.
    let seen = run(&DecoderConfig::default(), {
        let mut i = 0usize;
        let period = b"id: 12\ndata: {}\n\n";
        move |_| {
            i += 1;
            (i <= 200_000).then(|| vec![period[i % period.len()]])
        }
    });
    assert!(seen.events > 10_000);
    assert!(seen.peak <= 64 * KIB, "{seen:?}");
}

#[test]
fn every_limit_bounds_the_heap() {
    // Small limits, hostile inputs of each shape: the peak stays within the bound.
    let limit = 256 * KIB;
    let shapes: [&'static [u8]; 6] = [
        b"data:x\n",
        b"data:\n",
        b"data: 0123456789012345678901234567890123456789\n",
        b": comment\n",
        b"id\n",
        b"event: e\n",
    ];
    for shape in shapes {
        for chunk in [1, 7, 300, 16 * KIB] {
            let lines = (4 * MIB / shape.len()).min(if chunk < 16 { 100_000 } else { usize::MAX });
            let seen = run(&small_limits(limit), repeated(shape, lines, chunk));
            assert!(
                seen.peak <= bound(limit, chunk.max(shape.len())),
                "{:?} in chunks of {chunk}: {seen:?}",
                String::from_utf8_lossy(shape)
            );
        }
    }
}
