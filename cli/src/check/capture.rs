//! Replays captured SSE responses through a [`ResumableStream`], event by event: the offline
//! driver behind `ssegate check`, and the capture format it reads.
//!
//! A capture is either what `curl -N` saves of one response body (one connection), or several
//! connections of one stream (the response and its resumptions) in a length-framed format that no
//! server output can imitate: a first line `#ssegate-capture v2`, then for each connection a header
//! line and exactly `bytes` body bytes, and one line feed:
//!
//! ```text
//! #ssegate-capture v2
//! #connection bytes=52
//! id: 1
//! data: {"jsonrpc":"2.0","id":1,"result":{"te
//! #connection bytes=45 status=200 content-type=text/event-stream retry-after=2
//! <45 bytes of the resumed connection>
//! ```
//!
//! Every header field but `bytes` is optional: `status` defaults to 200 and `content-type` to
//! `text/event-stream`; on the first connection they are ignored (it is the original response).
#![forbid(unsafe_code)]

use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;

use ssegate::inspect::{self, EventInfo};
use ssegate::message::RpcId;
use ssegate::resume::{self, Answer, Output, ReconnectResponse, ResumableStream};

/// The first line of a multi-connection capture.
pub(crate) const HEADER: &[u8] = b"#ssegate-capture v2";
/// The word that starts each connection's header line.
pub(crate) const CONNECTION: &[u8] = b"#connection";

/// One connection of a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Connection {
    /// The reconnect response that opened it; `None` for the first connection.
    pub(crate) response: Option<ReconnectResponse>,
    /// The body bytes received.
    pub(crate) body: Bytes,
}

impl Connection {
    /// A connection: the original response (`response` `None`) or a resumption.
    pub(crate) fn new(response: Option<ReconnectResponse>, body: Bytes) -> Connection {
        Connection { response, body }
    }
}

/// Why a capture could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CaptureError {
    /// A connection header line is not `#connection bytes=N ...`.
    BadHeader {
        /// Byte offset of the line in the capture.
        offset: usize,
    },
    /// A connection announces more body bytes than the capture holds.
    Truncated {
        /// Byte offset of the connection's body.
        offset: usize,
        /// Bytes announced.
        announced: usize,
        /// Bytes left.
        available: usize,
    },
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaptureError::BadHeader { offset } => write!(
                f,
                "capture: expected `#connection bytes=N ...` at byte {offset}"
            ),
            CaptureError::Truncated {
                offset,
                announced,
                available,
            } => write!(
                f,
                "capture: the connection at byte {offset} announces {announced} bytes, {available} remain"
            ),
        }
    }
}

impl std::error::Error for CaptureError {}

/// Splits a capture into its connections (zero-copy slices of `capture`). A capture that does not
/// start with [`HEADER`] is one connection, whatever it contains.
pub(crate) fn split_capture(capture: &Bytes) -> Result<Vec<Connection>, CaptureError> {
    let Some(rest) = capture.strip_prefix(HEADER) else {
        return Ok(vec![Connection::new(None, capture.clone())]);
    };
    let mut at = capture.len() - rest.len();
    at += usize::from(capture.get(at) == Some(&b'\n'));
    let mut out = Vec::new();
    while at < capture.len() {
        let line_end = memchr::memchr(b'\n', &capture[at..]).map_or(capture.len(), |e| at + e);
        let line = &capture[at..line_end];
        let fields = line
            .strip_prefix(CONNECTION)
            .ok_or(CaptureError::BadHeader { offset: at })?;
        let (bytes, response) =
            parse_header(fields).ok_or(CaptureError::BadHeader { offset: at })?;
        let start = (line_end + 1).min(capture.len());
        let available = capture.len() - start;
        if bytes > available {
            return Err(CaptureError::Truncated {
                offset: start,
                announced: bytes,
                available,
            });
        }
        let response = (!out.is_empty()).then_some(response);
        out.push(Connection::new(
            response,
            capture.slice(start..start + bytes),
        ));
        at = start + bytes;
        at += usize::from(capture.get(at) == Some(&b'\n'));
    }
    Ok(out)
}

