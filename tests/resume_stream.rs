//! The guarded `Stream` adapter over an in-memory byte stream and a reconnect function.
#![cfg(feature = "guarded-stream")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use ssegate::message::RpcId;
use ssegate::resume::stream::GuardedStream;
use ssegate::resume::{Failure, Reconnect, ReconnectResponse, StreamConfig};

type Body = futures::stream::Iter<std::vec::IntoIter<Result<Bytes, std::io::Error>>>;

fn body(chunks: &[&'static [u8]]) -> Body {
    let v: Vec<Result<Bytes, std::io::Error>> =
        chunks.iter().map(|c| Ok(Bytes::from_static(c))).collect();
    futures::stream::iter(v)
}

fn config() -> StreamConfig {
    let mut c = StreamConfig::default();
    c.default_retry(Duration::from_millis(5))
        .min_delay(Duration::from_millis(5));
    c
}

const RESULT: &[u8] =
    b"id: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"text\":\"abcdef\"}}\n\n";

#[tokio::test]
async fn a_cut_result_is_resumed_in_place_and_delivered_once() {
    let mut stream = config().build();
    stream.expect_response(RpcId::Number(1));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let reconnect = move |r: Reconnect| {
        seen.lock().unwrap().push(r.last_event_id.clone());
        async move {
            Ok((
                ReconnectResponse::event_stream(),
                body(&[&RESULT[..30], &RESULT[30..]]),
            ))
        }
    };
    // Cut inside the result, after a notification with id 1.
    let first = body(&[
        b"id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n",
        &RESULT[..40],
    ]);
    let items: Vec<_> = GuardedStream::new(stream, first, reconnect).collect().await;
    let delivered: Vec<Bytes> = items
        .into_iter()
        .map(|i| i.expect("no failure").message.to_bytes())
        .collect();
    assert_eq!(delivered.len(), 2);
    assert_eq!(&delivered[1][..], &RESULT[12..RESULT.len() - 2]);
    assert_eq!(*asked.lock().unwrap(), [Some(Bytes::from_static(b"1"))]);
}

#[tokio::test]
async fn a_lost_buffer_ends_the_stream_with_a_typed_failure() {
    let mut stream = config().build();
    stream.expect_response(RpcId::Number(1));
    let reconnect = |_r: Reconnect| async move {
        // The server lost its buffer: 200 with an empty body.
        Ok((ReconnectResponse::event_stream(), body(&[])))
    };
    let first = body(&[b"id: 1\ndata:\n\n", &RESULT[..40]]);
    let items: Vec<_> = GuardedStream::new(stream, first, reconnect).collect().await;
    assert_eq!(items.len(), 1);
    let Err(f) = &items[0] else {
        panic!("{items:?}")
    };
    assert!(
        matches!(f, Failure::Refused(e) if e.must_renegotiate()),
        "{f}"
    );
    assert_eq!(f.outstanding(), &[RpcId::Number(1)]);
}

#[tokio::test]
async fn failed_reconnects_are_retried_then_reported() {
    let mut c = config();
    c.backoff(Duration::from_millis(1))
        .max_reconnect_attempts(3);
    let mut stream = c.build();
    stream.expect_response(RpcId::Number(1));
    let calls = Arc::new(Mutex::new(0));
    let n = calls.clone();
    let reconnect = move |_r: Reconnect| {
        *n.lock().unwrap() += 1;
        async move { Err::<(ReconnectResponse, Body), _>(std::io::Error::other("connection refused")) }
    };
    let first = body(&[b"id: 1\ndata:\n\n", &RESULT[..40]]);
    let items: Vec<_> = GuardedStream::new(stream, first, reconnect).collect().await;
    assert!(
        matches!(
            items.as_slice(),
            [Err(Failure::ReconnectFailed { attempts: 3, .. })]
        ),
        "{items:?}"
    );
    assert_eq!(*calls.lock().unwrap(), 3);
}

#[tokio::test]
async fn an_event_dropped_over_a_limit_while_the_response_is_outstanding_ends_the_stream_at_once() {
    // A hostile server's endless data line: the decoder drops it at its limit and then skips
    // bytes forever, so the response can never arrive. The stream must fail at once, naming the
    // limit, and stop reading.
    let mut limits = ssegate::sse::DecoderConfig::default();
    limits.max_line(1 << 20).max_event(1 << 20);
    let mut c = config();
    c.decoder(limits);
    let mut stream = c.build();
    stream.expect_response(RpcId::Number(1));
    let pulled = Arc::new(Mutex::new(0usize));
    let count = pulled.clone();
    let prefix =
        Bytes::from_static(b"id: 0\ndata:\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"");
    let filler = Bytes::from(vec![b'x'; 64 << 10]);
    type DynBody =
        std::pin::Pin<Box<dyn futures::Stream<Item = Result<Bytes, std::io::Error>> + Send>>;
    let endless: DynBody = Box::pin(
        futures::stream::iter([Ok::<_, std::io::Error>(prefix)]).chain(
            futures::stream::repeat_with(move || {
                *count.lock().unwrap() += 1;
                Ok(filler.clone())
            }),
        ),
    );
    let reconnect = |_r: Reconnect| async move {
        let none: DynBody = Box::pin(body(&[]));
        Ok::<_, std::io::Error>((ReconnectResponse::event_stream(), none))
    };
    let mut guarded = GuardedStream::new(stream, endless, reconnect);
    let first = tokio::time::timeout(Duration::from_secs(10), guarded.next())
        .await
        .expect("the stream must fail, not read forever");
    match first {
        Some(Err(Failure::Refused(e))) => {
            assert!(
                matches!(e.kind, ssegate::resume::RefusalKind::DecodeLimit { .. }),
                "{e}"
            );
            assert_eq!(e.outstanding, [RpcId::Number(1)]);
            assert!(e.to_string().contains("1048576"), "{e}");
        }
        other => panic!("expected the decode limit, got {other:?}"),
    }
    assert!(
        guarded.next().await.is_none(),
        "the failure is the last item"
    );
    // Read up to the limit and a chunk past it, not on and on.
    let pulled = *pulled.lock().unwrap();
    assert!(pulled <= 18, "{pulled} chunks of 64 KiB read");
}
