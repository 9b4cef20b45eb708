//! SSE frame encoding for stored events.

use std::fmt;
use std::io::Write as _;

use bytes::{BufMut, Bytes, BytesMut};

/// Why [`encode_frame`] cannot write a field: the decoder would split it into two lines (CR, LF) or
/// ignore it (NUL in an id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FrameError {
    /// The id contains CR or LF at this byte offset.
    IdLineEnd {
        /// Byte offset in the id.
        offset: usize,
    },
    /// The id contains NUL at this byte offset (a decoder ignores such an id).
    IdNul {
        /// Byte offset in the id.
        offset: usize,
    },
    /// The event type contains CR or LF at this byte offset.
    EventLineEnd {
        /// Byte offset in the event type.
        offset: usize,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::IdLineEnd { offset } => {
                write!(f, "SSE id contains a line end at byte {offset}")
            }
            FrameError::IdNul { offset } => write!(f, "SSE id contains NUL at byte {offset}"),
            FrameError::EventLineEnd { offset } => {
                write!(f, "SSE event type contains a line end at byte {offset}")
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Checks that `event` can be written as an `event:` field.
pub(crate) fn check_event(event: &str) -> Result<(), FrameError> {
    match memchr::memchr2(b'\r', b'\n', event.as_bytes()) {
        Some(offset) => Err(FrameError::EventLineEnd { offset }),
        None => Ok(()),
    }
}

fn check_id(id: &str) -> Result<(), FrameError> {
    if let Some(offset) = memchr::memchr2(b'\r', b'\n', id.as_bytes()) {
        return Err(FrameError::IdLineEnd { offset });
    }
    if let Some(offset) = memchr::memchr(0, id.as_bytes()) {
        return Err(FrameError::IdNul { offset });
    }
    Ok(())
}

/// Encodes one SSE event frame: `id: ..\n`, `event: ..\n`, `retry: ..\n` (each when given), then one
/// `data:` line per line of `data`, then the blank line.
///
/// `data` is split at every CR, LF or CRLF, so that a decoder joins the lines back with LF (SSE itself
/// cannot carry a CR in data; compact JSON has no raw line ends at all). Empty data gives one empty
/// `data:` line, so the event is still dispatched (the priming event).
///
/// # Errors
///
/// [`FrameError`] if `id` or `event` contains CR or LF, or `id` contains NUL (a decoder would split or
/// ignore the field). Nothing is allocated then.
pub fn encode_frame(
    id: Option<&str>,
    event: Option<&str>,
    data: &[u8],
    retry: Option<u64>,
) -> Result<Bytes, FrameError> {
    if let Some(id) = id {
        check_id(id)?;
    }
    if let Some(event) = event {
        check_event(event)?;
    }
    Ok(encode_unchecked(id.map(str::as_bytes), event, data, retry))
}

/// [`encode_frame`] with the fields already checked (or, for `id`, made of digits, letters and `-`).
pub(crate) fn encode_unchecked(
    id: Option<&[u8]>,
    event: Option<&str>,
    data: &[u8],
    retry: Option<u64>,
) -> Bytes {
    let mut out = BytesMut::with_capacity(frame_capacity(id.map(<[u8]>::len), event, data, retry));
    if let Some(id) = id {
        put_field(&mut out, b"id", id);
    }
    put_tail(&mut out, event, data, retry);
    out.freeze()
}

/// An upper bound of the encoded frame's length, with an id of `id_len` bytes if any.
pub(crate) fn frame_capacity(
    id_len: Option<usize>,
    event: Option<&str>,
    data: &[u8],
    retry: Option<u64>,
) -> usize {
    let lines = 1 + memchr::memchr2_iter(b'\r', b'\n', data).count();
    let mut cap = 1 + data.len() + lines * "data: \n".len();
    if let Some(id_len) = id_len {
        cap += id_len + "id: \n".len();
    }
    cap + event.map_or(0, |s| s.len() + "event: \n".len()) + retry.map_or(0, |_| 28)
}

/// Everything after the `id:` line: `event:`, `retry:`, the `data:` lines and the blank line.
pub(crate) fn put_tail(out: &mut BytesMut, event: Option<&str>, data: &[u8], retry: Option<u64>) {
    if let Some(event) = event {
        put_field(out, b"event", event.as_bytes());
    }
    if let Some(retry) = retry {
        let mut digits = [0u8; 20];
        let mut cursor = &mut digits[..];
        // A u64 has at most 20 decimal digits: the write cannot fail.
        let _ = write!(cursor, "{retry}");
        let len = 20 - cursor.len();
        put_field(out, b"retry", &digits[..len]);
    }
    let mut rest = data;
    loop {
        match memchr::memchr2(b'\r', b'\n', rest) {
            Some(i) => {
                put_field(out, b"data", &rest[..i]);
                let crlf = rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n');
                rest = &rest[i + 1 + usize::from(crlf)..];
            }
            None => {
                put_field(out, b"data", rest);
                break;
            }
        }
    }
    out.put_u8(b'\n');
}

pub(crate) fn put_field(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    out.put_slice(name);
    if value.is_empty() {
        out.put_u8(b':');
    } else {
        out.put_slice(b": ");
        out.put_slice(value);
    }
    out.put_u8(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(id: Option<&str>, event: Option<&str>, data: &[u8], retry: Option<u64>) -> Bytes {
        encode_frame(id, event, data, retry).expect("valid fields")
    }

    #[test]
    fn encodes_fields_and_splits_lines() {
        assert_eq!(
            &enc(Some("1-0"), None, b"", Some(500))[..],
            b"id: 1-0\nretry: 500\ndata:\n\n"
        );
        assert_eq!(
            &enc(None, None, b"", Some(u64::MAX))[..],
            b"retry: 18446744073709551615\ndata:\n\n"
        );
        assert_eq!(
            &enc(None, Some("message"), b"{}", None)[..],
            b"event: message\ndata: {}\n\n"
        );
        assert_eq!(
            &enc(None, None, b"a\nb\r\nc\rd\n", None)[..],
            b"data: a\ndata: b\ndata: c\ndata: d\ndata:\n\n"
        );
        // A leading space in a line survives: the decoder strips exactly one.
        assert_eq!(&enc(None, None, b" x", None)[..], b"data:  x\n\n");
        // CR at the very end, and a lone CRLF.
        assert_eq!(&enc(None, None, b"a\r", None)[..], b"data: a\ndata:\n\n");
        assert_eq!(&enc(None, None, b"\r\n", None)[..], b"data:\ndata:\n\n");
    }

    #[test]
    fn capacity_is_an_upper_bound() {
        for (id, event, data, retry) in [
            (Some("1-0"), None, &b""[..], Some(u64::MAX)),
            (None, Some("e"), &b"\r\n\r\n\n\r"[..], None),
            (Some("x"), Some(""), &b"abc"[..], Some(0)),
        ] {
            let f = enc(id, event, data, retry);
            assert!(f.len() <= frame_capacity(id.map(str::len), event, data, retry));
        }
    }

    #[test]
    fn line_ends_and_nul_in_fields_are_typed_errors() {
        assert_eq!(
            encode_frame(Some("1\n2"), None, b"", None),
            Err(FrameError::IdLineEnd { offset: 1 })
        );
        assert_eq!(
            encode_frame(Some("12\r"), None, b"", None),
            Err(FrameError::IdLineEnd { offset: 2 })
        );
        assert_eq!(
            encode_frame(Some("\0"), None, b"", None),
            Err(FrameError::IdNul { offset: 0 })
        );
        assert_eq!(
            encode_frame(None, Some("a\nb"), b"", None),
            Err(FrameError::EventLineEnd { offset: 1 })
        );
        assert!(
            FrameError::IdNul { offset: 3 }
                .to_string()
                .contains("byte 3")
        );
    }
}
