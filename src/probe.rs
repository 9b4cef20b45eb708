//! `ssegate probe`: tells an MCP server operator how their server behaves on resumption.
//!
//! The probe opens a session, lists the tools, and calls one tool three times: once whole (the
//! baseline: where each event starts and ends), once cut in the middle of the largest event with
//! data, once cut at the event boundary before it. After each cut it drops its own connection,
//! resumes with `GET` + `Last-Event-ID` (the id of the last event it received whole, as raw
//! bytes) and classifies what the server sent as exactly one [`Behaviour`], from the raw events,
//! not through the guard: the point is to describe the server, not to protect a client from it.
#![forbid(unsafe_code)]

use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::header::{self, HeaderValue};
use serde_json::{Value, json};

use crate::client::{Client, ClientConfig, ClientError};
use crate::sse::{Decoder, Event};

/// What the server did after a cut, one per round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Behaviour {
    /// Continued strictly after the `Last-Event-ID`.
    Continues,
    /// Replayed the interrupted event whole under its id, then went on.
    ReplaysEvent,
    /// Re-sent the `Last-Event-ID` event itself first, then went on (rmcp).
    ResendsCursor,
    /// Started a new stream: events already received came again under new ids.
    Restarted,
    /// `200`, no event, closed.
    Empty,
    /// `200`, nothing within the replay timeout.
    HeldOpen,
    /// Events out of order, or already-received events under their old ids with other content.
    Reordered,
    /// `409` or `410` (or another refusal status).
    Conflict,
    /// `404`: the session is gone.
    Gone,
    /// The events carry no ids: nothing can be resumed.
    NoIds,
}

impl Behaviour {
    /// The name `--json` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Behaviour::Continues => "continues",
            Behaviour::ReplaysEvent => "replays-event",
            Behaviour::ResendsCursor => "resends-cursor",
            Behaviour::Restarted => "restarted",
            Behaviour::Empty => "empty",
            Behaviour::HeldOpen => "held-open",
            Behaviour::Reordered => "reordered",
            Behaviour::Conflict => "conflict",
            Behaviour::Gone => "gone",
            Behaviour::NoIds => "no-ids",
        }
    }

    /// Whether a client can resume in place against this behaviour.
    pub fn is_resumable(self) -> bool {
        matches!(
            self,
            Behaviour::Continues | Behaviour::ReplaysEvent | Behaviour::ResendsCursor
        )
    }
}

impl fmt::Display for Behaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a round cut its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CutAt {
    /// In the middle of the largest event with data.
    MidEvent,
    /// At the event boundary before it.
    Boundary,
}

impl CutAt {
    /// The name `--json` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            CutAt::MidEvent => "mid-event",
            CutAt::Boundary => "boundary",
        }
    }
}

/// One round: a cut, a resume, a classification.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Round {
    /// Where the connection was cut.
    pub cut: CutAt,
    /// What the server did.
    pub behaviour: Behaviour,
    /// What showed it, in words.
    pub evidence: String,
}

/// How the server numbers its event ids, as observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IdScheme {
    /// Numbers that start again on each stream (`0, 1, 2` or rmcp's `N/<stream>`).
    PerStreamNumbers,
    /// Numbers from one counter shared by the session's streams.
    SessionNumbers,
    /// Anything else (uuids, `<stream>_<ms>_<random>`, ...).
    Opaque,
    /// No ids at all.
    None,
}

impl IdScheme {
    /// The name `--json` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            IdScheme::PerStreamNumbers => "per-stream numbers",
            IdScheme::SessionNumbers => "session-wide numbers",
            IdScheme::Opaque => "opaque",
            IdScheme::None => "none",
        }
    }
}

/// What the probe learnt about the server itself.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerInfo {
    /// The protocol version the server chose.
    pub protocol_version: Option<String>,
    /// Whether it gave an `Mcp-Session-Id`.
    pub session: bool,
    /// Whether its streams open with a priming event (an id, empty data).
    pub priming: bool,
    /// The `retry:` it sends, in ms.
    pub retry_ms: Option<u64>,
    /// How it numbers ids.
    pub id_scheme: IdScheme,
    /// The tool the probe called.
    pub tool: String,
}

