//! The Redis Streams replay store against a real `redis-server` that each test starts on a free
//! loopback port, without persistence, and stops. No mock.
//!
//! When `redis-server` is not on `PATH`, each test fails if the environment variable `CI` is set,
//! and otherwise skips with a loud message (install it with `apt-get install redis-server`).

use std::time::{Duration, Instant};

use bytes::Bytes;
use ssegate::replay::{
    AppendError, MissReason, RedisConfig, RedisStore, RedisStream, ReplayStore, StoreError,
};
use ssegate::sse::Decoder;

use ssegate_oracles::redis_server::Server;

async fn store(server: &Server, config: &RedisConfig) -> RedisStore {
    RedisStore::connect(&server.url(), config.clone())
        .await
        .expect("connects")
}

/// Decodes one frame: (id, data).
fn decode(frame: &Bytes) -> (String, Vec<u8>) {
    let mut d = Decoder::new();
    d.feed(frame.clone());
    let ev = d.next_event().expect("one event").expect("within limits");
    assert!(d.next_event().is_none(), "exactly one event per frame");
    (
        String::from_utf8(ev.last_event_id.to_vec()).expect("ASCII id"),
        ev.data.contiguous().to_vec(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_from_two_instances_replay_in_order_from_either() {
    let Some(server) = Server::start() else {
        return;
    };
    let config = RedisConfig::default();
    let mut a = store(&server, &config).await;
    let mut b = store(&server, &config).await;
    let stream = a.open_stream().await.unwrap();
    let prime = a.append(&stream, None, b"", Some(500)).await.unwrap();
    assert_eq!(prime.id, format!("{stream}-0"));
    assert_eq!(
        &prime.frame[..],
        format!("id: {stream}-0\nretry: 500\ndata:\n\n").as_bytes()
    );
    // Two instances append to one stream at once: every event gets its own, consecutive id.
    let task = |mut store: RedisStore, stream: RedisStream, who: u8| {
        tokio::spawn(async move {
            let mut out = Vec::new();
            for n in 0..300u32 {
                let data = format!("{{\"who\":{who},\"n\":{n}}}");
                let ap = store
                    .append(&stream, Some("message"), data.as_bytes(), None)
                    .await
                    .unwrap();
                out.push((ap.seq, data, ap.frame));
            }
            out
        })
    };
    let (x, y) = tokio::join!(
        task(a.clone(), stream.clone(), 1),
        task(b.clone(), stream.clone(), 2)
    );
    let mut all: Vec<_> = x.unwrap().into_iter().chain(y.unwrap()).collect();
    all.sort_by_key(|(seq, ..)| *seq);
    let seqs: Vec<u64> = all.iter().map(|(seq, ..)| *seq).collect();
    assert_eq!(seqs, (1..=600).collect::<Vec<u64>>());
    // Each instance's own appends keep their order.
    for who in [1, 2] {
        let ns: Vec<u32> = all
            .iter()
            .filter(|(_, d, _)| d.contains(&format!("\"who\":{who}")))
            .map(|(_, d, _)| {
                d.rsplit(':')
                    .next()
                    .unwrap()
                    .trim_end_matches('}')
                    .parse()
                    .unwrap()
            })
            .collect();
        assert_eq!(ns, (0..300).collect::<Vec<u32>>());
    }
    // The resume is served by the other instance: the same frames, in sequence order.
    let replay = b.replay_after(&prime.id).await.unwrap();
    assert_eq!(replay.stream, stream);
    assert!(!replay.closed);
    let want: Vec<&Bytes> = all.iter().map(|(.., f)| f).collect();
    assert_eq!(replay.frames.iter().collect::<Vec<_>>(), want);
    for (frame, (seq, data, _)) in replay.frames.iter().zip(&all) {
        assert_eq!(
            decode(frame),
            (format!("{stream}-{seq}"), data.clone().into_bytes())
        );
    }
    // From the middle, after the last, and after closing.
    let mid = a.replay_after(&format!("{stream}-590")).await.unwrap();
    assert_eq!(mid.frames.len(), 10);
    b.close_stream(&stream).await.unwrap();
    let tail = a.replay_after(&format!("{stream}-600")).await.unwrap();
    assert!(tail.frames.is_empty() && tail.closed);
    assert_eq!(
        a.append(&stream, None, b"{}", None).await.unwrap_err(),
        AppendError::Closed
    );
    // Ids this store never issued are unknown, never an empty replay.
    for id in [
        "1-0",
        "garbage",
        &format!("{stream}-601"),
        &format!("{}-0", "0".repeat(32)),
    ] {
        assert_eq!(
            a.replay_after(id).await.unwrap_err().reason,
            MissReason::Unknown,
            "{id}"
        );
    }
    a.forget_stream(&stream).await.unwrap();
    assert_eq!(
        b.replay_after(&prime.id).await.unwrap_err().reason,
        MissReason::Unknown
    );
    assert_eq!(
        b.append(&stream, None, b"{}", None).await.unwrap_err(),
        AppendError::UnknownStream
    );
}

#[tokio::test]
async fn trimming_is_an_explicit_miss_and_too_large_evicts_nothing() {
    let Some(server) = Server::start() else {
        return;
    };
    let mut config = RedisConfig::default();
    config
        .max_stream_events(5)
        .max_stream_bytes(400)
        .max_event_bytes(200);
    let mut s = store(&server, &config).await;
    let stream = s.open_stream().await.unwrap();
    let mut sent = Vec::new();
    for n in 0..10 {
        sent.push(
            s.append(&stream, None, format!("{{\"n\":{n}}}").as_bytes(), None)
                .await
                .unwrap(),
        );
    }
    // The length budget keeps the last five.
    let miss = s.replay_after(&sent[3].id).await.unwrap_err();
    assert_eq!(
        (miss.reason, miss.missing.as_deref()),
        (MissReason::Evicted, Some(sent[4].id.as_str()))
    );
    assert_eq!(miss.retry_after, config.retry_after);
    let ok = s.replay_after(&sent[4].id).await.unwrap();
    assert_eq!(
        ok.frames,
        sent[5..]
            .iter()
            .map(|a| a.frame.clone())
            .collect::<Vec<_>>()
    );
    // The byte budget: three 128-byte frames make room by evicting the small ones oldest-first.
    let mut big = Vec::new();
    for _ in 0..3 {
        big.push(s.append(&stream, None, &[b'b'; 80], None).await.unwrap());
    }
    assert_eq!(big[0].frame.len(), 128);
    let miss = s.replay_after(&sent[8].id).await.unwrap_err();
    assert_eq!(
        (miss.reason, miss.missing.as_deref()),
        (MissReason::Evicted, Some(sent[9].id.as_str()))
    );
    let ok = s.replay_after(&sent[9].id).await.unwrap();
    assert_eq!(
        ok.frames,
        big.iter().map(|a| a.frame.clone()).collect::<Vec<_>>()
    );
    // Too large for the per-event cap: flagged, not stored, nothing evicted, and its miss says so.
    let huge = s.append(&stream, None, &[b'h'; 300], None).await.unwrap();
    assert!(huge.oversized);
    let ok = s.replay_after(&big[0].id).await.unwrap_err();
    assert_eq!(
        (ok.reason, ok.missing.as_deref()),
        (MissReason::TooLarge, Some(huge.id.as_str()))
    );
    let after = s.append(&stream, None, b"{}", None).await.unwrap();
    assert!(!after.oversized);
    assert_eq!(
        s.replay_after(&huge.id).await.unwrap().frames,
        vec![after.frame.clone()]
    );
    // big[1] is still held (huge evicted nothing; `after` made room by evicting big[0] at most).
    let r = s.replay_after(&big[1].id).await.unwrap_err();
    assert_eq!(r.reason, MissReason::TooLarge);
    // A line end in the event type is a typed error.
    assert!(matches!(
        s.append(&stream, Some("a\nb"), b"{}", None).await,
        Err(AppendError::Frame(_))
    ));
}

#[tokio::test]
async fn keys_are_hash_tagged_and_expire_with_the_session() {
    let Some(server) = Server::start() else {
        return;
    };
    let mut config = RedisConfig::default();
    config.ttl(Duration::from_millis(300));
    let mut s = store(&server, &config).await;
    let stream = s.open_stream().await.unwrap();
    let a = s.append(&stream, None, b"{}", None).await.unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut raw = client.get_multiplexed_async_connection().await.unwrap();
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("ssegate:*")
        .query_async(&mut raw)
        .await
        .unwrap();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            format!("ssegate:{{{stream}}}:e"),
            format!("ssegate:{{{stream}}}:m")
        ]
    );
    for key in &keys {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut raw)
            .await
            .unwrap();
        assert!(ttl > 0 && ttl <= 300, "{key} ttl {ttl}");
    }
    // Writes refresh the expiry; idle streams go.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let b = s.append(&stream, None, b"{}", None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(s.replay_after(&a.id).await.unwrap().frames, vec![b.frame]);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        s.replay_after(&a.id).await.unwrap_err().reason,
        MissReason::Unknown
    );
    let n: i64 = redis::cmd("DBSIZE").query_async(&mut raw).await.unwrap();
    assert_eq!(n, 0);
}

