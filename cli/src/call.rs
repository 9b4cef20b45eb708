//! `ssegate call`: one tool call on a live MCP server, through the guarded client.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use serde_json::{Value, json};
use ssegate::client::{
    CallOptions, Client, ClientError, DefaultHandler, Handler, HandlerFuture, Outcome,
};
use ssegate::contract::method::TOOLS_CALL;
use ssegate::contract::{Code, DEFAULT_CALL_TIMEOUT, Kind};
use ssegate::message::{Message, RpcId};

use crate::client_args::{AuthFlags, Remote, RetryArg, TasksArg, seconds};

/// What `ssegate call --help` says of the exit statuses.
pub(crate) const EXIT_STATUS: &str = "\
Exit status:
  0  the tool's result (the JSON-RPC `result`, a CallToolResult) is on stdout, one compact line
  1  an error: connection, TLS, HTTP status, protocol, a refused stream, a timeout before the call
     was sent, a JSON-RPC error response (nothing on stdout), or a result with `isError: true`
     (printed on stdout all the same)
  2  usage: a bad flag or value, --args not a JSON object, a bad --header or --header-file line (an
     unset ${VAR} included), an unreadable or invalid --cacert, a URL that is not http(s), plain
     http:// to a host that is not loopback without --allow-http; nothing was sent
  3  outcome unknown: the response was lost and the call was not safe to re-issue (--retry), or
     --timeout passed while the call was under way; the server may have run the tool, and it was
     not run again. Nothing on stdout
Every failure is one line on stderr: `ssegate call: <kind>: <reason>`.";

/// Call one tool on a live MCP server through ssegate's guarded client and print its result: a
/// cut response stream is resumed with Last-Event-ID (2025 revisions) when the guard can prove the
/// resume continues it; otherwise the call is re-issued only as --retry allows, and else reported
/// as outcome unknown (exit 3). The result goes to stdout, what happened to stderr.
#[derive(clap::Args, Debug)]
pub(crate) struct CallArgs {
    #[command(flatten)]
    remote: Remote,
    /// The tool to call.
    tool: String,
    /// How to sign in when the server asks.
    #[command(flatten)]
    auth: AuthFlags,
    /// The tool's arguments, a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    args: String,
    /// When a call whose response was lost is issued again: never; if-safe (the tool is annotated
    /// readOnlyHint or idempotentHint); always (the tool may run twice).
    #[arg(long, value_enum, default_value_t = RetryArg::IfSafe)]
    retry: RetryArg,
    /// Whether the call may run as a task: auto (where the server offers tasks: the result is read
    /// back by polling, and a cut read is read again, never a new call); never; require (fail,
    /// before sending, if the server offers no tasks for this call).
    #[arg(long, value_enum, default_value_t = TasksArg::Auto)]
    tasks: TasksArg,
    /// The deadline of the whole command (connect, call, resumes and re-issues), in seconds
    /// (fractions allowed).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_CALL_TIMEOUT.as_secs_f64(),
          value_parser = seconds)]
    timeout: f64,
    /// Report more on stderr: the session, every lost stream, progress and other notifications
    /// (a progress token is sent).
    #[arg(short, long)]
    verbose: bool,
}

/// The progress token sent with `--verbose`.
const PROGRESS_TOKEN: &str = "ssegate-call";

/// Reports notifications and server requests on stderr (with `--verbose`); answers as the default
/// handler does (`ping`; anything else refused).
struct Reporter {
    verbose: bool,
}

impl Handler for Reporter {
    fn request(&self, method: &str, params: Option<&Value>) -> HandlerFuture {
        if self.verbose && method != "ping" {
            note(&format!(
                "the server asked for {method}: refused (not supported)"
            ));
        }
        DefaultHandler.request(method, params)
    }

