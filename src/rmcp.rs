//! rmcp drop-in: [`GuardedHttpClient`] implements rmcp 3.x's [`StreamableHttpClient`] on the guarded
//! client's HTTP stack (feature `rmcp`).
//!
//! ```no_run
//! use rmcp::ServiceExt;
//! use rmcp::transport::StreamableHttpClientTransport;
//! use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let transport = StreamableHttpClientTransport::with_client(
//!     ssegate::rmcp::GuardedHttpClient::default(),
//!     StreamableHttpClientTransportConfig::with_uri("https://example.com/mcp"),
//! );
//! let client = ().serve(transport).await?;
//! # Ok(()) }
//! ```
//!
//! What changes for an rmcp client:
//!
//! - Every response stream and `GET` stream is decoded by ssegate's [`Decoder`](crate::sse::Decoder)
//!   and gated; rmcp sees only events the guard ([`ResumableStream`]) accepted (exact replays dropped,
//!   a resumed stream checked against the stream it continues).
//! - rmcp still drives the reconnects (`GET` + `Last-Event-ID`), but the resumption state lives
//!   here: when a stream's connection drops, its [`ResumableStream`] is parked under the id of the
//!   last event handed to rmcp, and rmcp's `get_stream(last_event_id)` continues exactly that
//!   state (after the core's own delay, with its own attempt count).
//! - When the guard refuses (a torn boundary, a restarted or reordered replay, an empty answer to
//!   a resume, a stream that makes no progress), every request still outstanding on that stream is
//!   answered with a JSON-RPC error, as the [wire contract](crate::contract) says: its code is the
//!   one [`Code::for_answer`] picks for the request's method and the [`Failure`]'s kind, with
//!   outcome `unknown` (the contract's table of error codes says what each means; a `tools/call`
//!   is never reported as not run), its `message` is that code's, and its `data` holds the
//!   contract's keys ([`data`](crate::contract::data): `kind`, `outcome`, `method`, `reason`,
//!   `refusal` when the guard refused, `mustRenegotiate`) and an `ssegate` entry of this client's
//!   own. rmcp ends the call instead of reconnecting in a loop, and
//!   [`GuardedHttpClient::failure_of`] turns the error back into the typed [`Failure`]. A refusal
//!   on a stream with nothing outstanding (the standalone `GET` stream) is an [`SseError::Body`]
//!   holding an [`Error::Refused`] (downcast it), after which rmcp's reconnect gets
//!   `ServerDoesNotSupportSse`, which stops its loop.
//! - A task read (`tasks/get`, `tasks/result`: rmcp's `get_task`) whose connection fails, whose
//!   JSON answer is not one whole value, or whose stream the guard refuses before the answer is
//!   sent again, as the same request, up to 10 times: it is a pure read, so the task's result (a
//!   4 MiB inline result is one event) comes back without the tool running again. Nothing else is
//!   ever re-sent.
//! - rmcp's limits map onto the decoder's: `max_sse_event_size` is the decoder's
//!   [`max_event`](crate::sse::DecoderConfig::max_event); `max_json_response_size` bounds a JSON answer
//!   (together with [`ClientConfig::max_json_body`]); `max_error_response_size` bounds the error
//!   text kept from a failed answer.
//! - rmcp's `Sse` carries `String` data: each delivered message is copied once into it (the
//!   decoder itself copies nothing); events rmcp ignores are not copied at all.
//!
//! Authenticated servers: wrap it in rmcp's `AuthClient` (rmcp's `auth` feature, which ssegate's
//! `auth` feature turns on). `AuthClient` puts the bearer of rmcp's `AuthorizationManager` on every
//! call it passes down, and on a `401` refreshes once and sends the call again; this client puts
//! the token on each request, the `GET` that resumes a stream (`Last-Event-ID`) and the closing
//! `DELETE` included, and a resumed stream is still the guarded one (a resume answered `401` leaves
//! its stream parked, so the `GET` that `AuthClient` sends again after its refresh continues the
//! same stream). The sign-in itself is rmcp's (`OAuthState` here; `ssegate::client::auth` is the
//! guarded client's own). Build this client first when reqwest has no TLS provider of its own: it
//! installs ring as rustls' provider, which the reqwest client of rmcp's `AuthorizationManager`
//! needs.
//!
//! ```no_run
//! # #[cfg(feature = "auth")]
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use rmcp::ServiceExt;
//! use rmcp::transport::StreamableHttpClientTransport;
//! use rmcp::transport::auth::{AuthClient, AuthorizationRequest, OAuthState};
//! use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
//!
//! let url = "https://mcp.example.com/mcp";
//! let http = ssegate::rmcp::GuardedHttpClient::default();
//! let mut oauth = OAuthState::new(url, None).await?;
//! oauth
//!     .start_authorization(AuthorizationRequest::new("http://127.0.0.1:8976/callback"))
//!     .await?;
//! println!("Open {}", oauth.get_authorization_url().await?);
//! let redirected_to = String::new(); // the URL the browser came back to, from the callback
//! oauth.handle_callback_url(&redirected_to).await?;
//! let manager = oauth.into_authorization_manager().ok_or("not authorized")?;
//! let transport = StreamableHttpClientTransport::with_client(
//!     AuthClient::new(http, manager),
//!     StreamableHttpClientTransportConfig::with_uri(url),
//! );
//! let client = ().serve(transport).await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
// rmcp's `StreamableHttpError` is the trait's error type; the helpers return it as is.
#![allow(clippy::result_large_err)]

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use ::rmcp::model::{ClientJsonRpcMessage, ErrorData, NumberOrString, RequestId};
use ::rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, SseError, StreamableHttpClient,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use serde_json::{Value, json};
use sse_stream_02::Sse;
use tracing::debug;

use crate::client::{ClientConfig, ClientError, build_http, mime_is};
use crate::contract::{self, Code, Outcome};
use crate::message::RpcId;
use crate::resume::{
    self, Answer, EndCause, Failure, Output, ReconnectResponse, ResumableStream, Session,
};
use crate::sse;

