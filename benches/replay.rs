//! Replay store throughput: append + replay of one 4 MiB event, and of 100 000 small events, in the
//! in-memory `ReplayBuffer` and (with `--features redis` and `redis-server` on `PATH`) the Redis
//! Streams store on loopback. Per-event latency is the time per element.
//!
//! ```text
//! cargo bench --bench replay --features redis -- --measurement-time 1
//! ```

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group};
use ssegate::replay::{BufferConfig, ReplayBuffer};

const BIG: usize = 4 << 20;
const SMALL: u64 = 100_000;

fn small_event(n: u64) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progress\":{n}}}}}")
        .into_bytes()
}

fn memory(c: &mut Criterion) {
    let big = vec![b'x'; BIG];
    let mut group = c.benchmark_group("replay_4mib");
    group.throughput(Throughput::Bytes(BIG as u64));
    group.sample_size(10);
    group.bench_function("memory", |b| {
        let mut config = BufferConfig::default();
        config.max_session_bytes(8 << 20).max_event_bytes(8 << 20);
        let mut buf = ReplayBuffer::new(config);
        b.iter(|| {
            let s = buf.open_stream();
            let prime = buf.append_with_retry(s, None, b"", Some(100)).unwrap();
            let _ = buf.append(s, None, black_box(&big)).unwrap();
            let replay = buf.replay_after(&prime.id).unwrap();
            assert_eq!(replay.frames.len(), 1);
            buf.forget_stream(s);
            black_box(replay)
        });
    });
    #[cfg(feature = "redis")]
    redis_bench::big(&mut group, &big);
    group.finish();

    let events: Vec<Vec<u8>> = (0..SMALL).map(small_event).collect();
    let mut group = c.benchmark_group("replay_100k_small");
    group.throughput(Throughput::Elements(SMALL));
    group.sample_size(10);
    group.bench_function("memory", |b| {
        let mut config = BufferConfig::default();
        config
            .max_session_bytes(64 << 20)
            .max_session_events(SMALL as usize);
        let mut buf = ReplayBuffer::new(config);
        b.iter(|| {
            let s = buf.open_stream();
            let first = buf.append(s, None, &events[0]).unwrap();
            for e in &events[1..] {
                let _ = buf.append(s, None, black_box(e)).unwrap();
            }
            let replay = buf.replay_after(&first.id).unwrap();
            assert_eq!(replay.frames.len() as u64, SMALL - 1);
            buf.forget_stream(s);
            black_box(replay)
        });
    });
    #[cfg(feature = "redis")]
    redis_bench::small(&mut group, &events);
    group.finish();
}

#[cfg(feature = "redis")]
mod redis_bench {
    use std::net::{TcpListener, TcpStream};
    use std::process::{Child, Command, Stdio};
    use std::sync::{Arc, OnceLock};
    use std::time::{Duration, Instant};

    use criterion::BenchmarkGroup;
    use criterion::measurement::WallTime;
    use ssegate::replay::{RedisConfig, RedisStore, ReplayStore};
    use tokio::runtime::Runtime;

    struct Server {
        url: String,
        _child: Child,
    }

    /// One `redis-server` for the whole run (no persistence), or `None` when it is not installed.
    /// It lives in a static (never dropped): [`stop`] shuts it down at the end of `main`.
    fn server() -> Option<&'static Server> {
        static SERVER: OnceLock<Option<Server>> = OnceLock::new();
        SERVER
            .get_or_init(|| {
                let port = TcpListener::bind("127.0.0.1:0")
                    .ok()?
                    .local_addr()
                    .ok()?
                    .port();
                let child = Command::new("redis-server")
                    .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                    .args(["--save", "", "--appendonly", "no"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn();
                let Ok(child) = child else {
                    eprintln!("!!! redis-server not found: Redis rows skipped !!!");
                    return None;
                };
                let deadline = Instant::now() + Duration::from_secs(10);
                while TcpStream::connect(("127.0.0.1", port)).is_err() {
                    if Instant::now() > deadline {
                        return None;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Some(Server {
                    url: format!("redis://127.0.0.1:{port}/"),
                    _child: child,
                })
            })
            .as_ref()
    }

    pub(crate) fn stop() {
        if let Some(server) = server() {
            let rt = Runtime::new().unwrap();
            rt.block_on(async {
                if let Ok(client) = redis::Client::open(server.url.as_str())
                    && let Ok(mut conn) = client.get_multiplexed_async_connection().await
                {
                    let _: Result<(), _> = redis::cmd("SHUTDOWN")
                        .arg("NOSAVE")
                        .query_async(&mut conn)
                        .await;
                }
            });
        }
    }

    fn store(rt: &Runtime, url: &str) -> RedisStore {
        let mut config = RedisConfig::default();
        config
            .max_stream_bytes(64 << 20)
            .max_event_bytes(8 << 20)
            .max_stream_events(200_000)
            .response_timeout(Duration::from_secs(30));
        rt.block_on(RedisStore::connect(url, config)).unwrap()
    }

    pub(crate) fn big(group: &mut BenchmarkGroup<'_, WallTime>, big: &[u8]) {
        let Some(server) = server() else { return };
        let rt = Runtime::new().unwrap();
        let mut s = store(&rt, &server.url);
        group.bench_function("redis", |b| {
            b.iter(|| {
                rt.block_on(async {
                    let stream = s.open_stream().await.unwrap();
                    let prime = s.append(&stream, None, b"", Some(100)).await.unwrap();
                    let _ = s.append(&stream, None, big, None).await.unwrap();
                    let replay = s.replay_after(&prime.id).await.unwrap();
                    assert_eq!(replay.frames.len(), 1);
                    s.forget_stream(&stream).await.unwrap();
                })
            });
        });
    }

    pub(crate) fn small(group: &mut BenchmarkGroup<'_, WallTime>, events: &[Vec<u8>]) {
        let Some(server) = server() else { return };
        let rt = Runtime::new().unwrap();
        let s = store(&rt, &server.url);
        let events: Arc<Vec<Vec<u8>>> = Arc::new(events.to_vec());
        // 16 concurrent appenders on one multiplexed connection (a server with many sessions).
        const TASKS: usize = 16;
        group.bench_function("redis", |b| {
            b.iter(|| {
                rt.block_on(async {
                    let mut s = s.clone();
                    let stream = s.open_stream().await.unwrap();
                    let first = s.append(&stream, None, &events[0], None).await.unwrap();
                    let mut tasks = Vec::new();
                    for t in 0..TASKS {
                        let (mut s, stream, events) = (s.clone(), stream.clone(), events.clone());
                        tasks.push(tokio::spawn(async move {
                            for e in events[1..].iter().skip(t).step_by(TASKS) {
                                let _ = s.append(&stream, None, e, None).await.unwrap();
                            }
                        }));
                    }
                    for t in tasks {
                        t.await.unwrap();
                    }
                    let replay = s.replay_after(&first.id).await.unwrap();
                    assert_eq!(replay.frames.len(), events.len() - 1);
                    s.forget_stream(&stream).await.unwrap();
                })
            });
        });
    }
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(1))
}

criterion_group! {
    name = benches;
    config = config();
    targets = memory
}

fn main() {
    benches();
    #[cfg(feature = "redis")]
    redis_bench::stop();
    Criterion::default().configure_from_args().final_summary();
}
