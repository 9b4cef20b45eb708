//! One test per row of DESIGN.md's guard decision table and per field observation, with byte-exact
//! SSE captures (connections separated by the test-local `MARK` line, which no test body contains),
//! for both policies and for numeric and opaque ids.

use std::time::Duration;

use bytes::Bytes;
use ssegate::check::{Connection, Step, check_guard};
use ssegate::guard::{Config, Decision, Guard, Policy, ReconnectResponse, Skip, Torn};
use ssegate::message::RpcId;
use ssegate::resume::{Answer, Output};

/// Runs `capture` through a fresh guard (`policy`, request id 1 outstanding unless `outstanding`
/// is false) and renders each step as a short word list.
fn run_with(capture: &str, policy: Policy, outstanding: bool) -> Vec<String> {
    let mut guard = Config::default().policy(policy).build();
    if outstanding {
        guard.expect_response(RpcId::Number(1));
    }
    let mut out = Vec::new();
    check_guard(&split(capture), &mut guard, |step| {
        out.extend(render(&step))
    });
    out
}

/// Splits a test capture at each `\n<<reconnect FIELDS>>\n` line (`MARK` is the plain `200
/// text/event-stream` one; FIELDS: `status=N content-type=T retry-after=S`).
fn split(capture: &str) -> Vec<Connection> {
    let mut out = Vec::new();
    let mut response = None;
    let mut rest = capture;
    loop {
        let Some(at) = rest.find("\n<<reconnect") else {
            out.push(Connection::new(
                response,
                Bytes::copy_from_slice(rest.as_bytes()),
            ));
            return out;
        };
        out.push(Connection::new(
            response.take(),
            Bytes::copy_from_slice(&rest.as_bytes()[..at]),
        ));
        let after = &rest[at + "\n<<reconnect".len()..];
        let close = after.find(">>\n").expect("a closed marker");
        let mut r = ReconnectResponse::event_stream();
        for field in after[..close].split_whitespace() {
            match field.split_once('=').expect("key=value") {
                ("status", v) => r.status = v.parse().unwrap(),
                ("content-type", v) => r.content_type = Some(v.into()),
                ("retry-after", v) => r.retry_after = Some(Duration::from_secs(v.parse().unwrap())),
                other => panic!("unknown marker field {other:?}"),
            }
        }
        response = Some(r);
        rest = &after[close + ">>\n".len()..];
    }
}

fn run(capture: &str, policy: Policy) -> Vec<String> {
    run_with(capture, policy, true)
}

fn id(b: &Option<Bytes>) -> String {
    b.as_deref()
        .map_or("-".into(), |b| String::from_utf8_lossy(b).into_owned())
}

fn kind(t: &Torn) -> String {
    let dbg = format!("{t:?}");
    format!("err {}", dbg.split([' ', '{', '(']).next().unwrap_or(""))
}

fn render(step: &Step<'_>) -> Option<String> {
    let output = match step {
        Step::Reconnect {
            response,
            answer: Answer::Read,
        } => return Some(format!("reconnect {}", response.status)),
        Step::Output { output, .. } => *output,
        _ => return None,
    };
    Some(match output {
        Output::Deliver(d) => format!("deliver {}", id(&d.event_id)),
        Output::Cursor(c) => format!("cursor {}", String::from_utf8_lossy(c)),
        Output::Skip(Skip::ExactReplay { id }) => {
            format!("skip-replay {}", String::from_utf8_lossy(id))
        }
        Output::Skip(Skip::DuplicateResponse { rpc_id }) => format!("skip-dup {rpc_id}"),
        Output::Skip(Skip::KeepAlive) => "keepalive".into(),
        Output::Failed(f) => match f.refusal() {
            Some(e) => kind(&e.kind),
            None => format!("fail {f}"),
        },
        Output::Dropped(e) => kind(&e.kind),
        Output::Disconnected(r) if r.needed => format!("resume {}", id(&r.last_event_id)),
        Output::Disconnected(_) => "done".into(),
        _ => return None,
    })
}

