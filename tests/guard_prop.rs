//! Property: for random event streams, random cut points and random server behaviours from
//! DESIGN.md's table, the guard never delivers a message the server did not send, never delivers
//! one twice, keeps the original order, and refuses whenever it cannot prove continuity.

use bytes::Bytes;
use proptest::prelude::*;
use ssegate::guard::{ConnectionEnd, Decision, Guard, Policy, ReconnectResponse, Resume};
use ssegate::message::RpcId;
use ssegate::sse::Decoder;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ids {
    Numeric,
    Dashed,
    Opaque,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    /// Continues strictly after `Last-Event-ID`.
    Correct,
    /// Re-sends the `Last-Event-ID` event, then continues (rmcp).
    ResendLast,
    /// Re-sends already-seen events out of order, then continues (TypeScript example store).
    Dupes,
    /// Lost its buffer: a fresh stream with new ids and a priming event.
    Restart,
    /// Lost its buffer: 200 with an empty body.
    Empty,
    /// Skips the event right after `Last-Event-ID`.
    Gap,
    /// 409 + Retry-After.
    Conflict,
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
        // Not ordered, not numeric: like the TypeScript SDK's `<stream>_<ms>_<rand>`.
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
        let data = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"t","progress":{p},"stream":{stream_no}}}}}"#
        );
        out.push(Ev {
            id: make_id(ids, stream_no, p + 1),
            data,
        });
    }
    let text: String = "lorem \\\"ipsum\\\" dolor \\n sit amet "
        .chars()
        .cycle()
        .take(result_len)
        .collect();
    let text = text.trim_end_matches('\\').to_string();
    out.push(Ev {
        id: make_id(ids, stream_no, progress + 1),
        data: format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#),
    });
    out
}

fn frame(e: &Ev, id_after_data: bool) -> String {
    if id_after_data {
        format!("data: {}\nid: {}\n\n", e.data, e.id)
    } else {
        format!("id: {}\ndata: {}\n\n", e.id, e.data)
    }
}

fn frames(evs: &[Ev], id_after_data: bool) -> String {
    evs.iter().map(|e| frame(e, id_after_data)).collect()
}

#[derive(Debug, Default)]
struct Outcome {
    delivered: Vec<Bytes>,
    refused: bool,
    finished: bool,
    partial_id_known: bool,
    boundary_cut: bool,
    /// Whether an id had arrived before the first cut (without one nothing can be resumed).
    cursor_at_cut: bool,
    /// Whether the first cut left the response outstanding, so the server's behaviour mattered.
    resume_needed: bool,
}

/// Feeds `body` in `chunk`-byte pieces; returns false if the guard refused.
fn feed(
    guard: &mut Guard,
    decoder: &mut Decoder,
    body: &str,
    chunk: usize,
    out: &mut Outcome,
) -> bool {
    let body = Bytes::copy_from_slice(body.as_bytes());
    let mut at = 0;
    while at < body.len() {
        let end = (at + chunk).min(body.len());
        decoder.feed(body.slice(at..end));
        at = end;
        while let Some(ev) = decoder.next_event() {
            match guard.on_event(ev.expect("within limits")) {
                Ok(Decision::Deliver(d)) => out.delivered.push(d.message.data().contiguous()),
                Ok(_) => {}
                Err(_) => return false,
            }
        }
    }
    true
}

fn sse_ok() -> ReconnectResponse {
    ReconnectResponse {
        status: 200,
        retry_after: None,
        content_type: Some("text/event-stream".into()),
    }
}

