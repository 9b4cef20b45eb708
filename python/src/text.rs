//! Small text helpers for attributes and reprs.

use ssegate::sse::Data;

/// Bytes as text, invalid UTF-8 replaced (WHATWG decodes an event stream as UTF-8 this way).
pub(crate) fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Bytes as a Python `bytes` literal.
pub(crate) fn bytes_repr(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 3);
    out.push_str("b'");
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\'' => out.push_str("\\'"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('\'');
    out
}

/// Optional bytes as a Python literal.
pub(crate) fn opt_bytes_repr(bytes: Option<&[u8]>) -> String {
    bytes.map_or_else(|| "None".to_owned(), bytes_repr)
}

/// The first bytes of some data as a Python literal, and its length when it is longer.
pub(crate) fn preview(data: &Data) -> String {
    const SHOW: usize = 48;
    let mut head = Vec::with_capacity(SHOW.min(data.len()));
    for chunk in data.chunks() {
        let room = SHOW - head.len();
        head.extend_from_slice(&chunk[..room.min(chunk.len())]);
        if head.len() == SHOW {
            break;
        }
    }
    if data.len() > SHOW {
        format!("{}... ({} bytes)", bytes_repr(&head), data.len())
    } else {
        bytes_repr(&head)
    }
}

/// A `str` as Python's `repr` writes it (single quotes; control characters escaped).
pub(crate) fn str_repr(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\x7f' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// An optional `str` as Python's `repr` writes it.
pub(crate) fn opt_str_repr(s: Option<&str>) -> String {
    s.map_or_else(|| "None".to_owned(), str_repr)
}
