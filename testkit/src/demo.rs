//! The demo behind `ssegate demo`: the field failure reproduced over real TCP on loopback, and the
//! guard preventing it.
//!
//! For each [`ServerMode`], a [`Harness`] starts the loopback MCP server and the fault-injecting
//! proxy in front of it, measures where the `big_result` response's events sit in the raw byte
//! stream ([`Layout`]), and runs trials: each one queues a cut at an offset drawn from a seeded PRNG
//! over the small events (priming, progress) and the start, middle and last bytes of the big result
//! event, then calls the tool with either client:
//!
//! - [`NaiveClient`]: the failure, reproduced. It keeps its partial `data` buffer across the cut and
//!   appends the resumed stream's data to it, as the failing clients in the field did.
//! - the guarded [`Client`]: decoder + guard, resuming in place or renegotiating.
//!
//! [`ServerMode::Stateless`] speaks MCP 2026-07-28, where a cut stream cannot be resumed: the
//! naive client re-issues the call as a new request, as that revision tells clients to (the tool runs
//! again, whatever it does), the guarded client re-issues only a call known to be safe to repeat and
//! reports the others as outcome unknown. [`ServerMode::Tasks`] is the same server offering the
//! tasks extension: the guarded client's call runs as a task, and the cut (aimed at the response
//! that carries the result, the completed `tasks/get`) is recovered by reading the task again,
//! without running the tool again; the naive client, which does not use tasks, runs it again.
//!
//! Each trial is classified: [`TrialClass::Intact`] (the delivered bytes are exactly
//! [`expected_result`], or [`expected_result_2026_07_28`] for the id of the request that was answered), [`TrialClass::SilentCorruption`] (something else was delivered without an
//! error) or [`TrialClass::Refused`] (an error, nothing delivered).
//!
//! **Several instances** ([`DemoConfig::instances`], [`DemoConfig::store`]): the harness starts N
//! server instances sharing one [`SessionDirectory`] (every instance knows every session, as behind
//! a load balancer) and puts the [`balancer`](crate::server::balancer) between the proxy and them,
//! so each resume lands on another instance than the one whose response was cut. With
//! [`DemoStore::Memory`] each instance has its own buffers: the resume misses, as in load-balanced
//! deployments. With [`DemoStore::Redis`] every instance appends to and replays from one Redis, and
//! the guarded client resumes in place across instances.
#![forbid(unsafe_code)]

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::{Value, json};
use tracing::{Instrument, debug, info_span};

use ssegate::client::{self, CallOptions, Client, ClientConfig, Retry};
use ssegate::replay::{self, RedisConfig, RedisStore, StoreError};
use ssegate::sse::Data;

use crate::http1::{self, WireError};
use crate::proxy::{Cut, ProxyConfig, RunningProxy};
use crate::rng::SplitMix64;
use crate::server::balancer::RunningBalancer;
use crate::server::{
    DEFAULT_SEED, MCP_PATH, RunningServer, ServerConfig, ServerMode, ServerStore, SessionDirectory,
    VERSION_2026_07_28, expected_result, expected_result_2026_07_28,
};

/// Trials per server mode and client by default.
pub const DEFAULT_TRIALS: usize = 32;

/// The most server instances a demo runs.
pub const MAX_INSTANCES: usize = 16;

/// Where the demo's server instances keep sent events ([`DemoConfig::store`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum DemoStore {
    /// A replay buffer per session in each instance (the default).
    #[default]
    Memory,
    /// One Redis shared by every instance, at this URL (`redis://HOST:PORT`).
    Redis(String),
}

impl DemoStore {
    /// `memory` or `redis` (the `store` key of a row).
    pub fn as_str(&self) -> &'static str {
        match self {
            DemoStore::Memory => "memory",
            DemoStore::Redis(_) => "redis",
        }
    }
}

impl fmt::Display for DemoStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DemoStore::Memory => f.write_str("memory"),
            DemoStore::Redis(url) => f.write_str(url),
        }
    }
}

/// A store argument that is neither `memory` nor a `redis://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownStore(pub String);

impl fmt::Display for UnknownStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown store {:?} (expected memory or redis://HOST:PORT)",
            self.0
        )
    }
}

impl std::error::Error for UnknownStore {}

impl FromStr for DemoStore {
    type Err = UnknownStore;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("memory") {
            Ok(DemoStore::Memory)
        } else if s.starts_with("redis://") && s.len() > "redis://".len() {
            Ok(DemoStore::Redis(s.to_owned()))
        } else {
            Err(UnknownStore(s.to_owned()))
        }
    }
}

/// The JSON-RPC id both clients give the `tools/call` (each trial uses a fresh client).
const CALL_ID: i64 = 1;

/// The demo's settings. Setters take `&mut self` and chain.
#[derive(Clone, Debug)]
pub struct DemoConfig {
    trials: usize,
    seed: u64,
    size: usize,
    reconnect_delay: Duration,
    retry_ms: u64,
    replay_timeout: Duration,
    trial_timeout: Duration,
    modes: Vec<ServerMode>,
    instances: usize,
    store: DemoStore,
}

impl Default for DemoConfig {
    /// 32 trials per row, seed 1, a 4 MiB result, a 250 ms reconnect delay at the proxy, `retry: 50`
    /// from the server, a 2 s replay timeout, 30 s per trial, every [`ServerMode`], one instance, the
    /// in-memory store.
    fn default() -> Self {
        DemoConfig {
            trials: DEFAULT_TRIALS,
            seed: 1,
            size: crate::server::DEFAULT_RESULT_SIZE,
            reconnect_delay: Duration::from_millis(250),
            retry_ms: 50,
            replay_timeout: Duration::from_secs(2),
            trial_timeout: Duration::from_secs(30),
            modes: ServerMode::ALL.to_vec(),
            instances: 1,
            store: DemoStore::Memory,
        }
    }
}

impl DemoConfig {
    /// Trials per server mode and client.
    pub fn trials(&mut self, n: usize) -> &mut Self {
        self.trials = n;
        self
    }

    /// Seed of the PRNG that draws the cut offsets.
    pub fn seed(&mut self, seed: u64) -> &mut Self {
        self.seed = seed;
        self
    }

    /// Size of the big result's text, in bytes. The replay budget is set to half of it (between
    /// 4 KiB and 1 MiB), so the result never fits and evicts older events, as in the field report.
    pub fn size(&mut self, bytes: usize) -> &mut Self {
        self.size = bytes;
        self
    }

    /// How long the proxy holds the connection after a cut (the reconnect delay).
    pub fn reconnect_delay(&mut self, delay: Duration) -> &mut Self {
        self.reconnect_delay = delay;
        self
    }

    /// The server's `retry:` field, in milliseconds.
    pub fn retry_ms(&mut self, ms: u64) -> &mut Self {
        self.retry_ms = ms;
        self
    }