/// Now, on tokio's clock: the clock the driver's timers sleep on (so `tokio::time::pause` drives
/// it too).
fn clock_now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// The key under `error.data` that holds this client's own entry: the token of the kept
/// [`Failure`] and the ids answered with it.
const DATA_KEY: &str = "ssegate";
/// Under [`DATA_KEY`]: the token [`GuardedHttpClient::failure_of`] looks the failure up by.
const TOKEN_KEY: &str = "refusal";
/// Under [`DATA_KEY`]: the ids of the requests answered with the same failure.
const OUTSTANDING_KEY: &str = "outstanding";

/// rmcp's SSE limit when a caller uses the limit-free trait methods (rmcp's own default).
const RMCP_DEFAULT_MAX_SSE_EVENT: usize = 16 << 20;

type ByteBody = BoxStream<'static, Result<Bytes, reqwest::Error>>;
type SseStream = BoxStream<'static, Result<Sse, SseError>>;
type HttpResult<T> = Result<T, StreamableHttpError<Error>>;

/// Why [`GuardedHttpClient`] failed an rmcp call or stream.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The HTTP request or its body failed.
    Http(reqwest::Error),
    /// A stream's connection dropped and the guard can resume it: rmcp reconnects with the last
    /// event id, and the client continues the parked stream.
    Disconnected,
    /// The guarded stream stopped for good (see [`Failure`]).
    Refused(Failure),
    /// The `Last-Event-ID` to resume with is not a valid header value.
    UnsendableEventId,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Http(e) => write!(f, "HTTP: {e}"),
            Error::Disconnected => f.write_str("the stream's connection dropped; resumable"),
            Error::Refused(failure) => write!(f, "ssegate refused the stream: {failure}"),
            Error::UnsendableEventId => f.write_str("the Last-Event-ID is not a header value"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Http(e) => Some(e),
            Error::Refused(f) => Some(f),
            Error::Disconnected | Error::UnsendableEventId => None,
        }
    }
}

/// Settings of a [`GuardedHttpClient`]. Setters take `&mut self` and chain.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TransportConfig {
    client: ClientConfig,
    decoder: sse::DecoderConfig,
    max_tracked: usize,
}

impl Default for TransportConfig {
    /// The field client's defaults ([`ClientConfig::default`]), the decoder's defaults (its
    /// `max_event` replaced by rmcp's `max_sse_event_size` on each call), and 256 tracked entries.
    fn default() -> Self {
        TransportConfig {
            client: ClientConfig::default(),
            decoder: sse::DecoderConfig::default(),
            max_tracked: 256,
        }
    }
}

impl TransportConfig {
    /// The HTTP stack and the guard: headers, TLS roots, proxy, connect timeout, connection
    /// reuse, JSON body limit, and the resumable stream's settings ([`ClientConfig::stream`]).
    pub fn client(&mut self, config: ClientConfig) -> &mut Self {
        self.client = config;
        self
    }

    /// The decoder's limits; `max_event` is set from rmcp's `max_sse_event_size` on every call.
    pub fn decoder(&mut self, config: sse::DecoderConfig) -> &mut Self {
        self.decoder = config;
        self
    }

    /// Most entries kept of each kind: parked streams waiting for rmcp's reconnect, sessions
    /// (their guard registries), and refusals waiting for [`GuardedHttpClient::failure_of`]. The
    /// oldest goes first (default 256, at least 1).
    pub fn max_tracked(&mut self, n: usize) -> &mut Self {
        self.max_tracked = n.max(1);
        self
    }

    /// Builds the client (its reqwest client, with ring as the TLS provider).
    pub fn build(&self) -> Result<GuardedHttpClient, ClientError> {
        let http = build_http(&self.client)?;
        Ok(GuardedHttpClient::with_http(http, self))
    }
}

/// An insertion-ordered map that keeps at most `cap` entries (the oldest is dropped).
#[derive(Debug)]
struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
}

