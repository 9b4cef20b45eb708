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

mod errors;
mod host;
mod ignore;
mod subscriptions;
mod upstream;

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
use tokio::sync::{Notify, oneshot};
use tokio::task::AbortHandle;

use crate::client_args::{AuthFlags, Remote, RetryArg, TasksArg, seconds};
use errors::Error;
use host::{Incoming, Out};
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

/// The longest line read from the host by default: the client's event limit.
const DEFAULT_MAX_LINE: usize = contract::DEFAULT_MAX_EVENT;

/// One line on stderr, prefixed, with control characters made spaces.
pub(crate) fn note(text: &str) {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let _ = writeln!(std::io::stderr().lock(), "ssegate bridge: {line}");
}

/// What the bridge shares between the host's requests.
pub(crate) struct Bridge {
    args: BridgeArgs,
    out: Out,
    upstream: Upstream,
    /// The host's requests under way: the key is the id's JSON text.
    inflight: Mutex<HashMap<String, AbortHandle>>,
    /// The bridge's requests to the host (server requests relayed): id to the waiting answer.
    asked: Mutex<HashMap<String, oneshot::Sender<Result<Value, RpcError>>>>,
    next_ask: AtomicU64,
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

impl Bridge {
    fn verbose(&self, text: impl FnOnce() -> String) {
        if self.args.verbose {
            note(&text());
        }
    }

