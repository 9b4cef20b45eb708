//! Incremental, zero-copy Server-Sent Events decoder (WHATWG "interpreting an event stream").
//!
//! [`Decoder::feed`] queues chunks of any size and [`Decoder::next_event`] pulls dispatched events,
//! returning `None` when it needs more input: the result is the same whatever the chunking, each
//! byte is scanned once, and event data is a rope of [`bytes::Bytes`] slices of the chunks.
//! [`Decoder::finish`] ends a connection and reports the block still open (a [`PartialEvent`]),
//! which is never dispatched.
#![forbid(unsafe_code)]

#[cfg(feature = "codec")]
mod codec;
mod decoder;
mod event;
#[cfg(test)]
mod reference;
#[cfg(feature = "stream")]
mod stream;
#[cfg(test)]
mod tests;

#[cfg(feature = "codec")]
pub use codec::{Codec, CodecError};
#[cfg(feature = "testing")]
pub(crate) use decoder::COPY_BELOW;
pub use decoder::{Config, DecodeError, Decoder};
#[cfg(feature = "testing")]
pub(crate) use event::JOIN;
pub use event::{Data, Event, PartialEvent};
#[cfg(feature = "stream")]
pub use stream::{EventStream, StreamError};
