//! Replays captured SSE responses through the decoder and the guard, event by event.
//!
//! A capture is what `curl -N` saves of one response body; several connections of one stream (the
//! original response and its resumptions) are concatenated with a marker line between them:
//!
//! ```text
//! #--ssegate-reconnect status=200 content-type=text/event-stream retry-after=2
//! ```
//!
//! The marker must start a line; the single line feed just before it is the writer's and is not
//! part of the previous connection (so a connection cut mid-line is written as its bytes, `\n`,
//! then the marker). Every field after the marker word is optional: `status` defaults to 200 and
//! `content-type` to `text/event-stream`.
#![forbid(unsafe_code)]

use std::time::Duration;

use bytes::Bytes;

use crate::gate::{Gate, Verdict};
use crate::guard::{ConnectionEnd, Decision, Guard, ReconnectResponse, Resume, Skip, TornBoundary};
use crate::sse::{Decoder, Event};

/// The marker word that separates connections in a capture.
pub const MARKER: &[u8] = b"#--ssegate-reconnect";

/// One connection of a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    /// The reconnect response that opened it; `None` for the first connection.
    pub response: Option<ReconnectResponse>,
    /// The body bytes received.
    pub body: Bytes,
}

/// Splits a capture into its connections (zero-copy slices of `capture`).
pub fn split_capture(capture: &Bytes) -> Vec<Connection> {
    let mut out = Vec::new();
    let mut response = None;
    let mut start = 0;
    let mut at = 0;
    while let Some(found) = memchr::memmem::find(&capture[at..], MARKER) {
        let pos = at + found;
        if pos == 0 || capture[pos - 1] == b'\n' {
            let body_end = pos.saturating_sub(1).max(start);
            out.push(Connection {
                response: response.take(),
                body: capture.slice(start..body_end),
            });
            let line_end =
                memchr::memchr(b'\n', &capture[pos..]).map_or(capture.len(), |e| pos + e);
            response = Some(parse_marker(&capture[pos + MARKER.len()..line_end]));
            start = (line_end + 1).min(capture.len());
            at = start;
        } else {
            at = pos + MARKER.len();
        }
    }
    out.push(Connection {
        response,
        body: capture.slice(start..),
    });
    out
}

fn parse_marker(fields: &[u8]) -> ReconnectResponse {
    let text = String::from_utf8_lossy(fields);
    let mut response = ReconnectResponse {
        status: 200,
        retry_after: None,
        content_type: Some("text/event-stream".into()),
    };
    for field in text.split_ascii_whitespace() {
        let Some((key, value)) = field.split_once('=') else {
            continue;
        };
        match key {
            "status" => response.status = value.parse().unwrap_or(200),
            "retry-after" => response.retry_after = value.parse().ok().map(Duration::from_secs),
            "content-type" => {
                response.content_type = (!value.is_empty()).then(|| value.to_string())
            }
            _ => {}
        }
    }
    response
}

/// What happened at one step of a check.
// Steps are handed to the callback one at a time, by reference: boxing the big variant would only
// add an allocation per event.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Step {
    /// An event and the guard's decision about it.
    Event {
        /// The event.
        event: Event,
        /// The gate's verdict on its data (`None` for empty data).
        verdict: Option<Verdict>,
        /// The guard's decision.
        decision: Result<Decision, TornBoundary>,
    },
    /// A connection ended; the guard's answer.
    End(Result<Resume, TornBoundary>),
    /// A reconnect response; the guard's answer.
    Reconnect(ReconnectResponse, Result<(), TornBoundary>),
    /// The decoder dropped an event over a limit.
    DecodeError(crate::sse::DecodeError, TornBoundary),
}

/// Totals of a check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Connections in the capture.
    pub connections: usize,
    /// Events dispatched by the decoder.
    pub events: u64,
    /// Messages delivered by the guard.
    pub messages: u64,
    /// Bytes of delivered messages.
    pub bytes: u64,
    /// Events skipped (exact replays, duplicate responses, keep-alives).
    pub skipped: u64,
    /// Refusals.
    pub errors: u64,
}

/// Feeds every connection of a capture through a fresh decoder and `guard`, calling `on_step` for
/// each step, and returns the totals. Stops at the first refusal (the guard refuses from then on).
pub fn check(
    connections: &[Connection],
    guard: &mut Guard,
    mut on_step: impl FnMut(&Step),
) -> Summary {
    let mut decoder = Decoder::new();
    let mut gate = Gate::new();
    let mut summary = Summary {
        connections: connections.len(),
        ..Summary::default()
    };
    for connection in connections {
        if let Some(response) = &connection.response {
            let answer = guard.on_reconnect(response);
            let refused = answer.is_err();
            on_step(&Step::Reconnect(response.clone(), answer));
            if refused {
                summary.errors += 1;
                return summary;
            }
        }
        decoder.feed(connection.body.clone());
        while let Some(next) = decoder.next_event() {
            let event = match next {
                Ok(event) => event,
                Err(e) => {
                    let refusal = guard.on_decode_error(&e);
                    on_step(&Step::DecodeError(e, refusal));
                    summary.errors += 1;
                    return summary;
                }
            };
            summary.events += 1;
            let verdict = (!event.data.is_empty()).then(|| gate.check(&event.data));
            let decision =
                guard.on_event_with_verdict(event.clone(), verdict.unwrap_or(Verdict::Incomplete));
            match &decision {
                Ok(Decision::Deliver(d)) => {
                    summary.messages += 1;
                    summary.bytes += d.message.data().len() as u64;
                }
                Ok(Decision::Skip(_)) => summary.skipped += 1,
                Ok(Decision::Cursor(_)) => {}
                Err(_) => summary.errors += 1,
            }
            let refused = decision.is_err();
            on_step(&Step::Event {
                event,
                verdict,
                decision,
            });
            if refused {
                return summary;
            }
        }
        let end = guard.on_disconnect(ConnectionEnd::from_decoder(&mut decoder));
        let refused = end.is_err();
        on_step(&Step::End(end));
        if refused {
            summary.errors += 1;
            return summary;
        }
    }
    summary
}

/// A one-line description of a skip.
pub fn describe_skip(skip: &Skip) -> String {
    match skip {
        Skip::ExactReplay { id } => {
            format!("skip: exact replay of {:?}", String::from_utf8_lossy(id))
        }
        Skip::DuplicateResponse { rpc_id } => {
            format!("skip: duplicate response to request {rpc_id}")
        }
        Skip::KeepAlive => "skip: keep-alive".to_string(),
        Skip::ErrorFrame { .. } => "skip: event: error frame with no JSON message".to_string(),
    }
}
