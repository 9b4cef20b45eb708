//! The test kit's authorization server and protected MCP endpoint, driven by hand over plain HTTP
//! (hyper, one request per connection): the oracle for `ssegate_testkit::auth`. Every check the
//! server makes that a client test relies on has a test here that fails when the check is gone.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use ssegate_testkit::auth::{
    ADMIN_TOOL, AuthServer, AuthServerConfig, Browser, BrowserError, IssParameter,
    MetadataLocation, ProtectedConfig, ProtectedServer, RegisteredClient, ResourcePolicy,
    TokenAuthMethod, follow, pkce_challenge, pkce_verifier,
};
use ssegate_testkit::server::{RunningServer, ServerConfig};
use url::Url;

const LIMIT: Duration = Duration::from_secs(30);
const REDIRECT: &str = "http://127.0.0.1:9/callback";

/// An answer, whole.
#[derive(Debug)]
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{} not JSON ({e}): {:?}", self.status, self.body))
    }

    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap())
            .unwrap_or("")
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One request on a fresh connection; no redirect is followed.
async fn http(method: Method, url: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let u = Url::parse(url).unwrap();
    let addr: SocketAddr = format!("{}:{}", u.host_str().unwrap(), u.port().unwrap())
        .parse()
        .unwrap();
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut target = u.path().to_owned();
    if let Some(q) = u.query() {
        target = format!("{target}?{q}");
    }
    let mut req = Request::builder()
        .method(method)
        .uri(target)
        .header(header::HOST, addr.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let response = sender
        .send_request(req.body(Full::new(Bytes::from(body.to_owned()))).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes(),
    }
}

async fn get(url: &str) -> Reply {
    http(Method::GET, url, &[], "").await
}

fn form(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

async fn post_form(url: &str, pairs: &[(&str, &str)], headers: &[(&str, &str)]) -> Reply {
    let mut h = vec![("content-type", "application/x-www-form-urlencoded")];
    h.extend_from_slice(headers);
    http(Method::POST, url, &h, &form(pairs)).await
}

fn query(url: &str) -> HashMap<String, String> {
    Url::parse(url)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect()
}

/// A JSON-RPC request to the MCP endpoint with `token` (or none).
async fn mcp(url: &str, token: Option<&str>, session: Option<&str>, message: &Value) -> Reply {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    if let Some(b) = &bearer {
        headers.push(("authorization", b));
    }
    if let Some(s) = session {
        headers.push(("mcp-session-id", s));
    }
    http(Method::POST, url, &headers, &message.to_string()).await
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "auth_server test", "version": "0"}}})
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}})
}

/// The loopback MCP server, an authorization server and the protected front.
struct Kit {
    mcp: RunningServer,
    auth: AuthServer,
    protected: ProtectedServer,
}

async fn start_kit(auth: AuthServerConfig, protected: ProtectedConfig) -> Kit {
    let mut sc = ServerConfig::default();
    sc.result_size(10_000).retry_ms(5).progress_count(1);
    let mcp = sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let auth = AuthServer::start(auth).await.unwrap();
    let protected = ProtectedServer::start(mcp.addr(), &auth, protected)
        .await
        .unwrap();
    Kit {
        mcp,
        auth,
        protected,
    }
}

async fn default_kit() -> Kit {
    start_kit(AuthServerConfig::default(), ProtectedConfig::default()).await
}

/// Registers a public client with `REDIRECT`; returns its id.
async fn register_public(auth: &AuthServer) -> String {
    let r = http(
        Method::POST,
        &auth.registration_endpoint(),
        &[("content-type", "application/json")],
        &json!({"client_name": "test", "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"]})
        .to_string(),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let body = r.json();
    assert!(body.get("client_secret").is_none(), "{body}");
    body["client_id"].as_str().unwrap().to_owned()
}

/// The authorization URL a client builds.
fn authorization_url(
    auth: &AuthServer,
    client_id: &str,
    challenge: &str,
    scope: Option<&str>,
    resource: Option<&str>,
) -> String {
    let mut u = Url::parse(&auth.authorization_endpoint()).unwrap();
    {
        let mut q = u.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", REDIRECT)
            .append_pair("state", "st4te")
            .append_pair("code_challenge", challenge)
            .append_pair("code_challenge_method", "S256");
        if let Some(s) = scope {
            q.append_pair("scope", s);
        }
        if let Some(r) = resource {
            q.append_pair("resource", r);
        }
    }
    u.into()
}

/// Authorizes (through the headless browser) and returns the code.
async fn code_for(kit: &Kit, client_id: &str, verifier: &str, scope: Option<&str>) -> String {
    let url = authorization_url(
        &kit.auth,
        client_id,
        &pkce_challenge(verifier),
        scope,
        Some(&kit.protected.url()),
    );
    let redirect = follow(&url).await.unwrap();
    assert!(redirect.starts_with(REDIRECT), "{redirect}");
    let q = query(&redirect);
    assert_eq!(q["state"], "st4te");
    assert_eq!(q["iss"], kit.auth.issuer());
    q["code"].clone()
}

async fn exchange_code(kit: &Kit, client_id: &str, code: &str, verifier: &str) -> Reply {
    let resource = kit.protected.url();
    post_form(
        &kit.auth.token_endpoint(),
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", verifier),
            ("client_id", client_id),
            ("resource", &resource),
        ],
        &[],
    )
    .await
}

