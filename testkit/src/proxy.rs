//! A fault-injecting TCP proxy for loopback tests: forwards bytes both ways between a client and an
//! upstream server, and cuts chosen responses with a TCP reset.
//!
//! Each accepted connection takes one [`Cut`] — the next one queued with [`RunningProxy::set_next_cut`],
//! or the default ([`ProxyConfig::default_cut`], [`RunningProxy::set_default_cut`]). A cut at byte `N`
//! forwards exactly the first `N` bytes of the upstream→client direction (headers, chunk framing and
//! body alike, counted across every response of a keep-alive connection), then closes the client socket
//! with `SO_LINGER` 0, so the client sees a reset (`ECONNRESET`) instead of a clean end, and drops the
//! upstream connection. A connection whose responses end before byte `N` is not cut. After a cut the
//! proxy holds the next connection for [`ProxyConfig::accept_delay`] before serving it (the kernel
//! still completes the TCP handshake), like a client's reconnect delay in the field.
//! [`RunningProxy::set_max_cuts`] bounds the cuts in all: with a default cut and a budget of one,
//! exactly the first connection to reach the offset is cut, whichever connection a pooling client
//! sent the request on, and every later one (a re-issue, a resume) passes whole.
//!
//! The proxy binds only to `127.0.0.1`.
//!
//! ```no_run
//! # async fn run(upstream: std::net::SocketAddr) -> std::io::Result<()> {
//! use ssegate_testkit::proxy::{Cut, ProxyConfig};
//! use std::time::Duration;
//!
//! let mut config = ProxyConfig::default();
//! config.accept_delay(Duration::ZERO);
//! let proxy = config.start(upstream).await?;
//! proxy.set_next_cut(Cut::At(1_234_567)); // cut the next connection's response there; pass the rest
//! // ... point the client at proxy.addr() ...
//! assert_eq!(proxy.stats().cuts, 1);
//! proxy.shutdown().await;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{Instrument, debug, debug_span, info_span, warn};

use crate::rng::SplitMix64;

/// Size of each connection's forwarding buffers.
const BUF: usize = 64 << 10;
/// How long a cut waits for the client to take the bytes before the reset (see [`drained`]).
const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// Where to cut one connection's response (upstream→client) direction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Cut {
    /// Forward everything.
    #[default]
    None,
    /// Forward exactly this many bytes, then reset. `At(0)` resets when the first response byte
    /// arrives, forwarding none.
    At(u64),
    /// A uniformly random offset in the range, drawn when the connection is accepted from the
    /// proxy's seeded PRNG ([`ProxyConfig::seed`]), so a run is reproducible.
    Random(RangeInclusive<u64>),
}

/// The proxy's settings. Setters take `&mut self` and chain; [`ProxyConfig::start`] binds and serves.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    default_cut: Cut,
    accept_delay: Duration,
    seed: u64,
}

impl Default for ProxyConfig {
    /// No cut by default, a 250 ms hold after each cut, seed 0.
    fn default() -> Self {
        ProxyConfig {
            default_cut: Cut::None,
            accept_delay: Duration::from_millis(250),
            seed: 0,
        }
    }
}

impl ProxyConfig {
    /// The cut applied to a connection when no cut is queued.
    pub fn default_cut(&mut self, cut: Cut) -> &mut Self {
        self.default_cut = cut;
        self
    }

    /// How long, after a cut, the next accepted connection is held before it is served (`ZERO` for
    /// fast tests).
    pub fn accept_delay(&mut self, delay: Duration) -> &mut Self {
        self.accept_delay = delay;
        self
    }

    /// The seed of the PRNG that draws [`Cut::Random`] offsets.
    pub fn seed(&mut self, seed: u64) -> &mut Self {
        self.seed = seed;
        self
    }

    /// Binds an ephemeral port on `127.0.0.1` and forwards each connection to `upstream`, on the
    /// current tokio runtime, until [`RunningProxy::shutdown`] or drop.
    pub async fn start(&self, upstream: SocketAddr) -> io::Result<RunningProxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            plan: Mutex::new(Plan {
                queue: VecDeque::new(),
                default: self.default_cut.clone(),
                rng: SplitMix64(self.seed),
                hold_until: None,
                last_cut: None,
                max_cuts: None,
            }),
            accept_delay: self.accept_delay,
            stats: Stats::default(),
        });
        let (stop, stopped) = watch::channel(false);
        let span = info_span!("proxy", %addr, %upstream);
        let task = tokio::spawn(
            accept_loop(listener, upstream, Arc::clone(&shared), stopped).instrument(span),
        );
        Ok(RunningProxy {
            addr,
            shared,
            stop,
            task,
        })
    }
}