/// The probe's findings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// The server.
    pub server: ServerInfo,
    /// One round per cut.
    pub rounds: Vec<Round>,
}

impl Report {
    /// Whether every round was resumable.
    pub fn resumable(&self) -> bool {
        !self.rounds.is_empty() && self.rounds.iter().all(|r| r.behaviour.is_resumable())
    }

    /// What a client must do with this server, in words.
    pub fn advice(&self) -> String {
        if self.resumable() {
            return "resume in place with Last-Event-ID; discard a partial event before the replay and drop \
                    exact replays (ssegate's guard does both)"
                .to_owned();
        }
        let worst = self
            .rounds
            .iter()
            .find(|r| !r.behaviour.is_resumable())
            .map(|r| r.behaviour);
        match worst {
            Some(Behaviour::NoIds) => "a cut loses the response: the server sends no event ids; give events \
                                       ids and keep a replay buffer"
                .to_owned(),
            Some(Behaviour::Restarted | Behaviour::Reordered) => "a client that appends the resumed stream \
                corrupts results; a guarded client must refuse the stream and renegotiate (re-running only \
                idempotent tools); fix the server's replay store"
                .to_owned(),
            _ => "a cut loses the response: a client must renegotiate and may re-run only idempotent tools; keep \
                  a replay buffer that holds whole results, shared by all instances"
                .to_owned(),
        }
    }

    /// The report as the `--json` object.
    pub fn to_json(&self) -> Value {
        json!({
            "server": {
                "protocol_version": self.server.protocol_version,
                "session": self.server.session,
                "priming": self.server.priming,
                "retry_ms": self.server.retry_ms,
                "id_scheme": self.server.id_scheme.as_str(),
                "tool": self.server.tool,
            },
            "rounds": self.rounds.iter().map(|r| json!({
                "cut": r.cut.as_str(),
                "behaviour": r.behaviour.as_str(),
                "evidence": r.evidence,
            })).collect::<Vec<_>>(),
            "verdict": if self.resumable() { "resumable" } else { "not-resumable" },
            "advice": self.advice(),
        })
    }
}

/// Why the probe could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProbeError {
    /// The client failed (connect, TLS, initialize, tools/list, a status).
    Client(ClientError),
    /// No tool to call: none named, and none takes no required arguments.
    NoTool,
    /// The tool answered `application/json`, or its stream carries no event with data.
    NoStream(String),
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::Client(e) => e.fmt(f),
            ProbeError::NoTool => write!(
                f,
                "no tool to call: name one with --tool (and --args), none takes no required arguments"
            ),
            ProbeError::NoStream(what) => write!(f, "nothing to cut: {what}"),
        }
    }
}

impl std::error::Error for ProbeError {}

impl From<ClientError> for ProbeError {
    fn from(e: ClientError) -> Self {
        ProbeError::Client(e)
    }
}

/// The probe's settings. Setters take `&mut self` and chain.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ProbeConfig {
    client: ClientConfig,
    tool: Option<String>,
    args: Value,
    replay_timeout: Duration,
}

impl Default for ProbeConfig {
    /// The client's defaults, the first tool without required arguments, `{}`, a 5 s replay
    /// timeout.
    fn default() -> Self {
        ProbeConfig {
            client: ClientConfig::default(),
            tool: None,
            args: json!({}),
            replay_timeout: Duration::from_secs(5),
        }
    }
}

impl ProbeConfig {
    /// The client settings (headers, bearer token, roots).
    pub fn client(&mut self, client: ClientConfig) -> &mut Self {
        self.client = client;
        self
    }

    /// The tool to call.
    pub fn tool(&mut self, name: impl Into<String>, args: Value) -> &mut Self {
        self.tool = Some(name.into());
        self.args = args;
        self
    }

    /// How long a resumed connection may bring nothing before it counts as held open.
    pub fn replay_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.replay_timeout = timeout;
        self
    }
}

/// One event as received, with where it ended in the body.
#[derive(Clone, Debug)]
struct Seen {
    id: Option<Bytes>,
    data: Bytes,
    end: u64,
}

