//! `ssegate probe`: tells an MCP server operator how their server behaves on resumption.
//!
//! The probe opens a session, lists the tools, and calls one tool three times: once whole (the
//! baseline: where each event starts and ends), once cut in the middle of the largest event with
//! data, once cut at the event boundary before it (a stream with no event with data, one that
//! ends after its priming event, is called twice and cut once, after its last event). After each
//! cut it closes its own connection, waits as a client would (the stream's reconnect delay,
//! capped at the replay timeout), resumes with `GET` + `Last-Event-ID` and classifies what the
//! server sent as exactly one [`Behaviour`] (`report.rs`).
//!
//! Each round is judged by the engine every client runs: one `ResumableStream` per call
//! (`watch.rs`), fed what the probe read (the bytes before the cut, the disconnect, the reconnect
//! response, the resumed bytes) as they arrive, with the call's request id as the response it must
//! deliver. A round is resumable exactly when the stream accepts the resumed connection and the
//! response arrives: a refusal is reported as the behaviour it shows (see `classify` for the
//! mapping), with the guard's words as evidence; what the server did is described in more detail
//! only for the streams the guard accepts.
//!
//! Every read is bounded: bytes and events per connection ([`ProbeConfig::max_bytes`],
//! [`ProbeConfig::max_events`]), the decoder's limits and the replay timeout (the client's
//! `StreamConfig`) and one deadline for the whole probe ([`ProbeConfig::timeout`]). The probe keeps
//! no event data: per connection it keeps counters, the largest event's position and what the ids
//! look like, so its memory is the decoder's bounded buffer and the guard's bounded windows,
//! whatever the server sends. A limit reached, a transport error and a decoder drop are reported
//! as such, never read as the end of a stream.
#![forbid(unsafe_code)]

use std::pin::pin;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use reqwest::header;
use serde_json::{Value, json};
use ssegate::client::{
    CallOptions, Client, ClientConfig, ClientError, Protocol, Retry, TaskErrorKind, TaskGeneration,
    TaskMode,
};
use ssegate::contract::method::TOOLS_CALL;
use ssegate::contract::{
    PROTOCOL_2026_07_28, PROTOCOL_VERSION, STATELESS_VERSIONS, TASKS_EXTENSION, meta,
};
use ssegate::message::RpcId;
use ssegate::resume::ReconnectResponse;
use tokio::time::Instant;
use tracing::debug;

pub(crate) use super::report::*;
pub(crate) use super::watch::*;

/// The probe's settings. Setters take `&mut self` and chain. The engine's settings (the
/// decoder's limits, the replay timeout, the guard's) are the client's:
/// [`ClientConfig::stream_mut`].
#[derive(Clone, Debug)]
pub(crate) struct ProbeConfig {
    client: ClientConfig,
    tool: Option<String>,
    args: Value,
    timeout: Duration,
    max_bytes: u64,
    max_events: u64,
}

/// The probe's deadline by default: 120 s for the whole probe.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The most body bytes read on one connection by default: 256 MiB.
pub(crate) const DEFAULT_MAX_BYTES: u64 = 256 << 20;
/// The most events read on one connection by default: 100 000.
pub(crate) const DEFAULT_MAX_EVENTS: u64 = 100_000;

impl Default for ProbeConfig {
    /// The client's defaults, the first tool without required arguments, `{}`,
    /// [`DEFAULT_TIMEOUT`], [`DEFAULT_MAX_BYTES`] and [`DEFAULT_MAX_EVENTS`].
    fn default() -> Self {
        ProbeConfig {
            client: ClientConfig::default(),
            tool: None,
            args: json!({}),
            timeout: DEFAULT_TIMEOUT,
            max_bytes: DEFAULT_MAX_BYTES,
            max_events: DEFAULT_MAX_EVENTS,
        }
    }
}

impl ProbeConfig {
    /// The client settings (headers, bearer token, roots, and the stream's: the replay timeout
    /// a resumed connection may bring no message for before it counts as held open, the
    /// decoder's limits).
    pub(crate) fn client(&mut self, client: ClientConfig) -> &mut Self {
        self.client = client;
        self
    }

    /// The tool to call.
    pub(crate) fn tool(&mut self, name: impl Into<String>, args: Value) -> &mut Self {
        self.tool = Some(name.into());
        self.args = args;
        self
    }

