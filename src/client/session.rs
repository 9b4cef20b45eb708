//! The session: connecting, telling the server's protocol era apart (`server/discover` for
//! 2026-07-28, else `initialize`), the session state shared by concurrent calls, renegotiation,
//! the standalone `GET` stream and `DELETE`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use futures_util::{Stream, StreamExt, TryStreamExt};
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tracing::debug;

#[cfg(doc)]
use super::Handler;
use super::error::Attempt;
use super::legacy::{Legacy, Open, Opened};
use super::transport::{Body, status_error};
use super::{
    Client, ClientConfig, ClientError, INITIALIZE_VERSIONS, Inner, Outcome, PROTOCOL_2026_07_28,
    PROTOCOL_VERSION, Protocol, ProtocolError, SESSION_HEADER, STATELESS_VERSIONS,
    TransportStrategy, transport::build_http, v2026_07_28, within,
};
use crate::message::{Message, RpcId};
use crate::resume::{self, Failure};

/// A `server/discover` answer larger than this is no discover result (it is not parsed).
const MAX_DISCOVER_RESULT: usize = 256 << 10;

/// The session state shared by concurrent calls.
#[derive(Clone, Debug, Default)]
pub(super) struct Session {
    pub(super) id: Option<String>,
    pub(super) protocol_version: Option<String>,
    /// A stateless (2026-07-28) server: `_meta` on every request, no session, no resumption.
    pub(super) stateless: bool,
    /// The `server/discover` result of a stateless server.
    pub(super) discover: Option<Arc<Value>>,
    /// The server's capabilities (from `initialize` or `server/discover`).
    pub(super) capabilities: Option<Arc<Value>>,
    /// The `initialize` result of a session.
    pub(super) initialized: Option<Arc<Value>>,
    /// Bumped at each new session, so concurrent calls renegotiate once.
    pub(super) generation: u64,
    /// The session's streams, sharing outstanding requests and response deduplication.
    pub(super) streams: resume::Session,
    /// A session on the 2024-11-05 HTTP+SSE transport: its endpoint and reader.
    pub(super) legacy: Option<Legacy>,
}

