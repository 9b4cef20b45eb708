//! `--ignore-tool GLOB`: tools the host never sees. Every `tools/list` result the server sends
//! (every page) is passed on without them, and a `tools/call` to one is answered here, the server
//! never asked.
//!
//! A glob matches a whole tool name, in any case (as mcp-remote's `--ignore-tool` does: a glob
//! written for it hides the same tools here, and a deny list errs towards hiding): `*` any run of
//! characters (none too), `?` one character, anything else itself.

use serde_json::Value;
use ssegate::contract::jsonrpc;
use ssegate::message::Message;

use super::errors::Error;

/// The `--ignore-tool` globs.
#[derive(Clone, Debug, Default)]
pub(super) struct Ignored {
    globs: Vec<String>,
}

impl Ignored {
    pub(super) fn new(globs: &[String]) -> Ignored {
        Ignored {
            globs: globs.to_vec(),
        }
    }

    /// The first glob that matches `name`.
    fn matching(&self, name: &str) -> Option<&str> {
        self.globs
            .iter()
            .find(|g| glob_match(g, name))
            .map(String::as_str)
    }

    /// The error answering a `tools/call` with `params` to a hidden tool, or `None`: the call goes
    /// to the server.
    pub(super) fn refuse_call(&self, params: &Value) -> Option<Error> {
        let name = params.get("name")?.as_str()?;
        let glob = self.matching(name)?;
        Some(Error::new(
            jsonrpc::INVALID_PARAMS,
            format!("unknown tool {name:?}: it is hidden by --ignore-tool {glob:?}"),
        ))
    }

    /// A `tools/list` response without the hidden tools: the `result` with its `tools` filtered,
    /// or `None` when nothing is hidden in it (the response goes on as the server wrote it).
    pub(super) fn filter_list(&self, message: &Message) -> Option<Value> {
        if self.globs.is_empty() {
            return None;
        }
        let response: Value = message.deserialize().ok()?;
        let mut result = response.get("result")?.clone();
        let tools = result.get_mut("tools")?.as_array_mut()?;
        let before = tools.len();
        tools.retain(|tool| {
            tool.get("name")
                .and_then(Value::as_str)
                .is_none_or(|name| self.matching(name).is_none())
        });
        (tools.len() != before).then_some(result)
    }
}

/// Whether `glob` (`*`, `?`, literal characters) matches all of `text`. Linear in the product of
/// the lengths at worst (one backtrack point: the last `*`), never exponential.
pub(super) fn glob_match(glob: &str, text: &str) -> bool {
    let glob: Vec<char> = glob.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut g, mut t) = (0, 0);
    // The last `*` seen, and the text position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match glob.get(g) {
            Some('*') => {
                star = Some((g, t));
                g += 1;
            }
            Some(&c) if c == '?' || same_letter(c, text[t]) => {
                g += 1;
                t += 1;
            }
            _ => match star {
                // The `*` takes one more character.
                Some((sg, st)) => {
                    star = Some((sg, st + 1));
                    g = sg + 1;
                    t = st + 1;
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&c| c == '*')
}

/// `a` and `b` are one character in any case.
fn same_letter(a: char, b: char) -> bool {
    a == b || a.to_lowercase().eq(b.to_lowercase())
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use serde_json::json;

    use super::*;

    #[test]
    fn globs_match_whole_names_in_any_case() {
        for (glob, name) in [
            ("b*", "big_result"),
            ("b*", "b"),
            ("*", ""),
            ("*", "anything"),
            ("big_result", "big_result"),
            ("?ig_*", "big_result"),
            ("*_result", "big_result"),
            ("*e*u*", "big_result"),
            ("a*b*c", "a-b-b-c"),
            ("**", "x"),
            ("é?", "éa"),
            ("B*", "big_result"),
            ("big_RESULT", "Big_result"),
            ("*É", "caFé"),
        ] {
            assert!(glob_match(glob, name), "{glob} matches {name}");
        }
        for (glob, name) in [
            ("b*", "progress"),
            ("big", "big_result"),
            ("?", ""),
            ("?", "ab"),
            ("*_results", "big_result"),
            ("a*b*c", "a-b-b-"),
            ("big_result", "big_resulT2"),
        ] {
            assert!(!glob_match(glob, name), "{glob} does not match {name}");
        }
        // Many stars against a long name that does not match: answered at once.
        let long = "a".repeat(10_000);
        assert!(!glob_match("*a*a*a*a*a*a*a*a*b", &long));
    }

    fn message(value: &Value) -> Message {
        Message::new(Bytes::from(serde_json::to_vec(value).unwrap()).into())
    }

    #[test]
    fn a_list_loses_the_hidden_tools_and_keeps_the_rest_and_its_cursor() {
        let ignored = Ignored::new(&["b*".to_owned(), "x?".to_owned()]);
        let response = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "tools": [{"name": "big_result"}, {"name": "progress"}, {"name": "xy"},
                      {"name": "xyz"}, {"nameless": true}],
            "nextCursor": "page-2"}});
        let result = ignored.filter_list(&message(&response)).unwrap();
        assert_eq!(
            result,
            json!({"tools": [{"name": "progress"}, {"name": "xyz"}, {"nameless": true}],
                   "nextCursor": "page-2"})
        );
        // Nothing hidden, an error, no globs: the server's response goes on untouched.
        let plain = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "p"}]}});
        assert!(ignored.filter_list(&message(&plain)).is_none());
        let error = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "no"}});
        assert!(ignored.filter_list(&message(&error)).is_none());
        assert!(Ignored::new(&[]).filter_list(&message(&response)).is_none());
    }

    #[test]
    fn a_call_to_a_hidden_tool_is_refused_with_invalid_params() {
        let ignored = Ignored::new(&["b*".to_owned()]);
        let e = ignored
            .refuse_call(&json!({"name": "big_result", "arguments": {}}))
            .unwrap();
        assert_eq!(e.code, -32602);
        assert!(e.message.contains("--ignore-tool") && e.message.contains("big_result"));
        assert!(ignored.refuse_call(&json!({"name": "progress"})).is_none());
        assert!(ignored.refuse_call(&json!({})).is_none());
    }
}
