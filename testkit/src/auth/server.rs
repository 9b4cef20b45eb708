//! The authorization server.
//!
//! | request | answer |
//! | --- | --- |
//! | `GET /.well-known/oauth-authorization-server{path}` | RFC 8414 metadata (`404` with [`AuthServerConfig::oauth_metadata`] off) |
//! | `GET /.well-known/openid-configuration{path}`, `GET {path}/.well-known/openid-configuration` | the same, as OpenID Connect discovery, with [`AuthServerConfig::oidc_discovery`] on (else `404`) |
//! | `POST {path}/register` | RFC 7591 registration: `201` with `client_id` (and `client_secret` for `client_secret_basic` / `client_secret_post`, the default method when none is asked for); `400` `invalid_redirect_uri` / `invalid_client_metadata`; `404` with [`AuthServerConfig::registration`] off |
//! | `GET {path}/authorize` | `302` to the `redirect_uri` with `code`, `state` and `iss` (as [`IssParameter`] says), or `error` (`access_denied` when denying, `invalid_request`, `invalid_scope`, `invalid_target`, `unsupported_response_type`); `400` (no redirect) for an unknown client or an unregistered `redirect_uri` |
//! | `POST {path}/token` | `authorization_code` (PKCE S256 verified, `redirect_uri` and `client_id` matched, single use), `refresh_token`, `client_credentials`; `400` `invalid_grant` / `invalid_request` / `invalid_scope` / `invalid_target` / `unsupported_grant_type`, `401` `invalid_client` |
//!
//! `{path}` is [`AuthServerConfig::issuer_path`] (empty by default). Client authentication at the
//! token endpoint is strict: a client registered for `client_secret_basic` must use the
//! `Authorization: Basic` header, one registered for `client_secret_post` the form fields, a
//! public client (`none`) neither. Loopback redirect URIs match whatever their port (RFC 8252
//! §7.3); others must match exactly.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use url::Url;

use super::{
    ADMIN_SCOPE, Body, DEFAULT_SCOPE, full, json, pkce_challenge, random_token, scopes_of,
};

/// Largest request body the server reads.
const MAX_BODY: usize = 64 << 10;

/// How a client authenticates at the token endpoint (`token_endpoint_auth_method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenAuthMethod {
    /// A public client: `client_id` in the form, no secret.
    None,
    /// `Authorization: Basic` with the id and the secret.
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the form.
    ClientSecretPost,
}

impl TokenAuthMethod {
    /// The RFC 7591 name.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenAuthMethod::None => "none",
            TokenAuthMethod::ClientSecretBasic => "client_secret_basic",
            TokenAuthMethod::ClientSecretPost => "client_secret_post",
        }
    }

    fn parse(name: &str) -> Option<TokenAuthMethod> {
        match name {
            "none" => Some(TokenAuthMethod::None),
            "client_secret_basic" => Some(TokenAuthMethod::ClientSecretBasic),
            "client_secret_post" => Some(TokenAuthMethod::ClientSecretPost),
            _ => None,
        }
    }
}

/// A client the server knows: pre-registered ([`AuthServerConfig::client`],
/// [`AuthServer::register_client`]) or registered dynamically.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RegisteredClient {
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`, for confidential clients.
    pub client_secret: Option<String>,
    /// The redirect URIs the authorization endpoint accepts.
    pub redirect_uris: Vec<String>,
    /// How it authenticates at the token endpoint.
    pub auth_method: TokenAuthMethod,
}

impl RegisteredClient {
    /// A public client (`token_endpoint_auth_method` `none`).
    pub fn public(client_id: impl Into<String>, redirect_uris: Vec<String>) -> RegisteredClient {
        RegisteredClient {
            client_id: client_id.into(),
            client_secret: None,
            redirect_uris,
            auth_method: TokenAuthMethod::None,
        }
    }

    /// A confidential client authenticating with `secret` by `method` (which should not be
    /// [`TokenAuthMethod::None`]). A machine client (client credentials) needs no redirect URI.
    pub fn confidential(
        client_id: impl Into<String>,
        secret: impl Into<String>,
        method: TokenAuthMethod,
        redirect_uris: Vec<String>,
    ) -> RegisteredClient {
        RegisteredClient {
            client_id: client_id.into(),
            client_secret: Some(secret.into()),
            redirect_uris,
            auth_method: method,
        }
    }
}

/// What the server does with RFC 8707 `resource` parameters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResourcePolicy {
    /// When sent, it must name a resource the server protects (a [`ProtectedServer`]'s URL,
    /// or one added with [`AuthServer::add_resource`]), else `invalid_target`; tokens are bound
    /// to it (their audience). Tokens requested without one have no audience.
    ///
    /// [`ProtectedServer`]: super::ProtectedServer
    #[default]
    Check,
    /// As `Check`, and requests without `resource` are refused (`invalid_target`).
    Require,
    /// Any `resource` is refused with `invalid_target` (servers that predate RFC 8707 and
    /// reject unknown parameters); requests without one succeed.
    Reject,
    /// Not looked at: tokens have no audience.
    Ignore,
}

/// RFC 9207: whether the metadata says `authorization_response_iss_parameter_supported` and what
/// the authorization response's `iss` is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum IssParameter {
    /// Advertised, and the issuer sent in every authorization response.
    #[default]
    Sent,
    /// Neither advertised nor sent.
    NotSupported,
    /// Advertised, but not sent (a client must refuse the response).
    Omitted,
    /// Advertised, and another issuer's identifier sent (a mix-up; a client must refuse).
    Wrong,
}

/// How an [`AuthServer`] behaves. Setters take `&mut self` and chain.
#[derive(Clone, Debug)]
pub struct AuthServerConfig {
    issuer_path: String,
    scopes_supported: Vec<String>,
    default_scopes: Vec<String>,
    access_token_ttl: Duration,
    code_ttl: Duration,
    refresh_tokens: bool,
    rotate_refresh_tokens: bool,
    refresh_token_max_uses: Option<u32>,
    offline_access: bool,
    approve: bool,
    iss: IssParameter,
    code_challenge_methods: Option<Vec<String>>,
    issuer_mismatch: bool,
    resource_policy: ResourcePolicy,
    oauth_metadata: bool,
    oidc_discovery: bool,
    registration: bool,
    client_credentials: bool,
    clients: Vec<RegisteredClient>,
}

impl Default for AuthServerConfig {
    /// Issuer `http://127.0.0.1:<port>`, scopes `mcp` and `admin` (`mcp` granted when none is
    /// asked for), access tokens for an hour, codes for a minute, rotated refresh tokens without a
    /// use limit, approval at once, `iss` sent, `S256` advertised, `resource` checked, RFC 8414
    /// metadata (no OpenID Connect discovery), dynamic registration, client credentials, no
    /// pre-registered client.
    fn default() -> Self {
        AuthServerConfig {
            issuer_path: String::new(),
            scopes_supported: vec![DEFAULT_SCOPE.to_owned(), ADMIN_SCOPE.to_owned()],
            default_scopes: vec![DEFAULT_SCOPE.to_owned()],
            access_token_ttl: Duration::from_secs(3600),
            code_ttl: Duration::from_secs(60),
            refresh_tokens: true,
            rotate_refresh_tokens: true,
            refresh_token_max_uses: None,
            offline_access: false,
            approve: true,
            iss: IssParameter::Sent,
            code_challenge_methods: Some(vec!["S256".to_owned()]),
            issuer_mismatch: false,
            resource_policy: ResourcePolicy::Check,
            oauth_metadata: true,
            oidc_discovery: false,
            registration: true,
            client_credentials: true,
            clients: Vec::new(),
        }
    }
}