impl Client {
    /// Opens a session at `url` (`http://` or `https://`): `initialize`, then
    /// `notifications/initialized`.
    pub async fn connect(url: &str, config: ClientConfig) -> Result<Client, ClientError> {
        let url = reqwest::Url::parse(url)
            .map_err(|e| ClientError::Setup(format!("URL {url:?}: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ClientError::Setup(format!("URL {url}: not http(s)")));
        }
        let deadline = config.call_timeout;
        let client = Client {
            inner: Arc::new(Inner {
                http: build_http(&config)?,
                url,
                config,
                session: RwLock::new(Session::default()),
                renegotiating: tokio::sync::Mutex::new(()),
                next_id: AtomicI64::new(1),
                sessions_opened: AtomicU32::new(0),
                tools: Mutex::new(None),
                pending: Mutex::new(HashMap::new()),
            }),
        };
        within(deadline, client.initialize()).await?;
        Ok(client)
    }

    /// Like [`Client::connect`], for `http://<addr>/mcp`.
    pub async fn connect_addr(
        addr: SocketAddr,
        config: ClientConfig,
    ) -> Result<Client, ClientError> {
        Client::connect(&format!("http://{addr}/mcp"), config).await
    }

    /// The current `Mcp-Session-Id` (`None` for a sessionless server).
    pub fn session_id(&self) -> Option<String> {
        self.session().id
    }

    /// The protocol version in use: the one the server chose in `initialize`, or the stateless
    /// version both speak.
    pub fn protocol_version(&self) -> Option<String> {
        self.session().protocol_version
    }

    /// Whether the server is spoken to statelessly (MCP 2026-07-28): no session, no resumption,
    /// a cut response stream is a lost (cancelled) request.
    pub fn is_stateless(&self) -> bool {
        self.session().stateless
    }

    /// The server's capabilities, as `initialize` or `server/discover` gave them.
    pub fn server_capabilities(&self) -> Option<Arc<Value>> {
        self.session().capabilities
    }

    /// The stateless server's `server/discover` result (`supportedVersions`, `capabilities`,
    /// `serverInfo`, ...); `None` on an `initialize` session.
    pub fn discover_result(&self) -> Option<Arc<Value>> {
        self.session().discover
    }

    /// The session's `initialize` result (`protocolVersion`, `capabilities`, `serverInfo`,
    /// `instructions`, ...); `None` for a stateless server ([`Client::discover_result`]).
    pub fn initialize_result(&self) -> Option<Arc<Value>> {
        self.session().initialized
    }

    /// Whether the server is spoken to on the 2024-11-05 HTTP+SSE transport (an event stream
    /// from `GET`, messages `POST`ed to the endpoint it named) rather than Streamable HTTP
    /// ([`ClientConfig::transport`]).
    pub fn is_legacy_sse(&self) -> bool {
        self.session().legacy.is_some()
    }

    /// Sessions opened so far (1 + renegotiations).
    pub fn sessions_opened(&self) -> u32 {
        self.inner.sessions_opened.load(Ordering::Relaxed)
    }

    pub(super) fn session(&self) -> Session {
        self.inner.session.read().expect("session lock").clone()
    }

    /// Finds out how to speak to the server, as [`ClientConfig::protocol`] says: a
    /// `server/discover` for 2026-07-28 (stateless), else (or after an `initialize` server's
    /// answer to it) a new session with `initialize` and `notifications/initialized`. Called by
    /// [`Client::connect`] and when an `initialize` session must be renewed.
    ///
    /// The era is told apart as the 2026-07-28 specification asks of a client that speaks both:
    /// a `server/discover` answered with a version in common is a stateless server; an
    /// unsupported-version error (`-32022`) naming a stateless version in common is asked again
    /// with it, naming only `initialize` versions selects `initialize` with one of them; any other
    /// answer short of `401`, `403` or a `5xx` (an error body that is not a recognized 2026-07-28
    /// error, an empty result) is an `initialize` server.
    ///
    /// Which transport is tried first, and whether the other is tried after, is
    /// [`ClientConfig::transport`]: see [`TransportStrategy`].
    pub async fn initialize(&self) -> Result<(), ClientError> {
        match self.inner.config.transport {
            TransportStrategy::HttpOnly => self.initialize_http().await,
            TransportStrategy::SseOnly => {
                let offer = self.legacy_offer()?;
                match self.open_legacy_stream().await {
                    Ok(opened) => self.open_legacy(opened, &offer).await,
                    Err(Open::NotHere(e) | Open::Failed(e)) => Err(e),
                }
            }
            TransportStrategy::SseFirst => {
                let offer = self.legacy_offer();
                match offer {
                    Ok(offer) => match self.open_legacy_stream().await {
                        Ok(opened) => self.open_legacy(opened, &offer).await,
                        Err(Open::NotHere(e)) => {
                            debug!(error = %e, "no HTTP+SSE stream; Streamable HTTP");
                            self.initialize_http().await
                        }
                        Err(Open::Failed(e)) => Err(e),
                    },
                    Err(_) => self.initialize_http().await,
                }
            }
            TransportStrategy::HttpFirst => match self.initialize_http().await {
                Err(e) if takes_no_post(&e) => {
                    let Ok(offer) = self.legacy_offer() else {
                        return Err(e);
                    };
                    debug!(error = %e, "the first POST was refused; trying HTTP+SSE");
                    match self.open_legacy_stream().await {
                        Ok(opened) => self.open_legacy(opened, &offer).await,
                        // Neither transport: the POST's answer is the error.
                        Err(Open::NotHere(_)) => Err(e),
                        Err(Open::Failed(legacy)) => {
                            debug!(error = %legacy, "no HTTP+SSE stream either");
                            Err(match legacy {
                                // An event stream that broke the transport: that is the news.
                                ClientError::Protocol(
                                    ProtocolError::NoEndpoint(_)
                                    | ProtocolError::ForeignEndpoint(_),
                                ) => legacy,
                                _ => e,
                            })
                        }
                    }
                }
                other => other,
            },
        }
    }

    /// The version `initialize` offers on the HTTP+SSE transport: the one offered on Streamable
    /// HTTP (a stateless version has no HTTP+SSE transport).
    fn legacy_offer(&self) -> Result<String, ClientError> {
        match &self.inner.config.protocol {
            Protocol::Auto => Ok(PROTOCOL_VERSION.to_owned()),
            Protocol::Only(v) if !STATELESS_VERSIONS.contains(&v.as_str()) => Ok(v.clone()),
            Protocol::Only(v) => Err(ClientError::Setup(format!(
                "protocol {v} has no HTTP+SSE transport"
            ))),
        }
    }

    /// Opens a session on the HTTP+SSE stream `opened`: `initialize` offering `offer`, then
    /// `notifications/initialized`, each `POST`ed to the stream's endpoint.
    async fn open_legacy(&self, opened: Opened, offer: &str) -> Result<(), ClientError> {
        let fresh = self.legacy_session(opened);
        let id = 0;
        let req = self.initialize_request(id, offer);
        let answer = self
            .legacy_exchange(&fresh, &req, RpcId::Number(id), "initialize")
            .await
            .map_err(Attempt::into_error);
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                if let Some(legacy) = &fresh.legacy {
                    legacy.end();
                }
                return Err(e);
            }
        };
        self.finish_session(fresh, None, offer, answer).await
    }