    /// The deadline of the whole probe, from connecting to the last round (default 120 s); past
    /// it the probe fails with [`ProbeError::Timeout`], however slowly the server trickles.
    pub(crate) fn timeout(&mut self, timeout: Duration) -> &mut Self {
        self.timeout = timeout;
        self
    }

    /// Most body bytes read on one connection (default 256 MiB, room for a tool result of tens of
    /// MiB); a read that reaches it stops and says so.
    pub(crate) fn max_bytes(&mut self, bytes: u64) -> &mut Self {
        self.max_bytes = bytes.max(1);
        self
    }

    /// Most events read on one connection (default 100 000); a read that reaches it stops and says
    /// so.
    pub(crate) fn max_events(&mut self, events: u64) -> &mut Self {
        self.max_events = events.max(1);
        self
    }
}

#[derive(Clone, Copy, Debug)]
struct Limits {
    max_bytes: u64,
    max_events: u64,
}

/// Why a read stopped.
#[derive(Debug)]
enum Stop {
    /// The body ended cleanly.
    Eof,
    /// The body failed.
    Error(reqwest::Error),
    /// The cut point was reached.
    Cut,
    /// The guard refused, or the response came (when asked to stop there).
    Decided,
    /// A limit.
    Limit(Limit),
    /// No message within the replay timeout.
    Silent(Duration),
}

/// Reads `body` into `watch` until the cut point `until` (a body byte count), the guard's decision
/// (its refusal, or with `answer` the response), a limit, the end, an error or, with `replay`, no
/// message for that long.
async fn pump<S>(
    body: &mut S,
    watch: &mut Watch,
    limits: Limits,
    until: Option<u64>,
    replay: Option<Duration>,
    answer: bool,
) -> Stop
where
    S: Stream<Item = reqwest::Result<Bytes>> + Unpin,
{
    let mut last_message = Instant::now();
    loop {
        if watch.decided(answer) {
            return Stop::Decided;
        }
        let bytes = watch.conn.bytes;
        if until.is_some_and(|at| bytes >= at) {
            return Stop::Cut;
        }
        if bytes >= limits.max_bytes {
            return Stop::Limit(Limit::Bytes(limits.max_bytes));
        }
        if watch.conn.events >= limits.max_events {
            return Stop::Limit(Limit::Events(limits.max_events));
        }
        let next = match replay {
            Some(t) => match tokio::time::timeout_at(last_message + t, body.next()).await {
                Ok(next) => next,
                Err(_) => return Stop::Silent(last_message.elapsed()),
            },
            None => body.next().await,
        };
        let mut chunk = match next {
            None => return Stop::Eof,
            Some(Err(e)) => return Stop::Error(e),
            Some(Ok(chunk)) => chunk,
        };
        let room = until.unwrap_or(u64::MAX).min(limits.max_bytes) - bytes;
        if chunk.len() as u64 > room {
            chunk.truncate(room as usize);
        }
        let messages = watch.conn.messages;
        watch.feed(chunk, limits.max_events);
        if watch.conn.messages > messages {
            last_message = Instant::now();
            watch.message_at(last_message.into_std());
        }
    }
}

/// Runs the probe against `url`, within [`ProbeConfig::timeout`].
pub(crate) async fn probe(url: &str, config: &ProbeConfig) -> Result<Report, ProbeError> {
    match tokio::time::timeout(config.timeout, run(url, config)).await {
        Ok(result) => result,
        Err(_) => Err(ProbeError::Timeout(config.timeout)),
    }
}

