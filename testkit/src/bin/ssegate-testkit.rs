//! `ssegate-testkit serve`: the test kit's loopback MCP server, and optionally its fault proxy, as a
//! child process that tests in other languages drive with one-line commands on stdin (see
//! [`USAGE`]). The Python package's pytest fixtures (`python/tests/testkit.py`) start it.
#![forbid(unsafe_code)]

use std::io::{self, BufRead, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};
use ssegate::replay::BufferConfig;
use ssegate_testkit::proxy::{Cut, ProxyConfig, RunningProxy};
use ssegate_testkit::server::{
    MCP_PATH, RunningServer, ServerConfig, ServerMode, TaskSupport, expected_result,
};

/// The `--help` text.
const USAGE: &str = "\
ssegate-testkit: the ssegate test kit's loopback MCP server and fault proxy, driven over stdin

usage: ssegate-testkit serve [OPTIONS]
       ssegate-testkit --help | --version

`serve` starts the loopback MCP Streamable HTTP server (and with --proxy the fault proxy in front of
it) on free 127.0.0.1 ports (nothing binds elsewhere) and prints ONE JSON line on stdout:

  {\"url\": URL, \"server\": SERVER_URL, \"proxy\": PROXY_URL or null}

URL is the endpoint a client should use (the proxy's with --proxy, else the server's), each
`http://127.0.0.1:PORT/mcp`. It then reads commands on stdin, one per line (blank lines are
ignored), and answers each with ONE JSON line on stdout. A command that fails answers
{\"error\": \"...\"} and the process keeps running.

  cut N              Arm one cut (needs --proxy): the first connection the proxy accepts from now
                     on whose server-to-client bytes reach N is reset (TCP RST) right after byte N;
                     every later connection passes whole. N counts every byte the proxy forwards
                     from the server to the client on that one TCP connection, from its start: the
                     HTTP status line and headers, the chunked-encoding framing and the SSE body
                     alike, summed over every response of a keep-alive connection (the 1,000th byte
                     of a fresh connection's first response head is byte 1,000). `cut 0` resets at
                     the first response byte. A connection accepted before the command is never
                     cut; a connection that ends before byte N is not cut. `cut N` again re-arms,
                     replacing an unspent cut. Answers {\"armed\": N, \"cuts\": CUTS_SO_FAR}.
  cut off            Disarms. Answers {\"armed\": null, \"cuts\": CUTS_SO_FAR}.
  cuts               Connections the proxy has cut so far: {\"cuts\": n} (0 without --proxy).
  proxy-stats        The proxy's counters: {\"connections\", \"bytes_up\", \"bytes_down\", \"cuts\",
                     \"last_cut\": {\"connection\", \"offset\"} or null, \"armed\": N or null}.
  stats              The server's counters (ServerStats) as one JSON object: \"calls\" (tool runs:
                     tools/call requests with valid arguments, restarts' re-runs, tasks run),
                     \"connections\", \"requests\", \"sessions_opened\", \"sessions_deleted\",
                     \"sessions_expired\", \"sessions_evicted\", \"streams\", \"resumes\",
                     \"replays\", \"misses\", \"restarts\", \"empty_replies\", \"invalid_params\",
                     \"sessions_adopted\", \"store_unavailable\", \"tasks_created\",
                     \"task_reads\", \"tasks_cancelled\".
  expected SIZE SEED Writes the text the big_result tool returns for `size` SIZE and `seed` SEED
                     (its result's content[0].text as a client decodes it, UTF-8; SIZE counts the
                     bytes of the JSON-escaped string on the wire, so the text is a little shorter)
                     to a file removed when the process exits, and answers
                     {\"path\": PATH, \"bytes\": LENGTH, \"sha256\": HEX}. SIZE is at most
                     --max-result-size.
  quit               Stops the proxy and the server, answers {\"stopped\": true} and exits 0. The
                     end of stdin does the same (without the answer).

Server options (the defaults are ServerConfig's):
  --mode MODE                  What a resume (GET + Last-Event-ID) gets: strict, buffered,
                               restart, boundary, empty, resend, stateless (MCP 2026-07-28, no
                               sessions, nothing resumable) or tasks (stateless with the tasks
                               extension) [strict]
  --result-size BYTES          big_result's size when a call gives none [4194304]; `buffered`
                               sizes its replay buffer to hold four results of this size
  --seed N                     big_result's seed when a call gives none [6189819318381838337]
  --progress N                 Progress notifications before each big_result, and the progress
                               tool's default count [3]
  --retry-ms MS                The priming event's `retry:` field [250]
  --retry-after-ms MS          Retry-After of a replay miss (409) [1000]
  --replay-bytes BYTES         Each session's replay byte budget [1048576]
  --replay-event-bytes BYTES   Largest event the replay budget keeps [1048576]
  --replay-events N            Events the replay budget keeps [64]
  --max-result-size BYTES      Largest `size` a call may ask for (larger: -32602) [67108864]
  --max-progress-count N       Largest `count` of the progress tool [10000]
  --max-request-bytes BYTES    Largest request body (larger: 413) [1048576]
  --max-sessions N             Live sessions (the least recently used is evicted) [128]
  --session-idle-ms MS         A session idle this long expires (then 404) [600000]
  --max-calls-per-session N    Calls `restart` remembers per session [8]
  --max-connections N          Connections served at once [256]
  --header-read-timeout-ms MS  Time a client has to send a request head [30000]
  --tools-list-sse             Answer tools/list as an SSE stream instead of JSON
  --tasks off|offer|require    MCP tasks for tool calls [off; offer with --mode tasks]
  --task-work-ms MS            How long a task stays `working` before its tool runs [100]
  --task-ttl-ms MS|none        How long a task is kept [60000]
  --task-poll-ms MS            The polling interval tasks suggest [50]
  --task-reads-sse             Answer task reads as an SSE stream of one event
  --max-tasks N                Tasks kept at once [64]
  --task-failure CODE:MESSAGE  Every task ends `failed` with this JSON-RPC error

Proxy options:
  --proxy                      Start the fault proxy in front of the server (`url` is then its)
  --accept-delay-ms MS         After a cut, hold the proxy's next connection this long [0]

Numbers may contain `_` (1_048_576). Exit status: 0 after `quit` or the end of stdin, 2 on a bad
command line, 1 when the server or proxy cannot start.
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") if args[1..].iter().any(|a| a == "-h" || a == "--help") => help(),
        Some("serve") => match Options::parse(&args[1..]) {
            Ok(options) => serve(options),
            Err(e) => usage_error(&e),
        },
        Some("-h" | "--help" | "help") => help(),
        Some("-V" | "--version") => {
            println!("ssegate-testkit {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some(other) => usage_error(&format!("unknown command {other:?}")),
        None => usage_error("no command"),
    }
}

fn help() -> ExitCode {
    print!("{USAGE}");
    ExitCode::SUCCESS
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("ssegate-testkit: {message}\nusage: ssegate-testkit serve [OPTIONS] (see --help)");
    ExitCode::from(2)
}

/// The options of `serve` that take a value.
const VALUE_OPTIONS: &[&str] = &[
    "--mode",
    "--result-size",
    "--seed",
    "--progress",
    "--retry-ms",
    "--retry-after-ms",
    "--replay-bytes",
    "--replay-event-bytes",
    "--replay-events",
    "--max-result-size",
    "--max-progress-count",
    "--max-request-bytes",
    "--max-sessions",
    "--session-idle-ms",
    "--max-calls-per-session",
    "--max-connections",
    "--header-read-timeout-ms",
    "--tasks",
    "--task-work-ms",
    "--task-ttl-ms",
    "--task-poll-ms",
    "--max-tasks",
    "--task-failure",
    "--accept-delay-ms",
];

/// What `serve` was asked to start.
#[derive(Debug)]
struct Options {
    server: ServerConfig,
    /// `Some` with `--proxy`.
    proxy: Option<ProxyConfig>,
    max_result_size: usize,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut server = ServerConfig::default();
        let mut replay: Option<BufferConfig> = None;
        let mut proxy = false;
        let mut accept_delay = Duration::ZERO;
        let mut max_result_size = 64 << 20;
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let (name, inline) = match arg.split_once('=') {
                Some((name, value)) if name.starts_with("--") => (name, Some(value.to_owned())),
                _ => (arg.as_str(), None),
            };
            // Flags without a value.
            match name {
                "--proxy" | "--tools-list-sse" | "--task-reads-sse" => {
                    if inline.is_some() {
                        return Err(format!("{name} takes no value"));
                    }
                    match name {
                        "--proxy" => proxy = true,
                        "--tools-list-sse" => {
                            server.tools_list_sse(true);
                        }
                        _ => {
                            server.task_reads_sse(true);
                        }
                    }
                    continue;
                }
                _ if !name.starts_with("--") => {
                    return Err(format!("unexpected argument {arg:?}"));
                }
                _ if !VALUE_OPTIONS.contains(&name) => {
                    return Err(format!("unknown option {name}"));
                }
                _ => {}
            }
            let value = match inline {
                Some(v) => v,
                None => args
                    .next()
                    .ok_or_else(|| format!("{name} needs a value"))?
                    .clone(),
            };
            let v = value.as_str();
            match name {
                "--mode" => {
                    server.mode(v.parse::<ServerMode>().map_err(|e| e.to_string())?);
                }
                "--result-size" => {
                    server.result_size(number(name, v)?);
                }
                "--seed" => {
                    server.seed(number(name, v)?);
                }
                "--progress" => {
                    server.progress_count(number(name, v)?);
                }
                "--retry-ms" => {
                    server.retry_ms(number(name, v)?);
                }
                "--retry-after-ms" => {
                    replay
                        .get_or_insert_with(BufferConfig::default)
                        .retry_after(millis(name, v)?);
                }
                "--replay-bytes" => {
                    replay
                        .get_or_insert_with(BufferConfig::default)
                        .max_session_bytes(number(name, v)?);
                }
                "--replay-event-bytes" => {
                    replay
                        .get_or_insert_with(BufferConfig::default)
                        .max_event_bytes(number(name, v)?);
                }
                "--replay-events" => {
                    replay
                        .get_or_insert_with(BufferConfig::default)
                        .max_session_events(number(name, v)?);
                }
                "--max-result-size" => {
                    max_result_size = number(name, v)?;
                    server.max_result_size(max_result_size);
                }
                "--max-progress-count" => {
                    server.max_progress_count(number(name, v)?);
                }
                "--max-request-bytes" => {
                    server.max_request_bytes(number(name, v)?);
                }
                "--max-sessions" => {
                    server.max_sessions(number(name, v)?);
                }
                "--session-idle-ms" => {
                    server.session_idle_timeout(millis(name, v)?);
                }
                "--max-calls-per-session" => {
                    server.max_calls_per_session(number(name, v)?);
                }
                "--max-connections" => {
                    server.max_connections(number(name, v)?);
                }
                "--header-read-timeout-ms" => {
                    server.header_read_timeout(millis(name, v)?);
                }
                "--tasks" => {
                    server.tasks(match v {
                        "off" => TaskSupport::Off,
                        "offer" => TaskSupport::Offer,
                        "require" => TaskSupport::Require,
                        _ => return Err(format!("--tasks {v:?}: expected off, offer or require")),
                    });
                }
                "--task-work-ms" => {
                    server.task_work(millis(name, v)?);
                }
                "--task-ttl-ms" => {
                    server.task_ttl(if v == "none" {
                        None
                    } else {
                        Some(millis(name, v)?)
                    });
                }
                "--task-poll-ms" => {
                    server.task_poll_interval(millis(name, v)?);
                }
                "--max-tasks" => {
                    server.max_tasks(number(name, v)?);
                }
                "--task-failure" => {
                    let (code, message) = v.split_once(':').unwrap_or((v, "task failed"));
                    let code = code
                        .trim()
                        .parse::<i64>()
                        .map_err(|_| format!("--task-failure {v:?}: expected CODE:MESSAGE"))?;
                    server.task_failure(Some((code, message.to_owned())));
                }
                "--accept-delay-ms" => accept_delay = millis(name, v)?,
                _ => return Err(format!("unknown option {name}")),
            }
        }
        if let Some(replay) = replay {
            server.replay(replay);
        }
        let proxy = proxy.then(|| {
            let mut config = ProxyConfig::default();
            config.accept_delay(accept_delay);
            config
        });
        Ok(Options {
            server,
            proxy,
            max_result_size,
        })
    }
}

/// A non-negative integer, `_` allowed between digits.
fn number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
    let digits: String = value.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{name} {value:?}: expected a non-negative integer"));
    }
    digits
        .parse()
        .map_err(|_| format!("{name} {value:?}: out of range"))
}

fn millis(name: &str, value: &str) -> Result<Duration, String> {
    number(name, value).map(Duration::from_millis)
}

/// One compact JSON line on stdout, flushed.
fn emit(value: &Value) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{value}")?;
    out.flush()
}

fn serve(options: Options) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("ssegate-testkit: cannot start a tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let started = runtime.block_on(async {
        let server = options.server.start(loopback).await?;
        let proxy = match &options.proxy {
            Some(config) => Some(config.start(server.addr()).await?),
            None => None,
        };
        Ok::<_, io::Error>((server, proxy))
    });
    let (server, proxy) = match started {
        Ok(started) => started,
        Err(e) => {
            eprintln!("ssegate-testkit: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut kit = Kit {
        server,
        proxy,
        armed: None,
        max_result_size: options.max_result_size,
        files: None,
    };
    let server_url = kit.server.url();
    let proxy_url = kit
        .proxy
        .as_ref()
        .map(|p| format!("http://{}{MCP_PATH}", p.addr()));
    let hello = json!({
        "url": proxy_url.clone().unwrap_or_else(|| server_url.clone()),
        "server": server_url,
        "proxy": proxy_url,
    });
    let mut quit = false;
    if emit(&hello).is_ok() {
        let mut stdin = io::stdin().lock();
        let mut line = Vec::new();
        loop {
            line.clear();
            match stdin.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line);
            let command = text.trim();
            if command.is_empty() {
                continue;
            }
            if matches!(command, "quit" | "exit") {
                quit = true;
                break;
            }
            let answer =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| kit.command(command)))
                    .unwrap_or_else(|_| Err("the command panicked (see stderr)".to_owned()))
                    .unwrap_or_else(|e| json!({"error": e}));
            if emit(&answer).is_err() {
                break;
            }
        }
    }
    let Kit {
        server,
        proxy,
        files,
        ..
    } = kit;
    runtime.block_on(async {
        if let Some(proxy) = proxy {
            proxy.shutdown().await;
        }
        server.shutdown().await;
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    if let Some(dir) = files {
        let _ = std::fs::remove_dir_all(dir);
    }
    if quit {
        let _ = emit(&json!({"stopped": true}));
    }
    ExitCode::SUCCESS
}

/// What the commands act on.
struct Kit {
    server: RunningServer,
    proxy: Option<RunningProxy>,
    /// The offset of the cut armed last (`cut N`), until `cut off`.
    armed: Option<u64>,
    max_result_size: usize,
    /// This process's directory of `expected` files, once made.
    files: Option<PathBuf>,
}

impl Kit {
    fn command(&mut self, line: &str) -> Result<Value, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["cut", "off"] => {
                let proxy = self.proxy()?;
                proxy.set_default_cut(Cut::None);
                proxy.set_max_cuts(None);
                let cuts = proxy.stats().cuts;
                self.armed = None;
                Ok(json!({"armed": null, "cuts": cuts}))
            }
            ["cut", n] => {
                let n: u64 = number("cut", n)?;
                let proxy = self.proxy()?;
                // Every connection accepted from now on gets the offset; the budget lets exactly
                // the first to reach it be cut, whichever connection a pooling client uses.
                let cuts = proxy.stats().cuts;
                proxy.set_default_cut(Cut::At(n));
                proxy.set_max_cuts(Some(cuts + 1));
                self.armed = Some(n);
                Ok(json!({"armed": n, "cuts": cuts}))
            }
            ["cuts"] => Ok(json!({"cuts": self.proxy.as_ref().map_or(0, |p| p.stats().cuts)})),
            ["proxy-stats"] => {
                let proxy = self.proxy()?;
                let s = proxy.stats();
                let last = proxy
                    .last_cut()
                    .map(|c| json!({"connection": c.connection, "offset": c.offset}));
                Ok(json!({
                    "connections": s.connections,
                    "bytes_up": s.bytes_up,
                    "bytes_down": s.bytes_down,
                    "cuts": s.cuts,
                    "last_cut": last,
                    "armed": self.armed,
                }))
            }
            ["stats"] => Ok(self.server.stats().to_json()),
            ["expected", size, seed] => {
                let size: usize = number("SIZE", size)?;
                let seed: u64 = number("SEED", seed)?;
                self.expected(size, seed)
            }
            _ => Err(format!(
                "unknown command {line:?} (expected: cut N, cut off, cuts, proxy-stats, stats, \
                 expected SIZE SEED, quit)"
            )),
        }
    }

    fn proxy(&self) -> Result<&RunningProxy, String> {
        self.proxy
            .as_ref()
            .ok_or_else(|| "no proxy: start with --proxy".to_owned())
    }

    /// Writes the text of `big_result(size, seed)`, as the server sends it, to a file.
    fn expected(&mut self, size: usize, seed: u64) -> Result<Value, String> {
        if size > self.max_result_size {
            return Err(format!(
                "SIZE {size} is over --max-result-size {} (the server refuses such a call)",
                self.max_result_size
            ));
        }
        // The very response the server sends (any request id), decoded as a client decodes it.
        let response = expected_result(&json!(0), size, seed);
        let value: Value = serde_json::from_slice(&response)
            .map_err(|e| format!("big_result's response is not JSON: {e}"))?;
        let text = value["result"]["content"][0]["text"]
            .as_str()
            .ok_or("big_result's response has no text")?;
        let dir = match &self.files {
            Some(dir) => dir.clone(),
            None => {
                let dir =
                    std::env::temp_dir().join(format!("ssegate-testkit-{}", std::process::id()));
                std::fs::create_dir_all(&dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                self.files = Some(dir.clone());
                dir
            }
        };
        let path = dir.join(format!("big_result-{size}-{seed}.txt"));
        std::fs::write(&path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
        let sha256: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        Ok(json!({
            "path": path.to_string_lossy(),
            "bytes": text.len(),
            "sha256": sha256,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, String> {
        Options::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    /// Every option taking a value is handled and described in `--help`.
    #[test]
    fn every_option_parses_and_is_documented() {
        for &name in VALUE_OPTIONS {
            let value = match name {
                "--mode" => "restart",
                "--tasks" => "offer",
                "--task-failure" => "-32000:no",
                _ => "1_000",
            };
            parse(&[name, value]).unwrap_or_else(|e| panic!("{name} {value}: {e}"));
            parse(&[&format!("{name}={value}")]).unwrap_or_else(|e| panic!("{name}={value}: {e}"));
            assert!(
                USAGE.contains(&format!("  {name} ")),
                "{name} is not in --help"
            );
        }
        for flag in ["--proxy", "--tools-list-sse", "--task-reads-sse"] {
            parse(&[flag]).unwrap_or_else(|e| panic!("{flag}: {e}"));
            assert!(
                USAGE.contains(&format!("  {flag} ")),
                "{flag} is not in --help"
            );
        }
        assert!(parse(&["--proxy"]).unwrap().proxy.is_some());
        assert!(parse(&[]).unwrap().proxy.is_none());
    }

    #[test]
    fn bad_command_lines_are_refused() {
        for (args, why) in [
            (&["--bogus", "1"][..], "unknown option --bogus"),
            (&["--mode"], "--mode needs a value"),
            (&["--mode", "nope"], "unknown server mode"),
            (&["--progress", "-1"], "non-negative integer"),
            (&["--progress", "99999999999999999999999"], "out of range"),
            (&["--proxy=yes"], "takes no value"),
            (&["stray"], "unexpected argument"),
            (&["--tasks", "maybe"], "expected off, offer or require"),
        ] {
            let e = parse(args).expect_err(why);
            assert!(e.contains(why), "{args:?}: {e}");
        }
    }
}
