//! `ssegate bridge URL`: the MCP stdio transport in front of a remote MCP server, every request
//! through the guarded client.
//!
//! The host speaks newline-delimited JSON-RPC on stdin and stdout; the bridge answers its
//! `initialize` (or, from a 2026-07-28 host, `server/discover`) itself, at the host's version,
//! from what the server declared, and negotiates with the server on its own ([`Protocol::Auto`]
//! unless `--protocol` pins a version). Every other request is one guarded call; its response is
//! written with the host's id. Server notifications and requests go to the host, the host's
//! answers back. Logs go to stderr; stdout carries JSON-RPC messages only.
//!
//! When the server gives no answer of its own, the bridge answers with the error of
//! [`ssegate::contract`]: its code, `message`, `data.kind`, `data.outcome` and `data.refusal`, as
//! the client's error says ([`errors`]); `--help` prints the codes from the same contract.
//!
//! The bridge is [`relay`]: a function of its settings ([`BridgeConfig`], made from the command
//! line by [`BridgeArgs::config`]), the host's message transport ([`host::HostTransport`]: stdin and
//! stdout, or in tests an in-memory duplex) and the server's (the guarded client, [`upstream`]).
//! One loop reads the host's lines and owns the table of what is under way ([`pending`]): each
//! host request is answered by a task of its own, whose answer the loop writes only if the request
//! is still under way; each server request is asked of the host under an id the loop gives it.

mod config;
mod errors;
mod host;
mod ignore;
mod pending;
mod subscriptions;
mod upstream;

use std::future::Future;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use ssegate::client::{Client, RpcError, STATELESS_VERSIONS};
use ssegate::contract::{
    self, DEFAULT_CALL_TIMEOUT, HOST_INITIALIZE_VERSIONS, Kind, Outcome, data, jsonrpc, method,
};
use ssegate::message::Message;
use ssegate::sse::DecodeError;
use tokio::sync::mpsc;

use crate::client_args::{AuthFlags, Remote, RetryArg, TasksArg, seconds};
use config::BridgeConfig;
use config::DEFAULT_MAX_LINE;
use errors::Error;
use host::{HostLink, HostTransport, Incoming, Out};
use pending::{Pending, Reply};
use upstream::Upstream;

/// What `ssegate bridge --help` says after the options: the error codes from the contract.
pub(crate) fn after_help() -> String {
    let outcomes: Vec<&str> = Outcome::ALL.into_iter().map(Outcome::as_str).collect();
    format!(
        "\
A host's configuration (Claude Desktop, Cursor, VS Code, ...):
  {{\"command\": \"ssegate\", \"args\": [\"bridge\", \"https://mcp.example.com/mcp\"]}}

Errors the bridge answers with itself (JSON-RPC `error.code` and `message`: when; `data.kind`
names what happened):
{table}  {parse}  a line that is not JSON; {invalid} a line over --max-line or not a JSON-RPC message
  {invalid_params}  a tools/call to a tool hidden by --ignore-tool (the server is not asked)
`data.outcome` is one of {outcomes} (`{unknown}`: the server may have run it);
`data.refusal` names why the engine refused the stream, when it did. A call that ran as a task
and failed is answered with the server's own error, `data.kind` {task_failed}.

Exit status: 0 at the end of stdin, SIGTERM or SIGINT (Ctrl-C or Ctrl-Break on Windows) (calls
in flight cancelled, the session ended with DELETE); 1 when stdout is closed; 2 for a bad flag or
value.",
        table = errors::code_table(),
        parse = jsonrpc::PARSE_ERROR,
        invalid = jsonrpc::INVALID_REQUEST,
        invalid_params = jsonrpc::INVALID_PARAMS,
        outcomes = outcomes.join(", "),
        unknown = Outcome::Unknown,
        task_failed = Kind::TaskFailed,
    )
}

/// Bridge an MCP host that launches servers over stdio (newline-delimited JSON-RPC on stdin and
/// stdout) to a remote Streamable HTTP server, every request through ssegate's guarded client:
/// one response per request, never torn; cut streams resumed with Last-Event-ID where the server
/// allows it; a lost call sent again only when safe (--retry), else answered with the
/// outcome-unknown error. Logs go to stderr.
#[derive(clap::Args, Debug)]
pub(crate) struct BridgeArgs {
    /// The server and how to speak to it (the host speaks its own version to the bridge).
    #[command(flatten)]
    remote: Remote,
    /// The deadline of each request (resumes and re-issues included), in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_CALL_TIMEOUT.as_secs_f64(),
          value_parser = seconds)]
    timeout: f64,
    /// When a call whose answer was lost is sent again: never; safe (the tool is annotated
    /// readOnlyHint or idempotentHint, or the method has no side effects); always.
    #[arg(long, value_enum, default_value_t = RetryArg::IfSafe)]
    retry: RetryArg,
    /// Whether tool calls may run as tasks: auto (where the server offers them: a lost answer is
    /// read again, never a new call); never; require.
    #[arg(long, value_enum, default_value_t = TasksArg::Auto)]
    tasks: TasksArg,
    /// The longest line read from the host, in bytes; a longer one is answered with an error and
    /// not kept.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_LINE)]
    max_line: usize,
    /// Report on stderr: the server's protocol, each call's outcome.
    #[arg(short, long)]
    verbose: bool,
    /// Hide the tools whose name matches GLOB (`*` any run of characters, `?` one; whole name,
    /// any case, as mcp-remote; repeatable): left out of every tools/list, and a tools/call to one is
    /// answered with an error, the server never asked.
    #[arg(long = "ignore-tool", value_name = "GLOB")]
    ignore_tools: Vec<String>,
    /// How to sign in when the server asks (the host's requests wait for the sign-in).
    #[command(flatten)]
    auth: AuthFlags,
}