    /// One request on an HTTP+SSE session: registered with the reader, `POST`ed, its response
    /// awaited on the stream.
    pub(super) async fn legacy_exchange(
        &self,
        session: &Session,
        req: &Value,
        rpc_id: RpcId,
        during: &'static str,
    ) -> Result<Message, Attempt> {
        let legacy = session.legacy.as_ref().expect("an HTTP+SSE session");
        let mut waiter = legacy
            .shared
            .wait(rpc_id, &session.streams)
            .map_err(|f| Attempt::NotTaken(*f))?;
        let res = self.post(session, req, during).await?;
        self.expect_ok(res, during).await?;
        waiter
            .response()
            .await
            .map_err(|f| Attempt::Lost(f, Vec::new(), None))
    }

    /// Streamable HTTP: `server/discover`, else `initialize`, as [`Client::initialize`] says.
    async fn initialize_http(&self) -> Result<(), ClientError> {
        let offer = match self.inner.config.protocol.clone() {
            Protocol::Only(v) if !STATELESS_VERSIONS.contains(&v.as_str()) => {
                return self.open_session(&v).await;
            }
            Protocol::Only(v) => Some(v),
            Protocol::Auto => None,
        };
        let pinned = offer.is_some();
        let mut version = offer.unwrap_or_else(|| STATELESS_VERSIONS[0].to_owned());
        // One corrective round: a stateless server that refused the version asked for.
        for round in 0..2 {
            // The first request of a client takes id 0 (as `initialize` does); a corrective
            // retry is a new request with a new id.
            let id = if round == 0 {
                0
            } else {
                self.inner.next_id.fetch_add(1, Ordering::Relaxed)
            };
            let (era, answer) = self.discover(&version, id).await?;
            debug!(?era, version, "server/discover answered");
            match era {
                v2026_07_28::Era::Stateless(v) => return self.open_stateless(v, answer),
                v2026_07_28::Era::Corrective(v) if v != version || !pinned => version = v,
                v2026_07_28::Era::Corrective(_) => {}
                v2026_07_28::Era::NoCommonVersion(v) => {
                    return Err(ClientError::Protocol(ProtocolError::NoCommonVersion(v)));
                }
                v2026_07_28::Era::Initialize(offer) => {
                    if pinned {
                        let supported = answer["error"]["data"]["supported"]
                            .as_array()
                            .map(|a| {
                                a.iter()
                                    .filter_map(|v| v.as_str().map(str::to_owned))
                                    .collect()
                            })
                            .unwrap_or_default();
                        return Err(ClientError::Protocol(ProtocolError::NoCommonVersion(
                            supported,
                        )));
                    }
                    let offer = offer.unwrap_or_else(|| PROTOCOL_VERSION.to_owned());
                    return self.open_session(&offer).await;
                }
            }
        }
        Err(ClientError::Protocol(ProtocolError::NoCommonVersion(vec![
            version,
        ])))
    }

