//! `ssegate bridge` in front of the official SDKs' servers of `interop/` (started with
//! `ssegate_testkit::interop`: skipped loudly when not installed, failed under `CI`), driven by the
//! test host of `common::host` and by the SDKs' own stdio clients as hosts
//! (`interop/ts/bridge_host.mjs`, `interop/py/bridge_host.py`).
//!
//! The servers' `big_result` text is a pure function of its size (`interop::pattern`) and `count`
//! counts the runs of `charge`, so a torn, glued, doubled or re-run result cannot pass.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use ssegate_testkit::interop::{Sdk, interop_dir, pattern, start};

use common::host::Host;

/// The tools every interop server has.
const TOOLS: [&str; 5] = ["big_result", "charge", "count", "echo", "progress"];

/// The name each interop server declares.
fn server_name(sdk: Sdk) -> &'static str {
    match sdk {
        Sdk::Ts => "ssegate-interop-ts",
        Sdk::Py => "ssegate-interop-py",
        other => panic!("no name known for {other:?}"),
    }
}

fn tools_call(id: Value, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

/// The `text` of content `index` of a response's result; panics (without megabytes) otherwise.
fn text(response: &Value, index: usize) -> &str {
    response["result"]["content"][index]["text"]
        .as_str()
        .unwrap_or_else(|| {
            let shown = response.to_string();
            panic!(
                "no text content {index}: {}",
                &shown[..shown.len().min(500)]
            )
        })
}

/// `text` is the interop pattern of `size` bytes; the message names the first difference.
fn assert_pattern(text: &str, size: usize, what: &str) {
    let expected = pattern(size);
    if text != expected {
        let at = text
            .bytes()
            .zip(expected.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(text.len().min(size));
        let around = |s: &str| {
            s.get(at.saturating_sub(16)..(at + 16).min(s.len()))
                .map(str::to_owned)
        };
        panic!(
            "{what}: {} bytes, expected {}; first difference at {at}: {:?}, expected {:?}",
            text.len(),
            expected.len(),
            around(text),
            around(&expected)
        );
    }
}

/// The names of a `tools/list` response's tools; every interop tool is there.
fn assert_lists_the_tools(listed: &Value, what: &str) {
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no tools: {listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default())
        .collect();
    for tool in TOOLS {
        assert!(
            names.contains(&tool),
            "{what}: {tool} missing from {names:?}"
        );
    }
}

/// A request without `params`, as the Python SDK sends `tools/list`: the server's answer.
fn assert_bare_request_answered(host: &mut Host, what: &str) {
    host.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"bare\",\"method\":\"tools/list\"}\n");
    let listed = host.response(&json!("bare"));
    assert_lists_the_tools(&listed, &format!("{what}: tools/list without params"));
}

/// A `big_result` of each size arrives whole under its id.
fn assert_big_results(host: &mut Host, sizes: &[usize], what: &str) {
    for &size in sizes {
        let id = json!(format!("big-{size}"));
        let response = host.request(
            id.clone(),
            "tools/call",
            tools_call(id, "big_result", json!({"size": size}))["params"].clone(),
        );
        assert_ne!(response["result"]["isError"], json!(true), "{what}");
        assert_eq!(
            response["result"]["content"].as_array().map(Vec::len),
            Some(1),
            "{what}: one content"
        );
        assert_pattern(
            text(&response, 0),
            size,
            &format!("{what}: big_result {size}"),
        );
    }
}

/// A call with the host's progress token: the server's three notifications reach the host with
/// that token, in order, before the result.
fn assert_progress(host: &mut Host, what: &str) {
    host.seen.clear();
    let mut call = tools_call(json!(7), "progress", json!({"count": 3}));
    call["params"]["_meta"] = json!({"progressToken": "p7"});
    host.send(&call);
    let response = host.response(&json!(7));
    assert_eq!(text(&response, 0), "done 3", "{what}");
    let progress: Vec<(Value, Value)> = host
        .seen
        .drain(..)
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| {
            (
                m["params"]["progressToken"].clone(),
                m["params"]["progress"].clone(),
            )
        })
        .collect();
    let expected: Vec<(Value, Value)> = (1..=3).map(|i| (json!("p7"), json!(i))).collect();
    // Python's SDK sends the progress as a float (1.0): compare as numbers.
    let as_numbers = |v: &[(Value, Value)]| -> Vec<(Value, Option<f64>)> {
        v.iter().map(|(t, p)| (t.clone(), p.as_f64())).collect()
    };
    assert_eq!(
        as_numbers(&progress),
        as_numbers(&expected),
        "{what}: three notifications with the host's token, before the result"
    );
}

