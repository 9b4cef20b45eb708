//! The guarded client against a hostile MCP server (`ssegate_testkit::hostile`), one
//! misbehaviour per test: every call ends with a typed error or the right result, in bounded time
//! and in bounded memory (a stated multiple of the configured limits, measured by a counting
//! allocator around the whole process: client and server).
//!
//! The tests run one at a time (the allocator's peak is process-wide).

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue};
use serde_json::json;
use ssegate::client::{Client, ClientConfig, ClientError, ProtocolError, Redirects, Retry};
use ssegate::resume::{self, Failure};
use ssegate::resume::{RefusalKind, Restart};
use ssegate::sse;
use ssegate_oracles::alloc::{Counting, Span};
use ssegate_testkit::hostile::{Hit, HostileServer, IdShape, Misbehaviour};

#[global_allocator]
static ALLOC: Counting = Counting;

static SERIAL: Mutex<()> = Mutex::new(());

const MIB: usize = 1 << 20;

/// Runs `f` on a fresh runtime, alone; returns its output, the heap's peak above the level before
/// it, and how long it took. Panics after `limit` (a hang is a failure, not a wait).
fn measure<T>(limit: Duration, f: impl Future<Output = T>) -> (T, usize, Duration) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let span = Span::process();
    let started = Instant::now();
    let out = runtime
        .block_on(async { tokio::time::timeout(limit, f).await })
        .unwrap_or_else(|_| panic!("no answer within {limit:?}: the client hangs"));
    let took = started.elapsed();
    let peak = span.peak();
    drop(runtime);
    // Shown with `--nocapture` (the figures quoted in docs/LIMITS.md).
    println!(
        "{}: peak {} KiB in {took:?}",
        std::thread::current().name().unwrap_or("?"),
        peak >> 10
    );
    (out, peak, took)
}

/// Test settings: short delays, so a test takes seconds; limits as each test states.
fn config() -> ClientConfig {
    let mut stream = resume::StreamConfig::default();
    stream
        .min_delay(Duration::from_millis(20))
        .max_delay(Duration::from_millis(200))
        .backoff(Duration::from_millis(20));
    let mut config = ClientConfig::default();
    config
        .stream(stream)
        .replay_timeout(Duration::from_millis(500))
        .call_timeout(Some(Duration::from_secs(10)));
    config
}

async fn start(m: Misbehaviour) -> HostileServer {
    HostileServer::start(m).await.expect("bind 127.0.0.1")
}

fn tool_calls(server: &HostileServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.rpc_method().as_deref() == Some("tools/call"))
        .count()
}

fn refusal_kind(e: &ClientError) -> Option<&RefusalKind> {
    e.refusal().map(|r| &r.kind)
}

// ---- bodies read whole ----

#[test]
fn an_endless_error_body_is_read_up_to_its_cap_on_every_path() {
    for on in [Hit::Initialize, Hit::ToolsCall, Hit::Get, Hit::Delete] {
        let (err, peak, _) = measure(Duration::from_secs(20), async {
            let server = start(Misbehaviour::ErrorBody { on }).await;
            let result = async {
                let client = Client::connect(&server.url(), config()).await?;
                match on {
                    Hit::ToolsCall => client
                        .call_tool("t", json!({}), Retry::IfSafe)
                        .await
                        .map(drop),
                    Hit::Get => client.listen().await.map(drop),
                    _ => client.close().await,
                }
            }
            .await;
            result.expect_err("a 500 is an error")
        });
        match &err {
            ClientError::Status { status, body, .. } => {
                assert_eq!(*status, 500, "{on:?}");
                assert!(
                    body.len() <= 1024 && body.starts_with("error"),
                    "{on:?}: {body:?}"
                );
            }
            other => panic!("{on:?}: {other}"),
        }
        // Before: the body was read whole (4.1 GB in 28 s).
        assert!(peak < 8 * MIB, "{on:?}: peak {} MiB", peak / MIB);
    }
}

