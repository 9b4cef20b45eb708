//! The official MCP SDKs' servers of the repository's `interop/` directory, started as child
//! processes on a free loopback port, for interop tests (`testkit/tests/interop.rs`, the command's
//! tests).
//!
//! The servers are installed by `interop/setup` (npm packages from lock files, a Python venv, the
//! `ssegate-interop-rmcp` binary built with cargo); `interop/README.md` describes their tools and
//! flags. When a server is not installed (or there is
//! no `interop/` directory above this crate, as in a published package), [`start`] fails the test
//! if `CI` is set, and otherwise says so loudly on stderr and returns `None`, so the test can skip.
//!
//! ```no_run
//! use ssegate_testkit::interop::{Sdk, start};
//!
//! let Some(server) = start(Sdk::Ts2026, &["--response-mode", "sse"]) else {
//!     return; // not installed, and not under CI: skipped, loudly
//! };
//! println!("{} listens at {}", server.label(), server.url());
//! // killed when `server` is dropped
//! ```

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Which SDK's server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Sdk {
    /// interop/ts: `@modelcontextprotocol/sdk` on Node (`--tasks`: its SEP-1686 tasks, `charge` as
    /// a task).
    Ts,
    /// interop/py: PyPI `mcp` in interop/py/.venv (both eras: `initialize`, and 2026-07-28 for a
    /// request that declares it).
    Py,
    /// interop/ts2026: `@modelcontextprotocol/server` 2.x on Node (2026-07-28, and stateless
    /// 2025-era service).
    Ts2026,
    /// interop/rmcp: the `rmcp-task-server` binary of the `ssegate-interop-rmcp` workspace member
    /// (rmcp 3.x with its SEP-2663 task runtime, MCP 2026-07-28 tasks extension; sessions for
    /// 2025-era clients), built by `interop/setup rmcp` into the cargo target directory.
    RmcpTasks,
    /// interop/everything: `@modelcontextprotocol/server-everything` in Streamable HTTP mode
    /// (SEP-1686 tasks of 2025-11-25: `simulate-research-query`), bound to loopback by
    /// `interop/everything/server.cjs`.
    Everything,
    /// interop/fastmcp: PyPI `fastmcp` (on the `mcp` SDK) in interop/fastmcp/.venv, with
    /// FastMCP's own in-memory `EventStore` (2025-era sessions; 2026-07-28 as `mcp` serves it).
    FastMcp,
}

impl Sdk {
    /// What `interop/setup` takes to install this server (`ts`, `rmcp`, ...).
    pub fn setup_name(self) -> &'static str {
        match self {
            Sdk::Ts => "ts",
            Sdk::Py => "py",
            Sdk::Ts2026 => "ts2026",
            Sdk::RmcpTasks => "rmcp",
            Sdk::Everything => "everything",
            Sdk::FastMcp => "fastmcp",
        }
    }
}

/// The binary `interop/setup rmcp` builds.
const RMCP_TASK_SERVER: &str = "rmcp-task-server";

/// The cargo target directories where `rmcp-task-server` may be: `$CARGO_TARGET_DIR` (at run
/// time, then at build time), the one this test binary runs from (`<target>/<profile>/deps/..`),
/// and `<repo>/target`.
fn target_dirs(repo: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        dirs.push(PathBuf::from(dir));
    }
    if let Some(dir) = option_env!("CARGO_TARGET_DIR") {
        dirs.push(PathBuf::from(dir));
    }
    if let Ok(exe) = std::env::current_exe() {
        // <target>/<profile>/deps/<test binary>
        if let Some(target) = exe.ancestors().nth(3) {
            dirs.push(target.to_owned());
        }
    }
    dirs.push(repo.join("target"));
    dirs
}

