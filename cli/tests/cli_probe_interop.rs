//! `ssegate probe --json` through the built binary against the official SDKs' servers of
//! `interop/` (`ssegate_testkit::interop`: skipped loudly when not installed, failed under `CI`):
//! each SDK's classification is what it is known to do (interop/README.md has the table).

mod common;

use serde_json::{Value, json};
use ssegate_testkit::interop::{Sdk, start};

/// Runs `ssegate probe URL --json ARGS...`; the exit status and the report.
fn probe(url: &str, args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec![url, "--json", "--replay-timeout-ms", "2000"];
    all.extend_from_slice(args);
    let out = common::ssegate("probe", &all, b"");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{url}: not a JSON report ({e}): {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report)
}

fn behaviours(rounds: &Value) -> Vec<&str> {
    rounds
        .as_array()
        .expect("rounds")
        .iter()
        .map(|r| r["behaviour"].as_str().expect("behaviour"))
        .collect()
}

#[test]
fn probe_classifies_each_sdk() {
    let big = ["--tool", "big_result", "--args", r#"{"size": 262144}"#];
    // (server, flags, behaviour mid-event and at a boundary, priming, resumable)
    type Case = (Sdk, &'static [&'static str], [&'static str; 2], bool, bool);
    let cases: [Case; 6] = [
        (Sdk::Ts, &[], ["replays-event", "continues"], true, true),
        (Sdk::Py, &[], ["replays-event", "continues"], true, true),
        // FastMCP runs `big_result` (a plain `def`) in a worker thread, so its event loop serves a
        // resume while the tool computes: a resume that reached it before it had read the cut
        // found the request's stream still attached and was ended with no event (`empty`). The
        // probe closes the call's connection at the cut and resumes after a client's reconnect
        // delay; FastMCP then replays the stored result (or, still computing, primes the resumed
        // connection and sends it live).
        (
            Sdk::FastMcp,
            &[],
            ["replays-event", "continues"],
            true,
            true,
        ),
        (Sdk::Py, &["--forgetful"], ["empty", "empty"], true, false),
        // The TS SDK asks the store which stream an id belongs to: unknown, it answers 400.
        (
            Sdk::Ts,
            &["--forgetful"],
            ["conflict", "conflict"],
            true,
            false,
        ),
        (
            Sdk::Py,
            &["--stateless"],
            ["no-ids", "no-ids"],
            false,
            false,
        ),
    ];
    for (sdk, flags, expected, priming, resumable) in cases {
        let Some(server) = start(sdk, flags) else {
            continue;
        };
        let label = server.label();
        // FastMCP's verdict hung on a race: probed three times, each must agree.
        for _ in 1..if sdk == Sdk::FastMcp { 3 } else { 1 } {
            let (_, v) = probe(&server.url(), &big);
            assert_eq!(behaviours(&v["rounds"]), expected, "{label}: {v}");
        }
        let (code, v) = probe(&server.url(), &big);
        assert_eq!(code, Some(if resumable { 0 } else { 1 }), "{label}: {v}");
        assert_eq!(behaviours(&v["rounds"]), expected, "{label}: {v}");
        let info = &v["server"];
        assert_eq!(info["priming"], priming, "{label}");
        assert_eq!(
            v["verdict"],
            if resumable {
                "resumable"
            } else {
                "not-resumable"
            }
        );
        assert_eq!(info["protocolVersion"], "2025-11-25", "{label}");
        // The Python SDK (also under FastMCP) speaks 2026-07-28 too; the 1.x TypeScript SDK
        // does not.
        let versions = if sdk != Sdk::Ts {
            json!(["2026-07-28", "2025-11-25"])
        } else {
            json!(["2025-11-25"])
        };
        assert_eq!(info["protocolVersions"], versions, "{label}");
        assert_eq!(info["tasks"], "none", "{label}");
        let scheme = if priming { "opaque" } else { "none" };
        assert_eq!(info["idScheme"], scheme, "{label}");
        // On 2026-07-28 the Python SDK answers with a JSON body: nothing to resume.
        let stateless: Vec<&Value> = v["versions"]
            .as_array()
            .expect("versions")
            .iter()
            .filter(|r| r["stateless"] == true)
            .collect();
        if sdk != Sdk::Ts {
            assert_eq!(stateless.len(), 1, "{label}: {v}");
            assert_eq!(stateless[0]["version"], "2026-07-28");
            assert_eq!(behaviours(&stateless[0]["rounds"]), ["no-ids"], "{label}");
            let evidence = stateless[0]["rounds"][0]["evidence"].as_str().unwrap();
            assert!(evidence.contains("application/json"), "{evidence}");
        } else {
            assert!(stateless.is_empty(), "{label}: {v}");
        }
    }
    // `@modelcontextprotocol/server` 2.x serving 2026-07-28 only: no 2025-era rounds; its SSE
    // streams carry no event ids.
    if let Some(server) = start(
        Sdk::Ts2026,
        &["--response-mode", "sse", "--only-2026-07-28"],
    ) {
        let (code, v) = probe(&server.url(), &big);
        assert_eq!(code, Some(1), "{v}");
        assert_eq!(v["server"]["protocolVersion"], Value::Null);
        assert_eq!(v["server"]["protocolVersions"], json!(["2026-07-28"]));
        assert_eq!(v["rounds"], json!([]));
        let versions = v["versions"].as_array().expect("versions");
        assert_eq!(versions.len(), 1, "{v}");
        assert_eq!(
            behaviours(&versions[0]["rounds"]),
            ["no-ids", "no-ids"],
            "{v}"
        );
        assert_eq!(versions[0]["idScheme"], "none");
        let advice = v["advice"].as_str().unwrap();
        assert!(advice.starts_with("2026-07-28 only"), "{advice}");
    }
}

/// Against the task servers: the generation of tasks each offers, and a task's result read again
/// after a cut read is the same.
#[test]
fn probe_finds_each_task_servers_reads_repeatable() {
    for (sdk, flags, tasks) in [
        (Sdk::RmcpTasks, &[][..], "io.modelcontextprotocol/tasks"),
        (Sdk::Ts, &["--tasks"], "2025-11-25"),
    ] {
        let Some(server) = start(sdk, flags) else {
            continue;
        };
        let label = server.label();
        let args = ["--tool", "charge", "--args", r#"{"size": 262144}"#];
        let (_, v) = probe(&server.url(), &args);
        assert_eq!(v["server"]["tasks"], tasks, "{label}: {v}");
        assert_eq!(v["server"]["taskReread"], "repeatable", "{label}: {v}");
    }
}

/// The TypeScript SDK's `SSEServerTransport` (2024-11-05 HTTP+SSE): found with no flag, named in
/// the report, not resumable (that transport has no resumption).
#[test]
fn probe_names_the_typescript_sdks_http_sse_transport() {
    let Some(server) = start(Sdk::Ts, &["--legacy"]) else {
        return;
    };
    let (code, report) = probe(
        &server.url(),
        &["--tool", "big_result", "--args", r#"{"size": 262144}"#],
    );
    assert_eq!(report["server"]["transport"], "sse", "{report}");
    assert_eq!(
        report["server"]["protocolVersion"], "2025-11-25",
        "{report}"
    );
    assert_eq!(behaviours(&report["rounds"]), ["no-ids"], "{report}");
    assert_eq!(report["verdict"], "not-resumable", "{report}");
    assert_eq!(code, Some(1), "{report}");
    // The same server on Streamable HTTP is reported as such.
    let Some(server) = start(Sdk::Ts, &[]) else {
        return;
    };
    let (_, report) = probe(
        &server.url(),
        &["--tool", "big_result", "--args", r#"{"size": 262144}"#],
    );
    assert_eq!(report["server"]["transport"], "streamable-http", "{report}");
}