/// A whole sign-in: register, authorize, exchange. Returns (client_id, token response).
async fn sign_in(kit: &Kit, scope: Option<&str>) -> (String, Value) {
    let client_id = register_public(&kit.auth).await;
    let verifier = pkce_verifier();
    let code = code_for(kit, &client_id, &verifier, scope).await;
    let r = exchange_code(kit, &client_id, &code, &verifier).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.header("cache-control"), "no-store");
    (client_id, r.json())
}

async fn refresh(kit: &Kit, client_id: &str, refresh_token: &str) -> Reply {
    post_form(
        &kit.auth.token_endpoint(),
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_id", client_id),
        ],
        &[],
    )
    .await
}

fn www_authenticate(r: &Reply) -> &str {
    r.header("www-authenticate")
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

async fn run<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("test timed out");
}

#[tokio::test]
async fn metadata_names_the_endpoints_and_the_protected_resource_names_the_issuer() {
    run(async {
        let kit = default_kit().await;
        let m = get(&kit.auth.metadata_url()).await.json();
        assert_eq!(m["issuer"], kit.auth.issuer());
        assert_eq!(
            m["authorization_endpoint"],
            kit.auth.authorization_endpoint()
        );
        assert_eq!(m["token_endpoint"], kit.auth.token_endpoint());
        assert_eq!(m["registration_endpoint"], kit.auth.registration_endpoint());
        assert_eq!(m["code_challenge_methods_supported"], json!(["S256"]));
        assert_eq!(m["authorization_response_iss_parameter_supported"], true);
        assert_eq!(m["scopes_supported"], json!(["mcp", "admin"]));
        // No OpenID Connect discovery unless asked for.
        let oidc = format!("{}/.well-known/openid-configuration", kit.auth.issuer());
        assert_eq!(get(&oidc).await.status, StatusCode::NOT_FOUND);

        // RFC 9728, path inserted.
        let prm_url = kit.protected.metadata_url();
        assert!(prm_url.ends_with("/.well-known/oauth-protected-resource/mcp"));
        let prm = get(&prm_url).await.json();
        assert_eq!(prm["resource"], kit.protected.url());
        assert_eq!(prm["authorization_servers"], json!([kit.auth.issuer()]));
        assert_eq!(kit.protected.stats().metadata_requests, 1);
        assert_eq!(kit.auth.stats().metadata_requests, 1);
    })
    .await;
}

#[tokio::test]
async fn every_mcp_request_without_a_token_gets_the_challenge() {
    run(async {
        let kit = default_kit().await;
        let url = kit.protected.url();
        let r = mcp(&url, None, None, &initialize()).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        let challenge = www_authenticate(&r);
        assert!(challenge.starts_with("Bearer "), "{challenge}");
        assert!(
            challenge.contains(&format!(
                "resource_metadata=\"{}\"",
                kit.protected.metadata_url()
            )),
            "{challenge}"
        );
        assert!(challenge.contains("scope=\"mcp\""), "{challenge}");
        assert!(!challenge.contains("error="), "{challenge}");
        // GET (a resume) and DELETE too, and a token of another scheme, and a made-up token.
        let get = http(
            Method::GET,
            &url,
            &[("mcp-session-id", "x"), ("last-event-id", "1")],
            "",
        )
        .await;
        assert_eq!(get.status, StatusCode::UNAUTHORIZED);
        let delete = http(Method::DELETE, &url, &[("mcp-session-id", "x")], "").await;
        assert_eq!(delete.status, StatusCode::UNAUTHORIZED);
        let basic = http(Method::POST, &url, &[("authorization", "Basic eDp5")], "{}").await;
        assert_eq!(basic.status, StatusCode::UNAUTHORIZED);
        let forged = mcp(&url, Some("at-forged"), None, &initialize()).await;
        assert_eq!(forged.status, StatusCode::UNAUTHORIZED);
        assert!(
            www_authenticate(&forged).contains("error=\"invalid_token\""),
            "{}",
            www_authenticate(&forged)
        );
        let stats = kit.protected.stats();
        assert_eq!((stats.missing_token, stats.invalid_token), (4, 1));
        assert_eq!(stats.admitted, 0);
        // Nothing reached the MCP server.
        assert_eq!(kit.mcp.stats().requests, 0);
        assert_eq!(kit.auth.stats().tokens_rejected, 1);
    })
    .await;
}

