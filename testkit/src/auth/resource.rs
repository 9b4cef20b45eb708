//! The OAuth-protected MCP endpoint: a bearer-checking front for an upstream MCP server.
//!
//! | request | answer |
//! | --- | --- |
//! | `GET` the protected-resource metadata ([`MetadataLocation`]) | RFC 9728: `resource` (the endpoint's URL), `authorization_servers` (the [`AuthServer`]'s issuer), `scopes_supported`, `bearer_methods_supported` |
//! | any request to `/mcp` without `Authorization: Bearer` | `401`, `WWW-Authenticate: Bearer resource_metadata="...", scope="..."` |
//! | a token the [`AuthServer`] did not issue, revoked, expired, or for another audience | `401`, the challenge with `error="invalid_token"` |
//! | a token without [`ProtectedConfig::required_scopes`] | `403`, `error="insufficient_scope", scope="<the required scopes>"` |
//! | `tools/call` of a tool with [`ProtectedConfig::tool_scope`] the token lacks | `403`, `error="insufficient_scope", scope="<required + the tool's>"` |
//! | `tools/call` of [`ADMIN_TOOL`] (with [`ProtectedConfig::admin_tool`] on) | `200` JSON result, its text `arguments.text` (answered here, not upstream) |
//! | anything else to `/mcp` with a good token | forwarded upstream without the `Authorization` header; the answer streamed back |
//!
//! [`AuthServer`]: super::AuthServer
#![forbid(unsafe_code)]

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::server::{Inner, Invalid};
use super::{ADMIN_SCOPE, ADMIN_TOOL, AuthServer, Body, DEFAULT_SCOPE, full};
use crate::server::MCP_PATH;

/// Where the protected-resource metadata is served.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetadataLocation {
    /// `/.well-known/oauth-protected-resource/mcp` (RFC 9728 §3.1, the endpoint's path inserted).
    #[default]
    PathInserted,
    /// `/.well-known/oauth-protected-resource` (the root; a client finds it by its fallback).
    Root,
    /// Another path (only a challenge's `resource_metadata` finds it).
    Custom(String),
}

/// How a [`ProtectedServer`] guards its endpoint. Setters take `&mut self` and chain.
#[derive(Clone, Debug)]
pub struct ProtectedConfig {
    required_scopes: Vec<String>,
    tool_scopes: Vec<(String, Vec<String>)>,
    admin_tool: bool,
    scopes_supported: Vec<String>,
    challenge_scope: bool,
    challenge_metadata: bool,
    metadata_location: MetadataLocation,
    require_audience: bool,
    max_request_bytes: usize,
}

impl Default for ProtectedConfig {
    /// Every request needs scope `mcp`; [`ADMIN_TOOL`] (answered by the front) needs `admin` too;
    /// `scopes_supported` `mcp admin`; the challenge names the scope and the metadata, which is
    /// at the path-inserted location; tokens without an audience are accepted; requests up to
    /// 16 MiB.
    fn default() -> Self {
        ProtectedConfig {
            required_scopes: vec![DEFAULT_SCOPE.to_owned()],
            tool_scopes: vec![(ADMIN_TOOL.to_owned(), vec![ADMIN_SCOPE.to_owned()])],
            admin_tool: true,
            scopes_supported: vec![DEFAULT_SCOPE.to_owned(), ADMIN_SCOPE.to_owned()],
            challenge_scope: true,
            challenge_metadata: true,
            metadata_location: MetadataLocation::PathInserted,
            require_audience: false,
            max_request_bytes: 16 << 20,
        }
    }
}

impl ProtectedConfig {
    /// The scopes every request needs (and the `401` challenge names).
    pub fn required_scopes(&mut self, scopes: Vec<String>) -> &mut Self {
        self.required_scopes = scopes;
        self
    }