async fn run(url: &str, config: &ProbeConfig) -> Result<Report, ProbeError> {
    let limits = Limits {
        max_bytes: config.max_bytes,
        max_events: config.max_events,
    };
    let mut client_config = config.client.clone();
    client_config.reuse_connections(false);
    let setting = client_config.protocol_ref().clone();
    let pinned_stateless =
        matches!(&setting, Protocol::Only(v) if STATELESS_VERSIONS.contains(&v.as_str()));
    // Which eras the server speaks: 2026-07-28 (stateless) first, under a short deadline so a
    // broken server cannot spend the probe's.
    let mut versions = Vec::new();
    let mut tasks = Tasks::None;
    let mut stateless_client = None;
    let mut stateless_error = None;
    if matches!(setting, Protocol::Auto) || pinned_stateless {
        let mut stateless = client_config.clone();
        stateless
            .protocol_version(PROTOCOL_2026_07_28)
            .call_timeout(Some(STATELESS_CHECK.min(config.timeout)));
        match Client::connect(url, stateless).await {
            Ok(c) => {
                versions.extend(c.protocol_version());
                if let Some(caps) = c.server_capabilities() {
                    tasks = Tasks::from_capabilities(&caps, true);
                }
                stateless_client = Some(c);
            }
            Err(e) => {
                debug!(error = %e, "no 2026-07-28");
                stateless_error = Some(e);
            }
        }
    }
    // The resumption rounds of the 2025 revisions run on an `initialize` session.
    let mut session_client = None;
    if !pinned_stateless {
        if matches!(setting, Protocol::Auto) {
            client_config.protocol_version(PROTOCOL_VERSION);
        }
        match Client::connect(url, client_config).await {
            Ok(c) => {
                versions.extend(c.protocol_version());
                if tasks == Tasks::None
                    && let Some(caps) = c.server_capabilities()
                {
                    tasks = Tasks::from_capabilities(&caps, false);
                }
                session_client = Some(c);
            }
            // A 2026-07-28-only server: no `initialize` session.
            Err(e) if stateless_client.is_some() => debug!(error = %e, "no 2025-era session"),
            Err(e) => return Err(e.into()),
        }
    }
    let Some(first) = session_client.as_ref().or(stateless_client.as_ref()) else {
        return Err(stateless_error.map_or(ProbeError::NoTool, ProbeError::Client));
    };
    let tool = match &config.tool {
        Some(t) => t.clone(),
        None => first_tool(first).await?,
    };
    let mut info = ServerInfo {
        protocol_versions: versions,
        tasks,
        task_reread: None,
        protocol_version: None,
        session: false,
        priming: false,
        retry_ms: None,
        id_scheme: IdScheme::None,
        tool: tool.clone(),
        legacy_sse: session_client.as_ref().is_some_and(Client::is_legacy_sse),
    };
    // A task server: does a task's result read again after a cut read?
    let task_client = match tasks {
        Tasks::Extension => stateless_client.as_ref(),
        Tasks::Experimental => session_client.as_ref(),
        Tasks::None => None,
    };
    if let Some(client) = task_client {
        info.task_reread = Some(task_reread(client, &tool, &config.args).await);
    }
    let mut rounds = Vec::new();
    if let Some(client) = session_client.as_ref().filter(|c| c.is_legacy_sse()) {
        // One stream for the whole session, no resumption: nothing to cut and resume. The tool
        // is called once, to show the transport carries it.
        client
            .call_tool(&tool, config.args.clone(), Retry::Never)
            .await?;
        info.protocol_version = client.protocol_version();
        rounds = vec![Round {
            cut: CutAt::MidEvent,
            behaviour: Behaviour::NoIds,
            evidence: "the 2024-11-05 HTTP+SSE transport: every answer comes on the session's one \
                       event stream, which has no resumption; a cut ends the session"
                .to_owned(),
            limit: None,
        }];
        let _ = client.clone().close().await;
    } else if let Some(client) = session_client {
        let path = cut_rounds(&client, &tool, config, limits).await?;
        info.protocol_version = client.protocol_version();
        info.session = client.session_id().is_some();
        info.priming = path.priming;
        info.retry_ms = path.retry_ms;
        info.id_scheme = path.id_scheme;
        rounds = path.rounds;
        let _ = client.close().await;
    }
    let stateless = match stateless_client {
        Some(client) => {
            if config.tool.is_none() {
                // The tool's headers (`Mcp-Param-*`) come from the 2026-07-28 tool list.
                client.list_tools().await?;
            }
            Some(cut_rounds(&client, &tool, config, limits).await?)
        }
        None => None,
    };
    Ok(Report {
        server: info,
        rounds,
        stateless,
    })
}

