//! MCP authorization on loopback: a real OAuth 2.1 authorization server, an OAuth-protected MCP
//! endpoint in front of the kit's [`server`](crate::server), and a headless "browser", for the
//! client tests the official conformance suite does not cover (expiry, refresh races, step-up,
//! misconfigured authorization servers).
//!
//! - [`AuthServer`] ([`AuthServerConfig`]): RFC 8414 metadata (and OpenID Connect discovery),
//!   RFC 7591 dynamic registration and pre-registered clients, an authorization endpoint that
//!   approves or denies at once (no user), a token endpoint (authorization code with PKCE S256,
//!   refresh tokens rotated or not, client credentials; client authentication `none`,
//!   `client_secret_basic`, `client_secret_post`), RFC 8707 `resource` and RFC 9207 `iss`. Modes
//!   for the hard cases (short-lived tokens, refresh tokens refused after N uses or on a switch,
//!   no `S256` advertised, an issuer mismatch, `resource` refused, ...), and counters
//!   ([`AuthStats`]) plus a record of every request's parameters.
//! - [`ProtectedServer`] ([`ProtectedConfig`]): a bearer-checking front for an MCP endpoint. It
//!   answers `401` with `WWW-Authenticate: Bearer resource_metadata="...", scope="..."`, serves
//!   the RFC 9728 protected-resource metadata naming the [`AuthServer`], accepts only live access
//!   tokens that server issued (an in-process token table, with audience and expiry), answers
//!   `403` `error="insufficient_scope"` for a tool that needs more scope, and forwards the rest
//!   (every `POST`, `GET` and `DELETE` is checked; the token is not passed on).
//! - [`follow`] and [`Browser`]: the headless browser. `follow(url)` GETs an authorization URL
//!   without following redirects and returns the `Location` the server sent back (the redirect
//!   URL carrying `code`, `state` and `iss`, or `error`): what a test's `SignIn::authorize` returns.
//!
//! Everything binds `127.0.0.1` and runs on the current tokio runtime.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use ssegate_testkit::auth::{AuthServer, AuthServerConfig, ProtectedConfig, ProtectedServer};
//! use ssegate_testkit::server::ServerConfig;
//!
//! let mcp = ServerConfig::default().start("127.0.0.1:0".parse()?).await?;
//! let mut config = AuthServerConfig::default();
//! config.access_token_ttl(std::time::Duration::from_secs(2));
//! let auth = AuthServer::start(config).await?;
//! let protected = ProtectedServer::start(mcp.addr(), &auth, ProtectedConfig::default()).await?;
//! // Point the client under test at protected.url(), with a SignIn whose `authorize` is
//! // `ssegate_testkit::auth::follow(url)`; then read auth.stats().
//! println!("{} issued by {}", protected.url(), auth.issuer());
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod browser;
mod resource;
mod server;

pub use browser::{Browser, BrowserError, follow};
pub use resource::{MetadataLocation, ProtectedConfig, ProtectedServer, ProtectedStats};
pub use server::{
    AuthServer, AuthServerConfig, AuthStats, IssParameter, IssuedToken, RegisteredClient,
    ResourcePolicy, TokenAuthMethod, TokenInfo,
};

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// The scope every protected request needs by default ([`ProtectedConfig::required_scopes`]).
pub const DEFAULT_SCOPE: &str = "mcp";
/// The extra scope of [`ADMIN_TOOL`] by default.
pub const ADMIN_SCOPE: &str = "admin";
/// A tool the [`ProtectedServer`] answers itself (it echoes `arguments.text`), guarded by
/// [`ADMIN_SCOPE`] unless configured otherwise.
pub const ADMIN_TOOL: &str = "admin_echo";

type Body = BoxBody<Bytes, hyper::Error>;

fn full(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(
        Full::new(body.into())
            .map_err(|never: Infallible| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn json(status: StatusCode, v: &Value) -> Response<Body> {
    full(
        status,
        "application/json",
        serde_json::to_vec(v).expect("a JSON value serializes"),
    )
}

/// Serves HTTP/1.1 on `listener` with `handler` until the returned task is aborted (which aborts
/// every open connection too).
fn spawn_http<H, F>(listener: TcpListener, handler: H) -> JoinHandle<()>
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    tokio::spawn(async move {
        let mut conns = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        let handler = handler.clone();
                        conns.spawn(async move {
                            let _ = stream.set_nodelay(true);
                            let service = service_fn(move |req| {
                                let response = handler(req);
                                async move { Ok::<_, Infallible>(response.await) }
                            });
                            let _ = hyper::server::conn::http1::Builder::new()
                                .timer(TokioTimer::new())
                                .header_read_timeout(Duration::from_secs(30))
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        });
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
    })
}

/// A request body, whole, up to `limit` bytes (`None` past it or on a read error).
async fn read_body(body: Incoming, limit: usize) -> Option<Bytes> {
    Limited::new(body, limit)
        .collect()
        .await
        .ok()
        .map(|b| b.to_bytes())
}

/// 128 bits from the operating system's random source, as 32 hex digits, after `prefix`.
fn random_token(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    let mut out = String::with_capacity(prefix.len() + 32);
    out.push_str(prefix);
    for b in bytes {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Base64url without padding (RFC 4648 §5), as PKCE uses it.
fn base64url(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
        }
    }
    out
}

/// The PKCE `S256` challenge of `verifier`: `BASE64URL(SHA256(verifier))` (RFC 7636 §4.2).
pub fn pkce_challenge(verifier: &str) -> String {
    base64url(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref())
}

/// A fresh PKCE code verifier (43 unreserved characters, RFC 7636 §4.1), for tests that drive
/// the flow by hand.
pub fn pkce_verifier() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    base64url(&bytes)
}

/// Splits a scope string (space-separated, RFC 6749 §3.3) into its scopes, without repeats.
fn scopes_of(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in text.split(' ').filter(|s| !s.is_empty()) {
        if !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_matches_rfc_4648_vectors() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64url(input.as_bytes()), want, "{input:?}");
        }
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn pkce_matches_rfc_7636_appendix_b() {
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let v = pkce_verifier();
        assert_eq!(v.len(), 43);
    }
}
