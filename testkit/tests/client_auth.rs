//! ssegate's client signing in (`ClientConfig::auth`) against the kit's authorization server and
//! OAuth-protected endpoint, for the cases a misconfigured or strict authorization server makes:
//! no `S256` offered and an issuer mismatch are refused, typed, before any authorization (the
//! `SignIn` is never asked, the server counts none); a short-lived token is refreshed between two
//! calls without a second sign-in.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::json;
use ssegate::client::auth::{AuthConfig, AuthFailure, OAuthError, SignIn, SignInError};
use ssegate::client::{Client, ClientConfig, ClientError, Retry};
use ssegate_testkit::auth::{
    AuthServer, AuthServerConfig, ProtectedConfig, ProtectedServer, follow,
};
use ssegate_testkit::server::{RunningServer, ServerConfig};

const LIMIT: Duration = Duration::from_secs(30);
/// The redirect URI registered: the kit's browser returns the redirect without following it.
const REDIRECT: &str = "http://127.0.0.1:9/callback";

type Answer<'t> = Pin<Box<dyn Future<Output = Result<String, SignInError>> + Send + 't>>;

/// The user, approving with the kit's headless browser; counts the authorizations asked for.
#[derive(Debug, Default)]
struct Counting {
    authorize_calls: AtomicU32,
}

impl Counting {
    fn calls(&self) -> u32 {
        self.authorize_calls.load(Ordering::SeqCst)
    }
}

// `SignIn` is an `async_trait` trait, written out (the kit has no `async-trait` dependency).
impl SignIn for Counting {
    fn redirect_uri<'a, 't>(&'a self) -> Answer<'t>
    where
        'a: 't,
        Self: 't,
    {
        Box::pin(async { Ok(REDIRECT.to_owned()) })
    }

    fn authorize<'a, 'b, 't>(&'a self, url: &'b str) -> Answer<'t>
    where
        'a: 't,
        'b: 't,
        Self: 't,
    {
        Box::pin(async move {
            self.authorize_calls.fetch_add(1, Ordering::SeqCst);
            follow(url)
                .await
                .map_err(|e| SignInError::Other(e.to_string()))
        })
    }
}

/// The loopback MCP server, the authorization server, the protected endpoint.
struct Kit {
    _mcp: RunningServer,
    auth: AuthServer,
    protected: ProtectedServer,
}

async fn start_kit(config: AuthServerConfig) -> Kit {
    let mut sc = ServerConfig::default();
    sc.result_size(10_000).retry_ms(5).progress_count(1);
    let mcp = sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let auth = AuthServer::start(config).await.unwrap();
    let protected = ProtectedServer::start(mcp.addr(), &auth, ProtectedConfig::default())
        .await
        .unwrap();
    Kit {
        _mcp: mcp,
        auth,
        protected,
    }
}

fn config(sign_in: &Arc<Counting>) -> ClientConfig {
    let mut auth = AuthConfig::default();
    auth.sign_in(sign_in.clone()).client_name("client_auth");
    let mut config = ClientConfig::default();
    config.auth(auth);
    config
}

fn oauth_error(outcome: Result<Client, ClientError>) -> OAuthError {
    match outcome {
        Err(ClientError::Auth(failure)) => match *failure {
            AuthFailure::OAuth(e) => e,
            other => panic!("not an OAuth failure: {other:?}"),
        },
        Err(other) => panic!("not a sign-in failure: {other:?}"),
        Ok(_) => panic!("connected"),
    }
}

/// Connects to a kit whose authorization server offers `methods` for PKCE: the connect fails with
/// rmcp's `PkceUnsupported` before the user is asked, and nothing is authorized or issued.
async fn refused_for_pkce(methods: Option<Vec<String>>) {
    tokio::time::timeout(LIMIT, async {
        let mut ac = AuthServerConfig::default();
        ac.code_challenge_methods(methods);
        let kit = start_kit(ac).await;
        let sign_in = Arc::new(Counting::default());
        let outcome = Client::connect(&kit.protected.url(), config(&sign_in)).await;
        let e = oauth_error(outcome);
        assert!(matches!(e, OAuthError::PkceUnsupported), "{e:?}");
        assert_eq!(sign_in.calls(), 0, "the user was asked");
        let stats = kit.auth.stats();
        assert_eq!(stats.authorizations, 0, "{stats:?}");
        assert_eq!(stats.access_tokens_issued, 0, "{stats:?}");
        assert_eq!(kit.protected.stats().admitted, 0);
    })
    .await
    .expect("bounded time");
}

/// An authorization server that offers only `plain` PKCE is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authorization_server_without_s256_is_refused_without_a_sign_in() {
    refused_for_pkce(Some(vec!["plain".into()])).await;
}

/// Authorization server metadata that lists no PKCE methods at all is refused as well (the MCP
/// specification: a client refuses when `code_challenge_methods_supported` is absent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authorization_server_listing_no_pkce_methods_is_refused_without_a_sign_in() {
    refused_for_pkce(None).await;
}

/// Authorization server metadata whose `issuer` is not the one the protected resource names: the
/// connect fails in discovery, typed, before any registration or authorization.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issuer_mismatch_is_refused_without_a_sign_in() {
    tokio::time::timeout(LIMIT, async {
        let mut ac = AuthServerConfig::default();
        ac.issuer_mismatch(true);
        let kit = start_kit(ac).await;
        let sign_in = Arc::new(Counting::default());
        let outcome = Client::connect(&kit.protected.url(), config(&sign_in)).await;
        let e = oauth_error(outcome);
        assert!(
            matches!(
                e,
                OAuthError::AuthorizationServerMismatch { .. }
                    | OAuthError::AuthorizationServersUnavailable { .. }
            ),
            "{e:?}"
        );
        assert_eq!(sign_in.calls(), 0, "the user was asked");
        let stats = kit.auth.stats();
        assert_eq!(
            (
                stats.registrations,
                stats.authorizations,
                stats.token_requests
            ),
            (0, 0, 0),
            "{stats:?}"
        );
        assert_eq!(kit.protected.stats().admitted, 0);
    })
    .await
    .expect("bounded time");
}

/// Access tokens live a second and a half: the second call, after the first token expired, gets
/// a refreshed one (ahead of expiry or after the `401`), never a second sign-in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_lived_token_is_refreshed_between_calls_without_a_second_sign_in() {
    tokio::time::timeout(LIMIT, async {
        let mut ac = AuthServerConfig::default();
        ac.access_token_ttl(Duration::from_millis(1_500));
        let kit = start_kit(ac).await;
        let sign_in = Arc::new(Counting::default());
        let client = Client::connect(&kit.protected.url(), config(&sign_in))
            .await
            .unwrap();
        let args = json!({"size": 64});
        client
            .call_tool("big_result", args.clone(), Retry::Never)
            .await
            .unwrap();
        assert_eq!(sign_in.calls(), 1);
        let first = kit.auth.stats();
        assert_eq!(
            (first.authorizations, first.code_grants),
            (1, 1),
            "{first:?}"
        );

        tokio::time::sleep(Duration::from_millis(2_000)).await;
        client
            .call_tool("big_result", args, Retry::Never)
            .await
            .unwrap();
        let stats = kit.auth.stats();
        assert_eq!(sign_in.calls(), 1, "asked the user again");
        assert_eq!(
            (stats.authorizations, stats.code_grants),
            (1, 1),
            "{stats:?}"
        );
        assert!(
            stats.refresh_grants > first.refresh_grants,
            "no refresh: {stats:?}"
        );
        assert_eq!(stats.refreshes_rejected, 0, "{stats:?}");
    })
    .await
    .expect("bounded time");
}
