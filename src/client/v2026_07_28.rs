//! MCP 2026-07-28 (stateless) on the wire: the per-request `_meta`, the request headers
//! (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*` with their value encoding), the tool definitions whose
//! header annotations a client must refuse, and how the answer to the first 2026-07-28 request
//! tells a stateless server from an `initialize` one.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

pub(crate) use crate::contract::meta::{
    CLIENT_CAPABILITIES as META_CAPABILITIES, CLIENT_INFO as META_CLIENT_INFO,
    PROTOCOL_VERSION as META_VERSION,
};

/// JSON-RPC error: the server does not speak the requested version (`data.supported` lists
/// what it does).
pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: i64 =
    crate::contract::jsonrpc::UNSUPPORTED_PROTOCOL_VERSION as i64;

/// Adds the 2026-07-28 `_meta` fields to `params` (an object; anything else is replaced by one),
/// keeping any `_meta` the caller set (a progress token); `info` is the client's `clientInfo`.
pub(crate) fn stamp_meta(params: &mut Value, version: &str, capabilities: &Value, info: &Value) {
    if !params.is_object() {
        *params = json!({});
    }
    let obj = params.as_object_mut().expect("an object");
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let meta = meta.as_object_mut().expect("an object");
    meta.insert(META_VERSION.into(), json!(version));
    // Extensions the request declares itself (tasks) are kept beside the client's capabilities.
    let extensions = meta
        .get(META_CAPABILITIES)
        .and_then(|c| c.get("extensions"))
        .cloned();
    let mut declared = capabilities.clone();
    if let (Some(Value::Object(more)), Some(obj)) = (extensions, declared.as_object_mut()) {
        let into = obj
            .entry("extensions")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(into) = into.as_object_mut() {
            into.extend(more);
        }
    }
    meta.insert(META_CAPABILITIES.into(), declared);
    meta.insert(META_CLIENT_INFO.into(), info.clone());
}