/// One line on stderr, prefixed, with control characters made spaces.
pub(crate) fn note(text: &str) {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let _ = writeln!(std::io::stderr().lock(), "ssegate bridge: {line}");
}

/// What the relay's loop and the tasks answering the host's requests share.
pub(crate) struct Bridge {
    verbose: bool,
    max_line: usize,
    out: Out,
    upstream: Upstream,
    /// The host's `subscriptions/listen` subscriptions (a 2026-07-28 host).
    subscriptions: subscriptions::Subscriptions,
    /// The host speaks 2026-07-28 (it sent `server/discover`, or a request stamped with a version).
    host_2026: AtomicBool,
    /// The tools hidden from the host (`--ignore-tool`).
    ignored: ignore::Ignored,
}

/// The members of a host's message the bridge reads.
#[derive(Deserialize)]
struct HostMessage {
    #[serde(default)]
    id: Option<Box<RawValue>>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

/// The members of a server's response the bridge rewrites (the id) or passes on (the rest).
#[derive(Deserialize)]
struct ServerResponse<'a> {
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

/// What the relay's loop is told by the tasks and the server's side.
enum Event {
    /// The answer to a host request (its parts, to write as one line), unless the request was
    /// cancelled meanwhile: `key` and `seq` as [`Pending`] knows it.
    Answered {
        key: String,
        seq: u64,
        parts: Vec<Bytes>,
    },
    /// A server request to ask of the host; the host's answer goes to `reply`.
    Ask {
        method: String,
        params: Option<Value>,
        reply: Reply,
    },
}

/// An error answer to the host, as its parts.
fn error_parts(id: Option<&RawValue>, error: &Error) -> Vec<Bytes> {
    let id: Value = id
        .and_then(|id| serde_json::from_str(id.get()).ok())
        .unwrap_or(Value::Null);
    let text = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()}))
        .expect("a Value serializes");
    vec![Bytes::from(text)]
}

