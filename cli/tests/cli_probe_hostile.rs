//! `ssegate probe` through the built binary against hostile MCP servers
//! ([`ssegate_testkit::hostile`]): for each misbehaviour, the exit status (0 resumable, 1 not
//! resumable, 2 could not run), the verdict and behaviours of `--json` or the reason on stderr, that
//! the process ends within its `--timeout`, and that its peak RSS stays below a stated bound.
//!
//! Peak RSS is read with `/usr/bin/time -f %M` (the kernel's `ru_maxrss` of the child). Without it
//! the tests fail under `CI=true`, and elsewhere say so loudly on stderr and poll the child's
//! `VmHWM` in `/proc/<pid>/status` instead (Linux; a peak in the last few milliseconds before the
//! exit can be missed).
//!
//! Set `SSEGATE_PROBE_BEFORE=/path/to/an/older/ssegate` to also run that binary on each hostile
//! server (without the options it may not know, killed after 20 s) and print its exit status, time
//! and peak RSS next to this one's: a before/after comparison, never asserted.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use ssegate_testkit::hostile::{Framing, Hit, HostileServer, IdShape, Limits, Misbehaviour};

const MIB: u64 = 1 << 20;
/// The peak RSS every run must stay below with the default limits (the review measured 3 GB on an
/// endless data line and 595 MB for one 300 MB event before the reads were bounded).
const RSS_BOUND: u64 = 200 * MIB;
/// Slack over `--timeout` for the process to start, report and exit.
const EXIT_SLACK: Duration = Duration::from_secs(3);

/// One run at a time: the runs move hundreds of MiB over loopback and time themselves.
static SERIAL: Mutex<()> = Mutex::new(());

