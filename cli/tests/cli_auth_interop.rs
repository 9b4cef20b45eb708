//! `ssegate bridge` signing in, as a new user would, to the official TypeScript SDK's example
//! server with OAuth: `simpleStreamableHttp.js --oauth` of interop/ts's `@modelcontextprotocol/sdk`
//! (its demo authorization server approves at once, with dynamic registration, PKCE and
//! `resource`), bound to loopback by conformance/loopback.cjs. The bridge gets no sign-in flag; its
//! `$BROWSER` is a script that counts its calls and visits the URL with curl, following the
//! redirect to the bridge's callback. Skipped loudly when interop/ts is not installed (failed under
//! `CI`).

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use ssegate_testkit::interop::{interop_dir, missing};

use common::host::Host;

/// The example server, killed when dropped.
struct Example {
    child: Child,
    url: String,
}

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port (free when this returns; the example binds it a moment later).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Starts the example with OAuth on two free ports, once both its servers say they listen.
fn start_example() -> Option<Example> {
    let what = "TypeScript SDK example with OAuth";
    let Some(dir) = interop_dir() else {
        missing(what, "no interop/ directory");
        return None;
    };
    let script = dir.join(
        "ts/node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/simpleStreamableHttp.js",
    );
    let loopback = dir.join("../conformance/loopback.cjs");
    if !script.is_file() {
        missing(
            what,
            &format!("{} is missing; run `interop/setup ts`", script.display()),
        );
        return None;
    }
    let (mcp, auth) = (free_port(), free_port());
    let mut child = match Command::new("node")
        .arg("--require")
        .arg(&loopback)
        .arg(&script)
        .arg("--oauth")
        .env("MCP_PORT", mcp.to_string())
        .env("MCP_AUTH_PORT", auth.to_string())
        .current_dir(dir.join("ts"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            missing(what, &format!("cannot start node: {e}"));
            return None;
        }
    };
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut listening = 0;
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref() {
            let Ok(line) = line else { return };
            if line.contains("listening on port") {
                listening += 1;
                if listening == 2 {
                    let _ = tx.send(());
                    break;
                }
            }
        }
        for _ in lines {}
    });
    let example = Example {
        child,
        url: format!("http://localhost:{mcp}/mcp"),
    };
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the example's two servers say they listen");
    Some(example)
}

/// A directory of its own for one test: the credentials (`auth/`, created by the command) and
/// the browser script with its log of visits.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "ssegate-cli-auth-interop-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("browser.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\nexec curl -s -L -o /dev/null \"$1\"\n",
            dir.join("visits").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// How many times the browser was opened.
fn visits(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("visits")).map_or(0, |s| s.lines().count())
}

fn env(dir: &Path) -> Vec<(String, String)> {
    vec![
        (
            "SSEGATE_AUTH_DIR".into(),
            dir.join("auth").display().to_string(),
        ),
        (
            "BROWSER".into(),
            dir.join("browser.sh").display().to_string(),
        ),
    ]
}

/// A bridge to `url`: `initialize`, `tools/list` and a `greet` call answered; then closed.
fn session(url: &str, env: &[(String, String)]) -> Host {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut host = Host::start_with_env(&[url, "--auth-timeout", "30"], &env);
    let init = host.initialize("2025-06-18");
    assert_eq!(
        init["serverInfo"]["name"], "simple-streamable-http-server",
        "{init}"
    );
    let tools = host.request(json!(1), "tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools/list: {tools}; stderr: {}", host.stderr()))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"greet"), "{names:?}");
    let call = host.request(
        json!(2),
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "ssegate"}}),
    );
    assert_eq!(
        call["result"]["content"][0]["text"],
        Value::from("Hello, ssegate!"),
        "{call}"
    );
    host
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_first_start_signs_in_once_and_the_next_reuses_the_stored_credentials() {
    let Some(example) = start_example() else {
        return;
    };
    let dir = scratch("restart");
    let env = env(&dir);
    let mut first = session(&example.url, &env);
    first.close_stdin();
    first.wait(Duration::from_secs(20));
    assert_eq!(
        visits(&dir),
        1,
        "one browser open; stderr: {}",
        first.stderr()
    );
    // Readable by the user only.
    let auth = dir.join("auth");
    assert_eq!(mode(&auth), 0o700);
    let files: Vec<PathBuf> = std::fs::read_dir(&auth)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!files.is_empty());
    for file in &files {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    let mut second = session(&example.url, &env);
    second.close_stdin();
    second.wait(Duration::from_secs(20));
    assert_eq!(
        visits(&dir),
        1,
        "no browser the second time: {}",
        second.stderr()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_bridges_started_together_open_the_browser_once() {
    let Some(example) = start_example() else {
        return;
    };
    let dir = scratch("together");
    let env = env(&dir);
    let url = example.url.clone();
    let other = {
        let (url, env) = (url.clone(), env.clone());
        std::thread::spawn(move || {
            let mut host = session(&url, &env);
            host.close_stdin();
            host.wait(Duration::from_secs(20));
        })
    };
    let mut host = session(&url, &env);
    host.close_stdin();
    host.wait(Duration::from_secs(20));
    other.join().expect("the other bridge was answered");
    assert_eq!(visits(&dir), 1, "{}", host.stderr());
    let _ = std::fs::remove_dir_all(&dir);
}