#[tokio::test]
async fn the_code_flow_with_pkce_by_hand_then_tools_with_the_token() {
    run(async {
        let kit = default_kit().await;
        let browser = Browser::new();
        let client_id = register_public(&kit.auth).await;
        let verifier = pkce_verifier();
        let url = authorization_url(
            &kit.auth,
            &client_id,
            &pkce_challenge(&verifier),
            None,
            Some(&kit.protected.url()),
        );
        let redirect = browser.follow(&url).await.unwrap();
        assert_eq!(browser.visits(), 1);
        assert_eq!(browser.visited(), vec![url.clone()]);
        assert_eq!(browser.redirects(), vec![redirect.clone()]);
        let q = query(&redirect);
        assert!(redirect.starts_with(REDIRECT));
        assert_eq!(q["state"], "st4te");
        assert_eq!(q["iss"], kit.auth.issuer());
        let r = exchange_code(&kit, &client_id, &q["code"], &verifier).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        let t = r.json();
        assert_eq!(t["token_type"], "Bearer");
        assert_eq!(t["scope"], "mcp");
        assert_eq!(t["expires_in"], 3600);
        assert!(t["refresh_token"].is_string());
        let token = s(&t["access_token"]);
        let info = kit.auth.introspect(token).unwrap();
        assert_eq!(info.client_id, client_id);
        assert_eq!(info.resource.as_deref(), Some(kit.protected.url().as_str()));

        // The MCP session, through the front.
        let url = kit.protected.url();
        let init = mcp(&url, Some(token), None, &initialize()).await;
        assert_eq!(init.status, StatusCode::OK, "{}", init.text());
        let session = init.header("mcp-session-id").to_owned();
        assert!(!session.is_empty());
        let progress = mcp(
            &url,
            Some(token),
            Some(&session),
            &call(2, "progress", json!({"count": 1})),
        )
        .await;
        assert_eq!(progress.status, StatusCode::OK);
        assert_eq!(progress.header("content-type"), "text/event-stream");
        assert!(
            progress.text().contains("\"result\""),
            "{}",
            progress.text()
        );
        let bearer = format!("Bearer {token}");
        let delete = http(
            Method::DELETE,
            &url,
            &[("authorization", &bearer), ("mcp-session-id", &session)],
            "",
        )
        .await;
        assert_eq!(delete.status, StatusCode::NO_CONTENT);
        // Without the token, the same session is refused.
        let again = mcp(&url, None, Some(&session), &call(3, "progress", json!({}))).await;
        assert_eq!(again.status, StatusCode::UNAUTHORIZED);

        let a = kit.auth.stats();
        assert_eq!(
            (
                a.registrations,
                a.authorizations,
                a.code_grants,
                a.token_requests
            ),
            (1, 1, 1, 1)
        );
        assert_eq!((a.access_tokens_issued, a.tokens_accepted), (1, 3));
        assert_eq!(kit.protected.stats().admitted, 3);
        assert_eq!(kit.mcp.stats().requests, 3);
        let recorded = kit.auth.authorization_requests();
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0]["resource"], kit.protected.url());
        let tokens = kit.auth.token_requests();
        assert_eq!(tokens[0]["client_auth"], "none");
        assert_eq!(tokens[0]["code_verifier"], verifier);
    })
    .await;
}

#[tokio::test]
async fn a_code_is_single_use_and_a_wrong_verifier_is_refused() {
    run(async {
        let kit = default_kit().await;
        let client_id = register_public(&kit.auth).await;
        let verifier = pkce_verifier();
        let code = code_for(&kit, &client_id, &verifier, None).await;
        let wrong = exchange_code(&kit, &client_id, &code, &pkce_verifier()).await;
        assert_eq!(wrong.status, StatusCode::BAD_REQUEST);
        assert_eq!(wrong.json()["error"], "invalid_grant");
        // The failed try consumed it.
        let late = exchange_code(&kit, &client_id, &code, &verifier).await;
        assert_eq!(late.json()["error"], "invalid_grant");

        let code = code_for(&kit, &client_id, &verifier, None).await;
        let no_verifier = post_form(
            &kit.auth.token_endpoint(),
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("client_id", &client_id),
            ],
            &[],
        )
        .await;
        assert_eq!(no_verifier.json()["error"], "invalid_grant");

        let code = code_for(&kit, &client_id, &verifier, None).await;
        assert_eq!(
            exchange_code(&kit, &client_id, &code, &verifier)
                .await
                .status,
            StatusCode::OK
        );
        let reused = exchange_code(&kit, &client_id, &code, &verifier).await;
        assert_eq!(reused.json()["error"], "invalid_grant");
        // Another client cannot redeem a code.
        let other = register_public(&kit.auth).await;
        let code = code_for(&kit, &client_id, &verifier, None).await;
        let stolen = exchange_code(&kit, &other, &code, &verifier).await;
        assert_eq!(stolen.json()["error"], "invalid_grant");
        let a = kit.auth.stats();
        assert_eq!((a.code_grants, a.token_errors), (6, 5));

        // No PKCE at all: refused at the authorization endpoint.
        let mut u = Url::parse(&kit.auth.authorization_endpoint()).unwrap();
        u.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &client_id)
            .append_pair("redirect_uri", REDIRECT)
            .append_pair("state", "s");
        let q = query(&follow(u.as_str()).await.unwrap());
        assert_eq!(q["error"], "invalid_request");
        assert!(!q.contains_key("code"));
    })
    .await;
}

