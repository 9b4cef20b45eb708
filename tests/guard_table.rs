//! One test per row of the guard decision table (docs/DESIGN.md) and per field finding, as
//! event sequences driven through the shipped wiring (decoder, gate and guard in a
//! `ResumableStream`, around a guard the test builds and inspects through the crate's PRIVATE
//! `__testing` hooks). Connections are separated by marker lines this file parses
//! (`#reconnect status=.. [retry-after=..] [content-type=..]`), independent of the CLI's capture
//! format.

use std::time::{Duration, Instant};

use bytes::Bytes;
use ssegate::guard::{ConnectionEnd, Decision, Guard};
use ssegate::message::RpcId;
use ssegate::resume::{
    self, Answer, DEFAULT_UNREQUESTED_WINDOW, GuardConfig, Output, Policy, ReconnectResponse,
    Refusal, RefusalKind, Registry, Restart, Skip,
};
use ssegate::sse::{self, Decoder};

fn parse_marker(line: &str) -> ReconnectResponse {
    let mut r = ReconnectResponse::new(200, None, None);
    for kv in line.split_whitespace().skip(1) {
        match kv.split_once('=') {
            Some(("status", v)) => r.status = v.parse().expect("status"),
            Some(("retry-after", v)) => {
                r.retry_after = Some(Duration::from_secs(v.parse().expect("seconds")))
            }
            Some(("content-type", v)) => r.content_type = Some(v.to_string()),
            _ => panic!("bad marker {line:?}"),
        }
    }
    r
}

/// One connection of a capture: the reconnect response that opened it (`None` for the first)
/// and its body.
type Connection = (Option<ReconnectResponse>, Bytes);

fn split(capture: &str) -> Vec<Connection> {
    let mut out = Vec::new();
    let mut response = None;
    let mut rest = capture;
    while let Some(at) = rest.find("\n#reconnect") {
        out.push((
            response.take(),
            Bytes::copy_from_slice(&rest.as_bytes()[..at]),
        ));
        let line_end = rest[at + 1..].find('\n').map_or(rest.len(), |e| at + 1 + e);
        response = Some(parse_marker(&rest[at + 1..line_end]));
        rest = rest.get(line_end + 1..).unwrap_or("");
    }
    out.push((response, Bytes::copy_from_slice(rest.as_bytes())));
    out
}

/// Drives `capture` through the shipped wiring (a `ResumableStream` around `guard`, decoder
/// limits from `decoder`; every later connection is replayed, and each scheduled delay passes at
/// once), one word list per step, until the stream stops; `guard` is handed back.
fn drive_with(capture: &str, guard: &mut Guard, decoder: &sse::DecoderConfig) -> Vec<String> {
    let mut config = resume::StreamConfig::default();
    config.decoder(decoder.clone());
    let mut stream = config.build_with_guard(std::mem::take(guard));
    stream.keep_open(true);
    let connections = split(capture);
    let mut rest = connections.iter();
    let mut now = Instant::now();
    if let Some((_, body)) = rest.next() {
        stream.feed(body.clone(), now);
        stream.connection_ended(resume::EndCause::Eof, now);
    }
    let mut out = Vec::new();
    loop {
        let Some(output) = stream.poll() else {
            match stream.poll_timeout() {
                Some(at) => {
                    now = now.max(at);
                    stream.handle_timeout(now);
                    continue;
                }
                None => break,
            }
        };
        let line = match &output {
            Output::Deliver(d) => Some(format!("deliver {}", id(&d.event_id))),
            Output::Cursor(c) => Some(render(&Decision::Cursor(c.clone()))),
            Output::Skip(s) => Some(render(&Decision::Skip(s.clone()))),
            Output::Dropped(d) => Some(kind(&d.clone().into_refusal())),
            Output::Failed(f) => Some(match f.refusal() {
                Some(e) => kind(e),
                None => format!("fail {f}"),
            }),
            Output::Disconnected(r) if r.needed => Some(format!("resume {}", id(&r.last_event_id))),
            Output::Disconnected(_) => Some("done".into()),
            _ => None,
        };
        out.extend(line);
        if let Output::Reconnect(_) = output {
            let Some((response, body)) = rest.next() else {
                break;
            };
            let response = response
                .clone()
                .unwrap_or_else(ReconnectResponse::event_stream);
            let answer = stream.reconnect_response(&response, now);
            // A dropped answer: the refusal (or the retry) follows as outputs.
            if answer == Answer::Read {
                out.push(format!("reconnect {}", response.status));
                stream.feed(body.clone(), now);
                stream.connection_ended(resume::EndCause::Eof, now);
            }
        }
    }
    *guard = stream.into_guard();
    out
}

fn drive(capture: &str, guard: &mut Guard) -> Vec<String> {
    drive_with(capture, guard, &sse::DecoderConfig::default())
}

/// Runs `capture` through a fresh guard (`policy`, request id 1 outstanding unless `outstanding`
/// is false).
fn run_with(capture: &str, policy: Policy, outstanding: bool) -> Vec<String> {
    let mut guard = GuardConfig::default().policy(policy).build();
    if outstanding {
        guard.expect_response(RpcId::Number(1));
    }
    drive(capture, &mut guard)
}

fn run(capture: &str, policy: Policy) -> Vec<String> {
    run_with(capture, policy, true)
}

fn run_contiguous(capture: &str) -> Vec<String> {
    let mut guard = GuardConfig::default().contiguous_ids(true).build();
    guard.expect_response(RpcId::Number(1));
    drive(capture, &mut guard)
}

fn id(b: &Option<Bytes>) -> String {
    b.as_deref()
        .map_or("-".into(), |b| String::from_utf8_lossy(b).into_owned())
}

fn kind(e: &Refusal) -> String {
    let dbg = format!("{:?}", e.kind);
    let name = dbg.split([' ', '{', '(']).next().unwrap_or("");
    match &e.kind {
        RefusalKind::StreamRestarted { why, .. } => format!("err {name} {why:?}"),
        _ => format!("err {name}"),
    }
}

fn render(d: &Decision) -> String {
    match d {
        Decision::Deliver(d) => format!("deliver {}", id(&d.event_id)),
        Decision::Cursor(c) => format!("cursor {}", String::from_utf8_lossy(c)),
        Decision::Skip(Skip::ExactReplay { id }) => {
            format!("skip-replay {}", String::from_utf8_lossy(id))
        }
        Decision::Skip(Skip::DuplicateResponse { rpc_id }) => format!("skip-dup {rpc_id}"),
        Decision::Skip(Skip::KeepAlive) => "keepalive".into(),
        Decision::Skip(Skip::ErrorFrame { .. }) => "skip-error-frame".into(),
        Decision::Skip(other) => format!("skip {other:?}"),
        other => format!("{other:?}"),
    }
}

const RESULT: &str =
    r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello \"world\""}]}}"#;
const PROGRESS: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}"#;

fn progress(n: u32) -> String {
    PROGRESS.replace("\"progress\":1", &format!("\"progress\":{n}"))
}