/// Calls `tool` as a task, reads its result again with the read cut half-way (the answer's first
/// half, then the connection dropped), then reads it whole, and compares with the first result.
async fn task_reread(client: &Client, tool: &str, args: &Value) -> TaskReread {
    let mut options = CallOptions::default();
    options.tasks(TaskMode::Require).retry(Retry::Never);
    let params = json!({"name": tool, "arguments": args});
    let first = match client.call_with(TOOLS_CALL, params, &options).await {
        Ok(r) => r,
        Err(ClientError::Task(e)) if e.kind == TaskErrorKind::Unsupported => {
            return TaskReread::NoTask;
        }
        Err(e) => return TaskReread::NotRepeatable(format!("the call as a task failed: {e}")),
    };
    let Some(task) = first.outcome.task.clone() else {
        return TaskReread::NoTask;
    };
    let (method, mut params) = match task.generation() {
        TaskGeneration::Extension => (
            "tasks/get",
            json!({"_meta": {meta::CLIENT_CAPABILITIES: {"extensions": {TASKS_EXTENSION: {}}}}}),
        ),
        _ => ("tasks/result", json!({})),
    };
    params["taskId"] = json!(task.id());
    let read = json!({"jsonrpc": "2.0", "id": 1_000_100, "method": method, "params": params});
    match raw_post(client, &read).await {
        Ok(res) => {
            let half = first.message.len() / 2;
            let mut body = pin!(res.bytes_stream());
            let mut got = 0;
            while got < half {
                match body.next().await {
                    Some(Ok(chunk)) => got += chunk.len(),
                    _ => break,
                }
            }
            debug!(got, "task read cut");
        }
        Err(e) => return TaskReread::NotRepeatable(format!("the read to cut failed: {e}")),
    }
    match client.resume_task(&task, &CallOptions::default()).await {
        Ok(again) if result_bytes(&again.message) == result_bytes(&first.message) => {
            TaskReread::Repeatable
        }
        Ok(again) => TaskReread::NotRepeatable(format!(
            "read again after a cut, the result differs ({} bytes, then {})",
            first.message.len(),
            again.message.len()
        )),
        Err(e) => TaskReread::NotRepeatable(format!("read again after a cut: {e}")),
    }
}

/// A response's bytes after its id: `,"result":...`.
fn result_bytes(message: &ssegate::message::Message) -> Bytes {
    let bytes = message.to_bytes();
    match memchr::memmem::find(&bytes, b",\"result\":") {
        Some(at) => bytes.slice(at..),
        None => bytes,
    }
}

/// The first tool that takes no required arguments.
async fn first_tool(client: &Client) -> Result<String, ProbeError> {
    let tools = client.list_tools().await?;
    tools
        .iter()
        .find(|t| {
            t["inputSchema"]["required"]
                .as_array()
                .is_none_or(|r| r.is_empty())
        })
        .and_then(|t| t["name"].as_str())
        .map(str::to_owned)
        .ok_or(ProbeError::NoTool)
}