    /// The guarded client's replay timeout.
    pub fn replay_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.replay_timeout = timeout;
        self
    }

    /// Upper bound on one trial; a trial that exceeds it counts as refused.
    pub fn trial_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.trial_timeout = timeout;
        self
    }

    /// The server modes to run, in order.
    pub fn modes(&mut self, modes: &[ServerMode]) -> &mut Self {
        self.modes = modes.to_vec();
        self
    }

    /// Server instances per mode (1 to [`MAX_INSTANCES`]); with more than one, each resume is sent
    /// to another instance than the one that served the cut response.
    pub fn instances(&mut self, n: usize) -> &mut Self {
        self.instances = n.clamp(1, MAX_INSTANCES);
        self
    }

    /// Where the instances keep sent events.
    pub fn store(&mut self, store: DemoStore) -> &mut Self {
        self.store = store;
        self
    }

    fn server_config(&self, mode: ServerMode) -> ServerConfig {
        let budget = (self.size / 2).clamp(4 << 10, 1 << 20);
        let mut replay = replay::BufferConfig::default();
        replay
            .max_session_bytes(budget)
            .max_event_bytes(budget)
            .retry_after(Duration::from_secs(1));
        let mut c = ServerConfig::default();
        c.mode(mode)
            .result_size(self.size)
            .seed(DEFAULT_SEED)
            .retry_ms(self.retry_ms)
            .progress_count(3)
            .replay(replay);
        c
    }
}

/// Which client a trial used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClientKind {
    /// [`NaiveClient`].
    Naive,
    /// The guarded [`Client`], the call marked retryable (the tool may run twice): a lost stream is
    /// renegotiated and the call re-issued.
    Guarded,
    /// The guarded [`Client`] calling as for a non-idempotent tool ([`Retry::Never`]): a lost
    /// stream is [`client::ClientError::OutcomeUnknown`], never a second run.
    GuardedOnce,
}

impl ClientKind {
    /// Every client, in table order.
    pub const ALL: [ClientKind; 3] = [
        ClientKind::Naive,
        ClientKind::Guarded,
        ClientKind::GuardedOnce,
    ];

    /// `naive`, `guarded` or `guarded-once`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientKind::Naive => "naive",
            ClientKind::Guarded => "guarded",
            ClientKind::GuardedOnce => "guarded-once",
        }
    }

    /// Whether this is one of the guarded clients.
    pub fn is_guarded(self) -> bool {
        !matches!(self, ClientKind::Naive)
    }
}

impl fmt::Display for ClientKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a trial ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrialClass {
    /// The delivered bytes are exactly the expected result.
    Intact,
    /// Other bytes were delivered, with no error.
    SilentCorruption,
    /// An error, nothing delivered.
    Refused,
}

/// Where a cut falls in the `tools/call` response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Region {
    /// In the priming or progress events (or between them).
    SmallEvents,
    /// The first bytes of the big result event (its `id:` line, the start of its `data:` line).
    BigStart,
    /// The middle of the big result event.
    BigMiddle,
    /// The last bytes of the big result event and the end of the response.
    BigEnd,
}

impl Region {
    /// The regions, in the order trials cycle through them.
    pub const ALL: [Region; 4] = [
        Region::SmallEvents,
        Region::BigStart,
        Region::BigMiddle,
        Region::BigEnd,
    ];
}

/// One trial's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrialOutcome {
    /// How it ended.
    pub class: TrialClass,
    /// Delivered after resuming in place (no new session), or, on a task server, after reading
    /// the task again: the tool did not run again.
    pub resumed: bool,
    /// The request was issued again (on a new session; on MCP 2026-07-28 as a new request): the
    /// tool ran again.
    pub renegotiated: bool,
    /// The cut offset (bytes of the raw response forwarded before the reset).
    pub cut: u64,
    /// The error text, if any (the naive client's error, or the guarded client's refusals).
    pub detail: Option<String>,
}

/// Where the `tools/call` response's parts sit in the raw bytes the proxy forwards (HTTP head,
/// chunked framing and SSE frames), measured on one uncut call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Offset of the priming event's first byte.
    pub small_start: u64,
    /// Offset of the big result event's first byte (its `id:` line).
    pub big_start: u64,
    /// Offset just past the big result event's blank line.
    pub big_end: u64,
    /// Total raw response bytes.
    pub total: u64,
}

impl Layout {
    /// A cut offset in `region`, from a random number.
    pub fn offset(&self, region: Region, r: u64) -> u64 {
        let big = self.big_end - self.big_start;
        let pick = |lo: u64, width: u64| lo + r % width.max(1);
        match region {
            Region::SmallEvents => pick(self.small_start, self.big_start - self.small_start),
            Region::BigStart => pick(self.big_start, (big / 8).clamp(1, 4096)),
            Region::BigMiddle => pick(self.big_start + big / 8, big - big / 4),
            Region::BigEnd => {
                let w = (big / 8).clamp(1, 256);
                pick(self.big_end - w, w + (self.total - self.big_end))
            }
        }
    }

    /// `trials` cuts from `seed`: the regions in turn, a random offset in each.
    pub fn plan(&self, seed: u64, trials: usize) -> Vec<(Region, u64)> {
        let mut rng = SplitMix64(seed);
        (0..trials)
            .map(|i| {
                let region = Region::ALL[i % Region::ALL.len()];
                (region, self.offset(region, rng.next()))
            })
            .collect()
    }
}

/// A demo error: setting up the server or the proxy, or measuring the response layout.
#[derive(Debug)]
#[non_exhaustive]
pub enum DemoError {
    /// Binding the server or the proxy failed.
    Io(io::Error),
    /// The uncut measurement call failed.
    Measure(NaiveError),
    /// The measured response does not look like the `big_result` stream.
    Layout(LayoutError),
    /// The Redis store could not be reached.
    Store(StoreError),
}

/// What is wrong with a measured response layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutError {
    /// The body is not a sequence of whole SSE frames (or has fewer than two).
    NotWholeFrames,
    /// The bytes before the body are not a plausible HTTP head (17..4096 bytes).
    ImplausibleHead,
    /// The last frame is shorter than the configured result size.
    NoBigResult,
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LayoutError::NotWholeFrames => "the body is not whole SSE frames",
            LayoutError::ImplausibleHead => "the head size is implausible",
            LayoutError::NoBigResult => "the last frame is not the big result",
        })
    }
}

impl fmt::Display for DemoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DemoError::Io(e) => write!(f, "I/O error: {e}"),
            DemoError::Measure(e) => write!(f, "measuring the response layout: {e}"),
            DemoError::Layout(e) => write!(f, "unexpected response layout: {e}"),
            DemoError::Store(e) => write!(f, "connecting to the replay store: {e}"),
        }
    }
}

impl std::error::Error for DemoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DemoError::Io(e) => Some(e),
            DemoError::Measure(e) => Some(e),
            DemoError::Layout(_) => None,
            DemoError::Store(e) => Some(e),
        }
    }
}

impl From<io::Error> for DemoError {
    fn from(e: io::Error) -> Self {
        DemoError::Io(e)
    }
}

/// A server in one mode (or several instances behind the balancer) with the proxy in front, on
/// loopback ports.
#[derive(Debug)]
pub struct Harness {
    mode: ServerMode,
    servers: Vec<RunningServer>,
    balancer: Option<RunningBalancer>,
    proxy: RunningProxy,
    layout: Layout,
    expected: Bytes,
    config: DemoConfig,
}

