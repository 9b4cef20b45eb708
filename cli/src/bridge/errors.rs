//! The JSON-RPC errors the bridge answers with when the server gave no answer of its own: the
//! codes, `data.kind` and `data.outcome` words of [`ssegate::contract`], read from the client's
//! error ([`ClientError::code`], [`ClientError::kind`], [`ClientError::outcome`]).
//!
//! | code | when |
//! | --- | --- |
//! | [`OUTCOME_UNKNOWN`](contract::OUTCOME_UNKNOWN) | a `tools/call` was sent, its answer was lost, and it was not sent again (whatever the kind): the tool may have run |
//! | [`UNAVAILABLE`](contract::UNAVAILABLE) | the server could not be reached, did not take the request, or gave no answer in time |
//! | [`SERVER_PROTOCOL`](contract::SERVER_PROTOCOL) | the server broke the protocol (a torn, invalid or foreign answer) |
//! | [`REFUSED`](contract::REFUSED) | the answer's stream was refused (kinds `refused`, `too-many-resumes`, `no-progress`) for a request that is no `tools/call` |
//!
//! `data` says more ([`contract::data`]): `kind` (a [`Kind`] word: `refused`, `unreachable`,
//! `status`, `timeout`, ...), `outcome` (an [`Outcome`] word: `unknown`, it may have run;
//! `not-run`, the server did not take it; `failed`, it answered with a failure), `method`,
//! `reason` (one line), `refusal` (the [`RefusalKind`](ssegate::resume::RefusalKind) word, when
//! the engine refused the stream), `messagesReceived`, `status`, and `task` (the task handle, when
//! the call ran as a task: the host can read it with `tasks/get` and `tasks/result`). A call that
//! ran as a task and failed is answered with the server's own error, `data.kind` `task-failed`.

use serde_json::{Value, json};
use ssegate::client::{ClientError, TaskErrorKind};
use ssegate::contract::{self, Code, Kind, Outcome, data, jsonrpc};

/// A JSON-RPC error object.
#[derive(Clone, Debug)]
pub(crate) struct Error {
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Value,
}

impl Error {
    pub(crate) fn new(code: i32, message: impl Into<String>) -> Error {
        Error {
            code: code.into(),
            message: message.into(),
            data: Value::Null,
        }
    }

    /// The `error` member.
    pub(crate) fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if !self.data.is_null() {
            error["data"] = self.data.clone();
        }
        error
    }

    /// The error answering `method` that failed with `kind` and `outcome`, with `reason`: the
    /// contract's code ([`Code::for_answer`]) and message.
    pub(crate) fn of_kind(method: &str, kind: Kind, outcome: Outcome, reason: &str) -> Error {
        let code = Code::for_answer(method, kind, outcome);
        Error {
            code: code.value().into(),
            message: code.message().to_owned(),
            data: json!({
                data::KIND: kind.as_str(),
                data::OUTCOME: outcome.as_str(),
                data::METHOD: method,
                data::REASON: reason,
            }),
        }
    }

    /// The error answering `method` that failed with `e`.
    pub(crate) fn of_client(method: &str, e: &ClientError) -> Error {
        let (kind, outcome) = (e.kind(), e.outcome());
        let mut data = json!({
            data::KIND: kind.as_str(),
            data::OUTCOME: outcome.as_str(),
            data::METHOD: method,
            data::REASON: e.to_string(),
        });
        if let Some(refusal) = e.refusal() {
            data[data::REFUSAL] = json!(refusal.kind.as_str());
        }
        match e {
            ClientError::OutcomeUnknown { received, .. } => {
                data[data::MESSAGES_RECEIVED] = json!(received.len());
            }
            ClientError::Status { status, .. } => data[data::STATUS] = json!(status),
            ClientError::Task(t) => {
                if let Some(task) = &t.task {
                    data[data::TASK] = task.to_json();
                }
                // The task ran and failed: the server's own error, as it gave it.
                if let TaskErrorKind::Failed { error } = &t.kind {
                    debug_assert_eq!((kind, outcome), (Kind::TaskFailed, Outcome::Failed));
                    if let Some(d) = error.get("data") {
                        data["error"] = d.clone();
                    }
                    let code = error["code"]
                        .as_i64()
                        .unwrap_or(jsonrpc::INTERNAL_ERROR.into());
                    let message = error["message"].as_str().unwrap_or("the task failed");
                    return Error {
                        code,
                        message: message.to_owned(),
                        data,
                    };
                }
            }
            _ => {}
        }
        let code: Code = e.code(method);
        Error {
            code: code.value().into(),
            message: code.message().to_owned(),
            data,
        }
    }
}

