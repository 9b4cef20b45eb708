//! Zero-copy SSE decoding, a JSON completeness gate and a resumption guard for MCP Streamable HTTP
//! clients.
//!
//! An MCP server streams a tool result as one Server-Sent Event, often megabytes long. When the
//! connection is cut inside it, the client resumes with `GET` + `Last-Event-ID`, and the server's
//! `200 OK` may continue the stream, replay the interrupted event whole, re-send an event already
//! seen, restart the stream under new ids, or send nothing. A client that appends what comes back
//! to its half-received event can hand the application a corrupt message that still parses.
//! ssegate never appends a resumed stream onto a partial event, never delivers a message that is
//! not exactly one complete JSON value, and refuses what it cannot prove with a typed error that
//! says whether the session must be renegotiated. Every such decision lives in one sans-IO state
//! machine, [`resume::ResumableStream`], so it is the same in every HTTP stack.
//!
//! # Example
//!
//! The driver tells the stream what happened (a chunk arrived, the connection ended, the reconnect
//! got an answer, a deadline passed) and drains [`poll`](resume::ResumableStream::poll). It sends
//! the reconnect the stream asks for, and when there is nothing to do it waits until
//! [`poll_timeout`](resume::ResumableStream::poll_timeout). Here the first connection is cut inside
//! the result, and the resume replays the interrupted event whole:
//!
//! ```
//! use std::time::Instant;
//! use bytes::Bytes;
//! use ssegate::message::RpcId;
//! use ssegate::resume::{Answer, EndCause, Output, ReconnectResponse, ResumableStream};
//!
//! // Two connections of one response stream, as an HTTP stack would deliver their bodies.
//! let mut connections = vec![
//!     Bytes::from_static(b"id: 1\ndata:\n\nid: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"resu"),
//!     Bytes::from_static(b"id: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"),
//! ]
//! .into_iter();
//!
//! let mut stream = ResumableStream::new();
//! stream.expect_response(RpcId::Number(7)); // the JSON-RPC id of the POST
//! let mut now = Instant::now();
//! stream.feed(connections.next().unwrap(), now);
//! stream.connection_ended(EndCause::Error, now); // the connection was reset
//! let mut delivered = Vec::new();
//! loop {
//!     match stream.poll() {
//!         Some(Output::Deliver(d)) => delivered.push(d.message.to_bytes()),
//!         Some(Output::Reconnect(r)) => {
//!             // Send `GET` with `Last-Event-ID: r.last_event_id` (raw bytes), report the answer.
//!             assert_eq!(r.last_event_id.as_deref(), Some(&b"1"[..]));
//!             let answer = stream.reconnect_response(&ReconnectResponse::event_stream(), now);
//!             assert_eq!(answer, Answer::Read); // a 200 event stream: read its body
//!             stream.feed(connections.next().unwrap(), now);
//!             stream.connection_ended(EndCause::Eof, now);
//!         }
//!         Some(Output::Finished) => break,
//!         Some(Output::Failed(failure)) => panic!("refused: {failure}"), // typed
//!         Some(_) => {} // skips, cursor moves, disconnects: nothing to do
//!         None => {
//!             // Nothing until a deadline (the reconnect delay here): wait for it.
//!             now = stream.poll_timeout().expect("a deadline");
//!             stream.handle_timeout(now);
//!         }
//!     }
//! }
//! assert_eq!(delivered, [Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}")]);
//! ```
//!
//! The drivers that ship are such loops: `resume::stream::GuardedStream` (feature
//! `guarded-stream`) over any byte stream plus a reconnect function, the MCP client of `client`
//! (feature `client`), the rmcp drop-in of `rmcp` (feature `rmcp`), and the `ssegate` command's
//! `check` and `probe`. With the `client` feature, a guarded tool call is:
//!
//! ```no_run
//! # #[cfg(feature = "client")]
//! # async fn run() -> Result<(), ssegate::client::ClientError> {
//! use serde_json::json;
//! use ssegate::client::{Client, ClientConfig, ClientError, Retry};
//!
//! let client = Client::connect("https://mcp.example.com/mcp", ClientConfig::default()).await?;
//! // Re-issued on a new session only if the tool is known to be safe to run twice.
//! match client.call_tool("search", json!({"q": "sse"}), Retry::IfSafe).await {
//!     Ok(r) => println!("{} bytes, {} resumes", r.message.len(), r.outcome.resumes),
//!     // The stream was lost and nothing was re-issued: the server may have run the tool.
//!     Err(ClientError::OutcomeUnknown { failure, .. }) => eprintln!("outcome unknown: {failure}"),
//!     Err(other) => return Err(other),
//! }
//! client.close().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Modules
//!
//! - [`sse`]: the incremental SSE decoder, exact to the WHATWG rules under any chunking; event
//!   data is a rope of [`bytes::Bytes`] slices of the input chunks.
//! - [`gate`]: the JSON completeness gate: *incomplete*, *complete*, *trailing* or *invalid*, in
//!   one pass however the data is chunked (AVX-512BW, AVX2, NEON and portable kernels).
//! - [`message`]: a complete JSON-RPC message: a cheap peek at its kind, id and method, and a
//!   `simd-json` parse on demand.
//! - [`resume`]: the engine: decoder, gate and the resumption guard wired for one stream, with
//!   every timing rule, no IO and no clock; each refusal a typed [`resume::Refusal`]. Its
//!   documentation holds the guard's decision table.
//! - [`replay`]: the server side: a replay store that answers a miss explicitly, in memory
//!   ([`replay::ReplayBuffer`]) or in Redis (feature `redis`).
//! - `client` (feature `client`): the guarded MCP Streamable HTTP client.
//! - `rmcp` (feature `rmcp`): `GuardedHttpClient`, rmcp's `StreamableHttpClient` on the guarded
//!   client.
//!
//! # Features
//!
//! No feature is on by default: the state machines above need no async runtime and no HTTP stack.
//!
//! - `codec`: `sse::Codec`, a `tokio_util::codec::Decoder`.
//! - `stream`: `sse::EventStream`, a `futures_core::Stream` of events over a stream of `Bytes`.
//! - `http`: `ReconnectResponse::from_parts` and `from_headers` for `http`'s response types.
//! - `guarded-stream`: `resume::stream::GuardedStream`, a guarded `Stream` of messages (tokio's
//!   timer).
//! - `client`: the MCP client (reqwest with rustls, tokio).
//! - `redis`: `replay::RedisStore`, a replay store shared by several server instances.
//! - `rmcp-server`: rmcp's `EventStore` on the Redis store.
//! - `rmcp`: the rmcp client drop-in (implies `client`).
//!
//! # Foreign types in the public API
//!
//! Always: [`bytes::Bytes`] (event data, ids, chunks), `simd_json` (`Message::parse_value` hands
//! back a `simd_json::BorrowedValue`; `simd_json::Error` is the source of `MessageError::Json`) and
//! `serde` (`Message::deserialize` into any `serde::de::DeserializeOwned`). Behind features, and
//! only there: `http` (`http::response::Parts`), `client` (`reqwest::Error` as the source of
//! `ClientError::Http` and `ClientError::InvalidResponse`, `reqwest::Response` from
//! `Client::post_raw` and `Client::get_raw`, `reqwest::header` names and values in
//! `ClientConfig::header`, `serde_json::Value` for call parameters and results,
//! `futures_core::Stream` from `Client::listen`), `codec` (`tokio_util::codec::Decoder`), `stream`
//! and `guarded-stream` (`futures_core::Stream`), `redis` (`redis::aio::ConnectionLike`, the
//! connection `RedisStore` is generic over, and its default `redis::aio::ConnectionManager`),
//! `rmcp-server` and `rmcp` (rmcp's traits and types; for `rmcp`, also sse-stream 0.2's `Sse` and
//! its error, which rmcp's client trait speaks, and `reqwest::Error` in `rmcp::Error::Http`). A new
//! release of one of these crates with a breaking change is a
//! breaking change of the feature that exposes it.
//!
//! The repository's README and its `docs` folder hold the design record, the full table of limits
//! and their defaults, the performance figures with the commands that measure them, the demo, and
//! the guide to replay stores for servers.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

mod arch;
pub mod contract;
pub mod gate;
// The resumption guard is the engine's lower layer, driven only by `resume`; the types a user of
// `ResumableStream` names are re-exported there. The `__testing` feature opens it to the oracles
// and the decision-table tests.
#[cfg(feature = "__testing")]
#[doc(hidden)]
pub mod guard;
#[cfg(not(feature = "__testing"))]
#[allow(unreachable_pub)]
mod guard;
mod hash;
#[cfg(feature = "__testing")]
#[doc(hidden)]
pub mod hooks;
pub mod inspect;
pub mod message;
pub mod replay;
pub mod resume;
pub mod sse;

#[cfg(feature = "client")]
pub mod client;

// The types a user names first.
#[cfg(feature = "client")]
pub use client::{Client, ClientConfig, ClientError};
pub use gate::{Gate, GateConfig, Verdict};
pub use message::{Message, RpcId};
pub use resume::{Failure, Output, Refusal, RefusalKind, ResumableStream, StreamConfig};
pub use sse::{Decoder, DecoderConfig, Event};
#[cfg(feature = "rmcp")]
pub mod rmcp;