    /// An error answer to the host.
    fn error(&self, id: Option<&RawValue>, error: &Error) {
        let id: Value = id
            .and_then(|id| serde_json::from_str(id.get()).ok())
            .unwrap_or(Value::Null);
        self.out
            .value(&json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()}));
    }

    /// A result answer to the host.
    fn result(&self, id: &RawValue, result: &Value) {
        let head = format!(r#"{{"jsonrpc":"2.0","id":{},"result":"#, id.get());
        let body = serde_json::to_vec(result).expect("a Value serializes");
        self.out.send(vec![
            Bytes::from(head),
            Bytes::from(body),
            Bytes::from_static(b"}"),
        ]);
    }

    /// The server's response `message` to the host's request `id`: its `result` or `error` as
    /// the server wrote it, under the host's id, without a copy.
    ///
    /// A host on 2026-07-28 must see the members that revision requires of a result, which a
    /// 2025-era server never writes: `for_2026` adds them ([`members_2026`]) in front of the
    /// result's own; that takes one parse and, for a response received in pieces, one copy.
    fn relay_response(&self, id: &RawValue, method: &str, message: &Message, for_2026: bool) {
        // The server's bytes as they arrived, the id swapped: nothing parsed, nothing copied.
        if !for_2026 && let Some(m) = message.with_id(Bytes::copy_from_slice(id.get().as_bytes())) {
            self.verbose(|| format!("{method}: answered, {} bytes", m.len()));
            return self.out.send(m.data().segments().to_vec());
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
                return self.error(Some(id), &e);
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
        self.out
            .send(vec![Bytes::from(head), body, Bytes::from_static(b"}")]);
    }

    /// One line from the host.
    fn on_line(self: &Arc<Self>, line: &[u8]) {
        let first = line.iter().find(|b| !b.is_ascii_whitespace()).copied();
        let message: HostMessage = match first {
            Some(b'{') => match serde_json::from_slice(line) {
                Ok(m) => m,
                Err(e) if e.is_syntax() || e.is_eof() => {
                    return self.error(
                        None,
                        &Error::new(jsonrpc::PARSE_ERROR, format!("parse error: {e}")),
                    );
                }
                Err(e) => {
                    let e = Error::new(
                        jsonrpc::INVALID_REQUEST,
                        format!("not a JSON-RPC message: {e}"),
                    );
                    return self.error(None, &e);
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
                return self.error(None, &e);
            }
        };
        let id = message.id.filter(|id| id.get() != "null");
        match (message.method, id) {
            (Some(method), Some(id)) => self.on_request(method, id, message.params),
            (Some(method), None) => self.on_notification(&method, message.params),
            (None, Some(id)) => self.on_answer(&id, message.result, message.error),
            (None, None) => self.error(
                None,
                &Error::new(jsonrpc::INVALID_REQUEST, "not a JSON-RPC message"),
            ),
        }
    }

    fn on_request(self: &Arc<Self>, method: String, id: Box<RawValue>, params: Option<Value>) {
        let key = key_of(&id);
        if method == method::SERVER_DISCOVER
            || params
                .as_ref()
                .is_some_and(|p| p["_meta"].get(contract::meta::PROTOCOL_VERSION).is_some())
        {
            self.host_2026.store(true, Ordering::Relaxed);
        }
        if method == "subscriptions/listen" {
            // Answered here: acknowledged now, open until the host cancels it.
            let id_value: Value = serde_json::from_str(id.get()).unwrap_or(Value::Null);
            let requested = params
                .as_ref()
                .map_or(Value::Null, |p| p["notifications"].clone());
            let ack = self.subscriptions.open(key, id_value, &requested);
            self.out.value(&ack);
            return;
        }
        let mut inflight = self.inflight.lock().expect("inflight lock");
        if inflight.contains_key(&key) {
            drop(inflight);
            let e = Error::new(
                jsonrpc::INVALID_REQUEST,
                format!("request id {key} is already in use"),
            );
            return self.error(Some(&id), &e);
        }
        let me = self.clone();
        let task = tokio::spawn(async move {
            // No `params` (or `null`) goes on as `{}`: JSON-RPC has no `"params": null`, and the
            // TypeScript SDK's server refuses it (400, a parse error).
            let params = params.unwrap_or_else(|| json!({}));
            let answer = me.answer(&method, params).await;
            // Gone from the map: the host cancelled the request; it gets no answer.
            if me
                .inflight
                .lock()
                .expect("inflight lock")
                .remove(&key_of(&id))
                .is_none()
            {
                return;
            }
            let host_2026 = me.host_2026.load(Ordering::Relaxed);
            match answer {
                Ok(Answer::Local(mut result)) => {
                    if host_2026 && let Some(obj) = result.as_object_mut() {
                        for (k, v) in members_2026(&method) {
                            obj.entry(k).or_insert(v);
                        }
                    }
                    me.result(&id, &result)
                }
                Ok(Answer::Server(message)) => {
                    let for_2026 = host_2026 && !me.upstream.is_stateless().await;
                    me.relay_response(&id, &method, &message, for_2026)
                }
                Err(e) => {
                    me.verbose(|| format!("{method}: error {}: {}", e.code, e.data[data::REASON]));
                    me.error(Some(&id), &e)
                }
            }
        });
        inflight.insert(key, task.abort_handle());
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

    fn on_notification(self: &Arc<Self>, method: &str, params: Option<Value>) {
        match method {
            // The bridge's own session is initialized; the host's needs nothing more.
            "notifications/initialized" => {}
            "notifications/cancelled" => {
                let id = params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .map(Value::to_string)
                    .unwrap_or_default();
                if self.subscriptions.close(&id) {
                    self.verbose(|| format!("subscription {id} closed by the host"));
                    return;
                }
                let cancelled = self.inflight.lock().expect("inflight lock").remove(&id);
                match cancelled {
                    // Dropping the call tells the server (`notifications/cancelled`, a task's
                    // `tasks/cancel`, or on 2026-07-28 the closed stream).
                    Some(task) => {
                        task.abort();
                        self.verbose(|| format!("request {id} cancelled by the host"));
                    }
                    None => self.verbose(|| format!("cancel of {id}: not under way")),
                }
            }
            _ => {
                let note = json!({"jsonrpc": "2.0", "method": method,
                                  "params": params.unwrap_or(json!({}))});
                let me = self.clone();
                tokio::spawn(async move { me.upstream.notify(&note).await });
            }
        }
    }

    /// The host's answer to a server request the bridge relayed.
    fn on_answer(&self, id: &RawValue, result: Option<Value>, error: Option<Value>) {
        let waiting = self.asked.lock().expect("asked lock").remove(&key_of(id));
        let Some(tx) = waiting else {
            note(&format!(
                "an answer for {}, which was never asked: dropped",
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
        let _ = tx.send(answer);
    }

    /// Stops: calls in flight cancelled, the session ended (within a second in all).
    async fn shutdown(&self) {
        let inflight: Vec<_> = self
            .inflight
            .lock()
            .expect("inflight lock")
            .drain()
            .map(|(_, task)| task)
            .collect();
        let cancelled = inflight.len();
        for task in inflight {
            task.abort();
        }
        if cancelled > 0 {
            self.verbose(|| format!("{cancelled} request(s) cancelled"));
            // The cancellations go out first (each a POST of its own).
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        self.upstream.close(Duration::from_millis(600)).await;
    }
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
    let status = runtime.block_on(serve(args));
    // The stdin thread may be blocked in a read: the process ends without waiting for it.
    std::process::exit(status)
}

async fn serve(args: BridgeArgs) -> i32 {
    let broken = Arc::new(Notify::new());
    let out = Out::start(broken.clone());
    let upstream = match Upstream::new(&args) {
        Ok(u) => u,
        Err(e) => {
            note(&e);
            return 2;
        }
    };
    let bridge = Arc::new(Bridge {
        out,
        upstream,
        inflight: Mutex::new(HashMap::new()),
        asked: Mutex::new(HashMap::new()),
        next_ask: AtomicU64::new(1),
        subscriptions: subscriptions::Subscriptions::default(),
        host_2026: AtomicBool::new(false),
        ignored: ignore::Ignored::new(&args.ignore_tools),
        args,
    });
    bridge.upstream.attach(Arc::downgrade(&bridge));
    let mut lines = host::read_stdin(bridge.args.max_line);
    let mut shutdown = crate::platform::Shutdown::listen();
    let status = loop {
        tokio::select! {
            line = lines.recv() => match line {
                Some(Incoming::Line(line)) => bridge.on_line(&line),
                Some(Incoming::TooLong(len)) => {
                    let mut e = Error::new(jsonrpc::INVALID_REQUEST, format!(
                        "a line of {len} bytes exceeds --max-line {}; it was not read",
                        bridge.args.max_line
                    ));
                    let limit = bridge.args.max_line;
                    // `data.kind`: the SSE decoder's word for a line over its limit.
                    let kind = DecodeError::LineTooLong { limit, offset: 0, id: None }.as_str();
                    e.data = json!({data::KIND: kind, "limit": limit});
                    bridge.error(None, &e);
                }
                None => break 0,
            },
            () = shutdown.recv() => break 0,
            () = broken.notified() => break 1,
        }
    };
    bridge.shutdown().await;
    // What is written is flushed (briefly: a host that stopped reading is not waited for).
    bridge.out.flush(Duration::from_millis(200)).await;
    status
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
