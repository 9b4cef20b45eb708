//! HTTP: the requests (`POST`, `GET`, redirects), and reading an answer: a JSON body held as it
//! arrived, an event stream through the guard, an error body read up to its limit.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::{Stream, StreamExt, TryStreamExt};
use reqwest::header::{self, HeaderMap, HeaderValue};
use serde_json::Value;
use tracing::debug;

#[cfg(doc)]
use super::Handler;
use super::error::Attempt;
use super::{
    Client, ClientConfig, ClientError, Outcome, ProtocolError, Redirects, Session, v2026_07_28,
};
use crate::gate::Verdict;
use crate::guard::{Refusal, RefusalKind};
use crate::message::{Message, RpcId, RpcKind};
use crate::resume::stream::GuardedStream;
use crate::resume::{Failure, Reconnect, ReconnectResponse, ResumableStream};
use crate::sse::Data;

// The session and protocol version headers, defined with the rest of the wire contract.
pub use crate::contract::{PROTOCOL_HEADER, SESSION_HEADER};

const ACCEPT_BOTH: &str = "application/json, text/event-stream";
/// Messages of a call's stream kept for [`ClientError::OutcomeUnknown`] (the rest are counted and
/// handed to the [`Handler`] only).
const MAX_RECEIVED: usize = 64;

pub(super) type Body = Pin<Box<dyn Stream<Item = Result<Bytes, ClientError>> + Send>>;

/// A resumption in flight: the reconnect response's head and its body.
pub(super) type ResumeFuture =
    Pin<Box<dyn Future<Output = Result<(ReconnectResponse, Body), ClientError>> + Send>>;

/// A `Last-Event-ID` header with the id's exact bytes, or [`ProtocolError::Unsendable`].
fn last_event_id(id: &[u8]) -> Result<HeaderValue, ClientError> {
    HeaderValue::from_bytes(id)
        .map_err(|_| ClientError::Protocol(ProtocolError::Unsendable("Last-Event-ID")))
}

pub(crate) fn build_http(config: &ClientConfig) -> Result<reqwest::Client, ClientError> {
    // reqwest is built without a default crypto provider; ring is ssegate's. Installing twice is
    // harmless (the first one stays).
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Redirects are the client's own business ([`Client::send`]): reqwest would re-send every
    // configured header to another host but `Authorization`.
    let mut builder = reqwest::Client::builder()
        .connect_timeout(config.connect_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .tls_backend_rustls();
    let mut certs = Vec::new();
    for pem in &config.roots {
        let found = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| ClientError::Setup(format!("root certificate: {e}")))?;
        certs.extend(found);
    }
    builder = if config.only_custom_roots {
        builder.tls_certs_only(certs)
    } else {
        builder.tls_certs_merge(certs)
    };
    if !config.reuse_connections {
        builder = builder.pool_max_idle_per_host(0);
    }
    if let Some(url) = &config.proxy {
        let proxy = reqwest::Proxy::all(url)
            .map_err(|e| ClientError::Setup(format!("proxy {url:?}: {e}")))?;
        builder = builder.proxy(proxy);
    }
    builder
        .build()
        .map_err(|e| ClientError::Setup(format!("HTTP client: {e}")))
}

pub(crate) fn mime_is(content_type: Option<&str>, mime: &str) -> bool {
    content_type
        .and_then(|ct| ct.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case(mime))
}