#[tokio::test]
async fn lost_redis_is_a_typed_error_then_recovers_after_restart() {
    let Some(mut server) = Server::start() else {
        return;
    };
    let mut config = RedisConfig::default();
    config
        .retry_after(Duration::from_millis(1500))
        .response_timeout(Duration::from_millis(500))
        .connection_timeout(Duration::from_millis(200));
    let mut s = store(&server, &config).await;
    let stream = s.open_stream().await.unwrap();
    let a = s.append(&stream, None, b"{\"n\":1}", None).await.unwrap();
    server.stop();
    let unavailable = AppendError::Unavailable {
        retry_after: Duration::from_millis(1500),
    };
    let started = Instant::now();
    assert_eq!(
        s.append(&stream, None, b"{}", None).await.unwrap_err(),
        unavailable
    );
    let miss = s.replay_after(&a.id).await.unwrap_err();
    assert_eq!(
        (miss.reason, miss.retry_after),
        (MissReason::Unavailable, Duration::from_millis(1500))
    );
    assert_eq!(
        s.open_stream().await.unwrap_err(),
        StoreError::Unavailable {
            retry_after: Duration::from_millis(1500)
        }
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "errors come promptly"
    );
    // Redis comes back (empty: no persistence). The same handle reconnects; what was lost is an
    // explicit miss, new streams work.
    server.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    let fresh = loop {
        match s.open_stream().await {
            Ok(fresh) => break fresh,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("no recovery: {e}"),
        }
    };
    assert_eq!(
        s.replay_after(&a.id).await.unwrap_err().reason,
        MissReason::Unknown
    );
    let b = s.append(&fresh, None, b"{}", None).await.unwrap();
    let c = s.append(&fresh, None, b"{}", None).await.unwrap();
    assert_eq!(s.replay_after(&b.id).await.unwrap().frames, vec![c.frame]);
}

