//! The sign-in rules against a loopback MCP server that is its own authorization server (a bare
//! HTTP/1.1 responder: protected resource metadata, RFC 8414 metadata, dynamic registration, a
//! token endpoint with refresh; the user's approval is made by the test's [`SignIn`], which
//! answers the authorization request itself). The conformance suite (`conformance/run`) checks
//! the rest against the official scenarios.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use reqwest::Url;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::client::{Client, ClientConfig, ClientError};

#[derive(Default)]
struct Server {
    addr: String,
    /// Access tokens the MCP endpoint accepts.
    access: Mutex<HashSet<String>>,
    /// Refresh tokens the token endpoint accepts.
    refresh: Mutex<HashSet<String>>,
    issued: AtomicU32,
    registrations: AtomicU32,
    code_grants: AtomicU32,
    refresh_grants: AtomicU32,
    /// Every token request: its form and `Authorization` header.
    token_requests: Mutex<Vec<(String, Option<String>)>>,
    /// Accept no token at all.
    reject_all: bool,
}

impl Server {
    async fn start(reject_all: bool) -> Arc<Server> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = Arc::new(Server {
            addr: listener.local_addr().unwrap().to_string(),
            reject_all,
            ..Server::default()
        });
        let me = server.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let me = me.clone();
                tokio::spawn(async move { me.serve(stream).await });
            }
        });
        server
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    fn revoke_access(&self) {
        self.access.lock().unwrap().clear();
    }

    fn revoke_refresh(&self) {
        self.refresh.lock().unwrap().clear();
    }

    /// One request per connection (`Connection: close`).
    async fn serve(&self, mut stream: TcpStream) {
        let mut buf = Vec::new();
        let head_end = loop {
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let header = |name: &str| {
            head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
            })
        };
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let body = String::from_utf8_lossy(&buf[head_end..]).into_owned();
        let mut request_line = head.split_whitespace();
        let method = request_line.next().unwrap_or("").to_owned();
        let path = request_line.next().unwrap_or("").to_owned();
        let (status, extra, answer) = self.route(&method, &path, header("authorization"), &body);
        let text = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n{extra}\r\n{answer}",
            answer.len()
        );
        let _ = stream.write_all(text.as_bytes()).await;
        let _ = stream.shutdown().await;
    }

    fn route(
        &self,
        method: &str,
        path: &str,
        authorization: Option<String>,
        body: &str,
    ) -> (u16, String, String) {
        let base = format!("http://{}", self.addr);
        match (method, path) {
            ("GET", "/.well-known/oauth-protected-resource/mcp") => (
                200,
                String::new(),
                json!({"resource": self.url(), "authorization_servers": [base]}).to_string(),
            ),
            ("GET", "/.well-known/oauth-authorization-server") => (
                200,
                String::new(),
                json!({
                    "issuer": base,
                    "authorization_endpoint": format!("{base}/authorize"),
                    "token_endpoint": format!("{base}/token"),
                    "registration_endpoint": format!("{base}/register"),
                    "response_types_supported": ["code"],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                    "authorization_response_iss_parameter_supported": true,
                })
                .to_string(),
            ),
            ("POST", "/register") => {
                self.registrations.fetch_add(1, Ordering::SeqCst);
                (
                    201,
                    String::new(),
                    json!({"client_id": "c1", "client_secret": "s1", "redirect_uris": []})
                        .to_string(),
                )
            }
            ("POST", "/token") => self.token(authorization, body),
            ("POST", "/mcp") => self.mcp(authorization, body),
            _ => (404, String::new(), "{}".to_owned()),
        }
    }

    fn token(&self, authorization: Option<String>, form: &str) -> (u16, String, String) {
        self.token_requests
            .lock()
            .unwrap()
            .push((form.to_owned(), authorization));
        let mut url = Url::parse("http://form.invalid/").unwrap();
        url.set_query(Some(form));
        let param = |name: &str| {
            url.query_pairs()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
        };
        let n = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        let access = format!("a{n}");
        match param("grant_type").as_deref() {
            Some("authorization_code") => {
                self.code_grants.fetch_add(1, Ordering::SeqCst);
                let refresh = format!("r{n}");
                self.access.lock().unwrap().insert(access.clone());
                self.refresh.lock().unwrap().insert(refresh.clone());
                let answer = json!({"access_token": access, "token_type": "Bearer",
                    "expires_in": 3600, "refresh_token": refresh});
                (200, String::new(), answer.to_string())
            }
            Some("refresh_token") => {
                self.refresh_grants.fetch_add(1, Ordering::SeqCst);
                let known = param("refresh_token")
                    .is_some_and(|r| self.refresh.lock().unwrap().contains(&r));
                if !known {
                    return (
                        400,
                        String::new(),
                        json!({"error": "invalid_grant"}).to_string(),
                    );
                }
                self.access.lock().unwrap().insert(access.clone());
                // No new refresh token: the client keeps the one it has.
                let answer = json!({"access_token": access, "token_type": "Bearer",
                    "expires_in": 3600});
                (200, String::new(), answer.to_string())
            }
            _ => (
                400,
                String::new(),
                json!({"error": "unsupported_grant_type"}).to_string(),
            ),
        }
    }

    fn mcp(&self, authorization: Option<String>, body: &str) -> (u16, String, String) {
        let token = authorization.and_then(|a| a.strip_prefix("Bearer ").map(str::to_owned));
        let accepted =
            !self.reject_all && token.is_some_and(|t| self.access.lock().unwrap().contains(&t));
        if !accepted {
            let challenge = format!(
                "www-authenticate: Bearer error=\"invalid_token\", \
                 resource_metadata=\"http://{}/.well-known/oauth-protected-resource/mcp\"\r\n",
                self.addr
            );
            return (401, challenge, "{}".to_owned());
        }
        let request: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let Some(id) = request.get("id") else {
            return (202, String::new(), String::new());
        };
        let result = match request["method"].as_str() {
            Some("initialize") => json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "serverInfo": {"name": "auth-test", "version": "1"}}),
            _ => json!({"tools": []}),
        };
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
        (200, String::new(), answer.to_string())
    }
}