/// The help's table of the codes the bridge answers with, from the contract: each code, its
/// message, and when (the kinds it answers; the outcome-unknown code answers any kind).
pub(crate) fn code_table() -> String {
    let mut table = String::new();
    for code in Code::ALL {
        let when = match code {
            Code::OutcomeUnknown => format!(
                "a {} whose answer was lost (any kind; `data.task` names the task when it ran as \
                 one), or a request --retry never kept from being sent again",
                contract::method::TOOLS_CALL
            ),
            _ => {
                let kinds: Vec<&str> = Kind::ALL
                    .into_iter()
                    .filter(|k| k.code() == code && *k != Kind::TaskFailed)
                    .map(Kind::as_str)
                    .collect();
                format!("kind {}", kinds.join(", "))
            }
        };
        let row = format!("{}  {}: {when}", code.value(), code.message());
        table.push_str(&wrap(&row, "  ", "          ", HELP_WIDTH));
    }
    table
}

/// The width the help's code table is wrapped at.
const HELP_WIDTH: usize = 96;

/// `text` wrapped at `width` columns, between words: the first line after `first`, the others
/// after `rest`; each line ends with a newline.
fn wrap(text: &str, first: &str, rest: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = first.to_owned();
    let mut empty = true;
    for word in text.split(' ') {
        if !empty && line.len() + 1 + word.len() > width {
            out.push_str(&line);
            out.push('\n');
            line = rest.to_owned();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ssegate::resume::Failure;

    use super::*;

    // The oracles: the contract's values, stated here independently.

    #[test]
    fn a_lost_tool_call_is_outcome_unknown() {
        let e = ClientError::Timeout(Duration::from_secs(1));
        let error = Error::of_client("tools/call", &e);
        assert_eq!(error.code, -32050);
        assert_eq!(error.data["outcome"], "unknown");
        assert_eq!(error.data["kind"], "timeout");
        assert_eq!(error.data["method"], "tools/call");
        assert!(error.data.get("refusal").is_none());
        // The same loss on a method without side effects is no unknown outcome.
        assert_eq!(Error::of_client("tools/list", &e).code, -32051);
        let setup = ClientError::Setup("bad".into());
        let error = Error::of_client("tools/call", &setup);
        assert_eq!(
            (error.code, &error.data["outcome"], &error.data["kind"]),
            (-32051, &json!("not-run"), &json!("setup"))
        );
    }

    #[test]
    fn a_refused_stream_is_refused_unless_it_is_a_lost_tool_call() {
        let e = ClientError::Refused {
            failure: Box::new(Failure::NoProgress {
                resumes: 4,
                outstanding: vec![],
            }),
            attempts: 3,
            transport: None,
        };
        let error = Error::of_client("tools/list", &e);
        assert_eq!(error.code, -32053, "{error:?}");
        assert_eq!(error.message, "the answer's stream was refused");
        assert_eq!(
            (&error.data["kind"], &error.data["outcome"]),
            (&json!("no-progress"), &json!("unknown"))
        );
        let error = Error::of_client("tools/call", &e);
        assert_eq!(error.code, -32050, "{error:?}");
        assert_eq!(error.data["kind"], "no-progress");
    }

    #[test]
    fn the_help_table_names_every_code_with_its_kinds() {
        let table = code_table();
        let row = |code: &str| {
            let start = table
                .find(&format!("  {code}  "))
                .unwrap_or_else(|| panic!("{code}"));
            let end = table[start + 2..]
                .find("\n  -")
                .map_or(table.len(), |i| start + 2 + i);
            table[start..end]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert!(row("-32050").contains("tools/call"), "{table}");
        assert!(row("-32051").contains("unreachable"), "{table}");
        assert!(
            row("-32052").contains("invalid-response, protocol"),
            "{table}"
        );
        assert!(
            row("-32053").contains("refused, too-many-resumes, no-progress"),
            "{table}"
        );
        assert!(table.lines().all(|l| l.len() <= HELP_WIDTH), "{table}");
    }

    #[test]
    fn wrap_breaks_between_words() {
        assert_eq!(wrap("aa bb cc", "> ", "  ", 7), "> aa bb\n  cc\n");
        assert_eq!(wrap("aaaaaaaaaa", "", "", 4), "aaaaaaaaaa\n");
    }
}