/// `charge` run once, counted.
fn count(host: &mut Host, what: &str) -> u64 {
    let response = host.request(
        json!("count"),
        "tools/call",
        json!({"name": "count", "arguments": {}}),
    );
    text(&response, 0)
        .parse()
        .unwrap_or_else(|e| panic!("{what}: count: {e}: {response}"))
}

/// Two calls in flight: a slow `progress` (1 s) and a `charge` with a 1 MiB receipt sent after
/// it. Each is answered under its own id, the fast one first (they ran side by side), and
/// `charge` ran once.
fn assert_two_in_flight(host: &mut Host, what: &str) {
    let before = count(host, what);
    host.send(&tools_call(
        json!("slow"),
        "progress",
        json!({"count": 2, "delay_ms": 500}),
    ));
    host.send(&tools_call(
        json!("fast"),
        "charge",
        json!({"size": 1 << 20}),
    ));
    let mut answered = Vec::new();
    let started = Instant::now();
    while answered.len() < 2 {
        let message = host.recv();
        if message.get("method").is_none() {
            answered.push(message);
        }
    }
    let ids: Vec<&Value> = answered.iter().map(|m| &m["id"]).collect();
    assert_eq!(
        ids,
        [&json!("fast"), &json!("slow")],
        "{what}: the fast call is answered first, within {:?}",
        started.elapsed()
    );
    assert_eq!(text(&answered[1], 0), "done 2", "{what}");
    assert_eq!(
        text(&answered[0], 0),
        format!("charged {}", before + 1),
        "{what}"
    );
    assert_pattern(
        text(&answered[0], 1),
        1 << 20,
        &format!("{what}: charge's receipt"),
    );
    assert_eq!(count(host, what), before + 1, "{what}: charge ran once");
}