/// The cut rounds on `client`'s protocol version: a baseline call to find where to cut, then one
/// call cut in the middle of its largest event and one at the boundary before it, each resumed
/// and judged.
async fn cut_rounds(
    client: &Client,
    tool: &str,
    config: &ProbeConfig,
    limits: Limits,
) -> Result<VersionRounds, ProbeError> {
    let version = client.protocol_version().unwrap_or_default();
    let stateless = client.is_stateless();
    let call = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": TOOLS_CALL,
               "params": {"name": tool, "arguments": config.args}})
    };
    // The baseline: the whole stream, to find where to cut.
    let res = raw_post(client, &call(1_000_001)).await?;
    if stateless && !is_sse(&res) {
        // On 2026-07-28 a JSON answer is as the specification allows: nothing to resume.
        let content_type = res
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        return Ok(VersionRounds {
            version,
            stateless,
            priming: false,
            retry_ms: None,
            id_scheme: IdScheme::None,
            rounds: vec![Round {
                cut: CutAt::MidEvent,
                behaviour: Behaviour::NoIds,
                evidence: format!(
                    "the call is answered with a whole body ({}), not an event stream: a cut \
                     loses the request",
                    content_type.as_deref().unwrap_or("no content type")
                ),
                limit: None,
            }],
        });
    }
    let res = expect_sse(res, tool)?;
    let stream = config.client.stream_ref();
    let mut base = Watch::new(RpcId::Number(1_000_001), stream);
    let stop = pump(
        &mut pin!(res.bytes_stream()),
        &mut base,
        limits,
        None,
        None,
        true,
    )
    .await;
    if let Some((_, e)) = base.refusal.take() {
        return Err(ProbeError::Refused(e));
    }
    if !base.answered {
        let (bytes, events) = (base.conn.bytes, base.conn.events);
        let limit = match stop {
            Stop::Error(source) => return Err(ProbeError::Transport { bytes, source }),
            _ if base.conn.dropped.is_some() => base.conn.dropped.clone().map(Limit::Decoder),
            Stop::Limit(limit) => Some(limit),
            _ => None,
        };
        if let Some(limit) = limit {
            return Err(ProbeError::Limit {
                bytes,
                events,
                limit,
            });
        }
    }
    // Cut in the middle of the largest event with data and at the boundary before it; a stream
    // with no event with data (a priming event, then the end) is cut once, after its last event.
    let cuts = match base.conn.largest {
        Some((_, start, end)) => vec![
            (CutAt::MidEvent, start + (end - start) / 2),
            (CutAt::Boundary, start),
        ],
        None if base.conn.events > 0 && !base.answered => {
            vec![(CutAt::Boundary, base.conn.last_end)]
        }
        None => {
            return Err(ProbeError::NoStream(format!(
                "the stream of {tool} has no event with data"
            )));
        }
    };
    let mut rounds = Vec::new();
    let mut second_ids = IdTrack::default();
    for (n, (cut, at)) in cuts.into_iter().enumerate() {
        let id = 1_000_002 + n as i64;
        let res = expect_sse(raw_post(client, &call(id)).await?, tool)?;
        let mut watch = Watch::new(RpcId::Number(id), stream);
        // The call's body is dropped with this statement, before any resume: the cut closes the
        // call's connection, as a client's cut does. A server still holding the request's stream
        // open on it answers a resume differently (the Python SDK ends the resume with no event).
        let stop = pump(
            &mut pin!(res.bytes_stream()),
            &mut watch,
            limits,
            Some(at),
            None,
            false,
        )
        .await;
        if n == 0 {
            second_ids = watch.conn.ids.clone();
        }
        let round = match stop {
            Stop::Cut => resume_round(client, watch, cut, limits).await,
            // The server ended its stream before the cut point: a cut all the same.
            Stop::Eof => {
                watch.note = Some(format!(
                    "the call's stream ended after {} bytes, before the cut at byte {at}",
                    watch.conn.bytes
                ));
                resume_round(client, watch, cut, limits).await
            }
            Stop::Decided => watch.finish(cut, End::Decided),
            Stop::Error(e) => early(
                cut,
                &watch,
                at,
                Behaviour::TransportError,
                "failed",
                chain(&e),
                None,
            ),
            Stop::Limit(limit) => early(
                cut,
                &watch,
                at,
                Behaviour::OverLimit,
                "stopped",
                limit.to_string(),
                Some(limit),
            ),
            Stop::Silent(_) => unreachable!("no replay timeout before the cut"),
        };
        rounds.push(round);
    }
    Ok(VersionRounds {
        version,
        stateless,
        priming: base.conn.first_priming == Some(true),
        retry_ms: base.retry_ms(),
        id_scheme: id_scheme(&base.conn.ids, &second_ids),
        rounds,
    })
}

/// A round whose call stream stopped before the cut point.
fn early(
    cut: CutAt,
    watch: &Watch,
    at: u64,
    behaviour: Behaviour,
    what: &str,
    detail: String,
    limit: Option<Limit>,
) -> Round {
    Round {
        cut,
        behaviour,
        evidence: format!(
            "the call's stream {what} after {} bytes and {} event(s), before the cut at byte {at}: \
             {detail}",
            watch.conn.bytes, watch.conn.events
        ),
        limit,
    }
}

/// The call's answer, which must be an event stream.
fn expect_sse(res: reqwest::Response, tool: &str) -> Result<reqwest::Response, ProbeError> {
    if is_sse(&res) {
        Ok(res)
    } else {
        Err(ProbeError::NoStream(format!(
            "tools/call {tool} answered {:?}, not an event stream",
            res.headers().get(header::CONTENT_TYPE)
        )))
    }
}

fn is_sse(res: &reqwest::Response) -> bool {
    res.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
}

/// Cuts the round's stream where the probe stopped reading (the caller has dropped its
/// connection), resumes, and judges the answer.
///
/// The resume waits as a client's does, never in the instant of the cut: the stream's reconnect
/// delay (the server's `retry:` or `Retry-After`, else the default, raised to the jittered floor
/// of [`StreamConfig::min_delay`], 250 ms by default), capped at the replay timeout. A server
/// learns of the cut only when it reads the closed connection: a resume that overtakes that finds
/// the request's stream still attached, and the Python SDK (under FastMCP too) then ends the
/// resume with no event.
async fn resume_round(client: &Client, mut watch: Watch, cut: CutAt, limits: Limits) -> Round {
    let replay_timeout = watch.stream.replay_timeout();
    let Some(cursor) = watch.cut() else {
        return watch.finish(cut, End::Decided);
    };
    tokio::time::sleep(watch.resumed.delay.min(replay_timeout)).await;
    let res = match client.get_raw(&cursor).await {
        Ok(res) => res,
        Err(e) => {
            let why = format!("the resume request failed: {}", chain(&e));
            return watch.finish(cut, End::Error(why));
        }
    };
    let response =
        ReconnectResponse::from_headers(res.status().as_u16(), res.headers(), SystemTime::now());
    if !watch.reconnect(&response) {
        return watch.finish(cut, End::Decided);
    }
    let stop = pump(
        &mut pin!(res.bytes_stream()),
        &mut watch,
        limits,
        None,
        Some(replay_timeout),
        true,
    )
    .await;
    let end = match stop {
        Stop::Eof => End::Eof,
        Stop::Error(e) => End::Error(chain(&e)),
        Stop::Limit(limit) => End::Limit(limit),
        Stop::Silent(waited) => End::Silent(waited),
        Stop::Decided | Stop::Cut => End::Decided,
    };
    watch.finish(cut, end)
}

