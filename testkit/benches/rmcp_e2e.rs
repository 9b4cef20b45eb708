//! A 4 MiB tool result end to end on loopback: an rmcp client on rmcp's default reqwest client
//! against the same client on `ssegate::rmcp::GuardedHttpClient`. Time per call (criterion) and
//! heap bytes allocated per call (a counting global allocator, printed after the timings).
//!
//! `cargo bench -p ssegate-testkit --bench rmcp_e2e -- --measurement-time 1`
//!
//! The decode-only comparison with sse-stream 0.2.6 (rmcp's SSE parser) is the library's
//! `decode` and `alloc` benches.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use ssegate_oracles::alloc::{Counting, Span};
use ssegate_testkit::server::{DEFAULT_RESULT_SIZE, ServerConfig};

// Counts every allocation (a grown buffer counts its growth); see `ssegate_oracles::alloc`.
#[global_allocator]
static GLOBAL: Counting = Counting;

type Client = RunningService<RoleClient, ()>;

fn call(rt: &tokio::runtime::Runtime, client: &Client) -> usize {
    rt.block_on(async {
        let result = client
            .call_tool(CallToolRequestParams::new("big_result"))
            .await
            .expect("the call succeeds");
        result.content[0].as_text().expect("text").text.len()
    })
}

fn e2e(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (server, guarded, plain) = rt.block_on(async {
        let mut config = ServerConfig::default();
        config.result_size(DEFAULT_RESULT_SIZE).progress_count(0);
        let server = config
            .start("127.0.0.1:0".parse().expect("an address"))
            .await
            .expect("the server starts");
        let url = format!("http://{}/mcp", server.addr());
        // First: it installs ring as rustls' provider, which rmcp's reqwest client needs too.
        let guarded = StreamableHttpClientTransport::with_client(
            ssegate::rmcp::GuardedHttpClient::default(),
            StreamableHttpClientTransportConfig::with_uri(url.clone()),
        );
        let guarded = ().serve(guarded).await.expect("guarded client");
        let plain =
            ().serve(StreamableHttpClientTransport::from_uri(url))
                .await
                .expect("rmcp's client");
        (server, guarded, plain)
    });
    let mut group = c.benchmark_group("rmcp_4MiB_result");
    group.sample_size(10);
    group.bench_function("rmcp_reqwest", |b| b.iter(|| call(&rt, &plain)));
    group.bench_function("ssegate_guarded", |b| b.iter(|| call(&rt, &guarded)));
    group.finish();

    for (name, client) in [("rmcp_reqwest", &plain), ("ssegate_guarded", &guarded)] {
        const CALLS: u64 = 5;
        call(&rt, client);
        let span = Span::process();
        for _ in 0..CALLS {
            call(&rt, client);
        }
        let per_call = span.allocated() / CALLS;
        println!(
            "{name}: {:.2} MiB allocated per 4 MiB call ({per_call} bytes)",
            per_call as f64 / f64::from(1 << 20)
        );
    }
    rt.block_on(async {
        let _ = plain.cancel().await;
        let _ = guarded.cancel().await;
        server.shutdown().await;
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .measurement_time(Duration::from_secs(1))
        .warm_up_time(Duration::from_millis(300));
    targets = e2e
}
criterion_main!(benches);