impl Harness {
    /// Starts the server instances (with the balancer when there are several) and the proxy on
    /// `127.0.0.1` and measures the [`Layout`].
    pub async fn start(mode: ServerMode, config: &DemoConfig) -> Result<Harness, DemoError> {
        let mut server_config = config.server_config(mode);
        if config.instances > 1 {
            server_config.sessions(SessionDirectory::default());
        }
        let mut servers = Vec::with_capacity(config.instances);
        for _ in 0..config.instances {
            let mut c = server_config.clone();
            if let DemoStore::Redis(url) = &config.store {
                // One connection per instance, as separate processes would have.
                let mut rc = RedisConfig::default();
                rc.ttl(Duration::from_secs(120))
                    .retry_after(Duration::from_secs(1));
                let store = RedisStore::connect(url, rc)
                    .await
                    .map_err(DemoError::Store)?;
                c.store(ServerStore::Redis(store));
            }
            servers.push(
                c.start("127.0.0.1:0".parse().expect("a socket address"))
                    .await?,
            );
        }
        let balancer = if servers.len() > 1 {
            let addrs: Vec<SocketAddr> = servers.iter().map(RunningServer::addr).collect();
            Some(RunningBalancer::start(&addrs).await?)
        } else {
            None
        };
        let upstream = balancer
            .as_ref()
            .map_or_else(|| servers[0].addr(), RunningBalancer::addr);
        let mut pc = ProxyConfig::default();
        pc.accept_delay(config.reconnect_delay).seed(config.seed);
        let proxy = pc.start(upstream).await?;
        let expected = expected_for(mode, &json!(CALL_ID), config.size);
        let layout = measure(&proxy, mode, config).await?;
        debug!(%mode, ?layout, "harness ready");
        Ok(Harness {
            mode,
            servers,
            balancer,
            proxy,
            layout,
            expected,
            config: config.clone(),
        })
    }

    /// The server mode.
    pub fn mode(&self) -> ServerMode {
        self.mode
    }

    /// Where the response's events sit.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The exact result a trial must deliver.
    pub fn expected(&self) -> &Bytes {
        &self.expected
    }

    /// The (first) server instance (for its counters).
    pub fn server(&self) -> &RunningServer {
        &self.servers[0]
    }

    /// Every server instance; the first one serves every `POST`, the others the resumes.
    pub fn servers(&self) -> &[RunningServer] {
        &self.servers
    }

    /// The balancer, when there are several instances.
    pub fn balancer(&self) -> Option<&RunningBalancer> {
        self.balancer.as_ref()
    }

    /// The proxy (for its counters).
    pub fn proxy(&self) -> &RunningProxy {
        &self.proxy
    }

    /// One trial: cut the `tools/call` response at `cut`, call with `client`, classify.
    pub async fn trial(&self, client: ClientKind, cut: u64) -> TrialOutcome {
        let span = info_span!("trial", mode = %self.mode, %client, cut);
        let run = async {
            match client {
                ClientKind::Naive => self.naive_trial(cut).await,
                ClientKind::Guarded => self.guarded_trial(cut, Retry::Always).await,
                ClientKind::GuardedOnce => self.guarded_trial(cut, Retry::Never).await,
            }
        };
        match tokio::time::timeout(self.config.trial_timeout, run.instrument(span)).await {
            Ok(outcome) => outcome,
            Err(_) => TrialOutcome {
                class: TrialClass::Refused,
                resumed: false,
                renegotiated: false,
                cut,
                detail: Some(format!(
                    "trial timed out after {} ms",
                    self.config.trial_timeout.as_millis()
                )),
            },
        }
    }

    /// Whether `delivered` is exactly the result a trial must deliver: [`Harness::expected`], or
    /// on [`ServerMode::Stateless`] the same result answering the new id of a call issued again.
    pub fn is_expected(&self, delivered: &Data) -> bool {
        self.classify(delivered) == TrialClass::Intact
    }

    fn classify(&self, delivered: &Data) -> TrialClass {
        if delivered.eq_bytes(&self.expected) {
            return TrialClass::Intact;
        }
        // On 2026-07-28 a call issued again is a new request with a new id: the answer to it is
        // the expected result for that id.
        if self.mode.is_stateless() {
            let id = serde_json::from_slice::<Value>(&delivered.contiguous())
                .ok()
                .and_then(|v| v.get("id").cloned());
            if let Some(id) = id.filter(|id| *id != json!(CALL_ID))
                && delivered.eq_bytes(&expected_for(self.mode, &id, self.config.size))
            {
                return TrialClass::Intact;
            }
        }
        TrialClass::SilentCorruption
    }

    /// The naive client's call, cut at `cut`: a fresh session through the proxy, `big_result`, then
    /// `DELETE` (on [`ServerMode::Stateless`]: `server/discover`, then `big_result`).
    pub async fn naive_call(&self, cut: u64) -> Result<NaiveDelivery, NaiveError> {
        self.proxy.clear_cuts();
        let mut naive = NaiveClient::for_mode(self.proxy.addr(), self.mode).await?;
        self.proxy.set_next_cut(Cut::At(cut));
        let result = naive.call_tool(CALL_ID, "big_result", json!({})).await;
        naive.close().await;
        result
    }

    async fn naive_trial(&self, cut: u64) -> TrialOutcome {
        match self.naive_call(cut).await {
            Ok(d) => TrialOutcome {
                class: self.classify(&Data::from(d.bytes)),
                resumed: d.reconnects > 0,
                renegotiated: d.reissues > 0,
                cut,
                detail: None,
            },
            Err(e) => TrialOutcome {
                class: TrialClass::Refused,
                resumed: false,
                renegotiated: false,
                cut,
                detail: Some(e.to_string()),
            },
        }
    }

    /// The guarded client's call, cut at `cut`: a fresh session through the proxy, `big_result`
    /// with the re-issue rule `retry`, then `DELETE`. Returns what [`Client::call_with`] returned.
    pub async fn guarded_call(
        &self,
        cut: u64,
        retry: Retry,
    ) -> Result<client::Response, client::ClientError> {
        self.proxy.clear_cuts();
        let mut config = ClientConfig::default();
        config
            .replay_timeout(self.config.replay_timeout)
            // The proxy cuts "the next connection": each request must open its own.
            .reuse_connections(false);
        let client = Client::connect_addr(self.proxy.addr(), config).await?;
        if client.is_stateless() {
            // A 2026-07-28 client lists the tools before calling one (to learn the headers it
            // takes): list them now, so that the cut falls on the call.
            client.list_tools().await?;
        }
        if self.mode == ServerMode::Tasks {
            // The result travels in a later response (the completed `tasks/get`): cut the first
            // response that reaches the offset, and only that one.
            self.proxy.set_default_cut(Cut::At(cut));
            self.proxy.set_max_cuts(Some(self.proxy.stats().cuts + 1));
        } else {
            self.proxy.set_next_cut(Cut::At(cut));
        }
        let mut options = CallOptions::default();
        options.retry(retry);
        let result = client
            .call_with(
                "tools/call",
                json!({"name": "big_result", "arguments": {}}),
                &options,
            )
            .await;
        if let Err(e) = client.close().await {
            debug!(error = %e, "closing the session failed");
        }
        if self.mode == ServerMode::Tasks {
            self.proxy.set_default_cut(Cut::None);
            self.proxy.set_max_cuts(None);
        }
        result
    }

