//! An rmcp client on `ssegate::rmcp::GuardedHttpClient` calls `big_result` on the loopback server
//! through the fault proxy, with the result cut in the middle, in every server mode: the result
//! arrives intact where the server can resume it in place, and is refused with a typed error
//! (never torn, duplicated, or retried in a loop) where it cannot. The refusal's error is the wire
//! contract's, written here as literals: `-32050` (outcome unknown) for a `tools/call`, `-32053`
//! (refused) for another request.

use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ErrorData};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use ssegate::client::ClientConfig;
use ssegate::replay;
use ssegate::resume::Failure;
use ssegate::rmcp::GuardedHttpClient;
use ssegate_testkit::proxy::{Cut, ProxyConfig, RunningProxy};
use ssegate_testkit::server::{RunningServer, ServerConfig, ServerMode, expected_result};
use ssegate_testkit::tls::TlsFront;

const RESULT: usize = 64 << 10;
const SEED: u64 = 42;
/// Inside the result event (priming and three progress events arrive whole before it).
const CUT: u64 = 40_000;
const LIMIT: Duration = Duration::from_secs(25);

async fn start(mode: ServerMode) -> (RunningServer, RunningProxy) {
    start_with(mode, false).await
}

/// As [`start`], with `tools/list` answered as an SSE stream when `tools_list_sse`.
async fn start_with(mode: ServerMode, tools_list_sse: bool) -> (RunningServer, RunningProxy) {
    let mut replay = replay::BufferConfig::default();
    // A budget smaller than the result, as in the field report.
    replay
        .max_session_bytes(32 << 10)
        .max_event_bytes(32 << 10)
        .retry_after(Duration::from_millis(200));
    let mut config = ServerConfig::default();
    config
        .mode(mode)
        .result_size(RESULT)
        .seed(SEED)
        .retry_ms(10)
        .progress_count(3)
        .tools_list_sse(tools_list_sse)
        .replay(replay);
    let server = config.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let mut pc = ProxyConfig::default();
    pc.accept_delay(Duration::ZERO).seed(7);
    let proxy = pc.start(server.addr()).await.unwrap();
    (server, proxy)
}

/// An rmcp client through the proxy; every request on a fresh connection, so a queued cut hits
/// exactly the next request.
async fn connect(proxy: &RunningProxy) -> (GuardedHttpClient, RunningService<RoleClient, ()>) {
    let mut config = ClientConfig::default();
    config.reuse_connections(false);
    let http = GuardedHttpClient::new(config).unwrap();
    let transport = StreamableHttpClientTransport::with_client(
        http.clone(),
        StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", proxy.addr())),
    );
    let client = ().serve(transport).await.unwrap();
    // Let rmcp's standalone GET (answered 405 by this server) go by before a cut is queued.
    tokio::time::sleep(Duration::from_millis(200)).await;
    (http, client)
}

fn big_result() -> CallToolRequestParams {
    CallToolRequestParams::new("big_result")
}

/// `error` is the contract's answer to a `method` request whose stream was refused: `code`,
/// `data.kind` `kind`, `data.outcome` `unknown`, `data.method`, `data.refusal` `refusal` (absent
/// when `None`), a `data.reason`, and `mustRenegotiate`.
#[track_caller]
fn assert_refusal(error: &ErrorData, code: i32, kind: &str, method: &str, refusal: Option<&str>) {
    assert_eq!(error.code.0, code, "{error:?}");
    let data = error.data.as_ref().expect("error data");
    assert_eq!(data["kind"], json!(kind), "{error:?}");
    assert_eq!(data["outcome"], json!("unknown"), "{error:?}");
    assert_eq!(data["method"], json!(method), "{error:?}");
    assert_eq!(
        data.get("refusal").and_then(Value::as_str),
        refusal,
        "{error:?}"
    );
    assert!(data["reason"].as_str().is_some_and(|r| !r.is_empty()));
    assert!(data["mustRenegotiate"].is_boolean(), "{error:?}");
}

