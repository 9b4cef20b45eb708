//! An rmcp client on `ssegate::rmcp::GuardedHttpClient` wrapped in rmcp's `AuthClient`, against
//! the kit's OAuth-protected endpoint (`ssegate_testkit::auth`) in front of the loopback MCP
//! server, with the fault proxy between the two: signed in once with rmcp's `OAuthState` (the kit's
//! `follow` as the browser), every request carries the bearer, a result cut mid-event is resumed
//! in place with the token on the resume `GET` (the protected endpoint refuses any request without
//! a live token, so the resume's success proves it), and a token the server stops accepting before
//! the resume is refreshed by `AuthClient` and the same stream resumed.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::auth::{AuthClient, AuthorizationManager, AuthorizationRequest, OAuthState};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use ssegate::client::ClientConfig;
use ssegate::replay;
use ssegate::rmcp::GuardedHttpClient;
use ssegate_testkit::auth::{
    AuthServer, AuthServerConfig, ProtectedConfig, ProtectedServer, ProtectedStats, follow,
};
use ssegate_testkit::proxy::{Cut, ProxyConfig, RunningProxy};
use ssegate_testkit::server::{
    RunningServer, ServerConfig, ServerMode, ServerStats, expected_result,
};

const RESULT: usize = 64 << 10;
const SEED: u64 = 42;
/// Inside the result event (priming and three progress events arrive whole before it).
const CUT: u64 = 40_000;
const LIMIT: Duration = Duration::from_secs(30);
/// The redirect URI registered: the kit's browser returns the redirect without following it.
const REDIRECT: &str = "http://127.0.0.1:9/callback";

/// The loopback MCP server (it resumes a cut stream in place), the fault proxy in front of it,
/// the authorization server, and the protected endpoint in front of the proxy.
struct Kit {
    server: RunningServer,
    proxy: RunningProxy,
    auth: AuthServer,
    protected: ProtectedServer,
}

impl Kit {
    /// With the server's `retry` at `retry_ms` (the resume's delay).
    async fn start(retry_ms: u64) -> Kit {
        let mut replay = replay::BufferConfig::default();
        replay
            .max_session_bytes(32 << 10)
            .max_event_bytes(32 << 10)
            .retry_after(Duration::from_millis(200));
        let mut config = ServerConfig::default();
        config
            .mode(ServerMode::Buffered)
            .result_size(RESULT)
            .seed(SEED)
            .retry_ms(retry_ms)
            .progress_count(3)
            .replay(replay);
        let server = config.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let mut pc = ProxyConfig::default();
        pc.accept_delay(Duration::ZERO).seed(7);
        let proxy = pc.start(server.addr()).await.unwrap();
        let auth = AuthServer::start(AuthServerConfig::default())
            .await
            .unwrap();
        let protected = ProtectedServer::start(proxy.addr(), &auth, ProtectedConfig::default())
            .await
            .unwrap();
        Kit {
            server,
            proxy,
            auth,
            protected,
        }
    }

    async fn shutdown(self) {
        self.protected.shutdown().await;
        self.proxy.shutdown().await;
        self.auth.shutdown().await;
        self.server.shutdown().await;
    }
}

/// The guarded client, every request on a fresh connection (a queued cut hits exactly the next
/// request). Built before any rmcp OAuth client: it installs ring as rustls' provider, which the
/// reqwest client of rmcp's `AuthorizationManager` needs (reqwest is built without one here).
fn guarded() -> GuardedHttpClient {
    let mut config = ClientConfig::default();
    config.reuse_connections(false);
    GuardedHttpClient::new(config).unwrap()
}

/// Signs in to the endpoint at `url` with rmcp's `OAuthState`: discovery, dynamic registration,
/// the authorization URL visited by the kit's headless browser, the code exchanged for tokens.
async fn sign_in(url: &str) -> AuthorizationManager {
    let mut state = OAuthState::new(url, None).await.unwrap();
    state
        .start_authorization(AuthorizationRequest::new(REDIRECT).with_client_name("rmcp_auth"))
        .await
        .unwrap();
    let authorization_url = state.get_authorization_url().await.unwrap();
    let redirect = follow(&authorization_url).await.unwrap();
    state.handle_callback_url(&redirect).await.unwrap();
    state.into_authorization_manager().expect("authorized")
}

/// An rmcp client on `http` wrapped in `AuthClient` with `manager`'s tokens.
async fn connect(
    url: &str,
    http: &GuardedHttpClient,
    manager: AuthorizationManager,
) -> RunningService<RoleClient, ()> {
    let transport = StreamableHttpClientTransport::with_client(
        AuthClient::new(http.clone(), manager),
        StreamableHttpClientTransportConfig::with_uri(url),
    );
    let client = ().serve(transport).await.unwrap();
    // Let rmcp's standalone GET (answered 405 by this server) go by before a cut is queued.
    tokio::time::sleep(Duration::from_millis(200)).await;
    client
}