    async fn guarded_trial(&self, cut: u64, retry: Retry) -> TrialOutcome {
        match self.guarded_call(cut, retry).await {
            Ok(r) => TrialOutcome {
                class: self.classify(r.message.data()),
                resumed: (r.outcome.resumes > 0 || r.outcome.task_rereads > 0)
                    && r.outcome.renegotiations == 0
                    && r.outcome.attempts == 1,
                renegotiated: r.outcome.renegotiations > 0 || r.outcome.attempts > 1,
                cut,
                detail: (!r.outcome.refusals.is_empty()).then(|| {
                    let texts: Vec<String> =
                        r.outcome.refusals.iter().map(ToString::to_string).collect();
                    texts.join(" | ")
                }),
            },
            Err(e) => TrialOutcome {
                class: TrialClass::Refused,
                resumed: false,
                renegotiated: matches!(&e, client::ClientError::Refused { attempts, .. } if *attempts > 1),
                cut,
                detail: Some(e.to_string()),
            },
        }
    }

    /// Stops the proxy, the balancer and the servers.
    pub async fn shutdown(self) {
        self.proxy.shutdown().await;
        if let Some(b) = self.balancer {
            b.shutdown().await;
        }
        for s in self.servers {
            s.shutdown().await;
        }
    }
}

/// Calls `big_result` once through the proxy without a cut and locates its events in the raw bytes.
///
/// The proxy counts raw bytes: the HTTP head, then each SSE frame as one chunk of the chunked
/// encoding (`<hex size>\r\n<frame>\r\n`), then `0\r\n\r\n`. The body (de-chunked) gives the frames,
/// the proxy's byte counter the total, and the head is what remains.
async fn measure(
    proxy: &RunningProxy,
    mode: ServerMode,
    config: &DemoConfig,
) -> Result<Layout, DemoError> {
    if mode == ServerMode::Tasks {
        return measure_task_read(proxy).await;
    }
    let mut naive = NaiveClient::for_mode(proxy.addr(), mode)
        .await
        .map_err(DemoError::Measure)?;
    let before = proxy.stats().bytes_down;
    let res = naive
        .post(&naive.call_request(CALL_ID, "big_result", json!({})))
        .await
        .map_err(DemoError::Measure)?;
    let body = http1::read_body(res.into_body(), usize::MAX)
        .await
        .map_err(|source| {
            DemoError::Measure(NaiveError::Wire {
                during: NaiveStep::Call,
                source,
            })
        })?;
    // The proxy counts a chunk after writing it; let it finish counting the last one.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let total = proxy.stats().bytes_down - before;
    naive.close().await;
    let mut frames = Vec::new();
    let mut start = 0;
    while let Some(i) = memchr::memmem::find(&body[start..], b"\n\n") {
        frames.push((start + i + 2 - start) as u64);
        start += i + 2;
    }
    let bad = DemoError::Layout;
    if start != body.len() || frames.len() < 2 {
        return Err(bad(LayoutError::NotWholeFrames));
    }
    let hex_line = |len: u64| format!("{len:X}").len() as u64 + 2;
    let body_raw: u64 = frames.iter().map(|&l| hex_line(l) + l + 2).sum::<u64>() + 5;
    let head = total
        .checked_sub(body_raw)
        .filter(|&h| h > 16 && h < 4096)
        .ok_or_else(|| bad(LayoutError::ImplausibleHead))?;
    let big_len = *frames.last().expect("two frames at least");
    let big_end = total - 7;
    let config_size = config.size as u64;
    if big_len < config_size {
        return Err(bad(LayoutError::NoBigResult));
    }
    Ok(Layout {
        small_start: head + hex_line(frames[0]),
        big_start: big_end - big_len,
        big_end,
        total,
    })
}

/// On [`ServerMode::Tasks`] the result travels in the completed `tasks/get` answer (a JSON body):
/// runs one task by hand through the proxy and locates that answer's parts. The "small events"
/// are the body's first bytes (before the task's `result` member); the "big event" the result.
async fn measure_task_read(proxy: &RunningProxy) -> Result<Layout, DemoError> {
    let naive = NaiveClient::stateless(proxy.addr())
        .await
        .map_err(DemoError::Measure)?;
    let step = NaiveStep::Call;
    let wire = |source| {
        DemoError::Measure(NaiveError::Wire {
            during: step,
            source,
        })
    };
    let extension = json!({"extensions": {crate::server::TASKS_EXTENSION: {}}});
    let mut call = json!({"name": "big_result", "arguments": {}});
    call["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": VERSION_2026_07_28,
        crate::server::CLIENT_CAPABILITIES: extension,
    });
    let body =
        to_bytes(&json!({"jsonrpc": "2.0", "id": CALL_ID, "method": "tools/call", "params": call}));
    let res = naive
        .send(
            Method::POST,
            &[("mcp-method", "tools/call"), ("mcp-name", "big_result")],
            body,
            step,
        )
        .await
        .map_err(DemoError::Measure)?;
    let handle: Value = serde_json::from_slice(
        &read_json_body(res, step)
            .await
            .map_err(DemoError::Measure)?,
    )
    .map_err(|_| DemoError::Layout(LayoutError::NoBigResult))?;
    let task_id = handle["result"]["taskId"]
        .as_str()
        .ok_or(DemoError::Layout(LayoutError::NoBigResult))?
        .to_owned();
    for attempt in 0..200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let mut params = json!({"taskId": task_id});
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": VERSION_2026_07_28,
            crate::server::CLIENT_CAPABILITIES: extension,
        });
        let get = to_bytes(
            &json!({"jsonrpc": "2.0", "id": 100 + attempt, "method": "tasks/get", "params": params}),
        );
        let before = proxy.stats().bytes_down;
        let res = naive
            .send(
                Method::POST,
                &[("mcp-method", "tasks/get"), ("mcp-name", &task_id)],
                get,
                step,
            )
            .await
            .map_err(DemoError::Measure)?;
        let body = http1::read_body(res.into_body(), usize::MAX)
            .await
            .map_err(wire)?;
        // The proxy counts a chunk after writing it; let it finish counting the last one.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let total = proxy.stats().bytes_down - before;
        let Some(inner) = memchr::memmem::find(&body, b"\"result\":{\"content\"") else {
            continue;
        };
        let head = total
            .checked_sub(body.len() as u64)
            .filter(|&h| h > 16 && h < 4096)
            .ok_or(DemoError::Layout(LayoutError::ImplausibleHead))?;
        return Ok(Layout {
            small_start: head,
            big_start: head + inner as u64,
            big_end: total,
            total,
        });
    }
    Err(DemoError::Layout(LayoutError::NoBigResult))
}

