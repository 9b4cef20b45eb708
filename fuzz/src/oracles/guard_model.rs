//! `guard_model`: an `arbitrary` scenario — one `tools/call` response stream (progress
//! notifications, then the result), a cut at any byte, up to four reconnects each answered by one
//! server behaviour from DESIGN.md's table (correct, re-send, duplicates, restart, empty `200`,
//! keep-alives only, gap, `409`, `404`), cuts inside the replies, any chunk size — run through the
//! real decoder and guard. The guard must never deliver a message the server did not send, never
//! one twice, never out of order; a finished exchange has delivered the response; a faulty server
//! whose reply arrived whole is refused; a correct one is not (the model of `tests/guard_prop.rs`).

use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use ssegate::guard::{ConnectionEnd, Decision, Guard, Policy, ReconnectResponse};
use ssegate::message::RpcId;
use ssegate::sse::Decoder;

#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
enum Ids {
    Numeric,
    Dashed,
    Opaque,
}

#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    /// Continues strictly after `Last-Event-ID`.
    Correct,
    /// Re-sends the `Last-Event-ID` event, then continues (rmcp).
    ResendLast,
    /// Re-sends already-seen events out of order, then continues (TypeScript example store).
    Dupes,
    /// Lost its buffer: a fresh stream with new ids and a priming event.
    Restart,
    /// Lost its buffer: `200` with an empty body.
    Empty,
    /// Lost its buffer: `200` held open with keep-alive comments only, until the replay timeout.
    KeepAlive,
    /// Skips the event right after `Last-Event-ID`.
    Gap,
    /// `409` + `Retry-After`.
    Conflict,
    /// `404`: the session is gone.
    Expired,
}

#[derive(Arbitrary, Clone, Copy, Debug)]
enum Chunk {
    One,
    Small(u8),
    Whole,
}

impl Chunk {
    fn size(self) -> usize {
        match self {
            Chunk::One => 1,
            Chunk::Small(n) => 2 + usize::from(n % 62),
            Chunk::Whole => usize::MAX,
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Round {
    server: Server,
    /// Where this reply is cut, as a fraction of its length (only replies of servers that send
    /// the original events are cut: a cut restart would hide the evidence, not test the guard).
    cut: Option<u16>,
}

#[derive(Arbitrary, Debug)]
struct Scenario {
    ids: Ids,
    progress: u8,
    result_len: u16,
    /// The first cut, a byte offset (modulo the stream length + 1).
    first_cut: u32,
    rounds: Vec<Round>,
    strict: bool,
    chunk: Chunk,
    id_after_data: bool,
}

#[derive(Clone, Debug)]
struct Ev {
    id: String,
    data: String,
}

fn make_id(ids: Ids, stream: u32, n: usize) -> String {
    match ids {
        Ids::Numeric => (n + 100 * stream as usize).to_string(),
        Ids::Dashed => format!("s{stream}-{n}"),
        // Neither ordered nor numeric, like the TypeScript SDK's `<stream>_<ms>_<rand>`.
        Ids::Opaque => format!(
            "st{stream}_{}_{:x}",
            1000 + n * 7,
            (n as u64 + 1).wrapping_mul(0x9E37_79B9) % 65_521
        ),
    }
}

fn stream(ids: Ids, stream_no: u32, progress: usize, result_len: usize) -> Vec<Ev> {
    let mut out = vec![Ev {
        id: make_id(ids, stream_no, 0),
        data: String::new(),
    }];
    for p in 0..progress {
        out.push(Ev {
            id: make_id(ids, stream_no, p + 1),
            data: format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"t","progress":{p},"stream":{stream_no}}}}}"#
            ),
        });
    }
    let text: String = "lorem \\\"ipsum\\\" dolor \\n sit amet "
        .chars()
        .cycle()
        .take(result_len)
        .collect();
    let text = text.trim_end_matches('\\');
    out.push(Ev {
        id: make_id(ids, stream_no, progress + 1),
        data: format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#
        ),
    });
    out
}