fn big_result() -> CallToolRequestParams {
    CallToolRequestParams::new("big_result")
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

/// The call's result is the whole text, the server resumed its stream once and ran the tool once
/// since `before`, and nothing is left parked.
fn assert_resumed_once(
    kit: &Kit,
    before: &ServerStats,
    http: &GuardedHttpClient,
    resumed: &rmcp::model::CallToolResult,
    want: &str,
) {
    assert!(
        resumed.content[0].as_text().unwrap().text == want,
        "resumed"
    );
    let now = kit.server.stats();
    assert_eq!(now.resumes - before.resumes, 1, "resumed once");
    assert_eq!(now.calls - before.calls, 1, "the tool ran once");
    assert_eq!(http.parked(), 0, "nothing left parked");
}

/// What the protected endpoint refused since `before`: (no token, a token refused).
fn refused_since(before: ProtectedStats, now: ProtectedStats) -> (u64, u64) {
    (
        now.missing_token - before.missing_token,
        now.invalid_token - before.invalid_token,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auth_client_lists_calls_and_resumes_a_cut_result_with_the_token() {
    tokio::time::timeout(LIMIT, async {
        let want = expected_text();
        let kit = Kit::start(10).await;
        let url = kit.protected.url();
        let http = guarded();
        let manager = sign_in(&url).await;
        let signed_in = kit.protected.stats();
        let client = connect(&url, &http, manager).await;

        let tools = client.list_tools(None).await.unwrap();
        assert!(tools.tools.iter().any(|t| t.name == "big_result"));
        let whole = client.call_tool(big_result()).await.unwrap();
        assert!(whole.content[0].as_text().unwrap().text == want, "uncut");

        // Cut inside the result event: resumed in place, through the protected endpoint.
        kit.proxy.set_next_cut(Cut::At(CUT));
        let before = kit.server.stats();
        let resumed = client.call_tool(big_result()).await.unwrap();
        assert_eq!(kit.proxy.stats().cuts, 1, "the call was cut");
        assert_eq!(resumed.content.len(), 1);
        assert_resumed_once(&kit, &before, &http, &resumed, &want);

        // After the sign-in, every request (the resume GET included) carried a live token.
        let now = kit.protected.stats();
        assert_eq!(refused_since(signed_in, now), (0, 0), "{now:?}");
        assert!(now.admitted - signed_in.admitted >= 5, "{now:?}");
        let auth = kit.auth.stats();
        assert_eq!((auth.authorizations, auth.code_grants), (1, 1), "{auth:?}");
        assert_eq!(auth.refresh_grants, 0, "{auth:?}");
        assert_eq!(auth.tokens_rejected, 0, "{auth:?}");

        client.cancel().await.unwrap();
        kit.shutdown().await;
    })
    .await
    .expect("bounded time");
}

/// The access token stops being accepted between the cut and the resume: the resume `GET` is
/// answered `401`, `AuthClient` refreshes once and sends it again, and the guarded client resumes
/// the same stream (the result intact, the tool run once, no second sign-in).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_refused_at_the_resume_is_refreshed_and_the_same_stream_resumed() {
    tokio::time::timeout(LIMIT, async {
        let want = expected_text();
        // The resume waits for the server's `retry`: time to expire the token after the cut.
        let kit = Kit::start(800).await;
        let url = kit.protected.url();
        let http = guarded();
        let manager = sign_in(&url).await;
        let signed_in = kit.protected.stats();
        let client = connect(&url, &http, manager).await;

        kit.proxy.set_next_cut(Cut::At(CUT));
        let before = kit.server.stats();
        let call = {
            let peer = client.peer().clone();
            tokio::spawn(async move { peer.call_tool(big_result()).await })
        };
        while kit.proxy.stats().cuts == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(kit.auth.expire_access_tokens() >= 1);
        let resumed = call.await.unwrap().unwrap();
        assert_resumed_once(&kit, &before, &http, &resumed, &want);

        let now = kit.protected.stats();
        assert_eq!(
            refused_since(signed_in, now),
            (0, 1),
            "only the resume with the expired token was refused: {now:?}"
        );
        let auth = kit.auth.stats();
        assert_eq!(auth.authorizations, 1, "{auth:?}");
        assert_eq!(auth.refresh_grants, 1, "{auth:?}");

        // The session goes on with the new token.
        let again = client.call_tool(big_result()).await.unwrap();
        assert!(again.content[0].as_text().unwrap().text == want);
        client.cancel().await.unwrap();
        kit.shutdown().await;
    })
    .await
    .expect("bounded time");
}