fn parse_header(fields: &[u8]) -> Option<(usize, ReconnectResponse)> {
    let text = std::str::from_utf8(fields).ok()?;
    let mut bytes = None;
    let mut response = ReconnectResponse::event_stream();
    for field in text.split_ascii_whitespace() {
        let (key, value) = field.split_once('=')?;
        match key {
            "bytes" => bytes = Some(value.parse().ok()?),
            "status" => response.status = value.parse().ok()?,
            "retry-after" => {
                response.retry_after = Some(Duration::from_secs(value.parse().ok()?));
            }
            "content-type" => {
                response.content_type = (!value.is_empty()).then(|| value.to_string());
            }
            _ => return None,
        }
    }
    Some((bytes?, response))
}

/// What happened at one step of a check.
#[derive(Debug)]
pub(crate) enum Step<'a> {
    /// The stream's output, with the event it decided on (when the output is about an event).
    Output {
        /// The output.
        output: &'a Output,
        /// The event behind it, if any.
        event: Option<&'a EventInfo>,
    },
    /// A reconnect response and what the stream made of it (a refusal follows as an output).
    Reconnect {
        /// The response.
        response: &'a ReconnectResponse,
        /// Read the body, or drop it.
        answer: Answer,
    },
}

/// Totals of a check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Summary {
    /// Connections in the capture.
    pub(crate) connections: usize,
    /// Events dispatched by the decoder.
    pub(crate) events: u64,
    /// Messages delivered.
    pub(crate) messages: u64,
    /// Bytes of delivered messages.
    pub(crate) bytes: u64,
    /// Events skipped (exact replays, duplicate responses, keep-alives).
    pub(crate) skipped: u64,
    /// Refusals (0 or 1: the stream stops at the first).
    pub(crate) errors: u64,
    /// Expected responses that never arrived.
    pub(crate) unanswered: Vec<RpcId>,
}

/// Feeds every connection of a capture through a [`ResumableStream`] built from `config`, with
/// `expect` as the requests whose responses the stream must deliver, calling `on_step` for each
/// step. Time is synthetic: each scheduled delay passes at once.
pub(crate) fn check(
    connections: &[Connection],
    config: &resume::StreamConfig,
    expect: &[RpcId],
    on_step: impl FnMut(Step<'_>),
) -> Summary {
    let mut stream = config.build();
    for id in expect {
        stream.expect_response(id.clone());
    }
    run(connections, &mut stream, on_step)
}

fn run(
    connections: &[Connection],
    stream: &mut ResumableStream,
    mut on_step: impl FnMut(Step<'_>),
) -> Summary {
    // Later connections are replayed even when nothing is outstanding.
    stream.keep_open(true);
    inspect::observe_events(stream, true);
    let mut summary = Summary {
        connections: connections.len(),
        ..Summary::default()
    };
    let mut now = Instant::now();
    let mut rest = connections.iter();
    if let Some(first) = rest.next() {
        stream.feed(first.body.clone(), now);
        stream.connection_ended(resume::EndCause::Eof, now);
    }
    loop {
        let Some(output) = stream.poll() else {
            match stream.poll_timeout() {
                Some(at) => {
                    now = now.max(at);
                    stream.handle_timeout(now);
                    continue;
                }
                None => break,
            }
        };
        match &output {
            Output::Deliver(d) => {
                summary.messages += 1;
                summary.bytes += d.message.len() as u64;
            }
            Output::Skip(_) => summary.skipped += 1,
            Output::Failed(_) => summary.errors += 1,
            _ => {}
        }
        let about_event = matches!(
            output,
            Output::Deliver(_) | Output::Skip(_) | Output::Cursor(_) | Output::Failed(_)
        );
        let event = inspect::last_event(stream).filter(|_| about_event);
        on_step(Step::Output {
            output: &output,
            event,
        });
        if let Output::Reconnect(_) = output {
            let Some(next) = rest.next() else { break };
            let response = next
                .response
                .clone()
                .unwrap_or_else(ReconnectResponse::event_stream);
            let answer = stream.reconnect_response(&response, now);
            on_step(Step::Reconnect {
                response: &response,
                answer,
            });
            if answer == Answer::Read {
                stream.feed(next.body.clone(), now);
                stream.connection_ended(resume::EndCause::Eof, now);
            }
        }
    }
    summary.events = stream.stats().events;
    summary.unanswered = stream.outstanding();
    summary
}