/// The newest `rmcp-task-server` built (debug or release) in any of [`target_dirs`], or why there
/// is none usable: missing, or older than its sources (`interop/rmcp/src`, its `Cargo.toml`).
fn rmcp_task_server(interop: &Path) -> Result<PathBuf, String> {
    let repo = interop.parent().unwrap_or(interop);
    let modified = |p: &Path| p.metadata().and_then(|m| m.modified()).ok();
    let candidates: Vec<PathBuf> = target_dirs(repo)
        .into_iter()
        .flat_map(|t| [t.join("debug"), t.join("release")])
        .map(|d| {
            d.join(format!(
                "{RMCP_TASK_SERVER}{}",
                std::env::consts::EXE_SUFFIX
            ))
        })
        .collect();
    let newest = candidates
        .iter()
        .filter_map(|p| Some((modified(p)?, p)))
        .max_by_key(|(t, _)| *t);
    let Some((built, binary)) = newest else {
        return Err(format!(
            "no {RMCP_TASK_SERVER} binary (looked for {})",
            candidates
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    let crate_dir = interop.join("rmcp");
    let mut sources = vec![crate_dir.join("Cargo.toml")];
    if let Ok(entries) = std::fs::read_dir(crate_dir.join("src")) {
        sources.extend(entries.filter_map(|e| Some(e.ok()?.path())));
    }
    if let Some(newer) = sources
        .iter()
        .find(|s| modified(s).is_some_and(|t| t > built))
    {
        return Err(format!(
            "{} is older than {} (stale)",
            binary.display(),
            newer.display()
        ));
    }
    Ok(binary.clone())
}

/// A server child process, killed on drop.
#[derive(Debug)]
pub struct Server {
    child: Child,
    addr: SocketAddr,
    label: String,
}

impl Server {
    /// The address it listens on (loopback).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its MCP endpoint, `http://ADDR/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The SDK and flags it was started with (`Ts2026 --response-mode sse`), for messages.
    pub fn label(&self) -> &str {
        &self.label
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The repository's `interop/` directory (the first one with a `setup` script above this crate).
pub fn interop_dir() -> Option<PathBuf> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|p| p.join("interop"))
        .find(|p| p.join("setup").is_file())
}

/// The command that starts `sdk`'s server with `flags` on a free loopback port, or why it cannot
/// be started (not installed).
pub fn command(sdk: Sdk, flags: &[&str]) -> Result<Command, String> {
    let dir = interop_dir().ok_or("no interop/ directory above the crate")?;
    let mut cmd = match sdk {
        Sdk::Ts => {
            let ts = dir.join("ts");
            let sdk_package = ts.join("node_modules/@modelcontextprotocol/sdk/package.json");
            if !sdk_package.is_file() {
                return Err(format!("{} is missing", sdk_package.display()));
            }
            let mut cmd = Command::new("node");
            cmd.arg(ts.join("server.mjs")).current_dir(&ts);
            cmd
        }
        Sdk::Ts2026 => {
            let ts = dir.join("ts2026");
            let sdk_package = ts.join("node_modules/@modelcontextprotocol/server/package.json");
            if !sdk_package.is_file() {
                return Err(format!("{} is missing", sdk_package.display()));
            }
            let mut cmd = Command::new("node");
            cmd.arg(ts.join("server.mjs")).current_dir(&ts);
            cmd
        }
        Sdk::Py | Sdk::FastMcp => {
            let py = dir.join(if sdk == Sdk::Py { "py" } else { "fastmcp" });
            let python = py.join(".venv/bin/python");
            if !python.is_file() {
                return Err(format!("{} is missing", python.display()));
            }
            let mut cmd = Command::new(python);
            cmd.arg(py.join("server.py")).current_dir(&py);
            cmd
        }
        Sdk::RmcpTasks => {
            let mut cmd = Command::new(rmcp_task_server(&dir)?);
            cmd.current_dir(dir.join("rmcp"));
            cmd
        }
        Sdk::Everything => {
            let everything = dir.join("everything");
            let package = everything
                .join("node_modules/@modelcontextprotocol/server-everything/package.json");
            if !package.is_file() {
                return Err(format!("{} is missing", package.display()));
            }
            let mut cmd = Command::new("node");
            cmd.arg(everything.join("server.cjs"))
                .current_dir(&everything);
            cmd
        }
    };
    cmd.args(["--host", "127.0.0.1", "--port", "0"]).args(flags);
    Ok(cmd)
}

/// A server that cannot run: panics when `CI` is set; otherwise says so loudly on the process's
/// stderr (past the test harness's capture) and returns, so the test can skip.
pub fn missing(what: &str, why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("interop: the {what} server cannot run under CI ({why}); run interop/setup");
    }
    // Straight to the process's stderr: the test harness captures `eprintln!` of passing tests.
    let _ = writeln!(
        std::io::stderr(),
        "\n!!!!! SKIPPED: interop test with the {what} server: {why}\n\
         !!!!! run `interop/setup` to install the official-SDK servers (CI=1 makes this a failure)\n"
    );
}

/// Starts a server on a free loopback port and waits until it listens (it prints
/// `listening http://ADDR/mcp` once bound). `None` when it is not installed (and not under CI,
/// see [`missing`]). Panics when it does not say it listens within 60 s.
pub fn start(sdk: Sdk, flags: &[&str]) -> Option<Server> {
    let label = format!("{sdk:?} {}", flags.join(" ")).trim().to_owned();
    let mut cmd = match command(sdk, flags) {
        Ok(cmd) => cmd,
        Err(why) => {
            missing(
                &label,
                &format!("{why}; run `interop/setup {}`", sdk.setup_name()),
            );
            return None;
        }
    };
    let mut child = match cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            missing(&label, &format!("cannot start {cmd:?}: {e}"));
            return None;
        }
    };
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref() {
            let Ok(line) = line else { return };
            if let Some(rest) = line.strip_prefix("listening http://") {
                let _ = tx.send(rest.trim_end_matches("/mcp").to_owned());
                break;
            }
        }
        // Keep draining so the child never blocks on a full pipe.
        for _ in lines {}
    });
    let mut server = Server {
        child,
        addr: "0.0.0.0:0".parse().expect("an address"),
        label,
    };
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(addr) => {
            server.addr = addr.parse().expect("the server prints its address");
            Some(server)
        }
        Err(e) => panic!("{}: never said it was listening ({e})", server.label),
    }
}

/// What the interop servers' `big_result` and `charge` results carry: `size` bytes of 16-byte
/// blocks, each its own byte offset as 15 hex digits and `|` (interop/README.md), so a torn or
/// doubled part cannot pass unnoticed.
pub fn pattern(size: usize) -> String {
    let mut s = String::with_capacity(size + 16);
    let mut offset = 0;
    while s.len() < size {
        s.push_str(&format!("{offset:015x}|"));
        offset += 16;
    }
    s.truncate(size);
    s
}