fn frames(evs: &[Ev], id_after_data: bool) -> String {
    evs.iter()
        .map(|e| {
            if id_after_data {
                format!("data: {}\nid: {}\n\n", e.data, e.id)
            } else {
                format!("id: {}\ndata: {}\n\n", e.id, e.data)
            }
        })
        .collect()
}

fn status(code: u16) -> ReconnectResponse {
    ReconnectResponse {
        status: code,
        retry_after: (code == 409).then(|| Duration::from_secs(2)),
        content_type: (code == 200).then(|| "text/event-stream".into()),
    }
}

#[derive(Debug, Default)]
struct Outcome {
    delivered: Vec<Bytes>,
    refused: bool,
    finished: bool,
    /// Whether an id had arrived before the first cut (without one nothing can be resumed).
    cursor_at_cut: bool,
    /// A gap the guard cannot see: opaque ids and an interrupted event whose id never arrived.
    unprovable_gap: bool,
    /// A faulty behaviour's reply arrived whole.
    faulty_whole: bool,
    /// Only the first reply may have come from a faulty or replaying server.
    later_rounds_correct: bool,
    /// A reply was cut to nothing (indistinguishable from an empty `200`), or a reply re-sending
    /// seen events was cut inside one (the guard may then refuse: safe, not a liveness promise).
    awkward_cut: bool,
}

/// Feeds `body` in `chunk`-byte pieces; false when the guard refused.
fn feed(
    guard: &mut Guard,
    decoder: &mut Decoder,
    body: &[u8],
    chunk: usize,
    out: &mut Outcome,
) -> bool {
    let body = Bytes::copy_from_slice(body);
    let mut at = 0;
    while at < body.len() {
        let end = at.saturating_add(chunk).min(body.len());
        decoder.feed(body.slice(at..end));
        at = end;
        while let Some(ev) = decoder.next_event() {
            let ev = ev.expect("the default limits are far above these events");
            match guard.on_event(ev) {
                Ok(Decision::Deliver(d)) => out.delivered.push(d.message.data().contiguous()),
                Ok(_) => {}
                Err(_) => return false,
            }
        }
    }
    true
}

