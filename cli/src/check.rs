//! `ssegate check`: replay a captured MCP SSE response through the decoder, the gate and the guard.

use std::path::PathBuf;
use std::process::ExitCode;

use bytes::Bytes;
use ssegate::check::{Step, check, describe_skip, split_capture};
use ssegate::guard::{Config, Decision, Policy};
use ssegate::message::RpcId;

use crate::input::read_input;

/// Report on a captured MCP SSE response (as `curl -N` saves it): every event, the gate's verdict
/// and the guard's decision, then a summary. Exits 1 when the guard refused anything.
///
/// Several connections of one stream (the response and its resumptions) may be concatenated, each
/// after a marker line that starts a line of its own:
///
///     #--ssegate-reconnect status=200 content-type=text/event-stream retry-after=2
///
/// (every field optional; status defaults to 200, content-type to text/event-stream). The single
/// line feed just before a marker belongs to the marker, not to the previous connection, so a
/// connection cut mid-line is written as its bytes, a line feed, then the marker.
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
    let mut guard = Config::default().policy(policy).build();
    for id in &args.request_ids {
        guard.expect_response(
            id.parse::<i64>()
                .map_or_else(|_| RpcId::String(id.as_str().into()), RpcId::Number),
        );
    }
    let connections = split_capture(&capture);
    let summary = check(&connections, &mut guard, |step| println!("{}", line(step)));
    let unanswered = guard.outstanding().len();
    println!(
        "summary: connections={} events={} messages={} bytes={} skipped={} errors={} unanswered={}",
        summary.connections,
        summary.events,
        summary.messages,
        summary.bytes,
        summary.skipped,
        summary.errors,
        unanswered
    );
    if summary.errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn line(step: &Step) -> String {
    match step {
        Step::Event {
            event,
            verdict,
            decision,
        } => {
            let own = event.has_own_id.then_some(&event.id);
            let head = format!(
                "event     id={} type={} bytes={} verdict={}",
                show_opt(own),
                String::from_utf8_lossy(event.event_type()),
                event.data.len(),
                verdict.map_or("-", |v| v.as_str())
            );
            let decision = match decision {
                Ok(Decision::Deliver(d)) => match &d.rpc.id {
                    Some(id) => format!("deliver ({:?} {id})", d.rpc.kind),
                    None => format!("deliver ({:?})", d.rpc.kind),
                },
                Ok(Decision::Skip(s)) => describe_skip(s),
                Ok(Decision::Cursor(c)) => format!("cursor := {}", show(c)),
                Err(e) => format!("REFUSE: {e}"),
            };
            format!("{head} -> {decision}")
        }
        Step::End(Ok(resume)) => {
            let how = match &resume.discarded {
                Some(p) => format!(
                    "cut inside an event ({} bytes, id {}) discarded",
                    p.bytes,
                    show_opt(p.id.as_ref())
                ),
                None => "at an event boundary".to_string(),
            };
            if resume.needed {
                format!(
                    "end       {how} -> resume from {} after {} ms",
                    show_opt(resume.last_event_id.as_ref()),
                    resume.delay.as_millis()
                )
            } else {
                format!("end       {how} -> nothing outstanding")
            }
        }
        Step::End(Err(e)) => format!("end       -> REFUSE: {e}"),
        Step::Reconnect(r, answer) => {
            let head = format!(
                "reconnect {} {}",
                r.status,
                r.content_type.as_deref().unwrap_or("-")
            );
            match answer {
                Ok(()) => format!("{head} -> ok"),
                Err(e) => format!("{head} -> REFUSE: {e}"),
            }
        }
        Step::DecodeError(e, refusal) => format!("decode    {e} -> REFUSE: {refusal}"),
    }
}