impl<K: std::hash::Hash + Eq + Clone, V> Bounded<K, V> {
    fn new() -> Self {
        Bounded {
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn insert(&mut self, key: K, value: V, cap: usize) {
        if self.map.insert(key.clone(), value).is_none() {
            self.order.push_back(key);
        }
        while self.map.len() > cap {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            self.map.remove(&old);
        }
    }

    fn remove(&mut self, key: &K) -> Option<V> {
        let value = self.map.remove(key)?;
        self.order.retain(|k| k != key);
        Some(value)
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

/// The JSON-RPC methods of the requests a stream answers, by id (a `POST` stream answers one).
type Methods = Vec<(RpcId, Box<str>)>;

/// The method of request `id`; a request whose method is not known is taken for a `tools/call`
/// (an unknown outcome is never reported as a call that did not run).
fn method_of<'a>(methods: &'a Methods, id: &RpcId) -> &'a str {
    methods
        .iter()
        .find(|(i, _)| i == id)
        .map_or(contract::method::TOOLS_CALL, |(_, m)| m)
}

/// A stream whose connection ended, waiting for rmcp's `get_stream(last_event_id)`.
#[derive(Debug)]
enum Parked {
    /// The guard can resume it; the methods of the requests it answers go with it.
    Resumable(Box<ResumableStream>, Methods),
    /// It was refused: the reconnect is answered with an error that stops rmcp's loop.
    Refused,
}

#[derive(Debug)]
struct Tracked {
    parked: Bounded<String, Parked>,
    sessions: Bounded<Arc<str>, Session>,
    failures: Bounded<u64, Failure>,
    next_failure: u64,
}

#[derive(Debug)]
struct Inner {
    http: reqwest::Client,
    headers: HeaderMap,
    stream: resume::StreamConfig,
    decoder: sse::DecoderConfig,
    max_json_body: usize,
    max_tracked: usize,
    tracked: Mutex<Tracked>,
}

impl Inner {
    fn tracked(&self) -> MutexGuard<'_, Tracked> {
        // A panic while holding the lock cannot leave the maps inconsistent (each update is one
        // insert or remove), so a poisoned lock is used as is.
        self.tracked.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stream_config(&self, max_sse_event_size: usize) -> resume::StreamConfig {
        let mut decoder = self.decoder.clone();
        decoder.max_event(max_sse_event_size);
        let mut config = self.stream.clone();
        config.decoder(decoder);
        config
    }

    /// The session's streams share one guard registry; a sessionless stream gets its own.
    fn session(&self, id: Option<&Arc<str>>, max_sse_event_size: usize) -> Session {
        let config = self.stream_config(max_sse_event_size);
        let Some(id) = id else {
            return Session::new(config);
        };
        let mut tracked = self.tracked();
        if let Some(session) = tracked.sessions.map.get(id) {
            return session.clone();
        }
        let session = Session::new(config);
        tracked
            .sessions
            .insert(id.clone(), session.clone(), self.max_tracked);
        session
    }

    fn park(&self, last_event_id: String, parked: Parked) {
        self.tracked()
            .parked
            .insert(last_event_id, parked, self.max_tracked);
    }

    fn keep_failure(&self, failure: Failure) -> u64 {
        let mut tracked = self.tracked();
        let token = tracked.next_failure;
        tracked.next_failure += 1;
        tracked.failures.insert(token, failure, self.max_tracked);
        token
    }
}

/// rmcp's [`StreamableHttpClient`] with ssegate's decoder, gate and guard on every stream. See
/// the [module docs](self). Cheap to clone (one shared state).
#[derive(Clone, Debug)]
pub struct GuardedHttpClient {
    inner: Arc<Inner>,
}

impl Default for GuardedHttpClient {
    /// [`TransportConfig::default`]: the platform's TLS roots, so it reaches any server the field client
    /// reaches. If the TLS stack cannot be set up (no usable roots), reqwest's defaults are used.
    fn default() -> Self {
        let config = TransportConfig::default();
        match build_http(&config.client) {
            Ok(http) => GuardedHttpClient::with_http(http, &config),
            Err(e) => {
                debug!(error = %e, "falling back to reqwest's default client");
                GuardedHttpClient::with_http(reqwest::Client::default(), &config)
            }
        }
    }
}

impl GuardedHttpClient {
    /// Settings to build a client from.
    pub fn config() -> TransportConfig {
        TransportConfig::default()
    }

    /// A client with the field client's settings (and the other [`TransportConfig`] defaults).
    pub fn new(config: ClientConfig) -> Result<GuardedHttpClient, ClientError> {
        TransportConfig::default().client(config).build()
    }

    fn with_http(http: reqwest::Client, config: &TransportConfig) -> GuardedHttpClient {
        GuardedHttpClient {
            inner: Arc::new(Inner {
                http,
                headers: config.client.headers.clone(),
                stream: config.client.stream.clone(),
                decoder: config.decoder.clone(),
                max_json_body: config.client.max_json_body,
                max_tracked: config.max_tracked,
                tracked: Mutex::new(Tracked {
                    parked: Bounded::new(),
                    sessions: Bounded::new(),
                    failures: Bounded::new(),
                    next_failure: 0,
                }),
            }),
        }
    }

    /// The typed failure behind the error a refused stream answered a request with (what rmcp's
    /// `call_tool` and friends return as `ServiceError::McpError`; its code is one of the
    /// [contract's](crate::contract::Code)), taken out of the client: `None` for any other error,
    /// or when it was already taken or pushed out by newer ones ([`TransportConfig::max_tracked`]).
    pub fn failure_of(&self, error: &ErrorData) -> Option<Failure> {
        Code::from_value(error.code.0.into())?;
        let token = error
            .data
            .as_ref()?
            .get(DATA_KEY)?
            .get(TOKEN_KEY)?
            .as_u64()?;
        self.inner.tracked().failures.remove(&token)
    }

    /// Streams parked for rmcp's reconnect right now.
    pub fn parked(&self) -> usize {
        self.inner.tracked().parked.len()
    }

    fn request(
        &self,
        method: reqwest::Method,
        uri: &str,
        session_id: Option<&Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<reqwest::RequestBuilder> {
        let mut request = self
            .inner
            .http
            .request(method, uri)
            .headers(self.inner.headers.clone());
        for (name, value) in custom_headers {
            if is_reserved(&name) {
                return Err(StreamableHttpError::ReservedHeaderConflict(
                    name.to_string(),
                ));
            }
            request = request.header(name, value);
        }
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        if let Some(id) = session_id {
            request = request.header(crate::client::SESSION_HEADER, id.as_ref());
        }
        Ok(request)
    }

    /// A `GET` (optionally resuming) on the guarded stream `stream`.
    async fn get_guarded(
        &self,
        target: Target<'_>,
        mut stream: ResumableStream,
        methods: Methods,
        key: Option<String>,
        resuming: bool,
    ) -> HttpResult<SseStream> {
        let mut last_event_id: Option<Bytes> = None;
        let Target {
            uri,
            session_id,
            auth_header,
            custom_headers,
        } = target;
        loop {
            if resuming {
                // Run the core's schedule: its delay (the server's `retry`, `Retry-After`,
                // backoff), then its reconnect, or its failure.
                let now = clock_now();
                match stream.poll() {
                    Some(Output::Reconnect(r)) => last_event_id = r.last_event_id,
                    Some(Output::Failed(failure)) => {
                        let drive = Drive::new(self.inner.clone(), stream, methods, None, key);
                        return Ok(drive.failed(failure));
                    }
                    Some(_) => continue,
                    None => {
                        match stream.poll_timeout() {
                            Some(at) => {
                                tokio::time::sleep_until(at.into()).await;
                                stream.handle_timeout(clock_now().max(now));
                            }
                            // Nothing scheduled: the stream is done.
                            None => return Err(StreamableHttpError::UnexpectedEndOfStream),
                        }
                        continue;
                    }
                }
            }
            let mut request = self
                .request(
                    reqwest::Method::GET,
                    uri,
                    session_id,
                    auth_header.clone(),
                    custom_headers.clone(),
                )?
                .header(header::ACCEPT, "text/event-stream");
            if let Some(id) = &last_event_id {
                let value = HeaderValue::from_bytes(id)
                    .map_err(|_| StreamableHttpError::Client(Error::UnsendableEventId))?;
                request = request.header("last-event-id", value);
            }
            let response = match request.send().await {
                Ok(r) => r,
                Err(e) if resuming => {
                    debug!(error = %e, "resume failed before a response head");
                    stream.reconnect_failed(clock_now());
                    continue;
                }
                Err(e) => return Err(StreamableHttpError::Client(Error::Http(e))),
            };
            let status = response.status();
            if status == StatusCode::METHOD_NOT_ALLOWED && !resuming {
                return Err(StreamableHttpError::ServerDoesNotSupportSse);
            }
            if let Err(e) = auth_errors(&response) {
                // A token refused at a resume: the stream stays parked (the attempt counted as a
                // failed reconnect), so that the same `get_stream` sent again after a refresh
                // (rmcp's `AuthClient`) continues it instead of finding nothing to resume.
                if resuming && let Some(id) = key {
                    stream.reconnect_failed(clock_now());
                    self.inner
                        .park(id, Parked::Resumable(Box::new(stream), methods));
                }
                return Err(e);
            }
            if !resuming {
                if let Some(e) = http_status_error(status, response.headers()) {
                    return Err(e.into());
                }
                if !status.is_success() {
                    return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                        format!("HTTP {status} on GET"),
                    )));
                }
                let content_type = content_type(&response);
                if !mime_is(content_type.as_deref(), "text/event-stream") {
                    return Err(StreamableHttpError::UnexpectedContentType(content_type));
                }
                let body = response.bytes_stream().boxed();
                let drive = Drive::new(self.inner.clone(), stream, methods, Some(body), None);
                return Ok(drive.into_stream());
            }
            let answer = ReconnectResponse::from_headers(
                status.as_u16(),
                response.headers(),
                SystemTime::now(),
            );
            match stream.reconnect_response(&answer, clock_now()) {
                Answer::Read => {
                    let body = response.bytes_stream().boxed();
                    let drive = Drive::new(self.inner.clone(), stream, methods, Some(body), key);
                    return Ok(drive.into_stream());
                }
                Answer::Drop => continue,
            }
        }
    }
}