    /// `tools/call` of `tool` also needs `scope` (repeatable; scopes of one tool add up).
    pub fn tool_scope(&mut self, tool: impl Into<String>, scope: impl Into<String>) -> &mut Self {
        let tool = tool.into();
        let scope = scope.into();
        match self.tool_scopes.iter_mut().find(|(t, _)| *t == tool) {
            Some((_, scopes)) => scopes.push(scope),
            None => self.tool_scopes.push((tool, vec![scope])),
        }
        self
    }

    /// Forgets every [`ProtectedConfig::tool_scope`], [`ADMIN_TOOL`]'s included.
    pub fn clear_tool_scopes(&mut self) -> &mut Self {
        self.tool_scopes.clear();
        self
    }

    /// Answer `tools/call` of [`ADMIN_TOOL`] here (default on); off, it goes upstream like any
    /// other call.
    pub fn admin_tool(&mut self, on: bool) -> &mut Self {
        self.admin_tool = on;
        self
    }

    /// The metadata's `scopes_supported`.
    pub fn scopes_supported(&mut self, scopes: Vec<String>) -> &mut Self {
        self.scopes_supported = scopes;
        self
    }

    /// Name the required scopes in the `401` challenge (`scope="..."`, default on).
    pub fn challenge_scope(&mut self, on: bool) -> &mut Self {
        self.challenge_scope = on;
        self
    }

    /// Name the metadata in the challenges (`resource_metadata="..."`, default on); off, a
    /// client must find it at a well-known location.
    pub fn challenge_metadata(&mut self, on: bool) -> &mut Self {
        self.challenge_metadata = on;
        self
    }

    /// Where the metadata is served ([`MetadataLocation`]).
    pub fn metadata_location(&mut self, location: MetadataLocation) -> &mut Self {
        self.metadata_location = location;
        self
    }

    /// Refuse tokens issued without a `resource` (no audience) as `invalid_token` (default off;
    /// tokens for another resource are always refused).
    pub fn require_audience(&mut self, on: bool) -> &mut Self {
        self.require_audience = on;
        self
    }

    /// Largest request body read (larger: `413`).
    pub fn max_request_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_request_bytes = bytes;
        self
    }
}

/// Counters of a [`ProtectedServer`] (a snapshot, [`ProtectedServer::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProtectedStats {
    /// Requests to the MCP endpoint.
    pub requests: u64,
    /// Of those, without a bearer token (`401`).
    pub missing_token: u64,
    /// Of those, with a token refused (`401 invalid_token`).
    pub invalid_token: u64,
    /// Of those, refused for scope (`403 insufficient_scope`).
    pub insufficient_scope: u64,
    /// Of those, let through (forwarded or answered here).
    pub admitted: u64,
    /// [`ADMIN_TOOL`] calls answered.
    pub admin_calls: u64,
    /// Protected-resource metadata documents served.
    pub metadata_requests: u64,
}

