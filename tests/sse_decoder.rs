//! Decoder properties beyond the conformance table: zero copy, limits, finish() and reuse.

use bytes::Bytes;
use ssegate::sse::{DecodeError, Decoder, DecoderConfig, Event, PartialEvent};

fn chunks_of(input: &Bytes, size: usize) -> Vec<Bytes> {
    (0..input.len())
        .step_by(size)
        .map(|at| input.slice(at..(at + size).min(input.len())))
        .collect()
}

/// Feeds every chunk, collecting events and errors, and checks `held` after each pull.
fn drive(
    d: &mut Decoder,
    chunks: &[Bytes],
    mut held: impl FnMut(&Decoder),
) -> Vec<Result<Event, DecodeError>> {
    let mut out = Vec::new();
    for c in chunks {
        d.feed(c.clone());
        while let Some(r) = d.next_event() {
            held(d);
            out.push(r);
        }
        held(d);
    }
    out
}

#[test]
fn four_mib_event_in_16k_chunks_is_not_copied() {
    const SIZE: usize = 4 << 20;
    let mut input = b"id: 42\ndata: ".to_vec();
    let payload_start = input.len();
    input.extend((0..SIZE).map(|i| b'a' + (i % 26) as u8));
    let payload_end = input.len();
    input.extend_from_slice(b"\n\n");
    let input = Bytes::from(input);
    let chunks = chunks_of(&input, 16 << 10);

    let mut d = Decoder::new();
    let events = drive(&mut d, &chunks, |_| {});
    assert_eq!(events.len(), 1);
    let ev = events.into_iter().next().unwrap().unwrap();
    assert_eq!(ev.data.len(), SIZE);
    assert_eq!(&ev.last_event_id[..], b"42");
    assert!(ev.data.eq_bytes(&input[payload_start..payload_end]));

    // Every segment lies inside an input chunk: pointers, not contents.
    let ranges: Vec<(usize, usize)> = chunks
        .iter()
        .map(|c| (c.as_ptr() as usize, c.as_ptr() as usize + c.len()))
        .collect();
    for seg in ev.data.segments() {
        let (p, e) = (seg.as_ptr() as usize, seg.as_ptr() as usize + seg.len());
        assert!(
            ranges.iter().any(|&(s, end)| s <= p && e <= end),
            "segment not inside any input chunk"
        );
    }
    // One segment per chunk the data line's payload touched.
    let chunk = 16 << 10;
    let touched = (payload_end - 1) / chunk - payload_start / chunk + 1;
    assert_eq!(ev.data.segments().len(), touched);
    assert_eq!(touched, 257);
}

#[test]
fn line_inside_one_chunk_is_one_slice() {
    // Lines of at least `copy_below` (256) bytes are slices, joined by the static LF.
    let (hello, world) = ("h".repeat(300), "w".repeat(256));
    let input = Bytes::from(format!("data: {hello}\ndata: {world}\n\n"));
    let mut d = Decoder::new();
    d.feed(input.clone());
    let ev = d.next_event().unwrap().unwrap();
    let segs = ev.data.segments();
    assert_eq!(segs.len(), 3);
    assert_eq!(segs[0].as_ptr(), input[6..].as_ptr());
    assert_eq!(&segs[1][..], b"\n");
    assert_eq!(segs[2].as_ptr(), input[6 + 300 + 7..].as_ptr());
    assert_eq!(ev.data.contiguous(), format!("{hello}\n{world}").as_bytes());

    // The last line of an event is a slice of its chunk, whatever its size.
    let input = Bytes::from_static(b"data: hi\n\n");
    d.feed(input.clone());
    let ev = d.next_event().unwrap().unwrap();
    assert_eq!(ev.data.segments().len(), 1);
    assert_eq!(ev.data.segments()[0].as_ptr(), input[6..].as_ptr());
}

