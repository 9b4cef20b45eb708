//! `ssegate probe` through the built binary against the loopback server in every resume mode: each
//! mode's known behaviour is classified, with the documented JSON keys and exit status.

mod common;

use std::process::Output;

use serde_json::Value;
use ssegate_testkit::server::{ServerConfig, ServerMode};

fn probe(args: &[&str]) -> Output {
    common::ssegate("probe", args, b"")
}

#[test]
fn each_server_mode_is_classified_as_it_behaves() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let expected = [
        (ServerMode::Strict, ["conflict", "conflict"], 1),
        (ServerMode::Restart, ["restarted", "restarted"], 1),
        (ServerMode::Boundary, ["replays-event", "continues"], 0),
        (ServerMode::Empty, ["empty", "empty"], 1),
        (ServerMode::Resend, ["resends-cursor", "resends-cursor"], 0),
    ];
    for (mode, behaviours, status) in expected {
        let server = runtime.block_on(async {
            let mut sc = ServerConfig::default();
            sc.mode(mode).retry_ms(5);
            sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
        });
        let out = probe(&[&server.url(), "--json", "--replay-timeout-ms", "500"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(status),
            "{mode:?}: {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_str(&stdout).unwrap();
        let got: Vec<&str> = v["rounds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["behaviour"].as_str().unwrap())
            .collect();
        assert_eq!(got, behaviours, "{mode:?}: {stdout}");
        assert_eq!(v["rounds"][0]["cut"], "mid-event");
        assert_eq!(v["rounds"][1]["cut"], "boundary");
        assert_eq!(
            v["verdict"],
            if status == 0 {
                "resumable"
            } else {
                "not-resumable"
            }
        );
        let server_info = &v["server"];
        for key in [
            "protocolVersion",
            "session",
            "priming",
            "retryMs",
            "idScheme",
        ] {
            assert!(server_info.get(key).is_some(), "{key} missing: {stdout}");
        }
        assert_eq!(server_info["session"], true);
        assert_eq!(server_info["priming"], true, "{stdout}");
        assert_eq!(server_info["retryMs"], 5);
        assert_eq!(server_info["protocolVersion"], "2025-11-25");
        runtime.block_on(server.shutdown());
    }
}

/// A server that speaks only 2026-07-28: no 2025-era rounds; the rounds on 2026-07-28 find no event
/// ids (as that revision specifies), the verdict is not resumable (exit 1), and the advice says a cut
/// loses the request.
#[test]
fn a_stateless_server_is_probed_on_2026_07_28() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(async {
        let mut sc = ServerConfig::default();
        sc.mode(ServerMode::Stateless).result_size(256 << 10);
        sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
    });
    let out = probe(&[&server.url(), "--json", "--replay-timeout-ms", "500"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        v["server"]["protocolVersions"],
        serde_json::json!(["2026-07-28"])
    );
    assert_eq!(v["server"]["protocolVersion"], Value::Null);
    assert_eq!(v["rounds"], serde_json::json!([]));
    let versions = v["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1, "{stdout}");
    let stateless = &versions[0];
    assert_eq!(stateless["version"], "2026-07-28");
    assert_eq!(stateless["stateless"], true);
    assert_eq!(stateless["idScheme"], "none");
    assert_eq!(stateless["verdict"], "not-resumable");
    let behaviours: Vec<&str> = stateless["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["behaviour"].as_str().unwrap())
        .collect();
    assert_eq!(behaviours, ["no-ids", "no-ids"], "{stdout}");
    assert!(
        v["advice"]
            .as_str()
            .unwrap()
            .starts_with("2026-07-28 only: on 2026-07-28 a cut loses"),
        "{stdout}"
    );
    // Three calls on 2026-07-28 (the baseline and two cut rounds), each run once.
    assert_eq!(server.stats().calls, 3);
    // The text report names the version and its rounds.
    let out = probe(&[&server.url(), "--replay-timeout-ms", "500"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2026-07-28 stateless | priming no | ids none | not resumable"),
        "{text}"
    );
    assert!(text.contains("mid-event no-ids"), "{text}");
    runtime.block_on(server.shutdown());
}

/// A task server (2026-07-28 with the tasks extension): `server.tasks` names the extension, and a
/// task's result read again after a cut read is the same (`taskReread`: `repeatable`); the tool
/// ran once per call (three rounds' calls and the task).
#[test]
fn a_task_servers_cut_reads_are_probed() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(async {
        let mut sc = ServerConfig::default();
        sc.mode(ServerMode::Tasks).result_size(256 << 10);
        sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
    });
    let out = probe(&[&server.url(), "--json", "--replay-timeout-ms", "500"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        v["server"]["tasks"], "io.modelcontextprotocol/tasks",
        "{stdout}"
    );
    assert_eq!(v["server"]["taskReread"], "repeatable", "{stdout}");
    assert_eq!(v["server"]["taskRereadEvidence"], Value::Null);
    let stats = server.stats();
    assert_eq!((stats.calls, stats.tasks_created), (4, 1), "{stats:?}");
    assert!(stats.task_reads >= 3, "{stats:?}");
    let out = probe(&[&server.url(), "--replay-timeout-ms", "500"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "tasks io.modelcontextprotocol/tasks (a cut read of a task reads again: repeatable)"
        ),
        "{text}"
    );
    runtime.block_on(server.shutdown());
}

#[test]
fn a_probe_that_cannot_run_exits_two() {
    // Nothing listens on a port just released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = probe(&[&format!("http://127.0.0.1:{port}/mcp")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ssegate probe:"));
    let out = probe(&["http://127.0.0.1:1/mcp", "--header", "no colon"]);
    assert_eq!(out.status.code(), Some(2));
    for bad in ["0", "-1", "soon", "inf"] {
        let out = probe(&["http://127.0.0.1:1/mcp", &format!("--timeout={bad}")]);
        assert_eq!(out.status.code(), Some(2), "--timeout {bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--timeout"),
            "--timeout {bad}"
        );
    }
}

#[test]
fn probe_over_https_with_cacert_and_a_header() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (server, front) = runtime.block_on(async {
        let mut sc = ServerConfig::default();
        sc.mode(ServerMode::Boundary).retry_ms(5);
        let server = sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let front = ssegate_testkit::tls::TlsFront::start(server.addr(), Some("Bearer t0k".into()))
            .await
            .unwrap();
        (server, front)
    });
    let dir = std::env::temp_dir().join(format!("ssegate-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pem = dir.join("ca.pem");
    std::fs::write(&pem, front.cert_pem()).unwrap();
    let pem = pem.to_str().unwrap();
    let url = front.url();
    let out = probe(&[
        &url,
        "--cacert",
        pem,
        "--header",
        "Authorization: Bearer t0k",
        "--json",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("\"resumable\""), "{stdout}");
    // Without the certificate: the probe cannot run, and says why.
    let out = probe(&[&url, "--header", "Authorization: Bearer t0k"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .to_lowercase()
            .contains("certificate")
    );
    let _ = std::fs::remove_dir_all(&dir);
    drop(front);
    runtime.block_on(server.shutdown());
}