fn ev(id: &str, data: &str) -> String {
    format!("id: {id}\ndata: {data}\n\n")
}

const MARK: &str = "\n#reconnect status=200 content-type=text/event-stream\n";

/// Ids for the two shapes: numeric (ordered) and opaque (TypeScript-SDK-like, not ordered).
fn ids(numeric: bool) -> [&'static str; 4] {
    if numeric {
        ["0", "1", "2", "3"]
    } else {
        ["s_9f_a", "s_9f_q", "s_9f_c", "s_9f_z"]
    }
}

// ---- event rows ----

#[test]
fn event_complete_new_id_is_delivered_and_moves_the_cursor() {
    for numeric in [true, false] {
        for policy in [Policy::Strict, Policy::Verified] {
            let [a, b, ..] = ids(numeric);
            let capture = ev(a, PROGRESS) + &ev(b, RESULT);
            assert_eq!(
                run(&capture, policy),
                [
                    format!("deliver {a}"),
                    format!("deliver {b}"),
                    "done".into()
                ]
            );
        }
    }
}

#[test]
fn event_empty_data_is_a_priming_cursor_and_delivers_nothing() {
    for numeric in [true, false] {
        let [a, b, ..] = ids(numeric);
        let capture =
            format!("id: {a}\nretry: 250\ndata:\n\n: keep-alive\n\ndata:\n\n") + &ev(b, RESULT);
        assert_eq!(
            run(&capture, Policy::Verified),
            [
                format!("cursor {a}"),
                "keepalive".into(),
                format!("deliver {b}"),
                "done".into()
            ]
        );
    }
}

#[test]
fn event_not_complete_is_refused_with_the_verdict() {
    for (data, want) in [
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"#,
            "err IncompleteMessage",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{}}{"jsonrpc":"2.0""#,
            "err TrailingBytes",
        ),
        (r#"{"jsonrpc" 2.0}"#, "err InvalidMessage"),
        ("not json", "err InvalidMessage"),
    ] {
        for policy in [Policy::Strict, Policy::Verified] {
            assert_eq!(run(&ev("7", data), policy), [want.to_string()], "{data}");
        }
    }
}

#[test]
fn event_id_already_delivered_with_same_content_is_skipped() {
    for numeric in [true, false] {
        let [a, b, ..] = ids(numeric);
        let capture = ev(a, PROGRESS) + &ev(a, PROGRESS) + &ev(b, RESULT);
        assert_eq!(
            run(&capture, Policy::Verified),
            [
                format!("deliver {a}"),
                format!("skip-replay {a}"),
                format!("deliver {b}"),
                "done".into()
            ]
        );
    }
}

#[test]
fn event_id_already_delivered_with_other_content_is_a_restart() {
    for numeric in [true, false] {
        let [a, ..] = ids(numeric);
        let capture = ev(a, PROGRESS) + &ev(a, &progress(2));
        assert_eq!(
            run(&capture, Policy::Verified),
            [
                format!("deliver {a}"),
                "err StreamRestarted IdReused".into()
            ]
        );
    }
}

#[test]
fn duplicate_jsonrpc_response_is_skipped_when_identical_refused_when_not() {
    for numeric in [true, false] {
        let [a, b, c, _] = ids(numeric);
        let same = ev(a, RESULT) + &ev(b, RESULT);
        assert_eq!(
            run(&same, Policy::Verified),
            [format!("deliver {a}"), "skip-dup 1".into(), "done".into()]
        );
        let other = RESULT.replace("hello", "HELLO");
        let differ = ev(a, RESULT) + &ev(c, &other);
        assert_eq!(
            run(&differ, Policy::Verified),
            [format!("deliver {a}"), "err DuplicateResponse".into()]
        );
    }
    // A response nobody registered is judged by the same rule (see the next test).
    let unrequested = ev("1", RESULT) + &ev("2", RESULT);
    assert_eq!(
        run_with(&unrequested, Policy::Verified, false),
        ["deliver 1", "skip-dup 1", "done"]
    );
}

/// `{"jsonrpc":"2.0","id":<id>,<rest>}`: a response when `rest` is a `result` or an `error`.
fn rpc(id: &str, rest: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},{rest}}}"#)
}

#[test]
fn duplicate_response_to_an_unregistered_request_is_skipped_when_identical_refused_when_not() {
    let other = RESULT.replace("hello", "HELLO");
    for numeric in [true, false] {
        let [a, b, c, _] = ids(numeric);
        let same = ev(a, RESULT) + &ev(b, &progress(2)) + &ev(c, RESULT);
        assert_eq!(
            run_with(&same, Policy::Verified, false),
            [
                format!("deliver {a}"),
                format!("deliver {b}"),
                "skip-dup 1".into(),
                "done".into()
            ]
        );
        let differ = ev(a, RESULT) + &ev(b, &progress(2)) + &ev(c, &other);
        assert_eq!(
            run_with(&differ, Policy::Verified, false),
            [
                format!("deliver {a}"),
                format!("deliver {b}"),
                "err DuplicateResponse".into()
            ]
        );
        // Across a resume of the same stream too.
        let resumed = ev(a, RESULT) + MARK + &ev(c, &other);
        assert_eq!(
            run_with(&resumed, Policy::Verified, false),
            [
                format!("deliver {a}"),
                "done".into(),
                "reconnect 200".into(),
                "err DuplicateResponse".into()
            ]
        );
    }
    // The refusal is the registered path's, kind and words: one typed refusal for both.
    let differ = ev("e1", RESULT) + &ev("e2", &other);
    let mut refusals = Vec::new();
    for registered in [false, true] {
        let mut guard = Guard::new();
        if registered {
            guard.expect_response(RpcId::Number(1));
        }
        drive(&differ, &mut guard);
        let err = guard.failure().expect("refused").clone();
        assert_eq!(
            err.kind,
            RefusalKind::DuplicateResponse {
                rpc_id: RpcId::Number(1),
                event_id: Some(Bytes::from_static(b"e2")),
            }
        );
        assert!(err.outstanding.is_empty() && err.must_renegotiate());
        refusals.push(err.to_string());
    }
    assert_eq!(refusals[0], refusals[1]);
    assert!(
        refusals[0].contains("a second, different response to request 1 arrived in event \"e2\""),
        "{}",
        refusals[0]
    );
}