#[test]
fn small_pieces_are_copied_into_one_segment() {
    let input = Bytes::from_static(b"data: hello\ndata\ndata: world\n\n");
    let mut d = Decoder::new();
    d.feed(input.clone());
    let ev = d.next_event().unwrap().unwrap();
    assert_eq!(ev.data.segments().len(), 1);
    assert_eq!(ev.data.contiguous(), Bytes::from_static(b"hello\n\nworld"));
    let range = input.as_ptr() as usize..input.as_ptr() as usize + input.len();
    assert!(!range.contains(&(ev.data.segments()[0].as_ptr() as usize)));

    // With `copy_below(0)` every piece is a slice again.
    let mut d = DecoderConfig::default().copy_below(0).build();
    d.feed(input.clone());
    let ev = d.next_event().unwrap().unwrap();
    let segs = ev.data.segments();
    assert_eq!(segs.len(), 4, "{segs:?}"); // hello, the static join, a copied join, world
    assert_eq!(segs[0].as_ptr(), input[6..].as_ptr());
    assert_eq!(segs[3].as_ptr(), input[23..].as_ptr());
}

#[test]
fn data_and_events_compare_and_hash_by_bytes() {
    use ssegate::sse::Data;
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};

    fn hash(x: &impl Hash) -> u64 {
        let mut h = DefaultHasher::new();
        x.hash(&mut h);
        h.finish()
    }
    let text = b"0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-+";
    let whole = Data::from(Bytes::from_static(text));
    // Every split into up to three segments is equal to the whole and hashes the same.
    for i in 0..=text.len() {
        for j in i..=text.len() {
            let mut split = Data::new();
            split.push(Bytes::from_static(&text[..i]));
            split.push(Bytes::from_static(&text[i..j]));
            split.push(Bytes::from_static(&text[j..]));
            assert_eq!(split, whole, "split at {i}, {j}");
            assert_eq!(hash(&split), hash(&whole), "split at {i}, {j}");
        }
    }
    let mut other = Data::new();
    other.push(Bytes::from_static(b"a"));
    other.push(Bytes::from_static(b"c"));
    assert_ne!(other, Data::from("ab"));
    assert_ne!(Data::from("ab"), Data::from("abc"));
    assert_eq!(Data::new(), Data::from(""));

    // Events: the same stream in two chunkings gives equal events.
    let input = b"id: 1\nevent: e\ndata: some data\ndata: more\n\n";
    let mut a = Decoder::new();
    a.feed(Bytes::from_static(input));
    let a = a.next_event().unwrap().unwrap();
    let mut b = Decoder::new();
    let mut got = None;
    for c in input.chunks(3) {
        b.feed(Bytes::copy_from_slice(c));
        if let Some(r) = b.next_event() {
            got = Some(r.unwrap());
        }
    }
    let b = got.unwrap();
    assert_eq!(a, b);
    assert_eq!(hash(&a), hash(&b));
    let mut built = ssegate::sse::Event::new(Data::from("some data\nmore"));
    built.last_event_id = Bytes::from_static(b"1");
    built.event = Some(Bytes::from_static(b"e"));
    built.has_own_id = true;
    assert_eq!(built, a);
}

/// A rope keeps every non-empty segment pushed, in order, and drops the empty ones: checked against
/// the list of pushed pieces for every pattern of five pushes of an empty, a one-byte and a two-byte
/// piece (so from no segment to five, through every change of representation).
#[test]
fn data_keeps_its_non_empty_segments_in_order() {
    use ssegate::sse::Data;
    for pattern in 0..3u32.pow(5) {
        let mut data = Data::new();
        let mut pushed: Vec<&[u8]> = Vec::new();
        let mut p = pattern;
        for _ in 0..5 {
            let piece: &'static [u8] = [b"".as_slice(), b"x", b"yz"][(p % 3) as usize];
            p /= 3;
            data.push(Bytes::from_static(piece));
            if !piece.is_empty() {
                pushed.push(piece);
            }
        }
        let segments: Vec<&[u8]> = data.segments().iter().map(|s| s.as_ref()).collect();
        assert_eq!(segments, pushed, "pattern {pattern}");
        assert_eq!(data.len(), pushed.concat().len());
        assert_eq!(data.is_empty(), pushed.is_empty());
        assert_eq!(data.contiguous(), pushed.concat());
        assert_eq!(data, Data::from(Bytes::from(pushed.concat())));
    }
}

