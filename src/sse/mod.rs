//! Incremental, zero-copy Server-Sent Events decoder (WHATWG "interpreting an event stream").
//!
//! [`Decoder::feed`] queues chunks of any size and [`Decoder::next_event`] pulls dispatched events,
//! returning `None` when it needs more input: the result is the same whatever the chunking, each
//! byte is scanned once, and event data is a rope of [`bytes::Bytes`] slices of the chunks.
//! [`Decoder::finish`] ends a connection and reports the block still open (a [`PartialEvent`]),
//! which is never dispatched.
//!
//! # Memory
//!
//! For any input, the heap the decoder holds is at most a small constant times its limits: about
//! `max_block + 4 × max_event + 2 × max_field` bytes ([`DecoderConfig`]; at most 5 × `max_block` with
//! the defaults, where `max_event <= max_block`), plus the chunk being scanned and the chunks fed
//! and not yet scanned, which the caller controls (feed one chunk, pull until `None`). Exceeding a
//! limit is a typed [`DecodeError`] and the decoder resynchronises at the next blank line. The
//! bound holds because:
//!
//! - an open block is at most [`DecoderConfig::max_block`] wire bytes: every line counts, comments,
//!   unknown fields, field names and line ends included, whatever the decoder keeps of it;
//! - data pieces shorter than [`DecoderConfig::copy_below`] (and joins next to them) are copied into
//!   owned runs (at most `max_event` data bytes, in buffers grown by doubling), so tiny pieces
//!   never pin chunks nor pile up segments: each slice but an event's last holds at least
//!   `copy_below` bytes, so the rope has at most `3 × (max_event / copy_below + 1)` segments of
//!   32 bytes;
//! - a slice pins its chunk only when the chunk lies inside the block, or when the slice is at
//!   least as long as the part of the chunk before the block: pinned chunks total at most
//!   `max_block + max_event` bytes;
//! - `id`, `event` and `retry` values (at most [`DecoderConfig::max_field`] each) and the last event id
//!   are copied off a chunk when the decoder leaves it, so they pin nothing.
//!
//! The constant assumes `copy_below` of 64 or more (the default is 256); lower values trade memory
//! for fewer copies. `tests/sse_memory.rs` checks the bound with a counting allocator for hostile
//! inputs (millions of `data:x` lines, a `data:` flood, one data byte per comment-padded chunk,
//! huge comments and unknown fields, tiny chunks), and the `sse_memory` fuzz target for inputs
//! the fuzzer grows.
#![forbid(unsafe_code)]

#[cfg(feature = "codec")]
mod codec;
mod decoder;
mod event;
#[cfg(feature = "stream")]
mod stream;

#[cfg(feature = "codec")]
pub use codec::{Codec, CodecError};
#[cfg(feature = "__testing")]
pub(crate) use decoder::COPY_BELOW;
pub use decoder::{DecodeError, Decoder, DecoderConfig};
#[cfg(feature = "__testing")]
pub(crate) use event::JOIN;
pub(crate) use event::for_each_from;
pub use event::{Data, DataReader, Event, PartialEvent};
#[cfg(feature = "stream")]
pub use stream::{EventStream, StreamError};