    /// Adds the 2026-07-28 `_meta` fields of `session` (its version, the client's capabilities and
    /// name) to a request's `params`.
    pub(super) fn stamp(&self, params: &mut Value, session: &Session) {
        let version = session
            .protocol_version
            .as_deref()
            .unwrap_or(PROTOCOL_2026_07_28);
        let config = &self.inner.config;
        v2026_07_28::stamp_meta(
            params,
            version,
            &config.capabilities,
            &json!({"name": config.client_name, "version": config.client_version}),
        );
    }

    /// Sends `server/discover` as a 2026-07-28 request speaking `version`: the era its answer
    /// shows, and the answer (the JSON-RPC response, or the error body's JSON).
    pub(super) async fn discover(
        &self,
        version: &str,
        id: i64,
    ) -> Result<(v2026_07_28::Era, Value), ClientError> {
        let fresh = Session {
            protocol_version: Some(version.to_owned()),
            stateless: true,
            streams: resume::Session::new(self.inner.config.stream.clone()),
            ..Session::default()
        };
        let mut params = json!({});
        self.stamp(&mut params, &fresh);
        let req =
            json!({"jsonrpc": "2.0", "id": id, "method": "server/discover", "params": params});
        let res = self.post(&fresh, &req, "server/discover").await?;
        let status = res.status().as_u16();
        if !res.status().is_success() {
            // A refusal for want of credentials or a broken server says nothing of the era.
            if matches!(status, 401 | 403) || status >= 500 || status == 429 {
                return Err(
                    status_error(res, "server/discover", self.inner.config.max_error_body).await,
                );
            }
            // Room for an unsupported-version error's list of versions.
            let cap = self.inner.config.max_error_body.max(4096);
            let body = match status_error(res, "server/discover", cap).await {
                ClientError::Status { body, .. } => body,
                _ => String::new(),
            };
            let answer: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let era = v2026_07_28::classify(&answer, STATELESS_VERSIONS, INITIALIZE_VERSIONS);
            return Ok((era, answer));
        }
        let mut stream = self.inner.config.stream.build();
        stream.resumable(false);
        let answer = self
            .answer(
                res,
                &fresh,
                RpcId::Number(id),
                stream,
                None,
                &mut Outcome::default(),
            )
            .await;
        match answer {
            // A discover result is small: a big answer is no discover result (and is not parsed).
            Ok(message) if message.len() > MAX_DISCOVER_RESULT => {
                Ok((v2026_07_28::Era::Initialize(None), Value::Null))
            }
            Ok(message) => {
                let answer: Value = message.deserialize().unwrap_or(Value::Null);
                let era = v2026_07_28::classify(&answer, STATELESS_VERSIONS, INITIALIZE_VERSIONS);
                Ok((era, answer))
            }
            // An `initialize` server's odd answer to a method it does not know (another content
            // type, no response on its stream): not a stateless server.
            Err(Attempt::Client(ClientError::Protocol(_))) => {
                Ok((v2026_07_28::Era::Initialize(None), Value::Null))
            }
            Err(a) => Err(a.into_error()),
        }
    }

    /// Speaks `version` statelessly from now on.
    pub(super) fn open_stateless(
        &self,
        version: String,
        discover: Value,
    ) -> Result<(), ClientError> {
        let mut s = self.inner.session.write().expect("session lock");
        s.id = None;
        s.protocol_version = Some(version);
        s.stateless = true;
        let result = discover.get("result").cloned().unwrap_or(Value::Null);
        s.capabilities = Some(Arc::new(result["capabilities"].clone()));
        s.discover = Some(Arc::new(result));
        s.initialized = None;
        s.generation += 1;
        s.streams = resume::Session::new(self.inner.config.stream.clone());
        self.inner.sessions_opened.fetch_add(1, Ordering::Relaxed);
        debug!(version = ?s.protocol_version, "stateless server");
        Ok(())
    }

