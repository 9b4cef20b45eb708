//! `ssegate call` through the built binary, against real servers on loopback: the test kit's MCP
//! server (2025 revisions), behind the fault proxy for cuts, and the official SDKs' servers of
//! `interop/` (`ssegate_testkit::interop`: skipped loudly when not installed, failed under `CI`).
//!
//! Results are compared with what the server sent, byte for byte where the server's bytes are known
//! ([`expected_result`]), and a tool's executions are counted (the loopback server's streams, the
//! interop servers' `count` tool), so a re-run, a torn result or a lost exit status cannot pass.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use ssegate_testkit::hostile::{HostileServer, Misbehaviour};
use ssegate_testkit::interop::{Sdk, start};
use ssegate_testkit::proxy::{Cut, ProxyConfig, RunningProxy};
use ssegate_testkit::server::{
    DEFAULT_RESULT_SIZE, DEFAULT_SEED, RunningServer, ServerConfig, ServerMode, expected_result,
};

/// What one run of `ssegate call` did.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Run {
    /// The start of stdout only (results are megabytes).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut end = self.stdout.len().min(300);
        while !self.stdout.is_char_boundary(end) {
            end -= 1;
        }
        f.debug_struct("Run")
            .field("code", &self.code)
            .field("stdout_bytes", &self.stdout.len())
            .field("stdout_head", &&self.stdout[..end])
            .field("stderr", &self.stderr)
            .finish()
    }
}

impl Run {
    /// The stderr lines.
    fn lines(&self) -> Vec<&str> {
        self.stderr.lines().collect()
    }

    /// stdout as JSON (one line).
    fn json(&self) -> Value {
        assert_eq!(self.stdout.lines().count(), 1, "one line: {self:?}");
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout: {e}: {self:?}"))
    }

    /// The text of the result's first content.
    fn text(&self) -> String {
        self.json()["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no text content: {self:?}"))
            .to_owned()
    }

    /// Exit `code`, and stderr's last line starts with `prefix`.
    fn expect(&self, code: i32, prefix: &str) {
        assert_eq!(self.code, Some(code), "{self:?}");
        let last = self.lines().last().copied().unwrap_or_default();
        assert!(last.starts_with(prefix), "{prefix:?}: {self:?}");
    }
}

fn call(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_ssegate"))
        .arg("call")
        .args(args)
        .output()
        .expect("run ssegate");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("UTF-8 on stdout"),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().expect("a runtime")
}

/// The loopback MCP server in `mode`.
fn server(rt: &tokio::runtime::Runtime, mode: ServerMode) -> RunningServer {
    rt.block_on(async {
        let mut sc = ServerConfig::default();
        sc.mode(mode).retry_ms(5);
        sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
    })
}

/// The fault proxy in front of `upstream`, no hold after a cut.
fn proxy(rt: &tokio::runtime::Runtime, upstream: std::net::SocketAddr) -> RunningProxy {
    rt.block_on(async {
        let mut pc = ProxyConfig::default();
        pc.accept_delay(Duration::ZERO);
        pc.start(upstream).await.unwrap()
    })
}