/// Where a `GET` goes and what it carries besides `Last-Event-ID`.
struct Target<'a> {
    uri: &'a str,
    session_id: Option<&'a Arc<str>>,
    auth_header: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
}

fn is_reserved(name: &HeaderName) -> bool {
    ["accept", "mcp-session-id", "last-event-id"].contains(&name.as_str())
}

fn content_type(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// rmcp's auth errors for a `401`/`403` with a challenge.
fn auth_errors(response: &reqwest::Response) -> HttpResult<()> {
    let status = response.status();
    if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
        return Ok(());
    }
    let Some(challenge) = response.headers().get(header::WWW_AUTHENTICATE) else {
        return Ok(());
    };
    let challenge = challenge
        .to_str()
        .map_err(|_| {
            StreamableHttpError::UnexpectedServerResponse(Cow::Borrowed(
                "invalid www-authenticate header value",
            ))
        })?
        .to_owned();
    if status == StatusCode::UNAUTHORIZED {
        return Err(StreamableHttpError::AuthRequired(AuthRequiredError::new(
            challenge,
        )));
    }
    let scope = scope_of(&challenge);
    Err(StreamableHttpError::InsufficientScope(
        InsufficientScopeError::new(challenge, scope),
    ))
}

/// The `scope="..."` parameter of a `WWW-Authenticate` challenge.
fn scope_of(challenge: &str) -> Option<String> {
    let start = challenge.find("scope=\"")? + "scope=\"".len();
    let len = challenge[start..].find('"')?;
    Some(challenge[start..start + len].to_owned())
}

/// rmcp's status metadata for `429` and `5xx`.
fn http_status_error(status: StatusCode, headers: &HeaderMap) -> Option<HttpStatusError> {
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let retry_after = headers
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Some(HttpStatusError::new(status.as_u16(), retry_after))
}

/// Reads at most `limit` bytes of a body (`Err(read)` when it is longer).
async fn read_bounded(mut body: ByteBody, limit: usize) -> HttpResult<Result<Vec<u8>, usize>> {
    let mut out = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| StreamableHttpError::Client(Error::Http(e)))?;
        if out.len() + chunk.len() > limit {
            let take = limit - out.len();
            out.extend_from_slice(&chunk[..take]);
            return Ok(Err(out.len()));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Ok(out))
}

fn rpc_id(id: &RequestId) -> RpcId {
    match id {
        NumberOrString::Number(n) => RpcId::Number(*n),
        NumberOrString::String(s) => RpcId::String(s.as_ref().into()),
    }
}

fn rpc_id_json(id: &RpcId) -> Value {
    match id {
        RpcId::Number(n) => json!(n),
        RpcId::String(s) => json!(s.as_ref()),
        _ => Value::Null,
    }
}

/// Drives one guarded stream for rmcp: feeds the body to the [`ResumableStream`] and turns its
/// outputs into rmcp's `Sse` items.
struct Drive {
    inner: Arc<Inner>,
    stream: Option<ResumableStream>,
    /// The methods of the requests the stream answers: each refusal answer names its method.
    methods: Methods,
    body: Option<ByteBody>,
    /// The id of the last event handed to rmcp: rmcp's `Last-Event-ID`, the parking key.
    last_id: Option<String>,
    queue: VecDeque<Result<Sse, SseError>>,
    done: bool,
}

impl Drive {
    fn new(
        inner: Arc<Inner>,
        stream: ResumableStream,
        methods: Methods,
        body: Option<ByteBody>,
        last_id: Option<String>,
    ) -> Drive {
        Drive {
            inner,
            stream: Some(stream),
            methods,
            body,
            last_id,
            queue: VecDeque::new(),
            done: false,
        }
    }

    fn into_stream(self) -> SseStream {
        futures_util::stream::unfold(self, |mut drive| async move {
            let item = drive.next().await?;
            Some((item, drive))
        })
        .boxed()
    }

