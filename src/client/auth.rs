//! Sign-in: the client side of MCP authorization (OAuth 2.1), feature `auth`.
//!
//! A server that needs a token answers `401` with a `WWW-Authenticate: Bearer` challenge. With
//! [`ClientConfig::auth`](super::ClientConfig::auth) set, the client then discovers the
//! authorization server (RFC 9728 protected-resource metadata from the challenge's
//! `resource_metadata`, else the well-known locations; RFC 8414 / OpenID Connect metadata, its
//! `issuer` checked), registers (a pre-registered client, a Client ID Metadata Document, or dynamic
//! registration), asks the application's [`SignIn`] to let the user approve (authorization code
//! with PKCE S256, refused when the metadata does not list S256 or lists no methods; `state`
//! and RFC 9207 `iss` checked; RFC 8707 `resource` sent), stores the tokens in the
//! [`CredentialStore`], and sends the request again. Every later request to the endpoint,
//! resumes (`GET` + `Last-Event-ID`) and the closing `DELETE` included, carries
//! `Authorization: Bearer <token>` (never a redirect hop to another origin).
//!
//! | the server answers | the client |
//! | --- | --- |
//! | `401` to a request with a token | refreshes once and sends it again; if there is no refresh token, or the refresh is refused, signs in once |
//! | `401` to a request without one | signs in ([`AuthFailure::SignInRequired`] without a [`SignIn`] or client credentials) |
//! | `401` right after a sign-in | [`AuthFailure::Rejected`] (never a loop) |
//! | `403` with `error="insufficient_scope"` | signs in again for the scopes granted plus the challenged ones (step-up), at most [`AuthConfig::max_step_ups`] times, then [`AuthFailure::InsufficientScope`] |
//!
//! A token about to expire (30 s left, or half its lifetime) is refreshed before it is sent; a
//! refresh answer without a new refresh token keeps the old one. Scopes asked for: the
//! configured ones ([`AuthConfig::scopes`]), else the challenge's, else the protected resource
//! metadata's, else none (`offline_access` added where the authorization server offers it).
//! Concurrent requests of a client (and the clients sharing one [`AuthConfig`]: clones share
//! the sign-in state) wait for one sign-in; [`SignIn::exclusive`] extends that to other
//! processes, which find the new tokens in the store. Every failure is
//! [`ClientError::Auth`](super::ClientError::Auth) with an [`AuthFailure`].
//!
//! Discovery, registration, PKCE, the token requests and refresh are rmcp's `auth` module
//! (`AuthorizationManager`), on the client's own HTTP stack (its TLS roots and proxy; OAuth
//! answers are read up to 1 MiB within 30 s). A dynamic registration's client secret, which
//! rmcp's [`StoredCredentials`] has no field for, is kept in the stored token response (field
//! `ssegate_registration`, with the redirect URI), so a confidential client still refreshes its
//! tokens after a restart, and the registration is reused by a later sign-in with the same
//! authorization server and redirect URI. Limits: an authorization server named by a private
//! IP address literal (`10.0.0.9`) is accepted only for an MCP server on a loopback address
//! (rmcp's guard against server-side request forgery; a host name is not filtered); the
//! client-credentials grant sends the endpoint URL as `resource`.
//!
//! ```no_run
//! # async fn run() -> Result<(), ssegate::client::ClientError> {
//! use std::sync::Arc;
//! use ssegate::client::auth::{AuthConfig, SignIn, SignInError};
//! use ssegate::client::{Client, ClientConfig, Retry};
//!
//! /// Prints the URL and reads the address the browser was sent back to.
//! #[derive(Debug)]
//! struct Terminal;
//!
//! #[async_trait::async_trait]
//! impl SignIn for Terminal {
//!     async fn redirect_uri(&self) -> Result<String, SignInError> {
//!         Ok("http://127.0.0.1:8976/callback".to_owned())
//!     }
//!
//!     async fn authorize(&self, url: &str) -> Result<String, SignInError> {
//!         println!("Open {url}, then paste the address you land on:");
//!         let mut line = String::new();
//!         std::io::stdin().read_line(&mut line).map_err(SignInError::Io)?;
//!         Ok(line.trim().to_owned())
//!     }
//! }
//!
//! let mut auth = AuthConfig::default();
//! auth.sign_in(Arc::new(Terminal)).client_name("my-agent");
//! let mut config = ClientConfig::default();
//! config.auth(auth);
//! let client = Client::connect("https://mcp.example.com/mcp", config).await?;
//! let tools = client.list_tools().await?;
//! println!("{} tools", tools.len());
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod flow;
mod http;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::contract;