    fn notification(&self, message: &Message) {
        if !self.verbose {
            return;
        }
        let Ok(value) = message.deserialize::<Value>() else {
            return;
        };
        let params = &value["params"];
        match value["method"].as_str() {
            Some("notifications/progress") => {
                let mut line = format!("progress {}", params["progress"]);
                if !params["total"].is_null() {
                    line.push_str(&format!("/{}", params["total"]));
                }
                if let Some(m) = params["message"].as_str() {
                    line.push_str(&format!(": {m}"));
                }
                note(&line);
            }
            Some("notifications/message") => note(&format!(
                "log {}: {}",
                params["level"].as_str().unwrap_or("?"),
                params["data"]
            )),
            Some(method) => note(&format!("notification {method}")),
            None => note("a message that is no notification"),
        }
    }
}

/// One line on stderr, prefixed, with control characters (a server's newlines) made spaces.
fn note(text: &str) {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let _ = writeln!(std::io::stderr().lock(), "ssegate call: {line}");
}

/// How the command ended short of printing a result.
struct Failure {
    /// A word for the kind: the contract's for the client's errors ([`ClientError::kind`], and
    /// `outcome-unknown` ([`Code::OutcomeUnknown`]) when the tool may have run), the command's own
    /// for the rest (`usage`, `rpc-error`, `tool-error`, ...).
    kind: &'static str,
    reason: String,
    status: u8,
}

impl Failure {
    fn usage(reason: String) -> Failure {
        Failure {
            kind: "usage",
            reason,
            status: 2,
        }
    }

    /// The call was under way when it failed: the server may have run the tool (exit 3).
    fn outcome_unknown(reason: String) -> Failure {
        Failure {
            kind: Code::OutcomeUnknown.as_str(),
            reason,
            status: 3,
        }
    }

    fn client(e: &ClientError) -> Failure {
        Failure::client_explained(e, e.to_string())
    }

    /// A client error said as `reason` (a failed sign-in says what to do).
    fn client_explained(e: &ClientError, mut reason: String) -> Failure {
        match e {
            ClientError::OutcomeUnknown { received, .. } => {
                if !received.is_empty() {
                    reason.push_str(&format!(
                        " ({} message(s) for the call arrived before the loss)",
                        received.len()
                    ));
                }
                Failure::outcome_unknown(reason)
            }
            // The URL, a certificate, a proxy setting: nothing was sent.
            ClientError::Setup(_) => Failure {
                kind: e.kind().as_str(),
                reason,
                status: 2,
            },
            _ => Failure {
                kind: e.kind().as_str(),
                reason,
                status: 1,
            },
        }
    }
}

/// What was learnt of the server once connected.
struct Session {
    version: String,
    stateless: bool,
    session: Option<String>,
}

impl Session {
    fn of(client: &Client) -> Session {
        Session {
            version: client.protocol_version().unwrap_or_else(|| "?".to_owned()),
            stateless: client.is_stateless(),
            session: client.session_id(),
        }
    }

    fn describe(&self) -> String {
        let how = if self.stateless {
            "stateless"
        } else if self.session.is_some() {
            "session"
        } else {
            "sessionless"
        };
        format!("protocol {} ({how})", self.version)
    }
}

/// A call's answer: the JSON-RPC response and how it was obtained.
struct Answered {
    message: Message,
    outcome: Outcome,
}