/// The next connection whose response bytes reach `offset` is cut there, and only that one:
/// whichever connection the command's pooling client sends the call on, and whatever it opens
/// later (a resume, a re-issue) passes whole.
fn cut_once(proxy: &RunningProxy, offset: u64) {
    proxy.set_default_cut(Cut::At(offset));
    proxy.set_max_cuts(Some(proxy.stats().cuts + 1));
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

/// What the interop servers' `big_result` and `charge` receipts carry: 16-byte blocks
/// `<offset as %015x>|` (interop/README.md).
fn pattern(size: usize) -> String {
    let mut s = String::with_capacity(size + 16);
    let mut offset = 0;
    while s.len() < size {
        s.push_str(&format!("{offset:015x}|"));
        offset += 16;
    }
    s.truncate(size);
    s
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
        "ssegate call: setup: client setup: URL ftp://127.0.0.1/mcp: not http(s)",
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
    run.expect(1, "ssegate call: http: HTTP error during server/discover");
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

// ---------------------------------------------------------------------------------------------
// The official SDKs' servers (interop/)

/// `--protocol auto` takes the newest protocol each server speaks: `initialize` with 2025-11-25
/// for `@modelcontextprotocol/sdk` 1.x, 2026-07-28 (stateless) for the Python SDK and
/// `@modelcontextprotocol/server` 2.x; the result is the server's.
#[test]
fn auto_picks_the_newest_protocol_each_sdk_speaks() {
    for (sdk, protocol) in [
        (Sdk::Ts, "protocol 2025-11-25 (session)"),
        (Sdk::Py, "protocol 2026-07-28 (stateless)"),
        (Sdk::Ts2026, "protocol 2026-07-28 (stateless)"),
    ] {
        let Some(server) = start(sdk, &[]) else {
            continue;
        };
        let label = server.label();
        let run = call(&[
            &server.url(),
            "echo",
            "--args",
            r#"{"text": "héllo"}"#,
            "--protocol",
            "auto",
        ]);
        run.expect(
            0,
            &format!("ssegate call: result: {protocol}: tools/call echo"),
        );
        assert_eq!(run.text(), "héllo", "{label}: {run:?}");
        assert_ne!(run.json()["isError"], json!(true), "{label}");
        assert_eq!(run.lines().len(), 1, "{label}: {run:?}");
    }
}

/// A `CallToolResult` with `isError: true` (the TypeScript SDK's answer to arguments that fail its
/// schema) is printed on stdout, and the command exits 1.
#[test]
fn a_tool_error_is_printed_and_exits_one() {
    let Some(server) = start(Sdk::Ts, &[]) else {
        return;
    };
    let run = call(&[&server.url(), "echo", "--args", r#"{"text": 5}"#]);
    run.expect(
        1,
        "ssegate call: tool-error: the tool reported an error (isError: true): MCP error -32602",
    );
    assert_eq!(run.json()["isError"], json!(true), "{run:?}");
    assert!(
        run.stderr.contains("protocol 2025-11-25 (session)"),
        "{run:?}"
    );
}

/// On 2026-07-28 nothing is resumed: `charge` (not idempotent) cut in the middle of its 4 MiB
/// receipt through the proxy is outcome unknown (exit 3) and ran once (`count`); with
/// `--retry always` it is issued again and its intact result printed (it ran twice more). In both
/// of the server's response modes (a JSON body; SSE).
#[test]
fn on_2026_07_28_a_cut_charge_is_outcome_unknown_and_ran_once() {
    let rt = runtime();
    for flags in [&[][..], &["--response-mode", "sse"]] {
        let Some(server) = start(Sdk::Ts2026, flags) else {
            return;
        };
        let label = server.label().to_owned();
        let proxy = proxy(&rt, server.addr());
        let url = format!("http://{}/mcp", proxy.addr());
        let count = || {
            let run = call(&[&url, "count"]);
            run.expect(0, "ssegate call: result: protocol 2026-07-28 (stateless)");
            run.text().parse::<u64>().expect("a number")
        };
        let before = count();
        let size = 4 << 20;
        let args = format!(r#"{{"size": {size}}}"#);

        cut_once(&proxy, 2 << 20);
        let run = call(&[&url, "charge", "--args", &args, "--protocol", "auto"]);
        run.expect(3, "ssegate call: outcome-unknown: tools/call charge");
        assert!(
            run.stderr.contains("[protocol 2026-07-28 (stateless)]"),
            "{label}: {run:?}"
        );
        assert_eq!(run.stdout, "", "{label}");
        assert_eq!(run.lines().len(), 1, "{label}: {run:?}");
        assert_eq!(proxy.stats().cuts, 1, "{label}: the proxy cut");
        assert_eq!(count(), before + 1, "{label}: charge ran once");

        cut_once(&proxy, 2 << 20);
        let run = call(&[&url, "charge", "--args", &args, "--retry", "always"]);
        run.expect(0, "ssegate call: result: protocol 2026-07-28 (stateless)");
        assert!(
            run.stderr.contains("2 attempts, 0 resumes, 1 re-issue,"),
            "{label}: {run:?}"
        );
        let result = run.json();
        assert_eq!(
            result["content"][0]["text"],
            format!("charged {}", before + 3),
            "{label}"
        );
        assert!(
            result["content"][1]["text"] == pattern(size).as_str(),
            "{label}: the receipt is not intact"
        );
        assert_eq!(proxy.stats().cuts, 2, "{label}");
        assert_eq!(count(), before + 3, "{label}: ran once cut, once whole");
        rt.block_on(proxy.shutdown());
    }
}
