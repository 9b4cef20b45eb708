//! [`tokio_util::codec::Decoder`] over the SSE [`Decoder`] (feature `codec`).
//!
//! Each call takes everything buffered in the `BytesMut` (`split` + `freeze`: no copy) and feeds it
//! to the decoder, so event data points into the read buffers. At end of input a block still open
//! is reported once as [`CodecError::PartialEvent`]; it is never dispatched.
//!
//! Errors end the connection. `tokio_util::codec::FramedRead` yields `None` right after any `Err`
//! from a codec (and would only call it again after reading more input), so the codec does not
//! pretend to go on: after a [`CodecError`] it yields nothing more for this connection, whatever
//! FramedRead does next. The events the decoder could have resynchronised to are not lost to the
//! session: the caller reconnects with the `Last-Event-ID` of [`Codec::decoder`], and
//! [`Codec::into_decoder`] hands over a decoder ready for the next connection.
#![forbid(unsafe_code)]

use std::fmt;

use bytes::BytesMut;

use super::{DecodeError, Decoder, Event, PartialEvent};

/// A `tokio_util` codec yielding SSE [`Event`]s; an error ends the connection (see the module
/// docs).
#[derive(Debug, Default)]
pub struct Codec {
    decoder: Decoder,
    /// An error was returned: the connection is over for this codec.
    ended: bool,
}

impl Codec {
    /// A codec over a decoder with the default limits.
    pub fn new() -> Self {
        Codec::default()
    }

    /// A codec over `decoder` (built from a [`super::DecoderConfig`] with other limits, or carried over
    /// from a previous connection to keep its last event id).
    pub fn with_decoder(decoder: Decoder) -> Self {
        Codec {
            decoder,
            ended: false,
        }
    }

    /// The underlying decoder: [`Decoder::last_event_id`], [`Decoder::retry`].
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// Whether an error has ended this connection: the codec yields nothing more.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The underlying decoder, ready for the next connection: this connection is finished
    /// ([`Decoder::finish`]: input still queued is dropped) and the last event id and retry are
    /// kept.
    pub fn into_decoder(mut self) -> Decoder {
        drop(self.decoder.finish());
        self.decoder
    }
}

/// What the codec reports besides events.
#[derive(Debug)]
#[non_exhaustive]
pub enum CodecError {
    /// A limit was exceeded; the connection ends (see the module docs).
    Decode(DecodeError),
    /// The input ended inside an event: its size and id, for the resumption logic.
    PartialEvent(PartialEvent),
    /// Reading the input failed.
    Io(std::io::Error),
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::Decode(e) => e.fmt(f),
            CodecError::PartialEvent(p) => write!(
                f,
                "SSE input ended inside an event ({} bytes received, {} data bytes, id {})",
                p.bytes,
                p.data_len,
                match &p.id {
                    Some(id) => format!("{:?}", String::from_utf8_lossy(id)),
                    None => "unknown".to_owned(),
                }
            ),
            CodecError::Io(e) => write!(f, "reading the SSE input: {e}"),
        }
    }
}

impl std::error::Error for CodecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CodecError::Decode(e) => Some(e),
            CodecError::Io(e) => Some(e),
            CodecError::PartialEvent(_) => None,
        }
    }
}

impl From<std::io::Error> for CodecError {
    fn from(e: std::io::Error) -> Self {
        CodecError::Io(e)
    }
}

impl From<DecodeError> for CodecError {
    fn from(e: DecodeError) -> Self {
        CodecError::Decode(e)
    }
}

impl tokio_util::codec::Decoder for Codec {
    type Item = Event;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Event>, CodecError> {
        if self.ended {
            // FramedRead polled again after the error: this connection yields nothing more.
            src.clear();
            return Ok(None);
        }
        if !src.is_empty() {
            self.decoder.feed(src.split().freeze());
        }
        match self.decoder.next_event() {
            Some(Ok(ev)) => Ok(Some(ev)),
            Some(Err(e)) => {
                self.ended = true;
                Err(CodecError::Decode(e))
            }
            None => Ok(None),
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Event>, CodecError> {
        if let Some(ev) = self.decode(src)? {
            return Ok(Some(ev));
        }
        if self.ended {
            return Ok(None);
        }
        match self.decoder.finish() {
            Some(partial) => {
                self.ended = true;
                Err(CodecError::PartialEvent(partial))
            }
            None => Ok(None),
        }
    }
}
