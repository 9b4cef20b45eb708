//! The server side of the resumption contract, as a trait.

use std::fmt;
use std::future::{Future, ready};
use std::time::Duration;

use super::{AppendError, Appended, Miss, Replay, ReplayBuffer, StreamId};

/// A store of sent SSE events for `Last-Event-ID` resumption: the server side of the contract.
///
/// - [`append`](ReplayStore::append) assigns the event its id (`<stream>-<seq>`, naming the stream,
///   unique in the store) and returns the frame to write;
/// - [`replay_after`](ReplayStore::replay_after) returns every event of the id's stream strictly after
///   it, in order, or a [`Miss`] saying why not ([`MissReason`](super::MissReason): unknown, evicted,
///   too large, unavailable) with a retry hint. Never a silent partial replay: either every later
///   event is returned, or none;
/// - [`forget_stream`](ReplayStore::forget_stream) drops a stream and what it holds.
///
/// Methods take `&mut self` and return futures, so an in-process store answers with ready futures and a
/// networked one (Redis) awaits its connection; a handle to a shared store is cheap to clone, one per
/// task. The in-memory [`ReplayBuffer`] implements it for one session.
pub trait ReplayStore {
    /// A handle to one stream of the store.
    type Stream: Clone + fmt::Debug + Send + Sync + 'static;

    /// Opens a new, empty stream.
    fn open_stream(&mut self) -> impl Future<Output = Result<Self::Stream, StoreError>> + Send;

    /// Appends an event (no `event:` field when `event` is `None`, a `retry:` field when `retry` is
    /// given) and returns its id and encoded frame.
    fn append(
        &mut self,
        stream: &Self::Stream,
        event: Option<&str>,
        data: &[u8],
        retry: Option<u64>,
    ) -> impl Future<Output = Result<Appended, AppendError>> + Send;

    /// Marks a stream finished: no more appends; what it holds stays replayable.
    fn close_stream(
        &mut self,
        stream: &Self::Stream,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Forgets a stream and everything it holds.
    fn forget_stream(
        &mut self,
        stream: &Self::Stream,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The frames of every event after `last_event_id` in its stream, or why they cannot all be given.
    fn replay_after(
        &mut self,
        last_event_id: &str,
    ) -> impl Future<Output = Result<Replay<Self::Stream>, Miss>> + Send;
}

/// A store operation other than append or replay failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// The store could not be reached (a networked store's connection is down).
    Unavailable {
        /// How long to wait before trying again.
        retry_after: Duration,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Unavailable { retry_after } => write!(
                f,
                "replay store unavailable; retry after {} ms",
                retry_after.as_millis()
            ),
        }
    }
}

impl std::error::Error for StoreError {}

impl ReplayStore for ReplayBuffer {
    type Stream = StreamId;

    fn open_stream(&mut self) -> impl Future<Output = Result<StreamId, StoreError>> + Send {
        ready(Ok(ReplayBuffer::open_stream(self)))
    }

    fn append(
        &mut self,
        stream: &StreamId,
        event: Option<&str>,
        data: &[u8],
        retry: Option<u64>,
    ) -> impl Future<Output = Result<Appended, AppendError>> + Send {
        ready(self.append_with_retry(*stream, event, data, retry))
    }

    fn close_stream(
        &mut self,
        stream: &StreamId,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        ReplayBuffer::close_stream(self, *stream);
        ready(Ok(()))
    }

    fn forget_stream(
        &mut self,
        stream: &StreamId,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        ReplayBuffer::forget_stream(self, *stream);
        ready(Ok(()))
    }

    fn replay_after(
        &mut self,
        last_event_id: &str,
    ) -> impl Future<Output = Result<Replay, Miss>> + Send {
        ready(ReplayBuffer::replay_after(self, last_event_id))
    }
}
