#![doc = include_str!("../README.md")]
#![deny(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

pub mod check;
pub mod gate;
pub mod guard;
mod hash;
pub mod message;
pub mod replay;
pub mod resume;
pub mod sse;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing;

#[cfg(feature = "client")]
pub mod client;
#[cfg(feature = "client")]
pub mod probe;
#[cfg(feature = "rmcp")]
#[path = "rmcp_client.rs"]
pub mod rmcp;