/// `event: message`, the type every MCP server sends, decodes to `message` wherever the input is
/// cut (whole in a chunk, or gathered across chunks), and its near misses keep their own bytes.
#[test]
fn the_message_type_and_its_near_misses_at_every_cut() {
    let input: &[u8] =
        b"event: message\ndata: 1\n\nevent: messages\ndata: 2\n\nevent: messag\ndata: 3\n\n\
        data: 4\n\nevent:message\r\ndata: 5\r\n\r\n";
    let message: &[u8] = b"message";
    let want = [
        Some(message),
        Some(b"messages".as_slice()),
        Some(b"messag".as_slice()),
        None,
        Some(message),
    ];
    for cut in 0..=input.len() {
        let mut d = Decoder::new();
        let mut got = Vec::new();
        for part in [&input[..cut], &input[cut..]] {
            d.feed(Bytes::copy_from_slice(part));
            while let Some(ev) = d.next_event() {
                got.push(ev.unwrap().event);
            }
        }
        let got: Vec<Option<&[u8]>> = got.iter().map(|t| t.as_deref()).collect();
        assert_eq!(got, want, "cut at {cut}");
    }
}

fn data_of(ev: &Event) -> Vec<u8> {
    let mut v = Vec::new();
    ev.data.copy_to(&mut v);
    v
}

/// Runs `input` through `config` in chunks of `size`; returns the events, errors and the maximum
/// of held_bytes() seen.
fn limited(
    config: &DecoderConfig,
    input: &[u8],
    size: usize,
) -> (Vec<Result<Event, DecodeError>>, usize) {
    let input = Bytes::copy_from_slice(input);
    let mut d = config.build();
    let mut max_held = 0;
    let out = drive(&mut d, &chunks_of(&input, size), |d| {
        max_held = max_held.max(d.held_bytes())
    });
    (out, max_held)
}

#[test]
fn line_limit() {
    let mut input = b"id: 1\ndata: ok\n\nid: 2\ndata: ".to_vec();
    input.extend(std::iter::repeat_n(b'x', 10_000));
    input.extend_from_slice(b"\ndata: more of the bad event\n\ndata: after\n\n");
    for size in [1, 7, 64, 4096, input.len()] {
        let (out, max_held) = limited(DecoderConfig::default().max_line(1000), &input, size);
        assert_eq!(out.len(), 3, "chunks of {size}");
        assert_eq!(data_of(out[0].as_ref().unwrap()), b"ok");
        let start = input.windows(8).position(|w| w == b"data: xx").unwrap() as u64;
        assert_eq!(
            out[1],
            Err(DecodeError::LineTooLong {
                limit: 1000,
                offset: start,
                // The dropped block's `id: 2` line came before the long line.
                id: Some(Bytes::from_static(b"2")),
            })
        );
        let after = out[2].as_ref().unwrap();
        assert_eq!(data_of(after), b"after");
        // The errored block's id is not committed.
        assert_eq!(&after.last_event_id[..], b"1");
        assert!(max_held <= 1000, "held {max_held}");
    }
}

#[test]
fn line_limit_applies_to_comments_without_holding_them() {
    let mut input = b":".to_vec();
    input.extend(std::iter::repeat_n(b'c', 100_000));
    input.extend_from_slice(b"\ndata: dropped\n\ndata: kept\n\n");
    let (out, max_held) = limited(DecoderConfig::default().max_line(4096), &input, 333);
    assert_eq!(out.len(), 2);
    assert!(matches!(
        out[0],
        Err(DecodeError::LineTooLong {
            limit: 4096,
            offset: 0,
            id: None,
        })
    ));
    assert_eq!(data_of(out[1].as_ref().unwrap()), b"kept");
    assert_eq!(max_held, 0);
}

#[test]
fn event_limit() {
    let mut input = b"data: small\n\n".to_vec();
    for _ in 0..100 {
        input.extend_from_slice(b"data: ");
        input.extend(std::iter::repeat_n(b'y', 100));
        input.push(b'\n');
    }
    input.extend_from_slice(b"\ndata: next\n\n");
    for size in [1, 10, 1000, input.len()] {
        let (out, max_held) = limited(DecoderConfig::default().max_event(1000), &input, size);
        assert_eq!(out.len(), 3, "chunks of {size}");
        assert_eq!(data_of(out[0].as_ref().unwrap()), b"small");
        assert!(matches!(
            out[1],
            Err(DecodeError::EventTooLarge { limit: 1000, .. })
        ));
        assert_eq!(data_of(out[2].as_ref().unwrap()), b"next");
        assert!(max_held <= 1000, "held {max_held}");
    }
    // Exactly at the limit is fine.
    let exact = format!("data: {}\n\n", "z".repeat(1000));
    let (out, _) = limited(
        DecoderConfig::default().max_event(1000),
        exact.as_bytes(),
        5,
    );
    assert_eq!(data_of(out[0].as_ref().unwrap()).len(), 1000);
}

