//! The host's side, a message transport ([`HostTransport`]): what the host sends arrives as
//! lines ([`Incoming`]), what the bridge writes goes out through [`Out`], one JSON-RPC message per
//! line.
//!
//! [`Stdio`] is the MCP stdio transport: stdin is read on a thread of its own into lines of at most
//! `max_line` bytes (a longer line is reported by its length and never held); stdout is written by a
//! thread of its own, so a host slow to read blocks no call. The tests' host is an in-memory duplex
//! (`Duplex`), through the same line reader and line writer.

use std::io::{BufWriter, Read, Write};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{Notify, mpsc};

/// A host transport: started once, it gives the relay the host's lines and a writer to the host.
pub(super) trait HostTransport {
    /// Starts moving messages; lines over `max_line` bytes are reported by their length.
    fn open(self, max_line: usize) -> HostLink;
}

/// A started host transport.
pub(super) struct HostLink {
    /// The host's lines; closed at the end of its input.
    pub(super) incoming: mpsc::Receiver<Incoming>,
    /// The writer to the host.
    pub(super) out: Out,
    /// Notified when the host can no longer be written to.
    pub(super) broken: Arc<Notify>,
}

/// The MCP stdio transport: newline-delimited JSON-RPC on stdin and stdout.
pub(super) struct Stdio;

impl HostTransport for Stdio {
    fn open(self, max_line: usize) -> HostLink {
        let broken = Arc::new(Notify::new());
        HostLink {
            incoming: read_stdin(max_line),
            out: Out::start(broken.clone()),
            broken,
        }
    }
}

/// What the host sent.
#[derive(Debug)]
pub(super) enum Incoming {
    /// One line, without its line break (and without a `\r` before it).
    Line(Vec<u8>),
    /// A line longer than the limit: its length; nothing of it was kept.
    TooLong(usize),
}

/// Starts the thread reading stdin; the channel closes at end of input (or a read error).
fn read_stdin(max_line: usize) -> mpsc::Receiver<Incoming> {
    let (tx, rx) = mpsc::channel(64);
    std::thread::Builder::new()
        .name("ssegate-stdin".into())
        .spawn(move || {
            let stdin = std::io::stdin();
            let mut lines = LineReader::new(max_line);
            let mut buf = vec![0u8; 64 << 10];
            let mut input = stdin.lock();
            loop {
                let n = match input.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        super::note(&format!("stdin: {e}"));
                        break;
                    }
                };
                let mut closed = false;
                lines.push(&buf[..n], |item| {
                    closed |= tx.blocking_send(item).is_err();
                });
                if closed {
                    return;
                }
            }
            // A last line without its line break is a line all the same.
            if let Some(item) = lines.finish() {
                let _ = tx.blocking_send(item);
            }
        })
        .expect("spawn the stdin thread");
    rx
}

/// Splits bytes into lines of at most `max` bytes; a longer line is dropped as it arrives.
pub(super) struct LineReader {
    max: usize,
    line: Vec<u8>,
    /// The length of the line being dropped, once it passed the limit.
    dropping: Option<usize>,
}

impl LineReader {
    pub(super) fn new(max: usize) -> LineReader {
        LineReader {
            max,
            line: Vec::new(),
            dropping: None,
        }
    }

    /// Feeds `bytes`; `emit` gets each line (or overlong line) they complete.
    pub(super) fn push(&mut self, mut bytes: &[u8], mut emit: impl FnMut(Incoming)) {
        while !bytes.is_empty() {
            let (piece, ends) = match memchr::memchr(b'\n', bytes) {
                Some(i) => (&bytes[..i], Some(i + 1)),
                None => (bytes, None),
            };
            match &mut self.dropping {
                Some(len) => *len += piece.len(),
                None if self.line.len() + piece.len() > self.max => {
                    self.dropping = Some(self.line.len() + piece.len());
                    self.line = Vec::new();
                }
                None => self.line.extend_from_slice(piece),
            }
            match ends {
                Some(next) => {
                    if let Some(item) = self.take() {
                        emit(item);
                    }
                    bytes = &bytes[next..];
                }
                None => break,
            }
        }
    }

