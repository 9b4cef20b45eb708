//! The command's [`SignIn`]: the authorization URL printed on stderr and opened in the browser,
//! the redirect caught by a callback server on loopback.
//!
//! The callback server listens on `127.0.0.1`, path `/callback`. Its port is `--callback-port`
//! when given (in use: the sign-in fails with that error, it never waits for the port). Otherwise
//! it is the port the server's client was registered with last time (kept in the credentials
//! file), else a port fixed per server ([`ServerKey::default_port`], in 33400–33999), so the
//! redirect URI registered with the authorization server is the same from run to run; when that
//! port is in use, the next ones in the range are tried, then any free port (the authorization
//! server may then refuse the redirect URI of a client registered with another: the sign-in says
//! so, and `ssegate auth logout URL` starts afresh).

use std::fmt;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ssegate::client::auth::{CredentialRefreshGuard, SignIn, SignInError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::platform;
use super::store::{CALLBACK_PORTS, FileStore, ServerKey};

/// The callback's path.
pub(crate) const CALLBACK_PATH: &str = "/callback";

/// The most a browser's request head may take, in bytes.
const MAX_HEAD: usize = 16 << 10;

/// How long one connection may take to send its request (a browser's idle preconnect is dropped
/// after it).
const REQUEST_WAIT: Duration = Duration::from_secs(10);

/// How many ports after the preferred one are tried before any free port.
const PORT_TRIES: u16 = 16;

/// Which port the callback server listens on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Port {
    /// `--callback-port`: this one or an error.
    Exactly(u16),
    /// This one, else the next ones in the range, else any.
    Preferably(u16),
}

/// The command's sign-in.
pub(crate) struct BrowserSignIn {
    /// The server's URL, for the user.
    server: String,
    /// Who speaks on stderr (`ssegate bridge`, ...).
    who: &'static str,
    /// Where the server's credentials are kept (its locks, the registered redirect URI); none
    /// when they are kept in memory only.
    store: Option<Arc<FileStore>>,
    port: Port,
    timeout: Duration,
    /// The callback server, from `redirect_uri` to `authorize`.
    listener: Mutex<Option<TcpListener>>,
}

impl fmt::Debug for BrowserSignIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrowserSignIn")
            .field("server", &self.server)
            .field("port", &self.port)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl BrowserSignIn {
    /// A sign-in to the server at `server` (its credentials in `store`), listening on `port`
    /// (`None`: the registered or the server's default port), waiting `timeout` for the user.
    pub(crate) fn new(
        who: &'static str,
        server: &str,
        store: Option<Arc<FileStore>>,
        port: Option<u16>,
        timeout: Duration,
    ) -> Result<BrowserSignIn, String> {
        let port = match port {
            Some(p) => Port::Exactly(p),
            None => {
                let registered = store
                    .as_ref()
                    .and_then(|s| s.read().ok().flatten())
                    .and_then(|r| r.redirect_uri)
                    .and_then(|uri| loopback_port(&uri));
                match registered {
                    Some(p) => Port::Preferably(p),
                    None => Port::Preferably(ServerKey::of(server)?.default_port()),
                }
            }
        };
        Ok(BrowserSignIn {
            server: server.to_owned(),
            who,
            store,
            port,
            timeout,
            listener: Mutex::new(None),
        })
    }

    fn note(&self, text: &str) {
        let _ = writeln!(std::io::stderr().lock(), "{}: {text}", self.who);
    }
}

/// The port of a loopback redirect URI of ours.
fn loopback_port(uri: &str) -> Option<u16> {
    let url = reqwest::Url::parse(uri).ok()?;
    (url.host_str() == Some("127.0.0.1") && url.path() == CALLBACK_PATH)
        .then(|| url.port())
        .flatten()
}

