//! [`ServerMode::Stateless`](super::ServerMode::Stateless): MCP 2026-07-28 as the specification
//! describes it. No sessions; `server/discover` instead of `initialize`; every request names its
//! version in `_meta` (and, when sent, the `MCP-Protocol-Version` and `Mcp-Method` headers must
//! agree with the body); results say `"resultType":"complete"` (`server/discover` and `tools/list` also `"ttlMs":0` and `"cacheScope":"private"`); a `tools/call` is answered with an
//! SSE stream of events without ids (progress notifications, then the result), which nothing can
//! resume.
//!
//! | request | answer |
//! | --- | --- |
//! | `POST server/discover` | `200` JSON: `supportedVersions` `["2026-07-28"]`, `capabilities`, `serverInfo` |
//! | `POST tools/list`, `ping` | `200` JSON result |
//! | `POST tools/call` | `200 text/event-stream`, events without ids |
//! | `POST tools/call` `ask` | `200` JSON: `resultType` `input_required` (an elicitation) `rounds` times, then the result |
//! | `POST` without `_meta` version `2026-07-28` (`initialize` among them) | `400`, JSON-RPC `-32022` with `data.supported` |
//! | `MCP-Protocol-Version`, `Mcp-Method` or `Mcp-Name` (when sent) disagreeing with the body (`Mcp-Name`: `params.name` of `tools/call`, `params.taskId` of `tasks/*`) | `400`, JSON-RPC `-32020` (HeaderMismatch) |
//! | `POST` notification or response | `202` |
//! | `tasks/get`, `tasks/update`, `tasks/cancel`; `tools/call` as a task | with [`ServerConfig::tasks`](super::ServerConfig::tasks) on: the extension `io.modelcontextprotocol/tasks` (the `tasks` module's table); off: `-32601`, direct answers |

use bytes::{BufMut, Bytes, BytesMut};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{Value, json};
use tracing::debug;

use super::tasks::{self, HEADER_MISMATCH, Job, TASKS_EXTENSION};
use super::{
    Body, MCP_PATH, PROTOCOL_VERSION_HEADER, Shared, bump, parse_call, parse_tool, read_message,
    rpc_error, sse, tools,
};

/// The one protocol revision [`ServerMode::Stateless`](super::ServerMode::Stateless) speaks.
pub const VERSION_2026_07_28: &str = "2026-07-28";

/// The `_meta` key naming a request's protocol version.
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// JSON-RPC error: the request's protocol version is not one the server speaks.
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

fn header<'a>(req: &'a Request<Incoming>, name: &str) -> Option<&'a [u8]> {
    req.headers().get(name).map(|v| v.as_bytes())
}

pub(super) async fn post(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    debug_assert_eq!(req.uri().path(), MCP_PATH);
    let header_version = header(&req, PROTOCOL_VERSION_HEADER).map(<[u8]>::to_vec);
    let header_method = header(&req, "mcp-method").map(<[u8]>::to_vec);
    let header_name = header(&req, "mcp-name").map(<[u8]>::to_vec);
    let msg = match read_message(shared, req).await {
        Ok(m) => m,
        Err(answer) => return *answer,
    };
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    tracing::Span::current().record("rpc", method);
    // Notifications (no id) and responses (no method) are accepted and not answered.
    let Some(id) = msg.get("id").cloned().filter(|_| !method.is_empty()) else {
        return super::empty(StatusCode::ACCEPTED);
    };
    let version = msg["params"]["_meta"][META_VERSION].as_str();
    if version != Some(VERSION_2026_07_28) {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            &id,
            UNSUPPORTED_PROTOCOL_VERSION,
            "unsupported protocol version",
            Some(json!({"supported": [VERSION_2026_07_28], "requested": version})),
        );
    }
    let disagrees =
        |sent: &Option<Vec<u8>>, body: &str| sent.as_deref().is_some_and(|h| h != body.as_bytes());
    // `Mcp-Name` names the tool of a `tools/call` and the task of `tasks/*`.
    let name = match method {
        "tools/call" => msg["params"]["name"].as_str(),
        "tasks/get" | "tasks/update" | "tasks/cancel" => msg["params"]["taskId"].as_str(),
        _ => None,
    };
    let name_disagrees = header_name.is_some() && name.is_some_and(|n| disagrees(&header_name, n));
    if disagrees(&header_version, VERSION_2026_07_28)
        || disagrees(&header_method, method)
        || name_disagrees
    {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            &id,
            HEADER_MISMATCH,
            "a header disagrees with the request body",
            Some(json!({
                "MCP-Protocol-Version": header_version.as_deref().map(String::from_utf8_lossy),
                "Mcp-Method": header_method.as_deref().map(String::from_utf8_lossy),
                "Mcp-Name": header_name.as_deref().map(String::from_utf8_lossy),
            })),
        );
    }
    if let Some(answer) = tasks::extension_method(shared, method, &msg, &id) {
        return answer;
    }
    let complete = |mut result: Value| {
        result["resultType"] = "complete".into();
        super::json(
            StatusCode::OK,
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        )
    };
    // 2026-07-28's cacheable results carry caching hints: this server's say "cache nothing".
    let cacheable = |mut result: Value| {
        result["ttlMs"] = 0.into();
        result["cacheScope"] = "private".into();
        complete(result)
    };
    match method {
        "server/discover" => {
            let mut capabilities = json!({"tools": {"listChanged": false}});
            if shared.config.tasks.is_on() {
                capabilities["extensions"] = json!({TASKS_EXTENSION: {}});
            }
            cacheable(json!({
                "supportedVersions": [VERSION_2026_07_28],
                "capabilities": capabilities,
                "serverInfo": {"name": "ssegate-loopback", "version": env!("CARGO_PKG_VERSION")},
            }))
        }
        "ping" => complete(json!({})),
        "tools/list" => {
            let mut list = tools::tool_list();
            list["tools"]
                .as_array_mut()
                .expect("a list")
                .push(ask_tool());
            cacheable(list)
        }
        "tools/call" if msg["params"]["name"] == "ask" => {
            let task = tasks::extension_call(shared, &msg, &id, || {
                ask_rounds(shared, &msg, &id).map(|rounds| Job::Ask { rounds })
            });
            task.unwrap_or_else(|| ask(shared, &msg, id))
        }
        "tools/call" => {
            let task = tasks::extension_call(shared, &msg, &id, || {
                parse_tool(shared, &msg, id.clone()).map(Job::Call)
            });
            if let Some(answer) = task {
                return answer;
            }
            let call = match parse_call(shared, &msg, id) {
                Ok(call) => call,
                Err(answer) => return *answer,
            };
            let frames: Vec<Bytes> = call.messages().iter().map(|m| frame(m)).collect();
            bump(&shared.stats.streams);
            debug!(
                events = frames.len(),
                "tools/call stream produced (no event ids)"
            );
            sse(frames)
        }
        _ => rpc_error(StatusCode::OK, &id, -32601, "method not found", None),
    }
}

