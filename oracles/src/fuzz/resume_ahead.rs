//! `resume_ahead`: a `ResumableStream` that judges and hashes data as it arrives (the gate ahead of
//! dispatch, `resume::StreamConfig::gate_ahead`) decides exactly as one that judges each message at
//! dispatch: the same outputs, in the same order, for any SSE input, any cut points, a connection
//! cut anywhere and a resume on the rest, and limit errors that drop a block the gate was reading.
//!
//! Header (see the module docs of `oracles`): byte 0 bits 0-1 pick the step of the gate ahead
//! ([`STEPS`]), bit 2 cuts the connection at the first cut point and resumes on the rest, bit 3
//! sets a small `max_event` (9000 bytes), bits 4-5 a repeat count for the `0xFF` expansion of
//! `sse_chunking` (so small inputs grow into megabyte events); then the cut points and the payload.
//! Cut points of an expanded payload are scaled over its whole length.

use std::time::Instant;

use bytes::Bytes;
use ssegate::resume::{EndCause, Output, ReconnectResponse, ResumableStream};
use ssegate::sse;

use super::sse_chunking::{REPEATS, expand};
use super::{pieces, split_header};

/// Steps of the gate ahead, in data bytes.
const STEPS: [usize; 4] = [1, 61, 4096, 1 << 16];

/// One output, short: a delivered message by its length, hash and shape (not its bytes).
fn summary(output: &Output) -> String {
    match output {
        Output::Deliver(d) => {
            let bytes = d.message.to_bytes();
            format!(
                "deliver id={:?} type={:?} len={} hash={:016x} rpc={:?}",
                d.event_id,
                d.event_type,
                bytes.len(),
                fnv(&bytes),
                d.rpc
            )
        }
        other => format!("{other:?}"),
    }
}

/// FNV-1a: enough to tell two deliveries apart, and independent of the crate's own hashing.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Drives `stream` over `pieces`, ending the connection after piece `end_after` (and resuming on
/// the rest when a reconnect is asked for); returns every output, summarised.
fn run(mut stream: ResumableStream, pieces: &[&[u8]], end_after: Option<usize>) -> Vec<String> {
    let mut now = Instant::now();
    let mut out = Vec::new();
    let drain = |s: &mut ResumableStream, out: &mut Vec<String>| {
        let mut reconnect = false;
        while let Some(o) = s.poll() {
            reconnect |= matches!(o, Output::Reconnect(_));
            out.push(summary(&o));
        }
        reconnect
    };
    for (k, piece) in pieces.iter().enumerate() {
        if !piece.is_empty() {
            stream.feed(Bytes::copy_from_slice(piece), now);
            drain(&mut stream, &mut out);
        }
        if end_after == Some(k) && stream.is_open() {
            stream.connection_ended(EndCause::Error, now);
            let mut reconnect = drain(&mut stream, &mut out);
            while !reconnect && let Some(t) = stream.poll_timeout() {
                now = now.max(t);
                stream.handle_timeout(now);
                reconnect = drain(&mut stream, &mut out);
            }
            if reconnect {
                let _ = stream.reconnect_response(&ReconnectResponse::event_stream(), now);
                drain(&mut stream, &mut out);
            }
        }
    }
    stream.connection_ended(EndCause::Eof, now);
    drain(&mut stream, &mut out);
    out
}

/// The `resume_ahead` oracle (see the module docs).
pub fn resume_ahead(data: &[u8]) {
    let (bits, cuts, payload) = split_header(data);
    let step = STEPS[usize::from(bits & 3)];
    let expanded = match usize::from(bits >> 4 & 3) {
        0 => None,
        x => expand(payload, REPEATS[x]),
    };
    let (payload, cuts): (&[u8], Vec<usize>) = match &expanded {
        None => (payload, cuts),
        Some(big) => {
            let scale =
                |c: usize| (c as u64 * big.len() as u64 / (payload.len() as u64 + 1)) as usize;
            (big, cuts.into_iter().map(scale).collect())
        }
    };
    let pieces = pieces(payload, &cuts);
    let end_after = (bits & 4 != 0 && pieces.len() > 1).then_some(0);
    let mut config = ResumableStream::config();
    if bits & 8 != 0 {
        config.decoder(sse::DecoderConfig::default().max_event(9000).clone());
    }
    config.max_resumes(3);
    let ahead = run(config.clone().gate_ahead(step).build(), &pieces, end_after);
    let at_dispatch = run(config.gate_ahead(usize::MAX).build(), &pieces, end_after);
    assert_eq!(
        ahead, at_dispatch,
        "gating ahead in steps of {step} changes the outputs"
    );
}
