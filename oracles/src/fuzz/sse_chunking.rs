//! `sse_chunking`: whatever the chunking, the decoder gives the same events, errors and partial
//! event as on the whole input; with default limits that is also what the reference decoder (the
//! literal WHATWG algorithm) gives; no limit is ever exceeded; how many bytes are copied rather
//! than sliced ([`DecoderConfig::copy_below`]) changes nothing but the segments; every segment is a slice
//! of the input, the static join (by pointer) or a copy, and slices under the copy threshold only
//! end a rope, so the rope's segment count is bounded by its length.
//!
//! Header: the common one (`super`), where byte 1 is `n + 17 * e`: `n` cut points (mod 17) and
//! `e` (0 in every older input) extends it: `e & 3` picks a block limit ([`BLOCKS`], with small
//! limits on) and `e >> 2` a repeat count ([`REPEATS`]): the payload `head 0xFF body 0xFF tail`
//! becomes `head body^count tail` (at most [`MAX_EXPANDED`] bytes), so small inputs grow into
//! multi-megabyte events and long runs of lines; the cut points then scale to the whole length.
//!
//! Every run reads [`Decoder::last_event_id`] after each event and error (the lazily sliced id of
//! the chunk being scanned, then its cache dropped at the next id): after an event it is that
//! event's id, and the ids read are compared like the events, across chunkings and with the
//! reference decoder. One more run feeds the cut pieces in batches before pulling events (chunks
//! queue behind one not yet scanned): bit 0 of each raw cut point says whether events are pulled
//! after its piece (the last piece always is), so the pattern is the input's.

use bytes::Bytes;
use ssegate::hooks::{SSE_COPY_BELOW, sse_join_ptr};
use ssegate::sse::{DecodeError, Decoder, DecoderConfig, Event};

use crate::sse_reference::{self, Outcome as ReferenceOutcome};

use super::pieces;