    /// Opens a new session: `initialize` offering `offer`, then `notifications/initialized`.
    pub(super) async fn open_session(&self, offer: &str) -> Result<(), ClientError> {
        // Calls take ids from 1; `initialize` is alone on its new session and always takes 0.
        let id = 0;
        let req = self.initialize_request(id, offer);
        let fresh = Session {
            streams: resume::Session::new(self.inner.config.stream.clone()),
            ..Session::default()
        };
        let res = self.post(&fresh, &req, "initialize").await?;
        if res.status() == reqwest::StatusCode::BAD_REQUEST {
            // A server that does not speak the version offered may say which ones it does
            // (`-32022`, as a 2026-07-28-only server answers `initialize`).
            let cap = self.inner.config.max_error_body.max(4096);
            let error = status_error(res, "initialize", cap).await;
            if let ClientError::Status { body, .. } = &error {
                let answer: Value = serde_json::from_str(body).unwrap_or(Value::Null);
                if let Some(supported) = v2026_07_28::supported_versions_of_error(&answer) {
                    return Err(ClientError::Protocol(ProtocolError::NoCommonVersion(
                        supported,
                    )));
                }
            }
            return Err(error);
        }
        let res = self.expect_ok(res, "initialize").await?;
        let session_id = res
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let stream = self.inner.config.stream.build();
        let answer = self
            .answer(
                res,
                &fresh,
                RpcId::Number(id),
                stream,
                None,
                &mut Outcome::default(),
            )
            .await
            .map_err(Attempt::into_error)?;
        self.finish_session(fresh, session_id, offer, answer).await
    }