/// POSTs a raw JSON-RPC request on the session; the probe reads the answer itself.
async fn raw_post(client: &Client, body: &Value) -> Result<reqwest::Response, ClientError> {
    let res = client.post_raw(body).await?;
    if res.status().is_success() {
        Ok(res)
    } else {
        Err(ClientError::Status {
            during: "probe call",
            status: res.status().as_u16(),
            body: String::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use ssegate::resume::StreamConfig;
    use ssegate::sse::DecodeError;

    use super::*;
    use crate::check::capture::{self as check, Connection};

    fn scheme(a: &[&str], b: &[&str]) -> IdScheme {
        let track = |ids: &[&str]| {
            let mut t = IdTrack::default();
            for id in ids {
                t.push(id.as_bytes());
            }
            t
        };
        id_scheme(&track(a), &track(b))
    }

    #[test]
    fn id_schemes_are_read_from_two_streams() {
        assert_eq!(
            scheme(&["0", "1", "2"], &["0", "1"]),
            IdScheme::PerStreamNumbers
        );
        assert_eq!(
            scheme(&["0/7", "1/7"], &["0/8", "1/8"]),
            IdScheme::PerStreamNumbers
        );
        assert_eq!(
            scheme(&["a-0", "a-1"], &["b-0"]),
            IdScheme::PerStreamNumbers
        );
        // All digits on both sides of the dash is a Redis stream id (`<ms>-<seq>`), one counter,
        // as the guard reads it.
        assert_eq!(scheme(&["2-0", "2-1"], &["3-0"]), IdScheme::SessionNumbers);
        assert_eq!(
            scheme(&["1", "3", "5"], &["8", "10"]),
            IdScheme::SessionNumbers
        );
        assert_eq!(
            scheme(
                &[
                    "0b1c2d3e-4f50-4617-8a9b-123456789012",
                    "7c1d2d3e-4f50-4617-8a9b-223456789012"
                ],
                &["9b1c2d3e-4f50-4617-8a9b-323456789012"]
            ),
            IdScheme::Opaque,
            "uuids whose last group is digits are not numbered ids"
        );
        assert_eq!(
            scheme(&["s_1700000000_ab", "s_1700000001_cd"], &[]),
            IdScheme::Opaque
        );
        assert_eq!(scheme(&[], &[]), IdScheme::None);
    }

    /// Whether `ssegate check --request-id 7` (a `ResumableStream` over the connections) accepts
    /// the capture: no refusal, and the response delivered.
    fn guard_accepts(connections: &[Connection]) -> bool {
        let summary = check::check(
            connections,
            &StreamConfig::default(),
            &[RpcId::Number(7)],
            |_| {},
        );
        summary.errors == 0 && summary.unanswered.is_empty()
    }

    /// [`classify`] of a two-connection capture, with the stream fed in chunks of `step` bytes.
    fn classify_in_steps(connections: &[Connection], step: usize) -> Round {
        let [before, after] = connections else {
            panic!("two connections");
        };
        let response = after
            .response
            .clone()
            .unwrap_or_else(ReconnectResponse::event_stream);
        if step == usize::MAX {
            return classify(
                CutAt::MidEvent,
                &before.body,
                &response,
                &after.body,
                RpcId::Number(7),
            );
        }
        let mut watch = Watch::new(RpcId::Number(7), &StreamConfig::default());
        for piece in before.body.chunks(step) {
            watch.feed(Bytes::copy_from_slice(piece), u64::MAX);
        }
        let _ = watch.cut();
        if watch.reconnect(&response) {
            for piece in after.body.chunks(step) {
                watch.feed(Bytes::copy_from_slice(piece), u64::MAX);
            }
        }
        watch.finish(CutAt::MidEvent, End::Eof)
    }

    fn assert_agrees(name: &str, connections: &[Connection]) -> Round {
        let accepted = guard_accepts(connections);
        let round = classify_in_steps(connections, usize::MAX);
        assert_eq!(
            round.behaviour.is_resumable(),
            accepted,
            "{name}: classified {round:?}, the guard {}",
            if accepted { "accepts" } else { "refuses" }
        );
        for step in [1, 2, 7, 64] {
            let chunked = classify_in_steps(connections, step);
            assert_eq!(
                chunked.behaviour, round.behaviour,
                "{name}: fed in chunks of {step}"
            );
        }
        round
    }

    fn progress(n: u32) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"t","progress":{n}}}}}"#
        )
    }

    /// The foreign-stream resume: the call's stream `a` (a priming event, and a progress
    /// notification unless `priming_only`), resumed with stream `b`'s progress and a result to the
    /// same request id from another session.
    fn foreign(ids: [&str; 4], priming_only: bool) -> Vec<Connection> {
        let [a0, a1, b5, b6] = ids;
        let mut before = format!("id: {a0}\ndata:\n\n");
        if !priming_only {
            before += &format!("id: {a1}\ndata: {}\n\n", progress(1));
        }
        let after = format!(
            "id: {b5}\ndata: {}\n\nid: {b6}\ndata: {}\n\n",
            progress(2),
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"another session"}]}}"#
        );
        vec![
            Connection::new(None, Bytes::from(before)),
            Connection::new(Some(ReconnectResponse::event_stream()), Bytes::from(after)),
        ]
    }

    /// Every two-connection capture of the library's `tests/data/captures` is resumable exactly
    /// when the guard accepts it, whatever the chunking; and the foreign-stream resumes are not.
    #[test]
    fn classification_agrees_with_the_guard() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/captures");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "sse"))
            .collect();
        files.sort();
        let mut seen = 0;
        for path in &files {
            let capture = Bytes::from(std::fs::read(path).unwrap());
            let connections = check::split_capture(&capture).unwrap();
            if connections.len() != 2 {
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy();
            let round = assert_agrees(&name, &connections);
            seen += 1;
            let want = match &*name {
                "faulty-restart.sse" => Some(Behaviour::Restarted),
                "faulty-skips-interrupted.sse" => Some(Behaviour::Reordered),
                "session-counter.sse" | "priming-on-resume.sse" | "uuid-digit-groups.sse" => {
                    Some(Behaviour::Continues)
                }
                _ => None,
            };
            if let Some(want) = want {
                assert_eq!(round.behaviour, want, "{name}: {round:?}");
            }
        }
        assert!(seen >= 5, "only {seen} two-connection captures");
        for ids in [["0/A", "1/A", "5/B", "6/B"], ["A-0", "A-1", "B-5", "B-6"]] {
            for priming_only in [false, true] {
                let name = format!("foreign stream {ids:?}, priming only: {priming_only}");
                let round = assert_agrees(&name, &foreign(ids, priming_only));
                assert_eq!(round.behaviour, Behaviour::OtherStream, "{name}: {round:?}");
                assert!(round.evidence.contains("guard"), "{name}: {round:?}");
            }
        }
    }

    /// The same stream resumed by a server that continues it is resumable, and each way of going on
    /// is told apart by the guard's decisions.
    #[test]
    fn accepted_resumes_are_described() {
        let before = format!(
            "id: 0/A\ndata:\n\nid: 1/A\ndata: {}\n\nid: 2/A\ndata: {{\"jsonrpc\":\"2.0\",\"id\":7,\"res",
            progress(1)
        );
        let result = r#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
        let run = |after: String| {
            classify(
                CutAt::MidEvent,
                before.as_bytes(),
                &ReconnectResponse::event_stream(),
                after.as_bytes(),
                RpcId::Number(7),
            )
        };
        let round = run(format!("id: 2/A\ndata: {result}\n\n"));
        assert_eq!(round.behaviour, Behaviour::ReplaysEvent, "{round:?}");
        let round = run(format!(
            "id: 1/A\ndata: {}\n\nid: 2/A\ndata: {result}\n\n",
            progress(1)
        ));
        assert_eq!(round.behaviour, Behaviour::ResendsCursor, "{round:?}");
        assert!(
            round.evidence.contains("Last-Event-ID event \"1/A\""),
            "{round:?}"
        );
        // The interrupted event skipped: a gap.
        let round = run(format!("id: 3/A\ndata: {result}\n\n"));
        assert_eq!(round.behaviour, Behaviour::Reordered, "{round:?}");
        // The interrupted event's id with other content... is the replay of another event.
        let round = run(format!("id: 1/A\ndata: {}\n\n", progress(9)));
        assert_eq!(round.behaviour, Behaviour::Restarted, "{round:?}");
        // Nothing but priming events, then the end.
        let round = run("id: 9/A\ndata:\n\n".to_owned());
        assert_eq!(round.behaviour, Behaviour::Empty, "{round:?}");
        let round = classify(
            CutAt::MidEvent,
            before.as_bytes(),
            &ReconnectResponse::new(404, None, None),
            b"",
            RpcId::Number(7),
        );
        assert_eq!(round.behaviour, Behaviour::Gone, "{round:?}");
        // No id before the cut.
        let round = classify(
            CutAt::MidEvent,
            b"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"res",
            &ReconnectResponse::event_stream(),
            result.as_bytes(),
            RpcId::Number(7),
        );
        assert_eq!(round.behaviour, Behaviour::NoIds, "{round:?}");
    }

    fn lines(chunk: &'static [u8]) -> impl Stream<Item = reqwest::Result<Bytes>> + Unpin {
        futures_util::stream::repeat_with(move || Ok(Bytes::from_static(chunk)))
    }

    /// Reads stop at their limits and say which: an endless data line is dropped by the decoder
    /// (and the read stops there), endless comments stop at the byte limit, endless tiny events at
    /// the event limit, a resume that sends only priming events at the replay timeout.
    #[tokio::test]
    async fn every_read_is_bounded() {
        let limits = Limits {
            max_bytes: 1 << 20,
            max_events: 1000,
        };
        let mut small = StreamConfig::default();
        small.decoder_mut().max_line(64 << 10).max_event(64 << 10);
        let mut watch = Watch::new(RpcId::Number(7), &small);
        let mut body = pin!(
            futures_util::stream::once(async { Ok(Bytes::from_static(b"data: ")) })
                .chain(lines(&[b'x'; 4096]))
        );
        let stop = pump(&mut body, &mut watch, limits, None, None, true).await;
        assert!(matches!(stop, Stop::Decided), "{stop:?}");
        assert!(
            matches!(watch.conn.dropped, Some(DecodeError::LineTooLong { .. })),
            "{:?}",
            watch.conn.dropped
        );
        assert!(watch.conn.bytes < 80 << 10, "{}", watch.conn.bytes);

        let mut watch = Watch::new(RpcId::Number(7), &small);
        let stop = pump(&mut lines(b": k\n"), &mut watch, limits, None, None, true).await;
        assert!(
            matches!(stop, Stop::Limit(Limit::Bytes(n)) if n == 1 << 20),
            "{stop:?}"
        );
        assert_eq!(watch.conn.bytes, 1 << 20);

        let mut watch = Watch::new(RpcId::Number(7), &StreamConfig::default());
        let stop = pump(
            &mut lines(b"data: {}\n\n"),
            &mut watch,
            limits,
            None,
            None,
            true,
        )
        .await;
        assert!(matches!(stop, Stop::Limit(Limit::Events(1000))), "{stop:?}");
        assert_eq!(watch.conn.events, 1000);

        let mut watch = Watch::new(RpcId::Number(7), &StreamConfig::default());
        watch.feed(Bytes::from_static(b"id: 1\ndata: {}\n\n"), u64::MAX);
        assert_eq!(watch.cut().as_deref(), Some(&b"1"[..]));
        assert!(watch.reconnect(&ReconnectResponse::event_stream()));
        let primings = futures_util::stream::unfold(2u64, |n| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Some((Ok(Bytes::from(format!("id: {n}\ndata:\n\n"))), n + 1))
        });
        let mut primings = pin!(primings);
        let replay = Some(Duration::from_millis(200));
        let stop = pump(&mut primings, &mut watch, limits, None, replay, true).await;
        let Stop::Silent(waited) = stop else {
            panic!("{stop:?}")
        };
        assert!(watch.conn.primings > 3);
        let round = watch.finish(CutAt::Boundary, End::Silent(waited));
        assert_eq!(round.behaviour, Behaviour::HeldOpen, "{round:?}");
    }
}
