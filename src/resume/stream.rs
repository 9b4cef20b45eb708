//! A guarded [`futures_core::Stream`] of messages over any byte stream plus a reconnect function:
//! the shape `reqwest-eventsource` users know, with the [`ResumableStream`] making every decision.
//!
//! ```no_run
//! # async fn run() {
//! use bytes::Bytes;
//! use futures::StreamExt;
//! use ssegate::resume::{ReconnectResponse, ResumableStream};
//! use ssegate::resume::stream::GuardedStream;
//!
//! let first = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"id: 1\ndata: {}\n\n"))]);
//! let reconnect = |r: ssegate::resume::Reconnect| async move {
//!     // GET with `Last-Event-ID: r.last_event_id` on your HTTP stack; return the head and the body.
//!     let body = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::new())]);
//!     Ok::<_, std::io::Error>((ReconnectResponse::event_stream(), body))
//! };
//! let mut messages = GuardedStream::new(ResumableStream::new(), first, reconnect);
//! while let Some(message) = messages.next().await {
//!     match message {
//!         Ok(delivery) => println!("{} bytes", delivery.message.len()),
//!         Err(failure) => eprintln!("{failure}"),
//!     }
//! }
//! # }
//! ```
#![forbid(unsafe_code)]

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use bytes::Bytes;
use futures_core::Stream;

use super::{EndCause, Failure, Output, Reconnect, ReconnectResponse, ResumableStream};
use crate::resume::Delivery;

type Connecting<B, E> = Pin<Box<dyn Future<Output = Result<(ReconnectResponse, B), E>> + Send>>;

/// Delivers the messages of one resumable stream: feeds the body's chunks to a
/// [`ResumableStream`], sleeps its deadlines on tokio's timer (and reads the time from that same
/// clock, so `tokio::time::pause` drives it), and calls `reconnect` whenever it asks for one. Ends
/// after the stream finishes or fails (the failure is the last item).
///
/// An event the decoder drops over one of its limits while a response is outstanding ends the
/// stream at once with that refusal ([`RefusalKind::DecodeLimit`](crate::resume::RefusalKind::DecodeLimit)): the
/// dropped event may have been the response, and waiting for it would wait forever (a server that
/// sends an endless data line never ends the event). With nothing outstanding the stream goes on.
///
/// The last transport error (of the body or of a reconnect) is kept: [`GuardedStream::last_error`]
/// says why a reconnect failed.
pub struct GuardedStream<B, F, E> {
    stream: ResumableStream,
    body: Option<B>,
    reconnect: F,
    connecting: Option<Connecting<B, E>>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Boxed: the stream stays `Unpin` whatever the error type.
    last_error: Option<Box<E>>,
    done: bool,
}

impl<B, F, E> fmt::Debug for GuardedStream<B, F, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedStream")
            .field("stream", &self.stream)
            .field("connected", &self.body.is_some())
            .field("connecting", &self.connecting.is_some())
            .finish()
    }
}

impl<B, F, E> GuardedStream<B, F, E> {
    /// The state machine (cursor, counters, outstanding requests).
    pub fn state(&self) -> &ResumableStream {
        &self.stream
    }

    /// The last transport error: a body that failed, or a reconnect that failed before its
    /// response head.
    pub fn last_error(&self) -> Option<&E> {
        self.last_error.as_deref()
    }

    /// Takes the last transport error out (see [`GuardedStream::last_error`]).
    pub fn take_last_error(&mut self) -> Option<E> {
        self.last_error.take().map(|e| *e)
    }
}

/// Now, on the clock the stream's timers sleep on.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl<B, F, Fut, E> GuardedStream<B, F, E>
where
    B: Stream<Item = Result<Bytes, E>> + Unpin,
    F: FnMut(Reconnect) -> Fut,
    Fut: Future<Output = Result<(ReconnectResponse, B), E>> + Send + 'static,
{
    /// Guards `stream`'s first connection `body`; `reconnect` opens each resumption (`GET` with
    /// the given `Last-Event-ID`) and returns its response head and body.
    pub fn new(stream: ResumableStream, body: B, reconnect: F) -> Self {
        GuardedStream {
            stream,
            body: Some(body),
            reconnect,
            connecting: None,
            sleep: None,
            last_error: None,
            done: false,
        }
    }

    /// Arms the timer for the stream's next deadline; `Ready` when it has already passed.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(at) = self.stream.poll_timeout() else {
            self.sleep = None;
            return Poll::Pending;
        };
        let at = tokio::time::Instant::from_std(at);
        match &mut self.sleep {
            Some(sleep) if sleep.deadline() == at => {}
            slot => *slot = Some(Box::pin(tokio::time::sleep_until(at))),
        }
        let sleep = self.sleep.as_mut().expect("armed above");
        ready!(sleep.as_mut().poll(cx));
        self.sleep = None;
        self.stream.handle_timeout(now());
        Poll::Ready(())
    }
}

impl<B, F, Fut, E> Stream for GuardedStream<B, F, E>
where
    B: Stream<Item = Result<Bytes, E>> + Unpin,
    F: FnMut(Reconnect) -> Fut + Unpin,
    Fut: Future<Output = Result<(ReconnectResponse, B), E>> + Send + 'static,
{
    type Item = Result<Delivery, Failure>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            // 1. Everything the state machine has to say.
            while let Some(output) = this.stream.poll() {
                match output {
                    Output::Deliver(d) => return Poll::Ready(Some(Ok(d))),
                    Output::Disconnected(_) => this.body = None,
                    Output::Reconnect(r) => {
                        this.body = None;
                        this.connecting = Some(Box::pin((this.reconnect)(r)));
                    }
                    Output::Finished => {
                        this.done = true;
                        return Poll::Ready(None);
                    }
                    Output::Failed(f) => {
                        this.done = true;
                        return Poll::Ready(Some(Err(f)));
                    }
                    // The dropped event may have been an outstanding response: nothing will come
                    // in its place.
                    Output::Dropped(dropped) if !dropped.outstanding.is_empty() => {
                        this.done = true;
                        this.body = None;
                        let refusal = dropped.into_refusal();
                        return Poll::Ready(Some(Err(Failure::Refused(refusal))));
                    }
                    // Skips, cursor moves and dropped events carry nothing to deliver.
                    _ => {}
                }
            }
            // 2. A reconnect in flight.
            if let Some(connecting) = &mut this.connecting
                && let Poll::Ready(result) = connecting.as_mut().poll(cx)
            {
                this.connecting = None;
                let now = now();
                match result {
                    Ok((response, body)) => {
                        if this.stream.reconnect_response(&response, now) == super::Answer::Read {
                            this.body = Some(body);
                        }
                    }
                    Err(e) => {
                        this.last_error = Some(Box::new(e));
                        this.stream.reconnect_failed(now);
                    }
                }
                continue;
            }
            // 3. The open connection's bytes.
            if let Some(body) = &mut this.body
                && this.stream.is_open()
            {
                match Pin::new(body).poll_next(cx) {
                    Poll::Ready(Some(Ok(chunk))) => {
                        this.stream.feed(chunk, now());
                        continue;
                    }
                    Poll::Ready(Some(Err(e))) => {
                        this.last_error = Some(Box::new(e));
                        this.stream.connection_ended(EndCause::Error, now());
                        continue;
                    }
                    Poll::Ready(None) => {
                        this.stream.connection_ended(EndCause::Eof, now());
                        continue;
                    }
                    Poll::Pending => {}
                }
            }
            // 4. The next deadline (retry delay, backoff, replay and idle timeouts).
            match this.poll_deadline(cx) {
                Poll::Ready(()) => continue,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
