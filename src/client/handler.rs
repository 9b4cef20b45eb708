//! The application's side of the conversation: the [`Handler`] for server requests and
//! notifications, and the dispatch of what arrives on a response stream besides the response.

use std::future::Future;
use std::pin::Pin;

use serde_json::{Value, json};
use tracing::warn;

use super::{Client, ClientError, ProtocolError, RpcError, Session, within};
use crate::guard;
use crate::message::{Message, RpcKind};

/// A future a [`Handler`] returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send>>;

/// What the application does with the server's requests and notifications.
pub trait Handler: Send + Sync + 'static {
    /// A server request (`sampling/createMessage`, `elicitation/create`, `roots/list`, ...): the
    /// result to send back. The default answers `ping` with `{}` and anything else with `-32601`.
    fn request(&self, method: &str, params: Option<&Value>) -> HandlerFuture {
        let _ = params;
        let answer = if method == "ping" {
            Ok(json!({}))
        } else {
            Err(RpcError::new(-32601, format!("method not found: {method}")))
        };
        Box::pin(async move { answer })
    }

    /// A notification (progress, logging, list changes), already verified by the guard.
    fn notification(&self, message: &Message) {
        let _ = message;
    }
}

/// The default [`Handler`]: answers `ping`, refuses other requests, ignores notifications.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultHandler;

impl Handler for DefaultHandler {}

impl Client {
    /// The [`Handler`]'s answers to `requests` (an `inputRequests` object: key to server request),
    /// keyed alike; keys in `answered` are skipped, and the answered ones are added to it.
    pub(super) async fn input_responses(
        &self,
        requests: &Value,
        answered: &mut std::collections::HashSet<String>,
    ) -> Result<serde_json::Map<String, Value>, ClientError> {
        let mut responses = serde_json::Map::new();
        let Some(requests) = requests.as_object() else {
            return Ok(responses);
        };
        for (key, request) in requests {
            if answered.contains(key) {
                continue;
            }
            let method = request["method"].as_str().unwrap_or_default();
            let answer = self
                .inner
                .config
                .handler
                .request(method, request.get("params"))
                .await
                .map_err(|error| {
                    ClientError::Protocol(ProtocolError::InputRequest {
                        method: method.to_owned(),
                        error,
                    })
                })?;
            answered.insert(key.clone());
            responses.insert(key.clone(), answer);
        }
        Ok(responses)
    }

    /// The params of the retry of a request answered `input_required` with `result`: the
    /// original params, the [`Handler`]'s answers to the input requests (`inputResponses`, only
    /// when there were requests) and `requestState` exactly as received (only when there was one).
    pub(super) async fn answer_input(
        &self,
        original: &Value,
        result: &Value,
    ) -> Result<Value, ClientError> {
        let responses = self
            .input_responses(&result["inputRequests"], &mut Default::default())
            .await?;
        let mut params = original.clone();
        if !params.is_object() {
            params = json!({});
        }
        let obj = params.as_object_mut().expect("an object");
        if !responses.is_empty() {
            obj.insert("inputResponses".into(), Value::Object(responses));
        }
        if let Some(state) = result.get("requestState") {
            obj.insert("requestState".into(), state.clone());
        }
        Ok(params)
    }

    /// A message on a response stream that is not the response: a server request to answer or a
    /// notification for the application.
    pub(super) async fn dispatch(&self, session: &Session, d: guard::Delivery) {
        let handler = self.inner.config.handler.clone();
        match d.rpc.kind {
            RpcKind::Request if session.stateless => {
                // 2026-07-28 servers ask for input in `input_required` results; a client sends
                // no responses there. Shown to the application, never answered.
                warn!("a server request on a 2026-07-28 stream: not answered");
                handler.notification(&d.message);
            }
            RpcKind::Request => {
                let Ok(value) = d.message.deserialize::<Value>() else {
                    return;
                };
                let method = value["method"].as_str().unwrap_or_default().to_owned();
                let answer = handler.request(&method, value.get("params")).await;
                let body = match answer {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": value["id"], "result": result}),
                    Err(e) => json!({"jsonrpc": "2.0", "id": value["id"],
                                     "error": {"code": e.code, "message": e.message}}),
                };
                let answer = self.post(session, &body, "answer a server request");
                match within(self.inner.config.call_timeout, answer).await {
                    Ok(res) if res.status().is_success() => {}
                    Ok(res) => warn!(status = res.status().as_u16(), method, "answer refused"),
                    Err(e) => warn!(error = %e, method, "answer failed"),
                }
            }
            RpcKind::Response => {
                let waiting = d
                    .rpc
                    .id
                    .as_ref()
                    .and_then(|id| self.inner.pending.lock().expect("pending lock").remove(id));
                match waiting {
                    Some(tx) => {
                        let _ = tx.send(Message::new(d.message.data().clone()));
                    }
                    None => handler.notification(&d.message),
                }
            }
            _ => handler.notification(&d.message),
        }
    }
}