/// A header value as the 2026-07-28 transport encodes it: as is when it is plain visible ASCII
/// (spaces inside allowed) and does not look like the sentinel, else `=?base64?<base64>?=` of its
/// UTF-8 bytes.
pub(crate) fn encode_header_value(value: &str) -> String {
    let visible = value.bytes().all(|b| (0x20..=0x7e).contains(&b));
    let padded = value.starts_with(' ') || value.ends_with(' ');
    let sentinel = value.starts_with("=?base64?") && value.ends_with("?=");
    let plain = visible && !padded && !sentinel;
    if plain {
        value.to_owned()
    } else {
        format!("=?base64?{}?=", base64(value.as_bytes()))
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// One `x-mcp-header` annotation of a tool: the header `Mcp-Param-<name>` mirrors the argument
/// at `path` (a chain of `properties` keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParamHeader {
    pub(crate) name: String,
    pub(crate) path: Vec<String>,
}

/// The `x-mcp-header` annotations of a tool's `inputSchema`, or why the tool definition is invalid
/// (a client on Streamable HTTP must then leave the tool out).
pub(crate) fn param_headers(input_schema: &Value) -> Result<Vec<ParamHeader>, String> {
    let mut found = Vec::new();
    collect(input_schema, &mut Vec::new(), true, &mut found)?;
    let mut seen = std::collections::HashSet::new();
    for h in &found {
        if !seen.insert(h.name.to_ascii_lowercase()) {
            return Err(format!("x-mcp-header {:?} is not unique", h.name));
        }
    }
    Ok(found)
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Walks `schema`: `reachable` says whether it is reached from the root through `properties` keys
/// only (where an annotation is allowed).
fn collect(
    schema: &Value,
    path: &mut Vec<String>,
    reachable: bool,
    found: &mut Vec<ParamHeader>,
) -> Result<(), String> {
    let Some(obj) = schema.as_object() else {
        if let Some(items) = schema.as_array() {
            for item in items {
                collect(item, path, false, found)?;
            }
        }
        return Ok(());
    };
    if let Some(header) = obj.get("x-mcp-header") {
        let where_ = if path.is_empty() {
            "the schema root".to_owned()
        } else {
            path.join(".")
        };
        let Some(name) = header.as_str() else {
            return Err(format!("x-mcp-header at {where_} is not a string"));
        };
        if !reachable || path.is_empty() {
            return Err(format!(
                "x-mcp-header {name:?} at {where_} is not reachable through properties alone"
            ));
        }
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err(format!("x-mcp-header {name:?} is not an HTTP header token"));
        }
        let primitive = match obj.get("type") {
            Some(Value::String(t)) => matches!(t.as_str(), "string" | "integer" | "boolean"),
            _ => false,
        };
        if !primitive {
            return Err(format!(
                "x-mcp-header {name:?} is on a parameter that is not a string, integer or boolean"
            ));
        }
        found.push(ParamHeader {
            name: name.to_owned(),
            path: path.clone(),
        });
    }
    for (key, value) in obj {
        match key.as_str() {
            "properties" => {
                if let Some(props) = value.as_object() {
                    for (name, sub) in props {
                        path.push(name.clone());
                        let r = collect(sub, path, reachable, found);
                        path.pop();
                        r?;
                    }
                }
            }
            "x-mcp-header" | "const" | "default" | "enum" | "examples" => {}
            _ => collect(value, path, false, found)?,
        }
    }
    Ok(())
}

/// `Mcp-Method`, `Mcp-Name` and the tool's `Mcp-Param-*` headers for a request `body`.
pub(crate) fn request_headers(
    body: &Value,
    params: &[ParamHeader],
) -> Result<HeaderMap, &'static str> {
    let mut headers = HeaderMap::new();
    let Some(method) = body["method"].as_str() else {
        return Ok(headers);
    };
    let value = |s: &str, what| HeaderValue::from_str(&encode_header_value(s)).map_err(|_| what);
    headers.insert("mcp-method", value(method, "Mcp-Method")?);
    let name = match method {
        "tools/call" | "prompts/get" => body["params"]["name"].as_str(),
        "resources/read" => body["params"]["uri"].as_str(),
        "tasks/get" | "tasks/update" | "tasks/cancel" | "tasks/result" => {
            body["params"]["taskId"].as_str()
        }
        _ => None,
    };
    if let Some(name) = name {
        headers.insert("mcp-name", value(name, "Mcp-Name")?);
    }
    if method == "tools/call" {
        for p in params {
            let mut v = &body["params"]["arguments"];
            for key in &p.path {
                v = &v[key.as_str()];
            }
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
                _ => continue,
            };
            let header = HeaderName::from_bytes(format!("mcp-param-{}", p.name).as_bytes())
                .map_err(|_| "Mcp-Param-*")?;
            headers.insert(header, value(&text, "Mcp-Param-*")?);
        }
    }
    Ok(headers)
}

/// What the answer to the first 2026-07-28 request says about the server.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Era {
    /// A stateless server speaking this version.
    Stateless(String),
    /// A stateless server that refused the version asked for and supports this one: ask again.
    Corrective(String),
    /// Not a stateless server (or one without a version in common): use `initialize`, offering this
    /// `initialize` version when the server named one.
    Initialize(Option<String>),
    /// A stateless server with no version in common.
    NoCommonVersion(Vec<String>),
}

/// The era of a server from a JSON-RPC answer (a result or an error object) to `server/discover`.
pub(crate) fn classify(answer: &Value, stateless: &[&str], initialize: &[&str]) -> Era {
    if let Some(result) = answer.get("result") {
        let supported = strings(&result["supportedVersions"]);
        if let Some(v) = stateless.iter().find(|v| supported.iter().any(|s| s == *v)) {
            return Era::Stateless((*v).to_owned());
        }
        if supported.is_empty() {
            // A 2025-era server that answers unknown methods with an empty result.
            return Era::Initialize(None);
        }
        return choose_initialize(supported, initialize);
    }
    if let Some(supported) = supported_versions_of_error(answer) {
        if let Some(v) = stateless.iter().find(|v| supported.iter().any(|s| s == *v)) {
            return Era::Corrective((*v).to_owned());
        }
        return choose_initialize(supported, initialize);
    }
    Era::Initialize(None)
}

