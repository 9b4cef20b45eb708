//! What the loopback server's raw-HTTP tests share: one request on a fresh connection, and what
//! came back.
#![allow(dead_code)]

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

/// What one request got back.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The body bytes received (decoded from chunked framing), up to the end or the error.
    pub body: Bytes,
    /// Whether the body ended with a transport error (a reset) rather than cleanly.
    pub broken: bool,
}

impl Reply {
    /// The body as JSON (panics, showing its start, when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {:?}",
                String::from_utf8_lossy(&self.body[..self.body.len().min(300)])
            )
        })
    }

    /// Whether it is an event stream.
    pub fn is_sse(&self) -> bool {
        self.headers
            .get("content-type")
            .is_some_and(|v| v == "text/event-stream")
    }
}

/// One request to `/mcp` on a fresh connection (so a proxy applies one cut per request), with
/// `headers` and a JSON `body`; the whole answer read, or as much as arrived before an error.
pub async fn exchange(
    addr: SocketAddr,
    method: Method,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Reply {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = Request::builder()
        .method(method)
        .uri("/mcp")
        .header("host", addr.to_string())
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let payload = body
        .map(|v| Bytes::from(serde_json::to_vec(v).unwrap()))
        .unwrap_or_default();
    if !payload.is_empty() {
        req = req.header("content-type", "application/json");
    }
    let res = sender
        .send_request(req.body(Full::new(payload)).unwrap())
        .await
        .unwrap();
    let (parts, mut incoming) = res.into_parts();
    let mut body = BytesMut::new();
    let mut broken = false;
    loop {
        match incoming.frame().await {
            None => break,
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    body.extend_from_slice(&data);
                }
            }
            Some(Err(_)) => {
                broken = true;
                break;
            }
        }
    }
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: body.freeze(),
        broken,
    }
}