#[tokio::test]
async fn a_wrong_redirect_uri_is_refused_at_both_endpoints() {
    run(async {
        let kit = default_kit().await;
        let client_id = register_public(&kit.auth).await;
        let verifier = pkce_verifier();
        let url = authorization_url(
            &kit.auth,
            &client_id,
            &pkce_challenge(&verifier),
            None,
            None,
        )
        .replace("callback", "elsewhere");
        match follow(&url).await {
            Err(BrowserError::NotRedirected { status: 400, body }) => {
                assert!(body.contains("not registered"), "{body}")
            }
            other => panic!("expected a 400 page, got {other:?}"),
        }
        // Another port on loopback is the same redirect URI (RFC 8252 §7.3).
        let url = authorization_url(
            &kit.auth,
            &client_id,
            &pkce_challenge(&verifier),
            None,
            None,
        )
        .replace("%3A9%2F", "%3A4567%2F");
        assert!(url.contains("4567"), "{url}");
        let redirect = follow(&url).await.unwrap();
        assert!(
            redirect.starts_with("http://127.0.0.1:4567/callback?"),
            "{redirect}"
        );
        // The token request must repeat the authorization request's redirect_uri.
        let code = query(&redirect)["code"].clone();
        let r = post_form(
            &kit.auth.token_endpoint(),
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("code_verifier", &verifier),
                ("client_id", &client_id),
            ],
            &[],
        )
        .await;
        assert_eq!(r.json()["error"], "invalid_grant");
        // An unknown client gets a page too.
        let unknown =
            authorization_url(&kit.auth, "nobody", &pkce_challenge(&verifier), None, None);
        assert!(matches!(
            follow(&unknown).await,
            Err(BrowserError::NotRedirected { status: 400, .. })
        ));
        // Registration refuses http redirect URIs off loopback, and fragments.
        for bad in [
            "http://example.com/cb",
            "http://127.0.0.1/cb#frag",
            "not a uri",
        ] {
            let r = http(
                Method::POST,
                &kit.auth.registration_endpoint(),
                &[("content-type", "application/json")],
                &json!({"redirect_uris": [bad], "token_endpoint_auth_method": "none"}).to_string(),
            )
            .await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
            assert_eq!(r.json()["error"], "invalid_redirect_uri", "{bad}");
        }
        assert_eq!(kit.auth.stats().registrations_refused, 3);
    })
    .await;
}

#[tokio::test]
async fn refresh_rotates_and_the_old_refresh_token_is_refused() {
    run(async {
        let kit = default_kit().await;
        let (client_id, t) = sign_in(&kit, None).await;
        let first = s(&t["refresh_token"]).to_owned();
        let r = refresh(&kit, &client_id, &first).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        let t2 = r.json();
        let second = s(&t2["refresh_token"]).to_owned();
        assert_ne!(first, second);
        assert_ne!(t["access_token"], t2["access_token"]);
        assert_eq!(t2["scope"], "mcp");
        // The new access token works, with the same audience.
        let ok = mcp(
            &kit.protected.url(),
            Some(s(&t2["access_token"])),
            None,
            &initialize(),
        )
        .await;
        assert_eq!(ok.status, StatusCode::OK);
        // The rotated-out one is refused.
        let old = refresh(&kit, &client_id, &first).await;
        assert_eq!(old.status, StatusCode::BAD_REQUEST);
        assert_eq!(old.json()["error"], "invalid_grant");
        // Another client cannot use it.
        let other = register_public(&kit.auth).await;
        assert_eq!(
            refresh(&kit, &other, &second).await.json()["error"],
            "invalid_grant"
        );
        // Narrowing the scope is allowed, widening is not.
        let wide = post_form(
            &kit.auth.token_endpoint(),
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", &second),
                ("client_id", &client_id),
                ("scope", "mcp admin"),
            ],
            &[],
        )
        .await;
        assert_eq!(wide.json()["error"], "invalid_scope");
        let a = kit.auth.stats();
        assert_eq!((a.refresh_grants, a.refreshes_rejected), (4, 3));
    })
    .await;
}

#[tokio::test]
async fn without_rotation_the_same_refresh_token_keeps_working() {
    run(async {
        let mut config = AuthServerConfig::default();
        config.rotate_refresh_tokens(false);
        let kit = start_kit(config, ProtectedConfig::default()).await;
        let (client_id, t) = sign_in(&kit, None).await;
        let rt = s(&t["refresh_token"]).to_owned();
        for _ in 0..3 {
            let r = refresh(&kit, &client_id, &rt).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text());
            assert!(r.json().get("refresh_token").is_none());
        }
    })
    .await;
}

#[tokio::test]
async fn refresh_is_refused_after_n_uses_and_when_switched_off() {
    run(async {
        let mut config = AuthServerConfig::default();
        config.refresh_token_max_uses(Some(2));
        let kit = start_kit(config, ProtectedConfig::default()).await;
        let (client_id, t) = sign_in(&kit, None).await;
        let mut rt = s(&t["refresh_token"]).to_owned();
        for _ in 0..2 {
            let r = refresh(&kit, &client_id, &rt).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text());
            rt = s(&r.json()["refresh_token"]).to_owned();
        }
        let third = refresh(&kit, &client_id, &rt).await;
        assert_eq!(third.json()["error"], "invalid_grant");

        // The switch: a fresh grant, refused while it is on, accepted again after.
        let (client_id, t) = sign_in(&kit, None).await;
        let rt = s(&t["refresh_token"]).to_owned();
        kit.auth.set_refresh_rejected(true);
        assert_eq!(
            refresh(&kit, &client_id, &rt).await.json()["error"],
            "invalid_grant"
        );
        kit.auth.set_refresh_rejected(false);
        assert_eq!(refresh(&kit, &client_id, &rt).await.status, StatusCode::OK);
        assert_eq!(kit.auth.stats().refreshes_rejected, 2);
    })
    .await;
}

