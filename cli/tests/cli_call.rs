//! `ssegate call` through the built binary, against real servers on loopback: the test kit's MCP
//! server (the 2025 revisions, and 2026-07-28 in its stateless mode), behind the fault proxy for
//! cuts. (`cli_call_interop.rs` runs the official SDKs' servers.)
//!
//! Results are compared with what the server sent, byte for byte where the server's bytes are known
//! ([`expected_result`]), and a tool's executions are counted (the loopback server's streams, the
//! server's call counter), so a re-run, a torn result or a lost exit status cannot pass.

mod common;

use std::time::{Duration, Instant};

use serde_json::json;
use ssegate_testkit::hostile::{HostileServer, Misbehaviour};
use ssegate_testkit::server::{
    DEFAULT_RESULT_SIZE, DEFAULT_SEED, RunningServer, ServerConfig, ServerMode, TaskSupport,
    expected_result,
};

use common::{call, cut_once, proxy, runtime};

/// The loopback MCP server in `mode`.
fn server(rt: &tokio::runtime::Runtime, mode: ServerMode) -> RunningServer {
    rt.block_on(async {
        let mut sc = ServerConfig::default();
        sc.mode(mode).retry_ms(5);
        sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
    })
}

/// The loopback MCP server in `mode`, with `tasks`.
fn server_with(
    rt: &tokio::runtime::Runtime,
    mode: ServerMode,
    tasks: TaskSupport,
) -> RunningServer {
    rt.block_on(async {
        let mut sc = ServerConfig::default();
        sc.mode(mode).retry_ms(5).tasks(tasks);
        sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
    })
}

/// The `result` object the loopback server sends for `big_result(size, seed)`, exactly as it
/// writes it (the response is `{"jsonrpc":"2.0","id":N,"result":<this>}`).
fn expected_big(size: usize, seed: u64) -> String {
    let response = expected_result(&json!(1), size, seed);
    let text = std::str::from_utf8(&response).expect("UTF-8");
    let prefix = r#"{"jsonrpc":"2.0","id":1,"result":"#;
    assert!(text.starts_with(prefix) && text.ends_with('}'));
    text[prefix.len()..text.len() - 1].to_owned()
}

