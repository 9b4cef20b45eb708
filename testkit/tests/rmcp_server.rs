//! A real rmcp 3.11 server (`StreamableHttpService` with rmcp's `LocalSessionManager`, hosted on
//! hyper in-process) behind the fault proxy, with a tool `big_result` that returns ~1 MiB of text.
//! The guarded field client calls it uncut and cut in the middle of the result: the result is
//! intact or a typed error, never torn and never duplicated, and what the client does follows the
//! guard's rules for what rmcp answers on the resume.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use ssegate::client::{CallOptions, Client, ClientConfig, ClientError, Response, Retry};
use ssegate::resume::Failure;
use ssegate::resume::RefusalKind;
use ssegate_testkit::proxy::{Cut, ProxyConfig, RunningProxy};

const LIMIT: Duration = Duration::from_secs(25);
/// The SSE `retry` rmcp sends in its priming events (and so the client's reconnect delay).
const RETRY: Duration = Duration::from_millis(20);

/// ~1 MiB of deterministic text (plain ASCII, with characters JSON escapes).
fn big_text() -> String {
    let mut s = String::with_capacity(1 << 20);
    let mut i = 0u32;
    while s.len() < (1 << 20) {
        s.push_str(&format!(
            "line {i:06}: \"quoted\" \\ tab\t ssegate big_result\n"
        ));
        i += 1;
    }
    s
}

/// The rmcp server's handler: one tool, counting its runs.
#[derive(Clone)]
struct Big {
    runs: Arc<AtomicU32>,
    text: Arc<String>,
}

impl ServerHandler for Big {
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != "big_result" {
            return Err(ErrorData::invalid_params("unknown tool", None));
        }
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(CallToolResult::success(vec![ContentBlock::text(self.text.as_str())]).into())
    }
}

/// Stops the server's accept loop when dropped.
struct Shutdown(tokio::task::JoinHandle<()>);

