//! The client over HTTPS (a generated self-signed certificate), with a bearer token, and through a
//! `CONNECT` proxy; a certificate it does not trust is refused with a clear error.

use std::time::Duration;

use serde_json::json;
use ssegate::client::{Client, ClientConfig, ClientError, Retry};
use ssegate_testkit::server::{RunningServer, ServerConfig};
use ssegate_testkit::tls::{ConnectProxy, TlsFront};

const LIMIT: Duration = Duration::from_secs(60);
const TOKEN: &str = "s3cret-token";

async fn server() -> RunningServer {
    let mut sc = ServerConfig::default();
    sc.result_size(100_000).retry_ms(5);
    sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
}

fn trusting(front: &TlsFront) -> ClientConfig {
    let mut cc = ClientConfig::default();
    cc.root_certificate_pem(front.cert_pem().as_bytes())
        .bearer_token(TOKEN)
        .unwrap();
    cc
}

#[tokio::test]
async fn https_with_a_custom_root_and_a_bearer_token() {
    tokio::time::timeout(LIMIT, async {
        let server = server().await;
        let front = TlsFront::start(server.addr(), Some(format!("Bearer {TOKEN}")))
            .await
            .unwrap();
        let client = Client::connect(&front.url(), trusting(&front))
            .await
            .unwrap();
        let big = client
            .call_tool(
                "big_result",
                json!({"size": 100_000, "seed": 1}),
                Retry::Always,
            )
            .await
            .unwrap();
        assert!(big.message.len() > 100_000);
        assert!(front.handshakes() >= 1);
        client.close().await.unwrap();
        server.shutdown().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn an_untrusted_certificate_is_refused_with_a_clear_error() {
    tokio::time::timeout(LIMIT, async {
        let server = server().await;
        let front = TlsFront::start(server.addr(), None).await.unwrap();
        let mut cc = ClientConfig::default();
        cc.bearer_token(TOKEN).unwrap();
        let err = Client::connect(&front.url(), cc).await.unwrap_err();
        assert!(matches!(err, ClientError::Http { .. }), "{err}");
        let text = err.to_string().to_lowercase();
        assert!(text.contains("certificate"), "{text}");

        // Another server's certificate does not vouch for this one either.
        let other = TlsFront::start(server.addr(), None).await.unwrap();
        let mut cc = ClientConfig::default();
        cc.root_certificate_pem(other.cert_pem().as_bytes())
            .only_custom_roots(true);
        let err = Client::connect(&front.url(), cc).await.unwrap_err();
        assert!(
            err.to_string().to_lowercase().contains("certificate"),
            "{err}"
        );
        server.shutdown().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_missing_or_wrong_bearer_token_is_a_401() {
    tokio::time::timeout(LIMIT, async {
        let server = server().await;
        let front = TlsFront::start(server.addr(), Some(format!("Bearer {TOKEN}")))
            .await
            .unwrap();
        let mut cc = trusting(&front);
        cc.bearer_token("wrong").unwrap();
        let err = Client::connect(&front.url(), cc).await.unwrap_err();
        assert!(
            matches!(err, ClientError::Status { status: 401, .. }),
            "{err}"
        );
        server.shutdown().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn through_a_connect_proxy() {
    tokio::time::timeout(LIMIT, async {
        let server = server().await;
        let front = TlsFront::start(server.addr(), Some(format!("Bearer {TOKEN}")))
            .await
            .unwrap();
        let proxy = ConnectProxy::start().await.unwrap();
        let mut cc = trusting(&front);
        cc.proxy(proxy.url());
        let client = Client::connect(&front.url(), cc).await.unwrap();
        let list = client
            .call("tools/list", json!({}), Retry::Always)
            .await
            .unwrap();
        assert!(!list.message.is_empty());
        assert!(proxy.tunnels() >= 1, "the proxy carried the traffic");
        client.close().await.unwrap();
        server.shutdown().await;
    })
    .await
    .unwrap();
}
