//! `sse_chunking`: whatever the chunking, the decoder gives the same events, errors and partial
//! event as on the whole input; with default limits that is also what the reference decoder (the
//! literal WHATWG algorithm) gives; no limit is ever exceeded; data is never copied.

use bytes::Bytes;
use ssegate::sse::{Config, DecodeError, Decoder, Event};
use ssegate::testing::{ReferenceOutcome, reference_decode};

use super::{pieces, split_header};

/// Longest field name the decoder may carry across chunks (`event`, `retry`).
const NAME_MAX: usize = 5;
/// Small limits the configuration byte picks from (index 3: the default).
const LIMITS: [usize; 4] = [0, 3, 40, usize::MAX];

#[derive(Clone, Debug, PartialEq, Eq)]
enum Item {
    Event {
        event_type: Vec<u8>,
        data: Vec<u8>,
        id: Vec<u8>,
        has_own_id: bool,
        retry: Option<u64>,
    },
    /// A limit error, by the offset of the line that broke it.
    Error(DecodeError),
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
}

impl Limits {
    fn from_config(config: u8) -> Option<Limits> {
        if config >> 6 == 0 {
            return None;
        }
        let pick = |bits: u8| LIMITS[usize::from(bits & 3)];
        Some(Limits {
            line: pick(config),
            event: pick(config >> 2),
            field: pick(config >> 4),
        })
    }

    fn decoder(limits: Option<&Limits>) -> Decoder {
        let mut c = Config::default();
        if let Some(l) = limits {
            c.max_line(l.line).max_event(l.event).max_field(l.field);
        }
        c.build()
    }
}

/// Decodes `whole` fed as `pieces` (sub-slices of it, in order), checking the per-call invariants.
fn run(whole: &Bytes, pieces: &[&[u8]], limits: Option<&Limits>) -> Run {
    let mut d = Limits::decoder(limits);
    let base = whole.as_ptr() as usize;
    let within = |s: &Bytes| {
        let p = s.as_ptr() as usize;
        p >= base && p + s.len() <= base + whole.len()
    };
    let mut items = Vec::new();
    let mut at = 0;
    let mut fed = 0u64;
    for piece in pieces {
        d.feed(whole.slice(at..at + piece.len()));
        at += piece.len();
        fed += piece.len() as u64;
        while let Some(r) = d.next_event() {
            items.push(match r {
                Ok(ev) => check_event(&ev, limits, &within),
                Err(e) => {
                    assert!(limits.is_some(), "limit error under default limits: {e}");
                    assert!(
                        e.offset() <= fed,
                        "error offset {} past the input",
                        e.offset()
                    );
                    // The whole error is compared across chunkings: when one line breaks two
                    // limits, the one crossed first in the stream is reported, however the line
                    // was cut (tests/regression/sse_chunking/two-limits-one-line).
                    Item::Error(e)
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

fn check_event(ev: &Event, limits: Option<&Limits>, within: &dyn Fn(&Bytes) -> bool) -> Item {
    let mut data = Vec::new();
    ev.data.copy_to(&mut data);
    assert_eq!(
        data.len(),
        ev.data.len(),
        "Data::len is the sum of its segments"
    );
    assert!(ev.data.eq_bytes(&data));
    assert_eq!(ev.data.contiguous(), data.as_slice());
    // Zero copy: every segment is a slice of the input, or the static LF join.
    for seg in ev.data.segments() {
        assert!(
            within(seg) || seg.as_ref() == b"\n",
            "a data segment of {} bytes is not a slice of the input",
            seg.len()
        );
    }
    if let Some(l) = limits {
        assert!(ev.data.len() <= l.event, "event data over max_event");
        assert!(ev.id.len() <= l.field, "id over max_field");
        assert!(
            ev.event.as_ref().is_none_or(|t| t.len() <= l.field),
            "event type over max_field"
        );
    }
    Item::Event {
        event_type: ev.event_type().to_vec(),
        data,
        id: ev.id.to_vec(),
        has_own_id: ev.has_own_id,
        retry: ev.retry,
    }
}

fn as_reference(r: &Run) -> ReferenceOutcome {
    ReferenceOutcome {
        events: r
            .items
            .iter()
            .map(|i| match i {
                Item::Event {
                    event_type,
                    data,
                    id,
                    ..
                } => (event_type.clone(), data.clone(), id.clone()),
                Item::Error(e) => panic!("unexpected limit error: {e}"),
            })
            .collect(),
        last_event_id: r.last_event_id.clone(),
        retry: r.retry,
        partial: r.partial.clone(),
    }
}

/// The `sse_chunking` oracle (see the module docs).
pub fn sse_chunking(data: &[u8]) {
    let (config, cuts, payload) = split_header(data);
    let limits = Limits::from_config(config);
    let whole = Bytes::copy_from_slice(payload);

    let expected = run(&whole, &[payload], limits.as_ref());
    let chunked = run(&whole, &pieces(payload, &cuts), limits.as_ref());
    assert_eq!(chunked, expected, "cuts {cuts:?} change the outcome");
    if payload.len() <= 4096 {
        let bytewise: Vec<&[u8]> = payload.chunks(1).collect();
        let bytewise = run(&whole, &bytewise, limits.as_ref());
        assert_eq!(bytewise, expected, "1-byte chunks change the outcome");
    }
    if limits.is_none() {
        assert_eq!(
            as_reference(&expected),
            reference_decode(payload),
            "decoder disagrees with the reference"
        );
    } else if !expected.items.iter().any(|i| matches!(i, Item::Error(_))) {
        // No limit was hit: limits must not change anything.
        let unlimited = run(&whole, &[payload], None);
        assert_eq!(
            unlimited.items, expected.items,
            "limits changed events without an error"
        );
    }
}