impl Drop for Shutdown {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// rmcp's server on a free loopback port: sessions, priming events with a short `retry`, rmcp's
/// own per-request event cache for resumption.
async fn start_rmcp(handler: Big) -> (SocketAddr, Shutdown) {
    let config = StreamableHttpServerConfig::default()
        .with_sse_retry(Some(RETRY))
        .with_sse_keep_alive(None);
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.sse_retry = Some(RETRY);
    let service: StreamableHttpService<Big, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(handler.clone()), Arc::new(sessions), config);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let service = service.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| {
                    let service = service.clone();
                    async move { Ok::<_, Infallible>(service.handle(req).await) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    (addr, Shutdown(task))
}

async fn start() -> (Big, SocketAddr, Shutdown, RunningProxy) {
    let handler = Big {
        runs: Arc::new(AtomicU32::new(0)),
        text: Arc::new(big_text()),
    };
    let (addr, shutdown) = start_rmcp(handler.clone()).await;
    let mut pc = ProxyConfig::default();
    pc.accept_delay(Duration::ZERO).seed(11);
    let proxy = pc.start(addr).await.unwrap();
    (handler, addr, shutdown, proxy)
}

async fn connect(proxy: &RunningProxy) -> Client {
    let mut config = ClientConfig::default();
    // Every request on a fresh connection, so a queued cut hits exactly the next request.
    config.reuse_connections(false);
    // rmcp 3.11 speaks 2026-07-28 too; these tests are about the resumable 2025-era path.
    config.protocol_version(ssegate::client::PROTOCOL_VERSION);
    Client::connect(&format!("http://{}/mcp", proxy.addr()), config)
        .await
        .unwrap()
}

/// The tool's text out of a response: exactly one text block.
fn text_of(response: &Response) -> String {
    let value: Value = response.message.deserialize().unwrap();
    assert!(value.get("error").is_none(), "{value}");
    let content = value["result"]["content"].as_array().unwrap();
    assert_eq!(content.len(), 1, "one block, not a duplicate");
    content[0]["text"].as_str().unwrap().to_owned()
}

/// A `GET` + `Last-Event-ID` sent straight to the server on its own connection: the whole answer
/// (head and body) as text.
async fn raw_resume(server: SocketAddr, session: &str, version: &str, last: &str) -> String {
    let mut tcp = tokio::net::TcpStream::connect(server).await.unwrap();
    let request = format!(
        "GET /mcp HTTP/1.1\r\nHost: {server}\r\nAccept: text/event-stream\r\n\
         Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: {version}\r\n\
         Last-Event-ID: {last}\r\nConnection: close\r\n\r\n"
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut answer))
        .await
        .expect("rmcp ends the resumed stream")
        .unwrap();
    String::from_utf8(answer).unwrap()
}

fn replay_missed(failure: &Failure) -> bool {
    matches!(
        failure.refusal().map(|r| &r.kind),
        Some(RefusalKind::ReplayMissed { .. })
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_server_results_through_cuts_are_intact_or_typed_errors() {
    let started = Instant::now();
    tokio::time::timeout(LIMIT, async {
        let (big, server, _server, proxy) = start().await;
        let want = big.text.as_str();
        let client = connect(&proxy).await;

        // Uncut: the exact text, one run, no resume.
        let before = proxy.stats().bytes_down;
        let whole = client
            .call_tool("big_result", json!({}), Retry::Always)
            .await
            .unwrap();
        let size = proxy.stats().bytes_down - before;
        assert!(text_of(&whole) == want, "uncut result differs");
        assert_eq!(whole.outcome.resumes, 0);
        assert_eq!(big.runs.load(Ordering::SeqCst), 1);
        assert!(
            size > 1 << 20,
            "the result went through the proxy: {size} bytes"
        );

        // Cut in the middle of the result, a retryable call.
        proxy.set_next_cut(Cut::At(size / 2));
        let runs = big.runs.load(Ordering::SeqCst);
        let outcome = client
            .call_tool("big_result", json!({}), Retry::Always)
            .await;
        assert_eq!(proxy.stats().cuts, 1, "the call was cut");
        let ran = big.runs.load(Ordering::SeqCst) - runs;
        let response =
            outcome.unwrap_or_else(|e| panic!("a retryable call ends with the result: {e}"));
        let o = &response.outcome;
        eprintln!("rmcp, cut retryable call: {o:?}, tool runs {ran}");
        assert!(text_of(&response) == want, "renegotiated result differs");
        // rmcp had sent the whole response before the cut reached the client, so it answers the
        // resume with an empty stream: the guard's ReplayMissed, which renegotiates, re-issues
        // once, and the tool runs once more.
        assert_eq!(o.resumes, 1, "{o:?}");
        assert_eq!(o.refusals.len(), 1, "{o:?}");
        assert!(replay_missed(&o.refusals[0]), "{o:?}");
        assert_eq!(o.renegotiations, 1, "{o:?}");
        assert_eq!(o.attempts, 2, "{o:?}");
        assert_eq!(ran, 2, "run, then re-issued once");

        // Cut in the middle of the result, a call that must not run twice.
        proxy.set_next_cut(Cut::At(size / 2));
        let runs = big.runs.load(Ordering::SeqCst);
        let mut options = CallOptions::default();
        options.retry(Retry::Never);
        let outcome = client
            .call_with(
                "tools/call",
                json!({"name": "big_result", "arguments": {}}),
                &options,
            )
            .await;
        assert_eq!(proxy.stats().cuts, 2, "the call was cut");
        let ran = big.runs.load(Ordering::SeqCst) - runs;
        assert_eq!(ran, 1, "never re-issued");
        let Err(ClientError::OutcomeUnknown {
            failure, method, ..
        }) = &outcome
        else {
            panic!("expected OutcomeUnknown, got {outcome:?}");
        };
        eprintln!("rmcp, cut Retry::Never call: {failure}");
        assert!(replay_missed(failure), "{failure:?}");
        assert_eq!(failure.outstanding().len(), 1, "{failure:?}");
        assert!(method.contains("big_result"), "{method}");

        // What rmcp answered, asked directly (not through the client): the same resume on the
        // same session is a 200 event stream with no event in it.
        let cursor = failure.refusal().unwrap().cursor.clone().unwrap();
        let answer = raw_resume(
            server,
            &client.session_id().unwrap(),
            &client.protocol_version().unwrap(),
            std::str::from_utf8(&cursor).unwrap(),
        )
        .await;
        eprintln!("rmcp's answer to the resume: {answer:?}");
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            head.to_ascii_lowercase().contains("text/event-stream"),
            "{head}"
        );
        assert!(!body.contains("data:") && !body.contains("id:"), "{body:?}");

        // The session still works.
        let again = client
            .call_tool("big_result", json!({}), Retry::Always)
            .await
            .unwrap();
        assert!(text_of(&again) == want);
        client.close().await.unwrap();
        proxy.shutdown().await;
    })
    .await
    .expect("bounded time");
    assert!(started.elapsed() < LIMIT);
}

/// rmcp's Streamable HTTP client transport to `proxy` on a `GuardedHttpClient` (every request on a
/// fresh connection, so a queued cut hits exactly the next request), and that client.
fn guarded_transport(
    proxy: &RunningProxy,
) -> (
    ssegate::rmcp::GuardedHttpClient,
    rmcp::transport::StreamableHttpClientTransport<ssegate::rmcp::GuardedHttpClient>,
) {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut config = ClientConfig::default();
    config.reuse_connections(false);
    let http = ssegate::rmcp::GuardedHttpClient::new(config).unwrap();
    let transport = StreamableHttpClientTransport::with_client(
        http.clone(),
        StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", proxy.addr())),
    );
    (http, transport)
}

/// An rmcp client on `GuardedHttpClient` against the same rmcp server: uncut, the exact text; cut
/// in the middle of the result, rmcp's empty resume is refused with a typed error, quickly, and no
/// reconnect loop goes on behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_on_the_guarded_stack_against_rmcp_server() {
    use rmcp::ServiceExt;
    use rmcp::service::ServiceError;

    tokio::time::timeout(LIMIT, async {
        let (big, _addr, _server, proxy) = start().await;
        let want = big.text.as_str();
        let (http, transport) = guarded_transport(&proxy);
        let client = ().serve(transport).await.unwrap();
        // Let rmcp's standalone GET stream open before a cut is queued.
        tokio::time::sleep(Duration::from_millis(200)).await;

        let before = proxy.stats().bytes_down;
        let whole = client
            .call_tool(CallToolRequestParams::new("big_result"))
            .await
            .unwrap();
        let size = proxy.stats().bytes_down - before;
        assert_eq!(whole.content.len(), 1);
        assert!(whole.content[0].as_text().unwrap().text == want, "uncut");
        assert!(size > 1 << 20, "{size}");

        proxy.set_next_cut(Cut::At(size / 2));
        let runs = big.runs.load(Ordering::SeqCst);
        let t0 = Instant::now();
        let outcome = client
            .call_tool(CallToolRequestParams::new("big_result"))
            .await;
        let took = t0.elapsed();
        assert_eq!(proxy.stats().cuts, 1, "the call was cut");
        let Err(ServiceError::McpError(error)) = outcome else {
            panic!("expected a refusal, got {outcome:?}");
        };
        // The wire contract: a tool call whose answer is lost is outcome unknown.
        assert_eq!(error.code.0, -32_050, "{error:?}");
        let data = error.data.as_ref().expect("error data");
        assert_eq!(data["kind"], "refused", "{error:?}");
        assert_eq!(data["outcome"], "unknown", "{error:?}");
        assert_eq!(data["method"], "tools/call", "{error:?}");
        assert_eq!(data["refusal"], "replay-missed", "{error:?}");
        let failure = http.failure_of(&error).expect("the typed failure");
        eprintln!("rmcp client, cut call: {failure} after {took:?}");
        assert!(replay_missed(&failure), "{failure:?}");
        assert_eq!(failure.outstanding().len(), 1, "{failure:?}");
        assert!(took < Duration::from_secs(5), "took {took:?}");
        assert_eq!(big.runs.load(Ordering::SeqCst) - runs, 1, "not re-issued");
        // No reconnect loop goes on behind the error: no new connection in a while.
        let connections = proxy.stats().connections;
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert_eq!(
            proxy.stats().connections,
            connections,
            "rmcp kept reconnecting"
        );
        assert_eq!(http.parked(), 0, "nothing left parked");

        // The session still works after the cut.
        let again = client
            .call_tool(CallToolRequestParams::new("big_result"))
            .await
            .unwrap();
        assert!(again.content[0].as_text().unwrap().text == want);
        client.cancel().await.unwrap();
        proxy.shutdown().await;
    })
    .await
    .expect("bounded time");
}

/// rmcp's own client on 2026-07-28 (`server/discover`, per-request `_meta`) on `GuardedHttpClient`
/// against the rmcp server: uncut, the exact text; cut in the middle of the result, either the
/// exact text (rmcp's server still ids its streams and replays them, and the guard judges the
/// replay as on any stream) or a typed refusal, in bounded time, never a silent loss, a hang or a
/// reconnect loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_on_2026_07_28_on_the_guarded_stack() {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt, ServiceError};

