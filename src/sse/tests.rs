//! Decoder vs the reference oracle, under every chunking.

use bytes::Bytes;
use proptest::prelude::*;

use super::reference::{self, Outcome};
use super::{Decoder, PartialEvent};

/// Feeds `input` cut at `cuts` (sorted offsets), pulling events after each chunk.
fn decode_chunked(input: &[u8], cuts: &[usize]) -> Outcome {
    let whole = Bytes::copy_from_slice(input);
    let mut d = Decoder::new();
    let mut events = Vec::new();
    let mut at = 0;
    let pull = |d: &mut Decoder, events: &mut Vec<_>| {
        while let Some(r) = d.next_event() {
            let ev = r.expect("default limits are never hit here");
            // The decoder keeps the last id as a range of the current chunk: the accessor must
            // still agree with the event just dispatched.
            assert_eq!(d.last_event_id(), &ev.id);
            let mut data = Vec::new();
            ev.data.copy_to(&mut data);
            assert_eq!(data.len(), ev.data.len());
            events.push((ev.event_type().to_vec(), data, ev.id.to_vec()));
        }
    };
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        let cut = cut.clamp(at, input.len());
        d.feed(whole.slice(at..cut));
        pull(&mut d, &mut events);
        at = cut;
    }
    let partial = d.finish().map(
        |PartialEvent {
             bytes,
             data_len,
             id,
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