    /// A stream that only reports `failure` (a resume the core gave up on).
    fn failed(mut self, failure: Failure) -> SseStream {
        self.on_failed(failure);
        self.into_stream()
    }

    async fn next(&mut self) -> Option<Result<Sse, SseError>> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                return Some(item);
            }
            if self.done {
                return None;
            }
            let stream = self.stream.as_mut()?;
            if let Some(output) = stream.poll() {
                self.on_output(output);
                continue;
            }
            let Some(body) = self.body.as_mut() else {
                // The end was reported and nothing more will come without a reconnect.
                self.done = true;
                continue;
            };
            let next = match stream.poll_timeout() {
                Some(at) => tokio::time::timeout_at(at.into(), body.next()).await.ok(),
                None => Some(body.next().await),
            };
            let now = clock_now();
            match next {
                None => stream.handle_timeout(now),
                Some(Some(Ok(chunk))) => stream.feed(chunk, now),
                Some(Some(Err(e))) => {
                    debug!(error = %e, "stream connection failed");
                    self.body = None;
                    stream.connection_ended(EndCause::Error, now);
                }
                Some(None) => {
                    self.body = None;
                    stream.connection_ended(EndCause::Eof, now);
                }
            }
        }
    }

    fn on_output(&mut self, output: Output) {
        match output {
            Output::Deliver(d) => {
                // The one copy: rmcp's `Sse` owns a `String`.
                let mut bytes = Vec::with_capacity(d.message.len());
                d.message.data().copy_to(&mut bytes);
                let data = String::from_utf8(bytes)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                let id = d.event_id.as_deref().map(lossy);
                if id.is_some() {
                    self.last_id.clone_from(&id);
                }
                self.queue.push_back(Ok(Sse {
                    event: d.event_type.as_deref().map(lossy),
                    data: Some(data),
                    id,
                    retry: None,
                }));
            }
            Output::Cursor(id) => {
                let id = lossy(&id);
                self.last_id = Some(id.clone());
                self.queue.push_back(Ok(Sse {
                    id: Some(id),
                    ..Sse::default()
                }));
            }
            Output::Skip(skip) => debug!(?skip, "guard skipped an event"),
            // The dropped event may have been an outstanding response: nothing will come in its
            // place, so the request fails now, naming the limit.
            Output::Dropped(dropped) if !dropped.outstanding.is_empty() => {
                self.on_failed(Failure::Refused(dropped.into_refusal()));
            }
            Output::Dropped(dropped) => debug!(%dropped, "decoder dropped an event"),
            Output::Disconnected(resume) => {
                debug!(delay = ?resume.delay, "stream disconnected; parked for rmcp's reconnect");
                self.done = true;
                self.body = None;
                if let (Some(id), Some(stream)) = (self.last_id.clone(), self.stream.take()) {
                    let methods = std::mem::take(&mut self.methods);
                    self.inner
                        .park(id, Parked::Resumable(Box::new(stream), methods));
                }
                self.queue
                    .push_back(Err(SseError::Body(Box::new(Error::Disconnected))));
            }
            Output::Failed(failure) => self.on_failed(failure),
            Output::Finished => self.done = true,
            // A reconnect is only handed out after a disconnect, when this drive is done.
            _ => {}
        }
    }

    fn on_failed(&mut self, failure: Failure) {
        debug!(%failure, "guarded stream failed");
        self.done = true;
        self.body = None;
        self.stream = None;
        let outstanding = failure.outstanding().to_vec();
        if outstanding.is_empty() {
            // rmcp reconnects after this error: its reconnect must find the refusal.
            if let Some(id) = self.last_id.clone() {
                self.inner.park(id, Parked::Refused);
            }
            self.queue
                .push_back(Err(SseError::Body(Box::new(Error::Refused(failure)))));
            return;
        }
        let answers = refusal_answers(&failure, &self.methods, |f| {
            self.inner.keep_failure(f.clone())
        });
        for answer in answers {
            self.queue.push_back(Ok(Sse {
                data: Some(answer.to_string()),
                ..Sse::default()
            }));
        }
    }
}

