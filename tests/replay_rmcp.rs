//! rmcp 3.x's `EventStore` on the Redis store: an event stored through one instance is replayed by
//! another with its original id and content; misses and a lost Redis are errors (which rmcp turns
//! into an empty `200`), never a partial replay. Uses a real `redis-server` (see
//! `ssegate_oracles::redis_server`).

use std::time::Duration;

use futures::StreamExt;
use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::store::EventStore;
use ssegate::replay::{RedisConfig, RedisStore};

use ssegate_oracles::redis_server::Server;

fn message(n: u32) -> ServerJsonRpcMessage {
    serde_json::from_value(serde_json::json!({
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": n}
    }))
    .expect("a valid notification")
}

fn event(n: u32) -> ServerSseMessage {
    let mut event = ServerSseMessage::default();
    event.message = Some(message(n).into());
    event
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmcp_stream_resumes_from_another_instance() {
    let Some(mut server) = Server::start() else {
        return;
    };
    let mut config = RedisConfig::default();
    config
        .max_stream_events(3)
        .response_timeout(Duration::from_millis(500))
        .connection_timeout(Duration::from_millis(200));
    let a = RedisStore::connect(&server.url(), config.clone())
        .await
        .unwrap();
    let b = RedisStore::connect(&server.url(), config).await.unwrap();

    let mut priming = ServerSseMessage::default();
    priming.retry = Some(Duration::from_millis(500));
    let id0 = a.store_event("session-1:req-7", &priming).await.unwrap();
    let mut ids = vec![id0.clone()];
    for n in 1..=2 {
        ids.push(a.store_event("session-1:req-7", &event(n)).await.unwrap());
    }
    // Another rmcp stream gets another Redis stream and its own ids.
    let other = a.store_event("session-1:common", &priming).await.unwrap();
    assert_ne!(other.split('-').next(), id0.split('-').next());
    assert_eq!(other.rsplit('-').next(), Some("0"));

    // Instance b replays after the priming event: both messages, original ids, same content.
    let replayed: Vec<ServerSseMessage> =
        b.replay_events_after(&id0).await.unwrap().collect().await;
    assert_eq!(replayed.len(), 2);
    for (n, (got, id)) in replayed.iter().zip(&ids[1..]).enumerate() {
        assert_eq!(got.event_id.as_deref(), Some(id.as_str()));
        let want = serde_json::to_value(message(n as u32 + 1)).unwrap();
        let got = serde_json::to_value(&**got.message.as_ref().unwrap()).unwrap();
        assert_eq!(got, want);
    }
    // The priming event replays with its retry and no message; nothing follows `other` yet.
    let after_other: Vec<_> = b.replay_events_after(&other).await.unwrap().collect().await;
    assert!(after_other.is_empty());
    let next = a.store_event("session-1:common", &event(9)).await.unwrap();
    let after_other: Vec<_> = b.replay_events_after(&other).await.unwrap().collect().await;
    assert_eq!(after_other.len(), 1);
    assert_eq!(after_other[0].event_id.as_deref(), Some(next.as_str()));
    assert_eq!(after_other[0].retry, None);
    let first = a.store_event("session-1:req-8", &event(1)).await.unwrap();
    let primed = a.store_event("session-1:req-8", &priming).await.unwrap();
    let got: Vec<_> = b.replay_events_after(&first).await.unwrap().collect().await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].event_id.as_deref(), Some(primed.as_str()));
    assert_eq!(got[0].retry, Some(Duration::from_millis(500)));
    assert!(got[0].message.is_none());
    // After trimming (3 events per stream), an old id is an error, not a partial replay.
    let id3 = a.store_event("session-1:req-7", &event(3)).await.unwrap();
    let _id4 = a.store_event("session-1:req-7", &event(4)).await.unwrap();
    assert!(b.replay_events_after(&id0).await.is_err());
    let last: Vec<_> = b
        .replay_events_after(&ids[2])
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(last[0].event_id.as_deref(), Some(id3.as_str()));
    assert!(b.replay_events_after("not-an-id").await.is_err());
    // Redis gone: both operations are errors.
    server.stop();
    assert!(a.store_event("session-1:req-7", &priming).await.is_err());
    assert!(b.replay_events_after(&ids[2]).await.is_err());
}
