//! `ssegate probe`: how a live MCP server behaves on resumption.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

mod engine;
mod report;
mod watch;

use engine::{ProbeConfig, Report, Round, TaskReread, probe};

use ssegate::client::TransportStrategy;

use crate::client_args::{Connection, client_config, seconds, transport_parser};

/// Probe a live MCP server's resumption behaviour: initialize, list tools, call a tool, cut the
/// connection in the middle of its largest event and (second round) at the event boundary before
/// it, resume with Last-Event-ID, and judge the resumed stream with ssegate's guard: continues,
/// replays-event, resends-cursor (resumable), or restarted, other-stream, reordered, corrupt, empty,
/// held-open, conflict, busy, gone, no-ids, over-limit, transport-error. A server that speaks MCP
/// 2026-07-28 gets the same rounds on it (no event ids, as that revision specifies, is no-ids).
/// Every read is bounded (--max-bytes, --max-events per connection, --timeout for the whole
/// probe). Exit status 0: resumable on the 2025 revisions; 1: not resumable; 2: the probe could not
/// run (or did not finish within --timeout). The tool is called three times per version, and once
/// more as a task on a server that offers tasks (whose result is then read again after a cut read).
#[derive(clap::Args, Debug)]
pub(crate) struct ProbeArgs {
    /// The server's MCP endpoint (`http://` or `https://`).
    url: String,
    /// A header sent with every request, `Name: value` (repeatable); `${VAR}` in the value is the
    /// environment variable's value (unset or empty: an error), `$${` a literal `${`.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// The tool to call (default: the first that takes no required arguments).
    #[arg(long)]
    tool: Option<String>,
    /// The tool's arguments, as JSON.
    #[arg(long, default_value = "{}")]
    args: String,
    /// A PEM file of certificates to trust besides the platform's roots.
    #[arg(long)]
    cacert: Option<PathBuf>,
    /// `--header-file`, `--allow-http`, `--connect-timeout`.
    #[command(flatten)]
    connection: Connection,
    /// How long a resume may bring no message before it counts as held open, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    replay_timeout_ms: u64,
    /// The deadline of the whole probe, in seconds (fractions allowed); past it the probe stops
    /// and exits 2.
    #[arg(long, value_name = "SECONDS", default_value_t = engine::DEFAULT_TIMEOUT.as_secs_f64(),
          value_parser = seconds)]
    timeout: f64,
    /// Most body bytes read on one connection (default 256 MiB).
    #[arg(long, value_name = "BYTES", default_value_t = engine::DEFAULT_MAX_BYTES)]
    max_bytes: u64,
    /// Most events read on one connection.
    #[arg(long, value_name = "EVENTS", default_value_t = engine::DEFAULT_MAX_EVENTS)]
    max_events: u64,
    /// The HTTP transport: `http-first` (Streamable HTTP, then the 2024-11-05 HTTP+SSE transport
    /// when `initialize` is answered 400, 404 or 405), `sse-first`, `http-only` or `sse-only`. The
    /// report names the transport found; HTTP+SSE has no resumption, so it gets no cut rounds.
    #[arg(long, value_name = "STRATEGY", default_value = TransportStrategy::default().as_str(),
          value_parser = transport_parser())]
    transport: TransportStrategy,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

fn config(args: &ProbeArgs) -> Result<ProbeConfig, String> {
    let mut client = client_config(
        &args.url,
        &args.headers,
        args.cacert.as_deref(),
        &args.connection,
    )?;
    client.transport(args.transport);
    client
        .stream_mut()
        .replay_timeout(Duration::from_millis(args.replay_timeout_ms));
    let mut config = ProbeConfig::default();
    config
        .client(client)
        .timeout(Duration::from_secs_f64(args.timeout))
        .max_bytes(args.max_bytes)
        .max_events(args.max_events);
    if let Some(tool) = &args.tool {
        let arguments =
            serde_json::from_str(&args.args).map_err(|e| format!("--args {:?}: {e}", args.args))?;
        config.tool(tool.clone(), arguments);
    }
    Ok(config)
}

fn print_text(report: &Report) {
    let s = &report.server;
    let reread = match &s.task_reread {
        Some(TaskReread::Repeatable) => {
            " (a cut read of a task reads again: repeatable)".to_owned()
        }
        Some(TaskReread::NotRepeatable(why)) => {
            format!(" (a cut read of a task: not repeatable: {why})")
        }
        Some(TaskReread::NoTask) => " (the call was answered without a task)".to_owned(),
        _ => String::new(),
    };
    println!(
        "versions  {} | tasks {}{reread}",
        s.protocol_versions.join(", "),
        s.tasks.as_str()
    );
    println!("transport {}", s.transport_name());
    println!(
        "server    protocol {} | session {} | priming {} | retry {} | ids {} | tool {}",
        s.protocol_version.as_deref().unwrap_or("?"),
        if s.session { "yes" } else { "no (sessionless)" },
        if s.priming { "yes" } else { "no" },
        s.retry_ms.map_or("-".to_owned(), |ms| format!("{ms} ms")),
        s.id_scheme.as_str(),
        s.tool
    );
    let print_rounds = |rounds: &[Round]| {
        for r in rounds {
            println!(
                "{:<9} {:<15} {}",
                r.cut.as_str(),
                r.behaviour.as_str(),
                r.evidence
            );
        }
    };
    print_rounds(&report.rounds);
    if let Some(v) = &report.stateless {
        println!(
            "{:<9} stateless | priming {} | ids {} | {}",
            v.version,
            if v.priming { "yes" } else { "no" },
            v.id_scheme.as_str(),
            if v.resumable() {
                "resumable (not in the specification)"
            } else {
                "not resumable"
            }
        );
        print_rounds(&v.rounds);
    }
    println!(
        "verdict   {}: {}",
        if report.resumable() {
            "resumable"
        } else {
            "not-resumable"
        },
        report.advice()
    );
}

pub(crate) fn run(args: &ProbeArgs) -> ExitCode {
    let config = match config(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ssegate probe: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ssegate probe: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(probe(&args.url, &config));
    // Whatever the server still holds open (a trickle, a body nobody reads) is not waited for.
    runtime.shutdown_background();
    match result {
        Ok(report) => {
            if args.json {
                println!("{}", report.to_json());
            } else {
                print_text(&report);
            }
            if report.resumable() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("ssegate probe: {e}");
            ExitCode::from(2)
        }
    }
}