/// Binds the callback server on `port`.
pub(crate) async fn bind(port: Port) -> std::io::Result<TcpListener> {
    let at = |p: u16| SocketAddr::from((Ipv4Addr::LOCALHOST, p));
    match port {
        Port::Exactly(p) => TcpListener::bind(at(p)).await.map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot listen for the sign-in on 127.0.0.1:{p} (--callback-port): {e}"),
            )
        }),
        Port::Preferably(first) => {
            let span = CALLBACK_PORTS.1 - CALLBACK_PORTS.0 + 1;
            for i in 0..PORT_TRIES {
                let p = if (CALLBACK_PORTS.0..=CALLBACK_PORTS.1).contains(&first) {
                    CALLBACK_PORTS.0 + (first - CALLBACK_PORTS.0 + i) % span
                } else {
                    first.wrapping_add(i)
                };
                if p == 0 {
                    continue;
                }
                if let Ok(listener) = TcpListener::bind(at(p)).await {
                    return Ok(listener);
                }
            }
            TcpListener::bind(at(0)).await
        }
    }
}

#[async_trait::async_trait]
impl SignIn for BrowserSignIn {
    async fn redirect_uri(&self) -> Result<String, SignInError> {
        let mut slot = self.listener.lock().await;
        let listener = match slot.take() {
            Some(l) => l,
            None => bind(self.port).await.map_err(SignInError::Io)?,
        };
        let port = listener.local_addr().map_err(SignInError::Io)?.port();
        if let Port::Preferably(p) = self.port
            && p != port
        {
            self.note(&format!(
                "port {p} is in use: the sign-in listens on {port} (a client registered with the \
                 other port may be refused; --callback-port picks one)"
            ));
        }
        *slot = Some(listener);
        let uri = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");
        // Kept with the registration, so the next sign-in listens where the client was
        // registered (best effort: a store that cannot be written is no reason not to sign in).
        if let Some(store) = &self.store {
            let _ = store.note_redirect_uri(&uri);
        }
        Ok(uri)
    }

    async fn authorize(&self, url: &str) -> Result<String, SignInError> {
        let state = reqwest::Url::parse(url)
            .ok()
            .and_then(|u| {
                u.query_pairs()
                    .find(|(k, _)| k == "state")
                    .map(|(_, v)| v.into_owned())
            })
            .ok_or_else(|| {
                SignInError::Other("the authorization URL has no state parameter".to_owned())
            })?;
        let listener = match self.listener.lock().await.take() {
            Some(l) => l,
            None => bind(self.port).await.map_err(SignInError::Io)?,
        };
        self.note(&format!(
            "Open this URL to sign in to {}: {url}",
            self.server
        ));
        if let Err(e) = platform::open_browser(url) {
            self.note(&format!(
                "could not open a browser ({e}): open the URL above yourself"
            ));
        }
        let deadline = Instant::now() + self.timeout;
        await_callback(listener, &state, &self.server, deadline)
            .await
            .map_err(|e| match e {
                SignInError::Timeout(_) => SignInError::Timeout(self.timeout),
                e => e,
            })
    }

    async fn exclusive(&self) -> Result<Option<CredentialRefreshGuard>, SignInError> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        let server = self.server.clone();
        let lock = store
            .lock_sign_in(self.timeout, || {
                self.note(&format!(
                    "another ssegate is signing in to {server}: waiting for it"
                ))
            })
            .await
            .map_err(|e| SignInError::Other(e.to_string()))?;
        match lock {
            Some(file) => Ok(Some(CredentialRefreshGuard::new(file))),
            None => Err(SignInError::Timeout(self.timeout)),
        }
    }
}

/// What one callback connection brought.
enum Callback {
    /// The redirect with our `state`: the URL it was sent to.
    Ours(String),
    /// The redirect with our `state` and an `error`.
    Refused(String),
}

