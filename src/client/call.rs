//! Calls: [`Client::call`], [`Client::call_with`], [`Client::call_tool`] and
//! [`Client::list_tools`], what a call returns, and the re-issue of a call on a new session when
//! that is known to be safe.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use reqwest::header;
use serde_json::{Value, json};
use tracing::{Instrument, debug, info_span, warn};

use super::error::Attempt;
use super::transport::status_error;
use super::{
    CallOptions, Client, ClientError, ProtocolError, Retry, TaskHandle, tasks, v2026_07_28, within,
};
use crate::guard::{Refusal, RefusalKind};
use crate::message::{Message, RpcId};
use crate::resume::{self, Failure};
use crate::sse::Data;

/// What it took to get one response.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outcome {
    /// Attempts made (1 + re-issues).
    pub attempts: u32,
    /// Resumes (`GET` + `Last-Event-ID`) made.
    pub resumes: u32,
    /// New sessions opened to re-issue the request.
    pub renegotiations: u32,
    /// Events the guard skipped (exact replays, duplicate responses, keep-alives).
    pub skipped: u32,
    /// Other messages on the stream before the response (notifications, server requests).
    pub other_messages: u32,
    /// Every stream failure, in order.
    pub refusals: Vec<Failure>,
    /// Rounds of `input_required` answered (MCP 2026-07-28), each a new request (or, in a task,
    /// a `tasks/update`).
    pub input_rounds: u32,
    /// The task the call ran as, when the server answered it with one ([`TaskHandle`]).
    pub task: Option<TaskHandle>,
    /// Reads of the task answered (`tasks/get`, `tasks/result`).
    pub task_reads: u32,
    /// Task requests sent again because their answer was lost (cut, refused, unreachable): each
    /// a read, never the call again.
    pub task_rereads: u32,
}

/// A response the client received.
#[derive(Debug)]
#[non_exhaustive]
pub struct Response {
    /// The JSON-RPC response: exactly one complete JSON value, zero-copy until parsed.
    pub message: Message,
    /// The request id it answers.
    pub request_id: RpcId,
    /// How it was obtained.
    pub outcome: Outcome,
}

/// What the client keeps of a tool's definition.
#[derive(Clone, Debug, Default)]
pub(super) struct ToolInfo {
    /// Safe to run twice (`readOnlyHint` or `idempotentHint`).
    pub(super) safe: bool,
    /// Its `x-mcp-header` arguments, mirrored into `Mcp-Param-*` headers on 2026-07-28.
    pub(super) headers: Vec<v2026_07_28::ParamHeader>,
    /// Its 2025-11-25 `execution.taskSupport`.
    pub(super) tasks: tasks::TaskSupport,
}

/// Sends `notifications/cancelled` for a call dropped (or timed out) before its response.
pub(super) struct CancelOnDrop {
    pub(super) client: Option<Client>,
    pub(super) id: i64,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let id = self.id;
        // On 2026-07-28 the dropped response stream is itself the cancellation.
        if client.session().stateless {
            return;
        }
        runtime.spawn(async move {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                              "params": {"requestId": id, "reason": "the client dropped the call"}});
            let session = client.session();
            let post = client.post(&session, &note, "notifications/cancelled");
            if let Err(e) = within(client.inner.config.call_timeout, post).await {
                debug!(error = %e, "could not send notifications/cancelled");
            }
        });
    }
}

/// Whether `needle` occurs in `data`, across its chunks (however small).
fn contains(data: &Data, needle: &[u8]) -> bool {
    let finder = memchr::memmem::Finder::new(needle);
    let keep = needle.len().saturating_sub(1);
    // The last `keep` bytes seen, to find a needle that spans chunks.
    let mut tail: Vec<u8> = Vec::with_capacity(2 * keep);
    for chunk in data.chunks() {
        if finder.find(chunk).is_some() {
            return true;
        }
        let head = &chunk[..chunk.len().min(keep)];
        tail.extend_from_slice(head);
        if finder.find(&tail).is_some() {
            return true;
        }
        if chunk.len() >= keep {
            tail.clear();
            tail.extend_from_slice(&chunk[chunk.len() - keep..]);
        } else if tail.len() > keep {
            tail.drain(..tail.len() - keep);
        }
    }
    false
}