impl AuthServerConfig {
    /// A path after the issuer's origin (`/tenant`: issuer `http://127.0.0.1:<port>/tenant`,
    /// metadata at `/.well-known/oauth-authorization-server/tenant`, endpoints under `/tenant`).
    pub fn issuer_path(&mut self, path: impl Into<String>) -> &mut Self {
        let path = path.into();
        let trimmed = path.trim_end_matches('/');
        self.issuer_path = if trimmed.is_empty() || trimmed.starts_with('/') {
            trimmed.to_owned()
        } else {
            format!("/{trimmed}")
        };
        self
    }

    /// `scopes_supported`; a request for any other scope is `invalid_scope`.
    pub fn scopes_supported(&mut self, scopes: Vec<String>) -> &mut Self {
        self.scopes_supported = scopes;
        self
    }

    /// The scopes granted when a request names none.
    pub fn default_scopes(&mut self, scopes: Vec<String>) -> &mut Self {
        self.default_scopes = scopes;
        self
    }

    /// Access token lifetime (`expires_in`); e.g. 2 s for expiry tests.
    pub fn access_token_ttl(&mut self, ttl: Duration) -> &mut Self {
        self.access_token_ttl = ttl;
        self
    }

    /// Authorization code lifetime.
    pub fn code_ttl(&mut self, ttl: Duration) -> &mut Self {
        self.code_ttl = ttl;
        self
    }

    /// Issue refresh tokens (with the authorization code grant; never with client credentials).
    pub fn refresh_tokens(&mut self, on: bool) -> &mut Self {
        self.refresh_tokens = on;
        self
    }

    /// Rotate refresh tokens: each refresh returns a new one and the one used stops working (a
    /// second use is `invalid_grant`). Off: the refresh response has no `refresh_token` and the
    /// same one keeps working.
    pub fn rotate_refresh_tokens(&mut self, on: bool) -> &mut Self {
        self.rotate_refresh_tokens = on;
        self
    }

    /// Refreshes allowed per grant (counted along a rotated chain); the next is `invalid_grant`.
    pub fn refresh_token_max_uses(&mut self, uses: Option<u32>) -> &mut Self {
        self.refresh_token_max_uses = uses;
        self
    }

    /// OpenID Connect style refresh tokens: issued only when the granted scopes include
    /// `offline_access` (which is then in `scopes_supported`).
    pub fn offline_access(&mut self, on: bool) -> &mut Self {
        self.offline_access = on;
        self
    }

    /// Approve every authorization request at once (default), or deny each with
    /// `error=access_denied`. [`AuthServer::set_approve`] flips it on a running server.
    pub fn approve(&mut self, on: bool) -> &mut Self {
        self.approve = on;
        self
    }

    /// RFC 9207 `iss` ([`IssParameter`]).
    pub fn iss(&mut self, iss: IssParameter) -> &mut Self {
        self.iss = iss;
        self
    }

    /// `code_challenge_methods_supported`: `None` leaves it out of the metadata (a server
    /// without PKCE, which a client must refuse); `Some(vec!["plain"])` advertises no `S256`.
    /// The authorization endpoint still accepts and checks `S256` challenges.
    pub fn code_challenge_methods(&mut self, methods: Option<Vec<String>>) -> &mut Self {
        self.code_challenge_methods = methods;
        self
    }

    /// The metadata's `issuer` is not the issuer it was fetched for (`<issuer>/other-issuer`),
    /// which a client must refuse (RFC 8414 §3.3).
    pub fn issuer_mismatch(&mut self, on: bool) -> &mut Self {
        self.issuer_mismatch = on;
        self
    }

    /// What `resource` parameters get ([`ResourcePolicy`]).
    pub fn resource_policy(&mut self, policy: ResourcePolicy) -> &mut Self {
        self.resource_policy = policy;
        self
    }

    /// Serve RFC 8414 metadata (default on); off, with [`AuthServerConfig::oidc_discovery`] on,
    /// a client finds the server through OpenID Connect discovery only.
    pub fn oauth_metadata(&mut self, on: bool) -> &mut Self {
        self.oauth_metadata = on;
        self
    }

    /// Serve OpenID Connect discovery (default off).
    pub fn oidc_discovery(&mut self, on: bool) -> &mut Self {
        self.oidc_discovery = on;
        self
    }

    /// Dynamic registration (default on; off: no `registration_endpoint`, `404`).
    pub fn registration(&mut self, on: bool) -> &mut Self {
        self.registration = on;
        self
    }

    /// The client credentials grant (default on).
    pub fn client_credentials(&mut self, on: bool) -> &mut Self {
        self.client_credentials = on;
        self
    }

    /// A pre-registered client.
    pub fn client(&mut self, client: RegisteredClient) -> &mut Self {
        self.clients.push(client);
        self
    }

    /// Binds a free `127.0.0.1` port and serves (see [`AuthServer::start`]).
    pub async fn start(&self) -> io::Result<AuthServer> {
        AuthServer::start(self.clone()).await
    }
}

/// Counters of an [`AuthServer`] (a snapshot, [`AuthServer::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuthStats {
    /// Metadata documents served (RFC 8414 and OpenID Connect).
    pub metadata_requests: u64,
    /// Registrations made.
    pub registrations: u64,
    /// Registration requests refused.
    pub registrations_refused: u64,
    /// Requests to the authorization endpoint (each visit of the "browser").
    pub authorizations: u64,
    /// Of those, denied (`access_denied`) or refused with an error.
    pub authorizations_refused: u64,
    /// Token requests, any grant.
    pub token_requests: u64,
    /// Token requests with `grant_type=authorization_code`.
    pub code_grants: u64,
    /// Token requests with `grant_type=refresh_token`.
    pub refresh_grants: u64,
    /// Token requests with `grant_type=client_credentials`.
    pub client_credentials_grants: u64,
    /// Token requests refused (any error).
    pub token_errors: u64,
    /// Refresh requests refused (`invalid_grant` and every other error).
    pub refreshes_rejected: u64,
    /// Access tokens issued.
    pub access_tokens_issued: u64,
    /// Access tokens a protected server accepted.
    pub tokens_accepted: u64,
    /// Access tokens a protected server rejected (unknown, expired, revoked, another audience).
    pub tokens_rejected: u64,
}

