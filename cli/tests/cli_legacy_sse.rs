//! `ssegate bridge`, `call` and `probe` against the test kit's server on the 2024-11-05 HTTP+SSE
//! transport (`ssegate_testkit::legacy`): found with no flag but the URL, a 4 MiB result intact, a
//! stream cut with a call in flight answered outcome unknown (the tool not run again), and the
//! `--transport` strategies.

mod common;

use std::time::Duration;

use serde_json::{Value, json};
use ssegate_testkit::legacy::{LegacyConfig, RunningLegacyServer};
use ssegate_testkit::server::{DEFAULT_SEED, ServerConfig, expected_result};

use common::host::{Host, tool_names};
use common::{call, runtime, ssegate};

// The oracle: the wire contract's code (`ssegate::contract`), stated here independently.
/// Outcome unknown: a `tools/call` whose answer was lost; the tool may have run.
const OUTCOME_UNKNOWN: i64 = -32050;

fn legacy(rt: &tokio::runtime::Runtime) -> RunningLegacyServer {
    rt.block_on(async {
        LegacyConfig::default()
            .start("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap()
    })
}

fn expected_big(size: usize, seed: u64) -> Value {
    let response: Value = serde_json::from_slice(&expected_result(&json!(1), size, seed)).unwrap();
    response["result"].clone()
}

#[test]
fn the_bridge_finds_http_sse_with_no_flag_and_serves_a_host() {
    let rt = runtime();
    let server = legacy(&rt);
    let mut host = Host::start(&[&server.url()]);
    let init = host.initialize("2025-06-18");
    assert_eq!(
        init["serverInfo"]["name"], "ssegate-testkit-legacy",
        "{init}"
    );
    let tools = host.request(json!("list"), "tools/list", json!({}));
    assert!(
        tool_names(&tools).contains(&"big_result".to_owned()),
        "{tools}"
    );
    let size = 4 << 20;
    let response = host.request(
        json!(7),
        "tools/call",
        json!({"name": "big_result", "arguments": {"size": size, "seed": DEFAULT_SEED}}),
    );
    assert_eq!(response["result"], expected_big(size, DEFAULT_SEED));
    // The server asks the host through the bridge: ping is answered by the bridge itself.
    let pinged = host.request(
        json!(8),
        "tools/call",
        json!({"name": "ping_client", "arguments": {}}),
    );
    assert_eq!(pinged["result"]["content"][0]["text"], "pinged", "{pinged}");
    // A stream cut with a call in flight: outcome unknown, never sent again, and the next call
    // is served on a new session.
    let cut = host.request(
        json!(9),
        "tools/call",
        json!({"name": "cut_stream", "arguments": {}}),
    );
    assert_eq!(cut["error"]["code"], OUTCOME_UNKNOWN, "{cut}");
    host.expect_silence(Duration::from_millis(300));
    assert_eq!(server.calls("cut_stream"), 1);
    let after = host.request(
        json!(10),
        "tools/call",
        json!({"name": "progress", "arguments": {"count": 2}}),
    );
    assert_eq!(
        after["result"]["content"][0]["text"], "done: 2 steps",
        "{after}"
    );
    assert_eq!(server.sessions_opened(), 2);
    host.close_stdin();
    let (code, _) = host.wait(Duration::from_secs(5));
    assert_eq!(code, Some(0), "{}", host.stderr());
}

#[test]
fn call_takes_the_transport_flag() {
    let rt = runtime();
    let server = legacy(&rt);
    let url = server.url();
    let run = call(&[&url, "progress", "--args", "{\"count\": 2}"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.text(), "done: 2 steps");
    let run = call(&[
        "--transport",
        "sse-only",
        &url,
        "progress",
        "--args",
        "{\"count\": 1}",
    ]);
    assert_eq!(run.code, Some(0), "{run:?}");
    // http-only never opens the event stream: the POST's 404 is the answer.
    let run = call(&["--transport", "http-only", &url, "progress"]);
    assert_ne!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("404"), "{run:?}");
    let run = call(&["--transport", "sideways", &url, "progress"]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr.contains("sse-first"),
        "the possible values are listed: {run:?}"
    );
}

#[test]
fn probe_reports_the_transport_it_found() {
    let rt = runtime();
    let server = legacy(&rt);
    let out = ssegate(
        "probe",
        &[
            &server.url(),
            "--json",
            "--tool",
            "progress",
            "--args",
            "{\"count\": 1}",
        ],
        b"",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["server"]["transport"], "sse", "{v}");
    assert_eq!(v["verdict"], "not-resumable", "{v}");
    assert!(v["advice"].as_str().unwrap().contains("HTTP+SSE"), "{v}");
    assert_eq!(out.status.code(), Some(1));

    // Streamable HTTP is still probed as such, whichever is tried first.
    let streamable = rt.block_on(async {
        ServerConfig::default()
            .start("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap()
    });
    for transport in ["http-first", "sse-first"] {
        let out = ssegate(
            "probe",
            &[
                &streamable.url(),
                "--json",
                "--replay-timeout-ms",
                "500",
                "--transport",
                transport,
            ],
            b"",
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        assert_eq!(
            v["server"]["transport"], "streamable-http",
            "{transport}: {v}"
        );
        assert!(!v["rounds"].as_array().unwrap().is_empty(), "{v}");
    }
}