/// The exact `big_result` response a server in `mode` sends to request `id`.
fn expected_for(mode: ServerMode, id: &Value, size: usize) -> Bytes {
    if mode.is_stateless() {
        expected_result_2026_07_28(id, size, DEFAULT_SEED)
    } else {
        expected_result(id, size, DEFAULT_SEED)
    }
}

/// What the naive client was doing when it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NaiveStep {
    /// `initialize`.
    Initialize,
    /// `server/discover` (MCP 2026-07-28).
    Discover,
    /// `notifications/initialized`.
    Initialized,
    /// The `tools/call` POST and its stream.
    Call,
    /// `GET` + `Last-Event-ID`.
    Resume,
    /// `DELETE`.
    Delete,
}

impl NaiveStep {
    /// A lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            NaiveStep::Initialize => "initialize",
            NaiveStep::Discover => "server/discover",
            NaiveStep::Initialized => "initialized",
            NaiveStep::Call => "tools/call",
            NaiveStep::Resume => "resume",
            NaiveStep::Delete => "delete",
        }
    }
}

/// The naive client's error: what it reports instead of a result.
#[derive(Debug)]
#[non_exhaustive]
pub enum NaiveError {
    /// An HTTP exchange failed (connect, request, body, timeout).
    Wire {
        /// The step.
        during: NaiveStep,
        /// What failed.
        source: WireError,
    },
    /// The server answered a status other than `200`.
    Status {
        /// The step.
        during: NaiveStep,
        /// The status code.
        status: u16,
    },
    /// `initialize` was answered without an `Mcp-Session-Id` header.
    NoSession,
    /// The stream stalled for longer than the read timeout.
    Stalled(Duration),
    /// A resume was answered `200` with an empty body.
    EmptyResume,
    /// The connection was cut before any event id arrived: nothing to resume from.
    NoEventId,
    /// The stream was cut again after the last allowed reconnect (or, on MCP 2026-07-28, the last
    /// allowed re-issue).
    GaveUp {
        /// Reconnects (or re-issues) made.
        reconnects: u32,
    },
}

impl fmt::Display for NaiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NaiveError::Wire { during, source } => write!(f, "{}: {source}", during.as_str()),
            NaiveError::Status { during, status } => {
                write!(f, "{} answered {status}", during.as_str())
            }
            NaiveError::NoSession => f.write_str("no Mcp-Session-Id"),
            NaiveError::Stalled(after) => write!(
                f,
                "timed out reading the stream after {} ms",
                after.as_millis()
            ),
            NaiveError::EmptyResume => f.write_str("the resumed stream was empty"),
            NaiveError::NoEventId => f.write_str("cut before any event id"),
            NaiveError::GaveUp { reconnects } => {
                write!(f, "gave up after {reconnects} reconnects")
            }
        }
    }
}

