//! The loopback server's tools and their deterministic JSON-RPC payloads.
//!
//! Every payload is a pure function of its inputs, so a test (or the demo) can compute the exact bytes
//! the server sends and compare what a client delivered against them.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;

use crate::rng::SplitMix64;

/// Default size of the `big_result` tool's text: 4 MiB, as in the field reports.
pub const DEFAULT_RESULT_SIZE: usize = 4 << 20;

/// Default seed of the `big_result` prose.
pub const DEFAULT_SEED: u64 = 0x55E6_A7E0_0000_0001;

/// Words of plain prose.
const WORDS: &[&str] = &[
    "the",
    "stream",
    "was",
    "cut",
    "after",
    "bytes",
    "and",
    "the",
    "client",
    "resumed",
    "with",
    "its",
    "last",
    "event",
    "id",
    "while",
    "server",
    "replayed",
    "result",
    "of",
    "a",
    "tool",
    "call",
    "in",
    "one",
    "session",
    "buffer",
    "progress",
    "message",
    "value",
    "is",
    "complete",
    "not",
    "to",
    "from",
    "every",
    "line",
    "reconnect",
    "budget",
    "slot",
    "ring",
    "data",
    "frame",
    "field",
    "which",
];

/// Pieces that stress a JSON string scanner, already escaped as they appear inside a JSON string:
/// quotes, backslashes, control escapes, `\u` escapes (a surrogate pair among them) and raw UTF-8
/// of 2, 3 and 4 bytes.
const SPICE: &[&str] = &[
    r#"\"quoted\""#,
    r#"C:\\Users\\mcp\\logs\\trace.txt"#,
    r#"line\nbreak"#,
    r#"tab\tstop"#,
    r#"caf\u00e9"#,
    "café",
    "naïve",
    "—",
    "日本語のテキスト",
    "🦀",
    r#"\ud83e\udd80"#,
    "50%",
    r#"<a href=\"x\">"#,
    r#"{\"nested\": [1, 2, {\"k\": null}]}"#,
    "src/lib.rs:42:7",
    r#"\r\n"#,
    r#"\\"#,
    r#"\u2028"#,
    r#"\/"#,
];

/// The `big_result` text as it appears between the quotes of the JSON string: exactly `size` bytes of
/// prose with escapes and multi-byte UTF-8 (never split: padding with `.` makes up the length).
pub fn prose(size: usize, seed: u64) -> Vec<u8> {
    let mut rng = SplitMix64(seed);
    let mut out = Vec::with_capacity(size);
    loop {
        let piece = if rng.below(7) == 0 {
            SPICE[rng.below(SPICE.len())]
        } else {
            WORDS[rng.below(WORDS.len())]
        };
        let sep: &[u8] = match (out.is_empty(), rng.below(12)) {
            (true, _) => b"",
            (false, 0) => b". ",
            (false, 1) => b", ",
            _ => b" ",
        };
        if out.len() + sep.len() + piece.len() > size {
            break;
        }
        out.extend_from_slice(sep);
        out.extend_from_slice(piece.as_bytes());
    }
    out.resize(size, b'.');
    out
}

fn id_json(request_id: &Value) -> Vec<u8> {
    serde_json::to_vec(request_id).expect("a JSON value serializes")
}

/// The exact JSON-RPC response the `big_result` tool sends for `request_id`: one compact line,
/// `{"jsonrpc":"2.0","id":<id>,"result":{"content":[{"type":"text","text":"<prose>"}],"isError":false}}`
/// where the text is [`prose`]`(size, seed)`.
pub fn expected_result(request_id: &Value, size: usize, seed: u64) -> Bytes {
    big_result(request_id, size, seed, b"")
}

/// The exact response of `big_result` on MCP 2026-07-28 ([`ServerMode::Stateless`](super::ServerMode::Stateless)):
/// [`expected_result`] whose result also says `"resultType":"complete"`.
pub fn expected_result_2026_07_28(request_id: &Value, size: usize, seed: u64) -> Bytes {
    big_result(request_id, size, seed, b",\"resultType\":\"complete\"")
}

fn big_result(request_id: &Value, size: usize, seed: u64, tail: &[u8]) -> Bytes {
    let id = id_json(request_id);
    let mut out = BytesMut::with_capacity(size + id.len() + tail.len() + 96);
    out.put_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.put_slice(&id);
    out.put_slice(b",\"result\":");
    put_big_result_object(&mut out, size, seed, tail);
    out.put_slice(b"}");
    out.freeze()
}

/// `{"content":[{"type":"text","text":"<prose>"}],"isError":false<tail>}`: the `result` member of
/// [`big_result`], byte for byte.
fn put_big_result_object(out: &mut BytesMut, size: usize, seed: u64, tail: &[u8]) {
    out.put_slice(b"{\"content\":[{\"type\":\"text\",\"text\":\"");
    out.put_slice(&prose(size, seed));
    out.put_slice(b"\"}],\"isError\":false");
    out.put_slice(tail);
    out.put_slice(b"}");
}

/// The `result` member of a `progress` response (with `"resultType":"complete"` when `stateless`).
fn progress_result_object(count: u64, stateless: bool) -> Value {
    let mut v = serde_json::json!({
        "content": [{"type": "text", "text": format!("done: {count} steps")}],
        "isError": false,
    });
    if stateless {
        v["resultType"] = "complete".into();
    }
    v
}

/// The exact JSON-RPC response the `progress` tool sends after `count` notifications.
pub fn expected_progress_result(request_id: &Value, count: u64) -> Bytes {
    let v = serde_json::json!({
        "jsonrpc": "2.0",
        "id": request_id,
        "result": progress_result_object(count, false),
    });
    Bytes::from(serde_json::to_vec(&v).expect("a JSON value serializes"))
}

