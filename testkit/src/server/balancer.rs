//! A loopback load balancer in front of several server instances, routing the way a load-balanced
//! deployment loses a stream: each TCP connection goes to one instance, chosen by its first request.
//!
//! - a connection whose first request is a `GET` (a resume, `Last-Event-ID`) goes to an instance
//!   other than the first, in rotation over the others: never to the one that served the `POST`
//!   whose response was cut;
//! - every other connection (`initialize`, `tools/call`, `DELETE`) goes to the first instance, as
//!   with sticky routing whose affinity a reconnect loses.
//!
//! With one instance every connection goes to it. The balancer reads the first request head (at
//! most [`MAX_HEAD`] bytes; a connection that sends more without ending its head is closed), then
//! forwards the bytes both ways untouched. It binds only to `127.0.0.1`.
#![forbid(unsafe_code)]

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{Instrument, debug, debug_span, warn};

/// The most bytes read to find the end of a connection's first request head.
pub const MAX_HEAD: usize = 64 << 10;

/// Counters of a [`RunningBalancer`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BalancerStats {
    /// Connections routed, per instance (in the order the upstreams were given).
    pub routed: Vec<u64>,
    /// Connections whose first request was a `GET` (routed away from the first instance).
    pub resumes: u64,
}

#[derive(Debug)]
struct Shared {
    upstreams: Vec<SocketAddr>,
    routed: Vec<AtomicU64>,
    resumes: AtomicU64,
    next_other: AtomicU64,
}

impl Shared {
    /// The instance for a connection whose first request has `method`.
    fn route(&self, method: &[u8]) -> usize {
        let n = self.upstreams.len();
        if n > 1 && method == b"GET" {
            self.resumes.fetch_add(1, Ordering::Relaxed);
            let k = self.next_other.fetch_add(1, Ordering::Relaxed);
            // 1..n, in rotation.
            1 + usize::try_from(k % (n as u64 - 1)).unwrap_or(0)
        } else {
            0
        }
    }
}

/// A balancer accepting connections. Dropping it stops it too (without waiting).
#[derive(Debug)]
pub struct RunningBalancer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningBalancer {
    /// Binds an ephemeral port on `127.0.0.1` and balances over `upstreams` (at least one) on the
    /// current tokio runtime.
    pub async fn start(upstreams: &[SocketAddr]) -> io::Result<RunningBalancer> {
        if upstreams.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a balancer needs at least one upstream",
            ));
        }
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstreams: upstreams.to_vec(),
            routed: upstreams.iter().map(|_| AtomicU64::new(0)).collect(),
            resumes: AtomicU64::new(0),
            next_other: AtomicU64::new(0),
        });
        let (stop, stopped) = watch::channel(false);
        let span = debug_span!("balancer", %addr);
        let task =
            tokio::spawn(accept_loop(listener, Arc::clone(&shared), stopped).instrument(span));
        Ok(RunningBalancer {
            addr,
            shared,
            stop,
            task,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> BalancerStats {
        BalancerStats {
            routed: self
                .shared
                .routed
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            resumes: self.shared.resumes.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting and drops every open connection.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, peer)) => {
                    let span = debug_span!("balancer_conn", %peer);
                    conns.spawn(forward(client, Arc::clone(&shared)).instrument(span));
                }
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
            _ = stopped.changed() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.shutdown().await;
}

/// The method of a request head that starts `head`, once its first line is complete.
fn method(head: &[u8]) -> Option<&[u8]> {
    let line_end = memchr::memchr(b'\n', head)?;
    head[..line_end].split(|&b| b == b' ').next()
}

async fn forward(mut client: TcpStream, shared: Arc<Shared>) {
    let mut head = Vec::with_capacity(4096);
    let mut buf = [0u8; 4096];
    let target = loop {
        if let Some(m) = method(&head) {
            break shared.route(m);
        }
        if head.len() >= MAX_HEAD {
            debug!("no request line within the head limit; closing");
            return;
        }
        match client.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(k) => head.extend_from_slice(&buf[..k]),
        }
    };
    shared.routed[target].fetch_add(1, Ordering::Relaxed);
    let mut upstream = match TcpStream::connect(shared.upstreams[target]).await {
        Ok(s) => s,
        Err(e) => {
            warn!(error = %e, target, "upstream connect failed");
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    debug!(target, "routed");
    if upstream.write_all(&head).await.is_err() {
        return;
    }
    // Ends when either side closes or fails; a client reset drops the upstream connection too.
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(n: usize) -> Shared {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        Shared {
            upstreams: vec![addr; n],
            routed: (0..n).map(|_| AtomicU64::new(0)).collect(),
            resumes: AtomicU64::new(0),
            next_other: AtomicU64::new(0),
        }
    }

    #[test]
    fn resumes_never_go_to_the_first_instance() {
        let s = shared(3);
        assert_eq!(s.route(b"POST"), 0);
        assert_eq!(s.route(b"DELETE"), 0);
        let gets: Vec<usize> = (0..4).map(|_| s.route(b"GET")).collect();
        assert_eq!(gets, [1, 2, 1, 2]);
        let one = shared(1);
        assert_eq!(one.route(b"GET"), 0);
    }

    #[test]
    fn the_method_needs_a_whole_request_line() {
        assert_eq!(method(b"GET /mcp HTTP/1.1"), None);
        assert_eq!(method(b"GET /mcp HTTP/1.1\r\n"), Some(&b"GET"[..]));
        assert_eq!(
            method(b"POST /mcp HTTP/1.1\r\nhost: x\r\n"),
            Some(&b"POST"[..])
        );
    }
}