/// A snapshot of the proxy's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Client connections accepted.
    pub connections: u64,
    /// Bytes forwarded client→upstream (requests).
    pub bytes_up: u64,
    /// Bytes forwarded upstream→client (responses).
    pub bytes_down: u64,
    /// Connections reset by a cut.
    pub cuts: u64,
}

/// One cut that happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutEvent {
    /// The connection's number (1 = the first accepted).
    pub connection: u64,
    /// Response bytes forwarded before the reset.
    pub offset: u64,
}

#[derive(Debug, Default)]
struct Stats {
    connections: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    cuts: AtomicU64,
}

#[derive(Debug)]
struct Plan {
    queue: VecDeque<Cut>,
    default: Cut,
    rng: SplitMix64,
    hold_until: Option<Instant>,
    last_cut: Option<CutEvent>,
    /// Most cuts in all ([`RunningProxy::set_max_cuts`]).
    max_cuts: Option<u64>,
}

impl Plan {
    /// The cut offset for the next connection.
    fn take(&mut self) -> Option<u64> {
        let cut = self
            .queue
            .pop_front()
            .unwrap_or_else(|| self.default.clone());
        match cut {
            Cut::None => None,
            Cut::At(n) => Some(n),
            Cut::Random(range) => {
                let (lo, hi) = (*range.start(), *range.end());
                if lo > hi {
                    return None;
                }
                let r = self.rng.next();
                // The full u64 range has no representable width: any draw is in it.
                Some(lo + (hi - lo).checked_add(1).map_or(r, |width| r % width))
            }
        }
    }
}

#[derive(Debug)]
struct Shared {
    plan: Mutex<Plan>,
    accept_delay: Duration,
    stats: Stats,
}

impl Shared {
    fn plan(&self) -> std::sync::MutexGuard<'_, Plan> {
        self.plan.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a cut about to happen, unless [`Plan::max_cuts`] are spent (then `false`).
    fn claim_cut(&self) -> bool {
        let plan = self.plan();
        let cuts = self.stats.cuts.load(Ordering::Relaxed);
        if plan.max_cuts.is_some_and(|max| cuts >= max) {
            return false;
        }
        self.stats.cuts.store(cuts + 1, Ordering::Relaxed);
        true
    }
}

/// A proxy accepting connections. Dropping it stops the proxy too.
#[derive(Debug)]
pub struct RunningProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningProxy {
    /// The proxy's address (`127.0.0.1:<port>`): point clients here.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a cut for the next accepted connection that has none yet (first in, first used).
    pub fn set_next_cut(&self, cut: Cut) {
        self.shared.plan().queue.push_back(cut);
    }

    /// Replaces the cut used when the queue is empty.
    pub fn set_default_cut(&self, cut: Cut) {
        self.shared.plan().default = cut;
    }

    /// Bounds the cuts in all, those made so far included (`None`: no bound, the default). A
    /// connection that reaches its cut offset once they are spent is forwarded whole; the bound is
    /// checked when the offset is reached, so it holds for connections accepted before it was set.
    pub fn set_max_cuts(&self, max: Option<u64>) {
        self.shared.plan().max_cuts = max;
    }

    /// Empties the queue of cuts.
    pub fn clear_cuts(&self) {
        self.shared.plan().queue.clear();
    }

    /// The most recent cut, if any.
    pub fn last_cut(&self) -> Option<CutEvent> {
        self.shared.plan().last_cut
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> ProxyStats {
        let s = &self.shared.stats;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ProxyStats {
            connections: get(&s.connections),
            bytes_up: get(&s.bytes_up),
            bytes_down: get(&s.bytes_down),
            cuts: get(&s.cuts),
        }
    }

    /// Stops accepting and aborts every open connection.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, peer)) => {
                    let n = shared.stats.connections.fetch_add(1, Ordering::Relaxed) + 1;
                    let (cut, hold_until) = {
                        let mut plan = shared.plan();
                        (plan.take(), plan.hold_until)
                    };
                    let span = debug_span!("proxy_conn", n, %peer, cut = ?cut);
                    let task = forward(client, upstream, n, cut, hold_until, Arc::clone(&shared));
                    conns.spawn(task.instrument(span));
                }
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = stopped.changed() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.shutdown().await;
}

/// How the upstream→client direction ended.
enum Down {
    /// Upstream closed (or failed); the client got everything.
    Ended,
    /// The cut offset was reached.
    Cut(u64),
}