    /// The line left at end of input, if any.
    pub(super) fn finish(&mut self) -> Option<Incoming> {
        self.take()
    }

    fn take(&mut self) -> Option<Incoming> {
        if let Some(len) = self.dropping.take() {
            return Some(Incoming::TooLong(len));
        }
        let mut line = std::mem::take(&mut self.line);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        // Blank lines carry no message.
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        Some(Incoming::Line(line))
    }
}

/// What the writer is asked to do.
enum Write_ {
    /// Write one message, as its parts, on one line.
    Line(Vec<Bytes>),
    /// Flush, then say so.
    Flush(std::sync::mpsc::Sender<()>),
}

/// The writer of stdout: each message is sent as its parts, written as one line.
#[derive(Clone)]
pub(super) struct Out {
    tx: mpsc::UnboundedSender<Write_>,
}

impl Out {
    /// Starts the thread writing stdout; `broken` is notified when stdout cannot be written.
    fn start(broken: Arc<Notify>) -> Out {
        let (tx, mut rx) = mpsc::unbounded_channel::<Write_>();
        std::thread::Builder::new()
            .name("ssegate-stdout".into())
            .spawn(move || {
                if let Err(e) = write_all(&mut rx) {
                    super::note(&format!("stdout: {e}; stopping"));
                    broken.notify_one();
                }
            })
            .expect("spawn the stdout thread");
        Out { tx }
    }

    /// Writes `message`'s parts as one line. A line break inside the parts is written as a space:
    /// in a JSON text it can only be whitespace between tokens (a string holds none raw).
    pub(super) fn send(&self, parts: Vec<Bytes>) {
        // Closed only when stdout is broken, and then the bridge is stopping.
        let _ = self.tx.send(Write_::Line(parts));
    }

    /// Waits until what was sent before is written and flushed, at most `deadline`.
    pub(super) async fn flush(&self, deadline: std::time::Duration) {
        let (tx, rx) = std::sync::mpsc::channel();
        if self.tx.send(Write_::Flush(tx)).is_err() {
            return;
        }
        let waited = tokio::task::spawn_blocking(move || rx.recv_timeout(deadline));
        let _ = waited.await;
    }

    /// Writes one JSON value as a line.
    pub(super) fn value(&self, value: &Value) {
        let text = serde_json::to_vec(value).expect("a Value serializes");
        self.send(vec![Bytes::from(text)]);
    }
}

/// Writes every message until the channel closes; flushes whenever no message is waiting.
fn write_all(rx: &mut mpsc::UnboundedReceiver<Write_>) -> std::io::Result<()> {
    // stdout's own handle is line-buffered; the bridge buffers (and flushes) itself.
    let mut out = BufWriter::with_capacity(64 << 10, crate::platform::stdout_file()?);
    let mut flushed = Vec::new();
    while let Some(first) = rx.blocking_recv() {
        let mut next = Some(first);
        while let Some(item) = next {
            match item {
                Write_::Line(parts) => write_line(&mut out, &parts)?,
                Write_::Flush(done) => flushed.push(done),
            }
            next = rx.try_recv().ok();
        }
        out.flush()?;
        for done in flushed.drain(..) {
            let _ = done.send(());
        }
    }
    out.flush()
}

/// One message's parts and a line break; line breaks inside the parts become spaces.
pub(super) fn write_line(out: &mut impl Write, parts: &[Bytes]) -> std::io::Result<()> {
    for part in parts {
        let mut rest = &part[..];
        while let Some(i) = memchr::memchr2(b'\n', b'\r', rest) {
            out.write_all(&rest[..i])?;
            out.write_all(b" ")?;
            rest = &rest[i + 1..];
        }
        out.write_all(rest)?;
    }
    out.write_all(b"\n")
}

/// The tests' host transport: lines in and out through channels, in this process.
#[cfg(test)]
pub(super) struct Duplex {
    input: mpsc::UnboundedReceiver<Vec<u8>>,
    output: mpsc::UnboundedSender<Vec<u8>>,
}