/// The text the server sends, from the exact response bytes it is specified to send.
fn expected_text() -> String {
    let expected: Value =
        serde_json::from_slice(&expected_result(&json!(1), RESULT, SEED)).unwrap();
    expected["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_calls_through_cuts_are_intact_or_refused() {
    let started = Instant::now();
    tokio::time::timeout(LIMIT, async {
        let want = expected_text();
        assert!(want.len() > RESULT / 2, "the unescaped prose");
        // The 2025-era modes: rmcp's `serve()` starts with `initialize`.
        for mode in ServerMode::ALL.into_iter().filter(|m| !m.is_stateless()) {
            let (server, proxy) = start(mode).await;
            let (http, client) = connect(&proxy).await;
            // Uncut first: the same call gives the exact text.
            let whole = client.call_tool(big_result()).await.unwrap();
            let text = &whole.content[0].as_text().unwrap().text;
            assert!(*text == want, "{mode}: uncut result differs");

            proxy.set_next_cut(Cut::At(CUT));
            let before = server.stats();
            let t0 = Instant::now();
            let outcome = client.call_tool(big_result()).await;
            let took = t0.elapsed();
            assert_eq!(proxy.stats().cuts, 1, "{mode}: the call was cut");
            let resumes = server.stats().resumes - before.resumes;
            match mode {
                ServerMode::Boundary | ServerMode::Resend | ServerMode::Buffered => {
                    let result = outcome.unwrap_or_else(|e| panic!("{mode}: {e}"));
                    assert_eq!(result.content.len(), 1, "{mode}");
                    let text = &result.content[0].as_text().unwrap().text;
                    assert!(*text == want, "{mode}: resumed result differs");
                    assert_eq!(resumes, 1, "{mode}: resumed once");
                }
                // Strict answers the resume 409 (it lost the result), Empty answers it with an
                // empty stream, Restart re-runs the call under new ids.
                ServerMode::Strict | ServerMode::Empty | ServerMode::Restart => {
                    let Err(ServiceError::McpError(error)) = outcome else {
                        panic!("{mode}: expected a refusal, got {outcome:?}");
                    };
                    // A tool call whose answer is lost: outcome unknown, whatever the refusal.
                    let refusal = match mode {
                        ServerMode::Strict => "replay-unavailable",
                        ServerMode::Empty => "replay-missed",
                        _ => "stream-restarted",
                    };
                    assert_refusal(&error, -32_050, "refused", "tools/call", Some(refusal));
                    let failure = http.failure_of(&error).expect("the typed failure");
                    assert_eq!(failure.outstanding().len(), 1, "{mode}: {failure}");
                    assert!(
                        matches!(failure, Failure::Refused(_)),
                        "{mode}: the guard refused the resumed stream: {failure:?}"
                    );
                    assert!(took < Duration::from_secs(10), "{mode}: took {took:?}");
                    assert!(resumes <= 5, "{mode}: {resumes} resumes");
                    // No reconnect loop goes on behind the error.
                    tokio::time::sleep(Duration::from_millis(1_200)).await;
                    assert_eq!(
                        server.stats().resumes - before.resumes,
                        resumes,
                        "{mode}: rmcp kept reconnecting"
                    );
                }
                ServerMode::Stateless | ServerMode::Tasks => unreachable!("filtered out"),
            }
            assert_eq!(http.parked(), 0, "{mode}: nothing left parked");
            // The session still works after the cut.
            let again = client.call_tool(big_result()).await.unwrap();
            assert!(again.content[0].as_text().unwrap().text == want, "{mode}");
            client.cancel().await.unwrap();
            proxy.shutdown().await;
            server.shutdown().await;
        }
    })
    .await
    .expect("bounded time");
    assert!(started.elapsed() < LIMIT);
}

/// A request other than a `tools/call` whose stream is refused (`tools/list` as an SSE stream, cut
/// inside its result; the server in `restart` mode cannot replay it) is answered `-32053`
/// (refused), with the contract's `data`, and the typed failure behind it; the session still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_other_request_on_a_refused_stream_is_refused_not_outcome_unknown() {
    tokio::time::timeout(LIMIT, async {
        let (server, proxy) = start_with(ServerMode::Restart, true).await;
        let (http, client) = connect(&proxy).await;
        let before = proxy.stats().bytes_down;
        let whole = client.list_tools(None).await.unwrap();
        let size = proxy.stats().bytes_down - before;
        assert!(whole.tools.iter().any(|t| t.name == "big_result"));

        // A few bytes before the end: inside the result event.
        proxy.set_next_cut(Cut::At(size - 8));
        let stats = server.stats();
        let outcome = client.list_tools(None).await;
        assert_eq!(proxy.stats().cuts, 1, "the request was cut");
        let Err(ServiceError::McpError(error)) = outcome else {
            panic!("expected a refusal, got {outcome:?}");
        };
        eprintln!("rmcp client, cut tools/list: {error:?}");
        // The server lost the stream (`409` to the resume).
        assert_refusal(
            &error,
            -32_053,
            "refused",
            "tools/list",
            Some("replay-unavailable"),
        );
        let failure = http.failure_of(&error).expect("the typed failure");
        assert!(matches!(failure, Failure::Refused(_)), "{failure:?}");
        assert_eq!(failure.outstanding().len(), 1, "{failure}");
        assert_eq!(server.stats().calls, stats.calls, "no tool ran");
        assert_eq!(http.parked(), 0, "nothing left parked");

        // The session still works after the cut.
        let again = client.list_tools(None).await.unwrap();
        assert_eq!(again.tools.len(), whole.tools.len());
        client.cancel().await.unwrap();
        proxy.shutdown().await;
        server.shutdown().await;
    })
    .await
    .expect("bounded time");
}

