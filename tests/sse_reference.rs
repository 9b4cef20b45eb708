//! The SSE decoder against its reference (`ssegate_oracles::sse_reference`, the WHATWG algorithm
//! applied literally), under every chunking; and its limits, under every chunking.

use bytes::Bytes;
use proptest::prelude::*;

use ssegate::sse::{DecodeError, Decoder, DecoderConfig, PartialEvent};
use ssegate_oracles::sse_reference::{self as reference, Outcome};

/// Feeds `input` cut at `cuts` (sorted offsets), pulling events after each chunk.
fn decode_chunked(input: &[u8], cuts: &[usize]) -> Outcome {
    decode_batched(input, cuts, 1)
}

/// [`decode_chunked`], but after every `batch` chunks pulling only one event (`batch` > 1; all of
/// them at the end): chunks wait in the decoder's queue while events are pulled and more chunks
/// arrive, and must still be scanned in order.
fn decode_batched(input: &[u8], cuts: &[usize], batch: usize) -> Outcome {
    let whole = Bytes::copy_from_slice(input);
    let mut d = Decoder::new();
    let mut events = Vec::new();
    let mut at = 0;
    let pull = |d: &mut Decoder, events: &mut Vec<_>, most: usize| {
        for _ in 0..most {
            let Some(r) = d.next_event() else { break };
            let ev = r.expect("default limits are never hit here");
            // The decoder keeps the last id as a range of the current chunk: the accessor must
            // still agree with the event just dispatched.
            assert_eq!(d.last_event_id(), &ev.last_event_id);
            let mut data = Vec::new();
            ev.data.copy_to(&mut data);
            assert_eq!(data.len(), ev.data.len());
            events.push((ev.event_type().to_vec(), data, ev.last_event_id.to_vec()));
        }
    };
    for (i, &cut) in cuts.iter().chain(std::iter::once(&input.len())).enumerate() {
        let cut = cut.clamp(at, input.len());
        d.feed(whole.slice(at..cut));
        if batch == 1 {
            pull(&mut d, &mut events, usize::MAX);
        } else if (i + 1) % batch == 0 {
            pull(&mut d, &mut events, 1);
        }
        at = cut;
    }
    pull(&mut d, &mut events, usize::MAX);
    let partial = d.finish().map(
        |PartialEvent {
             bytes,
             data_len,
             id,
             ..
         }| (bytes, data_len, id.map(|i| i.to_vec())),
    );
    Outcome {
        events,
        last_event_id: d.last_event_id().to_vec(),
        retry: d.retry(),
        partial,
    }
}

fn token() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => Just(b"data".to_vec()),
        2 => Just(b"id".to_vec()),
        2 => Just(b"event".to_vec()),
        2 => Just(b"retry".to_vec()),
        // The type the decoder returns as a static value, and near misses of it.
        2 => Just(b"message".to_vec()),
        1 => Just(b"messag".to_vec()),
        1 => Just(b"dat".to_vec()),
        1 => Just(b"retryx".to_vec()),
        5 => Just(b":".to_vec()),
        4 => Just(b" ".to_vec()),
        4 => Just(b"\r".to_vec()),
        6 => Just(b"\n".to_vec()),
        2 => Just(b"\r\n".to_vec()),
        1 => Just(b"\0".to_vec()),
        1 => Just(vec![0xEF, 0xBB, 0xBF]),
        1 => Just(vec![0xEF]),
        1 => Just(vec![0xBB, 0xBF]),
        3 => "[0-9]{1,3}".prop_map(String::into_bytes),
        3 => "[a-z{}\"]{1,8}".prop_map(String::into_bytes),
        2 => any::<u8>().prop_map(|b| vec![b]),
    ]
}

fn stream() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(token(), 0..60).prop_map(|t| t.concat())
}