/// What one read of a response body saw.
#[derive(Debug, Default)]
struct Read {
    events: Vec<Seen>,
    retry: Option<u64>,
    /// The open block's id and data bytes when the read stopped.
    partial_id: Option<Bytes>,
    ended: bool,
}

fn seen(e: &Event, end: u64) -> Seen {
    Seen {
        id: e.has_own_id.then(|| e.id.clone()),
        data: e.data.contiguous(),
        end,
    }
}

/// Reads an SSE body up to `limit` bytes (then drops the connection), until it ends, until
/// `stop` says so, or until nothing arrives for `idle`.
async fn read_events(
    res: reqwest::Response,
    limit: u64,
    idle: Duration,
    stop: impl Fn(&[Seen]) -> bool,
) -> (Read, Bytes) {
    let mut decoder = Decoder::new();
    let mut read = Read::default();
    let mut body = res.bytes_stream();
    let mut taken = 0u64;
    let mut raw = Vec::new();
    loop {
        let next = match tokio::time::timeout(idle, body.next()).await {
            Ok(next) => next,
            Err(_) => break,
        };
        let Some(Ok(mut chunk)) = next else {
            read.ended = true;
            break;
        };
        let room = limit - taken;
        if chunk.len() as u64 > room {
            chunk.truncate(room as usize);
        }
        taken += chunk.len() as u64;
        raw.extend_from_slice(&chunk);
        decoder.feed(chunk);
        while let Some(Ok(e)) = decoder.next_event() {
            read.events.push(seen(&e, decoder.offset()));
        }
        if taken >= limit || stop(&read.events) {
            break;
        }
    }
    read.retry = decoder.retry();
    read.partial_id = decoder.finish().and_then(|p| p.id);
    (read, Bytes::from(raw))
}

fn is_response(data: &[u8]) -> bool {
    let message =
        crate::message::Message::new(crate::sse::Data::from(Bytes::copy_from_slice(data)));
    message.jsonrpc_peek().kind == crate::message::RpcKind::Response
}

fn show(id: &Option<Bytes>) -> String {
    id.as_deref().map_or_else(
        || "(none)".into(),
        |b| format!("{:?}", String::from_utf8_lossy(b)),
    )
}

/// Runs the probe against `url`.
pub async fn probe(url: &str, config: &ProbeConfig) -> Result<Report, ProbeError> {
    let mut client_config = config.client.clone();
    client_config.reuse_connections(false);
    let client = Client::connect(url, client_config).await?;
    let tool = match &config.tool {
        Some(t) => t.clone(),
        None => {
            let tools = client.list_tools().await?;
            tools
                .iter()
                .find(|t| {
                    t["inputSchema"]["required"]
                        .as_array()
                        .is_none_or(|r| r.is_empty())
                })
                .and_then(|t| t["name"].as_str())
                .ok_or(ProbeError::NoTool)?
                .to_owned()
        }
    };
    let call = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": config.args}})
    };
    // The baseline: the whole stream, to find where to cut.
    let res = client.raw_post(&call(1_000_001)).await?;
    if !is_sse(&res) {
        return Err(ProbeError::NoStream(format!(
            "tools/call {tool} answered {:?}, not an event stream",
            res.headers().get(header::CONTENT_TYPE)
        )));
    }
    let (base, _) = read_events(res, u64::MAX, Duration::from_secs(60), |e| {
        e.last().is_some_and(|s| is_response(&s.data))
    })
    .await;
    let (largest, _) = base
        .events
        .iter()
        .enumerate()
        .max_by_key(|(_, e)| e.data.len())
        .filter(|(_, e)| !e.data.is_empty())
        .ok_or_else(|| {
            ProbeError::NoStream(format!("the stream of {tool} has no event with data"))
        })?;
    let start = if largest == 0 {
        0
    } else {
        base.events[largest - 1].end
    };
    let end = base.events[largest].end;
    let ids: Vec<&Bytes> = base.events.iter().filter_map(|e| e.id.as_ref()).collect();
    let mut info = ServerInfo {
        protocol_version: client.protocol_version(),
        session: client.session_id().is_some(),
        priming: base
            .events
            .first()
            .is_some_and(|e| e.id.is_some() && e.data.is_empty()),
        retry_ms: base.retry,
        id_scheme: if ids.is_empty() {
            IdScheme::None
        } else {
            IdScheme::Opaque
        },
        tool: tool.clone(),
    };
    let mut rounds = Vec::new();
    let mut second_ids = Vec::new();
    for (n, (cut, at)) in [
        (CutAt::MidEvent, start + (end - start) / 2),
        (CutAt::Boundary, start),
    ]
    .into_iter()
    .enumerate()
    {
        let res = client.raw_post(&call(1_000_002 + n as i64)).await?;
        let (before, _) = read_events(res, at, Duration::from_secs(60), |_| false).await;
        if n == 0 {
            second_ids = before.events.iter().filter_map(|e| e.id.clone()).collect();
        }
        let round = resume_round(&client, cut, &before, config.replay_timeout).await?;
        rounds.push(round);
    }
    info.id_scheme = id_scheme(&ids, &second_ids);
    let _ = client.close().await;
    Ok(Report {
        server: info,
        rounds,
    })
}

