//! Several server instances behind the loopback balancer, which sends every resume to another
//! instance than the one whose response was cut: with a replay buffer per instance the resume misses
//! (the guarded client renegotiates, or refuses when it may not re-issue the call); with one Redis
//! shared by the instances it resumes in place, intact. Also: a Redis that goes away is a `503` with
//! `Retry-After` on `POST` and on `GET`, never an empty `200`, and the server recovers when it is back.
//!
//! The Redis tests start their own `redis-server` on a free loopback port, without persistence, and
//! stop it. When `redis-server` is not on `PATH`, they fail if the environment variable `CI` is set,
//! and otherwise skip with a loud message.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ssegate::client::Retry;
use ssegate::replay::{RedisConfig, RedisStore};
use ssegate_oracles::redis_server;
use ssegate_testkit::demo::{self, ClientKind, DemoConfig, DemoStore, Harness, Row};
use ssegate_testkit::server::{ServerConfig, ServerMode, ServerStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TRIALS: usize = 4;
const LIMIT: Duration = Duration::from_secs(60);

fn config(store: DemoStore) -> DemoConfig {
    let mut c = DemoConfig::default();
    c.size(64 << 10)
        .trials(TRIALS)
        .seed(7)
        .reconnect_delay(Duration::from_millis(10))
        .retry_ms(5)
        .replay_timeout(Duration::from_millis(500))
        .trial_timeout(Duration::from_secs(15))
        .modes(&[ServerMode::Strict, ServerMode::Empty])
        .instances(2)
        .store(store);
    c
}

fn row(rows: &[Row], server: ServerMode, client: ClientKind) -> &Row {
    rows.iter()
        .find(|r| r.server == server && r.client == client)
        .expect("a row per mode and client")
}

async fn run(config: &DemoConfig) -> Vec<Row> {
    tokio::time::timeout(LIMIT, demo::run(config, &|_| {}))
        .await
        .expect("the demo finishes in time")
        .expect("the demo runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_with_memory_stores_miss_every_resume() {
    let rows = run(&config(DemoStore::Memory)).await;
    assert_eq!(rows.len(), 6);
    for mode in [ServerMode::Strict, ServerMode::Empty] {
        // A trial the proxy did not manage to cut before the answer was whole (it happens under
        // load) is intact with neither a resume nor a re-issue; every cut trial is one or the other.
        let g = row(&rows, mode, ClientKind::Guarded);
        // The other instance has no buffer: every resume misses (none resumed), the call is
        // re-issued, never corrupt.
        assert_eq!(
            (g.intact, g.resumed, g.silent_corruption),
            (TRIALS, 0, 0),
            "{g:?}"
        );
        assert!(g.renegotiated >= TRIALS - 1, "{g:?}");
        let once = row(&rows, mode, ClientKind::GuardedOnce);
        // A call that may not be re-issued: a typed refusal, never a second run.
        assert_eq!(
            (once.renegotiated, once.resumed, once.silent_corruption),
            (0, 0, 0),
            "{once:?}"
        );
        assert!(once.refused >= TRIALS - 1, "{once:?}");
        assert_eq!(once.refused + once.intact, TRIALS, "{once:?}");
        for r in rows.iter().filter(|r| r.server == mode) {
            assert_eq!((r.instances, r.store), (2, "memory"));
        }
    }
    let json = demo::rows_json(&rows);
    let g = row(&rows, ServerMode::Strict, ClientKind::Guarded);
    assert!(
        json.contains(&format!(
            r#""renegotiated":{},"instances":2,"store":"memory"}}"#,
            g.renegotiated
        )),
        "{json}"
    );

    // Where the resume went: to the second instance, which knew the session (shared directory)
    // but held none of its events.
    let harness = Harness::start(ServerMode::Strict, &config(DemoStore::Memory))
        .await
        .unwrap();
    let cut = harness.layout().big_start + 10;
    let r = harness.guarded_call(cut, Retry::Never).await;
    assert!(r.is_err(), "a miss without re-issue is a refusal: {r:?}");
    let (first, second) = (harness.servers()[0].stats(), harness.servers()[1].stats());
    assert_eq!(first.resumes, 0, "{first:?}");
    assert!(
        second.resumes >= 1 && second.misses == second.resumes,
        "{second:?}"
    );
    assert!(second.sessions_adopted >= 1, "{second:?}");
    assert!(harness.balancer().unwrap().stats().resumes >= 1);
    harness.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_sharing_redis_resume_in_place() {
    let Some(redis) = redis_server::Server::start() else {
        return;
    };
    let rows = run(&config(DemoStore::Redis(redis.url()))).await;
    assert_eq!(rows.len(), 6);
    for mode in [ServerMode::Strict, ServerMode::Empty] {
        for client in [ClientKind::Guarded, ClientKind::GuardedOnce] {
            let g = row(&rows, mode, client);
            // Resumed on the other instance from Redis: no renegotiation, the tool ran once (a
            // trial the proxy did not manage to cut is intact without a resume).
            assert_eq!(
                (g.intact, g.renegotiated, g.refused),
                (TRIALS, 0, 0),
                "{g:?}"
            );
            assert!(g.resumed >= TRIALS - 1, "{g:?}");
            assert_eq!((g.instances, g.store), (2, "redis"));
        }
    }
    let harness = Harness::start(ServerMode::Strict, &config(DemoStore::Redis(redis.url())))
        .await
        .unwrap();
    let cut = harness.layout().big_start + 10;
    let r = harness.guarded_call(cut, Retry::Never).await.unwrap();
    assert!(r.message.data().eq_bytes(harness.expected()));
    let (first, second) = (harness.servers()[0].stats(), harness.servers()[1].stats());
    assert_eq!(first.resumes, 0, "{first:?}");
    assert!(second.replays >= 1 && second.misses == 0, "{second:?}");
    harness.shutdown().await;
}

/// One HTTP/1.1 request on its own connection (`Connection: close`); the whole answer as text.
async fn http(addr: SocketAddr, head: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{head}\r\nhost: x\r\nconnection: close\r\naccept: application/json, text/event-stream\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

fn status(answer: &str) -> u16 {
    answer[9..12].parse().unwrap()
}

fn header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    let head = &answer[..answer.find("\r\n\r\n")?];
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_redis_is_503_with_retry_after_then_recovers() {
    let Some(mut redis) = redis_server::Server::start() else {
        return;
    };
    let mut rc = RedisConfig::default();
    rc.retry_after(Duration::from_secs(2))
        .response_timeout(Duration::from_millis(500))
        .connection_timeout(Duration::from_millis(200));
    let store = RedisStore::connect(&redis.url(), rc).await.unwrap();
    let mut sc = ServerConfig::default();
    sc.store(ServerStore::Redis(store)).result_size(1000);
    let server = sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = server.addr();
    let init = http(
        addr,
        "POST /mcp HTTP/1.1",
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
    )
    .await;
    assert_eq!(status(&init), 200, "{init}");
    let session = header(&init, "mcp-session-id").unwrap().to_owned();
    let call_head = format!("POST /mcp HTTP/1.1\r\nmcp-session-id: {session}");
    let call_body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big_result","arguments":{}}}"#;
    let call = http(addr, &call_head, call_body).await;
    assert_eq!(status(&call), 200, "{call}");
    let first_id = call
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .unwrap()
        .to_owned();
    let resume_head =
        format!("GET /mcp HTTP/1.1\r\nmcp-session-id: {session}\r\nlast-event-id: {first_id}");
    let resumed = http(addr, &resume_head, "").await;
    assert_eq!(status(&resumed), 200, "{resumed}");
    assert!(
        resumed.contains(&format!("{}-4", &first_id[..32])),
        "{resumed}"
    );

    redis.stop();
    for (what, answer) in [
        ("GET", http(addr, &resume_head, "").await),
        ("POST", http(addr, &call_head, call_body).await),
    ] {
        assert_eq!(status(&answer), 503, "{what}: {answer}");
        assert_eq!(
            header(&answer, "retry-after"),
            Some("2"),
            "{what}: {answer}"
        );
    }
    assert!(server.stats().store_unavailable >= 2);

    // Redis is back (empty): the old stream is gone (an explicit 409), new calls work again.
    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    let call = loop {
        let call = http(addr, &call_head, call_body).await;
        if status(&call) != 503 || Instant::now() > deadline {
            break call;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status(&call), 200, "{call}");
    let gone = http(addr, &resume_head, "").await;
    assert_eq!(status(&gone), 409, "{gone}");
    assert!(header(&gone, "retry-after").is_some(), "{gone}");
    server.shutdown().await;
}
