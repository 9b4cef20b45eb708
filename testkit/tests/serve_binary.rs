//! `ssegate-testkit serve`, the binary the Python tests drive: its first line, a real MCP call
//! through its proxy (cut, resumed, counted), every command's answer, bad commands answered without
//! dying, and a clean exit on `quit` and on the end of stdin.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use ssegate::client::{Client, ClientConfig, Retry};
use ssegate_testkit::server::{ServerMode, expected_result};

const BINARY: &str = env!("CARGO_BIN_EXE_ssegate-testkit");
const LIMIT: Duration = Duration::from_secs(30);

/// A running `ssegate-testkit serve`, killed on drop.
struct Kit {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    hello: Value,
}

impl Kit {
    fn start(flags: &[&str]) -> Kit {
        let mut child = Command::new(BINARY)
            .arg("serve")
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the binary starts");
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut kit = Kit {
            child,
            stdin,
            lines,
            hello: Value::Null,
        };
        kit.hello = kit.read();
        kit
    }

    /// The next JSON line on stdout.
    fn read(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(LIMIT)
            .expect("a line on stdout in time");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not one JSON line ({e}): {line:?}"))
    }

    fn ask(&mut self, command: &str) -> Value {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{command}").expect("the command is written");
        stdin.flush().expect("flushed");
        self.read()
    }

    fn url(&self) -> &str {
        self.hello["url"].as_str().expect("a url")
    }