impl std::error::Error for NaiveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NaiveError::Wire { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What the naive client handed to the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NaiveDelivery {
    /// The assembled bytes, unvalidated.
    pub bytes: Bytes,
    /// Reconnects it made.
    pub reconnects: u32,
    /// Times it issued the call again as a new request (MCP 2026-07-28): the tool ran again.
    pub reissues: u32,
}

/// **The failure, reproduced**: an MCP client that resumes an SSE stream the way the failing
/// clients in the field did.
///
/// It splits lines itself and streams each `data:` value into its event buffer as the bytes
/// arrive. When the connection is cut inside an event, it keeps that buffer, reconnects with
/// `Last-Event-ID` of the last complete event, and appends the resumed stream's data onto the
/// partial buffer. The first non-notification event is handed to the application as the response,
/// without validation: after a cut inside the result, a server that replays the interrupted event
/// whole yields `<partial prefix>{"jsonrpc"...`, and a server that restarts the stream yields the
/// truncated prefix itself. A `409`, a `404` or an empty replay makes it report an error.
///
/// On MCP 2026-07-28 ([`NaiveClient::stateless`]) there is nothing to resume: when the stream is
/// cut before the response, it issues the call again as a new request with a new id, as that
/// revision tells clients to, whatever the tool does.
///
/// Do not use it for anything but showing the failure.
#[derive(Debug)]
pub struct NaiveClient {
    addr: SocketAddr,
    session: Option<String>,
    timeout: Duration,
    /// Speaks MCP 2026-07-28: `_meta` on every request, no session.
    stateless: bool,
}

/// How many times the naive client resumes one call before it gives up.
const NAIVE_MAX_RECONNECTS: u32 = 3;
/// Largest JSON body the naive client reads.
const NAIVE_MAX_JSON: usize = 1 << 20;

impl NaiveClient {
    /// Opens a session: `initialize`, `notifications/initialized`.
    pub async fn connect(addr: SocketAddr) -> Result<NaiveClient, NaiveError> {
        let mut c = NaiveClient {
            addr,
            session: None,
            timeout: Duration::from_secs(30),
            stateless: false,
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "naive", "version": "0"}}});
        let during = NaiveStep::Initialize;
        let res = c.send(Method::POST, &[], to_bytes(&init), during).await?;
        if res.status() != StatusCode::OK {
            return Err(NaiveError::Status {
                during,
                status: res.status().as_u16(),
            });
        }
        let session = res
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .ok_or(NaiveError::NoSession)?
            .to_owned();
        read_json_body(res, during).await?;
        c.session = Some(session);
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let during = NaiveStep::Initialized;
        let res = c.send(Method::POST, &[], to_bytes(&note), during).await?;
        read_json_body(res, during).await?;
        Ok(c)
    }

    /// Speaks MCP 2026-07-28: `server/discover`, and no session.
    pub async fn stateless(addr: SocketAddr) -> Result<NaiveClient, NaiveError> {
        let c = NaiveClient {
            addr,
            session: None,
            timeout: Duration::from_secs(30),
            stateless: true,
        };
        let discover = c.request(0, "server/discover", json!({}));
        let during = NaiveStep::Discover;
        let res = c
            .send(
                Method::POST,
                &[("mcp-method", "server/discover")],
                discover,
                during,
            )
            .await?;
        if res.status() != StatusCode::OK {
            return Err(NaiveError::Status {
                during,
                status: res.status().as_u16(),
            });
        }
        read_json_body(res, during).await?;
        Ok(c)
    }

    /// [`stateless`](Self::stateless) for [`ServerMode::Stateless`], else [`connect`](Self::connect).
    pub async fn for_mode(addr: SocketAddr, mode: ServerMode) -> Result<NaiveClient, NaiveError> {
        if mode.is_stateless() {
            NaiveClient::stateless(addr).await
        } else {
            NaiveClient::connect(addr).await
        }
    }

    /// A request's body: on MCP 2026-07-28 its `params` carry the version in `_meta`.
    fn request(&self, id: i64, method: &str, mut params: Value) -> Bytes {
        if self.stateless {
            params["_meta"] =
                json!({"io.modelcontextprotocol/protocolVersion": VERSION_2026_07_28});
        }
        to_bytes(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
    }

    fn call_request(&self, id: i64, tool: &str, arguments: Value) -> Bytes {
        self.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
    }

    async fn send(
        &self,
        method: Method,
        extra: &[(&str, &str)],
        body: Bytes,
        during: NaiveStep,
    ) -> Result<http::Response<hyper::body::Incoming>, NaiveError> {
        let mut headers = vec![("accept", "application/json, text/event-stream")];
        if let Some(s) = &self.session {
            headers.push(("mcp-session-id", s.as_str()));
        }
        if self.stateless {
            headers.push(("mcp-protocol-version", VERSION_2026_07_28));
        }
        headers.extend_from_slice(extra);
        http1::exchange(self.addr, MCP_PATH, method, &headers, body, self.timeout)
            .await
            .map_err(|source| NaiveError::Wire { during, source })
    }

    async fn post(
        &self,
        body: &Bytes,
    ) -> Result<http::Response<hyper::body::Incoming>, NaiveError> {
        self.send(Method::POST, &[], body.clone(), NaiveStep::Call)
            .await
    }

    /// Calls a tool and returns whatever it assembled as the response.
    pub async fn call_tool(
        &mut self,
        id: i64,
        name: &str,
        arguments: Value,
    ) -> Result<NaiveDelivery, NaiveError> {
        if self.stateless {
            return self.call_tool_stateless(id, name, arguments).await;
        }
        let res = self.post(&self.call_request(id, name, arguments)).await?;
        if res.status() != StatusCode::OK {
            return Err(NaiveError::Status {
                during: NaiveStep::Call,
                status: res.status().as_u16(),
            });
        }
        let mut body = res.into_body();
        let mut sse = NaiveSse::default();
        let mut reconnects = 0u32;
        let mut got_bytes = true;
        loop {
            let next =
                tokio::time::timeout(self.timeout, http_body_util::BodyExt::frame(&mut body))
                    .await
                    .map_err(|_| NaiveError::Stalled(self.timeout))?;
            match next {
                Some(Ok(frame)) => {
                    let Ok(chunk) = frame.into_data() else {
                        continue;
                    };
                    got_bytes |= !chunk.is_empty();
                    if let Some(bytes) = sse.feed(&chunk) {
                        return Ok(NaiveDelivery {
                            bytes: Bytes::from(bytes),
                            reconnects,
                            reissues: 0,
                        });
                    }
                }
                _ => {
                    if !got_bytes {
                        return Err(NaiveError::EmptyResume);
                    }
                    sse.connection_lost();
                    let Some(last) = sse.last_id.clone() else {
                        return Err(NaiveError::NoEventId);
                    };
                    if reconnects == NAIVE_MAX_RECONNECTS {
                        return Err(NaiveError::GaveUp { reconnects });
                    }
                    reconnects += 1;
                    tokio::time::sleep(sse.retry).await;
                    let during = NaiveStep::Resume;
                    let res = self
                        .send(
                            Method::GET,
                            &[("last-event-id", last.as_str())],
                            Bytes::new(),
                            during,
                        )
                        .await?;
                    if res.status() != StatusCode::OK {
                        return Err(NaiveError::Status {
                            during,
                            status: res.status().as_u16(),
                        });
                    }
                    body = res.into_body();
                    got_bytes = false;
                }
            }
        }
    }

    /// MCP 2026-07-28: a stream cut before the response is issued again as a new request (ids `id`,
    /// `id + 1`, ...), at most [`NAIVE_MAX_RECONNECTS`] times.
    async fn call_tool_stateless(
        &mut self,
        id: i64,
        name: &str,
        arguments: Value,
    ) -> Result<NaiveDelivery, NaiveError> {
        let mut reissues = 0u32;
        loop {
            let request = self.call_request(id + i64::from(reissues), name, arguments.clone());
            let res = self.post(&request).await?;
            if res.status() != StatusCode::OK {
                return Err(NaiveError::Status {
                    during: NaiveStep::Call,
                    status: res.status().as_u16(),
                });
            }
            let mut body = res.into_body();
            let mut sse = NaiveSse::default();
            loop {
                let next =
                    tokio::time::timeout(self.timeout, http_body_util::BodyExt::frame(&mut body))
                        .await
                        .map_err(|_| NaiveError::Stalled(self.timeout))?;
                match next {
                    Some(Ok(frame)) => {
                        let Ok(chunk) = frame.into_data() else {
                            continue;
                        };
                        if let Some(bytes) = sse.feed(&chunk) {
                            return Ok(NaiveDelivery {
                                bytes: Bytes::from(bytes),
                                reconnects: 0,
                                reissues,
                            });
                        }
                    }
                    _ => break,
                }
            }
            if reissues == NAIVE_MAX_RECONNECTS {
                return Err(NaiveError::GaveUp {
                    reconnects: reissues,
                });
            }
            reissues += 1;
        }
    }

    /// Ends the session (`DELETE`), ignoring errors.
    pub async fn close(&mut self) {
        if self.session.is_some() {
            let during = NaiveStep::Delete;
            if let Ok(res) = self.send(Method::DELETE, &[], Bytes::new(), during).await {
                let _ = read_json_body(res, during).await;
            }
            self.session = None;
        }
    }
}

fn to_bytes(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).expect("a JSON value serializes"))
}

async fn read_json_body(
    res: http::Response<hyper::body::Incoming>,
    during: NaiveStep,
) -> Result<Bytes, NaiveError> {
    http1::read_body(res.into_body(), NAIVE_MAX_JSON)
        .await
        .map_err(|source| NaiveError::Wire { during, source })
}

/// The naive client's SSE state: a line buffer and a data buffer that survives cuts.
#[derive(Debug)]
struct NaiveSse {
    line: Vec<u8>,
    data: Vec<u8>,
    /// The data buffer ends with a partial value from a cut connection: the next `data:` value is
    /// appended directly, without the LF join.
    glued: bool,
    pending_id: Option<String>,
    last_id: Option<String>,
    retry: Duration,
}

impl Default for NaiveSse {
    fn default() -> Self {
        NaiveSse {
            line: Vec::new(),
            data: Vec::new(),
            glued: false,
            pending_id: None,
            last_id: None,
            retry: Duration::from_secs(1),
        }
    }
}

impl NaiveSse {
    /// Feeds bytes; returns the first non-notification message dispatched.
    fn feed(&mut self, mut chunk: &[u8]) -> Option<Vec<u8>> {
        while let Some(i) = memchr::memchr(b'\n', chunk) {
            let delivered = if self.line.is_empty() {
                self.line_done(&chunk[..i])
            } else {
                self.line.extend_from_slice(&chunk[..i]);
                let line = std::mem::take(&mut self.line);
                let d = self.line_done(&line);
                self.line = line;
                self.line.clear();
                d
            };
            chunk = &chunk[i + 1..];
            if delivered.is_some() {
                return delivered;
            }
        }
        self.line.extend_from_slice(chunk);
        None
    }

    fn push_data(&mut self, value: &[u8]) {
        if !self.data.is_empty() && !self.glued {
            self.data.push(b'\n');
        }
        self.glued = false;
        self.data.extend_from_slice(value);
    }