/// The versions an unsupported-version error (`-32022`) says the server speaks, when it names any.
pub(crate) fn supported_versions_of_error(answer: &Value) -> Option<Vec<String>> {
    let error = &answer["error"];
    if error["code"].as_i64() != Some(UNSUPPORTED_PROTOCOL_VERSION) {
        return None;
    }
    Some(strings(&error["data"]["supported"])).filter(|v| !v.is_empty())
}

fn choose_initialize(supported: Vec<String>, initialize: &[&str]) -> Era {
    match initialize
        .iter()
        .find(|v| supported.iter().any(|s| s == *v))
    {
        Some(v) => Era::Initialize(Some((*v).to_owned())),
        None => Era::NoCommonVersion(supported),
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_follow_the_specifications_examples() {
        assert_eq!(encode_header_value("us-west1"), "us-west1");
        assert_eq!(
            encode_header_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(encode_header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(
            encode_header_value("line1\nline2"),
            "=?base64?bGluZTEKbGluZTI=?="
        );
        assert_eq!(
            encode_header_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
        assert_eq!(encode_header_value("a\tb"), "=?base64?YQli?=");
        assert_eq!(encode_header_value(""), "");
    }

    #[test]
    fn tool_headers_are_found_or_the_tool_refused() {
        let ok = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "nested": {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}},
            "q": {"type": "string"}}});
        let found = param_headers(&ok).unwrap();
        assert_eq!(found.len(), 2);
        assert!(found.contains(&ParamHeader {
            name: "N".into(),
            path: vec!["nested".into(), "n".into()]
        }));
        for bad in [
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "has space"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "X"},
                                  "b": {"type": "string", "x-mcp-header": "x"}}}),
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}}}),
            json!({"anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
        ] {
            assert!(param_headers(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn request_headers_mirror_the_body() {
        let params = vec![ParamHeader {
            name: "Region".into(),
            path: vec!["region".into()],
        }];
        let body = json!({"method": "tools/call", "params": {"name": "sql", "arguments": {"region": "eu"}}});
        let h = request_headers(&body, &params).unwrap();
        assert_eq!(h["mcp-method"], "tools/call");
        assert_eq!(h["mcp-name"], "sql");
        assert_eq!(h["mcp-param-region"], "eu");
        let body = json!({"method": "tools/call", "params": {"name": "sql", "arguments": {"region": null}}});
        assert!(
            request_headers(&body, &params)
                .unwrap()
                .get("mcp-param-region")
                .is_none()
        );
        let body = json!({"method": "resources/read", "params": {"uri": "file:///a b"}});
        assert_eq!(
            request_headers(&body, &[]).unwrap()["mcp-name"],
            "file:///a b"
        );
    }

    #[test]
    fn eras_are_told_apart_as_the_specification_says() {
        let stateless = ["2026-07-28"];
        let initialize = ["2025-11-25", "2025-06-18"];
        let ok = json!({"result": {"supportedVersions": ["2026-07-28"]}});
        assert_eq!(
            classify(&ok, &stateless, &initialize),
            Era::Stateless("2026-07-28".into())
        );
        let wrong = json!({"error": {"code": -32022, "data": {"supported": ["2026-07-28"]}}});
        assert_eq!(
            classify(&wrong, &stateless, &initialize),
            Era::Corrective("2026-07-28".into())
        );
        let old = json!({"error": {"code": -32022, "data": {"supported": ["2025-06-18"]}}});
        assert_eq!(
            classify(&old, &stateless, &initialize),
            Era::Initialize(Some("2025-06-18".into()))
        );
        let none = json!({"error": {"code": -32022, "data": {"supported": ["2099-01-01"]}}});
        assert_eq!(
            classify(&none, &stateless, &initialize),
            Era::NoCommonVersion(vec!["2099-01-01".into()])
        );
        for initialize_answer in [
            json!({"result": {}}),
            json!({"error": {"code": -32000, "message": "Bad Request: No valid session ID"}}),
            json!({"error": {"code": -32601, "message": "Method not found"}}),
            json!({"error": {"code": -32020}}),
        ] {
            assert_eq!(
                classify(&initialize_answer, &stateless, &initialize),
                Era::Initialize(None)
            );
        }
    }
}
