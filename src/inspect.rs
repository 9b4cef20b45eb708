//! Diagnostics: how the engine judged each event of a stream, and the numbered id shapes whose
//! order it infers. For tools that report on a stream rather than drive one (`ssegate check` and
//! `ssegate probe` are built on it); a client that only drives a
//! [`ResumableStream`] needs none of it.
//!
//! ```
//! use std::time::Instant;
//! use bytes::Bytes;
//! use ssegate::inspect;
//! use ssegate::resume::ResumableStream;
//!
//! let mut stream = ResumableStream::new();
//! inspect::observe_events(&mut stream, true);
//! stream.feed(Bytes::from_static(b"id: 4\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n"), Instant::now());
//! while stream.poll().is_some() {}
//! let event = inspect::last_event(&stream).expect("observed");
//! assert_eq!((event.id.as_deref(), event.bytes), (Some(&b"4"[..]), 30));
//! ```
#![forbid(unsafe_code)]

use bytes::Bytes;

use crate::gate::Verdict;
use crate::resume::ResumableStream;

pub use crate::guard::NumberedId;

/// What the stream knew about the last event it decided on (kept only after
/// [`observe_events`]; `ssegate check` prints it).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventInfo {
    /// The event's own id (`None` when it had no `id:` line).
    pub id: Option<Bytes>,
    /// The event type (`message` when absent).
    pub event_type: Bytes,
    /// Data bytes.
    pub bytes: usize,
    /// The gate's verdict on the data (`None` for empty data).
    pub verdict: Option<Verdict>,
    /// Where the event ended in its connection's body: bytes of that body up to and including
    /// the blank line that dispatched it.
    pub end: u64,
}

/// Keeps an [`EventInfo`] of each event `stream` decides on (one at a time: [`last_event`]).
pub fn observe_events(stream: &mut ResumableStream, on: bool) {
    stream.observe = on;
}

/// The last event `stream` decided on, when [`observe_events`] is on.
pub fn last_event(stream: &ResumableStream) -> Option<&EventInfo> {
    stream.last_event.as_ref()
}