    fn line_done(&mut self, line: &[u8]) -> Option<Vec<u8>> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if let Some(id) = self.pending_id.take() {
                self.last_id = Some(id);
            }
            if self.data.is_empty() {
                return None;
            }
            let data = std::mem::take(&mut self.data);
            self.glued = false;
            let head = &data[..data.len().min(64)];
            if memchr::memmem::find(head, b"\"method\"").is_some() {
                return None;
            }
            return Some(data);
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line, &b""[..]),
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match name {
            b"data" => self.push_data(value),
            b"id" => self.pending_id = Some(String::from_utf8_lossy(value).into_owned()),
            b"retry" => {
                if let Some(ms) = std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    self.retry = Duration::from_millis(ms);
                }
            }
            _ => {}
        }
        None
    }

    /// The connection ended: the value of a `data:` line in progress was already streamed into the
    /// buffer, and the buffer is kept for the next connection.
    fn connection_lost(&mut self) {
        let line = std::mem::take(&mut self.line);
        if let Some(value) = line.strip_prefix(b"data:") {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            self.push_data(value);
            self.glued = true;
        }
        self.pending_id = None;
    }
}

/// One row of the demo's table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The server mode.
    pub server: ServerMode,
    /// The client.
    pub client: ClientKind,
    /// Trials run.
    pub trials: usize,
    /// Trials that delivered exactly the expected result.
    pub intact: usize,
    /// Trials that delivered something else, with no error.
    pub silent_corruption: usize,
    /// Trials that ended with an error and delivered nothing.
    pub refused: usize,
    /// Trials that delivered after resuming in place.
    pub resumed: usize,
    /// Trials that opened a new session and re-issued the request.
    pub renegotiated: usize,
    /// Server instances behind the balancer.
    pub instances: usize,
    /// Where the instances kept sent events: `memory` or `redis`.
    pub store: &'static str,
}

impl Row {
    fn new(server: ServerMode, client: ClientKind) -> Row {
        Row {
            instances: 1,
            store: "memory",
            server,
            client,
            trials: 0,
            intact: 0,
            silent_corruption: 0,
            refused: 0,
            resumed: 0,
            renegotiated: 0,
        }
    }

    /// Counts one trial.
    pub fn add(&mut self, t: &TrialOutcome) {
        self.trials += 1;
        match t.class {
            TrialClass::Intact => self.intact += 1,
            TrialClass::SilentCorruption => self.silent_corruption += 1,
            TrialClass::Refused => self.refused += 1,
        }
        self.resumed += usize::from(t.resumed);
        self.renegotiated += usize::from(t.renegotiated);
    }

    /// The row as the `--json` object, keys in table order, then `instances` and `store`.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"server\":\"{}\",\"client\":\"{}\",\"trials\":{},\"intact\":{},\"silent_corruption\":{},\"refused\":{},\"resumed\":{},\"renegotiated\":{},\"instances\":{},\"store\":\"{}\"}}",
            self.server.as_str(),
            self.client.as_str(),
            self.trials,
            self.intact,
            self.silent_corruption,
            self.refused,
            self.resumed,
            self.renegotiated,
            self.instances,
            self.store
        )
    }
}

/// `{"rows":[...]}`, one line, keys in table order.
pub fn rows_json(rows: &[Row]) -> String {
    let rows: Vec<String> = rows.iter().map(Row::to_json).collect();
    format!("{{\"rows\":[{}]}}", rows.join(","))
}

/// The rows as a readable table.
pub fn table(rows: &[Row]) -> String {
    // The instance and store columns appear only when a row is not the default (1, memory).
    let multi = rows.iter().any(|r| r.instances != 1 || r.store != "memory");
    let mut out = format!(
        "{:<9} {:<12} {:>6} {:>6} {:>17} {:>7} {:>7} {:>12}",
        "server",
        "client",
        "trials",
        "intact",
        "silent corruption",
        "refused",
        "resumed",
        "renegotiated"
    );
    if multi {
        out.push_str(&format!(" {:>9} {}", "instances", "store"));
    }
    out.push('\n');
    for r in rows {
        out.push_str(&format!(
            "{:<9} {:<12} {:>6} {:>6} {:>17} {:>7} {:>7} {:>12}",
            r.server.as_str(),
            r.client.as_str(),
            r.trials,
            r.intact,
            r.silent_corruption,
            r.refused,
            r.resumed,
            r.renegotiated
        ));
        if multi {
            out.push_str(&format!(" {:>9} {}", r.instances, r.store));
        }
        out.push('\n');
    }
    out
}

/// What the table shows, in a few lines: corruption by the naive client, none by the guarded ones,
/// which rows re-issued the call (the tool ran again), and which resumed in place.
pub fn conclusion(rows: &[Row]) -> String {
    let sum = |pick: &dyn Fn(&Row) -> bool, f: fn(&Row) -> usize| -> usize {
        rows.iter().filter(|r| pick(r)).map(f).sum()
    };
    let naive = |r: &Row| r.client == ClientKind::Naive;
    let guarded = |r: &Row| r.client.is_guarded();
    let naive_bad = sum(&naive, |r| r.silent_corruption);
    let naive_trials = sum(&naive, |r| r.trials);
    let guarded_bad = sum(&guarded, |r| r.silent_corruption);
    let guarded_trials = sum(&guarded, |r| r.trials);
    let names = |pick: &dyn Fn(&Row) -> bool| -> String {
        let v: Vec<String> = rows
            .iter()
            .filter(|r| pick(r))
            .map(|r| format!("{} {}", r.server, r.client))
            .collect();
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.join(", ")
        }
    };
    if guarded_bad > 0 {
        return format!(
            "BUG: a guarded client delivered a corrupt result in {guarded_bad} of {guarded_trials} trials (the naive client in {naive_bad} of {naive_trials})."
        );
    }
    let faulty: Vec<&str> = rows
        .iter()
        .filter(|r| naive(r) && r.silent_corruption > 0)
        .map(|r| r.server.as_str())
        .collect();
    let once_reran = sum(&|r: &Row| r.client == ClientKind::GuardedOnce, |r| {
        r.renegotiated
    });
    let mut out = format!(
        "The naive client silently delivered a corrupt result in {naive_bad} of {naive_trials} trials (servers: {}); the guarded clients never delivered a corrupt one.\n\
         Issued the call again (on a new session; on 2026-07-28 as a new request), so the tool ran again (safe only for idempotent tools): {}.\n\
         Recovered without running the tool again (resumed in place, or the task read again): {}.\n",
        if faulty.is_empty() {
            "none".to_owned()
        } else {
            faulty.join(", ")
        },
        names(&|r: &Row| r.renegotiated > 0),
        names(&|r: &Row| r.client.is_guarded() && r.resumed > 0),
    );
    let stateless_naive = |r: &Row| r.server.is_stateless() && r.client == ClientKind::Naive;
    if rows.iter().any(stateless_naive) {
        out.push_str(&format!(
            "On 2026-07-28 (stateless) nothing is resumable: the naive client ran the tool again in {} of {} trials without knowing it was safe.\n",
            sum(&stateless_naive, |r| r.renegotiated),
            sum(&stateless_naive, |r| r.trials),
        ));
    }
    let tasks_once = |r: &Row| r.server == ServerMode::Tasks && r.client == ClientKind::GuardedOnce;
    if rows.iter().any(tasks_once) {
        out.push_str(&format!(
            "With tasks (2026-07-28): guarded-once recovered {} of {} cut results by reading the task again (the tool ran once); {} cut(s) fell on the call's own answer, before its task handle: outcome unknown, as the specification leaves it.\n",
            sum(&tasks_once, |r| r.resumed),
            sum(&tasks_once, |r| r.trials),
            sum(&tasks_once, |r| r.refused),
        ));
    }
    if once_reran == 0 {
        out.push_str("guarded-once (a non-idempotent tool) never ran it again: each lost stream is a typed 'outcome unknown' refusal.");
    } else {
        out.push_str(&format!(
            "BUG: guarded-once (a non-idempotent tool) ran it again in {once_reran} trials."
        ));
    }
    out
}