/// The JSON-RPC error answering each request `failure` left outstanding, as the
/// [contract](crate::contract) says: the code [`Code::for_answer`] picks for the request's method
/// (from `methods`) and the failure's kind with the outcome unknown, that code's message, and the
/// contract's `data` keys with this client's own entry (the token `keep` gives the failure).
fn refusal_answers(
    failure: &Failure,
    methods: &Methods,
    keep: impl FnOnce(&Failure) -> u64,
) -> Vec<Value> {
    use contract::data;
    let kind = failure.kind();
    let outcome = Outcome::Unknown;
    let reason = failure.to_string();
    let refusal = failure.refusal().map(|r| r.kind.as_str());
    let must_renegotiate = failure.must_renegotiate();
    let token = keep(failure);
    let ids: Vec<Value> = failure.outstanding().iter().map(rpc_id_json).collect();
    failure
        .outstanding()
        .iter()
        .zip(&ids)
        .map(|(id, id_json)| {
            let method = method_of(methods, id);
            let code = Code::for_answer(method, kind, outcome);
            let mut error_data = json!({
                data::KIND: kind.as_str(),
                data::OUTCOME: outcome.as_str(),
                data::METHOD: method,
                data::REASON: reason,
                data::MUST_RENEGOTIATE: must_renegotiate,
                DATA_KEY: {TOKEN_KEY: token, OUTSTANDING_KEY: ids},
            });
            if let Some(refusal) = refusal {
                error_data[data::REFUSAL] = json!(refusal);
            }
            json!({
                "jsonrpc": "2.0",
                "id": id_json,
                "error": {
                    "code": code.value(),
                    "message": code.message(),
                    "data": error_data,
                },
            })
        })
        .collect()
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// One `POST` of a client message, kept so that a read can be sent again.
struct Post {
    client: GuardedHttpClient,
    request_id: Option<RpcId>,
    /// The request's JSON-RPC method.
    method: Option<Box<str>>,
    /// A task read (`tasks/get`, `tasks/result`): a pure read, sent again when its answer is lost.
    read: bool,
    body: Bytes,
    uri: Arc<str>,
    session_id: Option<Arc<str>>,
    auth_header: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
    limits: StreamableHttpResponseLimits,
}

impl Post {
    async fn send(&self) -> HttpResult<StreamableHttpPostResponse> {
        let (uri, session_id, limits, request_id) =
            (&self.uri, &self.session_id, self.limits, &self.request_id);
        let response = self
            .client
            .request(
                reqwest::Method::POST,
                uri,
                session_id.as_ref(),
                self.auth_header.clone(),
                self.custom_headers.clone(),
            )?
            .header(header::ACCEPT, "text/event-stream, application/json")
            .header(header::CONTENT_TYPE, "application/json")
            .body(self.body.clone())
            .send()
            .await
            .map_err(|e| StreamableHttpError::Client(Error::Http(e)))?;
        auth_errors(&response)?;
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let content_type = content_type(&response);
        let is = |mime| mime_is(content_type.as_deref(), mime);
        let (is_json, is_sse) = (is("application/json"), is("text/event-stream"));
        let new_session = response
            .headers()
            .get(crate::client::SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let status_error = http_status_error(status, response.headers());
        if let Some(e) = status_error
            && (!is_json || status == StatusCode::TOO_MANY_REQUESTS)
        {
            return Err(e.into());
        }
        let json_limit = limits
            .max_json_response_size
            .min(self.client.inner.max_json_body);
        if !status.is_success() {
            // A JSON-RPC error in the body is the answer; anything else is reported by status.
            let limit = if is_json {
                json_limit
            } else {
                limits.max_error_response_size
            };
            let body = read_bounded(response.bytes_stream().boxed(), limit).await?;
            if let Ok(body) = &body
                && is_json
                && let Ok(m @ ::rmcp::model::JsonRpcMessage::Error(_)) =
                    serde_json::from_slice(body)
            {
                return Ok(StreamableHttpPostResponse::Json(m, new_session));
            }
            if let Some(e) = http_status_error(status, &HeaderMap::new()) {
                return Err(e.into());
            }
            let body = body.unwrap_or_else(|e| e.to_string().into_bytes());
            let end = body.len().min(limits.max_error_response_size);
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {}", String::from_utf8_lossy(&body[..end])),
            )));
        }
        if is_sse {
            let inner = &self.client.inner;
            let stream = match request_id {
                Some(id) => inner
                    .session(session_id.as_ref(), limits.max_sse_event_size)
                    .request_stream(id.clone()),
                // A stream answering a notification owes nothing: it finishes at its end.
                None => inner.stream_config(limits.max_sse_event_size).build(),
            };
            let methods = match (request_id, &self.method) {
                (Some(id), Some(method)) => vec![(id.clone(), method.clone())],
                _ => Vec::new(),
            };
            let body = response.bytes_stream().boxed();
            let drive = Drive::new(inner.clone(), stream, methods, Some(body), None);
            return Ok(StreamableHttpPostResponse::Sse(
                drive.into_stream(),
                new_session,
            ));
        }
        if request_id.is_none() {
            // A notification or response awaits nothing: any 2xx body is accepted.
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if !is_json {
            return Err(StreamableHttpError::UnexpectedContentType(content_type));
        }
        let body = match read_bounded(response.bytes_stream().boxed(), json_limit).await? {
            Ok(body) => body,
            Err(_) => {
                return Err(StreamableHttpError::ResponseBodyTooLarge {
                    max_size: json_limit,
                });
            }
        };
        let parsed = serde_json::from_slice(&body)?;
        Ok(StreamableHttpPostResponse::Json(parsed, new_session))
    }

    /// A task read: sent again (as it is, the same request) when its connection fails, its JSON
    /// answer is not whole, or its stream is refused before the answer, at most
    /// [`MAX_REREADS`] times; never turned into another request.
    async fn send_read(self) -> HttpResult<StreamableHttpPostResponse> {
        let mut left = MAX_REREADS;
        loop {
            match self.send().await {
                Ok(StreamableHttpPostResponse::Sse(stream, session)) => {
                    return Ok(StreamableHttpPostResponse::Sse(
                        rereading(stream, self, left),
                        session,
                    ));
                }
                Err(e) if left > 0 && rereadable(&e) => {
                    left -= 1;
                    debug!(error = %e, "a task read was lost; reading again");
                }
                other => return other,
            }
        }
    }
}

/// How many times a lost task read is sent again.
const MAX_REREADS: u32 = 10;

/// The method of `message`, when it is a request.
fn request_method(message: &ClientJsonRpcMessage) -> Option<Box<str>> {
    let ClientJsonRpcMessage::Request(r) = message else {
        return None;
    };
    serde_json::to_value(&r.request)
        .ok()
        .and_then(|v| v["method"].as_str().map(Box::from))
}

/// Whether `method` is a task read (`tasks/get`, `tasks/result`).
fn is_task_read(method: Option<&str>) -> bool {
    matches!(method, Some("tasks/get" | "tasks/result"))
}

/// A lost answer (a failed connection, a body that is not one whole JSON value), not the server's.
fn rereadable(e: &StreamableHttpError<Error>) -> bool {
    matches!(
        e,
        StreamableHttpError::Client(Error::Http(_))
            | StreamableHttpError::Deserialize(_)
            | StreamableHttpError::UnexpectedEndOfStream
            | StreamableHttpError::Io(_)
    )
}

/// The token of the kept failure, if `item` is the answer [`Drive::on_failed`] gives request `id`.
fn refusal_token(item: &Result<Sse, SseError>, id: &RpcId) -> Option<u64> {
    let Ok(Sse {
        data: Some(data), ..
    }) = item
    else {
        return None;
    };
    if data.len() > 64 << 10 || !data.contains(DATA_KEY) {
        return None;
    }
    let v = serde_json::from_str::<Value>(data).ok()?;
    Code::from_value(v["error"]["code"].as_i64()?)?;
    if v["id"] != rpc_id_json(id) {
        return None;
    }
    v["error"]["data"][DATA_KEY][TOKEN_KEY].as_u64()
}