const RESULT: &str =
    r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello \"world\""}]}}"#;
const PROGRESS: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}"#;

fn ev(id: &str, data: &str) -> String {
    format!("id: {id}\ndata: {data}\n\n")
}

const MARK: &str = "\n<<reconnect>>\n";

/// Ids for the two shapes: numeric (ordered) and opaque (TypeScript-SDK-like, not ordered).
fn ids(numeric: bool) -> [&'static str; 4] {
    if numeric {
        ["0", "1", "2", "3"]
    } else {
        ["s_9f_a", "s_9f_q", "s_9f_c", "s_9f_z"]
    }
}

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
        let other = PROGRESS.replace("\"progress\":1", "\"progress\":2");
        let capture = ev(a, PROGRESS) + &ev(a, &other);
        assert_eq!(
            run(&capture, Policy::Verified),
            [format!("deliver {a}"), "err StreamRestarted".into()]
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
}

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

#[test]
fn reconnect_404_is_session_expired() {
    let capture = ev("1", PROGRESS) + "\n<<reconnect status=404 content-type=application/json>>\n";
    assert_eq!(
        run(&capture, Policy::Verified),
        ["deliver 1", "resume 1", "err SessionExpired"]
    );
}

#[test]
fn reconnect_409_410_and_error_frames_are_replay_unavailable_with_retry_after() {
    for status in [409, 410] {
        let capture =
            ev("1", PROGRESS) + &format!("\n<<reconnect status={status} retry-after=3>>\n");
        assert_eq!(
            run(&capture, Policy::Verified),
            ["deliver 1", "resume 1", "err ReplayUnavailable"]
        );
    }
    let frame =
        "event: error\ndata: {\"error\":\"replay_unavailable\",\"retry_after_ms\":1500}\n\n";
    let capture = ev("1", PROGRESS) + MARK + frame;
    assert_eq!(
        run(&capture, Policy::Verified),
        [
            "deliver 1",
            "resume 1",
            "reconnect 200",
            "err ReplayUnavailable"
        ]
    );

    let mut guard = Guard::new();
    guard.expect_response(RpcId::Number(1));
    let r = ReconnectResponse {
        status: 409,
        retry_after: Some(Duration::from_secs(3)),
        content_type: None,
    };
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
fn reconnect_busy_is_transient_and_does_not_poison_the_guard() {
    let mut guard = Guard::new();
    let r = ReconnectResponse {
        status: 503,
        retry_after: Some(Duration::from_secs(2)),
        content_type: None,
    };
    let err = guard.on_reconnect(&r).unwrap_err();
    assert!(!err.must_renegotiate());
    assert_eq!(guard.retry(), Duration::from_secs(2));
    assert!(guard.failure().is_none());
}

#[test]
fn reconnect_200_that_ends_with_no_event_is_replay_missed() {
    let capture = ev("1", PROGRESS) + MARK;
    assert_eq!(
        run(&capture, Policy::Verified),
        ["deliver 1", "resume 1", "reconnect 200", "err ReplayMissed"]
    );
    // Without an outstanding request, an empty resume is not an error.
    assert_eq!(
        run_with(&capture, Policy::Verified, false),
        ["deliver 1", "done", "reconnect 200", "done"]
    );
}

#[test]
fn reconnect_with_no_event_within_the_timeout_is_replay_missed() {
    let mut guard = Guard::new();
    guard.expect_response(RpcId::String("req-9".into()));
    check_guard(&split(&ev("1", PROGRESS)), &mut guard, |_| {});
    let err = guard
        .on_replay_timeout(Duration::from_secs(10))
        .unwrap_err();
    assert!(matches!(err.kind, Torn::ReplayMissed { waited: Some(_) }));
    assert!(err.to_string().contains("10000 ms"), "{err}");
}

#[test]
fn reconnect_that_answers_json_is_unexpected() {
    let capture = ev("1", PROGRESS) + "\n<<reconnect status=200 content-type=application/json>>\n";
    assert_eq!(
        run(&capture, Policy::Verified),
        ["deliver 1", "resume 1", "err UnexpectedResponse"]
    );
}

#[test]
fn first_event_after_resume_numeric_next_continues_skip_ahead_is_a_gap() {
    let ok = ev("1", PROGRESS) + MARK + &ev("2", RESULT);
    assert_eq!(
        run(&ok, Policy::Verified),
        [
            "deliver 1",
            "resume 1",
            "reconnect 200",
            "deliver 2",
            "done"
        ]
    );
    let gap = ev("1", PROGRESS) + MARK + &ev("3", RESULT);
    assert_eq!(
        run(&gap, Policy::Verified),
        ["deliver 1", "resume 1", "reconnect 200", "err Gap"]
    );
    // The same with rmcp-shaped `<n>/<stream>` and `<stream>-<n>` ids.
    let gap = ev("1/0", PROGRESS) + MARK + &ev("3/0", RESULT);
    assert_eq!(
        run(&gap, Policy::Verified),
        ["deliver 1/0", "resume 1/0", "reconnect 200", "err Gap"]
    );
    let gap = ev("s1-1", PROGRESS) + MARK + &ev("s1-3", RESULT);
    assert_eq!(
        run(&gap, Policy::Verified),
        ["deliver s1-1", "resume s1-1", "reconnect 200", "err Gap"]
    );
}

#[test]
fn first_event_after_resume_that_skips_the_interrupted_event_is_a_gap() {
    for numeric in [true, false] {
        let [a, b, c, _] = ids(numeric);
        let torn = &ev(b, PROGRESS)[..30];
        let capture = ev(a, PROGRESS) + torn + MARK + &ev(c, RESULT);
        let got = run(&capture, Policy::Verified);
        assert_eq!(
            got,
            [
                format!("deliver {a}"),
                format!("resume {a}"),
                "reconnect 200".into(),
                "err Gap".into()
            ]
        );
    }
}

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

// ---- field observations (DESIGN.md, first table) ----

#[test]
fn field_server_replays_the_interrupted_event_whole_under_the_same_id() {
    let big = RESULT.replace("hello", &"x".repeat(5000));
    let torn = &ev("s1-2", &big)[..2000];
    let capture = ev("s1-0", "") + &ev("s1-1", PROGRESS) + torn + MARK + &ev("s1-2", &big);
    let mut delivered = Vec::new();
    let mut guard = Guard::new();
    guard.expect_response(RpcId::Number(1));
    check_guard(&split(&capture), &mut guard, |s| {
        if let Step::Output {
            output: Output::Deliver(d),
            ..
        } = s
        {
            delivered.push(d.message.data().contiguous());
        }
    });
    assert_eq!(delivered, [Bytes::from(PROGRESS), Bytes::from(big)]);
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
fn field_server_lost_its_buffer_and_restarts_with_a_new_id() {
    // Our loopback server's ids: `<stream>-<seq>`; the restart opens stream 7 with a priming event.
    let torn = &ev("s3-2", RESULT)[..60];
    let capture = ev("s3-0", "")
        + &ev("s3-1", PROGRESS)
        + torn
        + MARK
        + &ev("s7-0", "")
        + &ev("s7-1", PROGRESS);
    let got = run(&capture, Policy::Verified);
    assert_eq!(
        got,
        [
            "cursor s3-0",
            "deliver s3-1",
            "resume s3-1",
            "reconnect 200",
            "err StreamRestarted"
        ]
    );
    // Opaque ids: a fresh priming event instead of the interrupted event.
    let torn = &ev("b_2", RESULT)[..60];
    let capture =
        ev("a_0", "") + &ev("k_1", PROGRESS) + torn + MARK + &ev("q_0", "") + &ev("q_1", RESULT);
    let got = run(&capture, Policy::Verified);
    assert_eq!(
        got,
        [
            "cursor a_0",
            "deliver k_1",
            "resume k_1",
            "reconnect 200",
            "err StreamRestarted"
        ]
    );
    // Numeric ids that start again from zero: the re-sent priming event is indistinguishable from a
    // replay, the first event with new content under an old id is not.
    let rerun = PROGRESS.replace("\"progress\":1", "\"progress\":5");
    let capture = ev("0", "") + &ev("1", PROGRESS) + MARK + &ev("0", "") + &ev("1", &rerun);
    let got = run(&capture, Policy::Verified);
    assert_eq!(
        got,
        [
            "cursor 0",
            "deliver 1",
            "resume 1",
            "reconnect 200",
            "skip-replay 0",
            "err StreamRestarted"
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
    let p = |n: u32| PROGRESS.replace("\"progress\":1", &format!("\"progress\":{n}"));
    let torn = &ev("st_4_r", RESULT)[..30];
    let capture = ev("st_1_x", &p(1))
        + &ev("st_2_y", &p(2))
        + &ev("st_3_z", &p(3))
        + torn
        + MARK
        + &ev("st_2_y", &p(2))
        + &ev("st_1_x", &p(1))
        + &ev("st_3_z", &p(3))
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
    let mut out = Vec::new();
    check_guard(&split(&capture), &mut guard, |s| out.extend(render(&s)));
    assert_eq!(out, ["cursor 0", "deliver 1", "deliver 2", "done"]);
    assert_eq!(guard.retry(), Duration::from_millis(3000));
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

#[test]
fn refusals_say_what_to_do_and_carry_the_numbers() {
    let torn = &ev("9", RESULT)[..44];
    let capture = ev("8", PROGRESS) + torn;
    let mut guard = Config::default().policy(Policy::Strict).build();
    guard.expect_response(RpcId::Number(1));
    let mut err = None;
    check_guard(&split(&capture), &mut guard, |s| {
        if let Step::Output {
            output: Output::Failed(f),
            ..
        } = s
        {
            err = f.refusal().cloned();
        }
    });
    let err = err.expect("strict refuses");
    let text = err.to_string();
    assert!(
        text.contains("44 bytes") && text.contains("\"9\"") && text.contains("cursor \"8\""),
        "{text}"
    );
    assert!(
        text.contains("outstanding requests [1]") && text.contains("renegotiate"),
        "{text}"
    );
    // Once refused, the guard keeps refusing until reset.
    assert!(guard.on_replay_timeout(Duration::ZERO).is_err());
    guard.reset();
    assert!(guard.failure().is_none() && guard.cursor().is_none());
    assert_eq!(guard.outstanding(), [RpcId::Number(1)]);
}

#[test]
fn the_replay_window_does_not_keep_input_chunks_alive() {
    // Ids are slices of their chunks; the dedup window must not hold thousands of chunks.
    let chunks: Vec<Bytes> = (0..200)
        .map(|i| Bytes::from(ev(&i.to_string(), PROGRESS).into_bytes()))
        .collect();
    let mut decoder = ssegate::sse::Decoder::new();
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
    let p = |n: u32| PROGRESS.replace("\"progress\":1", &format!("\"progress\":{n}"));
    let stream = ev("1", &p(1)) + &ev("2", &p(2)) + &ev("3", &p(3));
    // A window of 2 ids: a replay of id 3 is recognised, a replay of id 1 is not and is refused
    // (its content can no longer be compared), never delivered again.
    for (replayed, want) in [("3", "skip-replay 3"), ("1", "err StreamRestarted")] {
        let n: u32 = replayed.parse().unwrap();
        let capture = stream.clone() + &ev(replayed, &p(n));
        let mut guard = Config::default().window(2).build();
        let mut out = Vec::new();
        check_guard(&split(&capture), &mut guard, |s| out.extend(render(&s)));
        assert_eq!(out[3], want);
    }
    // The default window remembers all of them.
    let capture = stream + &ev("1", &p(1));
    assert_eq!(
        run_with(&capture, Policy::Verified, false)[3],
        "skip-replay 1"
    );
}