async fn call(
    args: &CallArgs,
    arguments: Value,
    session: &mut Option<Session>,
) -> Result<Answered, Failure> {
    let deadline = Duration::from_secs_f64(args.timeout);
    let started = Instant::now();
    let mut config = args.remote.config().map_err(Failure::usage)?;
    crate::auth::configure(&mut config, &args.remote, &args.auth, "ssegate call")
        .map_err(Failure::usage)?;
    let explained = |e: &ClientError| {
        Failure::client_explained(e, crate::auth::explain(e, &args.remote.url, &args.auth))
    };
    config
        .call_timeout(Some(deadline))
        .handler(Arc::new(Reporter {
            verbose: args.verbose,
        }));
    let client = Client::connect(&args.remote.url, config)
        .await
        .map_err(|e| explained(&e))?;
    let s = Session::of(&client);
    if args.verbose {
        match &s.session {
            Some(id) => note(&format!("connected: {}, session {id}", s.describe())),
            None => note(&format!("connected: {}", s.describe())),
        }
    }
    *session = Some(s);
    let mut options = CallOptions::default();
    options.retry(args.retry.into()).tasks(args.tasks.into());
    let left = deadline.saturating_sub(started.elapsed());
    if left.is_zero() {
        return Err(Failure::client(&ClientError::Timeout(deadline)));
    }
    options.timeout(left);
    if args.verbose {
        options.progress_token(RpcId::String(PROGRESS_TOKEN.into()));
    }
    let params = json!({"name": args.tool, "arguments": arguments});
    let result = client.call_with(TOOLS_CALL, params, &options).await;
    // Ends the session (`DELETE`), within what is left of the deadline and briefly: the answer is
    // in, so a server slow to forget the session does not hold it.
    let left = deadline
        .saturating_sub(started.elapsed())
        .min(Duration::from_secs(5));
    let closing = tokio::time::timeout(left, client.close());
    match closing.await {
        Ok(Err(e)) if args.verbose => note(&format!("could not end the session: {e}")),
        Err(_) if args.verbose => note("could not end the session in time"),
        _ => {}
    }
    let response = result.map_err(|e| match e {
        // The call was under way: the server may have run the tool.
        ClientError::Timeout(_) => Failure::outcome_unknown(format!(
            "no answer within --timeout {} s; the call was under way, so the tool may have run (it was not run again)",
            args.timeout
        )),
        e => explained(&e),
    })?;
    Ok(Answered {
        message: response.message,
        outcome: response.outcome,
    })
}

/// `--args`: a JSON object.
fn arguments(text: &str) -> Result<Value, String> {
    match serde_json::from_str(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(format!("--args {text:?}: expected a JSON object")),
        Err(e) => Err(format!("--args {text:?}: not JSON: {e}")),
    }
}

/// `text` without the whitespace outside its strings: one JSON value, compact, on one line (a JSON
/// string holds no raw line break), every token as the server wrote it.
fn compact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        } else if matches!(c, ' ' | '\t' | '\n' | '\r') {
            continue;
        }
        out.push(c);
    }
    out
}

/// The result of a tool call, or why there is none. `Ok((result, tool error))`.
fn result_of(message: &Message) -> Result<(String, Option<String>), Failure> {
    let bad = |why: String| Failure {
        kind: Kind::Protocol.as_str(),
        reason: why,
        status: 1,
    };
    let bytes = message.to_bytes();
    let response: HashMap<String, &RawValue> = serde_json::from_slice(&bytes)
        .map_err(|e| bad(format!("the response is not a JSON-RPC object: {e}")))?;
    if let Some(error) = response.get("error") {
        let error: Value = serde_json::from_str(error.get()).unwrap_or(Value::Null);
        let code = error["code"]
            .as_i64()
            .map_or_else(|| "?".to_owned(), |c| c.to_string());
        let mut reason = format!(
            "{code}: {}",
            error["message"].as_str().unwrap_or("(no message)")
        );
        if let Some(data) = error.get("data") {
            reason.push_str(&format!(" (data: {})", head(&data.to_string())));
        }
        return Err(Failure {
            kind: "rpc-error",
            reason,
            status: 1,
        });
    }
    let result = response
        .get("result")
        .ok_or_else(|| bad("the response has neither result nor error".to_owned()))?;
    let fields: HashMap<String, &RawValue> = serde_json::from_str(result.get())
        .map_err(|_| bad("the result is not a JSON object".to_owned()))?;
    let tool_error = match fields.get("isError").map(|v| v.get()) {
        Some("true") => {
            let content: Value = fields
                .get("content")
                .and_then(|c| serde_json::from_str(c.get()).ok())
                .unwrap_or(Value::Null);
            let text = content[0]["text"].as_str().unwrap_or("(no text content)");
            Some(head(text).to_owned())
        }
        _ => None,
    };
    Ok((compact(result.get()), tool_error))
}