/// `needle` on the bridge's stderr within 5 s (read on a thread of its own, it may lag stdout).
fn assert_logged(host: &Host, needle: &str, what: &str) {
    let started = Instant::now();
    while !host.stderr().contains(needle) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{what}: {needle:?} not on stderr: {}",
            host.stderr()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// End of stdin: exit 0 within a second.
fn assert_exits_on_eof(host: &mut Host, what: &str) {
    host.close_stdin();
    let (code, took) = host.wait(Duration::from_secs(5));
    assert_eq!(code, Some(0), "{what}: {}", host.stderr());
    assert!(took < Duration::from_secs(1), "{what}: exit took {took:?}");
}

#[test]
fn a_2025_host_through_the_bridge_to_the_typescript_sdk_server() {
    let Some(server) = start(Sdk::Ts, &[]) else {
        return;
    };
    let what = server.label().to_owned();
    let url = server.url();
    let mut host = Host::start(&[&url, "-v"]);
    let init = host.initialize("2025-06-18");
    assert_eq!(init["protocolVersion"], "2025-06-18", "{what}: {init}");
    assert_eq!(
        init["serverInfo"]["name"],
        server_name(Sdk::Ts),
        "{what}: {init}"
    );
    assert!(init["capabilities"]["tools"].is_object(), "{what}: {init}");
    // The TypeScript SDK 1.x takes `initialize` at 2025-11-25, with a session.
    assert_logged(
        &host,
        &format!("connected to {url}: protocol 2025-11-25, session "),
        &what,
    );

    // A line that is not JSON: -32700 with id null, and the bridge goes on.
    host.send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \n");
    let error = host.response(&Value::Null);
    assert_eq!(error["id"], Value::Null, "{what}: {error}");
    assert_eq!(error["error"]["code"], -32700, "{what}: {error}");

    let listed = host.request(json!("list"), "tools/list", json!({}));
    assert_lists_the_tools(&listed, &what);
    assert_bare_request_answered(&mut host, &what);
    assert_big_results(&mut host, &[4 << 20], &what);
    assert_progress(&mut host, &what);
    assert_two_in_flight(&mut host, &what);
    assert_exits_on_eof(&mut host, &what);
}

/// The TypeScript SDK's server on the 2024-11-05 HTTP+SSE transport (`SSEServerTransport`): the
/// bridge is given nothing but the URL, its first POST is answered 404, and it speaks HTTP+SSE.
#[test]
fn a_2025_host_through_the_bridge_to_the_typescript_sdk_http_sse_server() {
    let Some(server) = start(Sdk::Ts, &["--legacy"]) else {
        return;
    };
    let what = format!("{} --legacy", server.label());
    let url = server.url();
    let mut host = Host::start(&[&url, "-v"]);
    let init = host.initialize("2025-06-18");
    assert_eq!(init["protocolVersion"], "2025-06-18", "{what}: {init}");
    assert_eq!(
        init["serverInfo"]["name"],
        server_name(Sdk::Ts),
        "{what}: {init}"
    );
    assert_logged(
        &host,
        &format!("connected to {url}: protocol 2025-11-25 (HTTP+SSE)"),
        &what,
    );
    let listed = host.request(json!("list"), "tools/list", json!({}));
    assert_lists_the_tools(&listed, &what);
    assert_bare_request_answered(&mut host, &what);
    assert_big_results(&mut host, &[4 << 20], &what);
    assert_progress(&mut host, &what);
    assert_two_in_flight(&mut host, &what);
    assert_exits_on_eof(&mut host, &what);
}

#[test]
fn a_2025_host_through_the_bridge_to_the_python_sdk_server_on_2026_07_28() {
    let Some(server) = start(Sdk::Py, &[]) else {
        return;
    };
    let what = server.label().to_owned();
    let url = server.url();
    let mut host = Host::start(&[&url, "-v"]);
    let init = host.initialize("2025-11-25");
    assert_eq!(init["protocolVersion"], "2025-11-25", "{what}: {init}");
    assert!(init["capabilities"]["tools"].is_object(), "{what}: {init}");
    // The era the bridge spoke to the server: 2026-07-28, stateless (`server/discover`).
    assert_logged(
        &host,
        &format!("connected to {url}: protocol 2026-07-28 (stateless)"),
        &what,
    );
    assert_logged(
        &host,
        "host initialize at 2025-11-25; server speaks 2026-07-28",
        &what,
    );
    // On 2026-07-28 the server's name is in the discover result's
    // `_meta["io.modelcontextprotocol/serverInfo"]`: the host hears it.
    assert_eq!(
        init["serverInfo"]["name"],
        server_name(Sdk::Py),
        "{what}: {init}"
    );

    host.send_raw(b"not json\n");
    let error = host.response(&Value::Null);
    assert_eq!(error["id"], Value::Null, "{what}: {error}");
    assert_eq!(error["error"]["code"], -32700, "{what}: {error}");

    let listed = host.request(json!("list"), "tools/list", json!({}));
    assert_lists_the_tools(&listed, &what);
    assert_bare_request_answered(&mut host, &what);
    assert_big_results(&mut host, &[4 << 20, 2 << 20, 17, 1, 0], &what);
    assert_progress(&mut host, &what);
    assert_two_in_flight(&mut host, &what);
    assert_exits_on_eof(&mut host, &what);
}

/// What the bridge relays from its own `subscriptions/listen` on a 2026-07-28 server reaches a
/// 2025-era host: `notifications/subscriptions/acknowledged` (with
/// `_meta["io.modelcontextprotocol/subscriptionId"]`), a method of a revision the host does not
/// speak, answering a request it never sent. Ignored: kept as the failing test of that leak.
#[test]
fn a_2025_host_hears_nothing_of_the_bridges_own_subscription() {
    let Some(server) = start(Sdk::Py, &[]) else {
        return;
    };
    let mut host = Host::start(&[&server.url()]);
    host.initialize("2025-11-25");
    std::thread::sleep(Duration::from_secs(1));
    let pong = host.request(json!("ping"), "ping", json!({}));
    assert_eq!(pong["result"], json!({}));
    let foreign: Vec<&Value> = host
        .seen
        .iter()
        .filter(|m| m["method"] == "notifications/subscriptions/acknowledged")
        .collect();
    assert!(
        foreign.is_empty(),
        "relayed to a 2025-11-25 host: {foreign:?}"
    );
}

/// An SDK's stdio client used as the host: which one.
#[derive(Clone, Copy, Debug)]
enum SdkHost {
    /// `node interop/ts/bridge_host.mjs`.
    Ts,
    /// `interop/py/.venv/bin/python interop/py/bridge_host.py`.
    Py,
}

/// A host script that cannot run: fails the test under `CI`, else says so loudly (past the
/// harness's capture) so the test can skip, as `ssegate_testkit::interop::missing` does for
/// servers.
fn host_missing(what: &str, why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("interop: the {what} host cannot run under CI ({why}); run interop/setup");
    }
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "\n!!!!! SKIPPED: interop test with the {what} host: {why}\n\
             !!!!! run `interop/setup` to install the official SDKs (CI=1 makes this a failure)\n\n"
        )
        .as_bytes(),
    );
}

