//! The headless "browser": visits an authorization URL on loopback and returns where the server
//! redirected it, without following the redirect.
#![forbid(unsafe_code)]

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, header};
use url::Url;

use crate::http1::{WireError, exchange, read_body};

/// How long one visit may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Why a visit did not end in a redirect.
#[derive(Debug)]
#[non_exhaustive]
pub enum BrowserError {
    /// Not an `http://` URL on a loopback host.
    Url(String),
    /// The exchange failed.
    Wire(WireError),
    /// The server answered without a redirect (an error page, for an unknown client or an
    /// unregistered redirect URI).
    NotRedirected {
        /// Its status.
        status: u16,
        /// The start of its body.
        body: String,
    },
}

impl fmt::Display for BrowserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BrowserError::Url(why) => write!(f, "cannot visit: {why}"),
            BrowserError::Wire(e) => write!(f, "visiting: {e}"),
            BrowserError::NotRedirected { status, body } => {
                write!(f, "no redirect: {status} {}", body.trim())
            }
        }
    }
}

impl std::error::Error for BrowserError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BrowserError::Wire(e) => Some(e),
            _ => None,
        }
    }
}

/// GETs `authorization_url` (an `http://` URL on `127.0.0.1`, `localhost` or `[::1]`) without
/// following redirects and returns the `Location` the server answered with, made absolute: the
/// redirect URL with `code`, `state` and `iss` (or `error`). What a test's
/// `SignIn::authorize` returns.
pub async fn follow(authorization_url: &str) -> Result<String, BrowserError> {
    let url = Url::parse(authorization_url)
        .map_err(|e| BrowserError::Url(format!("{authorization_url:?}: {e}")))?;
    if url.scheme() != "http" {
        return Err(BrowserError::Url(format!(
            "{authorization_url:?}: only http:// on loopback"
        )));
    }
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(80);
    let addr: SocketAddr = match host {
        "127.0.0.1" | "localhost" => SocketAddr::from(([127, 0, 0, 1], port)),
        "[::1]" => (("::1", port).to_socket_addrs())
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| BrowserError::Url("no [::1]".into()))?,
        other => {
            return Err(BrowserError::Url(format!(
                "{other:?} is not a loopback host"
            )));
        }
    };
    let mut target = url.path().to_owned();
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    let response = exchange(
        addr,
        &target,
        Method::GET,
        &[("accept", "text/html")],
        Bytes::new(),
        TIMEOUT,
    )
    .await
    .map_err(BrowserError::Wire)?;
    let status = response.status();
    let location = response
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    match location {
        Some(location) if status.is_redirection() => url
            .join(&location)
            .map(String::from)
            .map_err(|e| BrowserError::Url(format!("Location {location:?}: {e}"))),
        _ => {
            let body = read_body(response.into_body(), 4096)
                .await
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            Err(BrowserError::NotRedirected {
                status: status.as_u16(),
                body,
            })
        }
    }
}

/// A counting headless browser: [`follow`], remembering every URL visited and every redirect
/// returned. Clones share the record (give one to the `SignIn` under test, read the other).
#[derive(Clone, Debug, Default)]
pub struct Browser {
    record: Arc<Mutex<Record>>,
}

#[derive(Debug, Default)]
struct Record {
    visited: Vec<String>,
    redirects: Vec<String>,
}

impl Browser {
    /// A browser that has visited nothing.
    pub fn new() -> Browser {
        Browser::default()
    }

    /// Visits `authorization_url` as [`follow`] does, and records it.
    pub async fn follow(&self, authorization_url: &str) -> Result<String, BrowserError> {
        self.lock().visited.push(authorization_url.to_owned());
        let result = follow(authorization_url).await;
        if let Ok(redirect) = &result {
            self.lock().redirects.push(redirect.clone());
        }
        result
    }

    /// Visits made.
    pub fn visits(&self) -> usize {
        self.lock().visited.len()
    }

    /// Every URL visited, in order.
    pub fn visited(&self) -> Vec<String> {
        self.lock().visited.clone()
    }

    /// Every redirect returned, in order.
    pub fn redirects(&self) -> Vec<String> {
        self.lock().redirects.clone()
    }

    /// The last URL visited.
    pub fn last_visited(&self) -> Option<String> {
        self.lock().visited.last().cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Record> {
        self.record.lock().unwrap_or_else(|e| e.into_inner())
    }
}