#[allow(clippy::too_many_arguments)]
fn scenario(
    ids: Ids,
    progress: usize,
    result_len: usize,
    cut_frac: f64,
    second_cut_frac: Option<f64>,
    server: Server,
    policy: Policy,
    chunk: usize,
    id_after_data: bool,
) -> (Outcome, Vec<Ev>) {
    let original = stream(ids, 1, progress, result_len);
    let wire = frames(&original, id_after_data);
    let cut = ((wire.len() as f64) * cut_frac) as usize;
    let mut guard = ssegate::guard::Config::default().policy(policy).build();
    guard.expect_response(RpcId::Number(1));
    let mut decoder = Decoder::new();
    let mut out = Outcome::default();

    let mut body = wire[..cut].to_string();
    let mut first = true;
    let mut round = 0;
    loop {
        if !first {
            if round == 1 {
                out.cursor_at_cut = guard.cursor().is_some() || !decoder.last_event_id().is_empty();
            }
            // The server's answer to the resume, per its behaviour (round 1) or correct afterwards.
            let resume: Resume =
                match guard.on_disconnect(ConnectionEnd::from_decoder(&mut decoder)) {
                    Ok(r) => r,
                    Err(_) => {
                        out.refused = true;
                        return (out, original);
                    }
                };
            if round == 1 {
                out.partial_id_known = resume.discarded.as_ref().is_some_and(|p| p.id.is_some());
                out.boundary_cut = resume.discarded.is_none();
            }
            if round == 1 {
                out.resume_needed = resume.needed;
            }
            if !resume.needed {
                out.finished = true;
                return (out, original);
            }
            let last = resume.last_event_id.expect("needed implies a cursor");
            let at = original
                .iter()
                .position(|e| e.id.as_bytes() == last.as_ref())
                .expect("cursor is a sent id");
            let behaviour = if round == 1 { server } else { Server::Correct };
            let reply = match behaviour {
                Server::Conflict => {
                    let r = ReconnectResponse {
                        status: 409,
                        retry_after: None,
                        content_type: None,
                    };
                    assert!(guard.on_reconnect(&r).is_err());
                    out.refused = true;
                    return (out, original);
                }
                Server::Correct => frames(&original[at + 1..], id_after_data),
                Server::ResendLast => frames(&original[at..], id_after_data),
                Server::Dupes => {
                    let mut seen: Vec<Ev> = original[..=at].to_vec();
                    seen.reverse();
                    frames(&seen, id_after_data) + &frames(&original[at + 1..], id_after_data)
                }
                Server::Restart => frames(&stream(ids, 2, progress, result_len), id_after_data),
                Server::Empty => String::new(),
                Server::Gap => frames(original.get(at + 2..).unwrap_or(&[]), id_after_data),
            };
            guard
                .on_reconnect(&sse_ok())
                .expect("200 event-stream is accepted");
            body = match (round, second_cut_frac) {
                (1, Some(f)) if behaviour == Server::Correct => {
                    reply[..((reply.len() as f64) * f) as usize].to_string()
                }
                _ => reply,
            };
        }
        first = false;
        round += 1;
        if !feed(&mut guard, &mut decoder, &body, chunk, &mut out) {
            out.refused = true;
            return (out, original);
        }
        if round > 3 {
            unreachable!("at most two resumes in a scenario");
        }
    }
}

fn server_strategy() -> impl Strategy<Value = Server> {
    prop_oneof![
        Just(Server::Correct),
        Just(Server::ResendLast),
        Just(Server::Dupes),
        Just(Server::Restart),
        Just(Server::Empty),
        Just(Server::Gap),
        Just(Server::Conflict),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(768))]

    #[test]
    fn guard_never_delivers_corrupt_or_duplicate_and_refuses_without_proof(
        ids in prop_oneof![Just(Ids::Numeric), Just(Ids::Dashed), Just(Ids::Opaque)],
        progress in 0usize..5,
        result_len in 0usize..3000,
        cut_frac in 0.0f64..1.0,
        second_cut in proptest::option::of(0.0f64..1.0),
        server in server_strategy(),
        strict in any::<bool>(),
        chunk in prop_oneof![Just(1usize), 2usize..64, Just(1 << 20)],
        id_after_data in any::<bool>(),
    ) {
        let policy = if strict { Policy::Strict } else { Policy::Verified };
        let (out, original) =
            scenario(ids, progress, result_len, cut_frac, second_cut, server, policy, chunk, id_after_data);
        let messages: Vec<Bytes> =
            original.iter().filter(|e| !e.data.is_empty()).map(|e| Bytes::from(e.data.clone())).collect();

        // Never a message the server did not send, never twice, always in order.
        let mut next = 0;
        for d in &out.delivered {
            let pos = messages[next..].iter().position(|m| m == d);
            prop_assert!(pos.is_some(), "delivered a message not sent (or twice / out of order): {:?}", d);
            next += pos.unwrap() + 1;
        }
        if out.finished {
            // The exchange completed: the response arrived, intact, exactly once.
            prop_assert_eq!(out.delivered.last(), messages.last());
        }
        let unprovable_gap = server == Server::Gap && ids == Ids::Opaque && !out.partial_id_known;
        if out.finished && !unprovable_gap {
            prop_assert_eq!(&out.delivered, &messages, "a completed exchange delivers every message");
        }
        // The faulty behaviours are refused whenever a resume was needed...
        if matches!(server, Server::Restart | Server::Empty | Server::Conflict) && out.resume_needed {
            prop_assert!(out.refused, "a faulty server was not refused");
        }
        // ... and the correct ones are never refused under the Verified policy.
        if policy == Policy::Verified
            && out.cursor_at_cut
            && matches!(server, Server::Correct | Server::ResendLast | Server::Dupes)
        {
            prop_assert!(!out.refused, "a correct server was refused");
            prop_assert!(out.finished);
        }
        if policy == Policy::Strict && !out.boundary_cut && out.refused {
            // Strict refuses at the torn event; nothing after it was delivered.
            prop_assert!(out.delivered.len() < messages.len());
        }
    }
}