impl AuthStats {
    /// The counters as one JSON object, named as the fields.
    pub fn to_json(&self) -> Value {
        json!({
            "metadata_requests": self.metadata_requests,
            "registrations": self.registrations,
            "registrations_refused": self.registrations_refused,
            "authorizations": self.authorizations,
            "authorizations_refused": self.authorizations_refused,
            "token_requests": self.token_requests,
            "code_grants": self.code_grants,
            "refresh_grants": self.refresh_grants,
            "client_credentials_grants": self.client_credentials_grants,
            "token_errors": self.token_errors,
            "refreshes_rejected": self.refreshes_rejected,
            "access_tokens_issued": self.access_tokens_issued,
            "tokens_accepted": self.tokens_accepted,
            "tokens_rejected": self.tokens_rejected,
        })
    }
}

#[derive(Debug, Default)]
struct Counters {
    metadata_requests: AtomicU64,
    registrations: AtomicU64,
    registrations_refused: AtomicU64,
    authorizations: AtomicU64,
    authorizations_refused: AtomicU64,
    token_requests: AtomicU64,
    code_grants: AtomicU64,
    refresh_grants: AtomicU64,
    client_credentials_grants: AtomicU64,
    token_errors: AtomicU64,
    refreshes_rejected: AtomicU64,
    access_tokens_issued: AtomicU64,
    tokens_accepted: AtomicU64,
    tokens_rejected: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// What [`AuthServer::issue_token`] and the token endpoint issue.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct IssuedToken {
    /// The bearer token.
    pub access_token: String,
    /// The refresh token, when one is issued.
    pub refresh_token: Option<String>,
    /// The access token's lifetime.
    pub expires_in: Duration,
    /// The granted scopes.
    pub scopes: Vec<String>,
}

/// What the server knows about a live access token ([`AuthServer::introspect`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TokenInfo {
    /// The client it was issued to.
    pub client_id: String,
    /// Its scopes.
    pub scopes: Vec<String>,
    /// Its audience (the `resource` it was issued for), if any.
    pub resource: Option<String>,
    /// Time left.
    pub expires_in: Duration,
}

/// Why a protected server refuses an access token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Invalid {
    Unknown,
    Expired,
    Audience,
}

impl Invalid {
    pub(crate) fn description(self) -> &'static str {
        match self {
            Invalid::Unknown => "the access token is not one this server issued, or was revoked",
            Invalid::Expired => "the access token expired",
            Invalid::Audience => "the access token was issued for another resource",
        }
    }
}

#[derive(Debug)]
struct Code {
    client_id: String,
    redirect_uri: Option<String>,
    challenge: Option<String>,
    scopes: Vec<String>,
    resource: Option<String>,
    expires: Instant,
}

#[derive(Debug)]
struct Access {
    client_id: String,
    scopes: Vec<String>,
    resource: Option<String>,
    expires: Instant,
}

#[derive(Debug)]
struct Refresh {
    client_id: String,
    scopes: Vec<String>,
    resource: Option<String>,
    /// Refreshes made along this grant's chain.
    uses: u32,
}

#[derive(Debug, Default)]
struct State {
    clients: HashMap<String, RegisteredClient>,
    resources: Vec<String>,
    codes: HashMap<String, Code>,
    access: HashMap<String, Access>,
    refresh: HashMap<String, Refresh>,
    authorization_requests: Vec<BTreeMap<String, String>>,
    token_requests: Vec<BTreeMap<String, String>>,
    registration_requests: Vec<Value>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    config: AuthServerConfig,
    issuer: String,
    origin: String,
    state: Mutex<State>,
    counters: Counters,
    approve: AtomicBool,
    reject_refresh: AtomicBool,
    access_ttl_ms: AtomicU64,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update is complete before the lock is released.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn issuer(&self) -> &str {
        &self.issuer
    }

    pub(crate) fn add_resource(&self, resource: &str) {
        let mut state = self.lock();
        if !state.resources.iter().any(|r| r == resource) {
            state.resources.push(resource.to_owned());
        }
    }

    /// Checks an access token for `resource` (a protected server's call).
    pub(crate) fn check_access(&self, token: &str, resource: &str) -> Result<TokenInfo, Invalid> {
        let now = Instant::now();
        let result = {
            let state = self.lock();
            match state.access.get(token) {
                None => Err(Invalid::Unknown),
                Some(a) if now >= a.expires => Err(Invalid::Expired),
                Some(a) if a.resource.as_deref().is_some_and(|r| r != resource) => {
                    Err(Invalid::Audience)
                }
                Some(a) => Ok(TokenInfo {
                    client_id: a.client_id.clone(),
                    scopes: a.scopes.clone(),
                    resource: a.resource.clone(),
                    expires_in: a.expires - now,
                }),
            }
        };
        bump(match result {
            Ok(_) => &self.counters.tokens_accepted,
            Err(_) => &self.counters.tokens_rejected,
        });
        result
    }

    fn access_ttl(&self) -> Duration {
        Duration::from_millis(self.access_ttl_ms.load(Ordering::Relaxed))
    }

    /// Issues an access token (and a refresh token when `refresh` says so).
    fn issue(
        &self,
        state: &mut State,
        client_id: &str,
        scopes: Vec<String>,
        resource: Option<String>,
        refresh: Option<u32>,
    ) -> IssuedToken {
        let ttl = self.access_ttl();
        let access_token = random_token("at-");
        state.access.insert(
            access_token.clone(),
            Access {
                client_id: client_id.to_owned(),
                scopes: scopes.clone(),
                resource: resource.clone(),
                expires: Instant::now() + ttl,
            },
        );
        bump(&self.counters.access_tokens_issued);
        let wants_refresh = self.config.refresh_tokens
            && (!self.config.offline_access || scopes.iter().any(|s| s == "offline_access"));
        let refresh_token = match refresh {
            Some(uses) if wants_refresh => {
                let token = random_token("rt-");
                state.refresh.insert(
                    token.clone(),
                    Refresh {
                        client_id: client_id.to_owned(),
                        scopes: scopes.clone(),
                        resource,
                        uses,
                    },
                );
                Some(token)
            }
            _ => None,
        };
        IssuedToken {
            access_token,
            refresh_token,
            expires_in: ttl,
            scopes,
        }
    }

