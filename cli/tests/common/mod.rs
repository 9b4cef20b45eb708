//! What the command's tests share: running the built command, and the fault proxy.
#![allow(dead_code)]

pub mod forward;
pub mod host;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use ssegate_testkit::proxy::{Cut, ProxyConfig, RunningProxy};

/// The environment variables the HTTP stack reads a proxy from: the tests' commands start
/// without them unless a test sets them.
pub const PROXY_VARS: [&str; 8] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// What one run of `ssegate call` did.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
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
    pub fn lines(&self) -> Vec<&str> {
        self.stderr.lines().collect()
    }

    /// stdout as JSON (one line).
    pub fn json(&self) -> Value {
        assert_eq!(self.stdout.lines().count(), 1, "one line: {self:?}");
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout: {e}: {self:?}"))
    }

    /// The text of the result's first content.
    pub fn text(&self) -> String {
        self.json()["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no text content: {self:?}"))
            .to_owned()
    }

    /// Exit `code`, and stderr's last line starts with `prefix`.
    pub fn expect(&self, code: i32, prefix: &str) {
        assert_eq!(self.code, Some(code), "{self:?}");
        let last = self.lines().last().copied().unwrap_or_default();
        assert!(last.starts_with(prefix), "{prefix:?}: {self:?}");
    }
}

/// Runs `ssegate SUBCOMMAND ARGS` with `input` on its stdin: its exit status, stdout and stderr.
pub fn ssegate(subcommand: &str, args: &[&str], input: &[u8]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ssegate"));
    for var in PROXY_VARS {
        command.env_remove(var);
    }
    let mut child = command
        .arg(subcommand)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ssegate");
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// Runs `ssegate call ARGS`.
pub fn call(args: &[&str]) -> Run {
    call_with_env(args, &[])
}

/// Runs `ssegate call ARGS` with these environment variables set (and no proxy variable of the
/// test's environment but those it sets).
pub fn call_with_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ssegate"));
    for var in PROXY_VARS {
        command.env_remove(var);
    }
    let out = command
        .arg("call")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run ssegate");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("UTF-8 on stdout"),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().expect("a runtime")
}

/// The fault proxy in front of `upstream`, no hold after a cut.
pub fn proxy(rt: &tokio::runtime::Runtime, upstream: std::net::SocketAddr) -> RunningProxy {
    rt.block_on(async {
        let mut pc = ProxyConfig::default();
        pc.accept_delay(Duration::ZERO);
        pc.start(upstream).await.unwrap()
    })
}

/// The next connection whose response bytes reach `offset` is cut there, and only that one:
/// whichever connection the command's pooling client sends the call on, and whatever it opens
/// later (a resume, a re-issue) passes whole.
pub fn cut_once(proxy: &RunningProxy, offset: u64) {
    proxy.set_default_cut(Cut::At(offset));
    proxy.set_max_cuts(Some(proxy.stats().cuts + 1));
}
