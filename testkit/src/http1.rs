//! The test kit's own HTTP/1.1 client plumbing (one request per fresh TCP connection), for the naive
//! client and the demo's layout measurement. It is deliberately independent of `ssegate::client`.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tracing::{Instrument, debug, debug_span};

/// Why an exchange failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum WireError {
    /// Connecting failed.
    Connect(io::Error),
    /// hyper failed (handshake, request, body).
    Http(hyper::Error),
    /// Building the request failed (an invalid header value).
    Request(http::Error),
    /// Nothing arrived in time.
    Timeout(Duration),
    /// A body was longer than the limit.
    TooLarge(usize),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Connect(e) => write!(f, "connecting: {e}"),
            WireError::Http(e) => write!(f, "HTTP error: {e}"),
            WireError::Request(e) => write!(f, "building the request: {e}"),
            WireError::Timeout(after) => write!(f, "timed out after {} ms", after.as_millis()),
            WireError::TooLarge(limit) => write!(f, "body larger than {limit} bytes"),
        }
    }
}

impl std::error::Error for WireError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WireError::Connect(e) => Some(e),
            WireError::Http(e) => Some(e),
            WireError::Request(e) => Some(e),
            WireError::Timeout(_) | WireError::TooLarge(_) => None,
        }
    }
}

/// One request to `http://<addr><path>` on a fresh connection; returns the response head with its
/// streaming body. `timeout` bounds the connect and, separately, the wait for the response head.
pub(crate) async fn exchange(
    addr: SocketAddr,
    path: &str,
    method: Method,
    headers: &[(&str, &str)],
    body: Bytes,
    timeout: Duration,
) -> Result<http::Response<Incoming>, WireError> {
    let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| WireError::Timeout(timeout))?
        .map_err(WireError::Connect)?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(WireError::Http)?;
    tokio::spawn(
        async move {
            if let Err(e) = conn.await {
                debug!(error = %e, "connection ended with an error");
            }
        }
        .instrument(debug_span!("testkit_conn", %addr)),
    );
    let authority = addr.to_string();
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, authority.as_str());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if !body.is_empty() {
        req = req.header(header::CONTENT_TYPE, "application/json");
    }
    let req = req.body(Full::new(body)).map_err(WireError::Request)?;
    tokio::time::timeout(timeout, sender.send_request(req))
        .await
        .map_err(|_| WireError::Timeout(timeout))?
        .map_err(WireError::Http)
}

/// Reads a whole body, up to `limit` bytes.
pub(crate) async fn read_body(mut body: Incoming, limit: usize) -> Result<Bytes, WireError> {
    let mut out = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(WireError::Http)?;
        if let Ok(data) = frame.into_data() {
            if out.len().saturating_add(data.len()) > limit {
                return Err(WireError::TooLarge(limit));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out.freeze())
}