/// [`ClientError::Status`] with at most `cap` bytes of `res`'s body; the rest is never read (the
/// answer is dropped, and its connection with it).
pub(super) async fn status_error(
    mut res: reqwest::Response,
    during: &'static str,
    cap: usize,
) -> ClientError {
    let status = res.status().as_u16();
    let mut body = Vec::new();
    while body.len() < cap {
        match res.chunk().await {
            Ok(Some(chunk)) => {
                let take = chunk.len().min(cap - body.len());
                body.extend_from_slice(&chunk[..take]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    drop(res);
    ClientError::Status {
        during,
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

impl Client {
    /// Sends one request of `session` to the endpoint: the configured headers, the session's
    /// headers, then `extra`. A redirect is an error unless [`ClientConfig::redirects`] follows it
    /// (see [`Redirects::Follow`] for what crosses to another origin). With
    /// [`ClientConfig::auth`], the request carries the token and a `401` or a `403
    /// insufficient_scope` leads to a refresh or a sign-in, and the request is sent again (see
    /// [`auth`](super::auth)).
    pub(super) async fn send(
        &self,
        method: reqwest::Method,
        session: &Session,
        extra: HeaderMap,
        body: Option<Bytes>,
        during: &'static str,
    ) -> Result<reqwest::Response, ClientError> {
        #[cfg(feature = "auth")]
        if let Some(auth) = &self.inner.config.auth {
            // Boxed: the sign-in's futures (discovery, registration, token requests) are large,
            // and every request of every client (signed in or not) would otherwise carry their
            // size on its stack.
            return Box::pin(self.send_signed_in(
                auth,
                method,
                session,
                &extra,
                body.as_ref(),
                during,
            ))
            .await;
        }
        self.send_once(method, session, &extra, body.as_ref(), during, None)
            .await
    }

    /// [`Client::send`] with sign-in: the token (refreshed ahead of expiry) on every request, and
    /// the request sent again after a refresh, a sign-in or a step-up (the body is `Bytes`).
    #[cfg(feature = "auth")]
    async fn send_signed_in(
        &self,
        auth: &super::auth::AuthConfig,
        method: reqwest::Method,
        session: &Session,
        extra: &HeaderMap,
        body: Option<&Bytes>,
        during: &'static str,
    ) -> Result<reqwest::Response, ClientError> {
        use super::auth::{AuthFailure, Challenge, Context, OAuthError, Rounds};
        let cx = Context {
            auth,
            config: &self.inner.config,
            url: &self.inner.url,
        };
        let endpoint = auth.shared.endpoint(&self.inner.url);
        let mut token = endpoint.token(&cx).await?;
        let mut rounds = Rounds::default();
        loop {
            let bearer = match token.as_deref() {
                Some(t) => {
                    let mut value =
                        HeaderValue::from_str(&format!("Bearer {t}")).map_err(|_| {
                            ClientError::Auth(Box::new(AuthFailure::OAuth(
                                OAuthError::InvalidTokenType(
                                    "the access token is not a valid header value".to_owned(),
                                ),
                            )))
                        })?;
                    value.set_sensitive(true);
                    Some(value)
                }
                None => None,
            };
            let res = self
                .send_once(method.clone(), session, extra, body, during, bearer)
                .await?;
            let Some(challenge) =
                Challenge::of(res.status().as_u16(), res.headers(), &self.inner.url)
            else {
                return Ok(res);
            };
            // The refusal's body is never read: dropping the answer closes its connection.
            drop(res);
            debug!(?challenge, "the server asks for a token");
            let next = endpoint
                .answer(&cx, &challenge, token.as_deref(), &mut rounds)
                .await?;
            token = Some(next);
        }
    }

    /// One request, redirects followed as configured; `bearer` (the sign-in's token) goes with
    /// every hop within the endpoint's origin.
    async fn send_once(
        &self,
        method: reqwest::Method,
        session: &Session,
        extra: &HeaderMap,
        body: Option<&Bytes>,
        during: &'static str,
        bearer: Option<HeaderValue>,
    ) -> Result<reqwest::Response, ClientError> {
        let origin = self.inner.url.origin();
        // On the HTTP+SSE transport every message goes to the stream's endpoint (same origin).
        let mut url = match &session.legacy {
            Some(legacy) if method == reqwest::Method::POST => legacy.endpoint.clone(),
            _ => self.inner.url.clone(),
        };
        let mut foreign = false;
        let mut hops = 0;
        loop {
            let mut req = self.inner.http.request(method.clone(), url.clone());
            if !foreign {
                req = req.headers(self.inner.config.headers.clone());
                if let Some(id) = &session.id {
                    req = req.header(SESSION_HEADER, id);
                }
                if let Some(v) = &session.protocol_version {
                    req = req.header(PROTOCOL_HEADER, v);
                }
                // Replaces a configured `Authorization`.
                if let Some(bearer) = &bearer {
                    let mut auth = HeaderMap::new();
                    auth.insert(header::AUTHORIZATION, bearer.clone());
                    req = req.headers(auth);
                }
            }
            req = req.headers(extra.clone());
            if let Some(body) = body {
                req = req.body(body.clone());
            }
            let res = req.send().await.map_err(ClientError::http(during))?;
            if !res.status().is_redirection() {
                return Ok(res);
            }
            let status = res.status().as_u16();
            let location = res
                .headers()
                .get(header::LOCATION)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
            // The redirect's body is never read: dropping the answer closes its connection.
            drop(res);
            let refused = || ClientError::Redirect {
                during,
                status,
                location: location.clone(),
            };
            let max_hops = match self.inner.config.redirects {
                Redirects::Follow { max_hops } if matches!(status, 307 | 308) => max_hops,
                _ => return Err(refused()),
            };
            let Some(next) = location
                .as_deref()
                .and_then(|l| url.join(l).ok())
                .filter(|u| matches!(u.scheme(), "http" | "https"))
            else {
                return Err(refused());
            };
            hops += 1;
            if hops > max_hops {
                return Err(ClientError::TooManyRedirects {
                    during,
                    hops: max_hops,
                });
            }
            foreign |= next.origin() != origin;
            debug!(status, to = %next, foreign, "following a redirect");
            url = next;
        }
    }

    pub(super) async fn post(
        &self,
        session: &Session,
        body: &Value,
        during: &'static str,
    ) -> Result<reqwest::Response, ClientError> {
        let mut extra = HeaderMap::new();
        if session.stateless {
            let params = match (body["method"].as_str(), body["params"]["name"].as_str()) {
                (Some("tools/call"), Some(name)) => self
                    .inner
                    .tools
                    .lock()
                    .expect("tools lock")
                    .as_ref()
                    .and_then(|t| t.get(name).map(|i| i.headers.clone()))
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            let headers = v2026_07_28::request_headers(body, &params)
                .map_err(|what| ClientError::Protocol(ProtocolError::Unsendable(what)))?;
            extra.extend(headers);
        }
        let body = serde_json::to_vec(body).expect("a JSON value serializes");
        extra.insert(header::ACCEPT, HeaderValue::from_static(ACCEPT_BOTH));
        extra.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        self.send(
            reqwest::Method::POST,
            session,
            extra,
            Some(Bytes::from(body)),
            during,
        )
        .await
    }

    /// A `GET` for an event stream, with `Last-Event-ID` when given.
    pub(super) async fn get_stream(
        &self,
        session: &Session,
        last_event_id: Option<HeaderValue>,
        during: &'static str,
    ) -> Result<reqwest::Response, ClientError> {
        let mut extra = HeaderMap::new();
        extra.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        if let Some(id) = last_event_id {
            extra.insert("last-event-id", id);
        }
        self.send(reqwest::Method::GET, session, extra, None, during)
            .await
    }

    /// `res` when it is a success, else [`ClientError::Status`] with the start of its body.
    pub(super) async fn expect_ok(
        &self,
        res: reqwest::Response,
        during: &'static str,
    ) -> Result<reqwest::Response, ClientError> {
        if res.status().is_success() {
            Ok(res)
        } else {
            Err(status_error(res, during, self.inner.config.max_error_body).await)
        }
    }

    /// Reads one answer: a JSON body, or an event stream through the guard until `rpc_id`'s
    /// response arrives.
    pub(super) async fn answer(
        &self,
        res: reqwest::Response,
        session: &Session,
        rpc_id: RpcId,
        stream: ResumableStream,
        mut elsewhere: Option<&mut tokio::sync::oneshot::Receiver<Message>>,
        outcome: &mut Outcome,
    ) -> Result<Message, Attempt> {
        let content_type = res
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if mime_is(content_type.as_deref(), "application/json") {
            return self.json_answer(res, rpc_id).await;
        }
        if !mime_is(content_type.as_deref(), "text/event-stream") {
            return Err(ClientError::Protocol(ProtocolError::ContentType(content_type)).into());
        }
        let body: Body = Box::pin(
            res.bytes_stream()
                .map_err(ClientError::http("response stream")),
        );
        let mut guarded = self.guarded(session, stream, body);
        let mut received = Vec::new();
        let result = loop {
            match guarded.next().await {
                Some(Ok(d))
                    if d.rpc.kind == RpcKind::Response && d.rpc.id.as_ref() == Some(&rpc_id) =>
                {
                    break Ok(d.message);
                }
                Some(Ok(d)) => {
                    outcome.other_messages += 1;
                    // Kept for `OutcomeUnknown`: the first few, copied out of their chunks (a
                    // slice would keep a whole transport buffer alive per message).
                    if received.len() < MAX_RECEIVED {
                        let copy = Bytes::copy_from_slice(&d.message.data().contiguous());
                        received.push(Message::new(Data::from(copy)));
                    }
                    self.dispatch(session, d).await;
                }
                Some(Err(f)) => {
                    if let Some(m) = Self::arrived_elsewhere(&mut elsewhere, guarded.state()).await
                    {
                        break Ok(m);
                    }
                    let transport = guarded.take_last_error().map(Box::new);
                    break Err(Attempt::Lost(f, std::mem::take(&mut received), transport));
                }
                None => {
                    // The stream finished with nothing outstanding: the response came on another
                    // stream of the session.
                    if let Some(m) = Self::arrived_elsewhere(&mut elsewhere, guarded.state()).await
                    {
                        break Ok(m);
                    }
                    break Err(
                        ClientError::Protocol(ProtocolError::StreamEndedWithoutResponse).into(),
                    );
                }
            }
        };
        let state = guarded.state();
        outcome.resumes += state.resumes();
        outcome.skipped += state.stats().skipped as u32;
        result
    }

    /// The response, when another stream of the session delivered it (waits briefly: that
    /// stream's consumer hands it over just after its guard accepted it).
    pub(super) async fn arrived_elsewhere(
        elsewhere: &mut Option<&mut tokio::sync::oneshot::Receiver<Message>>,
        stream: &ResumableStream,
    ) -> Option<Message> {
        let rx = elsewhere.as_mut()?;
        let answered = stream.outstanding().is_empty();
        let wait = if answered {
            stream.replay_timeout()
        } else {
            Duration::ZERO
        };
        tokio::time::timeout(wait, &mut **rx).await.ok()?.ok()
    }

    pub(super) async fn json_answer(
        &self,
        res: reqwest::Response,
        rpc_id: RpcId,
    ) -> Result<Message, Attempt> {
        let limit = self.inner.config.max_json_body;
        if res.content_length().is_some_and(|n| n > limit as u64) {
            return Err(ClientError::Protocol(ProtocolError::BodyTooLarge(limit)).into());
        }
        // Held as the chunks arrived (no growing copy) and judged as they come, as the guard
        // judges streamed messages (its nesting limit and instruction set).
        let mut gate = self.inner.config.stream.guard_ref().gate();
        let mut body = Data::default();
        let mut chunks = res.bytes_stream();
        let lost = |partial_bytes: usize, transport: Option<Box<ClientError>>| {
            Attempt::Lost(
                Failure::Refused(Refusal {
                    kind: RefusalKind::Unresumable {
                        partial_bytes: partial_bytes as u64,
                        partial_id: None,
                    },
                    cursor: None,
                    outstanding: vec![rpc_id.clone()],
                }),
                Vec::new(),
                transport,
            )
        };
        while let Some(chunk) = chunks.next().await {
            let chunk = match chunk.map_err(ClientError::http("JSON answer")) {
                Ok(chunk) => chunk,
                // Cut inside the answer: lost like a cut stream with no ids.
                Err(e @ ClientError::Http { .. }) => {
                    return Err(lost(body.len(), Some(Box::new(e))));
                }
                Err(e) => return Err(e.into()),
            };
            if body.len() + chunk.len() > limit {
                return Err(ClientError::Protocol(ProtocolError::BodyTooLarge(limit)).into());
            }
            if !chunk.is_empty() {
                gate.feed(&chunk);
                body.push_segment(chunk);
            }
        }
        let verdict = gate.verdict();
        match verdict {
            Verdict::Complete => {}
            // A cut JSON answer: the response is lost like a cut stream with no ids.
            Verdict::Incomplete => return Err(lost(body.len(), None)),
            // Whole but not one JSON value (or deeper than the guard's limit): the server's answer,
            // reported as is.
            Verdict::Trailing | Verdict::Invalid => {
                return Err(ClientError::Protocol(ProtocolError::JsonBody(verdict)).into());
            }
        }
        let message = Message::new(body);
        let peek = message.jsonrpc_peek();
        if peek.kind != RpcKind::Response || peek.id.as_ref() != Some(&rpc_id) {
            return Err(ClientError::Protocol(ProtocolError::NotTheResponse(rpc_id)).into());
        }
        Ok(message)
    }

    /// `stream` guarding `body`, its first connection on `session`; each resumption is a `GET` +
    /// `Last-Event-ID` on the same session ([`Client::resume`]).
    pub(super) fn guarded(
        &self,
        session: &Session,
        stream: ResumableStream,
        body: Body,
    ) -> GuardedStream<Body, impl FnMut(Reconnect) -> ResumeFuture + use<>, ClientError> {
        let me = self.clone();
        let session = session.clone();
        let reconnect = move |r: Reconnect| -> ResumeFuture {
            let me = me.clone();
            let session = session.clone();
            Box::pin(async move { me.resume(&session, r).await })
        };
        GuardedStream::new(stream, body, reconnect)
    }

    /// `GET` + `Last-Event-ID` for a reconnect the stream asked for.
    pub(super) async fn resume(
        &self,
        session: &Session,
        r: Reconnect,
    ) -> Result<(ReconnectResponse, Body), ClientError> {
        let last_event_id = r.last_event_id.as_deref().map(last_event_id).transpose()?;
        let res = match self.get_stream(session, last_event_id, "resume").await {
            Ok(res) => res,
            // A redirect not followed is the server's answer to the resume: the guard refuses
            // it as unexpected, once, instead of the reconnect being retried.
            Err(ClientError::Redirect { status, .. }) => {
                let body: Body = Box::pin(futures_util::stream::empty());
                return Ok((
                    ReconnectResponse::from_raw(status, None, None, SystemTime::now()),
                    body,
                ));
            }
            Err(e) => return Err(e),
        };
        let response = ReconnectResponse::from_headers(
            res.status().as_u16(),
            res.headers(),
            SystemTime::now(),
        );
        debug!(
            status = response.status,
            attempt = r.attempt,
            "resume answered"
        );
        let body: Body = Box::pin(
            res.bytes_stream()
                .map_err(ClientError::http("resumed stream")),
        );
        Ok((response, body))
    }

    /// POSTs the JSON-RPC message `body` on the current session and returns the answer unread,
    /// whatever its status: the escape hatch for a tool that reads a response itself (a probe of
    /// the server's behaviour, a conformance check). The request is sent as the client's own are:
    /// the configured headers, `Mcp-Session-Id` and `MCP-Protocol-Version` of the session, and on
    /// a stateless (2026-07-28) server the `_meta` fields added to `params` and the `Mcp-*`
    /// request headers. Nothing is guarded, resumed or re-issued; a redirect is handled as for any
    /// request ([`ClientConfig::redirects`]).
    pub async fn post_raw(&self, body: &Value) -> Result<reqwest::Response, ClientError> {
        let session = self.session();
        if session.stateless {
            let mut body = body.clone();
            self.stamp(&mut body["params"], &session);
            return self.post(&session, &body, "request").await;
        }
        self.post(&session, body, "request").await
    }

    /// `GET` for an event stream on the current session with `Last-Event-ID` set to exactly
    /// `last_event_id`, the answer unread whatever its status: the resume request of
    /// [`Client::post_raw`]'s escape hatch. An id that cannot be sent as a header value (a
    /// control character) is [`ProtocolError::Unsendable`].
    pub async fn get_raw(&self, last_event_id: &[u8]) -> Result<reqwest::Response, ClientError> {
        let value = self::last_event_id(last_event_id)?;
        self.get_stream(&self.session(), Some(value), "resume")
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mime_matching() {
        assert!(mime_is(
            Some("text/event-stream; charset=utf-8"),
            "text/event-stream"
        ));
        assert!(mime_is(Some("Application/JSON"), "application/json"));
        assert!(!mime_is(None, "application/json"));
        assert!(!mime_is(Some("text/plain"), "application/json"));
    }
}