/// The user approves: the authorization server's redirect is made up from the request (`code`,
/// its `state` unless told otherwise, the `iss` the metadata names), or an `error`.
#[derive(Debug, Default)]
struct Approve {
    calls: AtomicU32,
    wrong_state: bool,
    refuse: bool,
    urls: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl SignIn for Approve {
    async fn redirect_uri(&self) -> Result<String, SignInError> {
        Ok("http://127.0.0.1:1/callback".to_owned())
    }

    async fn authorize(&self, url: &str) -> Result<String, SignInError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.urls.lock().unwrap().push(url.to_owned());
        let url = Url::parse(url).unwrap();
        let param = |name: &str| {
            url.query_pairs()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        assert_eq!(param("code_challenge_method"), "S256");
        let mut back = Url::parse(&param("redirect_uri")).unwrap();
        if self.refuse {
            back.query_pairs_mut()
                .append_pair("error", "access_denied")
                .append_pair("error_description", "no");
        } else {
            let state = if self.wrong_state {
                "forged".to_owned()
            } else {
                param("state")
            };
            let issuer = format!("http://{}", url.host_str().unwrap());
            let issuer = format!("{issuer}:{}", url.port().unwrap());
            back.query_pairs_mut()
                .append_pair("code", "the-code")
                .append_pair("state", &state)
                .append_pair("iss", &issuer);
        }
        Ok(back.to_string())
    }
}

fn config(store: Arc<dyn CredentialStore>, sign_in: Option<Arc<Approve>>) -> ClientConfig {
    let mut auth = AuthConfig::default();
    auth.store(store);
    if let Some(s) = sign_in {
        auth.sign_in(s);
    }
    let mut config = ClientConfig::default();
    config.protocol_version("2025-11-25").auth(auth);
    config
}

fn auth_failure(e: ClientError) -> AuthFailure {
    match e {
        ClientError::Auth(f) => *f,
        other => panic!("not a sign-in failure: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn signs_in_refreshes_and_refreshes_after_a_restart_with_the_stashed_secret() {
    let server = Server::start(false).await;
    let store: Arc<dyn CredentialStore> = Arc::new(InMemoryCredentialStore::new());
    let approve = Arc::new(Approve::default());
    let client = Client::connect(&server.url(), config(store.clone(), Some(approve.clone())))
        .await
        .unwrap();
    client.list_tools().await.unwrap();
    assert_eq!(approve.calls.load(Ordering::SeqCst), 1);
    assert_eq!(server.registrations.load(Ordering::SeqCst), 1);
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!(stored.client_id, "c1");
    let stash = &stored.token_response.as_ref().unwrap().extra_fields().0;
    assert_eq!(stash[flow::REGISTRATION_FIELD]["client_secret"], "s1");
    let url = approve.urls.lock().unwrap()[0].clone();
    assert!(url.contains("resource="), "{url}");

    // The access token is revoked: one refresh (client_secret_basic), the refresh token kept.
    server.revoke_access();
    client.list_tools().await.unwrap();
    assert_eq!(server.refresh_grants.load(Ordering::SeqCst), 1);
    assert_eq!(approve.calls.load(Ordering::SeqCst), 1);
    let (form, basic) = server
        .token_requests
        .lock()
        .unwrap()
        .last()
        .cloned()
        .unwrap();
    assert!(form.contains("grant_type=refresh_token"), "{form}");
    assert!(form.contains("resource="), "{form}");
    assert!(basic.is_some_and(|b| b.starts_with("Basic ")));
    let stored = store.load().await.unwrap().unwrap();
    let tokens = stored.token_response.as_ref().unwrap();
    assert_eq!(
        oauth2::TokenResponse::refresh_token(tokens).map(|r| r.secret().as_str()),
        Some("r1")
    );

    // A restart (new settings, same store): the refresh still authenticates as c1 with s1.
    server.revoke_access();
    let restarted = Client::connect(&server.url(), config(store.clone(), Some(approve.clone())))
        .await
        .unwrap();
    restarted.list_tools().await.unwrap();
    assert_eq!(server.refresh_grants.load(Ordering::SeqCst), 2);
    assert_eq!(server.registrations.load(Ordering::SeqCst), 1);
    assert_eq!(approve.calls.load(Ordering::SeqCst), 1);
    let (_, basic) = server
        .token_requests
        .lock()
        .unwrap()
        .last()
        .cloned()
        .unwrap();
    assert!(basic.is_some_and(|b| b.starts_with("Basic ")));

    // The refresh token is rejected too: exactly one new sign-in.
    server.revoke_access();
    server.revoke_refresh();
    restarted.list_tools().await.unwrap();
    assert_eq!(server.refresh_grants.load(Ordering::SeqCst), 3);
    assert_eq!(approve.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_requests_wait_for_one_sign_in() {
    let server = Server::start(false).await;
    let approve = Arc::new(Approve::default());
    let store: Arc<dyn CredentialStore> = Arc::new(InMemoryCredentialStore::new());
    let client = Client::connect(&server.url(), config(store, Some(approve.clone())))
        .await
        .unwrap();
    server.revoke_access();
    server.revoke_refresh();
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.list_tools().await.map(drop) })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    assert_eq!(approve.calls.load(Ordering::SeqCst), 2);
    assert_eq!(server.code_grants.load(Ordering::SeqCst), 2);
    // One refresh was tried (and refused); the other requests took the new token.
    assert_eq!(server.refresh_grants.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_401_right_after_a_sign_in_is_rejected_and_never_loops() {
    let server = Server::start(true).await;
    let approve = Arc::new(Approve::default());
    let store: Arc<dyn CredentialStore> = Arc::new(InMemoryCredentialStore::new());
    let err = Client::connect(&server.url(), config(store, Some(approve.clone())))
        .await
        .unwrap_err();
    assert!(
        matches!(auth_failure(err), AuthFailure::Rejected { .. }),
        "rejected"
    );
    assert_eq!(approve.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_sign_in_the_failure_says_so() {
    let server = Server::start(false).await;
    let store: Arc<dyn CredentialStore> = Arc::new(InMemoryCredentialStore::new());
    let err = Client::connect(&server.url(), config(store, None))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), crate::contract::Kind::Auth);
    match auth_failure(err) {
        AuthFailure::SignInRequired { resource } => assert_eq!(resource, server.url()),
        other => panic!("{other}"),
    }
    assert_eq!(server.registrations.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forged_state_or_a_refusal_gets_no_token() {
    let server = Server::start(false).await;
    let store: Arc<dyn CredentialStore> = Arc::new(InMemoryCredentialStore::new());
    let forged = Arc::new(Approve {
        wrong_state: true,
        ..Approve::default()
    });
    let err = Client::connect(&server.url(), config(store.clone(), Some(forged)))
        .await
        .unwrap_err();
    assert!(
        matches!(
            auth_failure(err),
            AuthFailure::OAuth(OAuthError::AuthorizationFailed(_))
        ),
        "forged state"
    );
    assert_eq!(server.code_grants.load(Ordering::SeqCst), 0);

    let refuse = Arc::new(Approve {
        refuse: true,
        ..Approve::default()
    });
    let err = Client::connect(&server.url(), config(store, Some(refuse)))
        .await
        .unwrap_err();
    match auth_failure(err) {
        AuthFailure::SignIn(SignInError::Refused(why)) => assert_eq!(why, "access_denied: no"),
        other => panic!("{other}"),
    }
    assert_eq!(server.code_grants.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn send_resource_off_leaves_resource_out() {
    let server = Server::start(false).await;
    let approve = Arc::new(Approve::default());
    let mut auth = AuthConfig::default();
    auth.sign_in(approve.clone()).send_resource(false);
    let mut config = ClientConfig::default();
    config.protocol_version("2025-11-25").auth(auth);
    let client = Client::connect(&server.url(), config).await.unwrap();
    client.list_tools().await.unwrap();
    let url = approve.urls.lock().unwrap()[0].clone();
    assert!(!url.contains("resource="), "{url}");
    let requests = server.token_requests.lock().unwrap().clone();
    assert!(!requests.is_empty());
    for (form, _) in requests {
        assert!(!form.contains("resource="), "{form}");
    }
}