fn play(s: &Scenario, original: &[Ev]) -> Outcome {
    let wire = frames(original, s.id_after_data);
    let cut = s.first_cut as usize % (wire.len() + 1);
    let policy = if s.strict {
        Policy::Strict
    } else {
        Policy::Verified
    };
    let mut guard = ssegate::guard::Config::default().policy(policy).build();
    guard.expect_response(RpcId::Number(1));
    let mut decoder = Decoder::new();
    let mut out = Outcome {
        later_rounds_correct: true,
        ..Outcome::default()
    };
    let chunk = s.chunk.size();

    if !feed(
        &mut guard,
        &mut decoder,
        &wire.as_bytes()[..cut],
        chunk,
        &mut out,
    ) {
        out.refused = true;
        return out;
    }
    out.cursor_at_cut = guard.cursor().is_some() || !decoder.last_event_id().is_empty();
    for round in 0.. {
        let resume = match guard.on_disconnect(ConnectionEnd::from_decoder(&mut decoder)) {
            Ok(r) => r,
            Err(_) => {
                out.refused = true;
                return out;
            }
        };
        if !resume.needed {
            out.finished = true;
            return out;
        }
        let default = Round {
            server: Server::Correct,
            cut: None,
        };
        let r = s
            .rounds
            .get(round)
            .filter(|_| round < 4)
            .unwrap_or(&default);
        if round > 0 && r.server != Server::Correct {
            out.later_rounds_correct = false;
        }
        let last = resume.last_event_id.expect("a needed resume has a cursor");
        let at = original
            .iter()
            .position(|e| e.id.as_bytes() == last.as_ref())
            .unwrap_or_else(|| panic!("resumed from {last:?}, an id the server never sent"));
        if r.server == Server::Gap
            && s.ids == Ids::Opaque
            && resume.discarded.as_ref().is_none_or(|p| p.id.is_none())
        {
            out.unprovable_gap = true;
        }
        let reply = match r.server {
            Server::Conflict | Server::Expired => {
                let code = if r.server == Server::Conflict {
                    409
                } else {
                    404
                };
                assert!(
                    guard.on_reconnect(&status(code)).is_err(),
                    "{code} accepted"
                );
                out.refused = true;
                out.faulty_whole = true;
                return out;
            }
            Server::Correct => frames(&original[at + 1..], s.id_after_data),
            Server::ResendLast => frames(&original[at..], s.id_after_data),
            Server::Dupes => {
                let mut seen = original[..=at].to_vec();
                seen.reverse();
                frames(&seen, s.id_after_data) + &frames(&original[at + 1..], s.id_after_data)
            }
            Server::Restart => frames(
                &stream(
                    s.ids,
                    2,
                    usize::from(s.progress % 6),
                    usize::from(s.result_len % 3000),
                ),
                s.id_after_data,
            ),
            Server::Empty => String::new(),
            Server::KeepAlive => ": keep-alive\n\n: keep-alive\n\n".into(),
            Server::Gap => frames(original.get(at + 2..).unwrap_or(&[]), s.id_after_data),
        };
        guard
            .on_reconnect(&status(200))
            .expect("200 text/event-stream is accepted");
        let replays_original = matches!(
            r.server,
            Server::Correct | Server::ResendLast | Server::Dupes
        );
        let body = match r.cut {
            Some(f) if replays_original => {
                let body = &reply.as_bytes()[..reply.len() * usize::from(f) / 65_536];
                out.awkward_cut |= body.is_empty() || r.server != Server::Correct;
                body
            }
            _ => {
                out.faulty_whole |= !replays_original;
                reply.as_bytes()
            }
        };
        if !feed(&mut guard, &mut decoder, body, chunk, &mut out) {
            out.refused = true;
            return out;
        }
        if r.server == Server::KeepAlive
            && guard.outstanding().contains(&RpcId::Number(1))
            && guard.on_replay_timeout(guard.replay_timeout()).is_err()
        {
            out.refused = true;
            return out;
        }
    }
    unreachable!()
}

/// The `guard_model` oracle (see the module docs).
pub fn guard_model(data: &[u8]) {
    let Ok(s) = Scenario::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let original = stream(
        s.ids,
        1,
        usize::from(s.progress % 6),
        usize::from(s.result_len % 3000),
    );
    let out = play(&s, &original);
    let messages: Vec<Bytes> = original
        .iter()
        .filter(|e| !e.data.is_empty())
        .map(|e| Bytes::from(e.data.clone()))
        .collect();

    // Never a message the server did not send, never twice, always in order.
    let mut next = 0;
    for d in &out.delivered {
        let pos = messages[next..].iter().position(|m| m == d);
        assert!(
            pos.is_some(),
            "delivered a message not sent, twice or out of order: {d:?}\n{s:?}"
        );
        next += pos.unwrap() + 1;
    }
    if out.finished {
        assert_eq!(
            out.delivered.last(),
            messages.last(),
            "finished without the response\n{s:?}"
        );
        if !out.unprovable_gap {
            assert_eq!(
                out.delivered, messages,
                "a finished exchange delivers every message\n{s:?}"
            );
        }
    }
    let complete = out.delivered.last() == messages.last();
    if out.faulty_whole && !complete {
        assert!(out.refused, "a faulty server was not refused\n{s:?}");
    }
    let first = s.rounds.first().map_or(Server::Correct, |r| r.server);
    if !s.strict
        && out.cursor_at_cut
        && out.later_rounds_correct
        && !out.awkward_cut
        && matches!(first, Server::Correct | Server::ResendLast | Server::Dupes)
    {
        assert!(!out.refused, "a correct server was refused\n{s:?}");
        assert!(
            out.finished,
            "a correct server's exchange did not finish\n{s:?}"
        );
    }
}