/// A task read's stream: when the guard refuses it before the answer (the read's answer is
/// owed), the read is sent again and its new answer streamed in its place.
fn rereading(first: SseStream, post: Post, left: u32) -> SseStream {
    let Some(id) = post.request_id.clone() else {
        return first;
    };
    futures_util::stream::unfold(
        (Some(first), post, left, id),
        |(current, post, mut left, id)| async move {
            let mut current = current?;
            loop {
                let item = current.next().await?;
                let token = if left == 0 {
                    None
                } else {
                    refusal_token(&item, &id)
                };
                let Some(token) = token else {
                    return Some((item, (Some(current), post, left, id)));
                };
                left -= 1;
                debug!(%id, "a task read's stream was refused; reading again");
                let sent = post.send().await;
                if matches!(
                    sent,
                    Ok(StreamableHttpPostResponse::Sse(..) | StreamableHttpPostResponse::Json(..))
                ) {
                    // The refusal is answered again in its place: nobody will ask for it.
                    post.client.inner.tracked().failures.remove(&token);
                }
                match sent {
                    Ok(StreamableHttpPostResponse::Sse(next, _)) => current = next,
                    Ok(StreamableHttpPostResponse::Json(message, _)) => {
                        let data = serde_json::to_string(&message).unwrap_or_default();
                        let answer = Ok(Sse {
                            data: Some(data),
                            ..Sse::default()
                        });
                        return Some((answer, (None, post, left, id)));
                    }
                    // The read cannot be sent again: the refusal stands.
                    _ => return Some((item, (None, post, left, id))),
                }
            }
        },
    )
    .boxed()
}