/// One SSE event of `data` (compact JSON: one line), without an id.
pub(super) fn frame(data: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(data.len() + 8);
    out.put_slice(b"data: ");
    out.put_slice(data);
    out.put_slice(b"\n\n");
    out.freeze()
}

/// Most rounds the `ask` tool may be told to ask for.
pub const MAX_ASK_ROUNDS: u64 = 1000;

fn ask_tool() -> Value {
    json!({
        "name": "ask",
        "description": "Asks the client for a name (an elicitation, `input_required`) `rounds` times, then answers with the last name given.",
        "inputSchema": {
            "type": "object",
            "properties": {"rounds": {"type": "integer", "minimum": 0, "maximum": MAX_ASK_ROUNDS}},
        },
    })
}

/// The `ask` tool's `rounds` argument (default 1), or its `-32602` answer.
fn ask_rounds(shared: &Shared, msg: &Value, id: &Value) -> Result<u64, Box<Response<Body>>> {
    super::int_arg(&msg["params"]["arguments"], "rounds", 1, MAX_ASK_ROUNDS).map_err(|data| {
        bump(&shared.stats.invalid_params);
        Box::new(rpc_error(
            StatusCode::OK,
            id,
            -32602,
            "invalid params",
            Some(data),
        ))
    })
}

/// The `ask` tool: while fewer than `rounds` rounds were answered (the round travels in
/// `requestState`, as the specification lets a stateless server keep it), `input_required` with
/// one elicitation; then the result, naming the rounds and the last answer's `content.name`.
fn ask(shared: &Shared, msg: &Value, id: Value) -> Response<Body> {
    let params = &msg["params"];
    let rounds = match ask_rounds(shared, msg, &id) {
        Ok(n) => n,
        Err(answer) => return *answer,
    };
    let round = match &params["requestState"] {
        Value::Null => 0,
        state => match state
            .as_str()
            .and_then(|s| s.strip_prefix("round:"))
            .and_then(|n| n.parse::<u64>().ok())
        {
            Some(n) if n <= rounds => n,
            _ => {
                return rpc_error(
                    StatusCode::OK,
                    &id,
                    -32602,
                    "invalid requestState",
                    Some(state.clone()),
                );
            }
        },
    };
    let answer = |result: Value| {
        super::json(
            StatusCode::OK,
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        )
    };
    if round < rounds {
        return answer(json!({
            "resultType": "input_required",
            "inputRequests": {
                "name": {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": format!("Your name? (round {} of {rounds})", round + 1),
                        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
                    },
                },
            },
            "requestState": format!("round:{}", round + 1),
        }));
    }
    bump(&shared.stats.calls);
    let name = params["inputResponses"]["name"]["content"]["name"]
        .as_str()
        .unwrap_or("");
    answer(json!({
        "resultType": "complete",
        "content": [{"type": "text", "text": format!("{rounds} rounds; last name: {name}")}],
        "isError": false,
    }))
}