async fn forward(
    mut client: TcpStream,
    upstream_addr: SocketAddr,
    n: u64,
    cut: Option<u64>,
    hold_until: Option<Instant>,
    shared: Arc<Shared>,
) {
    if let Some(t) = hold_until {
        tokio::time::sleep_until(t).await;
    }
    let mut upstream = match TcpStream::connect(upstream_addr).await {
        Ok(s) => s,
        Err(e) => {
            warn!(error = %e, "upstream connect failed");
            reset(client);
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let stats = &shared.stats;
    let down_result = {
        let (mut cr, mut cw) = client.split();
        let (mut ur, mut uw) = upstream.split();
        let up = async {
            let mut buf = vec![0u8; BUF];
            loop {
                match cr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(k) => {
                        if uw.write_all(&buf[..k]).await.is_err() {
                            break;
                        }
                        stats.bytes_up.fetch_add(k as u64, Ordering::Relaxed);
                    }
                }
            }
            // Pass the client's half-close on.
            let _ = uw.shutdown().await;
        };
        let down = async {
            let mut buf = vec![0u8; BUF];
            let mut sent = 0u64;
            let mut cut = cut;
            loop {
                let k = match ur.read(&mut buf).await {
                    Ok(0) | Err(_) => {
                        let _ = cw.shutdown().await;
                        return Down::Ended;
                    }
                    Ok(k) => k,
                };
                let pass = cut.map_or(k, |c| k.min((c - sent) as usize));
                if cw.write_all(&buf[..pass]).await.is_err() {
                    return Down::Ended;
                }
                sent += pass as u64;
                stats.bytes_down.fetch_add(pass as u64, Ordering::Relaxed);
                if cut == Some(sent) {
                    if shared.claim_cut() {
                        return Down::Cut(sent);
                    }
                    // The cuts are spent: this connection passes whole.
                    cut = None;
                    if cw.write_all(&buf[pass..k]).await.is_err() {
                        return Down::Ended;
                    }
                    sent += (k - pass) as u64;
                    stats
                        .bytes_down
                        .fetch_add((k - pass) as u64, Ordering::Relaxed);
                }
            }
        };
        tokio::pin!(up, down);
        let mut up_done = false;
        loop {
            tokio::select! {
                () = &mut up, if !up_done => up_done = true,
                d = &mut down => break d,
            }
        }
    };
    match down_result {
        Down::Ended => debug!("connection ended"),
        Down::Cut(offset) => {
            // Counted by `claim_cut`.
            {
                let mut plan = shared.plan();
                plan.last_cut = Some(CutEvent {
                    connection: n,
                    offset,
                });
                plan.hold_until = Some(Instant::now() + shared.accept_delay);
            }
            if tokio::time::timeout(DRAIN_LIMIT, drained(&client))
                .await
                .is_err()
            {
                warn!(
                    offset,
                    "the client did not take the bytes before the cut; resetting anyway"
                );
            }
            debug!(offset, "cut: resetting the client connection");
            reset(client);
            drop(upstream);
        }
    }
}

/// Waits until the kernel has transmitted and the peer acknowledged every byte written to `stream`.
///
/// A reset discards whatever is still in the send queue, so without this a client that reads slower
/// than the proxy writes would receive fewer than the planned bytes. With `TCP_NOTSENT_LOWAT` 1 the
/// socket polls writable only once nothing is left unsent (and half the send buffer is free, i.e.
/// acknowledged). A fresh registration of a duplicate descriptor reports the current state (epoll
/// reports readiness at `EPOLL_CTL_ADD`), which the original registration's cached readiness would not.
#[cfg(any(target_os = "linux", target_os = "android"))]
async fn drained(stream: &TcpStream) -> io::Result<()> {
    let sock = socket2::SockRef::from(stream);
    sock.set_tcp_notsent_lowat(1)?;
    let probe = TcpStream::from_std(std::net::TcpStream::from(sock.try_clone()?))?;
    probe.writable().await
}

/// Elsewhere, a short pause is the best available (loopback drains within it when the client reads).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
async fn drained(_stream: &TcpStream) -> io::Result<()> {
    tokio::time::sleep(Duration::from_millis(20)).await;
    Ok(())
}

/// Closes `stream` with a TCP reset: `SO_LINGER` 0 makes `close` send RST (discarding anything unsent)
/// instead of FIN.
fn reset(stream: TcpStream) {
    if let Err(e) = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO)) {
        warn!(error = %e, "SO_LINGER 0 failed; the close will be a FIN");
    }
    drop(stream);
}