/// The start of a long text, for one line.
fn head(text: &str) -> &str {
    let mut end = text.len().min(300);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn summary(session: &Session, tool: &str, outcome: &Outcome, bytes: usize) -> String {
    let plural = |n: u32, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut line = format!(
        "{}: tools/call {tool}: {}, {}",
        session.describe(),
        plural(outcome.attempts, "attempt", "attempts"),
        plural(outcome.resumes, "resume", "resumes"),
    );
    let reissues = outcome.attempts.saturating_sub(1);
    line.push_str(&format!(", {}", plural(reissues, "re-issue", "re-issues")));
    if outcome.renegotiations > 0 {
        line.push_str(&format!(
            " ({})",
            plural(outcome.renegotiations, "new session", "new sessions")
        ));
    }
    if outcome.input_rounds > 0 {
        line.push_str(&format!(
            ", {}",
            plural(outcome.input_rounds, "input round", "input rounds")
        ));
    }
    if let Some(task) = &outcome.task {
        line.push_str(&format!(
            ", ran as task {} ({}, {})",
            task.id(),
            task.generation().as_str(),
            plural(outcome.task_reads, "read", "reads")
        ));
    }
    line.push_str(&format!(", {bytes} bytes"));
    line
}

pub(crate) fn run(args: &CallArgs) -> ExitCode {
    let arguments = match arguments(&args.args) {
        Ok(a) => a,
        Err(e) => return fail(&Failure::usage(e), None),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let f = Failure {
                kind: "runtime",
                reason: format!("cannot start the runtime: {e}"),
                status: 1,
            };
            return fail(&f, None);
        }
    };
    let mut session = None;
    let answered = runtime.block_on(call(args, arguments, &mut session));
    // Whatever the server still holds open is not waited for.
    runtime.shutdown_background();
    let answered = match answered {
        Ok(a) => a,
        Err(f) => return fail(&f, session.as_ref()),
    };
    let session = session.expect("connected");
    if args.verbose {
        for refusal in &answered.outcome.refusals {
            note(&format!("a response stream was lost: {refusal}"));
        }
        let o = &answered.outcome;
        if o.skipped > 0 || o.other_messages > 0 {
            note(&format!(
                "{} event(s) skipped (replays, keep-alives), {} other message(s) before the response",
                o.skipped, o.other_messages
            ));
        }
    }
    let (result, tool_error) = match result_of(&answered.message) {
        Ok(r) => r,
        Err(f) => return fail(&f, Some(&session)),
    };
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{result}").and_then(|()| stdout.flush()) {
        let f = Failure {
            kind: "output",
            reason: format!("cannot write the result: {e}"),
            status: 1,
        };
        return fail(&f, Some(&session));
    }
    let line = summary(&session, &args.tool, &answered.outcome, result.len());
    match tool_error {
        None => {
            note(&format!("result: {line}"));
            ExitCode::SUCCESS
        }
        Some(text) => fail(
            &Failure {
                kind: "tool-error",
                reason: format!("the tool reported an error (isError: true): {text}; {line}"),
                status: 1,
            },
            None,
        ),
    }
}

/// The failure's one line on stderr, and its exit status.
fn fail(f: &Failure, session: Option<&Session>) -> ExitCode {
    match session {
        Some(s) => note(&format!("{}: {} [{}]", f.kind, f.reason, s.describe())),
        None => note(&format!("{}: {}", f.kind, f.reason)),
    }
    ExitCode::from(f.status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_keeps_strings_and_drops_whitespace_between_tokens() {
        let text = "{ \"a\" : [ 1 ,\n 2 ],\r\n\t\"b\": \"x \\\" y \\\\\", \"c\": 1e400 }";
        assert_eq!(compact(text), r#"{"a":[1,2],"b":"x \" y \\","c":1e400}"#);
    }

    #[test]
    fn arguments_are_one_json_object() {
        assert!(arguments("{\"size\": 3}").is_ok());
        assert!(
            arguments("[1]")
                .unwrap_err()
                .contains("expected a JSON object")
        );
        assert!(arguments("{").unwrap_err().contains("not JSON"));
    }
}