/// Serves the callback on `listener` until the redirect whose `state` is `state` arrives or
/// `deadline` passes: returns the URL it was sent to (with `code`, `state`, `iss`), or
/// [`SignInError::Refused`] when it carries an `error`. Every request is answered (the browser
/// gets a page); one with another or no `state` is answered and ignored.
pub(crate) async fn await_callback(
    listener: TcpListener,
    state: &str,
    server: &str,
    deadline: Instant,
) -> Result<String, SignInError> {
    let port = listener.local_addr().map_err(SignInError::Io)?.port();
    let (tx, mut rx) = mpsc::channel::<Callback>(1);
    let mut connections = JoinSet::new();
    let state: Arc<str> = state.into();
    let server: Arc<str> = server.into();
    let result = loop {
        tokio::select! {
            accepted = listener.accept() => {
                // A failed accept (too many open files...) is not the end of the sign-in.
                if let Ok((stream, _)) = accepted {
                    let (tx, state, server) = (tx.clone(), state.clone(), server.clone());
                    connections.spawn(async move {
                        if let Some(cb) = serve(stream, port, &state, &server).await {
                            let _ = tx.send(cb).await;
                        }
                    });
                }
            }
            Some(cb) = rx.recv() => break match cb {
                Callback::Ours(url) => Ok(url),
                Callback::Refused(why) => Err(SignInError::Refused(why)),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = tokio::time::sleep_until(deadline) => {
                break Err(SignInError::Timeout(Duration::ZERO));
            }
        }
    };
    // The answered page is written before the result is sent; what is left is other connections.
    connections.shutdown().await;
    result
}

/// Reads one request from a browser and answers it.
async fn serve(mut stream: TcpStream, port: u16, state: &str, server: &str) -> Option<Callback> {
    let head = match tokio::time::timeout(REQUEST_WAIT, read_head(&mut stream)).await {
        Ok(Some(head)) => head,
        _ => return None,
    };
    let line = head.lines().next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (method, target) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or("/"),
    );
    let url = reqwest::Url::parse(&format!("http://127.0.0.1:{port}"))
        .and_then(|base| base.join(target))
        .ok();
    let (status, title, body, outcome) = match url {
        Some(url) if url.path() == CALLBACK_PATH && method == "GET" => {
            let param = |name: &str| {
                url.query_pairs()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.into_owned())
            };
            if param("state").as_deref() != Some(state) {
                (
                    "400 Bad Request",
                    "Not this sign-in",
                    "This link is not the sign-in ssegate is waiting for (an old or foreign \
                     one). Use the link ssegate printed last."
                        .to_owned(),
                    None,
                )
            } else if let Some(error) = param("error") {
                let mut why = error;
                if let Some(d) = param("error_description") {
                    why.push_str(&format!(": {d}"));
                }
                (
                    "200 OK",
                    "Not signed in",
                    format!("The sign-in to {server} did not complete: {why}."),
                    Some(Callback::Refused(why)),
                )
            } else {
                (
                    "200 OK",
                    "Signed in",
                    format!("Signed in to {server}. You can close this tab."),
                    Some(Callback::Ours(url.to_string())),
                )
            }
        }
        _ => (
            "404 Not Found",
            "Not found",
            "ssegate listens here for a sign-in only.".to_owned(),
            None,
        ),
    };
    let page = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>ssegate: {title}</title>\
         </head><body><h1>{title}</h1><p>{}</p></body></html>\n",
        escape(&body)
    );
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\nConnection: close\r\n\r\n{page}",
        page.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
    outcome
}

/// The request head (up to the blank line), `None` when the connection ends first or it is too
/// long.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    loop {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = memchr::memmem::find(&head, b"\r\n\r\n") {
            head.truncate(end);
            return String::from_utf8(head).ok();
        }
        if head.len() > MAX_HEAD {
            return None;
        }
    }
}

