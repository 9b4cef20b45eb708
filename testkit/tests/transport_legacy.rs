//! The guarded client on the 2024-11-05 HTTP+SSE transport, against the kit's HTTP+SSE server
//! (`ssegate_testkit::legacy`) and its Streamable HTTP server: the transport strategies, a big
//! result intact, server requests answered, and each fault ending in a typed error in bounded time.

use std::future::Future;
use std::time::Duration;

use serde_json::{Value, json};
use ssegate::client::{Client, ClientConfig, ClientError, ProtocolError, Retry, TransportStrategy};
use ssegate::contract::Code;
use ssegate::message::{Message, RpcId};
use ssegate::resume::RefusalKind;
use ssegate::sse;
use ssegate_testkit::legacy::{LegacyConfig, RunningLegacyServer};
use ssegate_testkit::server::{DEFAULT_SEED, ServerConfig, expected_result};

/// No test may take longer: a hang is a failure.
const LIMIT: Duration = Duration::from_secs(30);

fn config() -> ClientConfig {
    let mut config = ClientConfig::default();
    config.call_timeout(Some(Duration::from_secs(10)));
    config
}

fn with(transport: TransportStrategy) -> ClientConfig {
    let mut config = config();
    config.transport(transport);
    config
}

async fn legacy() -> RunningLegacyServer {
    start(&LegacyConfig::default()).await
}

async fn start(config: &LegacyConfig) -> RunningLegacyServer {
    config
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("bind")
}

async fn bounded<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("no answer within {LIMIT:?}: the client hangs"))
}

fn text_of(message: &Message) -> String {
    let v: Value = message.deserialize().unwrap();
    v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn id_json(id: &RpcId) -> Value {
    match id {
        RpcId::Number(n) => json!(n),
        RpcId::String(s) => json!(s.as_ref()),
        _ => Value::Null,
    }
}

#[tokio::test]
async fn http_first_falls_back_to_http_sse_and_a_big_result_arrives_intact() {
    let server = legacy().await;
    bounded(async {
        let client = Client::connect(&server.url(), config()).await.unwrap();
        assert!(client.is_legacy_sse());
        assert_eq!(client.protocol_version().as_deref(), Some("2025-11-25"));
        assert_eq!(client.session_id(), None);
        let tools = client.list_tools().await.unwrap();
        assert!(tools.iter().any(|t| t["name"] == "big_result"));
        let size = 4 << 20;
        let response = client
            .call_tool("big_result", json!({"size": size}), Retry::Never)
            .await
            .unwrap();
        let expected = expected_result(&id_json(&response.request_id), size, DEFAULT_SEED);
        assert_eq!(
            response.message.data().contiguous().as_ref(),
            expected.as_ref()
        );
        // Several calls at once, each with its progress notifications.
        let calls = (0..4).map(|_| client.call_tool("progress", json!({"count": 5}), Retry::Never));
        for r in futures::future::join_all(calls).await {
            let r = r.unwrap();
            assert_eq!(text_of(&r.message), "done: 5 steps");
            assert_eq!(r.outcome.attempts, 1);
        }
        client.close().await.unwrap();
    })
    .await;
    assert_eq!(server.sessions_opened(), 1);
    assert_eq!(server.calls("big_result"), 1);
}

#[tokio::test]
async fn a_server_request_on_the_stream_is_answered_at_the_endpoint() {
    let server = legacy().await;
    bounded(async {
        let client = Client::connect(&server.url(), with(TransportStrategy::SseOnly))
            .await
            .unwrap();
        let r = client
            .call_tool("ping_client", json!({}), Retry::Never)
            .await
            .unwrap();
        assert_eq!(text_of(&r.message), "pinged");
    })
    .await;
}

#[tokio::test]
async fn each_strategy_tries_what_it_says() {
    let legacy = legacy().await;
    let streamable = ServerConfig::default()
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    bounded(async {
        // http-only never opens an event stream: the POST's 404 is the error.
        let err = Client::connect(&legacy.url(), with(TransportStrategy::HttpOnly))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ClientError::Status { status: 404, .. }),
            "{err}"
        );
        assert_eq!(legacy.sessions_opened(), 0);
        // sse-first on an HTTP+SSE server: straight there.
        let client = Client::connect(&legacy.url(), with(TransportStrategy::SseFirst))
            .await
            .unwrap();
        assert!(client.is_legacy_sse());
        assert_eq!(legacy.sessions_opened(), 1);
        // sse-first on a Streamable HTTP server (its `GET` without a session is `400`): Streamable
        // HTTP.
        let client = Client::connect(&streamable.url(), with(TransportStrategy::SseFirst))
            .await
            .unwrap();
        assert!(!client.is_legacy_sse());
        assert!(client.session_id().is_some());
        client.call("ping", json!({}), Retry::Never).await.unwrap();
        // http-first (the default) on Streamable HTTP: no event stream is asked for.
        let client = Client::connect(&streamable.url(), config()).await.unwrap();
        assert!(!client.is_legacy_sse());
        // sse-only on a Streamable HTTP server: the GET's answer is the error.
        let err = Client::connect(&streamable.url(), with(TransportStrategy::SseOnly))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ClientError::Status { status: 400, .. }),
            "{err}"
        );
        // A 2026-07-28-only client has nothing to speak on HTTP+SSE.
        let mut pinned = with(TransportStrategy::SseOnly);
        pinned.protocol_version("2026-07-28");
        let err = Client::connect(&legacy.url(), pinned).await.unwrap_err();
        assert!(matches!(err, ClientError::Setup(_)), "{err}");
    })
    .await;
    assert_eq!(
        TransportStrategy::parse("sse-first"),
        Some(TransportStrategy::SseFirst)
    );
    assert_eq!(TransportStrategy::default().as_str(), "http-first");
}

