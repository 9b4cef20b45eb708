//! The JSON-RPC errors the bridge answers with when the server gave no answer of its own.
//!
//! | code | meaning |
//! | --- | --- |
//! | `-32050` | outcome unknown: a `tools/call` was sent, its answer was lost, and it was not sent again; the tool may have run |
//! | `-32051` | the server could not be reached, refused the request, or gave no answer in time (nothing known to have run) |
//! | `-32052` | the server broke the protocol (a torn, invalid or foreign answer) |
//!
//! `data` says more: `kind` (a word: `outcome-unknown`, `unreachable`, `status`, `timeout`, ...),
//! `outcome` (`unknown`: it may have run; `not-run`: the server did not take it; `failed`: the
//! server answered with a failure), `reason` (one line), `method`, and `task` (the task handle,
//! when the call ran as a task: the host can read it with `tasks/get` and `tasks/result`).

use serde_json::{Value, json};
use ssegate::client::{ClientError, TaskErrorKind};

/// A `tools/call` was sent, its answer lost, and it was not sent again: the tool may have run.
pub(crate) const OUTCOME_UNKNOWN: i64 = -32050;
/// The server could not be reached, refused the request or did not answer in time.
pub(crate) const UNAVAILABLE: i64 = -32051;
/// The server broke the protocol.
pub(crate) const SERVER_PROTOCOL: i64 = -32052;

/// A JSON-RPC error object.
#[derive(Debug)]
pub(crate) struct Error {
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Value,
}

impl Error {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Error {
        Error {
            code,
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

    /// The error answering `method` that failed with `e`.
    pub(crate) fn of_client(method: &str, e: &ClientError) -> Error {
        let reason = e.to_string();
        let mut task = None;
        let (kind, outcome, protocol) = match e {
            ClientError::OutcomeUnknown { .. } => ("outcome-unknown", "unknown", false),
            ClientError::Refused { .. } => ("refused", "unknown", false),
            ClientError::Timeout(_) => ("timeout", "unknown", false),
            // A connect failure sent nothing.
            ClientError::Http { source, .. } if source.is_connect() => {
                ("unreachable", "not-run", false)
            }
            ClientError::Http { .. } => ("http", "unknown", false),
            ClientError::Status { status, .. } if *status >= 500 => ("status", "unknown", false),
            ClientError::Status { .. } => ("status", "not-run", false),
            ClientError::Redirect { .. } | ClientError::TooManyRedirects { .. } => {
                ("redirect", "not-run", false)
            }
            ClientError::Setup(_) => ("setup", "not-run", false),
            ClientError::InvalidResponse { .. } => ("invalid-response", "unknown", true),
            ClientError::Protocol(_) => ("protocol", "unknown", true),
            ClientError::Task(t) => {
                task = t.task.as_ref().map(|h| h.to_json());
                match &t.kind {
                    // The task ran and failed: the server's own error, as it gave it.
                    TaskErrorKind::Failed { error } => {
                        let code = error["code"].as_i64().unwrap_or(-32603);
                        let message = error["message"].as_str().unwrap_or("the task failed");
                        let mut data = json!({"kind": "task-failed", "outcome": "failed",
                                              "method": method, "reason": reason});
                        if let Some(task) = task {
                            data["task"] = task;
                        }
                        if let Some(d) = error.get("data") {
                            data["error"] = d.clone();
                        }
                        return Error {
                            code,
                            message: message.to_owned(),
                            data,
                        };
                    }
                    TaskErrorKind::Cancelled => ("task-cancelled", "failed", false),
                    TaskErrorKind::Required | TaskErrorKind::Unsupported => {
                        ("tasks", "not-run", false)
                    }
                    _ => ("task", "unknown", false),
                }
            }
            _ => ("error", "unknown", false),
        };
        let code = if outcome == "unknown" && method == "tools/call" {
            OUTCOME_UNKNOWN
        } else if protocol {
            SERVER_PROTOCOL
        } else {
            UNAVAILABLE
        };
        let message = match code {
            OUTCOME_UNKNOWN => {
                "outcome unknown: the call's answer was lost and it was not sent again; the tool \
                 may have run"
            }
            SERVER_PROTOCOL => "the server broke the protocol",
            _ => "the server gave no answer",
        };
        let mut data = json!({"kind": kind, "outcome": outcome, "method": method,
                              "reason": reason});
        if let ClientError::OutcomeUnknown { received, .. } = e {
            data["messagesReceived"] = json!(received.len());
        }
        if let ClientError::Status { status, .. } = e {
            data["status"] = json!(status);
        }
        if let Some(task) = task {
            data["task"] = task;
        }
        Error {
            code,
            message: message.to_owned(),
            data,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_tool_call_is_outcome_unknown() {
        let e = ClientError::Timeout(std::time::Duration::from_secs(1));
        let error = Error::of_client("tools/call", &e);
        assert_eq!(error.code, OUTCOME_UNKNOWN);
        assert_eq!(error.data["outcome"], "unknown");
        assert_eq!(error.data["kind"], "timeout");
        // The same loss on a method without side effects is no unknown outcome.
        assert_eq!(Error::of_client("tools/list", &e).code, UNAVAILABLE);
        let setup = ClientError::Setup("bad".into());
        let error = Error::of_client("tools/call", &setup);
        assert_eq!(
            (error.code, &error.data["outcome"]),
            (UNAVAILABLE, &json!("not-run"))
        );
    }
}