#[test]
fn endless_data_lines_never_exceed_the_event_limit() {
    let line = format!("data: {}\n", "w".repeat(50));
    let input = line.repeat(20_000); // 1.1 MB, never a blank line
    let (out, max_held) = limited(
        DecoderConfig::default().max_event(64 << 10),
        input.as_bytes(),
        4096,
    );
    assert_eq!(out.len(), 1);
    assert!(matches!(
        out[0],
        Err(DecodeError::EventTooLarge { limit: 65536, .. })
    ));
    assert!(max_held <= 64 << 10);
}

#[test]
fn field_limit() {
    for field in ["id", "event", "retry"] {
        let mut input = format!("data: before\n\n{field}: ").into_bytes();
        input.extend(std::iter::repeat_n(b'7', 5000));
        input.extend_from_slice(b"\ndata: dropped\n\nid: 9\ndata: after\n\n");
        for size in [1, 100, input.len()] {
            let mut d = DecoderConfig::default().max_field(4096).build();
            let mut max_held = 0;
            let input = Bytes::from(input.clone());
            let out = drive(&mut d, &chunks_of(&input, size), |d| {
                max_held = max_held.max(d.held_bytes())
            });
            assert_eq!(out.len(), 3, "{field}, chunks of {size}");
            assert_eq!(
                out[1],
                Err(DecodeError::FieldTooLong {
                    limit: 4096,
                    offset: 14,
                    id: None,
                })
            );
            let after = out[2].as_ref().unwrap();
            assert_eq!(data_of(after), b"after");
            assert_eq!(&after.last_event_id[..], b"9");
            assert_eq!(d.retry(), None, "{field}");
            assert!(max_held <= 4096, "held {max_held}");
        }
    }
}

#[test]
fn error_messages_say_what_and_where() {
    let e = DecodeError::LineTooLong {
        limit: 10,
        offset: 5,
        id: None,
    };
    let msg = e.to_string();
    assert!(msg.contains("10") && msg.contains("byte 5"), "{msg}");
    let _: &dyn std::error::Error = &e;
    // The dropped event's id, when the decoder had read it.
    let e = DecodeError::EventTooLarge {
        limit: 10,
        offset: 5,
        id: Some(Bytes::from_static(b"evt-7")),
    };
    let msg = e.to_string();
    assert!(msg.contains("\"evt-7\"") && msg.contains("byte 5"), "{msg}");
}

#[test]
fn finish_reports_the_partial_event_and_the_decoder_serves_the_next_connection() {
    let mut d = Decoder::new();
    d.feed(Bytes::from_static(
        b"retry: 300\nid: 1\ndata: a\n\nid: 2\ndata: {\"big\"",
    ));
    let ev = d.next_event().unwrap().unwrap();
    assert_eq!(&ev.last_event_id[..], b"1");
    assert!(ev.has_own_id);
    assert_eq!(ev.retry, Some(300));
    assert!(d.next_event().is_none());
    assert_eq!(
        d.finish(),
        Some(PartialEvent::new(6 + 12, 6, Some(Bytes::from_static(b"2"))))
    );
    assert_eq!(&d.last_event_id()[..], b"1");
    assert_eq!(d.retry(), Some(300));
    assert_eq!(d.offset(), 0);

    // Next connection: a BOM is stripped again, the LF is a blank line (not swallowed), id persists.
    d.feed(Bytes::from_static(b"\xEF\xBB\xBFdata: b\n\n"));
    let ev = d.next_event().unwrap().unwrap();
    assert_eq!(data_of(&ev), b"b");
    assert_eq!(&ev.last_event_id[..], b"1");
    assert!(!ev.has_own_id);
    assert_eq!(ev.retry, None);
    assert!(d.next_event().is_none());
    assert_eq!(d.finish(), None);
}

