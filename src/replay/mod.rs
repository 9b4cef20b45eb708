//! Server-side replay: what an MCP Streamable HTTP server keeps so that a client can resume a cut
//! stream with `GET` + `Last-Event-ID`.
//!
//! The contract is the [`ReplayStore`] trait: append an event to a stream (the store assigns its id and
//! encodes its frame), replay every event of a stream strictly after an id, forget a stream, and answer
//! every replay it cannot serve with an explicit [`Miss`] — its [`MissReason`] and a retry hint —
//! never with a silent fresh or empty stream. Two stores implement it:
//!
//! - [`ReplayBuffer`], the embedded default: one session's streams in process memory, bounded by a
//!   byte budget, an event cap, a stream cap and a cap on remembered too-large events. Its methods are
//!   synchronous; the trait methods are ready futures around them (no allocation of their own).
//! - `RedisStore` (feature `redis`): one Redis stream per SSE stream, shared by every server instance
//!   behind a load balancer, so a resume may land on any of them.
//!
//! Each event is stored as its encoded SSE frame (one [`Bytes`]), so a replay hands out the very bytes
//! that were first written. Event ids are `<stream>-<seq>`: unique across streams, naming the stream
//! they belong to (so a `Last-Event-ID` alone finds it), with a per-stream sequence that starts at 0.
//!
//! ```
//! use ssegate::replay::{BufferConfig, MissReason, ReplayBuffer};
//!
//! let mut config = BufferConfig::default();
//! config.max_session_bytes(64).max_session_events(2);
//! let mut buf = ReplayBuffer::new(config);
//! let s = buf.open_stream();
//! let a = buf.append(s, None, b"{\"n\":1}").unwrap();
//! let b = buf.append(s, None, b"{\"n\":2}").unwrap();
//! assert_eq!(a.id, "1-0");
//! assert_eq!(&b.frame[..], b"id: 1-1\ndata: {\"n\":2}\n\n");
//! assert_eq!(buf.replay_after("1-0").unwrap().frames, vec![b.frame.clone()]);
//! buf.append(s, None, b"{\"n\":3}").unwrap(); // a third slot: 1-0 is evicted
//! buf.append(s, None, b"{\"n\":4}").unwrap(); // and then 1-1
//! assert_eq!(buf.replay_after("1-0").unwrap_err().reason, MissReason::Evicted);
//! assert_eq!(buf.replay_after("1-9").unwrap_err().reason, MissReason::Unknown);
//! ```
#![forbid(unsafe_code)]

mod buffer;
mod frame;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "rmcp-server")]
mod rmcp;
mod store;

use std::fmt;
use std::time::Duration;

use bytes::Bytes;

pub use buffer::{BufferConfig, ReplayBuffer, StreamId, format_id, parse_id};
pub use frame::{FrameError, encode_frame};
#[cfg(feature = "redis")]
pub use redis::{RedisConfig, RedisStore, RedisStream};
pub use store::{ReplayStore, StoreError};

/// What an append did with an event.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[must_use = "the frame is what must be written to the client"]
pub struct Appended {
    /// The event's id (`<stream>-<seq>`).
    pub id: String,
    /// The event's sequence number in its stream.
    pub seq: u64,
    /// The encoded SSE frame (id, event, retry and data lines, blank line): write exactly these bytes.
    pub frame: Bytes,
    /// Whether the frame exceeds the per-event cap or the whole budget, so that the store cannot keep
    /// it (once it is no longer pinned): a replay that needs it is a [`MissReason::TooLarge`] miss.
    pub oversized: bool,
}

/// Why an append was refused. Nothing was stored and no id was used up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AppendError {
    /// The stream was closed with [`ReplayBuffer::close_stream`] (or the store's `close_stream`).
    Closed,
    /// The stream was never opened by this store, or has been forgotten (or has expired).
    UnknownStream,
    /// The event type cannot be written as an SSE field (it contains CR or LF).
    Frame(FrameError),
    /// The store could not be reached (only stores with a network behind them).
    Unavailable {
        /// How long to wait before trying again.
        retry_after: Duration,
    },
}

impl fmt::Display for AppendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppendError::Closed => f.write_str("stream is closed"),
            AppendError::UnknownStream => f.write_str("stream is unknown to this replay store"),
            AppendError::Frame(e) => write!(f, "event cannot be framed: {e}"),
            AppendError::Unavailable { retry_after } => write!(
                f,
                "replay store unavailable; retry after {} ms",
                retry_after.as_millis()
            ),
        }
    }
}

impl std::error::Error for AppendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AppendError::Frame(e) => Some(e),
            _ => None,
        }
    }
}

impl From<FrameError> for AppendError {
    #[cold]
    fn from(e: FrameError) -> Self {
        AppendError::Frame(e)
    }
}

/// The frames to re-send after a `Last-Event-ID`, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Replay<S = StreamId> {
    /// The stream the id belongs to.
    pub stream: S,
    /// The frames of every event after the id, as first written. May be empty when the id was the
    /// stream's last event.
    pub frames: Vec<Bytes>,
    /// Whether the stream is closed: no event will follow these frames.
    pub closed: bool,
}

/// Why a replay is impossible.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MissReason {
    /// The id is malformed, names a stream this store never opened, or an event never sent.
    Unknown,
    /// An event after the id (or the whole stream) was evicted to stay within the budget.
    Evicted,
    /// An event after the id was larger than the per-event cap or the budget, so it was never kept.
    TooLarge,
    /// The store could not be reached: the client should retry after [`Miss::retry_after`]
    /// (a `503` with `Retry-After` on the wire, never an empty `200`).
    Unavailable,
}

impl MissReason {
    /// A short lower-case name (`unknown`, `evicted`, `too_large`, `unavailable`).
    pub fn as_str(self) -> &'static str {
        match self {
            MissReason::Unknown => "unknown",
            MissReason::Evicted => "evicted",
            MissReason::TooLarge => "too_large",
            MissReason::Unavailable => "unavailable",
        }
    }
}

impl fmt::Display for MissReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A replay the store cannot serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Miss {
    /// Why.
    pub reason: MissReason,
    /// The id of the first event that cannot be replayed, when the stream is known.
    pub missing: Option<String>,
    /// How long the client should wait before it tries again (a `Retry-After` header).
    pub retry_after: Duration,
}

impl Miss {
    /// A miss for `reason`, naming the first event that cannot be replayed when it is known.
    #[cold]
    pub fn new(reason: MissReason, missing: Option<String>, retry_after: Duration) -> Self {
        Miss {
            reason,
            missing,
            retry_after,
        }
    }
}

impl fmt::Display for Miss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "replay unavailable ({})", self.reason)?;
        if let Some(id) = &self.missing {
            write!(f, ": event {id} is not held")?;
        }
        write!(f, "; retry after {} ms", self.retry_after.as_millis())
    }
}

impl std::error::Error for Miss {}