/// The exact `notifications/progress` message number `progress` (1-based) of `total`.
pub fn progress_notification(token: &Value, progress: u64, total: u64) -> Bytes {
    let v = serde_json::json!({
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {
            "progressToken": token,
            "progress": progress,
            "total": total,
            "message": format!("step {progress} of {total}"),
        },
    });
    Bytes::from(serde_json::to_vec(&v).expect("a JSON value serializes"))
}

/// The `tools/list` result.
pub(crate) fn tool_list() -> Value {
    serde_json::json!({
        "tools": [
            {
                "name": "big_result",
                "description": "Returns one text result of `size` bytes of prose with escapes (deterministic per seed).",
                "inputSchema": {
                    "type": "object",
                    "properties": {"size": {"type": "integer", "minimum": 0}, "seed": {"type": "integer"}},
                },
            },
            {
                "name": "progress",
                "description": "Streams `count` progress notifications, then a small result.",
                "inputSchema": {"type": "object", "properties": {"count": {"type": "integer", "minimum": 0}}},
            },
        ]
    })
}

/// A tool call, as the server re-runs it in [`ServerMode::Restart`](super::ServerMode::Restart).
#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub(crate) request_id: Value,
    pub(crate) token: Value,
    pub(crate) tool: Tool,
    /// Answered on MCP 2026-07-28: every result says `"resultType":"complete"`.
    pub(crate) stateless: bool,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Tool {
    BigResult {
        size: usize,
        seed: u64,
        progress: u64,
    },
    Progress {
        count: u64,
    },
}

impl Call {
    /// The `result` member of the call's final response, byte for byte as [`Call::messages`] sends it
    /// (what a task's completed read carries, without the JSON-RPC envelope).
    pub(crate) fn result_object(&self) -> Bytes {
        match self.tool {
            Tool::BigResult { size, seed, .. } => {
                let tail: &[u8] = if self.stateless {
                    b",\"resultType\":\"complete\""
                } else {
                    b""
                };
                let mut out = BytesMut::with_capacity(size + tail.len() + 64);
                put_big_result_object(&mut out, size, seed, tail);
                out.freeze()
            }
            Tool::Progress { count } => Bytes::from(
                serde_json::to_vec(&progress_result_object(count, self.stateless))
                    .expect("a JSON value serializes"),
            ),
        }
    }

    /// The data of every event of the response after the priming event, in order.
    pub(crate) fn messages(&self) -> Vec<Bytes> {
        let (total, result) = match self.tool {
            Tool::BigResult {
                size,
                seed,
                progress,
            } if self.stateless => (
                progress,
                expected_result_2026_07_28(&self.request_id, size, seed),
            ),
            Tool::BigResult {
                size,
                seed,
                progress,
            } => (progress, expected_result(&self.request_id, size, seed)),
            Tool::Progress { count } => {
                let v = serde_json::json!({
                    "jsonrpc": "2.0",
                    "id": self.request_id,
                    "result": progress_result_object(count, self.stateless),
                });
                let result = Bytes::from(serde_json::to_vec(&v).expect("a JSON value serializes"));
                (count, result)
            }
        };
        let mut out: Vec<Bytes> = (1..=total)
            .map(|k| progress_notification(&self.token, k, total))
            .collect();
        out.push(result);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_is_exact_deterministic_and_valid_json_string() {
        for size in [0, 1, 7, 100, 4096, 65_536] {
            let p = prose(size, 7);
            assert_eq!(p.len(), size);
            assert_eq!(p, prose(size, 7));
            let quoted = [b"\"".as_slice(), &p, b"\""].concat();
            let s: String = serde_json::from_slice(&quoted).unwrap();
            if size >= 4096 {
                assert!(
                    s.contains('"') && s.contains('\\') && s.contains('\n') && s.contains('🦀')
                );
            }
        }
        assert_ne!(prose(4096, 1), prose(4096, 2));
    }

    /// A task's result is the `result` member of the direct answer, byte for byte.
    #[test]
    fn result_objects_are_the_direct_answers_result_member() {
        for stateless in [false, true] {
            for tool in [
                Tool::BigResult {
                    size: 5000,
                    seed: 9,
                    progress: 2,
                },
                Tool::Progress { count: 4 },
            ] {
                let call = Call {
                    request_id: serde_json::json!("r-1"),
                    token: Value::Null,
                    tool,
                    stateless,
                };
                let last = call.messages().pop().unwrap();
                let prefix = b"{\"jsonrpc\":\"2.0\",\"id\":\"r-1\",\"result\":";
                let v: Value = serde_json::from_slice(&last).unwrap();
                let object = call.result_object();
                assert_eq!(
                    serde_json::from_slice::<Value>(&object).unwrap(),
                    v["result"]
                );
                if last.starts_with(prefix) {
                    assert_eq!(&last[prefix.len()..last.len() - 1], &object[..]);
                }
            }
        }
    }

    #[test]
    fn expected_result_is_one_json_rpc_response() {
        let r = expected_result(&serde_json::json!(3), 10_000, 1);
        assert!(!r.contains(&b'\n'));
        let v: Value = serde_json::from_slice(&r).unwrap();
        assert_eq!(v["id"], 3);
        assert_eq!(v["result"]["content"][0]["type"], "text");
        let n: Value = serde_json::from_slice(&progress_notification(&"t".into(), 1, 2)).unwrap();
        assert_eq!(n["params"]["progressToken"], "t");
    }
}