/// `text` for an HTML page.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A browser's GET of `target` on `port`: the status line and the body.
    async fn get(port: u16, target: &str) -> (String, String) {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let req = format!("GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        let status = out.lines().next().unwrap_or_default().to_owned();
        let body = out.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
        (status, body)
    }

    async fn listening() -> (TcpListener, u16) {
        let l = bind(Port::Exactly(0)).await.unwrap();
        let port = l.local_addr().unwrap().port();
        (l, port)
    }

    #[tokio::test]
    async fn only_the_request_with_our_state_ends_the_wait() {
        let (listener, port) = listening().await;
        let deadline = Instant::now() + Duration::from_secs(20);
        let waiting =
            tokio::spawn(
                async move { await_callback(listener, "s1", "https://srv", deadline).await },
            );
        // An idle connection (a browser's preconnect) does not hold the others up.
        let _idle = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let (status, body) = get(port, "/callback?code=c&state=other").await;
        assert!(status.contains("400"), "{status}");
        assert!(body.contains("not the sign-in"), "{body}");
        let (status, _) = get(port, "/callback?code=c").await;
        assert!(status.contains("400"), "{status}");
        let (status, _) = get(port, "/favicon.ico").await;
        assert!(status.contains("404"), "{status}");
        assert!(!waiting.is_finished());
        let (status, body) = get(port, "/callback?code=abc&state=s1&iss=https%3A%2F%2Fas").await;
        assert!(status.contains("200"), "{status}");
        assert!(
            body.contains("Signed in to https://srv. You can close this tab."),
            "{body}"
        );
        let url = waiting.await.unwrap().unwrap();
        let url = reqwest::Url::parse(&url).unwrap();
        assert_eq!(url.path(), CALLBACK_PATH);
        assert_eq!(url.port(), Some(port));
        let q: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        assert!(q.contains(&("code".into(), "abc".into())), "{q:?}");
        assert!(q.contains(&("iss".into(), "https://as".into())), "{q:?}");
    }

    #[tokio::test]
    async fn an_error_with_our_state_is_a_refusal_shown_escaped() {
        let (listener, port) = listening().await;
        let deadline = Instant::now() + Duration::from_secs(20);
        let waiting =
            tokio::spawn(async move { await_callback(listener, "s1", "srv", deadline).await });
        let (status, body) = get(
            port,
            "/callback?error=access_denied&error_description=%3Cb%3Eno%3C%2Fb%3E&state=s1",
        )
        .await;
        assert!(status.contains("200"), "{status}");
        assert!(
            body.contains("access_denied: &lt;b&gt;no&lt;/b&gt;"),
            "{body}"
        );
        match waiting.await.unwrap() {
            Err(SignInError::Refused(why)) => assert_eq!(why, "access_denied: <b>no</b>"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn nobody_coming_back_is_a_timeout_and_the_port_is_released() {
        let (listener, port) = listening().await;
        let started = Instant::now();
        let deadline = started + Duration::from_millis(300);
        let e = await_callback(listener, "s1", "srv", deadline)
            .await
            .unwrap_err();
        assert!(matches!(e, SignInError::Timeout(_)), "{e:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        // Released: the port can be listened on again.
        bind(Port::Exactly(port)).await.unwrap();
    }

    #[tokio::test]
    async fn a_port_in_use_is_an_error_when_asked_for_else_another_is_taken() {
        let (_held, port) = listening().await;
        let e = bind(Port::Exactly(port)).await.unwrap_err();
        assert!(e.to_string().contains("--callback-port"), "{e}");
        let other = bind(Port::Preferably(port)).await.unwrap();
        assert_ne!(other.local_addr().unwrap().port(), port);
    }

    #[test]
    fn the_registered_port_is_read_back_from_our_redirect_uri_only() {
        assert_eq!(
            loopback_port("http://127.0.0.1:33401/callback"),
            Some(33401)
        );
        assert_eq!(loopback_port("http://127.0.0.1:33401/other"), None);
        assert_eq!(loopback_port("https://app.example/callback"), None);
    }
}