fn is_sse(res: &reqwest::Response) -> bool {
    res.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
}

/// `N`, `N/<stream>` (rmcp) or `<stream>-N`: the stream part and the number.
fn numbered(id: &[u8]) -> Option<(&[u8], u64)> {
    let digits = |d: &[u8]| -> Option<u64> {
        if d.is_empty() || d.len() > 19 || !d.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(d).ok()?.parse().ok()
    };
    if let Some(n) = digits(id) {
        return Some((b"", n));
    }
    if let Some(slash) = id.iter().position(|&b| b == b'/') {
        return Some((&id[slash + 1..], digits(&id[..slash])?));
    }
    let dash = id.iter().rposition(|&b| b == b'-')?;
    Some((&id[..dash], digits(&id[dash + 1..])?))
}

/// The numbers of one stream's ids, when they share one stream part and strictly increase (a
/// uuid whose last group happens to be digits does not: its other groups change).
fn stream_numbers<'a>(ids: impl IntoIterator<Item = &'a [u8]>) -> Option<(Vec<u8>, Vec<u64>)> {
    let mut part: Option<&[u8]> = None;
    let mut numbers = Vec::new();
    for id in ids {
        let (p, n) = numbered(id)?;
        if part.is_some_and(|q| q != p) || numbers.last().is_some_and(|&last| n <= last) {
            return None;
        }
        part = Some(p);
        numbers.push(n);
    }
    Some((part?.to_vec(), numbers))
}

fn id_scheme(first: &[&Bytes], second: &[Bytes]) -> IdScheme {
    if first.is_empty() {
        return IdScheme::None;
    }
    let a = stream_numbers(first.iter().map(|b| &b[..]));
    let b = stream_numbers(second.iter().map(|b| &b[..]));
    match (a, b) {
        (Some((pa, na)), Some((pb, nb))) => match (na.last(), nb.first()) {
            // A second stream under the same stream part that starts above the first one's last
            // id shares its counter.
            (Some(last), Some(next)) if pa == pb && next > last => IdScheme::SessionNumbers,
            _ => IdScheme::PerStreamNumbers,
        },
        (Some(_), None) if second.is_empty() => IdScheme::PerStreamNumbers,
        _ => IdScheme::Opaque,
    }
}