#[tokio::test]
async fn an_expired_access_token_is_invalid_token_and_a_refresh_mends_it() {
    run(async {
        let mut config = AuthServerConfig::default();
        config.access_token_ttl(Duration::from_millis(1500));
        let kit = start_kit(config, ProtectedConfig::default()).await;
        let (client_id, t) = sign_in(&kit, None).await;
        assert_eq!(t["expires_in"], 1);
        let token = s(&t["access_token"]);
        let url = kit.protected.url();
        assert_eq!(
            mcp(&url, Some(token), None, &initialize()).await.status,
            StatusCode::OK
        );
        tokio::time::sleep(Duration::from_millis(1600)).await;
        let expired = mcp(&url, Some(token), None, &initialize()).await;
        assert_eq!(expired.status, StatusCode::UNAUTHORIZED);
        let challenge = www_authenticate(&expired);
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        assert!(challenge.contains("expired"), "{challenge}");
        assert!(challenge.contains("resource_metadata="), "{challenge}");
        let r = refresh(&kit, &client_id, s(&t["refresh_token"])).await;
        let fresh = r.json();
        assert_eq!(
            mcp(&url, Some(s(&fresh["access_token"])), None, &initialize())
                .await
                .status,
            StatusCode::OK
        );
        // The switch: every token issued so far expires at once.
        assert_eq!(kit.auth.expire_access_tokens(), 1);
        let gone = mcp(&url, Some(s(&fresh["access_token"])), None, &initialize()).await;
        assert_eq!(gone.status, StatusCode::UNAUTHORIZED);
        assert_eq!(kit.protected.stats().invalid_token, 2);
    })
    .await;
}

#[tokio::test]
async fn a_tool_needing_more_scope_is_insufficient_scope_until_granted() {
    run(async {
        let kit = default_kit().await;
        let url = kit.protected.url();
        let (_, t) = sign_in(&kit, None).await;
        let token = s(&t["access_token"]);
        let init = mcp(&url, Some(token), None, &initialize()).await;
        let session = init.header("mcp-session-id").to_owned();
        let echo = call(2, ADMIN_TOOL, json!({"text": "hello"}));
        let r = mcp(&url, Some(token), Some(&session), &echo).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        let challenge = www_authenticate(&r);
        assert!(
            challenge.contains("error=\"insufficient_scope\""),
            "{challenge}"
        );
        assert!(challenge.contains("scope=\"mcp admin\""), "{challenge}");
        assert!(challenge.contains("resource_metadata="), "{challenge}");
        // Other tools still work with the token.
        let p = mcp(
            &url,
            Some(token),
            Some(&session),
            &call(3, "progress", json!({"count": 1})),
        )
        .await;
        assert_eq!(p.status, StatusCode::OK);
        // Step up: a token with both scopes.
        let (_, t) = sign_in(&kit, Some("mcp admin")).await;
        assert_eq!(t["scope"], "mcp admin");
        let r = mcp(&url, Some(s(&t["access_token"])), Some(&session), &echo).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        assert_eq!(r.json()["result"]["content"][0]["text"], "hello");
        assert_eq!(r.json()["id"], 2);
        let stats = kit.protected.stats();
        assert_eq!((stats.insufficient_scope, stats.admin_calls), (1, 1));
        // A token without the base scope is refused everywhere with 403.
        let admin_only = kit.auth.issue_token("direct", &["admin"], None);
        let r = mcp(&url, Some(&admin_only.access_token), None, &initialize()).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        assert!(www_authenticate(&r).contains("scope=\"mcp\""));
        // An unsupported scope is refused at the authorization endpoint.
        let client_id = register_public(&kit.auth).await;
        let url = authorization_url(
            &kit.auth,
            &client_id,
            &pkce_challenge(&pkce_verifier()),
            Some("root"),
            None,
        );
        assert_eq!(
            query(&follow(&url).await.unwrap())["error"],
            "invalid_scope"
        );
    })
    .await;
}

#[tokio::test]
async fn a_configured_tool_scope_guards_an_upstream_tool() {
    run(async {
        let mut pc = ProtectedConfig::default();
        pc.tool_scope("big_result", "admin");
        let kit = start_kit(AuthServerConfig::default(), pc).await;
        let url = kit.protected.url();
        let plain = kit.auth.issue_token("direct", &["mcp"], Some(&url));
        let init = mcp(&url, Some(&plain.access_token), None, &initialize()).await;
        let session = init.header("mcp-session-id").to_owned();
        let big = call(2, "big_result", json!({"size": 1000}));
        let r = mcp(&url, Some(&plain.access_token), Some(&session), &big).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        let admin = kit
            .auth
            .issue_token("direct", &["mcp", "admin"], Some(&url));
        let r = mcp(&url, Some(&admin.access_token), Some(&session), &big).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(kit.mcp.stats().calls, 1);
    })
    .await;
}