pub(crate) use flow::{Challenge, Context, Rounds};
pub use rmcp::transport::auth::{
    AuthError as OAuthError, CredentialRefreshGuard, CredentialStore, InMemoryCredentialStore,
    StoredCredentials,
};

/// How the user approves the client: the application's side of the authorization code flow
/// (open a browser and listen for the redirect, print a URL, drive a headless browser in tests).
#[async_trait::async_trait]
pub trait SignIn: Send + Sync + fmt::Debug {
    /// The redirect URI the authorization server sends the user back to (registered with the
    /// client, and sent with the authorization request). Called once per sign-in, before the
    /// authorization URL is built: an implementation can start its callback listener here.
    async fn redirect_uri(&self) -> Result<String, SignInError>;

    /// Shows the user `url` (the authorization request) and waits for the authorization
    /// server's redirect to [`SignIn::redirect_uri`]: returns the whole URL it redirected to
    /// (with `code`, `state`, and `iss` when the server sends it, or `error`).
    async fn authorize(&self, url: &str) -> Result<String, SignInError>;

    /// Held from before a sign-in starts until its tokens are stored, so that several clients of
    /// one server (processes started together) sign in once: the others wait, then find the
    /// tokens in the store. The default coordinates nothing.
    async fn exclusive(&self) -> Result<Option<CredentialRefreshGuard>, SignInError> {
        Ok(None)
    }
}

/// Why a [`SignIn`] did not bring the user back.
#[derive(Debug)]
#[non_exhaustive]
pub enum SignInError {
    /// Nobody approved within the sign-in timeout.
    Timeout(Duration),
    /// The user or the authorization server refused (`error=access_denied`, ...).
    Refused(String),
    /// The sign-in could not be presented or listened for (a callback port in use...).
    Io(std::io::Error),
    /// Anything else, in words.
    Other(String),
}

impl fmt::Display for SignInError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignInError::Timeout(t) => write!(f, "nobody signed in within {} s", t.as_secs()),
            SignInError::Refused(why) => write!(f, "the sign-in was refused: {why}"),
            SignInError::Io(e) => write!(f, "the sign-in could not be presented: {e}"),
            SignInError::Other(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for SignInError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SignInError::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Why the client could not get a token the server accepts ([`ClientError::Auth`](super::ClientError)).
#[derive(Debug)]
#[non_exhaustive]
pub enum AuthFailure {
    /// The server asks for a sign-in and the configuration has no [`SignIn`] (nor client
    /// credentials).
    SignInRequired {
        /// The protected resource.
        resource: String,
    },
    /// The user did not sign in.
    SignIn(SignInError),
    /// Discovery, registration or a token request failed (rmcp's error).
    OAuth(OAuthError),
    /// The server kept answering `403 insufficient_scope` after [`AuthConfig::max_step_ups`]
    /// step-ups.
    InsufficientScope {
        /// The scope the server asked for last.
        scope: Option<String>,
        /// Step-ups made.
        attempts: u32,
    },
    /// The server answered `401` again right after a sign-in or a refresh.
    Rejected {
        /// What the challenge said (`error`, `error_description`).
        challenge: String,
    },
}

impl fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthFailure::SignInRequired { resource } => write!(
                f,
                "{resource} needs a sign-in and this client has no way to present one"
            ),
            AuthFailure::SignIn(e) => e.fmt(f),
            AuthFailure::OAuth(e) => write!(f, "OAuth: {e}"),
            AuthFailure::InsufficientScope { scope, attempts } => write!(
                f,
                "the server still asks for scope {} after {attempts} step-up(s)",
                scope.as_deref().unwrap_or("(unnamed)")
            ),
            AuthFailure::Rejected { challenge } => {
                write!(f, "the server rejected a fresh token: {challenge}")
            }
        }
    }
}

impl std::error::Error for AuthFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AuthFailure::SignIn(e) => Some(e),
            AuthFailure::OAuth(e) => Some(e),
            _ => None,
        }
    }
}