/// What one run of the binary did.
#[derive(Debug)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    /// Peak resident set size, in bytes.
    peak_rss: u64,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("--json output: {e}: {self:?}"))
    }

    fn behaviours(&self) -> Vec<String> {
        self.json()["rounds"]
            .as_array()
            .unwrap_or_else(|| panic!("no rounds: {self:?}"))
            .iter()
            .map(|r| r["behaviour"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// How the peak RSS is measured.
enum Meter {
    Time,
    Poll,
}

fn meter() -> Meter {
    if Path::new("/usr/bin/time").exists() {
        return Meter::Time;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "/usr/bin/time is missing: install GNU time (apt-get install time) to measure peak RSS"
    );
    eprintln!(
        "\n*** WARNING: /usr/bin/time is missing; peak RSS is polled from /proc/<pid>/status \
         (VmHWM) and may miss a peak in the last milliseconds. Install GNU time. ***\n"
    );
    Meter::Poll
}

fn drain(mut from: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = from.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    })
}

/// `VmHWM` of `pid`, in bytes.
fn vm_hwm(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Kills a run that outlived its cap: the probe itself first (under `/usr/bin/time`, its child,
/// so that `time` still reports its peak), then the whole process group.
fn kill(child: &mut Child) -> std::process::ExitStatus {
    let pid = child.id();
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    for target in children
        .split_whitespace()
        .chain([pid.to_string().as_str()])
    {
        let _ = Command::new("kill").args(["-KILL", target]).status();
        let waited = Instant::now();
        while waited.elapsed() < Duration::from_secs(2) {
            if let Ok(Some(status)) = child.try_wait() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .status();
    child.wait().expect("wait")
}

/// Runs `bin probe <args>`, killed (its whole process group) if it outlives `cap`.
fn run_bin(bin: &str, args: &[String], cap: Duration) -> Run {
    let meter = meter();
    let rss_file = std::env::temp_dir().join(format!(
        "ssegate-hostile-rss-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let mut cmd = match meter {
        Meter::Time => {
            let mut cmd = Command::new("/usr/bin/time");
            cmd.arg("-f").arg("%M").arg("-o").arg(&rss_file).arg(bin);
            cmd
        }
        Meter::Poll => Command::new(bin),
    };
    cmd.arg("probe")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let started = Instant::now();
    let mut child: Child = cmd.spawn().expect("run ssegate");
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let pid = child.id();
    let mut polled = 0u64;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if let Meter::Poll = meter {
            polled = polled.max(vm_hwm(pid).unwrap_or(0));
        }
        if started.elapsed() > cap {
            break kill(&mut child);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = started.elapsed();
    let peak_rss = match meter {
        Meter::Time => {
            let text = std::fs::read_to_string(&rss_file).unwrap_or_default();
            let _ = std::fs::remove_file(&rss_file);
            // The last line is `%M` (kB); a line before it may say the command was signalled.
            let kb = text
                .lines()
                .rev()
                .find_map(|l| l.trim().parse::<u64>().ok())
                .unwrap_or(0);
            kb * 1024
        }
        Meter::Poll => polled,
    };
    Run {
        code: status.code(),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        elapsed,
        peak_rss,
    }
}

/// Serves `misbehaviour` and probes it with `--json --timeout <timeout>` and `extra`; asserts the
/// run ended within its timeout and below [`RSS_BOUND`], and prints what it measured.
fn probe_hostile(
    name: &str,
    misbehaviour: Misbehaviour,
    limits: Limits,
    framing: Framing,
    timeout_secs: u64,
    extra: &[&str],
) -> Run {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(HostileServer::start_framed(misbehaviour, limits, framing))
        .unwrap();
    let url = server.url();
    let timeout = Duration::from_secs(timeout_secs);
    let mut args: Vec<String> = vec![
        url.clone(),
        "--json".into(),
        "--replay-timeout-ms".into(),
        "500".into(),
    ];
    let new_args: Vec<String> = ["--timeout".to_owned(), timeout_secs.to_string()]
        .into_iter()
        .chain(extra.iter().map(|s| s.to_string()))
        .collect();
    if let Ok(before) = std::env::var("SSEGATE_PROBE_BEFORE") {
        let old = run_bin(&before, &args, Duration::from_secs(20));
        eprintln!(
            "{name:<28} before: exit {:?} in {:>6.2} s, peak RSS {:>5} MiB",
            old.code,
            old.elapsed.as_secs_f64(),
            old.peak_rss / MIB
        );
    }
    args.extend(new_args);
    let run = run_bin(
        env!("CARGO_BIN_EXE_ssegate"),
        &args,
        timeout + 30 * EXIT_SLACK,
    );
    eprintln!(
        "{name:<28} after:  exit {:?} in {:>6.2} s, peak RSS {:>5} MiB; server wrote {} MiB",
        run.code,
        run.elapsed.as_secs_f64(),
        run.peak_rss / MIB,
        server.bytes_written() / MIB
    );
    eprintln!("    {}{}", run.stdout.trim(), run.stderr.trim());
    runtime.block_on(server.shutdown());
    assert!(
        run.elapsed < timeout + EXIT_SLACK,
        "{name}: ran {:?} with --timeout {timeout_secs}: {run:?}",
        run.elapsed
    );
    assert!(run.peak_rss > 0, "{name}: no peak RSS measured: {run:?}");
    assert!(
        run.peak_rss < RSS_BOUND,
        "{name}: peak RSS {} MiB >= {} MiB: {run:?}",
        run.peak_rss / MIB,
        RSS_BOUND / MIB
    );
    run
}

fn simple(name: &str, misbehaviour: Misbehaviour, timeout_secs: u64, extra: &[&str]) -> Run {
    probe_hostile(
        name,
        misbehaviour,
        Limits::default(),
        Framing::Close,
        timeout_secs,
        extra,
    )
}

fn assert_could_not_run(name: &str, run: &Run, says: &str) {
    assert_eq!(run.code, Some(2), "{name}: {run:?}");
    assert!(run.stdout.is_empty(), "{name}: {run:?}");
    assert!(
        run.stderr.contains("ssegate probe: ") && run.stderr.contains(says),
        "{name}: stderr should say {says:?}: {run:?}"
    );
}

fn assert_not_resumable(name: &str, run: &Run, behaviours: &[&str]) {
    assert_eq!(run.code, Some(1), "{name}: {run:?}");
    let v = run.json();
    assert_eq!(v["verdict"], "not-resumable", "{name}: {run:?}");
    assert_eq!(run.behaviours(), behaviours, "{name}: {run:?}");
}

/// An endless data line: the decoder drops the line at its limit, the baseline stops there and
/// says why (before: 3 GB in 22 s and no end).
#[test]
fn endless_data_line() {
    let run = simple("endless data line", Misbehaviour::EndlessDataLine, 20, &[]);
    assert_could_not_run(
        "endless data line",
        &run,
        "exceeds the decoder limit of 67108864 bytes",
    );
}

/// One 300 MB event: dropped by the decoder at 64 MiB, never held whole (before: 595 MB).
#[test]
fn huge_event_over_the_decoder_limit() {
    let run = simple(
        "300 MB event",
        Misbehaviour::HugeEvent { bytes: 300_000_000 },
        20,
        &[],
    );
    assert_could_not_run(
        "300 MB event",
        &run,
        "exceeds the decoder limit of 67108864 bytes",
    );
}

/// A 4 MiB result is within every default limit: the probe runs both rounds (the hostile server
/// answers every resume `405`).
#[test]
fn four_mib_result_is_probed() {
    let run = simple(
        "4 MiB event",
        Misbehaviour::HugeEvent { bytes: 4 * MIB },
        20,
        &[],
    );
    assert_not_resumable("4 MiB event", &run, &["conflict", "conflict"]);
    assert!(
        run.stdout.contains("405"),
        "the refusal names the status: {run:?}"
    );
}

/// Endless tiny events in 1 MiB writes: stopped by the event limit (before: +12 MB/s, no end).
#[test]
fn tiny_events_in_big_chunks() {
    let run = simple(
        "tiny events, 1 MiB chunks",
        Misbehaviour::TinyEvents {
            chunk: MIB as usize,
        },
        20,
        &[],
    );
    assert_could_not_run(
        "tiny events",
        &run,
        "100000 events without its response: the --max-events limit of 100000",
    );
}

/// The byte limit, on the same endless stream.
#[test]
fn tiny_events_stopped_by_the_byte_limit() {
    let run = simple(
        "tiny events, --max-bytes",
        Misbehaviour::TinyEvents { chunk: 64 << 10 },
        20,
        &["--max-bytes", "100000"],
    );
    assert_could_not_run(
        "tiny events --max-bytes",
        &run,
        "stopped after 100000 bytes",
    );
    assert!(run.stderr.contains("--max-bytes limit"), "{run:?}");
}

/// A body that trickles a comment byte every 10 ms never ends: the overall timeout ends the
/// probe.
#[test]
fn slow_loris_ends_at_the_timeout() {
    let run = simple(
        "slow loris",
        Misbehaviour::SlowLoris {
            every: Duration::from_millis(10),
        },
        3,
        &[],
    );
    assert_could_not_run("slow loris", &run, "did not finish within 3 s (--timeout)");
    assert!(run.elapsed >= Duration::from_secs(3), "{run:?}");
}

/// A response head trickled byte by byte, never finished.
#[test]
fn slow_head_ends_at_the_timeout() {
    let run = simple(
        "slow head",
        Misbehaviour::SlowHead {
            every: Duration::from_millis(10),
        },
        3,
        &[],
    );
    assert_could_not_run("slow head", &run, "did not finish within 3 s");
}

/// Priming events forever: the timeout, or the event limit when it comes first.
#[test]
fn endless_priming() {
    let run = simple(
        "endless priming",
        Misbehaviour::EndlessPriming {
            every: Duration::from_millis(20),
        },
        3,
        &[],
    );
    assert_could_not_run("endless priming", &run, "did not finish within 3 s");
    let run = simple(
        "endless priming, --max-events",
        Misbehaviour::EndlessPriming {
            every: Duration::from_millis(1),
        },
        10,
        &["--max-events", "50"],
    );
    assert_could_not_run("endless priming --max-events", &run, "stopped after");
    assert!(run.stderr.contains("and 50 events"), "{run:?}");
}

/// Another stream's events on the resume, with its result to the call's id: the guard refuses,
/// so the probe says not resumable (before: `continues`, `resumable`, exit 0). Cut inside the
/// progress event, the resume skips it (`reordered`); cut at the boundary, the resume is another
/// stream's.
#[test]
fn foreign_stream_is_not_resumable() {
    for shape in [IdShape::Slash, IdShape::Dash] {
        let name = format!("foreign stream {shape:?}");
        let run = simple(
            &name,
            Misbehaviour::ForeignStream {
                priming_only: false,
                shape,
            },
            10,
            &[],
        );
        assert_not_resumable(&name, &run, &["reordered", "other-stream"]);
        let evidence = run.json()["rounds"][1]["evidence"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            evidence.contains("guard") && evidence.contains("another stream"),
            "{name}: {evidence}"
        );
        // A stream of one priming event: one round, cut after it.
        let name = format!("foreign stream {shape:?}, priming only");
        let run = simple(
            &name,
            Misbehaviour::ForeignStream {
                priming_only: true,
                shape,
            },
            10,
            &[],
        );
        assert_not_resumable(&name, &run, &["other-stream"]);
        assert_eq!(run.json()["rounds"][0]["cut"], "boundary");
    }
}

/// A resume answered busy, or refused.
#[test]
fn resume_busy_or_refused() {
    for (status, want) in [(503, "busy"), (429, "busy"), (409, "conflict")] {
        let name = format!("resume answered {status}");
        let run = simple(
            &name,
            Misbehaviour::ResumeBusy {
                status,
                retry_after: "1".into(),
            },
            10,
            &[],
        );
        assert_not_resumable(&name, &run, &[want]);
        assert!(run.stdout.contains(&status.to_string()), "{name}: {run:?}");
    }
}

/// Each resume brings one new priming event and ends: no response.
#[test]
fn retry_storm_is_empty() {
    let run = simple("retry storm", Misbehaviour::RetryStorm, 10, &[]);
    assert_not_resumable("retry storm", &run, &["empty"]);
}

/// An endless error body: on the call, the probe cannot run; on the resume, the guard refuses the
/// status and the body is never read.
#[test]
fn error_bodies() {
    let run = simple(
        "error body on tools/call",
        Misbehaviour::ErrorBody { on: Hit::ToolsCall },
        10,
        &[],
    );
    assert_could_not_run("error body on tools/call", &run, "500");
    let run = simple(
        "error body on the resume",
        Misbehaviour::ErrorBody { on: Hit::Get },
        10,
        &[],
    );
    assert_not_resumable("error body on the resume", &run, &["conflict", "conflict"]);
    assert!(run.stdout.contains("500"), "{run:?}");
}

/// A chunked body cut without its terminator is a transport error, not the end of the stream:
/// reported as such (before: read as a clean end, then classified).
#[test]
fn a_broken_body_is_a_transport_error() {
    let run = probe_hostile(
        "chunked body cut",
        Misbehaviour::TinyEvents { chunk: 16 << 10 },
        Limits {
            max_body_bytes: 256 << 10,
            max_duration: Duration::from_secs(30),
        },
        Framing::Chunked,
        10,
        &[],
    );
    assert_could_not_run(
        "chunked body cut",
        &run,
        "the baseline call's stream failed after",
    );
}

/// A big response that fits, followed by endless keep-alives: the probe stops reading at the
/// response; one over the decoder limit is reported as such instead of waiting for the timeout.
#[test]
fn oversized_response() {
    let run = simple(
        "oversized response 1 MiB",
        Misbehaviour::OversizedResponse { bytes: MIB },
        10,
        &[],
    );
    assert_not_resumable("oversized response 1 MiB", &run, &["conflict", "conflict"]);
    let run = simple(
        "oversized response 100 MB",
        Misbehaviour::OversizedResponse { bytes: 100_000_000 },
        20,
        &[],
    );
    assert_could_not_run(
        "oversized response 100 MB",
        &run,
        "exceeds the decoder limit",
    );
}

/// Broken HTTP: a redirect loop, an invalid status line, a huge head. The probe cannot run.
#[test]
fn broken_http() {
    let run = simple(
        "redirect loop",
        Misbehaviour::Redirect {
            status: 307,
            location: "/mcp".into(),
        },
        10,
        &[],
    );
    assert_could_not_run("redirect loop", &run, "initialize");
    let run = simple("malformed head", Misbehaviour::MalformedHead, 10, &[]);
    assert_could_not_run("malformed head", &run, "invalid HTTP status-code");
    let run = simple(
        "huge head",
        Misbehaviour::HugeHead { bytes: 4 << 20 },
        10,
        &[],
    );
    assert_could_not_run("huge head", &run, "message head is too large");
}