#[tokio::test]
async fn a_stream_cut_mid_event_leaves_the_call_outcome_unknown_and_never_resends_it() {
    let server = legacy().await;
    bounded(async {
        let client = Client::connect(&server.url(), config()).await.unwrap();
        for retry in [Retry::Never, Retry::IfSafe] {
            let err = client
                .call_tool("cut_stream", json!({}), retry)
                .await
                .unwrap_err();
            assert!(
                matches!(err, ClientError::OutcomeUnknown { .. }),
                "{retry:?}: {err}"
            );
            assert_eq!(err.code("tools/call"), Code::OutcomeUnknown);
            assert!(
                matches!(
                    err.refusal().map(|r| &r.kind),
                    Some(RefusalKind::Unresumable { .. })
                ),
                "{err}"
            );
        }
        assert_eq!(server.calls("cut_stream"), 2, "never sent again");
        // The session is over; the next call opens a new one.
        let r = client
            .call_tool("progress", json!({"count": 1}), Retry::Never)
            .await
            .unwrap();
        assert_eq!(text_of(&r.message), "done: 1 steps");
        // A call the caller says may run twice is sent again on a new session.
        let err = client
            .call_tool("cut_stream", json!({}), Retry::Always)
            .await
            .unwrap_err();
        assert!(
            matches!(err, ClientError::Refused { attempts: 3, .. }),
            "{err}"
        );
    })
    .await;
    assert_eq!(server.calls("cut_stream"), 5);
    assert!(
        server.sessions_opened() >= 5,
        "{}",
        server.sessions_opened()
    );
}

#[tokio::test]
async fn an_event_over_the_decoder_limit_is_refused_and_the_session_goes_on() {
    let server = legacy().await;
    bounded(async {
        let mut config = config();
        let mut decoder = sse::DecoderConfig::default();
        decoder.max_event(64 << 10);
        config.decoder(decoder);
        let client = Client::connect(&server.url(), config).await.unwrap();
        let err = client
            .call_tool("big_result", json!({"size": 1 << 20}), Retry::Never)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err.refusal().map(|r| &r.kind),
                Some(RefusalKind::DecodeLimit { .. })
            ),
            "{err}"
        );
        let r = client
            .call_tool("big_result", json!({"size": 1000}), Retry::Never)
            .await
            .unwrap();
        assert_eq!(
            r.message.len(),
            expected_result(&id_json(&r.request_id), 1000, DEFAULT_SEED).len()
        );
    })
    .await;
    assert_eq!(server.sessions_opened(), 1);
}

#[tokio::test]
async fn a_second_different_response_for_one_id_ends_the_session_typed() {
    let server = legacy().await;
    bounded(async {
        let client = Client::connect(&server.url(), config()).await.unwrap();
        // Outstanding while the second response comes.
        let slow = client.call_tool("sleep", json!({"ms": 3000}), Retry::Never);
        let twice = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            client
                .call_tool("duplicate_response", json!({}), Retry::Never)
                .await
        };
        let (slow, twice) = tokio::join!(slow, twice);
        assert_eq!(text_of(&twice.unwrap().message), "first");
        let err = slow.unwrap_err();
        assert!(
            matches!(
                err.refusal().map(|r| &r.kind),
                Some(RefusalKind::DuplicateResponse { .. })
            ),
            "{err}"
        );
        assert!(matches!(err, ClientError::OutcomeUnknown { .. }), "{err}");
        // A new session for the next call.
        client.call("ping", json!({}), Retry::Never).await.unwrap();
    })
    .await;
    assert_eq!(server.sessions_opened(), 2);
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused_and_nothing_is_sent_there() {
    let mut foreign = LegacyConfig::default();
    foreign.endpoint("http://127.0.0.2:9/messages?sessionId={session}");
    let server = start(&foreign).await;
    bounded(async {
        for transport in [TransportStrategy::HttpFirst, TransportStrategy::SseOnly] {
            let err = Client::connect(&server.url(), with(transport))
                .await
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    ClientError::Protocol(ProtocolError::ForeignEndpoint(_))
                ),
                "{transport}: {err}"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn an_endpoint_event_over_its_limit_is_a_typed_error() {
    let mut long = LegacyConfig::default();
    long.endpoint(format!(
        "/messages?pad={}&sessionId={{session}}",
        "x".repeat(4096)
    ));
    let server = start(&long).await;
    bounded(async {
        let mut config = with(TransportStrategy::SseOnly);
        config.max_endpoint_event(1024);
        let err = Client::connect(&server.url(), config).await.unwrap_err();
        assert!(
            matches!(err, ClientError::Protocol(ProtocolError::NoEndpoint(_))),
            "{err}"
        );
        // Within the default limit, it works.
        let client = Client::connect(&server.url(), with(TransportStrategy::SseOnly))
            .await
            .unwrap();
        client.call("ping", json!({}), Retry::Never).await.unwrap();
    })
    .await;
}
