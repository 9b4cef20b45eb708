//! `ssegate check`: replay a captured MCP SSE response through the decoder, the gate and the guard.

use std::path::PathBuf;
use std::process::ExitCode;

use bytes::Bytes;
pub(crate) mod capture;

use capture::{Step, check, split_capture};
use ssegate::inspect::EventInfo;
use ssegate::message::RpcId;
use ssegate::resume::Policy;
use ssegate::resume::{self, Answer, Output};

use crate::input::read_input;

/// Report on a captured MCP SSE response (as `curl -N` saves it): every event, the gate's verdict
/// and the guard's decision, then a summary. Exits 1 when the guard refused anything.
///
/// Several connections of one stream (the response and its resumptions) go in a length-framed
/// capture that no server output can imitate:
///
///     #ssegate-capture v2
///     #connection bytes=N
///     <N bytes: the original response>
///     #connection bytes=M status=200 content-type=text/event-stream retry-after=2
///     <M bytes: the resumed connection>
///
/// (every field but `bytes` optional; status defaults to 200, content-type to text/event-stream).
/// A file without the first line is one connection.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct CheckArgs {
    /// The capture (stdin when absent or `-`).
    file: Option<PathBuf>,
    /// What to do with a cut inside an event: `verified` discards it and checks the replay,
    /// `strict` refuses to resume.
    #[arg(long, value_enum, default_value_t = PolicyArg::Verified)]
    policy: PolicyArg,
    /// A JSON-RPC request id whose response the stream must deliver (repeatable; a number, or any
    /// other text for a string id). With one, an empty resume is a refusal, not a success.
    #[arg(long = "request-id", value_name = "ID")]
    request_ids: Vec<String>,
    #[command(flatten)]
    gate: crate::input::GateSettings,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum PolicyArg {
    Strict,
    Verified,
}

fn show(id: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(id))
}

fn show_opt(id: Option<&Bytes>) -> String {
    id.map_or_else(|| "-".to_string(), |b| show(b))
}

pub(crate) fn run(args: &CheckArgs) -> ExitCode {
    let capture = match read_input(args.file.as_ref()) {
        Ok(bytes) => Bytes::from(bytes),
        Err(e) => {
            eprintln!("ssegate check: cannot read input: {e}");
            return ExitCode::from(2);
        }
    };
    let policy = match args.policy {
        PolicyArg::Strict => Policy::Strict,
        PolicyArg::Verified => Policy::Verified,
    };
    let mut guard = args.gate.guard();
    guard.policy(policy);
    let mut config = resume::StreamConfig::default();
    config.guard(guard);
    let expect: Vec<RpcId> = args
        .request_ids
        .iter()
        .map(|id| {
            id.parse::<i64>()
                .map_or_else(|_| RpcId::String(id.as_str().into()), RpcId::Number)
        })
        .collect();
    let connections = match split_capture(&capture) {
        Ok(connections) => connections,
        Err(e) => {
            eprintln!("ssegate check: {e}");
            return ExitCode::from(2);
        }
    };
    let summary = check(&connections, &config, &expect, |step| {
        if let Some(line) = line(&step) {
            println!("{line}");
        }
    });
    println!(
        "summary: connections={} events={} messages={} bytes={} skipped={} errors={} unanswered={}",
        summary.connections,
        summary.events,
        summary.messages,
        summary.bytes,
        summary.skipped,
        summary.errors,
        summary.unanswered.len()
    );
    if summary.errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn event_head(e: &EventInfo) -> String {
    format!(
        "event     id={} type={} bytes={} verdict={}",
        show_opt(e.id.as_ref()),
        String::from_utf8_lossy(&e.event_type),
        e.bytes,
        e.verdict.map_or("-", |v| v.as_str())
    )
}

/// One line per step; `None` for steps that only schedule (the reconnect itself is reported with
/// its response).
fn line(step: &Step<'_>) -> Option<String> {
    let (output, event) = match step {
        Step::Output { output, event } => (*output, *event),
        Step::Reconnect { response, answer } => {
            let head = format!(
                "reconnect {} {}",
                response.status,
                response.content_type.as_deref().unwrap_or("-")
            );
            return Some(match answer {
                Answer::Read => format!("{head} -> ok"),
                Answer::Drop => format!("{head} -> drop the body"),
            });
        }
    };
    let decision = match output {
        Output::Deliver(d) => match &d.rpc.id {
            Some(id) => format!("deliver ({:?} {id})", d.rpc.kind),
            None => format!("deliver ({:?})", d.rpc.kind),
        },
        Output::Skip(s) => format!("skip: {s}"),
        Output::Cursor(c) => format!("cursor := {}", show(c)),
        Output::Dropped(e) => return Some(format!("decode    -> DROP: {e}")),
        Output::Disconnected(resume) => {
            let how = match &resume.discarded {
                Some(p) => format!(
                    "cut inside an event ({} bytes, id {}) discarded",
                    p.bytes,
                    show_opt(p.id.as_ref())
                ),
                None => "at an event boundary".to_string(),
            };
            return Some(if resume.needed {
                format!(
                    "end       {how} -> resume from {} after {} ms",
                    show_opt(resume.last_event_id.as_ref()),
                    resume.delay.as_millis()
                )
            } else {
                format!("end       {how} -> nothing outstanding")
            });
        }
        Output::Failed(e) => format!("REFUSE: {e}"),
        _ => return None,
    };
    Some(match event {
        Some(e) => format!("{} -> {decision}", event_head(e)),
        None => format!("end       -> {decision}"),
    })
}
