//! `ssegate check` through the built binary: one line per step, a summary, exit status 1 on refusal.

use std::process::Output;

mod common;

fn check(args: &[&str], input: &[u8]) -> Output {
    common::ssegate("check", args, input)
}

const FIRST: &str = "id: s1-0\nretry: 500\ndata:\n\nid: s1-1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\nid: s1-2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"te";

/// A v2 capture: the first connection, then `(header fields, body)` for each resumption.
fn capture(first: &str, resumes: &[(&str, &str)]) -> String {
    let mut out = format!(
        "#ssegate-capture v2\n#connection bytes={}\n{first}\n",
        first.len()
    );
    for (fields, body) in resumes {
        out += &format!("#connection bytes={} {fields}\n{body}\n", body.len());
    }
    out
}

#[test]
fn a_verified_resume_is_reported_step_by_step_and_exits_zero() {
    let capture = capture(
        FIRST,
        &[(
            "status=200",
            "id: s1-2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n",
        )],
    );
    let out = check(&["--request-id", "1"], capture.as_bytes());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 7, "{stdout}");
    assert!(lines[0].contains("id=\"s1-0\"") && lines[0].ends_with("cursor := \"s1-0\""));
    assert!(lines[1].contains("verdict=complete -> deliver (Notification)"));
    assert!(
        lines[2].contains("cut inside an event")
            && lines[2].contains("resume from \"s1-1\" after 500 ms")
    );
    assert!(lines[3].starts_with("reconnect 200"));
    assert!(lines[4].contains("deliver (Response 1)"));
    assert_eq!(
        lines[6],
        "summary: connections=2 events=3 messages=2 bytes=123 skipped=0 errors=0 unanswered=0"
    );
}

#[test]
fn the_appended_replay_and_a_409_are_refused_with_exit_one() {
    // A capture of what an appending client would have assembled: a prefix, then the whole event.
    let appended = "id: 9\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"text\":\"abc{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"text\":\"abcdef\"}}\n\n";
    let out = check(&[], appended.as_bytes());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("verdict=") && stdout.contains("REFUSE"),
        "{stdout}"
    );
    assert!(stdout.contains("errors=1"), "{stdout}");

    let capture = capture(FIRST, &[("status=409 retry-after=2", "")]);
    let out = check(&["--request-id", "1"], capture.as_bytes());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("reconnect 409") && stdout.contains("retry after 2000 ms"),
        "{stdout}"
    );
    assert!(stdout.contains("outstanding requests [1]"), "{stdout}");

    let out = check(
        &["--policy", "strict", "--request-id", "1"],
        FIRST.as_bytes(),
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("strict policy refuses"), "{stdout}");
}

#[test]
fn a_server_cannot_forge_a_connection_boundary() {
    // To SSE these are comment lines a server may send; in a one-connection capture they are body.
    let body = "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n#--ssegate-reconnect status=409\n#connection bytes=0 status=409\n: x\n\n";
    let out = check(&["--request-id", "1"], body.as_bytes());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("connections=1 ") && stdout.contains("messages=1 "),
        "{stdout}"
    );
    // Inside a v2 capture the body is taken by length, marker-like lines included.
    let out = check(&["--request-id", "1"], capture(body, &[]).as_bytes());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("connections=1 "), "{stdout}");
}

#[test]
fn a_truncated_capture_is_an_input_error() {
    let bad = "#ssegate-capture v2\n#connection bytes=999\nid: 1\n";
    let out = check(&[], bad.as_bytes());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("announces 999 bytes"), "{stderr}");
}

/// Captures of correct servers that once were falsely refused are accepted; faulty servers' are
/// refused (another stream's events after a resume among them).
#[test]
fn field_captures_accept_correct_servers_and_refuse_faulty_ones() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/captures");
    for (file, accepted) in [
        ("session-counter.sse", true),
        ("priming-on-resume.sse", true),
        ("uuid-digit-groups.sse", true),
        ("faulty-restart.sse", false),
        ("faulty-skips-interrupted.sse", false),
        ("foreign-stream.sse", false),
        ("foreign-stream-after-priming.sse", false),
    ] {
        let capture = std::fs::read(format!("{dir}/{file}"))
            .unwrap_or_else(|e| panic!("{file} must exist under tests/data/captures: {e}"));
        let out = check(&["--request-id", "7"], &capture);
        let stdout = String::from_utf8(out.stdout).unwrap();
        if accepted {
            assert_eq!(out.status.code(), Some(0), "{file}: {stdout}");
            assert!(stdout.contains("deliver (Response 7)"), "{file}: {stdout}");
            assert!(stdout.contains("errors=0 unanswered=0"), "{file}: {stdout}");
        } else {
            assert_eq!(out.status.code(), Some(1), "{file}: {stdout}");
            assert!(
                stdout.contains("REFUSE") && stdout.contains("unanswered=1"),
                "{file}: {stdout}"
            );
        }
    }
}

/// A second, different response to one request id is refused without `--request-id`: the first is
/// delivered, the second refused with the same words as when the id is registered; an identical
/// second copy is skipped.
#[test]
fn a_second_different_response_is_refused_without_request_ids() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/captures/faulty-second-response.sse"
    );
    let out = check(&[file], b"");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 6, "{stdout}");
    // The server's own request with id 2 is not a response.
    assert!(lines[2].ends_with("deliver (Request 2)"), "{stdout}");
    assert!(
        lines[3].contains("id=\"4\"") && lines[3].ends_with("deliver (Response 2)"),
        "{stdout}"
    );
    assert!(
        lines[4].contains("id=\"5\"")
            && lines[4].contains(
                "REFUSE: a second, different response to request 2 arrived in event \"5\""
            ),
        "{stdout}"
    );
    assert_eq!(
        lines[5],
        "summary: connections=1 events=5 messages=3 bytes=212 skipped=0 errors=1 unanswered=0"
    );
    // Registering the request changes nothing: one typed refusal for both.
    let registered = check(&["--request-id", "2", file], b"");
    assert_eq!(registered.status.code(), Some(1));
    assert_eq!(String::from_utf8(registered.stdout).unwrap(), stdout);

    // An identical second copy is skipped, not delivered twice.
    let response = "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}";
    let body = format!("id: 1\ndata: {response}\n\nid: 2\ndata: {response}\n\n");
    let out = check(&[], body.as_bytes());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("deliver (Response 2)")
            && stdout.contains("skip: duplicate response to request 2")
            && stdout.contains("messages=1 bytes=36 skipped=1 errors=0"),
        "{stdout}"
    );
}

#[test]
fn the_nesting_limit_and_the_instruction_set_cap_are_options() {
    // A result nested 6 levels deep (object, result, content array, item, two arrays).
    let deep =
        "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"x\":[[]]}]}}\n\n";
    for isa in ["portable", "avx2", "avx512"] {
        for (depth, code) in [("6", 0), ("5", 1)] {
            let out = check(&["--max-depth", depth, "--max-isa", isa], deep.as_bytes());
            let stdout = String::from_utf8(out.stdout).unwrap();
            assert_eq!(out.status.code(), Some(code), "{isa} {depth}: {stdout}");
            let verdict = if code == 0 { "complete" } else { "invalid" };
            assert!(stdout.contains(&format!("verdict={verdict}")), "{stdout}");
        }
    }
    let out = check(&[], deep.as_bytes());
    assert_eq!(out.status.code(), Some(0));
}