    /// The `initialize` request offering `offer`.
    fn initialize_request(&self, id: i64, offer: &str) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "initialize",
            "params": {
                "protocolVersion": offer,
                "capabilities": self.inner.config.capabilities,
                "clientInfo": {"name": self.inner.config.client_name,
                               "version": self.inner.config.client_version},
            },
        })
    }

    /// Takes `fresh` as the session after `initialize` answered `answer`, and sends
    /// `notifications/initialized`.
    async fn finish_session(
        &self,
        fresh: Session,
        session_id: Option<String>,
        offer: &str,
        answer: Message,
    ) -> Result<(), ClientError> {
        let value: Value = answer
            .deserialize()
            .map_err(|e| ClientError::Protocol(ProtocolError::InitializeError(e.to_string())))?;
        if let Some(error) = value.get("error") {
            return Err(ClientError::Protocol(ProtocolError::InitializeError(
                error.to_string(),
            )));
        }
        let version = value["result"]["protocolVersion"]
            .as_str()
            .unwrap_or(offer)
            .to_owned();
        let session = {
            let mut s = self.inner.session.write().expect("session lock");
            s.id = session_id;
            s.protocol_version = Some(version);
            s.stateless = false;
            s.discover = None;
            s.capabilities = Some(Arc::new(value["result"]["capabilities"].clone()));
            s.initialized = Some(Arc::new(value["result"].clone()));
            s.generation += 1;
            s.streams = fresh.streams.clone();
            s.legacy = fresh.legacy.clone();
            s.clone()
        };
        self.inner.sessions_opened.fetch_add(1, Ordering::Relaxed);
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let res = self
            .post(&session, &note, "notifications/initialized")
            .await?;
        self.expect_ok(res, "notifications/initialized").await?;
        debug!(session = ?session.id, version = ?session.protocol_version, "session open");
        Ok(())
    }

    /// Opens a new session unless a concurrent call already did since `seen`.
    pub(super) async fn renegotiate(&self, seen: u64) -> Result<(), ClientError> {
        let _one = self.inner.renegotiating.lock().await;
        if self.session().generation != seen {
            return Ok(());
        }
        let old = self.session();
        if old.id.is_some() {
            // End the lost session politely; it may already be gone.
            if let Err(e) = self.delete(&old).await {
                debug!(error = %e, "could not delete the old session");
            }
        }
        // The server was found to speak `initialize`: a new session with the version it chose.
        let offer = old.protocol_version.as_deref().unwrap_or(PROTOCOL_VERSION);
        if let Some(legacy) = &old.legacy {
            // On HTTP+SSE a new session is a new stream.
            legacy.end();
            return match self.open_legacy_stream().await {
                Ok(opened) => self.open_legacy(opened, offer).await,
                Err(Open::NotHere(e) | Open::Failed(e)) => Err(e),
            };
        }
        self.open_session(offer).await
    }

    /// The standalone `GET` stream: server notifications and requests outside any call, guarded
    /// and resumed like a response stream, kept open until the server ends it for good. Server
    /// requests on it are answered through the [`Handler`]; every message is also yielded.
    pub async fn listen(
        &self,
    ) -> Result<impl Stream<Item = Result<Message, Failure>> + use<>, ClientError> {
        let session = self.session();
        if let Some(legacy) = &session.legacy {
            // The session's one stream is read already (its messages go to the handler): this
            // stream ends when that one does.
            let ended = legacy.shared.ended();
            return Ok(futures_util::stream::once(ended)
                .filter_map(|()| async { None::<Result<Message, Failure>> })
                .left_stream());
        }
        let open = async {
            let res = if session.stateless {
                let mut params = json!({"notifications": {
                    "toolsListChanged": true,
                    "promptsListChanged": true,
                    "resourcesListChanged": true,
                }});
                self.stamp(&mut params, &session);
                let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
                let req = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
                                 "params": params});
                self.post(&session, &req, "subscriptions/listen").await?
            } else {
                self.get_stream(&session, None, "open the GET stream")
                    .await?
            };
            self.expect_ok(res, "open the GET stream").await
        };
        let res = within(self.inner.config.call_timeout, open).await?;
        let mut stream = session.streams.listen_stream();
        if session.stateless {
            // The `subscriptions/listen` stream ends when the server ends it: nothing to resume.
            stream.keep_open(false);
            stream.resumable(false);
        }
        let body: Body = Box::pin(res.bytes_stream().map_err(ClientError::http("GET stream")));
        let me = self.clone();
        Ok(self
            .guarded(&session, stream, body)
            .then(move |item| {
                let me = me.clone();
                let session = session.clone();
                async move {
                    let d = item?;
                    let message = Message::new(d.message.data().clone());
                    me.dispatch(&session, d).await;
                    Ok(message)
                }
            })
            .right_stream())
    }

    pub(super) async fn delete(&self, session: &Session) -> Result<(), ClientError> {
        let res = self
            .send(
                reqwest::Method::DELETE,
                session,
                HeaderMap::new(),
                None,
                "delete session",
            )
            .await?;
        let status = res.status();
        // A session the server already forgot (or one it does not let clients end) is as ended
        // as it gets.
        if status.is_success() || status == 404 || status == 405 {
            Ok(())
        } else {
            Err(status_error(res, "delete session", self.inner.config.max_error_body).await)
        }
    }

    /// Ends the session with `DELETE` (nothing to do for a sessionless server).
    pub async fn close(self) -> Result<(), ClientError> {
        let session = self.session();
        if let Some(legacy) = &session.legacy {
            // Dropping the stream ends the session.
            legacy.end();
            return Ok(());
        }
        if session.id.is_none() || session.stateless {
            return Ok(());
        }
        within(self.inner.config.call_timeout, self.delete(&session)).await
    }
}

/// Whether `e` is the answer of a URL that takes no MCP `POST`: `400`, `404` or `405` to
/// `initialize` (a `server/discover` answered so is followed by `initialize`, as any answer of a
/// server that does not speak 2026-07-28).
fn takes_no_post(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Status {
            during: "initialize",
            status: 400 | 404 | 405,
            ..
        }
    )
}