/// One finished trial, as [`run`] reports it.
#[derive(Clone, Copy, Debug)]
pub struct TrialReport<'a> {
    /// The server mode.
    pub server: ServerMode,
    /// The client.
    pub client: ClientKind,
    /// Where the cut was aimed.
    pub region: Region,
    /// What happened.
    pub outcome: &'a TrialOutcome,
}

impl fmt::Display for TrialReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.outcome;
        write!(
            f,
            "{} {} cut={} ({:?}): {:?}",
            self.server, self.client, t.cut, self.region, t.class
        )?;
        if t.resumed {
            f.write_str(" resumed")?;
        }
        if t.renegotiated {
            f.write_str(" renegotiated")?;
        }
        if let Some(d) = &t.detail {
            write!(f, ": {d}")?;
        }
        Ok(())
    }
}

/// Runs every mode × client × trial; `on_trial` is called after each trial. Modes run
/// concurrently, each on its own server and proxy; trials within a mode run one at a time.
pub async fn run(
    config: &DemoConfig,
    on_trial: &(dyn Fn(&TrialReport<'_>) + Sync),
) -> Result<Vec<Row>, DemoError> {
    let per_mode = config.modes.iter().map(|&mode| async move {
        let harness = Harness::start(mode, config).await?;
        let plan = harness
            .layout()
            .plan(config.seed ^ mode_salt(mode), config.trials);
        let mut rows = Vec::new();
        for kind in ClientKind::ALL {
            let mut row = Row::new(mode, kind);
            row.instances = config.instances;
            row.store = config.store.as_str();
            for &(region, cut) in &plan {
                let t = harness.trial(kind, cut).await;
                debug!(%mode, %kind, ?region, cut, ?t, "trial");
                row.add(&t);
                on_trial(&TrialReport {
                    server: mode,
                    client: kind,
                    region,
                    outcome: &t,
                });
            }
            rows.push(row);
        }
        harness.shutdown().await;
        Ok::<_, DemoError>(rows)
    });
    let results = futures_util::future::join_all(per_mode).await;
    let mut rows = Vec::new();
    for r in results {
        rows.extend(r?);
    }
    Ok(rows)
}

fn mode_salt(mode: ServerMode) -> u64 {
    mode.as_str()
        .bytes()
        .fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(sse: &mut NaiveSse, s: &[u8]) -> Option<Vec<u8>> {
        sse.feed(s)
    }

    #[test]
    fn naive_appends_the_replay_onto_its_partial_buffer() {
        let mut sse = NaiveSse::default();
        assert_eq!(feed_all(&mut sse, b"id: 1-3\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"p\"}\n\nid: 1-4\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"res"), None);
        sse.connection_lost();
        assert_eq!(sse.last_id.as_deref(), Some("1-3"));
        let got = feed_all(
            &mut sse,
            b"id: 1-4\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
        )
        .unwrap();
        assert_eq!(
            got,
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"res{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"
        );
    }

    #[test]
    fn naive_restart_hands_over_the_truncated_prefix() {
        let mut sse = NaiveSse::default();
        assert_eq!(
            feed_all(
                &mut sse,
                b"id: 1-0\nretry: 5\ndata: \n\nid: 1-4\ndata: {\"id\":1,\"re"
            ),
            None
        );
        sse.connection_lost();
        assert_eq!(sse.retry, Duration::from_millis(5));
        let got = feed_all(&mut sse, b"id: 2-0\nretry: 5\ndata: \n\n").unwrap();
        assert_eq!(got, b"{\"id\":1,\"re");
    }

    #[test]
    fn plan_cycles_regions_within_bounds() {
        let l = Layout {
            small_start: 200,
            big_start: 1000,
            big_end: 101_000,
            total: 101_007,
        };
        let plan = l.plan(9, 400);
        for (i, (region, cut)) in plan.iter().enumerate() {
            assert_eq!(*region, Region::ALL[i % 4]);
            let ok = match region {
                Region::SmallEvents => (200..1000).contains(cut),
                Region::BigStart => (1000..1000 + 4096).contains(cut),
                Region::BigMiddle => (13_500..88_500).contains(cut),
                Region::BigEnd => (100_744..101_007).contains(cut),
            };
            assert!(ok, "{region:?} {cut}");
        }
    }

    #[test]
    fn table_and_json() {
        let mut r = Row::new(ServerMode::Boundary, ClientKind::Naive);
        r.add(&TrialOutcome {
            class: TrialClass::SilentCorruption,
            resumed: true,
            renegotiated: false,
            cut: 5,
            detail: None,
        });
        let text = rows_json(std::slice::from_ref(&r));
        assert_eq!(
            text,
            r#"{"rows":[{"server":"boundary","client":"naive","trials":1,"intact":0,"silent_corruption":1,"refused":0,"resumed":1,"renegotiated":0,"instances":1,"store":"memory"}]}"#
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["rows"][0]["silent_corruption"], 1);
        assert!(table(std::slice::from_ref(&r)).contains("boundary"));
        // The deployment columns only when a row is not one in-memory instance.
        assert!(!table(std::slice::from_ref(&r)).contains("instances"));
        r.instances = 2;
        r.store = "redis";
        let t = table(&[r]);
        assert!(
            t.lines().next().unwrap().ends_with("instances store"),
            "{t}"
        );
        assert!(t.lines().nth(1).unwrap().ends_with("2 redis"), "{t}");
    }

    #[test]
    fn stores_parse() {
        assert_eq!("memory".parse::<DemoStore>(), Ok(DemoStore::Memory));
        assert_eq!(
            "redis://127.0.0.1:6379".parse::<DemoStore>(),
            Ok(DemoStore::Redis("redis://127.0.0.1:6379".to_owned()))
        );
        assert!("redis://".parse::<DemoStore>().is_err());
        assert!("mem".parse::<DemoStore>().is_err());
        let mut c = DemoConfig::default();
        assert_eq!(c.instances(0).instances, 1);
        assert_eq!(c.instances(99).instances, MAX_INSTANCES);
    }
}