    tokio::time::timeout(LIMIT, async {
        let (big, _addr, _server, proxy) = start().await;
        let want = big.text.as_str();
        let (http, transport) = guarded_transport(&proxy);
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        let client = ().serve_with_lifecycle(transport, lifecycle).await.unwrap();
        let version = client.peer_info().map(|i| i.protocol_version.clone());
        assert_eq!(version, Some(ProtocolVersion::V_2026_07_28));

        let before = proxy.stats().bytes_down;
        let whole = client
            .call_tool(CallToolRequestParams::new("big_result"))
            .await
            .unwrap();
        let size = proxy.stats().bytes_down - before;
        assert!(whole.content[0].as_text().unwrap().text == want, "uncut");

        proxy.set_next_cut(Cut::At(size / 2));
        let runs = big.runs.load(Ordering::SeqCst);
        let t0 = Instant::now();
        let outcome = client
            .call_tool(CallToolRequestParams::new("big_result"))
            .await;
        let took = t0.elapsed();
        assert_eq!(proxy.stats().cuts, 1, "the call was cut");
        match outcome {
            Ok(r) => assert!(
                r.content[0].as_text().unwrap().text == want,
                "a torn result"
            ),
            Err(ServiceError::McpError(error)) => {
                assert_eq!(error.code.0, -32_050, "{error:?}");
                let data = error.data.as_ref().expect("error data");
                assert_eq!(data["outcome"], "unknown", "{error:?}");
                assert_eq!(data["method"], "tools/call", "{error:?}");
                let failure = http.failure_of(&error).expect("the typed failure");
                eprintln!("rmcp client on 2026-07-28, cut call: {failure} after {took:?}");
            }
            Err(other) => panic!("neither the result nor a typed refusal: {other:?}"),
        }
        assert!(took < Duration::from_secs(5), "took {took:?}");
        assert_eq!(
            big.runs.load(Ordering::SeqCst) - runs,
            1,
            "the tool ran again"
        );
        let connections = proxy.stats().connections;
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert_eq!(
            proxy.stats().connections,
            connections,
            "rmcp kept reconnecting"
        );
        client.cancel().await.unwrap();
        proxy.shutdown().await;
    })
    .await
    .expect("bounded time");
}