fn params_of(req: &Value) -> Value {
    req.get("params").cloned().unwrap_or(Value::Null)
}

fn describe_call(method: &str, req: &Value) -> String {
    match req["params"]["name"].as_str() {
        Some(tool) if method == "tools/call" => format!("tools/call {tool}"),
        _ => method.to_owned(),
    }
}

impl Client {
    /// Lists the server's tools (`tools/list`, every page) and remembers which are safe to run
    /// twice (annotations `readOnlyHint` or `idempotentHint`).
    pub async fn list_tools(&self) -> Result<Vec<Value>, ClientError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page: Value = self
                .call("tools/list", params, Retry::Always)
                .await?
                .message
                .deserialize()
                .map_err(|_| ClientError::Protocol(ProtocolError::StreamEndedWithoutResponse))?;
            if let Some(list) = page["result"]["tools"].as_array() {
                tools.extend(list.iter().cloned());
            }
            cursor = page["result"]["nextCursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        let stateless = self.session().stateless;
        let mut known = HashMap::new();
        tools.retain(|t| {
            let Some(name) = t["name"].as_str() else {
                return true;
            };
            let headers = match v2026_07_28::param_headers(&t["inputSchema"]) {
                Ok(headers) => headers,
                // On 2026-07-28 a tool whose header annotations are invalid is left out (it could
                // not be called with the headers the server expects).
                Err(why) if stateless => {
                    warn!(tool = name, why, "tool definition refused");
                    return false;
                }
                Err(_) => Vec::new(),
            };
            let a = &t["annotations"];
            let safe = a["readOnlyHint"].as_bool() == Some(true)
                || a["idempotentHint"].as_bool() == Some(true);
            known.insert(
                name.to_owned(),
                ToolInfo {
                    safe,
                    headers,
                    tasks: tasks::TaskSupport::of_tool(t),
                },
            );
            true
        });
        *self.inner.tools.lock().expect("tools lock") = Some(known);
        Ok(tools)
    }