#[tokio::test]
async fn a_4_mib_event_round_trips_whole() {
    let Some(server) = Server::start() else {
        return;
    };
    let mut s = store(&server, &RedisConfig::default()).await;
    let stream = s.open_stream().await.unwrap();
    let prime = s.append(&stream, None, b"", Some(100)).await.unwrap();
    let data: Vec<u8> = (0..4 << 20).map(|i| b'a' + (i % 26) as u8).collect();
    let big = s
        .append(&stream, Some("message"), &data, None)
        .await
        .unwrap();
    assert!(!big.oversized);
    let replay = s.replay_after(&prime.id).await.unwrap();
    assert_eq!(replay.frames, vec![big.frame.clone()]);
    assert_eq!(decode(&replay.frames[0]).1, data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_small_events() {
    let Some(server) = Server::start() else {
        return;
    };
    let s = store(&server, &RedisConfig::default()).await;
    let stream = s.clone().open_stream().await.unwrap();
    const TASKS: u64 = 16;
    const EACH: u64 = 100_000 / TASKS;
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (mut s, stream) = (s.clone(), stream.clone());
        tasks.push(tokio::spawn(async move {
            for n in 0..EACH {
                let data = format!("{{\"t\":{t},\"n\":{n}}}");
                let _ = s
                    .append(&stream, None, data.as_bytes(), None)
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut s = s;
    let replay = s.replay_after(&format!("{stream}-0")).await.unwrap();
    assert_eq!(replay.frames.len() as u64, TASKS * EACH - 1);
    for (i, frame) in replay.frames.iter().enumerate() {
        assert!(frame.starts_with(format!("id: {stream}-{}\n", i + 1).as_bytes()));
    }
    // The default budget is 100 000 events per stream: one more evicts the first.
    let _ = s.append(&stream, None, b"{}", None).await.unwrap();
    let _ = s.append(&stream, None, b"{}", None).await.unwrap();
    let miss = s.replay_after(&format!("{stream}-0")).await.unwrap_err();
    assert_eq!(
        (miss.reason, miss.missing),
        (MissReason::Evicted, Some(format!("{stream}-1")))
    );
}