/// Longest field name the decoder may carry across chunks (`event`, `retry`).
const NAME_MAX: usize = 5;
/// Small limits the configuration byte picks from (index 3: the default).
const LIMITS: [usize; 4] = [0, 3, 40, usize::MAX];
/// Block limits `e & 3` picks from (index 0: the default).
const BLOCKS: [usize; 4] = [usize::MAX, 0, 9, 90];
/// Repeat counts `e >> 2` picks from.
pub(super) const REPEATS: [usize; 4] = [1, 64, 4096, 1 << 16];
/// Largest expanded payload.
const MAX_EXPANDED: usize = 8 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Item {
    Event {
        event_type: Vec<u8>,
        data: Vec<u8>,
        id: Vec<u8>,
        has_own_id: bool,
        retry: Option<u64>,
        /// [`Decoder::last_event_id`] read right after the event was pulled.
        id_read: Vec<u8>,
    },
    /// A limit error, by the offset of the line that broke it, and [`Decoder::last_event_id`]
    /// read right after it.
    Error(DecodeError, Vec<u8>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Run {
    items: Vec<Item>,
    partial: Option<(u64, u64, Option<Vec<u8>>)>,
    last_event_id: Vec<u8>,
    retry: Option<u64>,
    offset_at_end: u64,
}

struct Limits {
    line: usize,
    event: usize,
    field: usize,
    block: usize,
}

impl Limits {
    fn from_config(config: u8, extension: u8) -> Option<Limits> {
        if config >> 6 == 0 {
            return None;
        }
        let pick = |bits: u8| LIMITS[usize::from(bits & 3)];
        Some(Limits {
            line: pick(config),
            event: pick(config >> 2),
            field: pick(config >> 4),
            block: BLOCKS[usize::from(extension & 3)],
        })
    }

    fn decoder(limits: Option<&Limits>, copy_below: usize) -> Decoder {
        let mut c = DecoderConfig::default();
        c.copy_below(copy_below);
        if let Some(l) = limits {
            c.max_line(l.line)
                .max_event(l.event)
                .max_field(l.field)
                .max_block(l.block);
        }
        c.build()
    }
}

/// Decodes `whole` fed as `pieces` (sub-slices of it, in order), checking the per-call invariants.
fn run(whole: &Bytes, pieces: &[&[u8]], limits: Option<&Limits>) -> Run {
    run_with(whole, pieces, limits, SSE_COPY_BELOW, &[])
}

/// Decodes `whole` fed as `pieces`; events are pulled after piece `i` only when `pull_after` has
/// no entry `i` or it is `true`, and always after the last (otherwise the next piece is queued
/// behind the ones not yet scanned).
fn run_with(
    whole: &Bytes,
    pieces: &[&[u8]],
    limits: Option<&Limits>,
    copy_below: usize,
    pull_after: &[bool],
) -> Run {
    let mut d = Limits::decoder(limits, copy_below);
    let base = whole.as_ptr() as usize;
    let within = |s: &Bytes| {
        let p = s.as_ptr() as usize;
        p >= base && p + s.len() <= base + whole.len()
    };
    let mut items = Vec::new();
    let mut at = 0;
    let mut fed = 0u64;
    for (i, piece) in pieces.iter().enumerate() {
        d.feed(whole.slice(at..at + piece.len()));
        at += piece.len();
        fed += piece.len() as u64;
        if i + 1 < pieces.len() && !pull_after.get(i).copied().unwrap_or(true) {
            continue;
        }
        while let Some(r) = d.next_event() {
            items.push(match r {
                Ok(ev) => {
                    let item = check_event(&ev, limits, copy_below, &within);
                    // Read while the id may still lie in the chunk being scanned (a lazy slice).
                    let id_read = d.last_event_id().to_vec();
                    assert_eq!(
                        id_read,
                        ev.last_event_id.as_ref(),
                        "last_event_id() right after an event is not the event's id"
                    );
                    match item {
                        Item::Event {
                            event_type,
                            data,
                            id,
                            has_own_id,
                            retry,
                            ..
                        } => Item::Event {
                            event_type,
                            data,
                            id,
                            has_own_id,
                            retry,
                            id_read,
                        },
                        error => error,
                    }
                }
                Err(e) => {
                    // The default limits (the smallest is `max_field`, 4 KiB) can only be crossed
                    // by an input longer than that: an expanded input can be.
                    assert!(
                        limits.is_some() || whole.len() > DEFAULT_MAX_FIELD,
                        "limit error under default limits: {e}"
                    );
                    assert!(
                        e.offset() <= fed,
                        "error offset {} past the input",
                        e.offset()
                    );
                    // The whole error is compared across chunkings: when one line breaks two
                    // limits, the one crossed first in the stream is reported, however the line
                    // was cut (tests/regression/sse_chunking/two-limits-one-line).
                    Item::Error(e, d.last_event_id().to_vec())
                }
            });
            if let Some(l) = limits {
                let cap = l.event.saturating_add(l.field).saturating_add(NAME_MAX);
                assert!(
                    d.held_bytes() <= cap,
                    "held {} bytes, limits allow {cap}",
                    d.held_bytes()
                );
            }
        }
        assert_eq!(d.offset(), fed, "every fed byte is consumed");
    }
    let offset_at_end = d.offset();
    let partial = d
        .finish()
        .map(|p| (p.bytes, p.data_len, p.id.map(|i| i.to_vec())));
    Run {
        items,
        partial,
        last_event_id: d.last_event_id().to_vec(),
        retry: d.retry(),
        offset_at_end,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Segment {
    Slice,
    Join,
    Copy,
}

fn check_event(
    ev: &Event,
    limits: Option<&Limits>,
    copy_below: usize,
    within: &dyn Fn(&Bytes) -> bool,
) -> Item {
    let mut data = Vec::new();
    ev.data.copy_to(&mut data);
    assert_eq!(
        data.len(),
        ev.data.len(),
        "Data::len is the sum of its segments"
    );
    assert!(ev.data.eq_bytes(&data));
    assert_eq!(ev.data.contiguous(), data.as_slice());
    // Every segment is a slice of the input, the static join (that very byte, not any "\n"), or
    // a copy; a join follows a slice, two copies are never adjacent (a run is closed only by a
    // slice), and a slice under the copy threshold can only be the last segment.
    let segments = ev.data.segments();
    let mut previous = None;
    for (i, seg) in segments.iter().enumerate() {
        assert!(!seg.is_empty(), "empty segment");
        let kind = if within(seg) {
            Segment::Slice
        } else if seg.as_ptr() == sse_join_ptr() {
            assert_eq!(seg.len(), 1, "a segment at the join's address");
            Segment::Join
        } else {
            Segment::Copy
        };
        match kind {
            Segment::Slice => assert!(
                seg.len() >= copy_below || i + 1 == segments.len(),
                "a slice of {} bytes, under the copy threshold {copy_below}, inside the rope",
                seg.len()
            ),
            Segment::Join => assert!(
                previous == Some(Segment::Slice),
                "a static join not right after a slice"
            ),
            Segment::Copy => assert!(
                previous != Some(Segment::Copy),
                "two adjacent copied segments"
            ),
        }
        previous = Some(kind);
    }
    if let Some(slices) = ev.data.len().checked_div(copy_below) {
        // Slices but the last hold at least `copy_below` bytes; joins and copy runs are at most
        // one each per slice, plus one.
        let cap = 3 * (slices + 1) + 1;
        assert!(
            segments.len() <= cap,
            "{} segments for {} bytes",
            segments.len(),
            ev.data.len()
        );
    }
    if let Some(l) = limits {
        assert!(ev.data.len() <= l.event, "event data over max_event");
        assert!(ev.last_event_id.len() <= l.field, "id over max_field");
        assert!(
            ev.event.as_ref().is_none_or(|t| t.len() <= l.field),
            "event type over max_field"
        );
    }
    Item::Event {
        event_type: ev.event_type().to_vec(),
        data,
        id: ev.last_event_id.to_vec(),
        has_own_id: ev.has_own_id,
        retry: ev.retry,
        id_read: Vec::new(),
    }
}

/// The decoder's default `max_field`, the smallest of its default limits.
const DEFAULT_MAX_FIELD: usize = 4 << 10;

fn as_reference(r: &Run) -> ReferenceOutcome {
    ReferenceOutcome {
        events: r
            .items
            .iter()
            .map(|i| match i {
                // The id as `last_event_id()` read it right after the event.
                Item::Event {
                    event_type,
                    data,
                    id_read,
                    ..
                } => (event_type.clone(), data.clone(), id_read.clone()),
                Item::Error(e, _) => panic!("unexpected limit error: {e}"),
            })
            .collect(),
        last_event_id: r.last_event_id.clone(),
        retry: r.retry,
        partial: r.partial.clone(),
    }
}

/// The header (see the module docs): `(config, extension, raw cut points, payload)`.
fn header(data: &[u8]) -> (u8, u8, Vec<u16>, &[u8]) {
    let config = data.first().copied().unwrap_or(0);
    let count = data.get(1).copied().unwrap_or(0);
    let (n, extension) = (usize::from(count % 17), count / 17);
    let rest = data.get(2..).unwrap_or(&[]);
    let take = (2 * n).min(rest.len() & !1);
    let (raw, payload) = rest.split_at(take);
    let cuts = raw
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    (config, extension, cuts, payload)
}

/// `head 0xFF body 0xFF tail` as `head body^count tail`, at most [`MAX_EXPANDED`] bytes; `None`
/// when the payload has no such body.
pub(super) fn expand(payload: &[u8], count: usize) -> Option<Vec<u8>> {
    let open = payload.iter().position(|&b| b == 0xFF)?;
    let close = open + 1 + payload[open + 1..].iter().position(|&b| b == 0xFF)?;
    let (head, body, tail) = (
        &payload[..open],
        &payload[open + 1..close],
        &payload[close + 1..],
    );
    let room = MAX_EXPANDED.saturating_sub(head.len() + tail.len());
    let count = count.min(room.checked_div(body.len()).unwrap_or(0));
    let mut out = Vec::with_capacity(head.len() + body.len() * count + tail.len());
    out.extend_from_slice(head);
    for _ in 0..count {
        out.extend_from_slice(body);
    }
    out.extend_from_slice(tail);
    Some(out)
}

/// The `sse_chunking` oracle (see the module docs).
pub fn sse_chunking(data: &[u8]) {
    let (config, extension, raw_cuts, payload) = header(data);
    let limits = Limits::from_config(config, extension);
    let expanded = match usize::from(extension >> 2) {
        0 => None,
        x => expand(payload, REPEATS[x.min(3)]),
    };
    let payload: &[u8] = expanded.as_deref().unwrap_or(payload);
    let mut cuts: Vec<usize> = raw_cuts
        .iter()
        .map(|&c| match expanded {
            None => usize::from(c) % (payload.len() + 1),
            Some(_) => (u64::from(c) * payload.len() as u64 / u64::from(u16::MAX)) as usize,
        })
        .collect();
    cuts.sort_unstable();
    let whole = Bytes::copy_from_slice(payload);

    let expected = run(&whole, &[payload], limits.as_ref());
    let chunked = run(&whole, &pieces(payload, &cuts), limits.as_ref());
    assert_eq!(chunked, expected, "cuts {cuts:?} change the outcome");
    if payload.len() <= 4096 {
        let bytewise: Vec<&[u8]> = payload.chunks(1).collect();
        let bytewise = run(&whole, &bytewise, limits.as_ref());
        assert_eq!(bytewise, expected, "1-byte chunks change the outcome");
    } else if payload.len() <= 1 << 20 {
        let small: Vec<&[u8]> = payload.chunks(61).collect();
        let small = run(&whole, &small, limits.as_ref());
        assert_eq!(small, expected, "61-byte chunks change the outcome");
    }
    // Copying or slicing changes the segments only, never the outcome.
    for copy_below in [0, usize::MAX] {
        let other = run_with(
            &whole,
            &pieces(payload, &cuts),
            limits.as_ref(),
            copy_below,
            &[],
        );
        assert_eq!(
            other, expected,
            "copy_below {copy_below} changes the outcome"
        );
    }
    // The cut pieces fed in batches: chunks queue behind one not yet scanned.
    let pull_after: Vec<bool> = raw_cuts.iter().map(|c| c & 1 == 1).collect();
    let batched = run_with(
        &whole,
        &pieces(payload, &cuts),
        limits.as_ref(),
        SSE_COPY_BELOW,
        &pull_after,
    );
    assert_eq!(
        batched, expected,
        "feeding cuts {cuts:?} in batches (pull after: {pull_after:?}) changes the outcome"
    );
    let hit_a_limit = expected.items.iter().any(|i| matches!(i, Item::Error(..)));
    if limits.is_none() && !hit_a_limit {
        // The reference decoder has no limits: it is the oracle while none was hit.
        assert_eq!(
            as_reference(&expected),
            sse_reference::decode(payload),
            "decoder disagrees with the reference"
        );
    } else if limits.is_some() && !hit_a_limit {
        // No limit was hit: limits must not change anything.
        let unlimited = run(&whole, &[payload], None);
        assert_eq!(
            unlimited.items, expected.items,
            "limits changed events without an error"
        );
    }
}