    fn scopes_supported(&self) -> Vec<String> {
        let mut scopes = self.config.scopes_supported.clone();
        if self.config.offline_access && !scopes.iter().any(|s| s == "offline_access") {
            scopes.push("offline_access".to_owned());
        }
        scopes
    }

    /// The scopes a request's `scope` grants: the default when absent, `invalid_scope` when any
    /// is not supported.
    fn grant_scopes(&self, requested: Option<&str>) -> Result<Vec<String>, OAuthError> {
        let requested = requested.map(scopes_of).unwrap_or_default();
        if requested.is_empty() {
            return Ok(self.config.default_scopes.clone());
        }
        let supported = self.scopes_supported();
        match requested.iter().find(|s| !supported.contains(s)) {
            Some(bad) => Err(OAuthError::new(
                "invalid_scope",
                format!("scope {bad:?} is not supported"),
            )),
            None => Ok(requested),
        }
    }

    /// The audience a request's `resource` parameters give, as the [`ResourcePolicy`] says.
    fn audience(&self, resources: &[&str]) -> Result<Option<String>, OAuthError> {
        let invalid = |why: String| OAuthError::new("invalid_target", why);
        let policy = self.config.resource_policy;
        if policy == ResourcePolicy::Ignore {
            return Ok(None);
        }
        let resource = match resources {
            [] if policy == ResourcePolicy::Require => {
                return Err(invalid("a resource parameter is required".into()));
            }
            [] => return Ok(None),
            [_] if policy == ResourcePolicy::Reject => {
                return Err(invalid("resource parameters are not supported".into()));
            }
            [one] => *one,
            _ => return Err(invalid("one resource per request".into())),
        };
        match Url::parse(resource) {
            Ok(u) if u.fragment().is_none() => {}
            _ => {
                return Err(invalid(format!(
                    "resource {resource:?} is not an absolute URI without a fragment"
                )));
            }
        }
        if !self.lock().resources.iter().any(|r| r == resource) {
            return Err(invalid(format!(
                "{resource} is not a resource of this server"
            )));
        }
        Ok(Some(resource.to_owned()))
    }

    fn metadata(&self, oidc: bool) -> Value {
        let issuer = if self.config.issuer_mismatch {
            format!("{}/other-issuer", self.issuer)
        } else {
            self.issuer.clone()
        };
        let mut auth_methods = vec!["none", "client_secret_basic", "client_secret_post"];
        if !self.config.registration && self.config.clients.is_empty() {
            auth_methods.truncate(1);
        }
        let mut grants = vec!["authorization_code", "refresh_token"];
        if self.config.client_credentials {
            grants.push("client_credentials");
        }
        let mut m = json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{}/authorize", self.issuer),
            "token_endpoint": format!("{}/token", self.issuer),
            "scopes_supported": self.scopes_supported(),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": grants,
            "token_endpoint_auth_methods_supported": auth_methods,
        });
        if self.config.registration {
            m["registration_endpoint"] = json!(format!("{}/register", self.issuer));
        }
        if let Some(methods) = &self.config.code_challenge_methods {
            m["code_challenge_methods_supported"] = json!(methods);
        }
        if self.config.iss != IssParameter::NotSupported {
            m["authorization_response_iss_parameter_supported"] = json!(true);
        }
        if oidc {
            m["subject_types_supported"] = json!(["public"]);
            m["id_token_signing_alg_values_supported"] = json!(["RS256"]);
            m["jwks_uri"] = json!(format!("{}/jwks", self.issuer));
        }
        m
    }
}

/// An OAuth error response: `error`, `error_description`, the status (`400` unless set), and
/// whether to challenge for `Basic` credentials (a failed `Authorization: Basic`).
#[derive(Debug)]
struct OAuthError {
    error: &'static str,
    description: String,
    status: StatusCode,
    basic: bool,
}

impl OAuthError {
    fn new(error: &'static str, description: impl Into<String>) -> OAuthError {
        OAuthError {
            error,
            description: description.into(),
            status: StatusCode::BAD_REQUEST,
            basic: false,
        }
    }

    fn response(&self) -> Response<Body> {
        let mut r = json(
            self.status,
            &json!({"error": self.error, "error_description": self.description}),
        );
        if self.basic {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"ssegate-testkit\""),
            );
        }
        r
    }
}