    /// Waits for the process to exit (after `quit` or closing stdin).
    fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "the process did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Kit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `host:port` of an `http://host:port/mcp` URL.
fn authority(url: &str) -> &str {
    let rest = url.strip_prefix("http://").expect("http://");
    rest.strip_suffix("/mcp").expect("/mcp")
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn client_config() -> ClientConfig {
    let mut config = ClientConfig::default();
    config
        .stream_mut()
        .min_delay(Duration::from_millis(10))
        .max_delay(Duration::from_millis(200));
    config.call_timeout(Some(LIMIT));
    config
}

/// The text of a `big_result` response.
fn text_of(response: &ssegate::client::Response) -> String {
    let v: Value = response.message.deserialize().expect("a JSON response");
    assert_eq!(v["result"]["isError"], false, "{v}");
    v["result"]["content"][0]["text"]
        .as_str()
        .expect("a text result")
        .to_owned()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn a_call_through_the_proxy_is_cut_resumed_counted_and_matches_expected() {
    let mut kit = Kit::start(&[
        "--mode",
        "buffered",
        "--proxy",
        "--progress",
        "2",
        "--retry-ms",
        "10",
        "--result-size",
        "1_048_576",
    ]);
    let (url, server, proxy) = (
        kit.url().to_owned(),
        kit.hello["server"].as_str().unwrap().to_owned(),
        kit.hello["proxy"].as_str().unwrap().to_owned(),
    );
    assert_eq!(url, proxy, "with --proxy a client uses the proxy");
    assert_ne!(proxy, server);
    for u in [&server, &proxy] {
        assert!(
            u.starts_with("http://127.0.0.1:") && u.ends_with("/mcp"),
            "{u}"
        );
    }
    assert_eq!(
        kit.hello.as_object().unwrap().len(),
        3,
        "url, server, proxy: {}",
        kit.hello
    );

    assert_eq!(kit.ask("cuts"), json!({"cuts": 0}));
    assert_eq!(kit.ask("cut 300000"), json!({"armed": 300_000, "cuts": 0}));
    let size = 1 << 20;
    let (text, resumes) = runtime().block_on(async {
        let client = Client::connect(&url, client_config())
            .await
            .expect("initialize through the proxy");
        let response = client
            .call_tool("big_result", json!({"size": size, "seed": 9}), Retry::Never)
            .await
            .expect("the cut call is resumed in place");
        let text = text_of(&response);
        client.close().await.expect("the session ends");
        (text, response.outcome.resumes)
    });
    assert!(resumes >= 1, "the cut was resumed ({resumes} resumes)");
    assert_eq!(kit.ask("cuts"), json!({"cuts": 1}));
    let proxy_stats = kit.ask("proxy-stats");
    assert_eq!(proxy_stats["cuts"], 1);
    assert_eq!(proxy_stats["last_cut"]["offset"], 300_000);
    assert_eq!(proxy_stats["armed"], 300_000);

    let stats = kit.ask("stats");
    assert_eq!(stats["calls"], 1, "the tool ran once: {stats}");
    assert!(stats["resumes"].as_u64().unwrap() >= 1, "{stats}");
    assert!(stats["replays"].as_u64().unwrap() >= 1, "{stats}");
    assert_eq!(stats["sessions_opened"], 1, "{stats}");
    assert_eq!(stats["sessions_deleted"], 1, "{stats}");
    assert_eq!(stats["misses"], 0, "{stats}");
    assert_eq!(
        stats.as_object().unwrap().len(),
        19,
        "every counter: {stats}"
    );

    let expected = kit.ask(&format!("expected {size} 9"));
    let path = expected["path"].as_str().expect("a path").to_owned();
    let written = std::fs::read(&path).expect("the file is there");
    assert_eq!(
        written,
        text.as_bytes(),
        "the file holds the text the call got"
    );
    assert_eq!(expected["sha256"], sha256_hex(&written));
    assert_eq!(expected["bytes"], written.len());
    // The text is the escaped prose decoded: shorter than SIZE, with escapes resolved.
    assert!(text.len() < size && text.contains('"') && text.contains('\n'));
    let response: Value = serde_json::from_slice(&expected_result(&json!(7), size, 9)).unwrap();
    assert_eq!(response["result"]["content"][0]["text"], text.as_str());
    let other = kit.ask(&format!("expected {size} 10"));
    assert_ne!(
        other["sha256"], expected["sha256"],
        "another seed, another text"
    );

    assert_eq!(kit.ask("quit"), json!({"stopped": true}));
    assert!(kit.wait().success(), "quit exits 0");
    assert!(
        !std::path::Path::new(&path).exists(),
        "the expected files are removed at exit"
    );
    for u in [&server, &proxy] {
        assert!(
            TcpStream::connect(authority(u)).is_err(),
            "{u} is closed after quit"
        );
    }
}

#[test]
fn failing_commands_answer_an_error_and_the_process_lives_on() {
    let mut kit = Kit::start(&["--max-result-size", "1000"]);
    assert_eq!(kit.hello["proxy"], Value::Null);
    assert_eq!(kit.hello["url"], kit.hello["server"]);
    for bad in [
        "cut 5",
        "cut off",
        "proxy-stats",
        "bogus",
        "cut",
        "expected 1",
        "expected x 1",
        "expected 1 -1",
        "expected 1001 1",
        "stats now",
    ] {
        let answer = kit.ask(bad);
        let error = answer["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{bad:?}: {answer}"));
        assert!(!error.is_empty());
    }
    assert!(
        kit.ask("cut 5")["error"]
            .as_str()
            .unwrap()
            .contains("--proxy")
    );
    assert!(
        kit.ask("expected 1001 1")["error"]
            .as_str()
            .unwrap()
            .contains("--max-result-size")
    );
    // Still serving, still answering.
    assert_eq!(kit.ask("cuts"), json!({"cuts": 0}));
    assert_eq!(kit.ask("stats")["calls"], 0);
    assert!(kit.ask("expected 1000 1")["bytes"].as_u64().is_some());
    let server = kit.hello["server"].as_str().unwrap().to_owned();
    assert!(TcpStream::connect(authority(&server)).is_ok());
    // The end of stdin stops it, exit 0, nothing more on stdout.
    drop(kit.stdin.take());
    assert!(kit.wait().success(), "EOF exits 0");
    assert!(kit.lines.recv_timeout(Duration::from_secs(5)).is_err());
    assert!(TcpStream::connect(authority(&server)).is_err());
}

#[test]
fn every_mode_starts_and_a_stateless_server_answers_a_call() {
    for mode in ServerMode::ALL {
        let mut kit = Kit::start(&["--mode", mode.as_str(), "--proxy"]);
        assert_eq!(kit.ask("stats")["calls"], 0, "{mode}");
        assert_eq!(kit.ask("quit"), json!({"stopped": true}), "{mode}");
        assert!(kit.wait().success(), "{mode}");
    }
    let mut kit = Kit::start(&["--mode", "stateless"]);
    let url = kit.url().to_owned();
    let text = runtime().block_on(async {
        let client = Client::connect(&url, client_config()).await.unwrap();
        assert!(client.is_stateless());
        let response = client
            .call_tool(
                "big_result",
                json!({"size": 50_000, "seed": 3}),
                Retry::Never,
            )
            .await
            .unwrap();
        text_of(&response)
    });
    let expected = kit.ask("expected 50000 3");
    let written = std::fs::read_to_string(expected["path"].as_str().unwrap()).unwrap();
    assert_eq!(written, text);
    assert_eq!(kit.ask("stats")["calls"], 1);
    assert_eq!(kit.ask("quit"), json!({"stopped": true}));
    assert!(kit.wait().success());
}

#[test]
fn help_and_bad_command_lines() {
    let help = Command::new(BINARY).arg("--help").output().unwrap();
    assert!(help.status.success());
    let text = String::from_utf8(help.stdout).unwrap();
    for word in [
        "serve",
        "cut N",
        "cuts",
        "stats",
        "expected SIZE SEED",
        "quit",
        "--mode",
        "--proxy",
        "--progress",
        "--retry-ms",
        "--max-result-size",
        "--task-work-ms",
    ] {
        assert!(text.contains(word), "--help mentions {word}");
    }
    let serve_help = Command::new(BINARY)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(serve_help.status.success());
    assert_eq!(String::from_utf8(serve_help.stdout).unwrap(), text);
    for args in [
        &[][..],
        &["nope"],
        &["serve", "--nope"],
        &["serve", "--mode", "nope"],
    ] {
        let out = Command::new(BINARY)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
        assert!(!out.stderr.is_empty(), "{args:?}: says why on stderr");
    }
    let version = Command::new(BINARY).arg("--version").output().unwrap();
    assert!(version.status.success());
    assert!(
        String::from_utf8(version.stdout)
            .unwrap()
            .starts_with("ssegate-testkit ")
    );
}

#[test]
fn upstream_puts_the_proxy_in_front_of_another_server() {
    let mut upstream = Kit::start(&["--mode", "stateless"]);
    let target = authority(upstream.url()).to_owned();
    let mut kit = Kit::start(&["--upstream", &target]);
    assert_eq!(kit.url(), kit.hello["proxy"].as_str().unwrap());
    let url = kit.url().to_owned();
    runtime().block_on(async {
        let client = Client::connect(&url, client_config()).await.unwrap();
        let response = client
            .call_tool(
                "big_result",
                json!({"size": 20_000, "seed": 5}),
                Retry::Never,
            )
            .await
            .unwrap();
        text_of(&response);
    });
    // The call went through this proxy to the other kit's server, not to this kit's own.
    assert_eq!(upstream.ask("stats")["calls"], 1);
    assert_eq!(kit.ask("stats")["calls"], 0);
    assert!(kit.ask("proxy-stats")["bytes_down"].as_u64().unwrap() > 20_000);
    assert_eq!(kit.ask("quit"), json!({"stopped": true}));
    assert_eq!(upstream.ask("quit"), json!({"stopped": true}));
    for args in [
        &["serve", "--upstream", "nowhere"][..],
        &["serve", "--upstream", "127.0.0.1:9", "--auth"],
    ] {
        let out = Command::new(BINARY)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?}: says why on stderr");
    }
}