#[test]
fn finish_after_a_cr_does_not_swallow_the_next_connections_lf() {
    let mut d = Decoder::new();
    d.feed(Bytes::from_static(b"data: a\r\r"));
    assert!(d.next_event().unwrap().is_ok());
    assert!(d.next_event().is_none());
    assert_eq!(d.finish(), None);
    d.feed(Bytes::from_static(b"\ndata: b\n\n"));
    assert_eq!(data_of(&d.next_event().unwrap().unwrap()), b"b");
}

#[test]
fn partial_id_only_when_the_id_line_completed() {
    let cases: [(&[u8], Option<&[u8]>); 4] = [
        (b"id: 5", None),
        (b"id: 5\r", Some(b"5")),
        (b"id: 5\ndata: x", Some(b"5")),
        (b"data: x\nid: 5", None),
    ];
    for (input, id) in cases {
        let mut d = Decoder::new();
        d.feed(Bytes::copy_from_slice(input));
        assert!(d.next_event().is_none());
        let p = d.finish().unwrap();
        assert_eq!(p.bytes, input.len() as u64);
        assert_eq!(p.id.as_deref(), id, "{:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn offset_counts_consumed_bytes() {
    let mut d = Decoder::new();
    d.feed(Bytes::from_static(b"data: a\n\ndata"));
    d.next_event().unwrap().unwrap();
    assert_eq!(d.offset(), 9);
    assert!(d.next_event().is_none());
    assert_eq!(d.offset(), 13);
}

#[test]
fn a_line_over_two_limits_reports_the_one_crossed_first_whatever_the_chunking() {
    // `data: ` + 100 bytes: the event limit (30 data bytes) is crossed at byte 36 of the line, the
    // line limit (50) at byte 50, and the field limit (8) of an `id` value at byte 12.
    let mut data = b"data: ".to_vec();
    data.extend(std::iter::repeat_n(b'x', 100));
    data.extend_from_slice(b"\n\n");
    let mut id = b"id: ".to_vec();
    id.extend(std::iter::repeat_n(b'7', 100));
    id.extend_from_slice(b"\n\n");
    let mut config = DecoderConfig::default();
    config.max_line(50).max_event(30).max_field(8);
    for size in 1..=data.len() {
        let (out, _) = limited(&config, &data, size);
        assert_eq!(
            out,
            [Err(DecodeError::EventTooLarge {
                limit: 30,
                offset: 0,
                id: None,
            })],
            "chunks of {size}"
        );
        let (out, _) = limited(&config, &id, size);
        assert_eq!(
            out,
            [Err(DecodeError::FieldTooLong {
                limit: 8,
                offset: 0,
                id: None,
            })],
            "chunks of {size}"
        );
    }
    // With the line limit lower, the line is crossed first.
    config.max_line(20);
    for size in 1..=data.len() {
        let (out, _) = limited(&config, &data, size);
        assert_eq!(
            out,
            [Err(DecodeError::LineTooLong {
                limit: 20,
                offset: 0,
                id: None,
            })],
            "chunks of {size}"
        );
    }
}

/// `Data::reader` reads the rope in place: every split gives the same bytes, `Buf` and `Read`
/// agree, and a slice within one segment is the segment's own memory.
#[test]
fn data_reader_reads_the_rope_in_place() {
    use bytes::Buf;
    use std::io::Read;
    let text = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"text\":\"hello world\"}}";
    for split in [1, 2, 7, 16, text.len()] {
        let mut data = ssegate::sse::Data::new();
        for piece in text.chunks(split) {
            data.push(Bytes::copy_from_slice(piece));
        }
        let mut read = Vec::new();
        data.reader().read_to_end(&mut read).unwrap();
        assert_eq!(read, text, "split {split}");
        let mut buf = data.reader();
        assert_eq!(buf.remaining(), text.len());
        let head = buf.copy_to_bytes(5);
        assert_eq!(&head[..], &text[..5]);
        buf.advance(3);
        assert_eq!(buf.copy_to_bytes(buf.remaining()), &text[8..]);
        let v: serde_json::Value = serde_json::from_reader(data.reader()).unwrap();
        assert_eq!(v["result"]["text"], "hello world");
    }
    let one = ssegate::sse::Data::from(Bytes::copy_from_slice(text));
    let seg = one.segments()[0].clone();
    let mut r = one.reader();
    r.advance(2);
    let slice = r.copy_to_bytes(10);
    assert_eq!(
        slice.as_ptr(),
        seg[2..].as_ptr(),
        "no copy within a segment"
    );
}
