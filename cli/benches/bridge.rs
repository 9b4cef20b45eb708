//! The bridge's overhead: one `tools/call` of the loopback server's `big_result` through the
//! library's guarded client alone (`Client::call_tool`, in this process) against the same call
//! through a running `ssegate bridge` child process, driven over its stdin and stdout as an MCP
//! stdio host drives it (one request line written, the response line read). The server
//! (`ServerMode::Buffered`, no progress notifications) runs in this process for both paths, so its
//! work is the same; what differs is the bridge: the host's line read and parsed, the call made by
//! the bridge's own client, the response's `result` found and written to the pipe under the host's
//! id, and the pipe itself.
//!
//! Two sizes: a small result (200 bytes of text: the per-call cost) and a 4 MiB one (the per-byte
//! cost). The bench process uses mimalloc, as the `ssegate` binary does, so the allocator is the
//! same on both paths.
//!
//! ```text
//! cargo bench -p ssegate-cli --bench bridge              # about 30 s on 2 cores
//! cargo bench -p ssegate-cli --bench bridge -- --test    # each function once (a smoke run)
//! ```

use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use ssegate::client::{Client, ClientConfig, Retry};
use ssegate_testkit::server::{RunningServer, ServerConfig, ServerMode, expected_result};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The small result: 200 bytes of text.
const SMALL: usize = 200;
/// The large result: 4 MiB of text.
const BIG: usize = 4 << 20;
const SEED: u64 = 7;

/// `ssegate bridge URL` as a child process, driven over its stdin and stdout.
struct Bridge {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
    next_id: u64,
}

impl Bridge {
    /// Starts the bridge and initializes it (which connects it to the server).
    fn start(url: &str) -> Bridge {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ssegate"))
            .arg("bridge")
            .arg(url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run ssegate bridge");
        let stdin = child.stdin.take();
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
        let mut bridge = Bridge {
            child,
            stdin,
            stdout,
            line: Vec::with_capacity(BIG + 4096),
            next_id: 1,
        };
        bridge.send(
            br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench-host","version":"1"}}}"#,
        );
        bridge.read_response(0);
        let init: Value = serde_json::from_slice(&bridge.line).expect("initialize: JSON");
        assert!(
            init["result"]["capabilities"]["tools"].is_object(),
            "{init}"
        );
        bridge.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        bridge
    }

    fn send(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Reads lines until the response to `id` (in `self.line`, line break included); a
    /// notification on the way is skipped.
    fn read_response(&mut self, id: u64) {
        let head = format!(r#"{{"jsonrpc":"2.0","id":{id},"#);
        loop {
            self.line.clear();
            let n = self.stdout.read_until(b'\n', &mut self.line).unwrap();
            assert!(n > 0, "the bridge closed its stdout");
            if self.line.starts_with(head.as_bytes()) {
                return;
            }
            assert!(
                !self.line.starts_with(br#"{"jsonrpc":"2.0","id":"#),
                "an answer to another request: {}",
                String::from_utf8_lossy(&self.line[..self.line.len().min(300)])
            );
        }
    }

    /// One `big_result` call: the response line's length.
    fn call(&mut self, size: usize) -> usize {
        let id = self.next_id;
        self.next_id += 1;
        let request = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"big_result","arguments":{{"size":{size},"seed":{SEED}}}}}}}"#
        );
        self.send(request.as_bytes());
        self.read_response(id);
        self.line.len()
    }
}

impl Drop for Bridge {
    /// End of input: the bridge ends its session and exits; killed if it has not within 5 s.
    fn drop(&mut self) {
        self.stdin = None;
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `result` the server sends for `big_result(size, SEED)`.
fn expected(size: usize) -> Value {
    let response: Value =
        serde_json::from_slice(&expected_result(&json!(1), size, SEED)).expect("JSON");
    response["result"].clone()
}

fn server(rt: &tokio::runtime::Runtime) -> RunningServer {
    rt.block_on(async {
        let mut sc = ServerConfig::default();
        sc.mode(ServerMode::Buffered)
            .progress_count(0)
            .max_result_size(BIG);
        sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
    })
}

/// The library's client and the bridge, for one size: both checked once against the server's
/// bytes before anything is timed.
///
/// The server runs on a runtime of its own; the library's client on another, its calls made in a
/// task (as in an application, and as the bridge makes them on its own runtime), `iters` calls in
/// a row timed inside that task. (Driven with `block_on` from the bench's thread instead, a small
/// call measured twice as long: the wake-ups between that thread and the runtime's workers.)
fn pair(group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>, size: usize) {
    let server_rt = tokio::runtime::Runtime::new().expect("a runtime");
    let server = server(&server_rt);
    let url = server.url();
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let client = rt
        .block_on(Client::connect(&url, ClientConfig::default()))
        .expect("connect");
    let calls = |iters: u64| {
        let client = client.clone();
        let task = rt.spawn(async move {
            let started = Instant::now();
            for _ in 0..iters {
                let response = client
                    .call_tool(
                        "big_result",
                        json!({"size": size, "seed": SEED}),
                        Retry::IfSafe,
                    )
                    .await
                    .expect("call");
                black_box(response.message.len());
            }
            (started.elapsed(), client)
        });
        rt.block_on(task).expect("the calls")
    };
    let want = expected(size);
    let response = rt
        .block_on(client.call_tool(
            "big_result",
            json!({"size": size, "seed": SEED}),
            Retry::IfSafe,
        ))
        .expect("call");
    let got: Value = response.message.deserialize().expect("JSON");
    assert_eq!(got["result"], want, "the library's result");
    group.bench_function("library", |b| b.iter_custom(|iters| calls(iters).0));

    let mut bridge = Bridge::start(&url);
    bridge.call(size);
    let got: Value = serde_json::from_slice(&bridge.line).expect("JSON");
    assert_eq!(got["result"], want, "the bridge's result");
    group.bench_function("bridge", |b| {
        b.iter(|| black_box(bridge.call(size)));
    });
    drop(bridge);
    rt.block_on(async { drop(client.close().await) });
}

fn bridge(c: &mut Criterion) {
    let mut group = c.benchmark_group("bridge_call_200b");
    group.throughput(Throughput::Elements(1));
    group
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    pair(&mut group, SMALL);
    group.finish();

    let mut group = c.benchmark_group("bridge_call_4mib");
    group.throughput(Throughput::Bytes(BIG as u64));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4));
    pair(&mut group, BIG);
    group.finish();
}

criterion_group!(benches, bridge);
criterion_main!(benches);
