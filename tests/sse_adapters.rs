//! The async adapters: `sse::Codec` (feature `codec`) and `sse::EventStream` (feature `stream`).

#[cfg(any(feature = "codec", feature = "stream"))]
const INPUT: &[u8] = b"retry: 10\nid: 1\ndata: {\"a\":1}\n\n: ping\n\nid: 2\nevent: x\ndata: b\n\nid: 3\ndata: {\"cut";

#[cfg(feature = "codec")]
mod codec {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use futures::StreamExt;
    use ssegate::sse::{Codec, CodecError, PartialEvent};
    use tokio::io::{AsyncRead, ReadBuf};
    use tokio_util::codec::FramedRead;

    /// Reads `n` bytes at a time.
    struct Trickle(&'static [u8], usize);

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            let n = self.1.min(self.0.len()).min(buf.remaining());
            buf.put_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn codec_yields_events_then_the_partial_event() {
        for n in [1, 5, 64, 4096] {
            let items: Vec<_> = futures::executor::block_on(
                FramedRead::new(Trickle(super::INPUT, n), Codec::new()).collect(),
            );
            assert_eq!(items.len(), 3, "reads of {n}");
            let ev = items[0].as_ref().unwrap();
            assert!(ev.data.eq_bytes(b"{\"a\":1}"));
            assert_eq!(ev.retry, Some(10));
            let ev = items[1].as_ref().unwrap();
            assert_eq!(ev.event_type(), b"x");
            assert_eq!(&ev.last_event_id[..], b"2");
            match &items[2] {
                Err(CodecError::PartialEvent(p)) => {
                    assert_eq!(*p, PartialEvent::new(17, 5, Some("3".into())))
                }
                other => panic!("expected the partial event, got {other:?}"),
            }
        }
    }

    /// FramedRead ends the stream after any `Err` from the codec: it yields `None` next and calls
    /// the codec again only after reading more. The codec ends the connection there too, so
    /// polling on yields nothing from the rest of this connection, and the decoder it hands back
    /// starts the next connection clean.
    #[test]
    fn codec_ends_the_connection_after_an_error_as_framed_read_does() {
        use ssegate::sse::{DecodeError, DecoderConfig};
        let input: &'static [u8] = Box::leak(
            format!(
                "id: 1\ndata: a\n\ndata: {}\n\nid: 5\ndata: b\n\n",
                "x".repeat(100)
            )
            .into_bytes()
            .into_boxed_slice(),
        );
        for n in [1, 7, 4096] {
            let mut config = DecoderConfig::default();
            config.max_event(10);
            let codec = Codec::with_decoder(config.build());
            let mut framed = FramedRead::new(Trickle(input, n), codec);
            futures::executor::block_on(async {
                let ev = framed.next().await.unwrap().unwrap();
                assert!(ev.data.eq_bytes(b"a"));
                match framed.next().await {
                    Some(Err(CodecError::Decode(DecodeError::EventTooLarge {
                        limit: 10,
                        offset: 15,
                        id: None,
                    }))) => {}
                    other => panic!("reads of {n}: expected the limit error, got {other:?}"),
                }
                // FramedRead: `None` right after the error.
                assert!(framed.next().await.is_none(), "reads of {n}");
                // Polled again it reads on, and the codec yields nothing more of this connection.
                assert!(framed.next().await.is_none(), "reads of {n}");
            });
            assert!(framed.decoder().ended());
            let decoder = framed.into_parts().codec.into_decoder();
            assert_eq!(&decoder.last_event_id()[..], b"1", "reads of {n}");
            assert_eq!(decoder.offset(), 0, "the next connection starts clean");
        }
    }

    #[test]
    fn codec_keeps_the_decoder_for_the_next_connection() {
        let mut framed = FramedRead::new(Trickle(b"id: 7\ndata: a\n\n", 3), Codec::new());
        let items: Vec<_> = futures::executor::block_on((&mut framed).collect());
        assert_eq!(items.len(), 1);
        let decoder = framed.into_parts().codec.into_decoder();
        assert_eq!(&decoder.last_event_id()[..], b"7");
    }
}

#[cfg(feature = "stream")]
mod stream {
    use bytes::Bytes;
    use futures::StreamExt;
    use ssegate::sse::{EventStream, PartialEvent, StreamError};

    fn source(n: usize) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
        let chunks: Vec<_> = super::INPUT
            .chunks(n)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        futures::stream::iter(chunks)
    }

    #[test]
    fn stream_yields_events_and_keeps_the_partial_event() {
        for n in [1, 3, 100] {
            let mut s = EventStream::new(source(n));
            let events: Vec<_> = futures::executor::block_on((&mut s).collect());
            assert_eq!(events.len(), 2);
            assert!(events[0].as_ref().unwrap().data.eq_bytes(b"{\"a\":1}"));
            assert_eq!(&events[1].as_ref().unwrap().last_event_id[..], b"2");
            assert_eq!(
                s.partial(),
                Some(&PartialEvent::new(17, 5, Some("3".into())))
            );
            assert_eq!(&s.decoder().last_event_id()[..], b"2");
            let (partial, decoder) = s.into_partial();
            assert_eq!(partial.unwrap().bytes, 17);
            assert_eq!(decoder.retry(), Some(10));
        }
    }

    #[test]
    fn stream_passes_source_errors_through_and_finish_cuts() {
        let items = vec![
            Ok(Bytes::from_static(b"data: a\n\n")),
            Err("reset"),
            Ok(Bytes::from_static(b"id: 4\ndata: b\n")),
        ];
        let mut s = EventStream::new(futures::stream::iter(items));
        futures::executor::block_on(async {
            assert!(s.next().await.unwrap().is_ok());
            assert!(matches!(
                s.next().await,
                Some(Err(StreamError::Source("reset")))
            ));
            // Drain what is there, then cut before the source ends.
            let _ = futures::poll!(s.next());
            let p = s.finish().unwrap();
            assert_eq!(p.id.as_deref(), Some(&b"4"[..]));
            assert!(s.next().await.is_none());
        });
    }
}