    /// Calls `tools/call` with `{"name": name, "arguments": arguments}`; `retry` says whether the
    /// call may be issued again on a new session after its stream was lost: [`Retry::IfSafe`]
    /// decides from the tool's annotations, [`Retry::Always`] when the caller knows the tool may
    /// run twice, [`Retry::Never`] never.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        retry: Retry,
    ) -> Result<Response, ClientError> {
        let mut options = CallOptions::default();
        options.retry(retry);
        self.call_with(
            "tools/call",
            json!({"name": name, "arguments": arguments}),
            &options,
        )
        .await
    }

    /// Sends one JSON-RPC request and returns its response; `retry` as in
    /// [`Client::call_tool`] (every method but `tools/call` is safe to re-issue).
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        retry: Retry,
    ) -> Result<Response, ClientError> {
        let mut options = CallOptions::default();
        options.retry(retry);
        self.call_with(method, params, &options).await
    }

    /// Sends one JSON-RPC request with per-call options.
    pub async fn call_with(
        &self,
        method: &str,
        mut params: Value,
        options: &CallOptions,
    ) -> Result<Response, ClientError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        if let (Some(token), Some(obj)) = (&options.progress_token, params.as_object_mut()) {
            let token = match token {
                RpcId::Number(n) => json!(n),
                RpcId::String(s) => json!(s.as_ref()),
                _ => Value::Null,
            };
            obj.entry("_meta")
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .map(|m| m.insert("progressToken".into(), token));
        }
        let span = info_span!("mcp_call", method, id);
        let call = async {
            // Dropped with the call (its deadline, or the caller's drop) before the answer: the
            // server is told (`notifications/cancelled`; a task is cancelled with `tasks/cancel`).
            let mut cancel = CancelOnDrop {
                client: Some(self.clone()),
                id,
            };
            let result = if method == "tools/call" {
                self.call_tool_tasks(params, options, id, &mut cancel).await
            } else {
                self.call_inner(method, params, options.retry, id).await
            };
            cancel.client = None;
            result
        };
        within(
            options.timeout.or(self.inner.config.call_timeout),
            call.instrument(span),
        )
        .await
    }

    pub(super) async fn safe_to_reissue(&self, method: &str, params: &Value, retry: Retry) -> bool {
        match retry {
            Retry::Always => true,
            Retry::Never => false,
            Retry::IfSafe if method != crate::contract::method::TOOLS_CALL => true,
            Retry::IfSafe => {
                let Some(name) = params["name"].as_str() else {
                    return false;
                };
                let known = self.inner.tools.lock().expect("tools lock").is_some();
                // Boxed: listing tools is itself a call.
                if !known && Box::pin(self.list_tools()).await.is_err() {
                    return false;
                }
                let tools = self.inner.tools.lock().expect("tools lock");
                tools
                    .as_ref()
                    .and_then(|t| t.get(name))
                    .is_some_and(|t| t.safe)
            }
        }
    }

    pub(super) async fn call_inner(
        &self,
        method: &str,
        params: Value,
        retry: Retry,
        id: i64,
    ) -> Result<Response, ClientError> {
        let mut id = id;
        if method == "tools/call" && self.session().stateless {
            let known = self.inner.tools.lock().expect("tools lock").is_some();
            // The tool's `x-mcp-header` arguments must be mirrored into headers: learn them
            // once (boxed: listing tools is itself a call).
            if !known && let Err(e) = Box::pin(self.list_tools()).await {
                warn!(error = %e, "tools/list failed; calling without parameter headers");
            }
        }
        // What an `input_required` retry sends: the original params plus that round's answers.
        let mut sent = params.clone();
        let mut outcome = Outcome::default();
        loop {
            outcome.attempts += 1;
            let session = self.session();
            let mut wire = sent.clone();
            if session.stateless {
                self.stamp(&mut wire, &session);
            }
            let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": wire});
            let rpc_id = RpcId::Number(id);
            let attempt = async {
                // On HTTP+SSE the response comes on the session's stream: wait for it before the
                // POST (it may come before the POST's answer). A session that ended takes
                // nothing: the request goes to a new one.
                let mut waiter = match &session.legacy {
                    Some(legacy) => Some(
                        legacy
                            .shared
                            .wait(rpc_id.clone(), &session.streams)
                            .map_err(|f| Attempt::NotTaken(*f))?,
                    ),
                    None => None,
                };
                let res = match self.post(&session, &req, "request").await {
                    Ok(res) => res,
                    // Sent, then cut before the response head: the server may have run the call,
                    // and nothing can be resumed (no event id yet). A connect failure (nothing
                    // sent) stays an HTTP error; an invalid response head is the server's answer,
                    // not a cut ([`ClientError::InvalidResponse`]).
                    Err(ClientError::Http { source, during }) if !source.is_connect() => {
                        warn!(error = %source, "the request's response was cut before its head");
                        return Err(Attempt::Lost(
                            Failure::Refused(Refusal {
                                kind: RefusalKind::Unresumable {
                                    partial_bytes: 0,
                                    partial_id: None,
                                },
                                cursor: None,
                                outstanding: vec![rpc_id.clone()],
                            }),
                            Vec::new(),
                            Some(Box::new(ClientError::Http { during, source })),
                        ));
                    }
                    Err(e) => return Err(e.into()),
                };
                let status = res.status().as_u16();
                if matches!(status, 429 | 503) {
                    // Overloaded, or a replay store briefly unavailable: the request was not
                    // taken. Retried after the server's (clamped) delay when safe to repeat.
                    let retry_after = res
                        .headers()
                        .get(header::RETRY_AFTER)
                        .and_then(|v| resume::parse_retry_after(v.as_bytes(), SystemTime::now()));
                    let error =
                        status_error(res, "request", self.inner.config.max_error_body).await;
                    return Err(Attempt::Busy(error, retry_after));
                }
                if res.status() == reqwest::StatusCode::NOT_FOUND
                    && (session.id.is_some() || session.legacy.is_some())
                {
                    // The session expired before the request was taken: nothing ran, so the
                    // call may always be issued again on a new session.
                    return Err(Attempt::NotTaken(Failure::Refused(Refusal {
                        kind: RefusalKind::SessionExpired,
                        cursor: None,
                        outstanding: vec![rpc_id.clone()],
                    })));
                }
                let res = self.expect_ok(res, "request").await?;
                if let Some(waiter) = &mut waiter {
                    drop(res);
                    return waiter
                        .response()
                        .await
                        .map_err(|f| Attempt::Lost(f, Vec::new(), None));
                }
                let mut stream = session.streams.request_stream(rpc_id.clone());
                // 2026-07-28 has no resumption: a cut stream is a lost request.
                stream.resumable(!session.stateless);
                let (tx, mut rx) = tokio::sync::oneshot::channel();
                self.inner
                    .pending
                    .lock()
                    .expect("pending lock")
                    .insert(rpc_id.clone(), tx);
                let answer = self
                    .answer(
                        res,
                        &session,
                        rpc_id.clone(),
                        stream,
                        Some(&mut rx),
                        &mut outcome,
                    )
                    .await;
                self.inner
                    .pending
                    .lock()
                    .expect("pending lock")
                    .remove(&rpc_id);
                answer
            };
            let (failure, received, transport) = match attempt.await {
                Ok(message)
                    if session.stateless && contains(message.data(), b"\"input_required\"") =>
                {
                    let value: Value = message.deserialize().map_err(|_| {
                        ClientError::Protocol(ProtocolError::StreamEndedWithoutResponse)
                    })?;
                    let result = &value["result"];
                    if result["resultType"] != "input_required" {
                        return Ok(Response {
                            message,
                            request_id: rpc_id,
                            outcome,
                        });
                    }
                    if outcome.input_rounds >= self.inner.config.max_input_rounds {
                        return Err(ClientError::Protocol(ProtocolError::TooManyInputRounds(
                            outcome.input_rounds,
                        )));
                    }
                    outcome.input_rounds += 1;
                    sent = self.answer_input(&params, result).await?;
                    // A retry is a new request, with a new id.
                    id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
                    outcome.attempts -= 1;
                    continue;
                }
                Ok(message) => {
                    return Ok(Response {
                        message,
                        request_id: rpc_id,
                        outcome,
                    });
                }
                Err(Attempt::Client(e)) => return Err(e),
                Err(Attempt::Busy(error, retry_after)) => {
                    if outcome.attempts >= self.inner.config.max_attempts
                        || !self.safe_to_reissue(method, &params_of(&req), retry).await
                    {
                        return Err(error);
                    }
                    let delay = self.inner.config.stream.busy_delay(retry_after);
                    warn!(error = %error, delay_ms = delay.as_millis() as u64, "busy; retrying");
                    tokio::time::sleep(delay).await;
                    continue;
                }
                Err(Attempt::Lost(f, received, transport)) => (f, Some(received), transport),
                Err(Attempt::NotTaken(f)) => (f, None, None),
            };
            warn!(failure = %failure, attempt = outcome.attempts, "the response stream was lost");
            outcome.refusals.push(failure.clone());
            if !failure.must_renegotiate() {
                return Err(ClientError::Refused {
                    failure: Box::new(failure),
                    attempts: outcome.attempts,
                    transport,
                });
            }
            if let Some(received) = received
                && !self.safe_to_reissue(method, &params_of(&req), retry).await
            {
                return Err(ClientError::OutcomeUnknown {
                    failure: Box::new(failure),
                    method: describe_call(method, &req),
                    received,
                    transport,
                });
            }
            if outcome.attempts >= self.inner.config.max_attempts {
                return Err(ClientError::Refused {
                    failure: Box::new(failure),
                    attempts: outcome.attempts,
                    transport,
                });
            }
            if session.stateless {
                // Stateless: nothing to renew. The request is issued again as a new request.
                id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            self.renegotiate(session.generation).await?;
            outcome.renegotiations += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[test]
    fn a_needle_is_found_across_any_chunking() {
        let text = br#"{"result":{"resultType":"input_required"}}"#;
        for size in 1..text.len() {
            let mut data = Data::default();
            for chunk in text.chunks(size) {
                data.push(Bytes::copy_from_slice(chunk));
            }
            assert!(contains(&data, b"\"input_required\""), "chunks of {size}");
            assert!(!contains(&data, b"\"complete\""), "chunks of {size}");
        }
    }

    #[test]
    fn calls_are_described_with_their_tool() {
        let req = json!({"method": "tools/call", "params": {"name": "charge_card"}});
        assert_eq!(describe_call("tools/call", &req), "tools/call charge_card");
        assert_eq!(describe_call("tools/list", &json!({})), "tools/list");
    }
}