#[test]
fn a_result_is_printed_exactly_as_the_server_sent_it() {
    let rt = runtime();
    let server = server(&rt, ServerMode::Strict);
    let url = server.url();
    let (size, seed) = (200_000, 7);
    let args = format!(r#"{{"size": {size}, "seed": {seed}}}"#);
    let run = call(&[&url, "big_result", "--args", &args]);
    run.expect(
        0,
        "ssegate call: result: protocol 2025-11-25 (session): tools/call big_result",
    );
    assert!(
        run.stdout == expected_big(size, seed) + "\n",
        "stdout is not the server's result: {} bytes",
        run.stdout.len()
    );
    assert_eq!(run.lines().len(), 1, "one summary line: {run:?}");
    assert!(
        run.stderr.contains("1 attempt, 0 resumes, 0 re-issues"),
        "{run:?}"
    );

    // --verbose: the session, and the progress the server reports.
    let run = call(&[&url, "big_result", "--args", &args, "-v"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout == expected_big(size, seed) + "\n");
    let lines = run.lines();
    assert!(
        lines[0].starts_with("ssegate call: connected: protocol 2025-11-25 (session), session "),
        "{run:?}"
    );
    for k in 1..=3 {
        let line = format!("ssegate call: progress {k}/3: step {k} of 3");
        assert!(lines.contains(&line.as_str()), "{line}: {run:?}");
    }

    // A pinned version is offered in `initialize`; the server chooses it.
    let run = call(&[
        &url,
        "big_result",
        "--args",
        &args,
        "--protocol",
        "2025-06-18",
    ]);
    run.expect(0, "ssegate call: result: protocol 2025-06-18 (session)");
    assert!(run.stdout == expected_big(size, seed) + "\n");
    assert_eq!(server.stats().streams, 3, "the tool ran once per command");
    rt.block_on(server.shutdown());
}

#[test]
fn a_json_rpc_error_exits_one_with_nothing_on_stdout() {
    let rt = runtime();
    let server = server(&rt, ServerMode::Strict);
    let run = call(&[&server.url(), "no_such_tool"]);
    run.expect(1, "ssegate call: rpc-error: -32602: unknown tool");
    assert_eq!(run.stdout, "", "{run:?}");
    assert_eq!(run.lines().len(), 1, "{run:?}");
    assert!(
        run.stderr.contains("[protocol 2025-11-25 (session)]"),
        "{run:?}"
    );
    // An argument out of the server's range: its error, with its data.
    let run = call(&[&server.url(), "big_result", "--args", r#"{"size": -1}"#]);
    run.expect(1, "ssegate call: rpc-error: -32602");
    assert!(run.stderr.contains("\"argument\":\"size\""), "{run:?}");
    assert_eq!(run.stdout, "");
    rt.block_on(server.shutdown());
}

/// A `big_result` cut in the middle of its 4 MiB result by the proxy; the strict server cannot
/// replay it (its budget holds no whole result: `409`), so nothing can be resumed. The tool has no
/// annotations, so the call is not known to be safe to run twice: outcome unknown (exit 3), nothing
/// on stdout, the tool ran once. With `--retry always` the call is re-issued on a new session and
/// the exact result printed.
#[test]
fn a_cut_call_that_cannot_be_resumed_is_outcome_unknown_unless_retry_always() {
    let rt = runtime();
    for retry in ["never", "if-safe"] {
        let server = server(&rt, ServerMode::Strict);
        let proxy = proxy(&rt, server.addr());
        let url = format!("http://{}/mcp", proxy.addr());
        // 2 MiB into a connection is inside the result, whatever (small) answers came before it on
        // that connection.
        cut_once(&proxy, 2 << 20);
        let run = call(&[&url, "big_result", "--retry", retry]);
        run.expect(
            3,
            "ssegate call: outcome-unknown: tools/call big_result: the stream was lost",
        );
        assert_eq!(run.stdout, "", "{retry}: {run:?}");
        assert_eq!(run.lines().len(), 1, "{retry}: {run:?}");
        assert!(run.stderr.contains("(409)"), "{retry}: {run:?}");
        assert!(
            run.stderr.contains("[protocol 2025-11-25 (session)]"),
            "{run:?}"
        );
        assert_eq!(proxy.stats().cuts, 1, "{retry}: the proxy cut");
        assert_eq!(proxy.last_cut().unwrap().offset, 2 << 20);
        assert_eq!(server.stats().streams, 1, "{retry}: the tool ran once");
        assert_eq!(server.stats().misses, 1, "{retry}: the resume missed");
        rt.block_on(proxy.shutdown());
        rt.block_on(server.shutdown());
    }

    let server = server(&rt, ServerMode::Strict);
    let proxy = proxy(&rt, server.addr());
    cut_once(&proxy, 2 << 20);
    let url = format!("http://{}/mcp", proxy.addr());
    let run = call(&[&url, "big_result", "--retry", "always"]);
    run.expect(0, "ssegate call: result: protocol 2025-11-25 (session)");
    assert!(
        run.stdout == expected_big(DEFAULT_RESULT_SIZE, DEFAULT_SEED) + "\n",
        "not the exact result: {} bytes, stderr {}",
        run.stdout.len(),
        run.stderr
    );
    assert!(
        run.stderr
            .contains("2 attempts, 1 resume, 1 re-issue (1 new session)"),
        "{run:?}"
    );
    assert_eq!(proxy.stats().cuts, 1);
    assert_eq!(server.stats().streams, 2, "cut once, re-issued once");
    rt.block_on(proxy.shutdown());
    rt.block_on(server.shutdown());
}

/// The loopback server in its stateless mode (MCP 2026-07-28): `--protocol auto` speaks 2026-07-28;
/// a cut result is never resumed: outcome unknown (exit 3) and the tool ran once (the server's
/// counter); with `--retry always` the call is issued again as a new request and the exact result
/// printed (it ran twice).
#[test]
fn on_a_stateless_server_a_cut_call_runs_again_only_with_retry_always() {
    let rt = runtime();
    let server = server(&rt, ServerMode::Stateless);
    let proxy = proxy(&rt, server.addr());
    let url = format!("http://{}/mcp", proxy.addr());
    cut_once(&proxy, 2 << 20);
    let run = call(&[&url, "big_result"]);
    run.expect(
        3,
        "ssegate call: outcome-unknown: tools/call big_result: the stream was lost",
    );
    assert!(
        run.stderr.contains("[protocol 2026-07-28 (stateless)]"),
        "{run:?}"
    );
    assert_eq!(run.stdout, "", "{run:?}");
    assert_eq!(proxy.stats().cuts, 1, "the proxy cut");
    assert_eq!(server.stats().calls, 1, "the tool ran once");

    cut_once(&proxy, 2 << 20);
    let run = call(&[&url, "big_result", "--retry", "always"]);
    run.expect(0, "ssegate call: result: protocol 2026-07-28 (stateless)");
    let result: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let mut expected: serde_json::Value =
        serde_json::from_str(&expected_big(DEFAULT_RESULT_SIZE, DEFAULT_SEED)).unwrap();
    expected["resultType"] = "complete".into();
    assert!(result == expected, "not the exact result: {run:?}");
    assert!(
        run.stderr.contains("2 attempts, 0 resumes, 1 re-issue,"),
        "{run:?}"
    );
    assert_eq!(proxy.stats().cuts, 2);
    assert_eq!(server.stats().calls, 3, "ran once cut, once whole");
    assert_eq!(server.stats().resumes, 0);
    rt.block_on(proxy.shutdown());
    rt.block_on(server.shutdown());
}

/// `--tasks`: against the loopback task server (2026-07-28) the call runs as a task by default, a
/// read of its result cut in the middle is read again: exit 0, the exact result, the tool ran
/// once. `--tasks require` against a server without tasks and `--tasks never` against one that
/// requires them fail with a typed reason (exit 1), and nothing ran.
#[test]
fn tasks_recover_a_cut_result_and_their_refusals_are_typed() {
    let rt = runtime();
    let server = server(&rt, ServerMode::Tasks);
    let proxy = proxy(&rt, server.addr());
    let url = format!("http://{}/mcp", proxy.addr());
    cut_once(&proxy, 2 << 20);
    let run = call(&[&url, "big_result"]);
    run.expect(0, "ssegate call: result: protocol 2026-07-28 (stateless)");
    assert!(run.stderr.contains(", ran as task "), "{run:?}");
    assert!(
        run.stderr.contains("(io.modelcontextprotocol/tasks, "),
        "{run:?}"
    );
    let result: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let mut expected: serde_json::Value =
        serde_json::from_str(&expected_big(DEFAULT_RESULT_SIZE, DEFAULT_SEED)).unwrap();
    expected["resultType"] = "complete".into();
    assert!(result == expected, "not the exact result: {run:?}");
    assert_eq!(proxy.stats().cuts, 1, "the read was cut");
    assert_eq!(server.stats().calls, 1, "the tool ran once");
    assert!(server.stats().task_reads >= 2, "read again");
    rt.block_on(proxy.shutdown());
    rt.block_on(server.shutdown());

    let plain = server_with(&rt, ServerMode::Stateless, TaskSupport::Off);
    let run = call(&[&plain.url(), "big_result", "--tasks", "require"]);
    run.expect(
        1,
        "ssegate call: tasks: tasks are required, and the server offers none",
    );
    assert_eq!(plain.stats().calls, 0, "nothing was sent");
    rt.block_on(plain.shutdown());

    let strict = server_with(&rt, ServerMode::Stateless, TaskSupport::Require);
    let run = call(&[&strict.url(), "big_result", "--tasks", "never"]);
    run.expect(
        1,
        "ssegate call: tasks: the server runs this call only as a task",
    );
    assert_eq!(strict.stats().calls, 0, "nothing ran");
    rt.block_on(strict.shutdown());
}

/// What the command line says wrong is a usage error (exit 2): nothing is sent.
#[test]
fn usage_errors_exit_two_and_send_nothing() {
    let rt = runtime();
    let server = server(&rt, ServerMode::Strict);
    let proxy = proxy(&rt, server.addr());
    let url = format!("http://{}/mcp", proxy.addr());
    let bad_pem = std::env::temp_dir().join(format!("ssegate-call-{}.pem", std::process::id()));
    std::fs::write(
        &bad_pem,
        "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let bad_pem = bad_pem.to_str().unwrap().to_owned();
    let ours: [(&[&str], &str); 6] = [
        (
            &["--args", r#"{"size": "#],
            "ssegate call: usage: --args \"{\\\"size\\\": \": not JSON: EOF",
        ),
        (
            &["--args", "[1, 2]"],
            "ssegate call: usage: --args \"[1, 2]\": expected a JSON object",
        ),
        (
            &["--header", "no colon"],
            "ssegate call: usage: --header \"no colon\": expected `Name: value`",
        ),
        (
            &["--header", "bad name: x"],
            "ssegate call: usage: --header \"bad name: x\"",
        ),
        (
            &["--cacert", "/nonexistent/ca.pem"],
            "ssegate call: usage: --cacert /nonexistent/ca.pem: ",
        ),
        (
            &["--cacert", &bad_pem],
            "ssegate call: setup: client setup: root certificate",
        ),
    ];
    for (flags, prefix) in ours {
        let mut args = vec![url.as_str(), "big_result"];
        args.extend_from_slice(flags);
        let run = call(&args);
        run.expect(2, prefix);
        assert_eq!(run.stdout, "", "{flags:?}");
        assert_eq!(run.lines().len(), 1, "{flags:?}: {run:?}");
    }
    let run = call(&["ftp://127.0.0.1/mcp", "big_result"]);
    run.expect(
        2,
        "ssegate call: usage: URL \"ftp://127.0.0.1/mcp\": not http(s)",
    );
    // clap's own: exit 2, naming the flag.
    for (flags, name) in [
        (&["--protocol", "2024-11-05"][..], "--protocol"),
        (&["--retry", "sometimes"], "--retry"),
        (&["--timeout", "0"], "--timeout"),
        (&["--timeout", "soon"], "--timeout"),
    ] {
        let mut args = vec![url.as_str(), "big_result"];
        args.extend_from_slice(flags);
        let run = call(&args);
        assert_eq!(run.code, Some(2), "{flags:?}: {run:?}");
        assert!(run.stderr.contains(name), "{flags:?}: {run:?}");
        assert_eq!(run.stdout, "");
    }
    let run = call(&[&url]);
    assert_eq!(run.code, Some(2), "no tool: {run:?}");
    assert_eq!(proxy.stats().connections, 0, "nothing was sent");
    let _ = std::fs::remove_file(&bad_pem);
    rt.block_on(proxy.shutdown());
    rt.block_on(server.shutdown());
}

#[test]
fn an_unreachable_server_exits_one() {
    // Nothing listens on a port just released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let run = call(&[&format!("http://127.0.0.1:{port}/mcp"), "echo"]);
    run.expect(
        1,
        "ssegate call: unreachable: HTTP error during server/discover",
    );
    assert!(run.stderr.to_lowercase().contains("connect"), "{run:?}");
    assert_eq!(run.stdout, "");
    assert_eq!(run.lines().len(), 1, "{run:?}");
}

/// A server that answers the call's head and then trickles a byte a second, never the result: the
/// command ends at its `--timeout`, and since the call was under way the outcome is unknown (exit 3:
/// the tool may have run).
#[test]
fn a_stalled_call_ends_at_the_timeout() {
    let rt = runtime();
    let server = rt
        .block_on(HostileServer::start(Misbehaviour::SlowLoris {
            every: Duration::from_secs(1),
        }))
        .unwrap();
    let t = Instant::now();
    let run = call(&[&server.url(), "big_result", "--timeout", "1.5"]);
    let took = t.elapsed();
    run.expect(
        3,
        "ssegate call: outcome-unknown: no answer within --timeout 1.5 s; the call was under way",
    );
    assert_eq!(run.stdout, "");
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(6),
        "{took:?}"
    );
    rt.block_on(server.shutdown());
}