/// rmcp's `max_sse_event_size` is the decoder's `max_event`: a result over it never reaches rmcp
/// (a typed refusal instead, in bounded time); the same call under a limit that holds it succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_event_size_limit_is_the_decoders() {
    tokio::time::timeout(LIMIT, async {
        let want = expected_text();
        let (server, proxy) = start(ServerMode::Buffered).await;
        for (limit, fits) in [(RESULT * 2, true), (RESULT / 2, false)] {
            let mut config = ClientConfig::default();
            config.reuse_connections(false);
            let http = GuardedHttpClient::new(config).unwrap();
            let transport = StreamableHttpClientTransport::with_client(
                http.clone(),
                StreamableHttpClientTransportConfig::with_uri(format!(
                    "http://{}/mcp",
                    proxy.addr()
                ))
                .max_sse_event_size(limit),
            );
            let client = ().serve(transport).await.unwrap();
            let t0 = Instant::now();
            let outcome = client.call_tool(big_result()).await;
            if fits {
                let result = outcome.unwrap();
                assert!(result.content[0].as_text().unwrap().text == want);
            } else {
                let Err(ServiceError::McpError(error)) = outcome else {
                    panic!("limit {limit}: expected a refusal, got {outcome:?}");
                };
                assert_eq!(error.code.0, -32_050, "{error:?}");
                assert_eq!(error.data.as_ref().unwrap()["method"], json!("tools/call"));
                let failure = http.failure_of(&error).expect("the typed failure");
                // The decoder drops the event over its limit and the stream goes on; resumes
                // that replay it bring nothing, so the core stops after its stalled-resume limit.
                assert_eq!(failure.outstanding().len(), 1, "{failure:?}");
                assert!(t0.elapsed() < Duration::from_secs(10));
            }
            client.cancel().await.unwrap();
        }
        proxy.shutdown().await;
        server.shutdown().await;
    })
    .await
    .expect("bounded time");
}

/// The field client's HTTPS setup carries over: a custom root and a bearer token (a header of the
/// `ClientConfig`), through the test kit's TLS front.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_over_https_with_the_field_clients_config() {
    tokio::time::timeout(LIMIT, async {
        const TOKEN: &str = "s3cret-token";
        let (server, proxy) = start(ServerMode::Strict).await;
        let front = TlsFront::start(server.addr(), Some(format!("Bearer {TOKEN}")))
            .await
            .unwrap();
        let mut config = ClientConfig::default();
        config
            .root_certificate_pem(front.cert_pem().as_bytes())
            .bearer_token(TOKEN)
            .unwrap();
        let transport = StreamableHttpClientTransport::with_client(
            GuardedHttpClient::new(config).unwrap(),
            StreamableHttpClientTransportConfig::with_uri(front.url()),
        );
        let client = ().serve(transport).await.unwrap();
        let result = client.call_tool(big_result()).await.unwrap();
        assert!(result.content[0].as_text().unwrap().text == expected_text());
        assert!(front.handshakes() >= 1);
        client.cancel().await.unwrap();

        // Without the root, the default client refuses the self-signed certificate.
        let transport = StreamableHttpClientTransport::with_client(
            GuardedHttpClient::default(),
            StreamableHttpClientTransportConfig::with_uri(front.url()),
        );
        assert!(().serve(transport).await.is_err());
        proxy.shutdown().await;
        server.shutdown().await;
    })
    .await
    .expect("bounded time");
}