#[test]
fn the_error_body_cap_is_configurable() {
    let (err, _, _) = measure(Duration::from_secs(20), async {
        let server = start(Misbehaviour::ErrorBody {
            on: Hit::Initialize,
        })
        .await;
        let mut config = config();
        config.max_error_body(10);
        Client::connect(&server.url(), config)
            .await
            .expect_err("500")
    });
    let ClientError::Status { body, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(body, "error erro");
}

#[test]
fn a_json_answer_is_held_to_its_cap_without_doubling() {
    let cap = 16 * MIB;
    let (err, peak, _) = measure(Duration::from_secs(30), async {
        let server = start(Misbehaviour::HugeJson { bytes: 256 << 20 }).await;
        let mut config = config();
        config.max_json_body(cap);
        let client = Client::connect(&server.url(), config)
            .await
            .expect("connect");
        client.list_tools().await.expect_err("over the cap")
    });
    assert!(
        matches!(err, ClientError::Protocol(ProtocolError::BodyTooLarge(n)) if n == cap),
        "{err}"
    );
    // Before: a doubling `Vec` peaked at ~3.4x the cap.
    assert!(
        peak < cap + cap / 2,
        "peak {} MiB for a {} MiB cap",
        peak / MIB,
        cap / MIB
    );
}

#[test]
fn a_cut_json_answer_is_a_lost_response_and_a_safe_call_is_issued_again() {
    let (result, _, _) = measure(Duration::from_secs(20), async {
        let server = start(Misbehaviour::HugeJson { bytes: 100_000 }).await;
        let client = Client::connect(&server.url(), config())
            .await
            .expect("connect");
        let result = client.list_tools().await;
        let lists = server
            .requests()
            .iter()
            .filter(|r| r.rpc_method().as_deref() == Some("tools/list"))
            .count();
        (result, lists)
    });
    let (result, lists) = result;
    let err = result.expect_err("never complete");
    assert!(
        matches!(&err, ClientError::Refused { attempts: 3, .. })
            && matches!(refusal_kind(&err), Some(RefusalKind::Unresumable { .. })),
        "{err}"
    );
    assert_eq!(lists, 3, "tools/list is safe to repeat: issued 3 times");
}

// ---- events over the decoder's limits ----

fn limited(max: usize) -> ClientConfig {
    let mut limits = sse::DecoderConfig::default();
    limits.max_line(max).max_event(max).max_block(max + 4096);
    let mut config = config();
    config
        .decoder(limits)
        .call_timeout(Some(Duration::from_secs(60)));
    config
}

/// The call fails at once (not at its deadline) with the decoder limit named.
fn assert_decode_limit(err: &ClientError, limit: usize) {
    match err {
        ClientError::Refused {
            failure, attempts, ..
        } => {
            assert_eq!(*attempts, 1, "a decoder limit is not re-issued: {err}");
            assert!(
                matches!(&**failure, Failure::Refused(e) if matches!(e.kind, RefusalKind::DecodeLimit { .. })),
                "{err}"
            );
            assert!(err.to_string().contains(&limit.to_string()), "{err}");
        }
        other => panic!("expected the decoder limit, got {other}"),
    }
}

#[test]
fn an_endless_data_line_fails_the_call_at_once_naming_the_limit() {
    let limit = 4 * MIB;
    let (out, peak, took) = measure(Duration::from_secs(30), async {
        let server = start(Misbehaviour::EndlessDataLine).await;
        let client = Client::connect(&server.url(), limited(limit))
            .await
            .expect("connect");
        let err = client
            .call_tool("t", json!({}), Retry::IfSafe)
            .await
            .expect_err("never a response");
        // The connection was dropped: the server stops writing.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let written = server.bytes_written();
        tokio::time::sleep(Duration::from_millis(300)).await;
        (err, written, server.bytes_written())
    });
    let (err, before, after) = out;
    assert_decode_limit(&err, limit);
    assert_eq!(before, after, "the connection is still read");
    // Before: the decoder skipped forever and the call waited for ever.
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert!(peak < 3 * limit + 4 * MIB, "peak {} MiB", peak / MIB);
}

#[test]
fn a_response_over_the_event_limit_fails_at_once_naming_the_limit() {
    let limit = MIB;
    for m in [
        // Followed by keep-alives, endlessly: the call must not wait for its deadline.
        Misbehaviour::OversizedResponse { bytes: 2 << 20 },
        Misbehaviour::HugeEvent { bytes: 100 << 20 },
    ] {
        let (err, peak, took) = measure(Duration::from_secs(30), async {
            let server = start(m.clone()).await;
            let client = Client::connect(&server.url(), limited(limit))
                .await
                .expect("connect");
            client
                .call_tool("t", json!({}), Retry::IfSafe)
                .await
                .expect_err("the response is over the limit")
        });
        assert_decode_limit(&err, limit);
        assert!(took < Duration::from_secs(20), "{m:?}: {took:?}");
        assert!(peak < 3 * limit + 4 * MIB, "{m:?}: peak {} MiB", peak / MIB);
    }
}

#[test]
fn tiny_events_in_big_chunks_stay_in_bounded_memory_until_the_deadline() {
    let (err, peak, took) = measure(Duration::from_secs(30), async {
        let server = start(Misbehaviour::TinyEvents { chunk: MIB }).await;
        let mut config = config();
        config.call_timeout(Some(Duration::from_secs(3)));
        let client = Client::connect(&server.url(), config)
            .await
            .expect("connect");
        client
            .call_tool("t", json!({}), Retry::IfSafe)
            .await
            .expect_err("never a response")
    });
    assert!(
        matches!(err, ClientError::Timeout(t) if t == Duration::from_secs(3)),
        "{err}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    // Before: every 15-byte event kept its 1 MiB chunk alive.
    assert!(peak < 24 * MIB, "peak {} MiB", peak / MIB);
}

// ---- deadlines ----

#[test]
fn trickles_end_at_the_calls_deadline() {
    let deadline = Duration::from_millis(1500);
    for m in [
        Misbehaviour::SlowLoris {
            every: Duration::from_millis(50),
        },
        Misbehaviour::SlowHead {
            every: Duration::from_millis(50),
        },
        Misbehaviour::EndlessPriming {
            every: Duration::from_millis(20),
        },
    ] {
        let (err, _, took) = measure(Duration::from_secs(20), async {
            let server = start(m.clone()).await;
            let mut config = config();
            config.call_timeout(Some(deadline));
            let client = Client::connect(&server.url(), config)
                .await
                .expect("connect");
            client
                .call_tool("t", json!({}), Retry::IfSafe)
                .await
                .expect_err("never a response")
        });
        assert!(
            matches!(err, ClientError::Timeout(t) if t == deadline),
            "{m:?}: {err}"
        );
        assert!(took >= deadline && took < deadline * 4, "{m:?}: {took:?}");
    }
}

#[test]
fn the_defaults_bound_every_call() {
    let config = ClientConfig::default();
    let text = format!("{config:?}");
    assert!(text.contains("call_timeout: Some(600s)"), "{text}");
    assert_eq!(resume::DEFAULT_IDLE_TIMEOUT, Duration::from_secs(300));
    assert_eq!(resume::DEFAULT_MIN_DELAY, Duration::from_millis(250));
    assert_eq!(ssegate::client::DEFAULT_MAX_ERROR_BODY, 1024);
    assert_eq!(
        ssegate::client::DEFAULT_CALL_TIMEOUT,
        Duration::from_secs(600)
    );
}

// ---- another stream's events ----

#[test]
fn another_streams_events_after_a_boundary_cut_are_refused_never_returned() {
    for shape in [IdShape::Slash, IdShape::Dash] {
        for priming_only in [false, true] {
            let (result, _, _) = measure(Duration::from_secs(20), async {
                let server = start(Misbehaviour::ForeignStream {
                    priming_only,
                    shape,
                })
                .await;
                let client = Client::connect(&server.url(), config())
                    .await
                    .expect("connect");
                let result = client.call_tool("t", json!({}), Retry::IfSafe).await;
                (result, tool_calls(&server))
            });
            let (result, calls) = result;
            let case = format!("{shape:?}, priming only {priming_only}");
            let err = match result {
                Ok(r) => panic!(
                    "{case}: another stream's result was returned: {:?}",
                    r.message.to_bytes()
                ),
                Err(e) => e,
            };
            assert!(
                matches!(&err, ClientError::OutcomeUnknown { .. })
                    && matches!(
                        refusal_kind(&err),
                        Some(RefusalKind::StreamRestarted {
                            why: Restart::OtherStream,
                            ..
                        })
                    ),
                "{case}: {err}"
            );
            assert_eq!(calls, 1, "{case}: the tool is not run again");
        }
    }
}

// ---- redirects ----

fn with_credentials(mut config: ClientConfig) -> ClientConfig {
    config
        .header(
            HeaderName::from_static("x-api-key"),
            HeaderValue::from_static("secret-key"),
        )
        .bearer_token("secret-token")
        .unwrap();
    config
}

fn carries_credentials(r: &ssegate_testkit::hostile::Recorded) -> bool {
    r.header("x-api-key").is_some()
        || r.header("authorization").is_some()
        || r.header("mcp-session-id").is_some()
}

#[test]
fn a_redirect_is_refused_by_default_and_nothing_reaches_the_other_origin() {
    let (out, _, _) = measure(Duration::from_secs(20), async {
        let other = start(Misbehaviour::Honest).await;
        let server = start(Misbehaviour::Redirect {
            status: 307,
            location: other.url(),
        })
        .await;
        let err = Client::connect(&server.url(), with_credentials(config()))
            .await
            .expect_err("a redirect is not followed");
        (err, other.url(), other.requests().len())
    });
    let (err, location, reached) = out;
    assert!(
        matches!(&err, ClientError::Redirect { status: 307, location: Some(l), .. } if *l == location),
        "{err}"
    );
    assert_eq!(reached, 0, "the other origin received a request");
}

#[test]
fn a_followed_redirect_to_another_origin_carries_no_configured_header() {
    let (out, _, _) = measure(Duration::from_secs(20), async {
        let other = start(Misbehaviour::Honest).await;
        let server = start(Misbehaviour::Redirect {
            status: 307,
            location: other.url(),
        })
        .await;
        let mut config = with_credentials(config());
        config.redirects(Redirects::Follow { max_hops: 2 });
        let client = Client::connect(&server.url(), config)
            .await
            .expect("followed");
        let response = client
            .call_tool("t", json!({}), Retry::IfSafe)
            .await
            .expect("the honest server answers");
        (
            response.message.to_bytes(),
            other.requests(),
            server.requests(),
        )
    });
    let (message, reached, first) = out;
    assert!(String::from_utf8_lossy(&message).contains("\"ok\""));
    assert!(reached.len() >= 3, "{reached:?}");
    assert!(
        !reached.iter().any(carries_credentials),
        "a configured header reached the other origin: {reached:?}"
    );
    // The endpoint itself got them.
    assert!(first.iter().all(|r| r.header("x-api-key").is_some()));
    // The body of a 307 is sent again (the request is the same).
    // (The client's first request asks whether the server speaks 2026-07-28.)
    assert_eq!(reached[0].rpc_method().as_deref(), Some("server/discover"));
}

#[test]
fn redirects_that_change_the_method_or_loop_are_typed_errors() {
    let (out, _, _) = measure(Duration::from_secs(20), async {
        let other = start(Misbehaviour::Honest).await;
        let see_other = start(Misbehaviour::Redirect {
            status: 303,
            location: other.url(),
        })
        .await;
        let mut config = with_credentials(config());
        config.redirects(Redirects::Follow { max_hops: 3 });
        let changed = Client::connect(&see_other.url(), config.clone())
            .await
            .expect_err("303 is not followed");
        let looping = start(Misbehaviour::Redirect {
            status: 308,
            location: "/elsewhere".into(),
        })
        .await;
        let looped = Client::connect(&looping.url(), config)
            .await
            .expect_err("a loop");
        (changed, looped, other.requests().len(), looping.requests())
    });
    let (changed, looped, reached, same_origin) = out;
    assert!(
        matches!(changed, ClientError::Redirect { status: 303, .. }),
        "{changed}"
    );
    assert_eq!(reached, 0);
    assert!(
        matches!(looped, ClientError::TooManyRedirects { hops: 3, .. }),
        "{looped}"
    );
    // Within the origin every header stays.
    assert_eq!(same_origin.len(), 4);
    assert!(same_origin.iter().all(|r| r.header("x-api-key").is_some()));
}

// ---- resumes the server refuses, storms ----

#[test]
fn a_busy_or_refused_resume_ends_in_bounded_time_with_the_clamped_delay_reported() {
    for status in [503u16, 409] {
        let (err, _, took) = measure(Duration::from_secs(20), async {
            let server = start(Misbehaviour::ResumeBusy {
                status,
                retry_after: "999999999".into(),
            })
            .await;
            let client = Client::connect(&server.url(), config())
                .await
                .expect("connect");
            client
                .call_tool("t", json!({}), Retry::IfSafe)
                .await
                .expect_err("never resumed")
        });
        assert!(
            matches!(err, ClientError::OutcomeUnknown { .. }),
            "{status}: {err}"
        );
        let text = err.to_string();
        // The delay honoured is the clamp (200 ms in these tests), and that is what is printed.
        assert!(text.contains("200 ms"), "{status}: {text}");
        assert!(!text.contains("999999999"), "{status}: {text}");
        assert!(took < Duration::from_secs(5), "{status}: {took:?}");
    }
}

#[test]
fn a_reconnect_storm_is_held_to_the_floor() {
    let floor = Duration::from_millis(200);
    let deadline = Duration::from_secs(2);
    let (out, _, _) = measure(Duration::from_secs(20), async {
        let server = start(Misbehaviour::RetryStorm).await;
        let mut stream = resume::StreamConfig::default();
        stream.min_delay(floor);
        let mut config = config();
        config.stream(stream).call_timeout(Some(deadline));
        let client = Client::connect(&server.url(), config)
            .await
            .expect("connect");
        let err = client
            .call_tool("t", json!({}), Retry::IfSafe)
            .await
            .expect_err("never a response");
        let gets = server
            .requests()
            .iter()
            .filter(|r| r.method == "GET")
            .count();
        (err, gets)
    });
    let (err, gets) = out;
    // Before: `retry: 0` made 32 resumes in a fraction of a second.
    assert!(matches!(err, ClientError::Timeout(_)), "{err}");
    let most = (deadline.as_millis() / floor.as_millis()) as usize + 1;
    assert!(
        gets <= most,
        "{gets} resumes in {deadline:?} (at most {most})"
    );
}

#[test]
fn a_busy_answer_to_a_safe_call_is_retried_after_its_retry_after() {
    let (out, _, took) = measure(Duration::from_secs(20), async {
        let server = start(Misbehaviour::PostBusy {
            times: 2,
            retry_after: "1".into(),
        })
        .await;
        // Delays clamped at 5 s here: the server's second is honoured.
        let mut stream = resume::StreamConfig::default();
        stream.max_delay(Duration::from_secs(5));
        let mut honoured = config();
        honoured.stream(stream);
        let client = Client::connect(&server.url(), honoured)
            .await
            .expect("connect");
        let tools = client.list_tools().await;
        let busy = start(Misbehaviour::PostBusy {
            times: 10,
            retry_after: "0".into(),
        })
        .await;
        let client = Client::connect(&busy.url(), config())
            .await
            .expect("connect");
        (tools, client.list_tools().await)
    });
    let (tools, always_busy) = out;
    assert_eq!(tools.expect("the third attempt is answered").len(), 1);
    assert!(
        took >= Duration::from_secs(2),
        "Retry-After: 1 twice, {took:?}"
    );
    assert!(
        matches!(always_busy, Err(ClientError::Status { status: 503, .. })),
        "{always_busy:?}"
    );
}

// ---- answers that are not HTTP ----

#[test]
fn an_invalid_response_head_is_typed_and_never_issued_again() {
    for m in [
        Misbehaviour::MalformedHead,
        Misbehaviour::HugeHead { bytes: MIB },
    ] {
        let (out, _, _) = measure(Duration::from_secs(20), async {
            let server = start(m.clone()).await;
            let client = Client::connect(&server.url(), config())
                .await
                .expect("connect");
            // Even a call the caller marks safe to repeat: the answer is the server's, not a cut.
            let err = client
                .call_tool("t", json!({}), Retry::Always)
                .await
                .expect_err("invalid");
            (err, tool_calls(&server))
        });
        let (err, calls) = out;
        assert!(
            matches!(err, ClientError::InvalidResponse { .. }),
            "{m:?}: {err}"
        );
        assert_eq!(calls, 1, "{m:?}: issued again");
    }
}
