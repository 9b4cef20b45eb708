//! rmcp 3.x's `EventStore` on the Redis store (feature `rmcp-server`).
//!
//! rmcp's Streamable HTTP server stores every SSE event it sends through
//! [`EventStore::store_event`] and answers a `GET` with `Last-Event-ID` from
//! [`EventStore::replay_events_after`]. With a [`RedisStore`] behind it, every instance behind a load
//! balancer shares the events: an rmcp stream id maps to one Redis stream (its name is a 128-bit hash
//! of the rmcp id, so every instance finds the same one without coordination), the event ids are the
//! store's `<name>-<seq>` (globally unique, naming the stream), and a resume served by any instance
//! replays the events after the id, with their original ids.
//!
//! Errors, and what a client sees: a replay the store cannot serve (evicted, too large, unknown, or
//! Redis unavailable) is an `Err` — never a partial or silently empty replay from the store — but
//! rmcp 3.11 turns any `Err` of `replay_events_after` into an empty `200` that closes at once
//! (`tower.rs`: "Return 200 with an immediately-closed empty stream"), so the client sees an empty
//! resume, which ssegate's guard refuses as `ReplayMissed` while a response is outstanding. A failed
//! `store_event` fails rmcp's send of that event (the client's stream ends without it).

use futures_util::stream;
use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::store::{
    EventId, EventStore, EventStoreError, EventStream,
};
use std::time::Duration;

use super::{RedisStore, RedisStream};
use crate::sse::Decoder;

/// The namespace hashed with rmcp's stream ids, so they never collide with other keys' names.
const NAMESPACE: &str = "ssegate-rmcp-stream:";

/// rmcp 3.x's `EventStore` on the Redis store (feature `rmcp-server`).
///
/// rmcp's Streamable HTTP server stores every SSE event it sends through
/// [`EventStore::store_event`] and answers a `GET` with `Last-Event-ID` from
/// [`EventStore::replay_events_after`]. With a [`RedisStore`] behind it, every instance behind a load
/// balancer shares the events: an rmcp stream id maps to one Redis stream (its name is a 128-bit hash
/// of the rmcp id, so every instance finds the same one without coordination), the event ids are the
/// store's `<name>-<seq>` (globally unique, naming the stream), and a resume served by any instance
/// replays the events after the id, with their original ids.
///
/// Errors, and what a client sees: a replay the store cannot serve (evicted, too large, unknown, or
/// Redis unavailable) is an `Err` — never a partial or silently empty replay from the store — but
/// rmcp 3.11 turns any `Err` of `replay_events_after` into an empty `200` that closes at once
/// (`tower.rs`: "Return 200 with an immediately-closed empty stream"), so the client sees an empty
/// resume, which ssegate's guard refuses as `ReplayMissed` while a response is outstanding. A failed
/// `store_event` fails rmcp's send of that event (the client's stream ends without it).
#[async_trait::async_trait]
impl EventStore for RedisStore {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<EventId, EventStoreError> {
        let stream = RedisStream::for_key(&format!("{NAMESPACE}{stream_id}"));
        let data = match &event.message {
            Some(message) => serde_json::to_vec(&**message)?,
            None => Vec::new(),
        };
        let retry = event
            .retry
            .map(|r| u64::try_from(r.as_millis()).unwrap_or(u64::MAX));
        let appended = self
            .clone()
            .append_opening(&stream, None, &data, retry, true)
            .await?;
        Ok(appended.id)
    }

    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        let replay = self.clone().replay_inner(last_event_id).await?;
        let mut messages = Vec::with_capacity(replay.frames.len());
        for frame in replay.frames {
            let mut decoder = Decoder::new();
            decoder.feed(frame);
            let event = decoder
                .next_event()
                .ok_or(FrameNotAnEvent)?
                .map_err(|_| FrameNotAnEvent)?;
            let mut out = ServerSseMessage::default();
            out.event_id = Some(String::from_utf8(event.last_event_id.to_vec())?);
            out.retry = event.retry.map(Duration::from_millis);
            if !event.data.is_empty() {
                let message: ServerJsonRpcMessage =
                    serde_json::from_slice(&event.data.contiguous())?;
                out.message = Some(message.into());
            }
            messages.push(out);
        }
        Ok(Box::pin(stream::iter(messages)))
    }
}

/// A stored frame did not decode back to one SSE event (the store was written by something else).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FrameNotAnEvent;

impl std::fmt::Display for FrameNotAnEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a stored frame is not one SSE event")
    }
}

impl std::error::Error for FrameNotAnEvent {}