/// The command that runs `sdk`'s host script, or `None` (after [`host_missing`]) when its SDK is
/// not installed: the same checks as `ssegate_testkit::interop::command` makes for the servers
/// (`node` on the PATH with `interop/ts/node_modules`; the venv's python).
fn host_command(sdk: SdkHost) -> Option<Command> {
    let what = format!("{sdk:?} SDK");
    let Some(dir) = interop_dir() else {
        host_missing(&what, "no interop/ directory above the crate");
        return None;
    };
    match sdk {
        SdkHost::Ts => {
            let ts = dir.join("ts");
            let package = ts.join("node_modules/@modelcontextprotocol/sdk/package.json");
            if !package.is_file() {
                host_missing(
                    &what,
                    &format!("{} is missing; run `interop/setup ts`", package.display()),
                );
                return None;
            }
            match Command::new("node").arg("--version").output() {
                Ok(out) if out.status.success() => {}
                Ok(out) => {
                    host_missing(&what, &format!("`node --version` failed: {:?}", out.status));
                    return None;
                }
                Err(e) => {
                    host_missing(&what, &format!("no node on the PATH: {e}"));
                    return None;
                }
            }
            let mut cmd = Command::new("node");
            cmd.arg(ts.join("bridge_host.mjs")).current_dir(&ts);
            Some(cmd)
        }
        SdkHost::Py => {
            let py = dir.join("py");
            let python = py.join(".venv/bin/python");
            if !python.is_file() {
                host_missing(
                    &what,
                    &format!("{} is missing; run `interop/setup py`", python.display()),
                );
                return None;
            }
            let mut cmd = Command::new(python);
            cmd.arg(py.join("bridge_host.py")).current_dir(&py);
            Some(cmd)
        }
    }
}

/// A child process killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Drains `from` into a shared buffer, on a thread (done at the end of the stream).
type Drained = (Arc<Mutex<Vec<u8>>>, std::thread::JoinHandle<()>);

fn drain(mut from: impl Read + Send + 'static) -> Drained {
    let sink = Arc::new(Mutex::new(Vec::new()));
    let to = sink.clone();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            to.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    (sink, reader)
}

