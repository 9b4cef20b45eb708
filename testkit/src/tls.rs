//! A TLS front for loopback tests: terminates TLS with a freshly generated self-signed certificate
//! (for `localhost` and `127.0.0.1`) and forwards the plaintext to an upstream address, so any
//! loopback server in this kit can be reached over `https://`. Optionally it admits only requests
//! that carry an exact `Authorization` header (checked on each connection's first request head).
#![forbid(unsafe_code)]

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{self, pki_types};

/// A running TLS front. Dropping it stops accepting.
#[derive(Debug)]
pub struct TlsFront {
    addr: SocketAddr,
    cert_pem: String,
    handshakes: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why the front could not start.
#[derive(Debug)]
pub struct TlsError(String);

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TLS front: {}", self.0)
    }
}

impl std::error::Error for TlsError {}

impl TlsFront {
    /// Serves TLS on a free loopback port and forwards to `upstream`; with `authorization`, a
    /// connection whose first request lacks exactly that `Authorization` value is answered `401`.
    pub async fn start(
        upstream: SocketAddr,
        authorization: Option<String>,
    ) -> Result<TlsFront, TlsError> {
        let err = |e: &dyn std::fmt::Display| TlsError(e.to_string());
        let key = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
            .map_err(|e| err(&e))?;
        let cert_pem = key.cert.pem();
        let chain = vec![key.cert.der().clone()];
        let private = pki_types::PrivateKeyDer::Pkcs8(key.signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| err(&e))?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(|e| err(&e))?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| err(&e))?;
        let addr = listener.local_addr().map_err(|e| err(&e))?;
        let handshakes = Arc::new(AtomicU64::new(0));
        let count = handshakes.clone();
        let authorization = authorization.map(Arc::new);
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let count = count.clone();
                let authorization = authorization.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    count.fetch_add(1, Ordering::Relaxed);
                    let _ = forward(tls, upstream, authorization.as_deref()).await;
                });
            }
        });
        Ok(TlsFront {
            addr,
            cert_pem,
            handshakes,
            task,
        })
    }

    /// The address it serves TLS on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://localhost:<port>/mcp`.
    pub fn url(&self) -> String {
        format!("https://localhost:{}/mcp", self.addr.port())
    }

    /// The self-signed certificate, PEM: what a client must trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// TLS handshakes completed.
    pub fn handshakes(&self) -> u64 {
        self.handshakes.load(Ordering::Relaxed)
    }
}

/// Reads the first request head (up to 64 KiB), checks the `Authorization` header, then pipes.
async fn forward<S>(
    mut client: S,
    upstream: SocketAddr,
    authorization: Option<&String>,
) -> io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while memchr::memmem::find(&head, b"\r\n\r\n").is_none() {
        let n = client.read(&mut buf).await?;
        if n == 0 || head.len() > 64 << 10 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    if let Some(expected) = authorization {
        let text = String::from_utf8_lossy(&head);
        let ok = text.lines().any(|l| {
            l.split_once(':').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("authorization") && v.trim() == expected.as_str()
            })
        });
        if !ok {
            client
                .write_all(
                    b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await?;
            return client.shutdown().await;
        }
    }
    let mut server = TcpStream::connect(upstream).await?;
    server.write_all(&head).await?;
    tokio::io::copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}

/// A minimal HTTP `CONNECT` proxy on loopback (what `HTTPS_PROXY` points at): it opens the tunnel
/// each `CONNECT host:port` asks for and counts them.
#[derive(Debug)]
pub struct ConnectProxy {
    addr: SocketAddr,
    tunnels: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ConnectProxy {
    /// Listens on a free loopback port. Tunnels only to loopback addresses.
    pub async fn start() -> io::Result<ConnectProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let tunnels = Arc::new(AtomicU64::new(0));
        let count = tunnels.clone();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let count = count.clone();
                tokio::spawn(async move {
                    let _ = tunnel(tcp, &count).await;
                });
            }
        });
        Ok(ConnectProxy {
            addr,
            tunnels,
            task,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Tunnels opened.
    pub fn tunnels(&self) -> u64 {
        self.tunnels.load(Ordering::Relaxed)
    }
}

async fn tunnel(mut client: TcpStream, count: &AtomicU64) -> io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while memchr::memmem::find(&head, b"\r\n\r\n").is_none() {
        let n = client.read(&mut buf).await?;
        if n == 0 || head.len() > 16 << 10 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    let target = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("CONNECT "))
        .and_then(|l| l.split_whitespace().next())
        .map(|t| t.replacen("localhost", "127.0.0.1", 1));
    let Some(target) = target.filter(|t| t.starts_with("127.0.0.1:")) else {
        client
            .write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")
            .await?;
        return Ok(());
    };
    let mut server = TcpStream::connect(target).await?;
    count.fetch_add(1, Ordering::Relaxed);
    client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await?;
    tokio::io::copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}