impl StreamableHttpClient for GuardedHttpClient {
    type Error = Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let method = request_method(&message);
        let post = Post {
            client: self.clone(),
            request_id: match &message {
                ClientJsonRpcMessage::Request(r) => Some(rpc_id(&r.id)),
                _ => None,
            },
            read: is_task_read(method.as_deref()),
            method,
            body: Bytes::from(serde_json::to_vec(&message)?),
            uri,
            session_id,
            auth_header,
            custom_headers,
            limits,
        };
        if !post.read {
            return post.send().await;
        }
        post.send_read().await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        self.inner.tracked().sessions.remove(&session_id);
        let response = self
            .request(
                reqwest::Method::DELETE,
                &uri,
                Some(&session_id),
                auth_header,
                custom_headers,
            )?
            .send()
            .await
            .map_err(|e| StreamableHttpError::Client(Error::Http(e)))?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED || status.is_success() {
            return Ok(());
        }
        Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
            format!("HTTP {status} on DELETE"),
        )))
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<SseStream> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            RMCP_DEFAULT_MAX_SSE_EVENT,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<SseStream> {
        let parked = last_event_id
            .as_ref()
            .and_then(|id| self.inner.tracked().parked.remove(id));
        let target = Target {
            uri: &uri,
            session_id: session_id.as_ref(),
            auth_header,
            custom_headers,
        };
        match parked {
            Some(Parked::Resumable(stream, methods)) => {
                self.get_guarded(target, *stream, methods, last_event_id, true)
                    .await
            }
            // The stream was refused (and the refusal reported), or its state is gone (pushed
            // out, see `TransportConfig::max_tracked`): nothing can verify a resume, so stop rmcp's
            // reconnect loop (this is one of the errors it does not retry).
            Some(Parked::Refused) => Err(StreamableHttpError::ServerDoesNotSupportSse),
            None if last_event_id.is_some() => {
                debug!(
                    ?last_event_id,
                    "a resume of a stream this client does not track"
                );
                Err(StreamableHttpError::ServerDoesNotSupportSse)
            }
            None => {
                // A new standalone stream.
                let stream = self
                    .inner
                    .session(session_id.as_ref(), max_sse_event_size)
                    .listen_stream();
                self.get_guarded(target, stream, Vec::new(), None, false)
                    .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn bounded_keeps_the_newest() {
        let mut b = Bounded::new();
        for i in 0..10u32 {
            b.insert(i, i, 3);
        }
        assert_eq!(b.len(), 3);
        let mut keys: Vec<_> = b.map.keys().copied().collect();
        keys.sort_unstable();
        assert_eq!(keys, [7, 8, 9]);
        assert_eq!(b.remove(&8), Some(8));
        assert_eq!(b.order, [7, 9]);
    }

    #[test]
    fn max_tracked_bounds_kept_failures() {
        let mut config = TransportConfig::default();
        config.max_tracked(2);
        let http = build_http(&ClientConfig::default()).expect("default HTTP client");
        let client = GuardedHttpClient::with_http(http, &config);
        let failure = Failure::NoProgress {
            resumes: 4,
            outstanding: vec![RpcId::Number(1)],
        };
        let tokens: Vec<u64> = (0..3)
            .map(|_| client.inner.keep_failure(failure.clone()))
            .collect();
        let error = |code: Code, token: u64| {
            ErrorData::new(
                ::rmcp::model::ErrorCode(code.value()),
                code.message(),
                Some(json!({DATA_KEY: {TOKEN_KEY: token}})),
            )
        };
        let refused = |token| error(Code::Refused, token);
        assert_eq!(client.failure_of(&refused(tokens[0])), None, "pushed out");
        assert_eq!(
            client.failure_of(&refused(tokens[2])),
            Some(failure.clone())
        );
        assert_eq!(client.failure_of(&refused(tokens[2])), None, "taken once");
        let mut other = refused(tokens[1]);
        other.code = ::rmcp::model::ErrorCode(-32_000);
        assert_eq!(client.failure_of(&other), None, "another code");
        // Any of the contract's codes.
        let unknown = error(Code::OutcomeUnknown, tokens[1]);
        assert_eq!(client.failure_of(&unknown), Some(failure));
    }

    /// The answers a refused stream gives its outstanding requests follow the contract: a
    /// `tools/call` (or a request whose method is not known) is `-32050` whatever the failure, any
    /// other method gets its failure kind's code; `data` has the contract's keys and the token.
    #[tokio::test]
    async fn refusal_answers_carry_the_contracts_code_for_each_method() {
        use crate::guard::{Refusal, RefusalKind};
        let http = build_http(&ClientConfig::default()).expect("default HTTP client");
        let client = GuardedHttpClient::with_http(http, &TransportConfig::default());
        let methods: Methods = vec![
            (RpcId::Number(1), "tools/call".into()),
            (RpcId::Number(2), "tools/list".into()),
            (RpcId::String("t".into()), "tasks/result".into()),
        ];
        let outstanding = vec![
            RpcId::Number(1),
            RpcId::Number(2),
            RpcId::String("t".into()),
            RpcId::Number(9),
        ];
        let refused = Failure::Refused(Refusal {
            kind: RefusalKind::ReplayMissed { waited: None },
            cursor: None,
            outstanding: outstanding.clone(),
        });
        let reconnect = Failure::ReconnectFailed {
            attempts: 6,
            last: None,
            outstanding: outstanding.clone(),
        };
        let stalled = Failure::NoProgress {
            resumes: 4,
            outstanding,
        };
        // (failure, its kind word, the code of each answer in the order of `outstanding`, the
        // refusal word)
        let cases = [
            (
                &refused,
                "refused",
                [-32_050, -32_053, -32_053, -32_050],
                Some("replay-missed"),
            ),
            (
                &reconnect,
                "reconnect-failed",
                [-32_050, -32_051, -32_051, -32_050],
                None,
            ),
            (
                &stalled,
                "no-progress",
                [-32_050, -32_053, -32_053, -32_050],
                None,
            ),
        ];
        for (failure, kind, codes, refusal) in cases {
            let drive = Drive::new(
                client.inner.clone(),
                ResumableStream::new(),
                methods.clone(),
                None,
                None,
            );
            let items: Vec<_> = drive.failed(failure.clone()).collect().await;
            assert_eq!(items.len(), 4, "{failure}");
            let mut tokens = HashSet::new();
            for ((item, code), method) in items.iter().zip(codes).zip([
                "tools/call",
                "tools/list",
                "tasks/result",
                "tools/call",
            ]) {
                let Ok(Sse {
                    data: Some(data), ..
                }) = item
                else {
                    panic!("{item:?}");
                };
                let answer: Value = serde_json::from_str(data).unwrap();
                let error = &answer["error"];
                assert_eq!(error["code"], json!(code), "{method}: {answer}");
                let message = Code::from_value(code.into()).unwrap().message();
                assert_eq!(error["message"], json!(message));
                let data = &error["data"];
                assert_eq!(data["kind"], json!(kind), "{answer}");
                assert_eq!(data["outcome"], json!("unknown"));
                assert_eq!(data["method"], json!(method));
                assert_eq!(data["reason"], json!(failure.to_string()));
                assert_eq!(data["mustRenegotiate"], json!(true));
                assert_eq!(data.get("refusal").and_then(Value::as_str), refusal);
                assert_eq!(data[DATA_KEY]["outstanding"], json!([1, 2, "t", 9]));
                let token = data[DATA_KEY][TOKEN_KEY].as_u64().unwrap();
                tokens.insert(token);
                // A task read's stream recognises the answer as the refusal of its request.
                assert_eq!(refusal_token(item, &rpc_id_of(&answer["id"])), Some(token));
                assert_eq!(refusal_token(item, &RpcId::Number(77)), None);
            }
            assert_eq!(tokens.len(), 1, "one failure kept for the stream");
            let error: ErrorData = serde_json::from_value(
                serde_json::from_str::<Value>(items[1].as_ref().unwrap().data.as_ref().unwrap())
                    .unwrap()["error"]
                    .clone(),
            )
            .unwrap();
            assert_eq!(client.failure_of(&error).as_ref(), Some(failure));
        }
    }

    fn rpc_id_of(v: &Value) -> RpcId {
        match v {
            Value::Number(n) => RpcId::Number(n.as_i64().unwrap()),
            Value::String(s) => RpcId::String(s.as_str().into()),
            other => panic!("{other}"),
        }
    }

    /// A refusal on a stream with nothing outstanding reaches rmcp as an error the application can
    /// downcast, and rmcp's reconnect after it gets an error rmcp does not retry.
    #[tokio::test]
    async fn refusal_without_outstanding_is_a_downcastable_error_that_stops_reconnects() {
        let http = build_http(&ClientConfig::default()).expect("default HTTP client");
        let client = GuardedHttpClient::with_http(http, &TransportConfig::default());
        let failure = Failure::NoProgress {
            resumes: 4,
            outstanding: Vec::new(),
        };
        let drive = Drive::new(
            client.inner.clone(),
            ResumableStream::new(),
            Vec::new(),
            None,
            Some("7".to_owned()),
        );
        let mut items = drive.failed(failure.clone());
        let Some(Err(SseError::Body(error))) = items.next().await else {
            panic!("expected an error item");
        };
        match error.downcast_ref::<Error>() {
            Some(Error::Refused(f)) => assert_eq!(*f, failure),
            other => panic!("{other:?}"),
        }
        assert!(items.next().await.is_none(), "the stream ends");
        assert_eq!(client.parked(), 1);
        // No request is sent: the URI is never contacted.
        let reconnect = client
            .get_stream(
                "http://127.0.0.1:9/mcp".into(),
                None,
                Some("7".to_owned()),
                None,
                HashMap::new(),
            )
            .await;
        assert!(matches!(
            reconnect,
            Err(StreamableHttpError::ServerDoesNotSupportSse)
        ));
        assert_eq!(client.parked(), 0);
    }

    #[test]
    fn scope_and_mime() {
        assert_eq!(
            scope_of(r#"Bearer realm="x", scope="read write""#).as_deref(),
            Some("read write")
        );
        assert_eq!(scope_of("Bearer"), None);
        assert!(mime_is(
            Some("text/event-stream; charset=utf-8"),
            "text/event-stream"
        ));
        assert!(!mime_is(Some("application/json"), "text/event-stream"));
    }
}