/// Runs `cmd SSEGATE URL SIZE EXTRA...` within 90 s: the one-line JSON summary it prints.
fn run_host(mut cmd: Command, url: &str, size: usize, extra: &[&str], what: &str) -> Value {
    let ssegate = Path::new(env!("CARGO_BIN_EXE_ssegate"));
    let started = Instant::now();
    let mut child = Killed(
        cmd.arg(ssegate)
            .arg(url)
            .arg(size.to_string())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: cannot start {cmd:?}: {e}")),
    );
    let (stdout, stdout_reader) = drain(child.0.stdout.take().unwrap());
    let (stderr, stderr_reader) = drain(child.0.stderr.take().unwrap());
    let text = |s: &Arc<Mutex<Vec<u8>>>| String::from_utf8_lossy(&s.lock().unwrap()).into_owned();
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(90) {
            panic!("{what}: not done within 90 s; stderr: {}", text(&stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // stdout is the script's alone: it ends with the script. The bridge writes to the same
    // stderr, and would hold it open if it outlived the script: waited for 2 s at most.
    stdout_reader.join().unwrap();
    let waited = Instant::now();
    while !stderr_reader.is_finished() && waited.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let (out, err) = (text(&stdout), text(&stderr));
    assert!(
        stderr_reader.is_finished(),
        "{what}: the bridge outlived its host; stderr: {err}"
    );
    assert!(
        status.success(),
        "{what}: {status}; stdout: {out}; stderr: {err}"
    );
    let line = out.lines().last().unwrap_or_default();
    let summary: Value = serde_json::from_str(line).unwrap_or_else(|e| {
        panic!("{what}: the summary is not JSON ({e}): {out:?}; stderr: {err}")
    });
    eprintln!("{what}: {:?}: {summary}", started.elapsed());
    summary
}

/// What an SDK host saw through the bridge: the server's tools and name, a 4 MiB `big_result`
/// whole, three progress notifications, and a bridge that exited on the end of stdin before
/// the SDK's 2 s grace (no SIGTERM).
fn assert_summary(
    summary: &Value,
    sdk: SdkHost,
    server: Sdk,
    protocol: &str,
    size: usize,
    what: &str,
) {
    assert_eq!(summary["protocolVersion"], protocol, "{what}: {summary}");
    assert_eq!(
        summary["serverName"],
        server_name(server),
        "{what}: {summary}"
    );
    let names: Vec<&str> = summary["toolNames"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: {summary}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for tool in TOOLS {
        assert!(names.contains(&tool), "{what}: {tool} missing: {summary}");
    }
    let expected = pattern(size);
    assert_eq!(summary["size"], size, "{what}");
    assert_eq!(summary["textLength"], size, "{what}: {summary}");
    assert_eq!(summary["firstDiff"], Value::Null, "{what}: {summary}");
    assert_eq!(summary["intact"], true, "{what}: {summary}");
    assert_eq!(summary["head"], expected[..32], "{what}");
    assert_eq!(summary["tail"], expected[size - 32..], "{what}");
    assert_eq!(summary["isError"], false, "{what}");
    assert_eq!(summary["progressText"], "done 3", "{what}");
    let numbers = |key: &str| -> Vec<f64> {
        summary[key]
            .as_array()
            .unwrap_or_else(|| panic!("{what}: no {key}: {summary}"))
            .iter()
            .filter_map(Value::as_f64)
            .collect()
    };
    let (wire, callback) = (numbers("progressWire"), numbers("progress"));
    assert_eq!(
        wire,
        [1.0, 2.0, 3.0],
        "{what}: the bridge delivered: {summary}"
    );
    match sdk {
        SdkHost::Py => assert_eq!(callback, wire, "{what}: {summary}"),
        // The TypeScript SDK runs a notification's handler a microtask after reading it and a
        // response's at once, dropping the progress handler: a notification read with the
        // response (150 ms after the one before) may miss the callback.
        SdkHost::Ts => assert!(
            callback.len() >= 2 && wire.starts_with(&callback),
            "{what}: the callback saw: {summary}"
        ),
    }
    let close_ms = summary["closeMs"].as_f64().unwrap_or(f64::MAX);
    assert!(
        close_ms < 1500.0,
        "{what}: closing took {close_ms} ms: {summary}"
    );
}

#[test]
fn the_typescript_sdk_client_as_the_host() {
    for server in [Sdk::Ts, Sdk::Py] {
        let Some(cmd) = host_command(SdkHost::Ts) else {
            return;
        };
        let Some(running) = start(server, &[]) else {
            continue;
        };
        let what = format!("TS SDK host -> bridge -> {}", running.label());
        let size = 4 << 20;
        let summary = run_host(cmd, &running.url(), size, &[], &what);
        assert_summary(&summary, SdkHost::Ts, server, "2025-11-25", size, &what);
    }
}

/// The Python SDK's host through the bridge to `server`, `initialize` at 2025-11-25 or (with
/// `--discover`) `server/discover` at 2026-07-28.
fn python_host(server: Sdk, discover: bool) {
    let Some(cmd) = host_command(SdkHost::Py) else {
        return;
    };
    let Some(running) = start(server, &[]) else {
        return;
    };
    let (extra, protocol): (&[&str], _) = if discover {
        (&["--discover"], "2026-07-28")
    } else {
        (&[], "2025-11-25")
    };
    let what = format!("Py SDK host {extra:?} -> bridge -> {}", running.label());
    let size = 4 << 20;
    let summary = run_host(cmd, &running.url(), size, extra, &what);
    assert_summary(&summary, SdkHost::Py, server, protocol, size, &what);
}

#[test]
fn the_python_sdk_client_as_the_host() {
    python_host(Sdk::Ts, false);
    python_host(Sdk::Py, false);
}

/// The Python SDK as a 2026-07-28 host (`server/discover`, then the stateless envelope) through
/// the bridge to the Python SDK's server, which the bridge also speaks 2026-07-28 to.
#[test]
fn the_python_sdk_client_as_a_2026_07_28_host() {
    python_host(Sdk::Py, true);
}

/// The Python SDK as a 2026-07-28 host in front of a 2025-era server (the TypeScript SDK 1.x):
/// the bridge passes the server's 2025-shaped results on as they are, and the SDK refuses its
/// `tools/list` result (`resultType`, `cacheScope`, `ttlMs`: "Field required"). Ignored: a known
/// gap of the bridge (results are not brought to the host's era), kept here as the failing test.
#[test]
fn the_python_sdk_client_as_a_2026_07_28_host_of_a_2025_server() {
    python_host(Sdk::Ts, true);
}