/// How the client signs in. Setters take `&mut self` and chain.
#[derive(Clone)]
#[non_exhaustive]
pub struct AuthConfig {
    pub(crate) store: Arc<dyn CredentialStore>,
    pub(crate) sign_in: Option<Arc<dyn SignIn>>,
    pub(crate) client_id: Option<String>,
    pub(crate) client_secret: Option<String>,
    pub(crate) client_metadata_url: Option<String>,
    pub(crate) client_name: String,
    pub(crate) scopes: Vec<String>,
    pub(crate) send_resource: bool,
    pub(crate) client_credentials: bool,
    pub(crate) max_step_ups: u32,
    pub(crate) sign_in_timeout: Duration,
    /// The sign-in state the clones share (the manager of each endpoint, its mutex).
    pub(crate) shared: Arc<flow::Shared>,
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthConfig")
            .field("sign_in", &self.sign_in)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[REDACTED]"),
            )
            .field("client_metadata_url", &self.client_metadata_url)
            .field("client_name", &self.client_name)
            .field("scopes", &self.scopes)
            .field("send_resource", &self.send_resource)
            .field("client_credentials", &self.client_credentials)
            .field("max_step_ups", &self.max_step_ups)
            .field("sign_in_timeout", &self.sign_in_timeout)
            .finish_non_exhaustive()
    }
}

impl Default for AuthConfig {
    /// Tokens in memory, no [`SignIn`] (a server that asks for one is
    /// [`AuthFailure::SignInRequired`]), dynamic registration as `ssegate`, scopes from the
    /// challenge or the metadata, `resource` sent, 2 step-ups, a 120 s sign-in timeout.
    fn default() -> Self {
        AuthConfig {
            store: Arc::new(InMemoryCredentialStore::new()),
            sign_in: None,
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            client_name: "ssegate".to_owned(),
            scopes: Vec::new(),
            send_resource: true,
            client_credentials: false,
            max_step_ups: contract::DEFAULT_MAX_STEP_UPS,
            sign_in_timeout: contract::DEFAULT_SIGN_IN_TIMEOUT,
            shared: Arc::default(),
        }
    }
}

impl AuthConfig {
    /// Where tokens (and the client registration) live.
    pub fn store(&mut self, store: Arc<dyn CredentialStore>) -> &mut Self {
        self.store = store;
        self
    }

    /// How the user signs in.
    pub fn sign_in(&mut self, sign_in: Arc<dyn SignIn>) -> &mut Self {
        self.sign_in = Some(sign_in);
        self
    }

    /// A client registered ahead with the authorization server (no registration is made).
    pub fn client(&mut self, id: impl Into<String>, secret: Option<String>) -> &mut Self {
        self.client_id = Some(id.into());
        self.client_secret = secret;
        self
    }

    /// The URL of this client's Client ID Metadata Document, used where the authorization
    /// server supports them.
    pub fn client_metadata_url(&mut self, url: impl Into<String>) -> &mut Self {
        self.client_metadata_url = Some(url.into());
        self
    }

    /// The `client_name` of a dynamic registration.
    pub fn client_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.client_name = name.into();
        self
    }

    /// Scopes to ask for (default none: the challenge's, else the metadata's).
    pub fn scopes(&mut self, scopes: Vec<String>) -> &mut Self {
        self.scopes = scopes;
        self
    }

    /// Send RFC 8707 `resource` on the authorization and token requests (default `true`; some
    /// authorization servers reject it).
    pub fn send_resource(&mut self, on: bool) -> &mut Self {
        self.send_resource = on;
        self
    }

    /// A machine client: the client-credentials grant with the [`AuthConfig::client`] id and
    /// secret, no user and no [`SignIn`].
    pub fn client_credentials(&mut self, on: bool) -> &mut Self {
        self.client_credentials = on;
        self
    }

    /// Most step-ups on `403 insufficient_scope` for one request (default 2): with the sign-in a
    /// `401` may need first, a request signs in at most `1 + n` times (the conformance suite's
    /// limit is 3).
    pub fn max_step_ups(&mut self, n: u32) -> &mut Self {
        self.max_step_ups = n;
        self
    }

    /// How long a [`SignIn`] may take (default 120 s).
    pub fn sign_in_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.sign_in_timeout = timeout;
        self
    }
}