/// A running authorization server. Dropping it stops it.
#[derive(Debug)]
pub struct AuthServer {
    addr: SocketAddr,
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl AuthServer {
    /// Binds a free `127.0.0.1` port and serves `config`.
    pub async fn start(config: AuthServerConfig) -> io::Result<AuthServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let origin = format!("http://{addr}");
        let issuer = format!("{origin}{}", config.issuer_path);
        let mut state = State::default();
        for c in &config.clients {
            state.clients.insert(c.client_id.clone(), c.clone());
        }
        let inner = Arc::new(Inner {
            approve: AtomicBool::new(config.approve),
            reject_refresh: AtomicBool::new(false),
            access_ttl_ms: AtomicU64::new(
                u64::try_from(config.access_token_ttl.as_millis()).unwrap_or(u64::MAX),
            ),
            config,
            issuer,
            origin,
            state: Mutex::new(state),
            counters: Counters::default(),
        });
        let shared = Arc::clone(&inner);
        let task = super::spawn_http(listener, move |req| {
            let inner = Arc::clone(&shared);
            async move { handle(&inner, req).await }
        });
        Ok(AuthServer { addr, inner, task })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The issuer identifier, `http://127.0.0.1:<port>[/path]` (what protected-resource
    /// metadata names, and `iss` carries).
    pub fn issuer(&self) -> &str {
        &self.inner.issuer
    }

    /// The RFC 8414 metadata URL.
    pub fn metadata_url(&self) -> String {
        format!(
            "{}/.well-known/oauth-authorization-server{}",
            self.inner.origin, self.inner.config.issuer_path
        )
    }

    /// `<issuer>/authorize`.
    pub fn authorization_endpoint(&self) -> String {
        format!("{}/authorize", self.inner.issuer)
    }

    /// `<issuer>/token`.
    pub fn token_endpoint(&self) -> String {
        format!("{}/token", self.inner.issuer)
    }

    /// `<issuer>/register`.
    pub fn registration_endpoint(&self) -> String {
        format!("{}/register", self.inner.issuer)
    }

    /// The configuration it runs with (the switches below are not reflected).
    pub fn config(&self) -> &AuthServerConfig {
        &self.inner.config
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> AuthStats {
        let c = &self.inner.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        AuthStats {
            metadata_requests: g(&c.metadata_requests),
            registrations: g(&c.registrations),
            registrations_refused: g(&c.registrations_refused),
            authorizations: g(&c.authorizations),
            authorizations_refused: g(&c.authorizations_refused),
            token_requests: g(&c.token_requests),
            code_grants: g(&c.code_grants),
            refresh_grants: g(&c.refresh_grants),
            client_credentials_grants: g(&c.client_credentials_grants),
            token_errors: g(&c.token_errors),
            refreshes_rejected: g(&c.refreshes_rejected),
            access_tokens_issued: g(&c.access_tokens_issued),
            tokens_accepted: g(&c.tokens_accepted),
            tokens_rejected: g(&c.tokens_rejected),
        }
    }

    /// From now on approve (`true`) or deny (`false`, `error=access_denied`) authorizations.
    pub fn set_approve(&self, on: bool) {
        self.inner.approve.store(on, Ordering::Relaxed);
    }

    /// From now on refuse (`true`) every refresh with `invalid_grant` (a revoked grant), or
    /// accept them again (`false`).
    pub fn set_refresh_rejected(&self, on: bool) {
        self.inner.reject_refresh.store(on, Ordering::Relaxed);
    }

    /// The lifetime of access tokens issued from now on.
    pub fn set_access_token_ttl(&self, ttl: Duration) {
        self.inner.access_ttl_ms.store(
            u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Expires every access token issued so far (refresh tokens keep working). Returns how many.
    pub fn expire_access_tokens(&self) -> usize {
        let now = Instant::now();
        let mut state = self.inner.lock();
        let mut n = 0;
        for a in state.access.values_mut() {
            if a.expires > now {
                a.expires = now;
                n += 1;
            }
        }
        n
    }

    /// Revokes every access and refresh token issued so far. Returns how many.
    pub fn revoke_all(&self) -> usize {
        let mut state = self.inner.lock();
        let n = state.access.len() + state.refresh.len();
        state.access.clear();
        state.refresh.clear();
        n
    }

    /// Adds a client at run time (pre-registered, as with [`AuthServerConfig::client`]).
    pub fn register_client(&self, client: RegisteredClient) {
        self.inner
            .lock()
            .clients
            .insert(client.client_id.clone(), client);
    }

    /// The client registered as `client_id` (dynamically or not).
    pub fn client(&self, client_id: &str) -> Option<RegisteredClient> {
        self.inner.lock().clients.get(client_id).cloned()
    }

    /// Declares a resource this server issues tokens for (a [`ProtectedServer`] declares its
    /// own URL when it starts).
    ///
    /// [`ProtectedServer`]: super::ProtectedServer
    pub fn add_resource(&self, resource: &str) {
        self.inner.add_resource(resource);
    }

    /// Issues tokens directly, without a flow (for tests that need a token, not a sign-in): an
    /// access token for `client_id` with `scopes` and audience `resource`, and a refresh token
    /// when the configuration issues them.
    pub fn issue_token(
        &self,
        client_id: &str,
        scopes: &[&str],
        resource: Option<&str>,
    ) -> IssuedToken {
        let mut state = self.inner.lock();
        self.inner.issue(
            &mut state,
            client_id,
            scopes.iter().map(|s| (*s).to_owned()).collect(),
            resource.map(str::to_owned),
            Some(0),
        )
    }

    /// The live access token `token`, if any (without counting it as accepted or rejected).
    pub fn introspect(&self, token: &str) -> Option<TokenInfo> {
        let now = Instant::now();
        let state = self.inner.lock();
        let a = state.access.get(token).filter(|a| a.expires > now)?;
        Some(TokenInfo {
            client_id: a.client_id.clone(),
            scopes: a.scopes.clone(),
            resource: a.resource.clone(),
            expires_in: a.expires - now,
        })
    }

    /// Every authorization request's query parameters, in order (a parameter sent twice keeps
    /// its last value).
    pub fn authorization_requests(&self) -> Vec<BTreeMap<String, String>> {
        self.inner.lock().authorization_requests.clone()
    }

    /// Every token request's form parameters, in order (`client_secret` and the `Authorization`
    /// header are not kept; `client_auth` is added: `none`, `basic` or `post`).
    pub fn token_requests(&self) -> Vec<BTreeMap<String, String>> {
        self.inner.lock().token_requests.clone()
    }

    /// Every registration request's JSON body, in order.
    pub fn registration_requests(&self) -> Vec<Value> {
        self.inner.lock().registration_requests.clone()
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// Stops serving (open connections are dropped).
    pub async fn shutdown(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl fmt::Display for AuthServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.inner.issuer)
    }
}

async fn handle(inner: &Inner, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_owned();
    let p = inner.config.issuer_path.as_str();
    let oauth_meta = format!("/.well-known/oauth-authorization-server{p}");
    let oidc_meta = [
        format!("/.well-known/openid-configuration{p}"),
        format!("{p}/.well-known/openid-configuration"),
    ];
    let method = req.method().clone();
    if method == Method::GET && path == oauth_meta && inner.config.oauth_metadata {
        bump(&inner.counters.metadata_requests);
        return json(StatusCode::OK, &inner.metadata(false));
    }
    if method == Method::GET && oidc_meta.contains(&path) && inner.config.oidc_discovery {
        bump(&inner.counters.metadata_requests);
        return json(StatusCode::OK, &inner.metadata(true));
    }
    let Some(endpoint) = path.strip_prefix(p) else {
        return not_found();
    };
    match (endpoint, &method) {
        ("/authorize", &Method::GET) => authorize(inner, req.uri().query().unwrap_or("")),
        ("/token", &Method::POST) => {
            let headers = req.headers().clone();
            match super::read_body(req.into_body(), MAX_BODY).await {
                Some(body) => token(inner, &headers, &body),
                None => {
                    OAuthError::new("invalid_request", "unreadable or too large a body").response()
                }
            }
        }
        ("/register", &Method::POST) if inner.config.registration => {
            match super::read_body(req.into_body(), MAX_BODY).await {
                Some(body) => register(inner, &body),
                None => OAuthError::new("invalid_client_metadata", "unreadable body").response(),
            }
        }
        ("/authorize" | "/token", _) => full(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "method not allowed\n",
        ),
        _ => not_found(),
    }
}

fn not_found() -> Response<Body> {
    full(StatusCode::NOT_FOUND, "text/plain", "not found\n")
}

/// Form or query parameters, in order.
type Params = Vec<(String, String)>;

fn parse_params(text: &[u8]) -> Params {
    url::form_urlencoded::parse(text).into_owned().collect()
}

/// The single value of `name`; `Err` when it is repeated (RFC 6749 §3.1, §3.2).
fn one<'a>(params: &'a Params, name: &str) -> Result<Option<&'a str>, OAuthError> {
    let mut values = params.iter().filter(|(k, _)| k == name);
    let first = values.next().map(|(_, v)| v.as_str());
    if values.next().is_some() {
        return Err(OAuthError::new(
            "invalid_request",
            format!("{name} is repeated"),
        ));
    }
    Ok(first.filter(|v| !v.is_empty()))
}

fn all<'a>(params: &'a Params, name: &str) -> Vec<&'a str> {
    params
        .iter()
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

fn record(params: &Params, skip: &[&str]) -> BTreeMap<String, String> {
    params
        .iter()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .cloned()
        .collect()
}

fn is_loopback(u: &Url) -> bool {
    matches!(u.host_str(), Some("127.0.0.1" | "[::1]" | "localhost"))
}

/// Whether `sent` matches the registered `registered`: exactly, or for loopback `http` URIs
/// whatever the port (RFC 8252 §7.3).
fn redirect_matches(registered: &str, sent: &str) -> bool {
    if registered == sent {
        return true;
    }
    let (Ok(r), Ok(s)) = (Url::parse(registered), Url::parse(sent)) else {
        return false;
    };
    r.scheme() == "http"
        && s.scheme() == "http"
        && is_loopback(&r)
        && r.host_str() == s.host_str()
        && r.path() == s.path()
        && r.query() == s.query()
}

/// `uri` with `params` added to its query.
fn redirect_to(uri: &str, params: &[(&str, &str)]) -> Response<Body> {
    let mut url = match Url::parse(uri) {
        Ok(u) => u,
        Err(_) => return full(StatusCode::BAD_REQUEST, "text/plain", "bad redirect_uri\n"),
    };
    {
        let mut q = url.query_pairs_mut();
        for (k, v) in params {
            q.append_pair(k, v);
        }
    }
    let mut r = full(StatusCode::FOUND, "text/plain", "");
    match HeaderValue::from_str(url.as_str()) {
        Ok(v) => {
            r.headers_mut().insert(header::LOCATION, v);
            r
        }
        Err(_) => full(StatusCode::BAD_REQUEST, "text/plain", "bad redirect_uri\n"),
    }
}

fn authorize(inner: &Inner, query: &str) -> Response<Body> {
    bump(&inner.counters.authorizations);
    let params = parse_params(query.as_bytes());
    inner
        .lock()
        .authorization_requests
        .push(record(&params, &[]));
    let refused = || bump(&inner.counters.authorizations_refused);
    let page = |why: String| {
        refused();
        full(StatusCode::BAD_REQUEST, "text/plain", format!("{why}\n"))
    };
    // Errors before the redirect URI is known are shown, never redirected (RFC 6749 §4.1.2.1).
    let (client_id, sent_redirect) = match (one(&params, "client_id"), one(&params, "redirect_uri"))
    {
        (Ok(Some(c)), Ok(r)) => (c, r),
        (Ok(None), _) => return page("client_id is missing".into()),
        (Err(e), _) | (_, Err(e)) => return page(e.description),
    };
    let Some(client) = inner.lock().clients.get(client_id).cloned() else {
        return page(format!("unknown client_id {client_id:?}"));
    };
    let redirect_uri = match sent_redirect {
        Some(sent) => {
            if !client
                .redirect_uris
                .iter()
                .any(|r| redirect_matches(r, sent))
            {
                return page(format!("redirect_uri {sent:?} is not registered"));
            }
            sent.to_owned()
        }
        None => match client.redirect_uris.as_slice() {
            [only] => only.clone(),
            _ => return page("redirect_uri is missing".into()),
        },
    };
    let state = one(&params, "state").ok().flatten();
    let iss = match inner.config.iss {
        IssParameter::Sent => Some(inner.issuer.clone()),
        IssParameter::Wrong => Some(format!("{}/wrong-issuer", inner.origin)),
        IssParameter::NotSupported | IssParameter::Omitted => None,
    };
    let answer = |extra: &[(&str, &str)]| {
        let mut all: Vec<(&str, &str)> = extra.to_vec();
        if let Some(s) = state {
            all.push(("state", s));
        }
        if let Some(i) = &iss {
            all.push(("iss", i));
        }
        redirect_to(&redirect_uri, &all)
    };
    let error = |e: OAuthError| {
        refused();
        answer(&[("error", e.error), ("error_description", &e.description)])
    };
    let checked = (|| {
        match one(&params, "response_type")? {
            Some("code") => {}
            other => {
                return Err(OAuthError::new(
                    "unsupported_response_type",
                    format!("response_type {other:?}: only code"),
                ));
            }
        }
        let challenge = match (
            one(&params, "code_challenge")?,
            one(&params, "code_challenge_method")?,
        ) {
            (Some(c), Some("S256")) => {
                if c.len() != 43 {
                    return Err(OAuthError::new(
                        "invalid_request",
                        "an S256 code_challenge is 43 characters",
                    ));
                }
                c.to_owned()
            }
            (Some(_), None | Some("plain")) => {
                return Err(OAuthError::new(
                    "invalid_request",
                    "code_challenge_method must be S256",
                ));
            }
            (Some(_), Some(m)) => {
                return Err(OAuthError::new(
                    "invalid_request",
                    format!("unknown code_challenge_method {m:?}"),
                ));
            }
            (None, _) => {
                return Err(OAuthError::new(
                    "invalid_request",
                    "code_challenge is required (PKCE)",
                ));
            }
        };
        let scopes = inner.grant_scopes(one(&params, "scope")?)?;
        let resource = inner.audience(&all(&params, "resource"))?;
        Ok((challenge, scopes, resource))
    })();
    let (challenge, scopes, resource) = match checked {
        Ok(v) => v,
        Err(e) => return error(e),
    };
    if !inner.approve.load(Ordering::Relaxed) {
        return error(OAuthError::new(
            "access_denied",
            "the user denied the request",
        ));
    }
    let code = random_token("code-");
    inner.lock().codes.insert(
        code.clone(),
        Code {
            client_id: client_id.to_owned(),
            redirect_uri: sent_redirect.map(str::to_owned),
            challenge: Some(challenge),
            scopes,
            resource,
            expires: Instant::now() + inner.config.code_ttl,
        },
    );
    answer(&[("code", &code)])
}

/// Standard base64 (with or without padding) decoding, for `Authorization: Basic`.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        if chunk.len() == 1 {
            return None;
        }
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= value(c)? << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    Some(out)
}

