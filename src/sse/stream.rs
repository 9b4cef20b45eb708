//! A [`futures_core::Stream`] of SSE events over any stream of [`Bytes`] chunks (feature `stream`).
//!
//! [`EventStream`] polls its source only when the decoder has nothing left to yield, so no input
//! is queued unscanned. When the source ends, the block still open (if any) is kept for
//! [`EventStream::partial`]; it is never yielded as an event.
#![forbid(unsafe_code)]

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_core::Stream;

use super::{DecodeError, Decoder, Event, PartialEvent};

/// Adapts `S: Stream<Item = Result<Bytes, E>>` into a stream of [`Event`]s.
#[derive(Debug)]
pub struct EventStream<S> {
    source: S,
    decoder: Decoder,
    ended: bool,
    partial: Option<PartialEvent>,
}

/// An error from the source or from the decoder.
#[derive(Debug)]
#[non_exhaustive]
pub enum StreamError<E> {
    /// The source stream failed; the adapter keeps polling it if asked to.
    Source(E),
    /// A limit was exceeded; the decoder has resynchronised.
    Decode(DecodeError),
}

impl<E: fmt::Display> fmt::Display for StreamError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Source(e) => write!(f, "SSE source: {e}"),
            StreamError::Decode(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for StreamError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StreamError::Source(e) => Some(e),
            StreamError::Decode(e) => Some(e),
        }
    }
}

impl<S> EventStream<S> {
    /// Decodes `source` with a default [`Decoder`].
    pub fn new(source: S) -> Self {
        EventStream::with_decoder(source, Decoder::new())
    }

    /// Decodes `source` with `decoder` (other limits, or the previous connection's decoder, whose
    /// last event id and retry carry over).
    pub fn with_decoder(source: S, decoder: Decoder) -> Self {
        EventStream {
            source,
            decoder,
            ended: false,
            partial: None,
        }
    }

    /// The decoder: [`Decoder::last_event_id`], [`Decoder::retry`].
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// The block left open when the source ended (`None` before the end, or at a boundary).
    pub fn partial(&self) -> Option<&PartialEvent> {
        self.partial.as_ref()
    }

    /// Ends this connection now, whether or not the source has ended (a cut, a timeout), and
    /// returns the open block. Polling again afterwards yields `None`.
    pub fn finish(&mut self) -> Option<PartialEvent> {
        if !self.ended {
            self.ended = true;
            self.partial = self.decoder.finish();
        }
        self.partial.take()
    }

    /// Ends this connection and returns the open block and the decoder, for the next connection.
    pub fn into_partial(mut self) -> (Option<PartialEvent>, Decoder) {
        let partial = self.finish();
        (partial, self.decoder)
    }
}

impl<S, E> Stream for EventStream<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<Event, StreamError<E>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            if let Some(r) = this.decoder.next_event() {
                return Poll::Ready(Some(r.map_err(StreamError::Decode)));
            }
            match Pin::new(&mut this.source).poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => this.decoder.feed(chunk),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(StreamError::Source(e)))),
                Poll::Ready(None) => {
                    this.ended = true;
                    this.partial = this.decoder.finish();
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