async fn resume_round(
    client: &Client,
    cut: CutAt,
    before: &Read,
    replay_timeout: Duration,
) -> Result<Round, ProbeError> {
    let round = |behaviour, evidence: String| Round {
        cut,
        behaviour,
        evidence,
    };
    let Some(cursor_event) = before.events.iter().rev().find(|e| e.id.is_some()) else {
        return Ok(round(
            Behaviour::NoIds,
            format!(
                "{} events before the cut, none with an id",
                before.events.len()
            ),
        ));
    };
    let cursor = cursor_event.id.clone().expect("found with an id");
    let res = client.raw_get(&cursor).await?;
    let status = res.status().as_u16();
    match status {
        200 if is_sse(&res) => {}
        404 => return Ok(round(Behaviour::Gone, "the resume was answered 404".into())),
        _ => {
            let retry = res
                .headers()
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map_or(String::new(), |v| format!(", Retry-After {v}"));
            return Ok(round(
                Behaviour::Conflict,
                format!("the resume was answered {status}{retry}"),
            ));
        }
    }
    let started = Instant::now();
    let (after, _) = read_events(res, u64::MAX, replay_timeout, |e| {
        e.iter().any(|s| is_response(&s.data))
    })
    .await;
    let waited = started.elapsed();
    let primes = after
        .events
        .iter()
        .take_while(|e| e.data.is_empty())
        .count();
    let priming_note = if primes > 0 {
        format!("{primes} priming event(s) first; ")
    } else {
        String::new()
    };
    let Some(first) = after.events.iter().find(|e| !e.data.is_empty()) else {
        return Ok(if after.ended {
            round(
                Behaviour::Empty,
                format!("{priming_note}200 and the stream ended with no event with data"),
            )
        } else {
            round(
                Behaviour::HeldOpen,
                format!(
                    "{priming_note}200 and nothing with data within {} ms",
                    waited.as_millis()
                ),
            )
        });
    };
    let earlier = |data: &Bytes| before.events.iter().position(|e| e.data == *data);
    let behaviour = if first.id.as_ref() == Some(&cursor) && first.data == cursor_event.data {
        (
            Behaviour::ResendsCursor,
            format!("re-sent the Last-Event-ID event {} first", show(&first.id)),
        )
    } else if let Some(i) = earlier(&first.data) {
        let old = &before.events[i];
        if old.id == first.id {
            (
                Behaviour::Reordered,
                format!("sent the already-received event {} again", show(&first.id)),
            )
        } else {
            (
                Behaviour::Restarted,
                format!(
                    "sent the content of event {} again under the new id {}",
                    show(&old.id),
                    show(&first.id)
                ),
            )
        }
    } else if first.id.is_some() && before.events.iter().any(|e| e.id == first.id) {
        (
            Behaviour::Reordered,
            format!("reused the id {} with other content", show(&first.id)),
        )
    } else if cut == CutAt::MidEvent && before.partial_id.is_some() && first.id == before.partial_id
    {
        (
            Behaviour::ReplaysEvent,
            format!("replayed the interrupted event {} whole", show(&first.id)),
        )
    } else {
        (
            Behaviour::Continues,
            format!(
                "went on after {} with the new event {}",
                show(&Some(cursor.clone())),
                show(&first.id)
            ),
        )
    };
    let got_response = after.events.iter().any(|e| is_response(&e.data));
    if behaviour.0.is_resumable() && !got_response {
        let (b, why) = if after.ended {
            (
                Behaviour::Empty,
                "but the stream ended without the response",
            )
        } else {
            (
                Behaviour::HeldOpen,
                "but the response did not come within the replay timeout",
            )
        };
        return Ok(round(b, format!("{priming_note}{} {why}", behaviour.1)));
    }
    Ok(round(behaviour.0, format!("{priming_note}{}", behaviour.1)))
}

impl Client {
    /// POSTs a raw JSON-RPC request on the session (the probe reads the answer itself).
    pub(crate) async fn raw_post(&self, body: &Value) -> Result<reqwest::Response, ClientError> {
        let res = self.post_raw(body).await?;
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

    /// `GET` + `Last-Event-ID` with the id's exact bytes.
    pub(crate) async fn raw_get(
        &self,
        last_event_id: &Bytes,
    ) -> Result<reqwest::Response, ClientError> {
        let value = HeaderValue::from_bytes(last_event_id).map_err(|_| {
            ClientError::Protocol(crate::client::ProtocolError::Unsendable("Last-Event-ID"))
        })?;
        self.get_raw(value).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scheme(a: &[&str], b: &[&str]) -> IdScheme {
        let a: Vec<Bytes> = a
            .iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect();
        let b: Vec<Bytes> = b
            .iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect();
        id_scheme(&a.iter().collect::<Vec<_>>(), &b)
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
            scheme(&["2-0", "2-1"], &["3-0"]),
            IdScheme::PerStreamNumbers
        );
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
}