#[test]
fn an_error_and_a_result_for_one_unregistered_id_are_different_responses() {
    let error = rpc("1", r#""error":{"code":-32603,"message":"tool failed"}"#);
    for (first, second) in [(RESULT, error.as_str()), (error.as_str(), RESULT)] {
        for registered in [false, true] {
            let capture = ev("1", first) + &ev("2", second);
            assert_eq!(
                run_with(&capture, Policy::Verified, registered),
                ["deliver 1", "err DuplicateResponse"],
                "{first} then {second}, registered: {registered}"
            );
        }
    }
}

#[test]
fn only_responses_with_a_non_null_id_are_compared() {
    // Notifications and the server's own requests (its id space, not the client's) are not
    // responses: a request reusing the id of a response, or another request, is delivered.
    let ping = rpc("1", r#""method":"ping""#);
    let sampling = rpc("1", r#""method":"sampling/createMessage","params":{}"#);
    let capture = ev("1", &ping)
        + &ev("2", &sampling)
        + &ev("3", PROGRESS)
        + &ev("4", PROGRESS.replace("\"t\"", "\"u\"").as_str())
        + &ev("5", RESULT)
        + &ev("6", &ping.replace("ping", "roots/list"));
    assert_eq!(
        run_with(&capture, Policy::Verified, false),
        [
            "deliver 1",
            "deliver 2",
            "deliver 3",
            "deliver 4",
            "deliver 5",
            "deliver 6",
            "done"
        ]
    );
    // `null` ids answer unparseable requests: any number of them, differing or not.
    let parse_error = |m: &str| {
        rpc(
            "null",
            &format!(r#""error":{{"code":-32700,"message":"{m}"}}"#),
        )
    };
    let capture =
        ev("1", &parse_error("a")) + &ev("2", &parse_error("b")) + &ev("3", &parse_error("a"));
    assert_eq!(
        run_with(&capture, Policy::Verified, false),
        ["deliver 1", "deliver 2", "deliver 3", "done"]
    );
    // `1` and `"1"` are two ids.
    let capture = ev("1", RESULT) + &ev("2", &RESULT.replace(r#""id":1"#, r#""id":"1""#));
    assert_eq!(
        run_with(&capture, Policy::Verified, false),
        ["deliver 1", "deliver 2", "done"]
    );
}

#[test]
fn the_unrequested_response_window_is_bounded_and_configurable() {
    let answers = |n: usize| -> String {
        (1..=n)
            .map(|k| {
                ev(
                    &format!("e{k}"),
                    &rpc(&k.to_string(), r#""result":{"n":1}"#),
                )
            })
            .collect()
    };
    let conflict = ev("x", &rpc("1", r#""result":{"n":2}"#));
    // (window, responses before the conflicting one, the decision about it): at the limit the
    // first id is still remembered; one past it, the oldest is forgotten and the second response
    // is delivered as a first one would be, never refused without evidence.
    for (window, answered, want) in [
        (Some(2), 2, "err DuplicateResponse"),
        (Some(2), 3, "deliver x"),
        (Some(1), 1, "err DuplicateResponse"),
        (Some(0), 1, "err DuplicateResponse"),
        (Some(0), 2, "deliver x"),
        (None, DEFAULT_UNREQUESTED_WINDOW, "err DuplicateResponse"),
        (None, DEFAULT_UNREQUESTED_WINDOW + 1, "deliver x"),
    ] {
        let mut config = GuardConfig::default();
        if let Some(window) = window {
            config.unrequested_window(window);
        }
        let got = drive(&(answers(answered) + &conflict), &mut config.build());
        assert_eq!(
            got.len(),
            answered + 1 + usize::from(want != "err DuplicateResponse")
        );
        assert_eq!(
            got[answered], want,
            "window {window:?}, {answered} answered"
        );
    }
    // The window is the stream's: another stream of the session does not compare with it.
    let session = Registry::new();
    let mut a = GuardConfig::default().build_in(&session);
    let mut b = GuardConfig::default().build_in(&session);
    assert_eq!(drive(&ev("a1", RESULT), &mut a), ["deliver a1", "done"]);
    let other = RESULT.replace("hello", "HELLO");
    assert_eq!(drive(&ev("b1", &other), &mut b), ["deliver b1", "done"]);
    assert!(!session.is_answered(&RpcId::Number(1)));
    // A reset (after a renegotiation) forgets it with the rest of the stream.
    let mut guard = Guard::new();
    drive(&ev("e1", RESULT), &mut guard);
    guard.reset();
    assert_eq!(drive(&ev("e1", &other), &mut guard), ["deliver e1", "done"]);
}

// ---- disconnect rows ----

#[test]
fn disconnect_at_a_boundary_resumes_from_the_cursor() {
    for numeric in [true, false] {
        for policy in [Policy::Strict, Policy::Verified] {
            let [a, b, ..] = ids(numeric);
            let capture = ev(a, PROGRESS) + MARK + &ev(b, RESULT);
            assert_eq!(
                run(&capture, policy),
                [
                    format!("deliver {a}"),
                    format!("resume {a}"),
                    "reconnect 200".into(),
                    format!("deliver {b}"),
                    "done".into()
                ]
            );
        }
    }
}

#[test]
fn disconnect_with_a_partial_event_strict_refuses_verified_resumes_and_checks() {
    for numeric in [true, false] {
        let [a, b, ..] = ids(numeric);
        let torn = &ev(b, RESULT)[..40];
        let capture = ev(a, PROGRESS) + torn + MARK + &ev(b, RESULT);
        assert_eq!(
            run(&capture, Policy::Strict),
            [format!("deliver {a}"), "err PartialEvent".into()]
        );
        assert_eq!(
            run(&capture, Policy::Verified),
            [
                format!("deliver {a}"),
                format!("resume {a}"),
                "reconnect 200".into(),
                format!("deliver {b}"),
                "done".into()
            ]
        );
    }
}

// ---- reconnect rows ----

#[test]
fn reconnect_404_is_session_expired() {
    let capture = ev("1", PROGRESS) + "\n#reconnect status=404 content-type=application/json\n";
    assert_eq!(
        run(&capture, Policy::Verified),
        ["deliver 1", "resume 1", "err SessionExpired"]
    );
}

#[test]
fn reconnect_409_410_and_error_frames_answering_a_resume_are_replay_unavailable() {
    for status in [409, 410] {
        let capture = ev("1", PROGRESS) + &format!("\n#reconnect status={status} retry-after=3\n");
        assert_eq!(
            run(&capture, Policy::Verified),
            ["deliver 1", "resume 1", "err ReplayUnavailable"]
        );
    }
    let frame = "event: error\ndata: {\"error\":\"replay_unavailable\"}\n\n";
    let capture = ev("1", PROGRESS)
        + "\n#reconnect status=200 retry-after=2 content-type=text/event-stream\n"
        + frame;
    let mut guard = Guard::new();
    guard.expect_response(RpcId::Number(1));
    assert_eq!(
        drive(&capture, &mut guard),
        [
            "deliver 1",
            "resume 1",
            "reconnect 200",
            "err ReplayUnavailable"
        ]
    );
    // The delay is the response's `Retry-After`, never a key read out of the frame's data.
    let err = guard.failure().expect("refused");
    assert_eq!(err.retry_after(), Some(Duration::from_secs(2)));
    let capture = ev("1", PROGRESS) + MARK + &frame.replace('}', ",\"retry_after_ms\":1500}");
    let mut guard = Guard::new();
    guard.expect_response(RpcId::Number(1));
    drive(&capture, &mut guard);
    assert_eq!(guard.failure().expect("refused").retry_after(), None);

    let mut guard = Guard::new();
    guard.expect_response(RpcId::Number(1));
    let r = ReconnectResponse::new(409, Some(Duration::from_secs(3)), None);
    let err = guard.on_reconnect(&r).unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(3)));
    assert!(err.must_renegotiate());
    assert_eq!(err.outstanding, vec![RpcId::Number(1)]);
    assert!(
        err.to_string().contains("409") && err.to_string().contains("3000 ms"),
        "{err}"
    );
}

#[test]
fn error_frames_elsewhere_are_not_refusals() {
    // mid-stream, on the first connection, and after the first event of a
    // resumed connection, an `event: error` frame without a JSON message is skipped; one with a
    // complete JSON value is judged like any event.
    let text = "event: error\ndata: upstream hiccup\n\n";
    let json = "event: error\nid: 5\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n";
    let capture = ev("1", PROGRESS)
        + text
        + &ev("2", &progress(2))
        + MARK
        + &ev("3", &progress(3))
        + text
        + json
        + &ev("6", RESULT);
    assert_eq!(
        run(&capture, Policy::Verified),
        [
            "deliver 1",
            "skip-error-frame",
            "deliver 2",
            "resume 2",
            "reconnect 200",
            "deliver 3",
            "skip-error-frame",
            "deliver 5",
            "deliver 6",
            "done"
        ]
    );
    // As the first event of the stream (not a resume) it is not a replay refusal either.
    assert_eq!(
        run(&(text.to_string() + &ev("1", RESULT)), Policy::Verified),
        ["skip-error-frame", "deliver 1", "done"]
    );
}

#[test]
fn reconnect_busy_is_transient_and_does_not_poison_the_guard() {
    let mut guard = Guard::new();
    for status in [429, 503] {
        let r = ReconnectResponse::new(status, Some(Duration::from_secs(2)), None);
        let err = guard.on_reconnect(&r).unwrap_err();
        assert!(matches!(err.kind, RefusalKind::Busy { .. }));
        assert!(!err.must_renegotiate());
        assert_eq!(guard.server_retry(), Some(Duration::from_secs(2)));
        assert!(guard.failure().is_none());
    }
}

#[test]
fn reconnect_200_that_ends_with_no_event_is_replay_missed() {
    let capture = ev("1", PROGRESS) + MARK;
    assert_eq!(
        run(&capture, Policy::Verified),
        ["deliver 1", "resume 1", "reconnect 200", "err ReplayMissed"]
    );
    // Keep-alives are not events.
    let capture = ev("1", PROGRESS) + MARK + ": ka\n\ndata:\n\n";
    assert_eq!(
        run(&capture, Policy::Verified),
        [
            "deliver 1",
            "resume 1",
            "reconnect 200",
            "keepalive",
            "err ReplayMissed"
        ]
    );
    // Without an outstanding request, an empty resume is not an error.
    let capture = ev("1", PROGRESS) + MARK;
    assert_eq!(
        run_with(&capture, Policy::Verified, false),
        ["deliver 1", "done", "reconnect 200", "done"]
    );
}

#[test]
fn reconnect_with_no_event_within_the_timeout_is_replay_missed() {
    let mut guard = Guard::new();
    guard.expect_response(RpcId::String("req-9".into()));
    drive(&ev("1", PROGRESS), &mut guard);
    assert!(guard.is_resuming());
    let err = guard
        .on_replay_timeout(Duration::from_secs(10))
        .unwrap_err();
    assert!(matches!(
        err.kind,
        RefusalKind::ReplayMissed { waited: Some(_) }
    ));
    assert!(err.to_string().contains("10000 ms"), "{err}");

    // A resumed connection that brought a priming event is live (a long tool call): no refusal.
    let mut guard = Guard::new();
    guard.expect_response(RpcId::Number(1));
    drive(&ev("1", PROGRESS), &mut guard);
    let mut dec = Decoder::new();
    dec.feed(Bytes::from_static(b"id: 9f\ndata:\n\n"));
    let priming = guard.on_event(dec.next_event().unwrap().unwrap()).unwrap();
    assert!(matches!(priming, Decision::Cursor(_)));
    assert!(!guard.is_resuming());
    assert!(guard.on_replay_timeout(Duration::from_secs(10)).is_ok());
}

#[test]
fn reconnect_that_answers_json_is_unexpected() {
    let capture = ev("1", PROGRESS) + "\n#reconnect status=200 content-type=application/json\n";
    assert_eq!(
        run(&capture, Policy::Verified),
        ["deliver 1", "resume 1", "err UnexpectedResponse"]
    );
}

// ---- after-resume rows ----

#[test]
fn after_resume_the_interrupted_event_skipped_is_a_gap() {
    for numeric in [true, false] {
        let [a, b, c, _] = ids(numeric);
        let torn = &ev(b, PROGRESS)[..30];
        let capture = ev(a, PROGRESS) + torn + MARK + &ev(c, RESULT);
        assert_eq!(
            run(&capture, Policy::Verified),
            [
                format!("deliver {a}"),
                format!("resume {a}"),
                "reconnect 200".into(),
                "err Gap".into()
            ]
        );
        // A priming event first proves nothing; the first message decides.
        let capture = ev(a, PROGRESS) + torn + MARK + &ev("p-x", "") + &ev(c, RESULT);
        assert_eq!(
            run(&capture, Policy::Verified),
            [
                format!("deliver {a}"),
                format!("resume {a}"),
                "reconnect 200".into(),
                "cursor p-x".into(),
                "err Gap".into()
            ]
        );
        let capture = ev(a, PROGRESS) + torn + MARK + &ev("p-x", "") + &ev(b, RESULT);
        assert_eq!(
            run(&capture, Policy::Verified).last().map(String::as_str),
            Some("done")
        );
    }
}

#[test]
fn after_resume_a_session_wide_counter_is_accepted() {
    // one counter for all streams of the session; this stream gets the odd ids.
    let capture =
        ev("1", "") + &ev("3", &progress(1)) + MARK + &ev("5", &progress(2)) + &ev("9", RESULT);
    assert_eq!(
        run(&capture, Policy::Verified),
        [
            "cursor 1",
            "deliver 3",
            "resume 3",
            "reconnect 200",
            "deliver 5",
            "deliver 9",
            "done"
        ]
    );
    // The same, cut inside event 5 whose id had arrived: the replay of 5 continues the stream.
    let torn = &ev("5", &progress(2))[..20];
    let capture = ev("1", "")
        + &ev("3", &progress(1))
        + torn
        + MARK
        + &ev("5", &progress(2))
        + &ev("9", RESULT);
    assert_eq!(
        run(&capture, Policy::Verified).last().map(String::as_str),
        Some("done")
    );
    // Only the opt-in contiguous numbering asks for exactly `cursor + 1`.
    let capture = ev("1", &progress(1)) + MARK + &ev("3", RESULT);
    assert_eq!(
        run_contiguous(&capture),
        ["deliver 1", "resume 1", "reconnect 200", "err Gap"]
    );
    for ids in [["1/0", "3/0"], ["s1-1", "s1-3"]] {
        let capture = ev(ids[0], &progress(1)) + MARK + &ev(ids[1], RESULT);
        assert_eq!(
            run_contiguous(&capture).last().map(String::as_str),
            Some("err Gap")
        );
        assert_eq!(
            run(&capture, Policy::Verified).last().map(String::as_str),
            Some("done")
        );
    }
    let capture = ev("1/0", &progress(1)) + MARK + &ev("2/0", RESULT);
    assert_eq!(
        run_contiguous(&capture).last().map(String::as_str),
        Some("done")
    );
}

#[test]
fn after_resume_a_numbered_stream_going_back_or_changing_stream_is_a_restart() {
    let p = |n| progress(n);
    let start = ev("s3-0", "") + &ev("s3-1", &p(1)) + &ev("s3-2", &p(2));
    // Backwards beyond the replay window (window of 1: only the cursor is remembered).
    let capture = start.clone() + MARK + &ev("s3-1", &p(7));
    let mut guard = GuardConfig::default().window(1).build();
    guard.expect_response(RpcId::Number(1));
    assert_eq!(
        drive(&capture, &mut guard).last().map(String::as_str),
        Some("err StreamRestarted Backwards")
    );
    let capture = start.clone() + MARK + &ev("s7-0", "") + &ev("s7-1", &p(9));
    assert_eq!(
        run(&capture, Policy::Verified).last().map(String::as_str),
        Some("err StreamRestarted OtherStream")
    );
    // The same breaks on a first connection only show that the ids are not numbered: opaque.
    let capture = start + &ev("s3-1x", &p(4)) + &ev("s9-0", &p(5)) + &ev("s9-1", RESULT);
    assert_eq!(
        run(&capture, Policy::Verified).last().map(String::as_str),
        Some("done")
    );
}

#[test]
fn after_resume_one_id_that_names_its_stream_tells_another_streams_events() {
    // A store shared across sessions that names streams by request id: stream A is cut at a
    // boundary, the resume answers stream B's events, a response for the same request id among
    // them. One id before the cut (a priming one counts) is evidence enough.
    let foreign = |other: [&str; 2]| ev(other[0], &progress(5)) + &ev(other[1], RESULT);
    for (before, other) in [
        (ev("0/A", "") + &ev("1/A", &progress(1)), ["5/B", "6/B"]),
        (ev("0/A", ""), ["5/B", "6/B"]),
        (ev("A-0", ""), ["B-5", "B-6"]),
        (ev("A-1", &progress(1)), ["B-5", "B-6"]),
    ] {
        let capture = before.clone() + MARK + &foreign(other);
        let got = run(&capture, Policy::Verified);
        assert_eq!(
            got.last().map(String::as_str),
            Some("err StreamRestarted OtherStream"),
            "{got:?}"
        );
        assert!(
            !got.iter()
                .any(|d| d.starts_with("deliver 5") || d.starts_with("deliver 6"))
        );
    }
    // The same stream going on after one id is accepted, whatever its numbers.
    for (before, next) in [
        (ev("0/A", ""), ["1/A", "2/A"]),
        (ev("A-0", ""), ["A-4", "A-9"]),
    ] {
        let capture = before + MARK + &foreign(next);
        let got = run(&capture, Policy::Verified);
        assert_eq!(got.last().map(String::as_str), Some("done"), "{got:?}");
    }
    // A fresh priming id after the resume proves nothing; the stream's messages decide.
    let capture = ev("0/A", "") + MARK + &ev("0/C", "") + &ev("1/A", RESULT);
    assert_eq!(
        run(&capture, Policy::Verified).last().map(String::as_str),
        Some("done")
    );
    // Ids without a stream part carry no stream identity: another stream's events under a
    // session-wide counter cannot be told from this stream's (documented; content rules remain).
    let capture = ev("0", "") + MARK + &foreign(["5", "6"]);
    assert_eq!(
        run(&capture, Policy::Verified).last().map(String::as_str),
        Some("done")
    );
}

#[test]
fn after_resume_uuid_ids_with_a_numeric_last_group_stay_opaque() {
    // A uuid4 whose last group is all digits is not `<stream>-<n>`.
    let u1 = "0b1c2d3e-4f50-4617-8a9b-123456789012";
    let u2 = "7c1e4b2a-9d3f-4e8a-b1c2-d3e4f5a6b7c8";
    let u3 = "a1b2c3d4-e5f6-4a7b-8c9d-000000000001";
    let u4 = "5e6f7a8b-9c0d-4e1f-a2b3-999999999999";
    let capture = ev(u1, "") + &ev(u2, &progress(1)) + MARK + &ev(u3, "") + &ev(u4, RESULT);
    assert_eq!(
        run(&capture, Policy::Verified),
        [
            format!("cursor {u1}"),
            format!("deliver {u2}"),
            format!("resume {u2}"),
            "reconnect 200".into(),
            format!("cursor {u3}"),
            format!("deliver {u4}"),
            "done".into()
        ]
    );
    // Even when every id of the stream is such a uuid.
    let capture = ev(u1, &progress(1)) + MARK + &ev(u3, &progress(2)) + &ev(u4, RESULT);
    assert_eq!(
        run(&capture, Policy::Verified).last().map(String::as_str),
        Some("done")
    );
}

#[test]
fn after_resume_a_priming_event_is_accepted_when_nothing_needed_replaying() {
    // Python SDK 2.x opens the resumed stream's live tail with a fresh
    // priming event; cut at a boundary while the tool runs, it is the first event after the resume.
    let capture = ev("6b1e0c9a-uuid-a", "")
        + &ev("6b1e0c9a-uuid-b", &progress(1))
        + MARK
        + &ev("0d3c-uuid-c", "")
        + &ev("0d3c-uuid-d", &progress(2))
        + &ev("0d3c-uuid-e", RESULT);
    assert_eq!(
        run(&capture, Policy::Verified),
        [
            "cursor 6b1e0c9a-uuid-a",
            "deliver 6b1e0c9a-uuid-b",
            "resume 6b1e0c9a-uuid-b",
            "reconnect 200",
            "cursor 0d3c-uuid-c",
            "deliver 0d3c-uuid-d",
            "deliver 0d3c-uuid-e",
            "done"
        ]
    );
    // Cut again right after that priming event: resuming from it is fine too.
    let capture = ev("a", &progress(1)) + MARK + &ev("b", "") + MARK + &ev("c", RESULT);
    assert_eq!(
        run(&capture, Policy::Verified),
        [
            "deliver a",
            "resume a",
            "reconnect 200",
            "cursor b",
            "resume b",
            "reconnect 200",
            "deliver c",
            "done"
        ]
    );
}

#[test]
fn after_resume_a_message_already_delivered_under_a_new_id_is_a_restart() {
    // A server that lost its buffer starts the call again: fresh priming, the same progress.
    for priming in ["", "id: q_0\ndata:\n\n"] {
        let torn = &ev("k_2", RESULT)[..60];
        let capture = ev("a_0", "")
            + &ev("k_1", PROGRESS)
            + torn
            + MARK
            + priming
            + &ev("q_1", PROGRESS)
            + &ev("q_2", RESULT);
        let got = run(&capture, Policy::Verified);
        assert_eq!(
            got.last().map(String::as_str),
            Some("err StreamRestarted MessageRepeated"),
            "{got:?}"
        );
        // Cut at a boundary (nothing known about the next id), same evidence.
        let capture = ev("a_0", "")
            + &ev("k_1", PROGRESS)
            + MARK
            + priming
            + &ev("q_1", PROGRESS)
            + &ev("q_2", RESULT);
        let got = run(&capture, Policy::Verified);
        assert_eq!(
            got.last().map(String::as_str),
            Some("err StreamRestarted MessageRepeated"),
            "{got:?}"
        );
    }
}

// ---- no ids ----

#[test]
fn no_ids_at_all_a_cut_with_a_request_outstanding_is_unresumable() {
    let capture = format!("data: {PROGRESS}\n\ndata: {{\"jsonrpc\":\"2.0\",\"id\":1,\"res");
    assert_eq!(
        run(&capture, Policy::Verified),
        ["deliver -", "err Unresumable"]
    );
    assert_eq!(
        run(&capture, Policy::Strict),
        ["deliver -", "err PartialEvent"]
    );
}

// ---- the session registry ----

#[test]
fn a_response_on_another_stream_of_the_session_ends_the_cut_streams_need_to_resume() {
    let session = Registry::new();
    let mut post = GuardConfig::default().build_in(&session);
    let mut get = GuardConfig::default().build_in(&session);
    post.expect_response(RpcId::Number(1));
    assert_eq!(session.outstanding(), [RpcId::Number(1)]);

    // The POST stream is cut inside the response ...
    let torn = &ev("p2", RESULT)[..50];
    let mut post_dec = Decoder::new();
    post_dec.feed(Bytes::from(ev("p1", PROGRESS) + torn));
    while let Some(e) = post_dec.next_event() {
        assert!(matches!(
            post.on_event(e.unwrap()),
            Ok(Decision::Deliver(_))
        ));
    }
    // ... and the response arrives on the GET stream.
    let mut get_dec = Decoder::new();
    get_dec.feed(Bytes::from(ev("g1", RESULT)));
    let d = get
        .on_event(get_dec.next_event().unwrap().unwrap())
        .unwrap();
    assert!(matches!(d, Decision::Deliver(_)));
    assert!(session.is_answered(&RpcId::Number(1)));
    assert!(session.outstanding().is_empty());
    assert!(post.outstanding().is_empty());

    // The cut POST stream needs no resume: no ReplayMissed, no Unresumable.
    let resume = post
        .on_disconnect(ConnectionEnd::from_decoder(&mut post_dec))
        .unwrap();
    assert!(!resume.needed);
    assert!(post.on_replay_timeout(Duration::from_secs(60)).is_ok());
    assert!(post.on_disconnect(ConnectionEnd::default()).is_ok());

    // If it resumes anyway, an identical copy is skipped, a different one refused.
    post_dec.feed(Bytes::from(ev("p2", RESULT)));
    let d = post
        .on_event(post_dec.next_event().unwrap().unwrap())
        .unwrap();
    assert!(
        matches!(d, Decision::Skip(Skip::DuplicateResponse { .. })),
        "{d:?}"
    );
    post_dec.feed(Bytes::from(ev("p3", &RESULT.replace("hello", "bye"))));
    let e = post
        .on_event(post_dec.next_event().unwrap().unwrap())
        .unwrap_err();
    assert!(matches!(e.kind, RefusalKind::DuplicateResponse { .. }));
}

#[test]
fn a_forgotten_request_needs_no_resume() {
    let session = Registry::new();
    let mut guard = GuardConfig::default().build_in(&session);
    guard.expect_response(RpcId::String("call-7".into()));
    drive(&ev("1", PROGRESS), &mut Guard::new());
    let mut dec = Decoder::new();
    dec.feed(Bytes::from(ev("1", PROGRESS)));
    let _ = guard.on_event(dec.next_event().unwrap().unwrap()).unwrap();
    session.forget(&RpcId::String("call-7".into()));
    assert!(session.outstanding().is_empty());
    let resume = guard
        .on_disconnect(ConnectionEnd::from_decoder(&mut dec))
        .unwrap();
    assert!(!resume.needed);
    // Without it, the same cut needs a resume.
    let mut guard = GuardConfig::default().build_in(&Registry::new());
    guard.expect_response(RpcId::String("call-7".into()));
    let mut dec = Decoder::new();
    dec.feed(Bytes::from(ev("1", PROGRESS)));
    let _ = guard.on_event(dec.next_event().unwrap().unwrap()).unwrap();
    assert!(
        guard
            .on_disconnect(ConnectionEnd::from_decoder(&mut dec))
            .unwrap()
            .needed
    );
}

#[test]
fn the_registry_answer_window_is_bounded_and_configurable() {
    let session = Registry::with_window(2);
    let mut guard = GuardConfig::default().build_in(&session);
    let response = |n: i64| format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{}}}}"#);
    let mut capture = String::new();
    for n in 1..=3 {
        guard.expect_response(RpcId::Number(n));
        capture += &ev(&format!("e{n}"), &response(n));
    }
    drive(&capture, &mut guard);
    assert!(!session.is_answered(&RpcId::Number(1)), "evicted");
    assert!(session.is_answered(&RpcId::Number(2)));
    assert!(session.is_answered(&RpcId::Number(3)));
    assert!(Registry::new().outstanding().is_empty());
}

// ---- decode limits ----

#[test]
fn a_decode_limit_is_typed_reported_and_not_stuck() {
    // the event over the limit is lost and reported; the guard goes on.
    let big = RESULT.replace("hello", &"x".repeat(500));
    let capture =
        ev("1", PROGRESS) + &ev("2", &big) + &ev("3", &progress(3)) + MARK + &ev("4", RESULT);
    let mut guard = Guard::new();
    guard.expect_response(RpcId::Number(1));
    let mut limits = sse::DecoderConfig::default();
    limits.max_event(256);
    let got = drive_with(&capture, &mut guard, &limits);
    assert_eq!(
        got,
        [
            "deliver 1",
            "err DecodeLimit",
            "deliver 3",
            "resume 3",
            "reconnect 200",
            "deliver 4",
            "done"
        ]
    );
    assert!(guard.failure().is_none());
    assert_eq!(guard.cursor().map(|c| c.as_ref()), Some(b"4".as_slice()));

    let mut guard = Guard::new();
    guard.expect_response(RpcId::Number(1));
    let mut dec = limits.build();
    dec.feed(Bytes::from(ev("2", &big)));
    let err = dec.next_event().unwrap().unwrap_err();
    let refusal = guard.on_decode_error(&err);
    assert!(matches!(&refusal.kind, RefusalKind::DecodeLimit { error } if *error == err));
    assert!(!refusal.must_renegotiate());
    assert_eq!(refusal.outstanding, [RpcId::Number(1)]);
    assert!(!refusal.to_string().contains("renegotiate"), "{refusal}");

    // After a resume, the dropped event is taken for the interrupted one: no false Gap after it.
    let torn = &ev("2", &big)[..40];
    let capture = ev("1", PROGRESS) + torn + MARK + &ev("2", &big) + &ev("3", RESULT);
    let mut guard = Guard::new();
    guard.expect_response(RpcId::Number(1));
    assert_eq!(
        drive_with(&capture, &mut guard, &limits),
        [
            "deliver 1",
            "resume 1",
            "reconnect 200",
            "err DecodeLimit",
            "deliver 3",
            "done"
        ]
    );
}

/// A server that re-sends events the client already had (from the start of the stream, not after
/// the `Last-Event-ID`), its reply cut inside the copy of an event the decoder dropped the first
/// time: that copy is a replay of a known event, not the interrupted one, and the next (correct)
/// resume continues after the cursor with no `Gap`. The dropped event's id comes with the decode
/// error (`DecodeError::id`).
#[test]
fn a_cut_inside_the_resent_copy_of_a_dropped_event_is_not_the_interrupted_event() {
    let big = RESULT.replace("hello", &"x".repeat(500));
    let mut limits = sse::DecoderConfig::default();
    limits.max_event(256);
    let mut dec = limits.build();
    dec.feed(Bytes::from(ev("2", &big)));
    let err = dec.next_event().unwrap().unwrap_err();
    assert_eq!(err.id().map(|b| b.as_ref()), Some(b"2".as_slice()));
    assert!(err.to_string().contains("\"2\""), "{err}");
    // The id after the data is not read before the limit is crossed: nothing to carry.
    let mut dec = limits.build();
    dec.feed(Bytes::from(format!("data: {big}\nid: 2\n\n")));
    assert_eq!(dec.next_event().unwrap().unwrap_err().id(), None);

    let torn = &ev("2", &big)[..40];
    let capture = ev("1", PROGRESS)
        + &ev("2", &big)
        + &ev("3", &progress(3))
        + MARK
        + &ev("1", PROGRESS)
        + torn
        + MARK
        + &ev("4", RESULT);
    for contiguous in [false, true] {
        let mut guard = GuardConfig::default().contiguous_ids(contiguous).build();
        guard.expect_response(RpcId::Number(1));
        assert_eq!(
            drive_with(&capture, &mut guard, &limits),
            [
                "deliver 1",
                "err DecodeLimit",
                "deliver 3",
                "resume 3",
                "reconnect 200",
                "skip-replay 1",
                "resume 3",
                "reconnect 200",
                "deliver 4",
                "done"
            ],
            "contiguous ids: {contiguous}"
        );
    }
}

// ---- field observations (DESIGN.md, first table) ----

#[test]
fn field_server_replays_the_interrupted_event_whole_under_the_same_id() {
    let big = RESULT.replace("hello", &"x".repeat(5000));
    let torn = &ev("s1-2", &big)[..2000];
    let capture = ev("s1-0", "") + &ev("s1-1", PROGRESS) + torn + MARK + &ev("s1-2", &big);
    let mut guard = Guard::new();
    guard.expect_response(RpcId::Number(1));
    assert_eq!(
        drive(&capture, &mut guard),
        [
            "cursor s1-0",
            "deliver s1-1",
            "resume s1-1",
            "reconnect 200",
            "deliver s1-2",
            "done"
        ]
    );
    assert!(guard.outstanding().is_empty());
}

#[test]
fn field_rmcp_resends_the_last_event_id_event_with_id_after_data() {
    let rmcp = |id: &str, data: &str| format!("data: {data}\nid: {id}\n\n");
    let torn = &rmcp("2/0", RESULT)[..50];
    let capture = rmcp("0/0", "")
        + &rmcp("1/0", PROGRESS)
        + torn
        + MARK
        + &rmcp("1/0", PROGRESS)
        + &rmcp("2/0", RESULT);
    assert_eq!(
        run(&capture, Policy::Verified),
        [
            "cursor 0/0",
            "deliver 1/0",
            "resume 1/0",
            "reconnect 200",
            "skip-replay 1/0",
            "deliver 2/0",
            "done"
        ]
    );
}

#[test]
fn field_server_lost_its_buffer_and_restarts() {
    // Our loopback server's ids: `<stream>-<seq>`; the restart opens stream 7 with a priming event.
    let torn = &ev("s3-2", RESULT)[..60];
    let capture = ev("s3-0", "")
        + &ev("s3-1", PROGRESS)
        + torn
        + MARK
        + &ev("s7-0", "")
        + &ev("s7-1", PROGRESS);
    assert_eq!(
        run(&capture, Policy::Verified),
        [
            "cursor s3-0",
            "deliver s3-1",
            "resume s3-1",
            "reconnect 200",
            "cursor s7-0",
            "err StreamRestarted MessageRepeated"
        ]
    );
    // Numeric ids that start again from zero: the re-sent priming event is indistinguishable from a
    // replay, the first event with new content under an old id is not.
    let capture = ev("0", "") + &ev("1", PROGRESS) + MARK + &ev("0", "") + &ev("1", &progress(5));
    assert_eq!(
        run(&capture, Policy::Verified),
        [
            "cursor 0",
            "deliver 1",
            "resume 1",
            "reconnect 200",
            "skip-replay 0",
            "err StreamRestarted IdReused"
        ]
    );
}

#[test]
fn field_server_lost_its_buffer_and_answers_an_empty_200() {
    let torn = &ev("5", RESULT)[..60];
    let capture = ev("4", PROGRESS) + torn + MARK;
    assert_eq!(
        run(&capture, Policy::Verified),
        ["deliver 4", "resume 4", "reconnect 200", "err ReplayMissed"]
    );
}

#[test]
fn field_typescript_example_store_replays_seen_events_out_of_order() {
    let torn = &ev("st_4_r", RESULT)[..30];
    let capture = ev("st_1_x", &progress(1))
        + &ev("st_2_y", &progress(2))
        + &ev("st_3_z", &progress(3))
        + torn
        + MARK
        + &ev("st_2_y", &progress(2))
        + &ev("st_1_x", &progress(1))
        + &ev("st_3_z", &progress(3))
        + &ev("st_4_r", RESULT);
    assert_eq!(
        run(&capture, Policy::Verified),
        [
            "deliver st_1_x",
            "deliver st_2_y",
            "deliver st_3_z",
            "resume st_3_z",
            "reconnect 200",
            "skip-replay st_2_y",
            "skip-replay st_1_x",
            "skip-replay st_3_z",
            "deliver st_4_r",
            "done"
        ]
    );
}

#[test]
fn field_priming_events_with_crlf_line_ends() {
    let crlf = |s: String| s.replace('\n', "\r\n");
    let capture = crlf("id: 0\nretry: 3000\ndata:\n\n".into())
        + &crlf(ev("1", PROGRESS))
        + &crlf(ev("2", RESULT));
    let mut guard = Guard::new();
    guard.expect_response(RpcId::Number(1));
    assert_eq!(
        drive(&capture, &mut guard),
        ["cursor 0", "deliver 1", "deliver 2", "done"]
    );
    assert_eq!(guard.server_retry(), Some(Duration::from_millis(3000)));
}

#[test]
fn id_only_block_moves_the_cursor_at_disconnect() {
    let capture = ev("1", PROGRESS) + "id: 2\n\n" + MARK + &ev("3", RESULT);
    assert_eq!(
        run(&capture, Policy::Verified),
        [
            "deliver 1",
            "resume 2",
            "reconnect 200",
            "deliver 3",
            "done"
        ]
    );
}

/// The other side of the id-only rule: a disconnect right after an event the guard saw but did not
/// move the cursor for (an exact replay of an older event) leaves the cursor where it was. The guard
/// must remember the id of every event it is handed, not only of those it delivers.
#[test]
fn a_replayed_event_before_the_disconnect_does_not_move_the_cursor_back() {
    // Another content for 3: the first message after a resume must not repeat one in the window.
    let capture = ev("1", PROGRESS)
        + &ev("2", PROGRESS)
        + MARK
        + &ev("3", &progress(3))
        + &ev("1", PROGRESS)
        + MARK
        + &ev("4", RESULT);
    assert_eq!(
        run(&capture, Policy::Verified),
        [
            "deliver 1",
            "deliver 2",
            "resume 2",
            "reconnect 200",
            "deliver 3",
            "skip-replay 1",
            "resume 3",
            "reconnect 200",
            "deliver 4",
            "done"
        ]
    );
}

#[test]
fn refusals_say_what_to_do_and_carry_the_numbers() {
    let torn = &ev("9", RESULT)[..44];
    let capture = ev("8", PROGRESS) + torn;
    let mut guard = GuardConfig::default().policy(Policy::Strict).build();
    guard.expect_response(RpcId::Number(1));
    drive(&capture, &mut guard);
    let err = guard.failure().expect("strict refuses").clone();
    let text = err.to_string();
    assert!(
        text.contains("44 bytes") && text.contains("\"9\"") && text.contains("cursor \"8\""),
        "{text}"
    );
    assert!(
        text.contains("outstanding requests [1]")
            && text.contains("re-issue only what is safe to run again"),
        "{text}"
    );
    // Once refused, the guard keeps refusing until reset.
    assert!(guard.on_replay_timeout(Duration::ZERO).is_err());
    guard.reset();
    assert!(guard.failure().is_none() && guard.cursor().is_none());
    assert_eq!(guard.outstanding(), [RpcId::Number(1)]);
    let restarted = RefusalKind::StreamRestarted {
        got: Some(Bytes::from_static(b"7")),
        why: Restart::Backwards,
    };
    assert!(restarted.to_string().contains("goes back"), "{restarted}");
}

#[test]
fn the_replay_window_does_not_keep_input_chunks_alive() {
    // Ids are slices of their chunks; the dedup window must not hold thousands of chunks.
    let chunks: Vec<Bytes> = (0..200)
        .map(|i| Bytes::from(ev(&i.to_string(), &progress(i)).into_bytes()))
        .collect();
    let mut decoder = Decoder::new();
    let mut guard = Guard::new();
    for chunk in &chunks {
        decoder.feed(chunk.clone());
        while let Some(event) = decoder.next_event() {
            let decision = guard.on_event(event.unwrap()).unwrap();
            assert!(matches!(decision, Decision::Deliver(_)));
        }
    }
    // Only the newest chunks (the cursor, the decoder's last id) may still be referenced.
    let pinned = chunks.iter().filter(|c| !c.is_unique()).count();
    assert!(pinned <= 2, "{pinned} chunks still referenced");
    // ... and the window still knows every id.
    decoder.feed(chunks[3].clone());
    let replay = guard
        .on_event(decoder.next_event().unwrap().unwrap())
        .unwrap();
    assert!(matches!(replay, Decision::Skip(Skip::ExactReplay { .. })));
}

#[test]
fn the_replay_window_is_bounded_and_configurable() {
    let stream = ev("1", &progress(1)) + &ev("2", &progress(2)) + &ev("3", &progress(3));
    // A window of 2 ids: a replay of 3 is recognised; 1 is not, and is refused (its content can
    // no longer be compared; the numbered stream goes back), never delivered again.
    for (replayed, want) in [
        ("3", "skip-replay 3"),
        ("1", "err StreamRestarted Backwards"),
    ] {
        let n = replayed.parse().unwrap();
        let capture = stream.clone() + MARK + &ev(replayed, &progress(n));
        let mut guard = GuardConfig::default().window(2).build();
        guard.expect_response(RpcId::Number(1));
        let got = drive(&capture, &mut guard);
        assert_eq!(got[5], want, "{got:?}");
    }
    // The default window remembers all of them.
    let capture = stream + &ev("1", &progress(1));
    assert_eq!(
        run_with(&capture, Policy::Verified, false)[3],
        "skip-replay 1"
    );
}

// ---- the gate's settings ----

/// A notification nested `depth` levels deep in all (the message object is the first level).
fn nested(depth: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"deep","params":{}{}}}"#,
        "[".repeat(depth - 1),
        "]".repeat(depth - 1)
    )
}

/// What the guard alone (its own gate, `Guard::on_event`) decides about the one event of `capture`.
fn guard_alone(capture: &str, guard: &mut Guard) -> String {
    let mut decoder = Decoder::new();
    decoder.feed(Bytes::from(capture.to_string()));
    let event = decoder.next_event().expect("one event").expect("decoded");
    match guard.on_event(event) {
        Ok(d) => render(&d),
        Err(e) => kind(&e),
    }
}

#[test]
fn the_nesting_limit_is_configurable_and_a_deeper_message_is_refused() {
    // (configured limit, the limit in force)
    for (limit, in_force) in [(None, 1024), (Some(8), 8), (Some(3000), 3000)] {
        let build = || {
            let mut config = GuardConfig::default();
            if let Some(limit) = limit {
                config.max_depth(limit);
            }
            config.build()
        };
        for depth in [in_force - 1, in_force, in_force + 1] {
            let want = if depth <= in_force {
                "deliver 7"
            } else {
                "err InvalidMessage"
            };
            let capture = ev("7", &nested(depth));
            let shipped = drive(&capture, &mut build());
            assert_eq!(shipped[0], want, "stream, limit {limit:?}, depth {depth}");
            let alone = guard_alone(&capture, &mut build());
            assert_eq!(alone, want, "guard alone, limit {limit:?}, depth {depth}");
        }
    }
}

#[test]
fn the_instruction_set_cap_reaches_the_guards_gate_and_the_streams() {
    use ssegate::gate::Isa;
    for &cap in Isa::all() {
        let mut config = GuardConfig::default();
        config.max_isa(cap);
        let guard = config.build();
        assert!(guard.gate_isa() <= cap, "{cap:?}: {:?}", guard.gate_isa());
        let stream = resume::StreamConfig::default().build_with_guard(config.build());
        assert_eq!(stream.gate_isa(), guard.gate_isa(), "{cap:?}");
        // Decisions do not depend on it.
        let mut guard = config.build();
        assert_eq!(guard_alone(&ev("7", RESULT), &mut guard), "deliver 7");
    }
    assert_eq!(Guard::new().gate_isa(), Isa::detect());
}
