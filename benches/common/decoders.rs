//! ssegate and every peer crate as one function from owned chunks to an event count, for the
//! `decode` and `alloc` benches (`ssegate::sse::EventStream` needs the `stream` feature).
#![allow(dead_code)]

use std::hint::black_box;
use std::io;

use bytes::Bytes;
use futures::StreamExt;
use futures::executor::block_on;
use ssegate::message::Parser;
use ssegate::resume::{Output, ResumableStream};
use ssegate::sse::Decoder;

fn decode_all(chunks: Vec<Bytes>) -> usize {
    decode_with(Decoder::new(), chunks)
}

/// Decodes `chunks` with `d`, dropping each event as it comes.
pub(crate) fn decode_with(mut d: Decoder, chunks: Vec<Bytes>) -> usize {
    let mut n = 0;
    for c in chunks {
        d.feed(c);
        while let Some(r) = d.next_event() {
            black_box(&r);
            n += 1;
        }
    }
    n
}

type Chunks = futures::stream::Iter<std::vec::IntoIter<Result<Bytes, io::Error>>>;

fn source(chunks: Vec<Bytes>) -> Chunks {
    let items: Vec<Result<Bytes, io::Error>> = chunks.into_iter().map(Ok).collect();
    futures::stream::iter(items)
}

/// Drains `stream`, counting the `Ok` items (every peer yields `Result<Event, _>`).
fn drain<S, T, E>(stream: S) -> usize
where
    S: futures::Stream<Item = Result<T, E>>,
    E: std::fmt::Debug,
{
    block_on(async move {
        let mut stream = std::pin::pin!(stream);
        let mut n = 0;
        while let Some(item) = stream.next().await {
            black_box(&item.expect("peer decodes the input"));
            n += 1;
        }
        n
    })
}

/// One decoder, as a function from owned chunks to the number of events.
pub(crate) type Run = fn(Vec<Bytes>) -> usize;

/// ssegate and every peer, by bench id.
pub(crate) const DECODERS: [(&str, Run); 6] = [
    ("ssegate", decode_all),
    ("ssegate_stream", |c| {
        drain(ssegate::sse::EventStream::new(source(c)))
    }),
    ("sse-stream_0.3", |c| {
        drain(sse_stream::SseByteStream::new(source(c)))
    }),
    ("sse-stream_0.2", |c| {
        drain(sse_stream_02::SseStream::from_bytes_stream(source(c)))
    }),
    ("sseer", |c| drain(sseer::EventStream::new(source(c)))),
    ("eventsource-stream", |c| {
        drain(eventsource_stream::EventStream::new(source(c)))
    }),
];

/// The path a guarded client runs: `ResumableStream` (decoder, exact gate, JSON-RPC peek, content
/// hash, replay window) fed the chunks, every delivered message counted. With `parse`, each message
/// is then parsed by the application with simd-json through [`Parser`] (one copy into its padded
/// scratch, kept between messages).
pub(crate) fn guarded(chunks: Vec<Bytes>, parse: bool) -> usize {
    guarded_with(ResumableStream::new(), chunks, parse)
}

/// [`guarded`] on a stream the caller configured.
pub(crate) fn guarded_with(mut stream: ResumableStream, chunks: Vec<Bytes>, parse: bool) -> usize {
    let mut parser = Parser::new();
    let now = std::time::Instant::now();
    let mut n = 0;
    for c in chunks {
        stream.feed(c, now);
        while let Some(out) = stream.poll() {
            match out {
                Output::Deliver(d) => {
                    if parse {
                        let v = d.message.parse_value(&mut parser).expect("valid JSON");
                        black_box(&v);
                    } else {
                        black_box(&d);
                    }
                    n += 1;
                }
                Output::Failed(f) => panic!("the guard refused a correct stream: {f}"),
                _ => {}
            }
        }
    }
    n
}

/// The unguarded baseline an application runs: decode, copy each event's data into one reused
/// buffer, parse it with simd-json (its buffers reused too).
pub(crate) fn decode_and_parse(chunks: Vec<Bytes>) -> usize {
    let mut d = Decoder::new();
    let mut buf = Vec::new();
    let mut buffers = simd_json::Buffers::default();
    let mut n = 0;
    for c in chunks {
        d.feed(c);
        while let Some(r) = d.next_event() {
            let ev = r.expect("no limit is hit");
            buf.clear();
            ev.data.copy_to(&mut buf);
            let v = simd_json::to_borrowed_value_with_buffers(&mut buf, &mut buffers)
                .expect("valid JSON");
            black_box(&v);
            n += 1;
        }
    }
    n
}

/// The shipped path and its parse baselines, by bench id (each row's events are counted as
/// delivered messages).
pub(crate) const GUARDED: [(&str, Run); 4] = [
    ("ssegate_guarded", |c| guarded(c, false)),
    // The same with the gate reading each message at dispatch instead of ahead of it.
    ("ssegate_guarded_at_dispatch", |c| {
        let stream = ResumableStream::config().gate_ahead(usize::MAX).build();
        guarded_with(stream, c, false)
    }),
    ("ssegate_guarded+simd_json", |c| guarded(c, true)),
    ("ssegate+simd_json", decode_and_parse),
];
