//! `ssegate call` through the built binary against the official SDKs' servers of `interop/`
//! (`ssegate_testkit::interop`: skipped loudly when not installed, failed under `CI`). A tool's
//! executions are counted by the servers' `count` tool, so a re-run cannot pass.

mod common;

use serde_json::json;
use ssegate_testkit::interop::{Sdk, pattern, start};

use common::{call, cut_once, proxy, runtime};

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