#[tokio::test]
async fn metadata_without_s256_and_with_a_mismatched_issuer() {
    run(async {
        let mut config = AuthServerConfig::default();
        config.code_challenge_methods(None);
        let kit = start_kit(config, ProtectedConfig::default()).await;
        let m = get(&kit.auth.metadata_url()).await.json();
        assert!(m.get("code_challenge_methods_supported").is_none(), "{m}");

        let mut config = AuthServerConfig::default();
        config.code_challenge_methods(Some(vec!["plain".into()]));
        let kit = kit_with(config).await;
        let m = get(&kit.auth.metadata_url()).await.json();
        assert_eq!(m["code_challenge_methods_supported"], json!(["plain"]));

        let mut config = AuthServerConfig::default();
        config.issuer_mismatch(true);
        let kit = kit_with(config).await;
        let m = get(&kit.auth.metadata_url()).await.json();
        assert_ne!(m["issuer"], kit.auth.issuer());
        let prm = get(&kit.protected.metadata_url()).await.json();
        assert_eq!(prm["authorization_servers"], json!([kit.auth.issuer()]));
    })
    .await;
}

async fn kit_with(config: AuthServerConfig) -> Kit {
    start_kit(config, ProtectedConfig::default()).await
}

#[tokio::test]
async fn iss_in_the_redirect_as_configured() {
    run(async {
        for (mode, advertised, sent) in [
            (IssParameter::Sent, true, Some(true)),
            (IssParameter::NotSupported, false, None),
            (IssParameter::Omitted, true, None),
            (IssParameter::Wrong, true, Some(false)),
        ] {
            let mut config = AuthServerConfig::default();
            config.iss(mode);
            let kit = kit_with(config).await;
            let m = get(&kit.auth.metadata_url()).await.json();
            assert_eq!(
                m.get("authorization_response_iss_parameter_supported") == Some(&json!(true)),
                advertised,
                "{mode:?}"
            );
            let client_id = register_public(&kit.auth).await;
            let url = authorization_url(
                &kit.auth,
                &client_id,
                &pkce_challenge(&pkce_verifier()),
                None,
                None,
            );
            let q = query(&follow(&url).await.unwrap());
            assert!(q.contains_key("code"));
            match sent {
                None => assert!(!q.contains_key("iss"), "{mode:?}"),
                Some(right) => assert_eq!(q["iss"] == kit.auth.issuer(), right, "{mode:?}"),
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_denied_authorization_redirects_with_access_denied() {
    run(async {
        let mut config = AuthServerConfig::default();
        config.approve(false);
        let kit = kit_with(config).await;
        let client_id = register_public(&kit.auth).await;
        let url = authorization_url(
            &kit.auth,
            &client_id,
            &pkce_challenge(&pkce_verifier()),
            None,
            None,
        );
        let q = query(&follow(&url).await.unwrap());
        assert_eq!(q["error"], "access_denied");
        assert_eq!(q["state"], "st4te");
        assert_eq!(q["iss"], kit.auth.issuer());
        assert!(!q.contains_key("code"));
        kit.auth.set_approve(true);
        assert!(query(&follow(&url).await.unwrap()).contains_key("code"));
        let a = kit.auth.stats();
        assert_eq!((a.authorizations, a.authorizations_refused), (2, 1));
    })
    .await;
}

#[tokio::test]
async fn resource_is_checked_rejected_and_bound_as_the_audience() {
    run(async {
        let kit = default_kit().await;
        let client_id = register_public(&kit.auth).await;
        let challenge = pkce_challenge(&pkce_verifier());
        let foreign = authorization_url(
            &kit.auth,
            &client_id,
            &challenge,
            None,
            Some("http://127.0.0.1:1/mcp"),
        );
        assert_eq!(
            query(&follow(&foreign).await.unwrap())["error"],
            "invalid_target"
        );
        // A token bound to another resource is refused by the protected server.
        kit.auth.add_resource("http://127.0.0.1:1/mcp");
        let other = kit
            .auth
            .issue_token("direct", &["mcp"], Some("http://127.0.0.1:1/mcp"));
        let r = mcp(
            &kit.protected.url(),
            Some(&other.access_token),
            None,
            &initialize(),
        )
        .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert!(www_authenticate(&r).contains("another resource"));
        // The token request may not name another resource than the authorization request.
        let verifier = pkce_verifier();
        let code = code_for(&kit, &client_id, &verifier, None).await;
        let r = post_form(
            &kit.auth.token_endpoint(),
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("code_verifier", &verifier),
                ("client_id", &client_id),
                ("resource", "http://127.0.0.1:1/mcp"),
            ],
            &[],
        )
        .await;
        assert_eq!(r.json()["error"], "invalid_target");

        // Reject: any resource is invalid_target; without one, the flow works and the token
        // has no audience (accepted unless the protected server requires one).
        let mut config = AuthServerConfig::default();
        config.resource_policy(ResourcePolicy::Reject);
        let mut pc = ProtectedConfig::default();
        pc.require_audience(true);
        let kit = start_kit(config, pc).await;
        let client_id = register_public(&kit.auth).await;
        let verifier = pkce_verifier();
        let with = authorization_url(
            &kit.auth,
            &client_id,
            &pkce_challenge(&verifier),
            None,
            Some(&kit.protected.url()),
        );
        assert_eq!(
            query(&follow(&with).await.unwrap())["error"],
            "invalid_target"
        );
        let without = authorization_url(
            &kit.auth,
            &client_id,
            &pkce_challenge(&verifier),
            None,
            None,
        );
        let code = query(&follow(&without).await.unwrap())["code"].clone();
        let r = post_form(
            &kit.auth.token_endpoint(),
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("code_verifier", &verifier),
                ("client_id", &client_id),
            ],
            &[],
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        let token = r.json()["access_token"].as_str().unwrap().to_owned();
        assert_eq!(kit.auth.introspect(&token).unwrap().resource, None);
        let r = mcp(&kit.protected.url(), Some(&token), None, &initialize()).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    })
    .await;
}

#[tokio::test]
async fn confidential_clients_authenticate_by_their_method_and_machines_get_client_credentials() {
    run(async {
        let mut config = AuthServerConfig::default();
        config
            .client(RegisteredClient::confidential(
                "machine",
                "s3cret",
                TokenAuthMethod::ClientSecretBasic,
                vec![],
            ))
            .client(RegisteredClient::confidential(
                "poster",
                "p0st",
                TokenAuthMethod::ClientSecretPost,
                vec![],
            ));
        let kit = kit_with(config).await;
        let resource = kit.protected.url();
        let cc = [
            ("grant_type", "client_credentials"),
            ("scope", "mcp"),
            ("resource", resource.as_str()),
        ];
        // machine:s3cret
        let r = post_form(
            &kit.auth.token_endpoint(),
            &cc,
            &[("authorization", "Basic bWFjaGluZTpzM2NyZXQ=")],
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        let t = r.json();
        assert!(t.get("refresh_token").is_none());
        let ok = mcp(&resource, Some(s(&t["access_token"])), None, &initialize()).await;
        assert_eq!(ok.status, StatusCode::OK);
        // machine:wrong
        let r = post_form(
            &kit.auth.token_endpoint(),
            &cc,
            &[("authorization", "Basic bWFjaGluZTp3cm9uZw==")],
        )
        .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert_eq!(r.json()["error"], "invalid_client");
        assert!(r.header("www-authenticate").starts_with("Basic"));
        // The secret in the form, for a client registered for Basic: refused.
        let mut post = cc.to_vec();
        post.extend([("client_id", "machine"), ("client_secret", "s3cret")]);
        assert_eq!(
            post_form(&kit.auth.token_endpoint(), &post, &[])
                .await
                .json()["error"],
            "invalid_client"
        );
        // Basic for a client registered for client_secret_post, and no secret at all for a
        // confidential client: refused.
        let r = post_form(
            &kit.auth.token_endpoint(),
            &cc,
            &[("authorization", "Basic cG9zdGVyOnAwc3Q=")],
        )
        .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        let mut bare = cc.to_vec();
        bare.push(("client_id", "machine"));
        let r = post_form(&kit.auth.token_endpoint(), &bare, &[]).await;
        assert_eq!(r.json()["error"], "invalid_client");
        // client_secret_post.
        let mut post = cc.to_vec();
        post.extend([("client_id", "poster"), ("client_secret", "p0st")]);
        assert_eq!(
            post_form(&kit.auth.token_endpoint(), &post, &[])
                .await
                .status,
            StatusCode::OK
        );
        let mut post = cc.to_vec();
        post.extend([("client_id", "poster"), ("client_secret", "nope")]);
        assert_eq!(
            post_form(&kit.auth.token_endpoint(), &post, &[])
                .await
                .status,
            StatusCode::UNAUTHORIZED
        );
        // A public client cannot use client credentials.
        let public = register_public(&kit.auth).await;
        let mut post = cc.to_vec();
        post.push(("client_id", &public));
        assert_eq!(
            post_form(&kit.auth.token_endpoint(), &post, &[])
                .await
                .json()["error"],
            "unauthorized_client"
        );
        assert_eq!(kit.auth.stats().client_credentials_grants, 8);

        // Dynamic registration: a secret for client_secret_basic (the default) and _post.
        for (asked, method) in [
            (None, "client_secret_basic"),
            (Some("client_secret_post"), "client_secret_post"),
        ] {
            let mut body = json!({"redirect_uris": [REDIRECT], "client_name": "c"});
            if let Some(a) = asked {
                body["token_endpoint_auth_method"] = json!(a);
            }
            let r = http(
                Method::POST,
                &kit.auth.registration_endpoint(),
                &[("content-type", "application/json")],
                &body.to_string(),
            )
            .await;
            assert_eq!(r.status, StatusCode::CREATED);
            let reg = r.json();
            assert_eq!(reg["token_endpoint_auth_method"], method);
            assert!(reg["client_secret"].is_string(), "{reg}");
            assert_eq!(reg["client_name"], "c");
            let client = kit.auth.client(s(&reg["client_id"])).unwrap();
            assert_eq!(
                client.client_secret.as_deref(),
                reg["client_secret"].as_str()
            );
        }
        assert_eq!(kit.auth.registration_requests().len(), 3);
    })
    .await;
}

#[tokio::test]
async fn oidc_discovery_an_issuer_path_and_the_metadata_at_the_root() {
    run(async {
        let mut config = AuthServerConfig::default();
        config
            .issuer_path("/tenant")
            .oidc_discovery(true)
            .oauth_metadata(false)
            .offline_access(true);
        let mut pc = ProtectedConfig::default();
        pc.metadata_location(MetadataLocation::Root)
            .challenge_metadata(false);
        let kit = start_kit(config, pc).await;
        let issuer = kit.auth.issuer().to_owned();
        assert!(issuer.ends_with("/tenant"), "{issuer}");
        let origin = issuer.trim_end_matches("/tenant");
        assert_eq!(
            get(&kit.auth.metadata_url()).await.status,
            StatusCode::NOT_FOUND
        );
        for url in [
            format!("{origin}/.well-known/openid-configuration/tenant"),
            format!("{issuer}/.well-known/openid-configuration"),
        ] {
            let m = get(&url).await.json();
            assert_eq!(m["issuer"], issuer);
            assert_eq!(m["token_endpoint"], format!("{issuer}/token"));
            assert!(
                m["scopes_supported"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("offline_access"))
            );
        }
        // The protected-resource metadata at the root only; the challenge does not name it.
        assert!(
            kit.protected
                .metadata_url()
                .ends_with("/.well-known/oauth-protected-resource")
        );
        let origin = kit.protected.url().trim_end_matches("/mcp").to_owned();
        assert_eq!(
            get(&format!(
                "{origin}/.well-known/oauth-protected-resource/mcp"
            ))
            .await
            .status,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            get(&kit.protected.metadata_url()).await.status,
            StatusCode::OK
        );
        let r = mcp(&kit.protected.url(), None, None, &initialize()).await;
        assert!(
            !www_authenticate(&r).contains("resource_metadata"),
            "{}",
            www_authenticate(&r)
        );
        // offline_access: refresh tokens only when asked for.
        let (_, t) = sign_in(&kit, None).await;
        assert!(t.get("refresh_token").is_none(), "{t}");
        let (_, t) = sign_in(&kit, Some("mcp offline_access")).await;
        assert!(t["refresh_token"].is_string(), "{t}");
    })
    .await;
}

/// `ssegate-testkit serve --auth`: the hello line names both servers, the protected endpoint
/// challenges, the commands issue tokens, drive the browser, flip the switches and count.
#[tokio::test]
async fn serve_with_auth_starts_both_servers_and_answers_the_auth_commands() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};

    let mut child = Command::new(env!("CARGO_BIN_EXE_ssegate-testkit"))
        .args([
            "serve",
            "--auth-token-ttl-ms",
            "60000",
            "--auth-client",
            "cli",
            "--auth-tool-scope",
            "big_result=admin",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the binary starts");
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let read = || -> Value {
        let line = rx.recv_timeout(LIMIT).expect("a line in time");
        serde_json::from_str(&line).unwrap()
    };
    let mut ask = |command: &str| -> Value {
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        read()
    };
    let hello = read();
    let url = s(&hello["url"]).to_owned();
    assert_eq!(hello["auth"]["protected"], url.as_str());
    assert_ne!(hello["server"], url.as_str());
    let issuer = s(&hello["auth"]["issuer"]).to_owned();
    run(async {
        let r = mcp(&url, None, None, &initialize()).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        let prm = get(s(&hello["auth"]["resource_metadata"])).await.json();
        assert_eq!(prm["authorization_servers"], json!([issuer]));
        let m = get(s(&hello["auth"]["metadata"])).await.json();
        assert_eq!(m["issuer"], issuer.as_str());
    })
    .await;

    let token = ask("auth-token mcp");
    assert_eq!(token["scope"], "mcp");
    let access = s(&token["access_token"]).to_owned();
    let init = mcp(&url, Some(&access), None, &initialize()).await;
    assert_eq!(init.status, StatusCode::OK);
    let session = init.header("mcp-session-id").to_owned();
    // big_result needs admin here.
    let forbidden = mcp(
        &url,
        Some(&access),
        Some(&session),
        &call(2, "big_result", json!({"size": 1000})),
    )
    .await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN);

    // The pre-registered public client, through the browser command.
    let challenge = pkce_challenge(&pkce_verifier());
    let mut u = Url::parse(&format!("{issuer}/authorize")).unwrap();
    u.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", "cli")
        .append_pair("redirect_uri", "http://127.0.0.1:5000/callback")
        .append_pair("state", "x")
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256");
    let redirect = ask(&format!("authorize {u}"));
    let q = query(s(&redirect["redirect"]));
    assert_eq!(q["iss"], issuer);
    assert!(q.contains_key("code"));
    assert_eq!(ask("auth-approve off")["approve"], false);
    let denied = ask(&format!("authorize {u}"));
    assert_eq!(query(s(&denied["redirect"]))["error"], "access_denied");
    assert_eq!(ask("auth-expire")["expired"], 1);
    let expired = mcp(&url, Some(&access), Some(&session), &initialize()).await;
    assert_eq!(expired.status, StatusCode::UNAUTHORIZED);
    assert_eq!(ask("auth-refresh off")["refresh"], false);
    assert_eq!(ask("auth-ttl 2000")["ttl_ms"], 2000);

    let stats = ask("auth-stats");
    assert_eq!(stats["auth"]["authorizations"], 2);
    assert_eq!(stats["auth"]["authorizations_refused"], 1);
    assert_eq!(stats["protected"]["missing_token"], 1);
    assert_eq!(stats["protected"]["insufficient_scope"], 1);
    assert_eq!(stats["protected"]["invalid_token"], 1);
    let requests = ask("auth-requests");
    assert_eq!(requests["authorization"][0]["client_id"], "cli");
    assert!(ask("auth-bogus")["error"].is_string());
    assert!(ask("authorize http://example.com/")["error"].is_string());
    assert_eq!(ask("quit")["stopped"], true);
    assert!(child.wait().unwrap().success());
}
