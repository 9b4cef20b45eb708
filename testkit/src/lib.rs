//! Loopback MCP Streamable HTTP servers for testing MCP clients and servers over real TCP: everything
//! needed to reproduce the torn-resume failure on loopback, and to show ssegate's guard preventing
//! it.
//!
//! - [`auth`]: MCP authorization on loopback: an OAuth 2.1 authorization server
//!   ([`auth::AuthServer`]), an OAuth-protected MCP endpoint in front of the [`server`]
//!   ([`auth::ProtectedServer`]), and a headless browser ([`auth::follow`]).
//! - [`server`]: a minimal MCP Streamable HTTP server with a real [`ssegate::replay::ReplayBuffer`]
//!   per session and a switchable resume-miss behaviour ([`server::ServerMode`]).
//! - [`proxy`]: a fault-injecting TCP proxy that resets chosen responses at chosen byte offsets.
//! - [`hostile`]: a deliberately misbehaving MCP server on raw TCP, one [`hostile::Misbehaviour`]
//!   per instance (endless bodies, trickles, malformed and huge heads, foreign resumes, ...).
//! - [`legacy`]: a minimal MCP server on the 2024-11-05 HTTP+SSE transport, with the kit's tools
//!   and that transport's faults (a stream cut mid-event, a second response, a foreign endpoint).
//! - [`tls`]: a TLS front with a generated self-signed certificate, and a `CONNECT` proxy.
//! - [`interop`]: the official MCP SDKs' servers of the repository's `interop/`, started as child
//!   processes on loopback (skipped loudly, or failed under `CI`, when not installed).
//! - [`demo`]: the harness behind `ssegate demo`, with the naive appending client
//!   ([`demo::NaiveClient`]) and the guarded [`ssegate::client::Client`].
//! - [`rng`]: SplitMix64, the seeded generator behind every seed the kit and the command take.
//!
//! The proxy, the hostile server and the [`auth`] servers bind `127.0.0.1`, the MCP server the address it is given; all
//! run on the current tokio runtime. The library crate `ssegate` does not depend on this crate; its command
//! (`ssegate-cli`) and its transport tests do.
#![deny(missing_docs, missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod auth;
pub mod demo;
pub mod hostile;
mod http1;
pub use http1::WireError;
pub mod interop;
pub mod legacy;
pub mod proxy;
/// SplitMix64, the seeded generator behind every seed the kit and the command take: the
/// [`ssegate-rng`](ssegate_rng) crate, re-exported.
pub use ssegate_rng as rng;
pub mod server;
pub mod tls;