/// The client a token request authenticates as.
fn authenticate(
    inner: &Inner,
    headers: &HeaderMap,
    params: &Params,
) -> Result<(RegisteredClient, &'static str), OAuthError> {
    let invalid = |why: String, basic: bool| OAuthError {
        status: StatusCode::UNAUTHORIZED,
        basic,
        ..OAuthError::new("invalid_client", why)
    };
    let form_id = one(params, "client_id")?;
    let form_secret = one(params, "client_secret")?;
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("basic").then(|| rest.trim())
        });
    let lookup = |id: &str| inner.lock().clients.get(id).cloned();
    let secret_ok = |c: &RegisteredClient, s: &str| c.client_secret.as_deref() == Some(s);
    if let Some(b64) = basic {
        if form_secret.is_some() {
            return Err(OAuthError::new(
                "invalid_request",
                "more than one client authentication method",
            ));
        }
        let decoded = base64_decode(b64)
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| invalid("malformed Basic credentials".into(), true))?;
        let (id, secret) = decoded
            .split_once(':')
            .ok_or_else(|| invalid("malformed Basic credentials".into(), true))?;
        // RFC 6749 §2.3.1: both are form-urlencoded before they are joined.
        let decode = |s: &str| {
            url::form_urlencoded::parse(format!("x={s}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        let (id, secret) = (decode(id), decode(secret));
        if form_id.is_some_and(|f| f != id) {
            return Err(invalid(
                "client_id differs from the Basic credentials".into(),
                true,
            ));
        }
        let client = lookup(&id).ok_or_else(|| invalid(format!("unknown client {id:?}"), true))?;
        if client.auth_method != TokenAuthMethod::ClientSecretBasic {
            return Err(invalid(
                format!(
                    "client {id:?} is registered for {}, not client_secret_basic",
                    client.auth_method.as_str()
                ),
                true,
            ));
        }
        if !secret_ok(&client, &secret) {
            return Err(invalid("wrong client secret".into(), true));
        }
        return Ok((client, "basic"));
    }
    let id = form_id.ok_or_else(|| invalid("no client authentication".into(), false))?;
    let client = lookup(id).ok_or_else(|| invalid(format!("unknown client {id:?}"), false))?;
    match (form_secret, client.auth_method) {
        (Some(s), TokenAuthMethod::ClientSecretPost) if secret_ok(&client, s) => {
            Ok((client, "post"))
        }
        (Some(_), TokenAuthMethod::ClientSecretPost) => {
            Err(invalid("wrong client secret".into(), false))
        }
        (None, TokenAuthMethod::None) => Ok((client, "none")),
        (_, method) => Err(invalid(
            format!(
                "client {id:?} is registered for {}: authenticate with it",
                method.as_str()
            ),
            false,
        )),
    }
}

fn token(inner: &Inner, headers: &HeaderMap, body: &[u8]) -> Response<Body> {
    let c = &inner.counters;
    bump(&c.token_requests);
    let params = parse_params(body);
    let grant = one(&params, "grant_type").ok().flatten().unwrap_or("");
    match grant {
        "authorization_code" => bump(&c.code_grants),
        "refresh_token" => bump(&c.refresh_grants),
        "client_credentials" => bump(&c.client_credentials_grants),
        _ => {}
    }
    let authenticated = authenticate(inner, headers, &params);
    let mut recorded = record(&params, &["client_secret"]);
    if let Ok((_, how)) = &authenticated {
        recorded.insert("client_auth".into(), (*how).into());
    }
    inner.lock().token_requests.push(recorded);
    let result = match authenticated {
        Err(r) => Err(r),
        Ok((client, _)) => match grant {
            "authorization_code" => code_grant(inner, &client, &params),
            "refresh_token" => refresh_grant(inner, &client, &params),
            "client_credentials" if inner.config.client_credentials => {
                credentials_grant(inner, &client, &params)
            }
            other => Err(OAuthError::new(
                "unsupported_grant_type",
                format!("grant_type {other:?} is not supported"),
            )),
        },
    };
    match result {
        Ok(issued) => {
            let mut body = json!({
                "access_token": issued.access_token,
                "token_type": "Bearer",
                "expires_in": issued.expires_in.as_secs().max(1),
                "scope": issued.scopes.join(" "),
            });
            if let Some(r) = issued.refresh_token {
                body["refresh_token"] = json!(r);
            }
            let mut r = json(StatusCode::OK, &body);
            r.headers_mut()
                .insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
            r
        }
        Err(e) => {
            bump(&c.token_errors);
            if grant == "refresh_token" {
                bump(&c.refreshes_rejected);
            }
            e.response()
        }
    }
}

type Grant = Result<IssuedToken, OAuthError>;

fn code_grant(inner: &Inner, client: &RegisteredClient, params: &Params) -> Grant {
    let code = one(params, "code")?
        .ok_or_else(|| OAuthError::new("invalid_request", "code is missing"))?;
    let verifier = one(params, "code_verifier")?;
    let redirect_uri = one(params, "redirect_uri")?;
    let resources = all(params, "resource");
    // Consumed whatever happens next: a code is good for one try.
    let Some(grant) = inner.lock().codes.remove(code) else {
        return Err(OAuthError::new(
            "invalid_grant",
            "unknown, used or expired code",
        ));
    };
    let invalid_grant = |why: &str| Err(OAuthError::new("invalid_grant", why));
    if Instant::now() >= grant.expires {
        return invalid_grant("the code expired");
    }
    if grant.client_id != client.client_id {
        return invalid_grant("the code was issued to another client");
    }
    if grant.redirect_uri.is_some() && grant.redirect_uri.as_deref() != redirect_uri {
        return invalid_grant("redirect_uri differs from the authorization request's");
    }
    if let Some(challenge) = &grant.challenge {
        let Some(verifier) = verifier else {
            return invalid_grant("code_verifier is missing");
        };
        let well_formed = (43..=128).contains(&verifier.len())
            && verifier
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
        if !well_formed || pkce_challenge(verifier) != *challenge {
            return invalid_grant("code_verifier does not match the code_challenge");
        }
    }
    let resource =
        if resources.is_empty() && inner.config.resource_policy != ResourcePolicy::Require {
            grant.resource
        } else {
            let asked = inner.audience(&resources)?;
            if grant.resource.is_some() && asked != grant.resource {
                return Err(OAuthError::new(
                    "invalid_target",
                    "resource differs from the authorization request's",
                ));
            }
            asked
        };
    let mut state = inner.lock();
    Ok(inner.issue(
        &mut state,
        &client.client_id,
        grant.scopes,
        resource,
        Some(0),
    ))
}

fn refresh_grant(inner: &Inner, client: &RegisteredClient, params: &Params) -> Grant {
    let token = one(params, "refresh_token")?
        .ok_or_else(|| OAuthError::new("invalid_request", "refresh_token is missing"))?;
    let scope = one(params, "scope")?;
    let resources = all(params, "resource");
    let invalid_grant = |why: &str| Err(OAuthError::new("invalid_grant", why));
    if inner.reject_refresh.load(Ordering::Relaxed) {
        return invalid_grant("the grant was revoked");
    }
    let (scopes, resource, uses) = {
        let state = inner.lock();
        let Some(r) = state.refresh.get(token) else {
            return invalid_grant("unknown, used or revoked refresh token");
        };
        if r.client_id != client.client_id {
            return invalid_grant("the refresh token was issued to another client");
        }
        (r.scopes.clone(), r.resource.clone(), r.uses)
    };
    if inner
        .config
        .refresh_token_max_uses
        .is_some_and(|max| uses >= max)
    {
        inner.lock().refresh.remove(token);
        return invalid_grant("the refresh token was used up");
    }
    let scopes = match scope.map(scopes_of) {
        Some(asked) => {
            if let Some(bad) = asked.iter().find(|s| !scopes.contains(s)) {
                return Err(OAuthError::new(
                    "invalid_scope",
                    format!("scope {bad:?} was not granted"),
                ));
            }
            asked
        }
        None => scopes,
    };
    let resource =
        if resources.is_empty() && inner.config.resource_policy != ResourcePolicy::Require {
            resource
        } else {
            let asked = inner.audience(&resources)?;
            if resource.is_some() && asked != resource {
                return Err(OAuthError::new(
                    "invalid_target",
                    "resource differs from the grant's",
                ));
            }
            asked
        };
    let mut state = inner.lock();
    if inner.config.rotate_refresh_tokens {
        if state.refresh.remove(token).is_none() {
            // Used concurrently by another request a moment ago.
            return invalid_grant("unknown, used or revoked refresh token");
        }
        Ok(inner.issue(
            &mut state,
            &client.client_id,
            scopes,
            resource,
            Some(uses + 1),
        ))
    } else {
        match state.refresh.get_mut(token) {
            Some(r) => r.uses += 1,
            None => return invalid_grant("unknown, used or revoked refresh token"),
        }
        Ok(inner.issue(&mut state, &client.client_id, scopes, resource, None))
    }
}

fn credentials_grant(inner: &Inner, client: &RegisteredClient, params: &Params) -> Grant {
    if client.auth_method == TokenAuthMethod::None {
        return Err(OAuthError::new(
            "unauthorized_client",
            "a public client cannot use client_credentials",
        ));
    }
    let scopes = inner.grant_scopes(one(params, "scope")?)?;
    let resource = inner.audience(&all(params, "resource"))?;
    let mut state = inner.lock();
    Ok(inner.issue(&mut state, &client.client_id, scopes, resource, None))
}

fn register(inner: &Inner, body: &[u8]) -> Response<Body> {
    let c = &inner.counters;
    let refuse = |error: &'static str, why: String| {
        bump(&c.registrations_refused);
        OAuthError::new(error, why).response()
    };
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        inner.lock().registration_requests.push(Value::Null);
        return refuse("invalid_client_metadata", "the body is not JSON".into());
    };
    inner.lock().registration_requests.push(request.clone());
    if !request.is_object() {
        return refuse("invalid_client_metadata", "not a JSON object".into());
    }
    let method_name = request["token_endpoint_auth_method"]
        .as_str()
        .unwrap_or("client_secret_basic");
    let Some(method) = TokenAuthMethod::parse(method_name) else {
        return refuse(
            "invalid_client_metadata",
            format!("token_endpoint_auth_method {method_name:?} is not supported"),
        );
    };
    let grant_types: Vec<String> = match &request["grant_types"] {
        Value::Null => vec!["authorization_code".into()],
        Value::Array(a) => a
            .iter()
            .filter_map(|g| g.as_str().map(str::to_owned))
            .collect(),
        _ => {
            return refuse(
                "invalid_client_metadata",
                "grant_types is not a list".into(),
            );
        }
    };
    let redirect_uris: Vec<String> = match &request["redirect_uris"] {
        Value::Null => Vec::new(),
        Value::Array(a) if a.iter().all(Value::is_string) => a
            .iter()
            .filter_map(|u| u.as_str().map(str::to_owned))
            .collect(),
        _ => {
            return refuse(
                "invalid_redirect_uri",
                "redirect_uris is not a list of strings".into(),
            );
        }
    };
    if grant_types.iter().any(|g| g == "authorization_code") && redirect_uris.is_empty() {
        return refuse(
            "invalid_redirect_uri",
            "redirect_uris is required for authorization_code".into(),
        );
    }
    for uri in &redirect_uris {
        let ok = match Url::parse(uri) {
            Ok(u) if u.fragment().is_some() => false,
            Ok(u) if u.scheme() == "http" => is_loopback(&u),
            Ok(_) => true,
            Err(_) => false,
        };
        if !ok {
            return refuse(
                "invalid_redirect_uri",
                format!("{uri:?}: an absolute URI without a fragment, https or http on loopback"),
            );
        }
    }
    let client_id = random_token("client-");
    let secret = (method != TokenAuthMethod::None).then(|| random_token("secret-"));
    let client = RegisteredClient {
        client_id: client_id.clone(),
        client_secret: secret.clone(),
        redirect_uris: redirect_uris.clone(),
        auth_method: method,
    };
    inner.lock().clients.insert(client_id.clone(), client);
    bump(&c.registrations);
    let issued_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // The request's metadata, echoed, with what the server decided (RFC 7591 §3.2.1).
    let mut answer = request;
    answer["client_id"] = json!(client_id);
    answer["client_id_issued_at"] = json!(issued_at);
    answer["token_endpoint_auth_method"] = json!(method.as_str());
    answer["grant_types"] = json!(grant_types);
    answer["redirect_uris"] = json!(redirect_uris);
    if answer["response_types"].is_null() {
        answer["response_types"] = json!(["code"]);
    }
    if let Some(s) = secret {
        answer["client_secret"] = json!(s);
        answer["client_secret_expires_at"] = json!(0);
    }
    json(StatusCode::CREATED, &answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_padded_and_bare() {
        assert_eq!(base64_decode("Zm9vYmFy").unwrap(), b"foobar");
        assert_eq!(base64_decode("Zm9vYg==").unwrap(), b"foob");
        assert_eq!(base64_decode("Zm9vYmE").unwrap(), b"fooba");
        assert!(base64_decode("Z").is_none());
        assert!(base64_decode("Zm9v!").is_none());
    }

    #[test]
    fn loopback_redirects_match_on_any_port() {
        assert!(redirect_matches(
            "http://127.0.0.1/callback",
            "http://127.0.0.1:49152/callback"
        ));
        assert!(redirect_matches(
            "http://127.0.0.1:1/callback",
            "http://127.0.0.1:2/callback"
        ));
        assert!(!redirect_matches(
            "http://127.0.0.1/callback",
            "http://127.0.0.1:2/other"
        ));
        assert!(!redirect_matches(
            "https://app.example/cb",
            "https://app.example:444/cb"
        ));
        assert!(!redirect_matches(
            "http://example.com/cb",
            "http://example.com:81/cb"
        ));
    }
}
