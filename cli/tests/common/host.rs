//! A stdio MCP host written for the tests: it runs `ssegate bridge` as a child process, writes
//! JSON-RPC lines to its stdin and reads its stdout line by line, checking that every line is one
//! JSON value.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a test waits for one line by default.
pub const LINE_TIMEOUT: Duration = Duration::from_secs(60);

/// `ssegate bridge` under a test host.
pub struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    /// Messages read while waiting for a response: notifications, server requests.
    pub seen: Vec<Value>,
}

impl Host {
    /// Starts `ssegate bridge ARGS`.
    pub fn start(args: &[&str]) -> Host {
        Host::start_with_env(args, &[])
    }

    /// Starts `ssegate bridge ARGS` with these environment variables set (and no proxy
    /// variable of the test's environment: [`super::PROXY_VARS`]).
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Host {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ssegate"));
        for var in super::PROXY_VARS {
            command.env_remove(var);
        }
        let mut child = command
            .arg("bridge")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run ssegate bridge");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::with_capacity(1 << 20, stdout);
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdin = child.stdin.take();
        Host {
            child,
            stdin,
            lines,
            stderr,
            seen: Vec::new(),
        }
    }

    /// The bridge's process id (for /proc/PID/status).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the bridge wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Whether the bridge writes `text` on stderr within 5 s (stderr is read on a thread of its
    /// own: a line the bridge wrote before its last answer may not have been read yet).
    pub fn stderr_shows(&self, text: &str) -> bool {
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(5) {
            if self.stderr().contains(text) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        false
    }

    /// Writes raw bytes to the bridge's stdin.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Writes one message as a line.
    pub fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// The next line, parsed; panics (with the bridge's stderr) when none comes in `timeout` or it
    /// is not one JSON value ending in a line break.
    pub fn recv_within(&mut self, timeout: Duration) -> Value {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => {
                assert!(line.ends_with('\n'), "a line ends with its line break");
                let body = &line[..line.len() - 1];
                assert!(!body.contains('\n') && !body.contains('\r'));
                serde_json::from_str(body).unwrap_or_else(|e| {
                    panic!(
                        "stdout line is not JSON ({e}): {:?}",
                        &body[..body.len().min(300)]
                    )
                })
            }
            Err(RecvTimeoutError::Timeout) => {
                panic!("no line within {timeout:?}; stderr: {}", self.stderr())
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("stdout closed; stderr: {}", self.stderr())
            }
        }
    }

    /// The next line.
    pub fn recv(&mut self) -> Value {
        self.recv_within(LINE_TIMEOUT)
    }

    /// No line within `wait`.
    pub fn expect_silence(&mut self, wait: Duration) {
        if let Ok(line) = self.lines.recv_timeout(wait) {
            panic!("unexpected line: {:?}", &line[..line.len().min(300)]);
        }
    }

    /// The response to `id`: taken from [`Host::seen`] when it came while waiting for another
    /// (answers to concurrent requests come in any order), else read, keeping the other lines in
    /// [`Host::seen`].
    pub fn response(&mut self, id: &Value) -> Value {
        let is_it = |m: &Value| m.get("method").is_none() && m.get("id") == Some(id);
        if let Some(i) = self.seen.iter().position(is_it) {
            return self.seen.remove(i);
        }
        loop {
            let message = self.recv();
            if is_it(&message) {
                return message;
            }
            self.seen.push(message);
        }
    }

    /// Sends a request and reads its response.
    pub fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.response(&id)
    }

    /// `initialize` at `version`, then `notifications/initialized`: the result.
    pub fn initialize(&mut self, version: &str) -> Value {
        let response = self.request(
            json!(0),
            "initialize",
            json!({"protocolVersion": version, "capabilities": {"roots": {}},
                   "clientInfo": {"name": "test-host", "version": "1.0"}}),
        );
        assert!(response.get("error").is_none(), "initialize: {response}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        response["result"].clone()
    }

    /// Closes stdin (end of input).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The exit status within `timeout`, and how long it took.
    pub fn wait(&mut self, timeout: Duration) -> (Option<i32>, Duration) {
        let started = Instant::now();
        while started.elapsed() < timeout {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status.code(), started.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "the bridge did not exit within {timeout:?}; stderr: {}",
            self.stderr()
        );
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success());
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The names of a `tools/list` response's tools (panics, showing the response, when it has none).
pub fn tool_names(response: &Value) -> Vec<String> {
    response["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {response}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}