impl ProtectedStats {
    /// The counters as one JSON object, named as the fields.
    pub fn to_json(&self) -> Value {
        json!({
            "requests": self.requests,
            "missing_token": self.missing_token,
            "invalid_token": self.invalid_token,
            "insufficient_scope": self.insufficient_scope,
            "admitted": self.admitted,
            "admin_calls": self.admin_calls,
            "metadata_requests": self.metadata_requests,
        })
    }
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    missing_token: AtomicU64,
    invalid_token: AtomicU64,
    insufficient_scope: AtomicU64,
    admitted: AtomicU64,
    admin_calls: AtomicU64,
    metadata_requests: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

#[derive(Debug)]
struct Front {
    config: ProtectedConfig,
    upstream: SocketAddr,
    resource: String,
    metadata_path: String,
    metadata_url: String,
    auth: Arc<Inner>,
    counters: Counters,
}

/// A running protected endpoint. Dropping it stops it.
#[derive(Debug)]
pub struct ProtectedServer {
    addr: SocketAddr,
    front: Arc<Front>,
    task: JoinHandle<()>,
}

impl Drop for ProtectedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ProtectedServer {
    /// Binds a free `127.0.0.1` port and guards the MCP server at `upstream` with tokens `auth`
    /// issues (its URL is declared to `auth` as a resource).
    pub async fn start(
        upstream: SocketAddr,
        auth: &AuthServer,
        config: ProtectedConfig,
    ) -> io::Result<ProtectedServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let resource = format!("http://{addr}{MCP_PATH}");
        let metadata_path = match &config.metadata_location {
            MetadataLocation::PathInserted => {
                format!("/.well-known/oauth-protected-resource{MCP_PATH}")
            }
            MetadataLocation::Root => "/.well-known/oauth-protected-resource".to_owned(),
            MetadataLocation::Custom(p) if p.starts_with('/') => p.clone(),
            MetadataLocation::Custom(p) => format!("/{p}"),
        };
        auth.add_resource(&resource);
        let front = Arc::new(Front {
            metadata_url: format!("http://{addr}{metadata_path}"),
            config,
            upstream,
            resource,
            metadata_path,
            auth: Arc::clone(auth.inner()),
            counters: Counters::default(),
        });
        let shared = Arc::clone(&front);
        let task = super::spawn_http(listener, move |req| {
            let front = Arc::clone(&shared);
            async move { handle(&front, req).await }
        });
        Ok(ProtectedServer { addr, front, task })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The MCP endpoint, `http://127.0.0.1:<port>/mcp`: also the resource identifier (the
    /// metadata's `resource`, the audience of its tokens).
    pub fn url(&self) -> String {
        self.front.resource.clone()
    }

    /// The protected-resource metadata URL.
    pub fn metadata_url(&self) -> String {
        self.front.metadata_url.clone()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> ProtectedStats {
        let c = &self.front.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ProtectedStats {
            requests: g(&c.requests),
            missing_token: g(&c.missing_token),
            invalid_token: g(&c.invalid_token),
            insufficient_scope: g(&c.insufficient_scope),
            admitted: g(&c.admitted),
            admin_calls: g(&c.admin_calls),
            metadata_requests: g(&c.metadata_requests),
        }
    }

    /// Stops serving (open connections, streams included, are dropped).
    pub async fn shutdown(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

/// A quoted-string for a challenge parameter (RFC 9110 §5.6.4).
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

impl Front {
    /// `Bearer` with `params` first, then `scope` and `resource_metadata` as configured.
    fn challenge(
        &self,
        status: StatusCode,
        params: &[(&str, &str)],
        scope: &[String],
    ) -> Response<Body> {
        let mut parts: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{k}={}", quoted(v)))
            .collect();
        if !scope.is_empty() && (self.config.challenge_scope || status == StatusCode::FORBIDDEN) {
            parts.push(format!("scope={}", quoted(&scope.join(" "))));
        }
        if self.config.challenge_metadata {
            parts.push(format!("resource_metadata={}", quoted(&self.metadata_url)));
        }
        let value = if parts.is_empty() {
            "Bearer".to_owned()
        } else {
            format!("Bearer {}", parts.join(", "))
        };
        let body = json!({
            "error": params.iter().find(|(k, _)| *k == "error").map_or("unauthorized", |(_, v)| *v),
        });
        let mut r = super::json(status, &body);
        if let Ok(v) = HeaderValue::from_str(&value) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        r
    }

    fn metadata(&self) -> Response<Body> {
        bump(&self.counters.metadata_requests);
        super::json(
            StatusCode::OK,
            &json!({
                "resource": self.resource,
                "authorization_servers": [self.auth.issuer()],
                "scopes_supported": self.config.scopes_supported,
                "bearer_methods_supported": ["header"],
                "resource_name": "ssegate-testkit protected MCP server",
            }),
        )
    }
}

async fn handle(front: &Front, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path();
    if path == front.metadata_path {
        return if req.method() == Method::GET {
            front.metadata()
        } else {
            full(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET only\n")
        };
    }
    if path != MCP_PATH {
        return full(StatusCode::NOT_FOUND, "text/plain", "not found\n");
    }
    let c = &front.counters;
    bump(&c.requests);
    let required = &front.config.required_scopes;
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .filter(|t| !t.is_empty());
    let Some(token) = bearer else {
        bump(&c.missing_token);
        return front.challenge(StatusCode::UNAUTHORIZED, &[], required);
    };
    let checked = front
        .auth
        .check_access(token, &front.resource)
        .and_then(|info| {
            if front.config.require_audience && info.resource.is_none() {
                Err(Invalid::Audience)
            } else {
                Ok(info)
            }
        });
    let info = match checked {
        Ok(info) => info,
        Err(why) => {
            bump(&c.invalid_token);
            return front.challenge(
                StatusCode::UNAUTHORIZED,
                &[
                    ("error", "invalid_token"),
                    ("error_description", why.description()),
                ],
                required,
            );
        }
    };
    let lacks = |needed: &[String]| needed.iter().any(|s| !info.scopes.contains(s));
    if lacks(required) {
        bump(&c.insufficient_scope);
        return front.challenge(
            StatusCode::FORBIDDEN,
            &[
                ("error", "insufficient_scope"),
                (
                    "error_description",
                    "the token lacks the scope this server needs",
                ),
            ],
            required,
        );
    }
    let (parts, body) = req.into_parts();
    let Some(body) = super::read_body(body, front.config.max_request_bytes).await else {
        return full(
            StatusCode::PAYLOAD_TOO_LARGE,
            "text/plain",
            "request too large\n",
        );
    };
    let mut admin_call: Option<Value> = None;
    if parts.method == Method::POST {
        let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let messages = match message {
            Value::Array(a) => a,
            other => vec![other],
        };
        for m in &messages {
            if m["method"] != "tools/call" {
                continue;
            }
            let Some(tool) = m["params"]["name"].as_str() else {
                continue;
            };
            if let Some((_, scopes)) = front.config.tool_scopes.iter().find(|(t, _)| t == tool) {
                let mut needed = required.clone();
                needed.extend(scopes.iter().filter(|s| !required.contains(s)).cloned());
                if lacks(&needed) {
                    bump(&c.insufficient_scope);
                    let why = format!("the tool {tool} needs scope {}", scopes.join(" "));
                    return front.challenge(
                        StatusCode::FORBIDDEN,
                        &[("error", "insufficient_scope"), ("error_description", &why)],
                        &needed,
                    );
                }
            }
            if front.config.admin_tool && tool == ADMIN_TOOL && messages.len() == 1 {
                admin_call = Some(m.clone());
            }
        }
    }
    bump(&c.admitted);
    if let Some(call) = admin_call {
        bump(&c.admin_calls);
        let text = call["params"]["arguments"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        return super::json(
            StatusCode::OK,
            &json!({
                "jsonrpc": "2.0",
                "id": call["id"],
                "result": {"content": [{"type": "text", "text": text}], "isError": false},
            }),
        );
    }
    match forward(front.upstream, parts, body).await {
        Ok(r) => r,
        Err(e) => full(
            StatusCode::BAD_GATEWAY,
            "text/plain",
            format!("upstream: {e}\n"),
        ),
    }
}

/// Hop-by-hop headers (RFC 9110 §7.6.1), and the credentials, which are not passed on.
const DROPPED: &[HeaderName] = &[
    header::AUTHORIZATION,
    header::CONNECTION,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Sends the request upstream on a fresh connection; the answer's body is streamed back.
async fn forward(
    upstream: SocketAddr,
    mut parts: http::request::Parts,
    body: Bytes,
) -> Result<Response<Body>, Box<dyn std::error::Error + Send + Sync>> {
    let stream = TcpStream::connect(upstream).await?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    for h in DROPPED {
        parts.headers.remove(h);
    }
    parts.headers.remove("keep-alive");
    let uri = parts
        .uri
        .path_and_query()
        .map_or(MCP_PATH, |p| p.as_str())
        .parse()?;
    parts.uri = uri;
    let req = Request::from_parts(parts, Full::new(body));
    let response = sender.send_request(req).await?;
    let (mut parts, body) = response.into_parts();
    for h in DROPPED {
        parts.headers.remove(h);
    }
    Ok(Response::from_parts(parts, body.boxed()))
}