/// A result answer to the host, as its parts.
fn result_parts(id: &RawValue, result: &Value) -> Vec<Bytes> {
    let head = format!(r#"{{"jsonrpc":"2.0","id":{},"result":"#, id.get());
    let body = serde_json::to_vec(result).expect("a Value serializes");
    vec![
        Bytes::from(head),
        Bytes::from(body),
        Bytes::from_static(b"}"),
    ]
}

impl Bridge {
    fn verbose(&self, text: impl FnOnce() -> String) {
        if self.verbose {
            note(&text());
        }
    }

    /// An error answer to the host, written now.
    fn error(&self, id: Option<&RawValue>, error: &Error) {
        self.out.send(error_parts(id, error));
    }

    /// The server's response `message` to the host's request `id`: its `result` or `error` as
    /// the server wrote it, under the host's id, without a copy.
    ///
    /// A host on 2026-07-28 must see the members that revision requires of a result, which a
    /// 2025-era server never writes: `for_2026` adds them ([`members_2026`]) in front of the
    /// result's own; that takes one parse and, for a response received in pieces, one copy.
    fn response_parts(
        &self,
        id: &RawValue,
        method: &str,
        message: &Message,
        for_2026: bool,
    ) -> Vec<Bytes> {
        // The server's bytes as they arrived, the id swapped: nothing parsed, nothing copied.
        if !for_2026 && let Some(m) = message.with_id(Bytes::copy_from_slice(id.get().as_bytes())) {
            self.verbose(|| format!("{method}: answered, {} bytes", m.len()));
            return m.data().segments().to_vec();
        }
        let bytes = message.to_bytes();
        let parsed: Result<ServerResponse<'_>, _> = serde_json::from_slice(&bytes);
        let (member, raw) = match parsed {
            Ok(ServerResponse {
                result: Some(r), ..
            }) => ("result", r),
            Ok(ServerResponse { error: Some(e), .. }) => ("error", e),
            _ => {
                let e = Error::of_kind(
                    method,
                    Kind::Protocol,
                    Outcome::Unknown,
                    "the server's response has neither result nor error",
                );
                return error_parts(Some(id), &e);
            }
        };
        let start = raw.get().as_ptr() as usize - bytes.as_ptr() as usize;
        let mut body = bytes.slice(start..start + raw.get().len());
        let mut head = format!(r#"{{"jsonrpc":"2.0","id":{},"{member}":"#, id.get());
        if for_2026 && member == "result" && body.first() == Some(&b'{') {
            let empty = body[1..].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'}');
            head.push('{');
            let members = members_2026(method);
            let members = members.iter().map(|(k, v)| format!("\"{k}\":{v}"));
            head.push_str(&members.collect::<Vec<_>>().join(","));
            if !empty {
                head.push(',');
            }
            body = body.slice(1..);
        }
        self.verbose(|| format!("{method}: {member}, {} bytes", body.len()));
        vec![Bytes::from(head), body, Bytes::from_static(b"}")]
    }

    /// The answer to the host's request `id`, as its parts.
    async fn answer_parts(&self, method: &str, id: &RawValue, params: Option<Value>) -> Vec<Bytes> {
        // No `params` (or `null`) goes on as `{}`: JSON-RPC has no `"params": null`, and the
        // TypeScript SDK's server refuses it (400, a parse error).
        let params = params.unwrap_or_else(|| json!({}));
        let answer = self.answer(method, params).await;
        let host_2026 = self.host_2026.load(Ordering::Relaxed);
        match answer {
            Ok(Answer::Local(mut result)) => {
                if host_2026 && let Some(obj) = result.as_object_mut() {
                    for (k, v) in members_2026(method) {
                        obj.entry(k).or_insert(v);
                    }
                }
                result_parts(id, &result)
            }
            Ok(Answer::Server(message)) => {
                let for_2026 = host_2026 && !self.upstream.is_stateless().await;
                self.response_parts(id, method, &message, for_2026)
            }
            Err(e) => {
                self.verbose(|| format!("{method}: error {}: {}", e.code, e.data[data::REASON]));
                error_parts(Some(id), &e)
            }
        }
    }

    /// The answer to one host request.
    async fn answer(&self, method: &str, mut params: Value) -> Result<Answer, Error> {
        self.upstream.learn_host(method, &params);
        match method {
            "ping" => Ok(Answer::Local(json!({}))),
            method::INITIALIZE => self.initialize(&params).await.map(Answer::Local),
            method::SERVER_DISCOVER => self.discover().await.map(Answer::Local),
            _ => {
                if method == method::TOOLS_CALL
                    && let Some(refused) = self.ignored.refuse_call(&params)
                {
                    return Err(refused);
                }
                upstream::strip_host_meta(&mut params);
                let message = self.upstream.call(method, params).await?;
                if method == "tools/list"
                    && let Some(result) = self.ignored.filter_list(&message)
                {
                    return Ok(Answer::Local(result));
                }
                Ok(Answer::Server(message))
            }
        }
    }

    /// `initialize` from a host on a 2025 revision: answered at its version, with what the server
    /// declared.
    async fn initialize(&self, params: &Value) -> Result<Value, Error> {
        let client = self.upstream.client().await?;
        let asked = params["protocolVersion"].as_str().unwrap_or_default();
        let version = if HOST_INITIALIZE_VERSIONS.contains(&asked) {
            asked
        } else {
            HOST_INITIALIZE_VERSIONS[0]
        };
        let result = declaration(&client, "protocolVersion", json!(version), false);
        self.verbose(|| {
            format!(
                "host initialize at {version}; server speaks {}",
                client.protocol_version().unwrap_or_default()
            )
        });
        Ok(result)
    }

    /// `server/discover` from a 2026-07-28 host: what the server declared, the versions the
    /// bridge speaks to a host.
    async fn discover(&self) -> Result<Value, Error> {
        let client = self.upstream.client().await?;
        Ok(declaration(
            &client,
            "supportedVersions",
            json!(STATELESS_VERSIONS),
            true,
        ))
    }
}

/// The relay's loop: the host's lines in, the events of the tasks and the server's side, and the
/// table of what is under way, which nothing else touches.
struct Relay {
    bridge: Arc<Bridge>,
    pending: Pending,
    /// Given to each task and to the server's side.
    events: mpsc::UnboundedSender<Event>,
}

impl Relay {
    /// One line from the host.
    fn on_line(&mut self, line: &[u8]) {
        let first = line.iter().find(|b| !b.is_ascii_whitespace()).copied();
        let message: HostMessage = match first {
            Some(b'{') => match serde_json::from_slice(line) {
                Ok(m) => m,
                Err(e) if e.is_syntax() || e.is_eof() => {
                    return self.bridge.error(
                        None,
                        &Error::new(jsonrpc::PARSE_ERROR, format!("parse error: {e}")),
                    );
                }
                Err(e) => {
                    let e = Error::new(
                        jsonrpc::INVALID_REQUEST,
                        format!("not a JSON-RPC message: {e}"),
                    );
                    return self.bridge.error(None, &e);
                }
            },
            _ => {
                let e = match serde_json::from_slice::<serde::de::IgnoredAny>(line) {
                    Err(e) => Error::new(jsonrpc::PARSE_ERROR, format!("parse error: {e}")),
                    Ok(_) if first == Some(b'[') => Error::new(
                        jsonrpc::INVALID_REQUEST,
                        "JSON-RPC batches are not part of MCP's stdio transport",
                    ),
                    Ok(_) => Error::new(jsonrpc::INVALID_REQUEST, "not a JSON-RPC message"),
                };
                return self.bridge.error(None, &e);
            }
        };
        let id = message.id.filter(|id| id.get() != "null");
        match (message.method, id) {
            (Some(method), Some(id)) => self.on_request(method, id, message.params),
            (Some(method), None) => self.on_notification(&method, message.params),
            (None, Some(id)) => self.on_answer(&id, message.result, message.error),
            (None, None) => self.bridge.error(
                None,
                &Error::new(jsonrpc::INVALID_REQUEST, "not a JSON-RPC message"),
            ),
        }
    }

    /// A line over the limit: answered with an error, nothing of it read.
    fn on_too_long(&self, len: usize) {
        let limit = self.bridge.max_line;
        let mut e = Error::new(
            jsonrpc::INVALID_REQUEST,
            format!("a line of {len} bytes exceeds --max-line {limit}; it was not read"),
        );
        // `data.kind`: the SSE decoder's word for a line over its limit.
        let kind = DecodeError::LineTooLong {
            limit,
            offset: 0,
            id: None,
        }
        .as_str();
        e.data = json!({data::KIND: kind, "limit": limit});
        self.bridge.error(None, &e);
    }

    fn on_request(&mut self, method: String, id: Box<RawValue>, params: Option<Value>) {
        let bridge = &self.bridge;
        let key = key_of(&id);
        if method == method::SERVER_DISCOVER
            || params
                .as_ref()
                .is_some_and(|p| p["_meta"].get(contract::meta::PROTOCOL_VERSION).is_some())
        {
            bridge.host_2026.store(true, Ordering::Relaxed);
        }
        if method == "subscriptions/listen" {
            // Answered here: acknowledged now, open until the host cancels it.
            let id_value: Value = serde_json::from_str(id.get()).unwrap_or(Value::Null);
            let requested = params
                .as_ref()
                .map_or(Value::Null, |p| p["notifications"].clone());
            let ack = bridge.subscriptions.open(key, id_value, &requested);
            bridge.out.value(&ack);
            return;
        }
        if self.pending.in_use(&key) {
            let e = Error::new(
                jsonrpc::INVALID_REQUEST,
                format!("request id {key} is already in use"),
            );
            return bridge.error(Some(&id), &e);
        }
        let seq = self.pending.next_seq();
        let (me, events, task_key) = (bridge.clone(), self.events.clone(), key.clone());
        let task = tokio::spawn(async move {
            let parts = me.answer_parts(&method, &id, params).await;
            let _ = events.send(Event::Answered {
                key: task_key,
                seq,
                parts,
            });
        });
        self.pending.insert(key, seq, task.abort_handle());
    }

    fn on_notification(&mut self, method: &str, params: Option<Value>) {
        let bridge = &self.bridge;
        match method {
            // The bridge's own session is initialized; the host's needs nothing more.
            "notifications/initialized" => {}
            "notifications/cancelled" => {
                let id = params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .map(Value::to_string)
                    .unwrap_or_default();
                if bridge.subscriptions.close(&id) {
                    bridge.verbose(|| format!("subscription {id} closed by the host"));
                } else if self.pending.cancel(&id) {
                    // Dropping the call tells the server (`notifications/cancelled`, a task's
                    // `tasks/cancel`, or on 2026-07-28 the closed stream).
                    bridge.verbose(|| format!("request {id} cancelled by the host"));
                } else {
                    bridge.verbose(|| format!("cancel of {id}: not under way"));
                }
            }
            _ => {
                let note = json!({"jsonrpc": "2.0", "method": method,
                                  "params": params.unwrap_or(json!({}))});
                let me = bridge.clone();
                tokio::spawn(async move { me.upstream.notify(&note).await });
            }
        }
    }

    /// The host's answer to a server request the bridge relayed.
    fn on_answer(&mut self, id: &RawValue, result: Option<Value>, error: Option<Value>) {
        let Some(reply) = self.pending.answered(&key_of(id)) else {
            note(&format!(
                "an answer for {}, which was never asked or no longer awaited: dropped",
                id.get()
            ));
            return;
        };
        let answer = match (result, error) {
            (Some(result), _) => Ok(result),
            (None, Some(error)) => Err(RpcError::new(
                error["code"]
                    .as_i64()
                    .unwrap_or(jsonrpc::INTERNAL_ERROR.into()),
                error["message"].as_str().unwrap_or("the host's error"),
            )),
            (None, None) => Err(RpcError::new(
                jsonrpc::INTERNAL_ERROR.into(),
                "the host answered without a result",
            )),
        };
        let _ = reply.send(answer);
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Answered { key, seq, parts } => {
                // Not under way any more: the host cancelled it, and gets no answer.
                if self.pending.finish(&key, seq) {
                    self.bridge.out.send(parts);
                }
            }
            Event::Ask {
                method,
                params,
                reply,
            } => {
                let id = self.pending.ask(reply);
                let mut request = json!({"jsonrpc": "2.0", "id": id, "method": method});
                if let Some(params) = params {
                    request["params"] = params;
                }
                self.bridge.out.value(&request);
            }
        }
    }

    /// Stops: calls in flight cancelled, the session ended (within a second in all).
    async fn shutdown(&mut self) {
        let cancelled = self.pending.cancel_all();
        if cancelled > 0 {
            self.bridge
                .verbose(|| format!("{cancelled} request(s) cancelled"));
            // The cancellations go out first (each a POST of its own).
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        self.bridge.upstream.close(Duration::from_millis(600)).await;
    }
}

/// The bridge: the host on `host`, the server as `config` says, until the host's input ends or
/// `stop` completes (0) or the host can no longer be written to (1). Then calls in flight are
/// cancelled, the session ended, and what was written flushed.
async fn relay(
    config: BridgeConfig,
    host: impl HostTransport,
    stop: impl Future<Output = ()>,
) -> i32 {
    let HostLink {
        mut incoming,
        out,
        broken,
    } = host.open(config.max_line);
    let (events, mut events_rx) = mpsc::unbounded_channel();
    let bridge = Arc::new(Bridge {
        verbose: config.verbose,
        max_line: config.max_line,
        out,
        subscriptions: subscriptions::Subscriptions::default(),
        host_2026: AtomicBool::new(false),
        ignored: ignore::Ignored::new(&config.ignore_tools),
        upstream: Upstream::new(config),
    });
    bridge
        .upstream
        .attach(Arc::downgrade(&bridge), events.clone());
    let mut relay = Relay {
        bridge,
        pending: Pending::default(),
        events,
    };
    let mut stop = std::pin::pin!(stop);
    let status = loop {
        tokio::select! {
            line = incoming.recv() => match line {
                Some(Incoming::Line(line)) => relay.on_line(&line),
                Some(Incoming::TooLong(len)) => relay.on_too_long(len),
                None => break 0,
            },
            Some(event) = events_rx.recv() => relay.on_event(event),
            () = &mut stop => break 0,
            () = broken.notified() => break 1,
        }
    };
    relay.shutdown().await;
    // What is written is flushed (briefly: a host that stopped reading is not waited for).
    relay.bridge.out.flush(Duration::from_millis(200)).await;
    status
}

/// The methods whose 2026-07-28 results carry caching hints (`ttlMs`, `cacheScope`).
const CACHEABLE: &[&str] = &[
    "prompts/list",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    method::SERVER_DISCOVER,
    "tools/list",
];

/// The members a 2026-07-28 result of `method` must have, as a result the bridge makes (or that a
/// 2025-era server answered) gets them: `resultType` `complete`, and for a cacheable method the
/// hints that cache nothing (`ttlMs` 0: immediately stale; `cacheScope` `private`).
fn members_2026(method: &str) -> Vec<(&'static str, Value)> {
    let mut members = vec![("resultType", json!("complete"))];
    if CACHEABLE.contains(&method) {
        members.push(("ttlMs", json!(0)));
        members.push(("cacheScope", json!("private")));
    }
    members
}

/// What the server declared (`capabilities`, `serverInfo`, `instructions`), as the answer to a
/// host's `initialize` (`discover_first`: `server/discover`), beside `key: version`.
fn declaration(client: &Client, key: &str, version: Value, discover_first: bool) -> Value {
    let (first, second) = (client.initialize_result(), client.discover_result());
    let declared = if discover_first {
        second.or(first)
    } else {
        first.or(second)
    }
    .unwrap_or_default();
    let info = upstream::server_info(&declared);
    let mut result = json!({
        key: version,
        "capabilities": client.server_capabilities().as_deref().cloned().unwrap_or(json!({})),
        "serverInfo": info,
    });
    if discover_first {
        // Where the SDKs read it on 2026-07-28.
        result["_meta"] = json!({contract::meta::SERVER_INFO: info});
    }
    if let Some(instructions) = declared.get("instructions") {
        result["instructions"] = instructions.clone();
    }
    result
}

/// A JSON-RPC id as a map key: its JSON text, written compactly (as `Value::to_string` does).
fn key_of(id: &RawValue) -> String {
    serde_json::from_str::<Value>(id.get()).map_or_else(|_| id.get().to_owned(), |v| v.to_string())
}

/// An answer to a host request.
enum Answer {
    /// Made by the bridge.
    Local(Value),
    /// The server's response.
    Server(Message),
}

/// The allocator setting the bridge runs with unless the environment sets it: freed memory goes
/// back to the system at once. A bridge lives as long as its host and passes messages of many
/// megabytes; with the allocator's default delay, what it freed after each stays resident.
const PURGE_DELAY: &str = "MIMALLOC_PURGE_DELAY";

/// Runs the bridge again in this process with [`PURGE_DELAY`] set to 0 (the allocator reads its
/// settings before `main`), unless it is set already; if that fails, goes on as it is. Unix only:
/// on Windows the bridge runs with the allocator's default delay unless the host's environment
/// sets it (`crate::platform::reexec_with_env`).
fn purge_at_once() {
    if std::env::var_os(PURGE_DELAY).is_some() {
        return;
    }
    let error = crate::platform::reexec_with_env(PURGE_DELAY, "0");
    if error.kind() != std::io::ErrorKind::Unsupported {
        note(&format!("running on without {PURGE_DELAY}=0: {error}"));
    }
}

pub(crate) fn run(args: BridgeArgs) -> ExitCode {
    purge_at_once();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            note(&format!("cannot start the runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let status = runtime.block_on(async {
        let config = match args.config() {
            Ok(config) => config,
            Err(e) => {
                note(&e);
                return 2;
            }
        };
        let mut shutdown = crate::platform::Shutdown::listen();
        relay(config, host::Stdio, async move { shutdown.recv().await }).await
    });
    // The stdin thread may be blocked in a read: the process ends without waiting for it.
    std::process::exit(status)
}

#[cfg(test)]
mod tests {
    use ssegate::client::INITIALIZE_VERSIONS;

    use super::*;

    #[test]
    fn the_host_versions_include_every_initialize_version_of_the_client() {
        for v in INITIALIZE_VERSIONS {
            assert!(HOST_INITIALIZE_VERSIONS.contains(v), "{v}");
        }
    }
}

#[cfg(test)]
mod dispatch_tests;