/// The host's end of a [`Duplex`].
#[cfg(test)]
pub(super) struct DuplexHost {
    /// Bytes the host sends (any chunking; closed: the end of input).
    pub(super) input: Option<mpsc::UnboundedSender<Vec<u8>>>,
    /// Each line written to the host, without its line break (dropped: the host stopped reading).
    pub(super) output: mpsc::UnboundedReceiver<Vec<u8>>,
}

#[cfg(test)]
impl Duplex {
    pub(super) fn new() -> (Duplex, DuplexHost) {
        let (input_tx, input) = mpsc::unbounded_channel();
        let (output, output_rx) = mpsc::unbounded_channel();
        let host = DuplexHost {
            input: Some(input_tx),
            output: output_rx,
        };
        (Duplex { input, output }, host)
    }
}

#[cfg(test)]
impl HostTransport for Duplex {
    fn open(self, max_line: usize) -> HostLink {
        let Duplex { mut input, output } = self;
        let (tx, incoming) = mpsc::channel(64);
        tokio::spawn(async move {
            let mut lines = LineReader::new(max_line);
            while let Some(bytes) = input.recv().await {
                let mut items = Vec::new();
                lines.push(&bytes, |item| items.push(item));
                for item in items {
                    if tx.send(item).await.is_err() {
                        return;
                    }
                }
            }
            if let Some(item) = lines.finish() {
                let _ = tx.send(item).await;
            }
        });
        let broken = Arc::new(Notify::new());
        let (out_tx, mut rx) = mpsc::unbounded_channel::<Write_>();
        let notify = broken.clone();
        tokio::spawn(async move {
            while let Some(item) = rx.recv().await {
                match item {
                    Write_::Line(parts) => {
                        let mut line = Vec::new();
                        write_line(&mut line, &parts).expect("a Vec takes every write");
                        line.pop();
                        if output.send(line).is_err() {
                            notify.notify_one();
                            return;
                        }
                    }
                    Write_::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
        HostLink {
            incoming,
            out: Out { tx: out_tx },
            broken,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(max: usize, input: &[u8], chunk: usize) -> Vec<Result<Vec<u8>, usize>> {
        let mut reader = LineReader::new(max);
        let mut out = Vec::new();
        for piece in input.chunks(chunk) {
            reader.push(piece, |item| out.push(item));
        }
        out.extend(reader.finish());
        out.into_iter()
            .map(|item| match item {
                Incoming::Line(l) => Ok(l),
                Incoming::TooLong(n) => Err(n),
            })
            .collect()
    }

    #[test]
    fn lines_are_split_however_the_input_is_chunked() {
        let input = b"{\"a\":1}\r\n\n  \n{\"b\":2}\n{\"c\":3}";
        for chunk in 1..input.len() + 1 {
            assert_eq!(
                lines(64, input, chunk),
                vec![
                    Ok(b"{\"a\":1}".to_vec()),
                    Ok(b"{\"b\":2}".to_vec()),
                    Ok(b"{\"c\":3}".to_vec())
                ],
                "chunks of {chunk}"
            );
        }
    }

    #[test]
    fn a_line_over_the_limit_is_reported_by_its_length_and_not_kept() {
        let input = b"12345\n123456789\n1234\n";
        for chunk in 1..input.len() + 1 {
            let mut reader = LineReader::new(5);
            let mut out = Vec::new();
            for piece in input.chunks(chunk) {
                reader.push(piece, |item| out.push(item));
                // Never more than the limit held, whatever arrives.
                assert!(reader.line.len() <= 5);
            }
            let got: Vec<_> = out
                .into_iter()
                .map(|item| match item {
                    Incoming::Line(l) => Ok(l),
                    Incoming::TooLong(n) => Err(n),
                })
                .collect();
            assert_eq!(
                got,
                vec![Ok(b"12345".to_vec()), Err(9), Ok(b"1234".to_vec())],
                "chunks of {chunk}"
            );
        }
    }

    #[test]
    fn line_breaks_inside_a_message_are_written_as_spaces() {
        let mut out = Vec::new();
        let parts = [
            Bytes::from_static(b"{\"a\":\r\n"),
            Bytes::from_static(b" [1,\n2]}"),
        ];
        write_line(&mut out, &parts).unwrap();
        assert_eq!(out, b"{\"a\":   [1, 2]}\n");
    }
}