fn with_cuts() -> impl Strategy<Value = (Vec<u8>, Vec<usize>)> {
    stream().prop_flat_map(|s| {
        let n = s.len();
        (Just(s), proptest::collection::vec(0..=n, 0..12)).prop_map(|(s, mut cuts)| {
            cuts.sort_unstable();
            (s, cuts)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn matches_reference_under_any_chunking((input, cuts) in with_cuts()) {
        let expected = reference::decode(&input);
        prop_assert_eq!(&decode_chunked(&input, &[]), &expected, "whole input");
        prop_assert_eq!(&decode_chunked(&input, &cuts), &expected, "cuts {:?}", cuts);
        let bytewise: Vec<usize> = (1..input.len()).collect();
        prop_assert_eq!(&decode_chunked(&input, &bytewise), &expected, "1-byte chunks");
        for batch in [2, 3, 7] {
            prop_assert_eq!(&decode_batched(&input, &cuts, batch), &expected, "cuts {:?}, pulled every {} chunks", cuts, batch);
            prop_assert_eq!(&decode_batched(&input, &bytewise, batch), &expected, "1-byte chunks, pulled every {} chunks", batch);
        }
    }

    #[test]
    fn arbitrary_bytes_match_reference((input, cuts) in proptest::collection::vec(any::<u8>(), 0..200)
        .prop_flat_map(|s| { let n = s.len(); (Just(s), proptest::collection::vec(0..=n, 0..8)) }))
    {
        let mut cuts = cuts;
        cuts.sort_unstable();
        prop_assert_eq!(decode_chunked(&input, &cuts), reference::decode(&input));
    }
}

#[test]
fn every_two_way_split_of_a_mixed_stream() {
    let input: &[u8] =
        b"\xEF\xBB\xBFid: 1\r\ndata: a\r\rdata:b\r\ndata\nevent: x\n\n: c\nretry: 15\r\nid\n\ndata: \xFF\r\nid: 2\0\n\ndata: cut";
    let expected = reference::decode(input);
    assert_eq!(expected.events.len(), 3);
    for cut in 0..=input.len() {
        assert_eq!(decode_chunked(input, &[cut]), expected, "cut at {cut}");
    }
}

/// Events and errors (whole), the partial event and the offset, for `input` cut at `cuts` under
/// `config`.
type LimitedRun = (
    Vec<Result<(Vec<u8>, Vec<u8>, Vec<u8>), DecodeError>>,
    Option<PartialEvent>,
    Vec<u8>,
);

fn decode_limited(config: &DecoderConfig, input: &[u8], cuts: &[usize]) -> LimitedRun {
    let whole = Bytes::copy_from_slice(input);
    let mut d = config.build();
    let mut items = Vec::new();
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        let cut = cut.clamp(at, input.len());
        d.feed(whole.slice(at..cut));
        while let Some(r) = d.next_event() {
            items.push(r.map(|ev| {
                let mut data = Vec::new();
                ev.data.copy_to(&mut data);
                (ev.event_type().to_vec(), data, ev.last_event_id.to_vec())
            }));
        }
        at = cut;
    }
    let partial = d.finish();
    (items, partial, d.last_event_id().to_vec())
}

fn small_limits() -> impl Strategy<Value = DecoderConfig> {
    let limit = prop_oneof![Just(0usize), 1..12usize, 12..80usize, Just(usize::MAX)];
    (
        limit.clone(),
        limit.clone(),
        limit.clone(),
        limit,
        prop_oneof![Just(0usize), 1..6usize, Just(usize::MAX)],
    )
        .prop_map(|(line, event, field, block, copy_below)| {
            let mut c = DecoderConfig::default();
            c.max_line(line)
                .max_event(event)
                .max_field(field)
                .max_block(block)
                .copy_below(copy_below);
            c
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// With any limits (the block limit included), errors and events do not depend on the
    /// chunking, nor on what is copied rather than sliced.
    #[test]
    fn limits_do_not_depend_on_the_chunking(config in small_limits(), (input, cuts) in with_cuts()) {
        let expected = decode_limited(&config, &input, &[]);
        prop_assert_eq!(&decode_limited(&config, &input, &cuts), &expected, "cuts {:?}", cuts);
        let bytewise: Vec<usize> = (1..input.len()).collect();
        prop_assert_eq!(&decode_limited(&config, &input, &bytewise), &expected, "1-byte chunks");
        let mut copying = config.clone();
        copying.copy_below(usize::MAX);
        prop_assert_eq!(&decode_limited(&copying, &input, &cuts), &expected, "copying everything");
    }
}

#[test]
fn the_block_limit_counts_every_wire_byte() {
    // Block: "id: 1\n" (6) + ": c\n" (4) + "x: y\r\n" (6) + "data: ab\n" (9) = 25 bytes.
    let input = b"id: 1\n: c\nx: y\r\ndata: ab\n\ndata: next\n\n";
    let mut config = DecoderConfig::default();
    // From 11 bytes up the next block ("data: next\n") fits.
    for limit in 11..30 {
        config.max_block(limit);
        let (items, _, last_id) = decode_limited(&config, input, &[]);
        if limit >= 25 {
            assert_eq!(items.len(), 2, "limit {limit}");
            assert!(items[0].is_ok());
            assert_eq!(last_id, b"1");
        } else {
            // The line whose bytes cross the limit is reported; the block is dropped with its id.
            let line_start = [0u64, 6, 10, 16]
                .into_iter()
                .rev()
                .find(|&s| s <= limit as u64)
                .unwrap();
            assert_eq!(
                items[0],
                Err(DecodeError::BlockTooLarge {
                    limit,
                    offset: line_start,
                    // The `id: 1` line (bytes 0..6) is read whole below every limit tried here.
                    id: Some(Bytes::from_static(b"1")),
                }),
                "limit {limit}"
            );
            assert_eq!(items.len(), 2, "limit {limit}");
            assert_eq!(items[1].as_ref().unwrap().1, b"next");
            assert_eq!(last_id, b"", "limit {limit}");
        }
        // Every two-way split agrees, the CR|LF split included.
        for cut in 0..=input.len() {
            assert_eq!(
                decode_limited(&config, input, &[cut]),
                decode_limited(&config, input, &[]),
                "limit {limit}, cut at {cut}"
            );
        }
    }
}
