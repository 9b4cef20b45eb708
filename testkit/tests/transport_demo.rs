//! The guarded client against the loopback server in every resume mode, behind the fault-injecting
//! proxy, over hundreds of random cuts: the exact result, or a typed refusal followed by a
//! renegotiated retry that delivers it; never a corrupt result. The naive client, same cuts, does
//! deliver corrupt results, so the fault injection is real.

use std::time::Duration;

use serde_json::{Value, json};

use ssegate::client::{Client, ClientConfig, ClientError, ProtocolError, Response, Retry};
use ssegate::gate::Verdict;
use ssegate::resume::RefusalKind;
use ssegate_testkit::demo::{ClientKind, DemoConfig, Harness, Region, TrialClass};
use ssegate_testkit::server::{ServerConfig, ServerMode};

const SIZE: usize = 128 << 10;
const GUARDED_TRIALS: usize = 104;
const NAIVE_TRIALS: usize = 24;
const LIMIT: Duration = Duration::from_secs(240);

fn config() -> DemoConfig {
    let mut c = DemoConfig::default();
    c.size(SIZE)
        .seed(0xC0FFEE)
        .reconnect_delay(Duration::ZERO)
        .retry_ms(5)
        .replay_timeout(Duration::from_millis(500))
        .trial_timeout(Duration::from_secs(20));
    c
}

#[derive(Debug, Default)]
struct Tally {
    intact_direct: usize,
    resumed: usize,
    renegotiated: usize,
    regions: [usize; 4],
}

/// >= 100 guarded trials in one mode; every one must deliver the exact result.
async fn guarded_mode(mode: ServerMode) -> Tally {
    let harness = Harness::start(mode, &config()).await.unwrap();
    let layout = *harness.layout();
    assert!(layout.small_start < layout.big_start && layout.big_start < layout.big_end);
    assert!(layout.big_end - layout.big_start > SIZE as u64);
    let mut tally = Tally::default();
    for (region, cut) in layout.plan(0x5EED ^ mode as u64, GUARDED_TRIALS) {
        tally.regions[Region::ALL.iter().position(|r| *r == region).unwrap()] += 1;
        let response = match harness.guarded_call(cut, Retry::Always).await {
            Ok(r) => r,
            Err(e) => panic!("{mode} cut {cut} ({region:?}): the guarded client gave up: {e}"),
        };
        assert!(
            harness.is_expected(response.message.data()),
            "{mode} cut {cut} ({region:?}): SILENT CORRUPTION: {} bytes delivered, outcome {:?}",
            response.message.len(),
            response.outcome
        );
        let o = &response.outcome;
        if mode.is_stateless() {
            // Nothing to resume, no session to renegotiate: a refusal is followed by the call
            // issued again as a new request.
            assert_eq!(
                (o.resumes, o.renegotiations),
                (0, 0),
                "{mode} cut {cut}: {o:?}"
            );
            assert_eq!(
                o.attempts,
                o.refusals.len() as u32 + 1,
                "{mode} cut {cut}: {o:?}"
            );
            assert!(o.attempts <= 2, "one cut, one re-issue at most: {o:?}");
            if o.attempts > 1 {
                tally.renegotiated += 1;
            } else if o.task_rereads > 0 {
                // A task's result read again after its read was cut: the call ran once.
                tally.resumed += 1;
            } else {
                tally.intact_direct += 1;
            }
            continue;
        }
        // A refusal is always followed by a renegotiation, and each renegotiation by a refusal.
        assert_eq!(
            o.refusals.len() as u32,
            o.renegotiations,
            "{mode} cut {cut}: {o:?}"
        );
        assert_eq!(o.attempts, o.renegotiations + 1);
        assert!(
            o.renegotiations <= 1,
            "one cut, one renegotiation at most: {o:?}"
        );
        if o.renegotiations > 0 {
            tally.renegotiated += 1;
        } else if o.resumes > 0 {
            tally.resumed += 1;
        } else {
            tally.intact_direct += 1;
        }
    }
    let proxy = harness.proxy().stats();
    assert!(
        proxy.cuts as usize >= GUARDED_TRIALS * 9 / 10,
        "{mode}: cuts {proxy:?}"
    );
    assert_eq!(
        harness.server().session_count(),
        0,
        "{mode}: every session was deleted"
    );
    harness.shutdown().await;
    tally
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_client_never_delivers_a_corrupt_result() {
    tokio::time::timeout(LIMIT, async {
        let tallies =
            futures::future::join_all(ServerMode::ALL.into_iter().map(guarded_mode)).await;
        for (mode, t) in ServerMode::ALL.into_iter().zip(&tallies) {
            eprintln!("{mode}: {t:?}");
            assert_eq!(t.intact_direct + t.resumed + t.renegotiated, GUARDED_TRIALS);
            assert!(t.regions.iter().all(|&n| n >= GUARDED_TRIALS / 4));
            match mode {
                // Replays that continue the stream are taken in place.
                ServerMode::Buffered
                | ServerMode::Boundary
                | ServerMode::Resend
                | ServerMode::Tasks => {
                    assert!(t.resumed > GUARDED_TRIALS / 2, "{mode}: {t:?}")
                }
                // A stream the server cannot (or will not) continue is refused and re-issued.
                ServerMode::Strict
                | ServerMode::Restart
                | ServerMode::Empty
                | ServerMode::Stateless => {
                    assert!(t.renegotiated > GUARDED_TRIALS / 2, "{mode}: {t:?}")
                }
            }
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naive_client_corrupts_under_restart_and_boundary() {
    tokio::time::timeout(LIMIT, async {
        for mode in [ServerMode::Restart, ServerMode::Boundary] {
            let harness = Harness::start(mode, &config()).await.unwrap();
            let mut corrupt = 0;
            for (region, cut) in harness.layout().plan(77, NAIVE_TRIALS) {
                let t = harness.trial(ClientKind::Naive, cut).await;
                if t.class == TrialClass::SilentCorruption {
                    corrupt += 1;
                }
                // The same cut, guarded: never corrupt.
                let g = harness.trial(ClientKind::Guarded, cut).await;
                assert_eq!(
                    g.class,
                    TrialClass::Intact,
                    "{mode} {region:?} {cut}: {g:?}"
                );
            }
            eprintln!("{mode}: naive corrupted {corrupt} of {NAIVE_TRIALS}");
            assert!(corrupt >= 1, "{mode}: the naive client never corrupted");
            harness.shutdown().await;
        }
    })
    .await
    .unwrap();
}

/// A stream the guard refuses, on a tool call neither marked retryable nor annotated idempotent:
/// the outcome is unknown (the server may have run it), nothing delivered, nothing re-issued.
#[tokio::test]
async fn non_retryable_refusal_is_a_typed_error() {
    tokio::time::timeout(LIMIT, async {
        let harness = Harness::start(ServerMode::Restart, &config())
            .await
            .unwrap();
        let layout = *harness.layout();
        let mut cc = ClientConfig::default();
        cc.replay_timeout(Duration::from_millis(500))
            .reuse_connections(false);
        let client = Client::connect_addr(harness.proxy().addr(), cc)
            .await
            .unwrap();
        let first_session = client.session_id().unwrap().to_owned();
        harness
            .proxy()
            .set_next_cut(ssegate_testkit::proxy::Cut::At(
                (layout.big_start + layout.big_end) / 2,
            ));
        let err = client
            .call_tool("big_result", json!({}), Retry::IfSafe)
            .await
            .unwrap_err();
        let ClientError::OutcomeUnknown {
            failure, method, ..
        } = &err
        else {
            panic!("expected an unknown outcome, got {err}");
        };
        assert_eq!(method, "tools/call big_result");
        let error = failure.refusal().expect("the guard refused");
        assert!(
            matches!(error.kind, RefusalKind::StreamRestarted { .. }),
            "{error}"
        );
        assert!(error.must_renegotiate());
        assert!(error.cursor.is_some(), "{error}");
        assert!(err.to_string().contains("restarted the stream"), "{err}");
        assert_eq!(client.session_id(), Some(first_session), "no renegotiation");
        client.close().await.unwrap();
        harness.shutdown().await;
    })
    .await
    .unwrap();
}

/// MCP 2026-07-28 (a stateless server): a call cut inside its result cannot be resumed. The
/// server's call counter is the oracle for how many times the tool ran: the guarded client calling
/// a tool that is not safe to repeat reports the outcome as unknown and ran it once; marked
/// retryable, it issues the call again as a new request (ran twice, the result exact); the naive
/// client issues it again whatever the tool does (ran twice).
#[tokio::test]
async fn a_cut_on_a_stateless_server_runs_the_tool_again_only_when_safe() {
    tokio::time::timeout(LIMIT, async {
        let harness = Harness::start(ServerMode::Stateless, &config())
            .await
            .unwrap();
        let layout = *harness.layout();
        let middle = (layout.big_start + layout.big_end) / 2;
        let calls = || harness.server().stats().calls;

        let before = calls();
        let err = harness.guarded_call(middle, Retry::Never).await.unwrap_err();
        assert!(
            matches!(&err, ClientError::OutcomeUnknown { method, .. } if method == "tools/call big_result"),
            "expected an unknown outcome, got {err}"
        );
        assert_eq!(calls() - before, 1, "ran once: {err}");

        let before = calls();
        let r = harness.guarded_call(middle, Retry::Always).await.unwrap();
        assert!(harness.is_expected(r.message.data()));
        assert_ne!(
            r.message.data().contiguous(),
            *harness.expected(),
            "a new request, a new id"
        );
        assert_eq!((r.outcome.attempts, r.outcome.resumes), (2, 0));
        assert_eq!(calls() - before, 2, "ran twice, as the caller allowed");

        let before = calls();
        let d = harness.naive_call(middle).await.unwrap();
        assert_eq!((d.reissues, d.reconnects), (1, 0));
        assert_eq!(calls() - before, 2, "the naive client ran it again");

        assert_eq!(harness.server().stats().resumes, 0);
        assert_eq!(harness.server().session_count(), 0, "no sessions at all");
        harness.shutdown().await;
    })
    .await
    .unwrap();
}

/// JSON answers (tools/list, unknown tool errors) and one-event SSE answers both come back as messages.
#[tokio::test]
async fn json_and_sse_answers_and_session_lifecycle() {
    tokio::time::timeout(LIMIT, async {
        for sse in [false, true] {
            let mut sc = ServerConfig::default();
            sc.result_size(1000).tools_list_sse(sse).retry_ms(5);
            let server = sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
            let client = Client::connect(&server.url(), ClientConfig::default())
                .await
                .unwrap();
            assert_eq!(server.session_count(), 1);
            let list = client
                .call("tools/list", json!({}), Retry::Always)
                .await
                .unwrap();
            let v: Value = list.message.deserialize().unwrap();
            assert_eq!(v["result"]["tools"][0]["name"], "big_result");
            assert_eq!(list.outcome.resumes, 0);
            let big = client
                .call_tool(
                    "big_result",
                    json!({"size": 1000, "seed": 3}),
                    Retry::Always,
                )
                .await
                .unwrap();
            let expected = ssegate_testkit::server::expected_result(&json!(2), 1000, 3);
            assert!(big.message.data().eq_bytes(&expected));
            assert_eq!(
                big.outcome.other_messages, 3,
                "three progress notifications"
            );
            let unknown = client
                .call_tool("nope", json!({}), Retry::Always)
                .await
                .unwrap();
            let v: Value = unknown.message.deserialize().unwrap();
            assert_eq!(v["error"]["code"], -32602);
            client.close().await.unwrap();
            assert_eq!(server.session_count(), 0);
            server.shutdown().await;
        }
    })
    .await
    .unwrap();
}

/// Ends `session` on the server behind the client's back, as a server restart or an idle timeout does.
async fn expire(addr: std::net::SocketAddr, session: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {addr}\r\nMcp-Session-Id: {session}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await.unwrap();
    assert!(
        answer.starts_with(b"HTTP/1.1 2"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

/// A request on an expired session (404 on the POST itself) was never taken by the server, so it
/// is re-issued on a new session even when it is not marked retryable: nothing ran twice.
#[tokio::test]
async fn expired_session_on_post_renegotiates_even_when_not_retryable() {
    tokio::time::timeout(LIMIT, async {
        let mut sc = ServerConfig::default();
        sc.result_size(1000).retry_ms(5);
        let server = sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let client = Client::connect(&server.url(), ClientConfig::default())
            .await
            .unwrap();
        expire(server.addr(), &client.session_id().unwrap()).await;
        let opened = client.sessions_opened();
        let big = client
            .call_tool(
                "big_result",
                json!({"size": 1000, "seed": 3}),
                Retry::IfSafe,
            )
            .await
            .unwrap();
        assert_eq!(big.outcome.renegotiations, 1);
        assert!(matches!(
            big.outcome.refusals.as_slice(),
            [f] if matches!(f.refusal().map(|e| &e.kind), Some(RefusalKind::SessionExpired))
        ));
        assert_eq!(client.sessions_opened(), opened + 1);
        let stats = server.stats();
        assert_eq!(stats.streams, 1, "the tool ran once: {stats:?}");
        server.shutdown().await;
    })
    .await
    .unwrap();
}

/// `tools/list` in a fresh session of a loopback server with the settings `sc`, the client
/// (`config`) making one attempt; the server is gone when the answer is returned.
async fn list_tools_once(
    sc: &ServerConfig,
    mut config: ClientConfig,
) -> Result<Response, ClientError> {
    let server = sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    config.max_attempts(1);
    let client = Client::connect(&server.url(), config).await.unwrap();
    let list = client.call("tools/list", json!({}), Retry::Always).await;
    client.close().await.unwrap();
    server.shutdown().await;
    list
}

/// The guard's nesting limit (`guard::GuardConfig::max_depth`) judges JSON answers as it judges streamed
/// ones: a `tools/list` answer deeper than the limit is refused either way, and accepted under the
/// default limit.
#[tokio::test]
async fn the_guards_nesting_limit_judges_json_and_sse_answers() {
    tokio::time::timeout(LIMIT, async {
        for sse in [false, true] {
            let mut sc = ServerConfig::default();
            sc.tools_list_sse(sse).retry_ms(5);
            for (limit, accepted) in [(5, false), (1024, true)] {
                let mut config = ClientConfig::default();
                let mut guard = ssegate::resume::GuardConfig::default();
                guard.max_depth(limit);
                config.guard(guard);
                let list = list_tools_once(&sc, config).await;
                assert_eq!(list.is_ok(), accepted, "sse={sse} limit={limit}: {list:?}");
                match list {
                    // Not JSON (too deep), not a cut answer: a JSON body is the server's answer as
                    // is, a streamed one a refused message.
                    Err(ClientError::Protocol(e)) => {
                        assert!(!sse);
                        assert_eq!(e, ProtocolError::JsonBody(Verdict::Invalid));
                    }
                    Err(e) => {
                        assert!(sse, "{e}");
                        let refusal = e.refusal().expect("a refusal");
                        assert!(
                            matches!(refusal.kind, RefusalKind::InvalidMessage { .. }),
                            "{e}"
                        );
                    }
                    Ok(_) => {}
                }
            }
        }
    })
    .await
    .unwrap();
}

/// A whole `application/json` answer is judged as one JSON value: cut JSON is a lost response (the
/// client may re-issue it), two values run together are the server's protocol error (reported as
/// is, never re-issued), and trailing whitespace is accepted.
#[tokio::test]
async fn a_damaged_json_answer_is_typed_by_its_verdict() {
    use ssegate_testkit::server::BodyFault;
    tokio::time::timeout(LIMIT, async {
        let cases = [
            (BodyFault::Truncate(40), "lost"),
            (BodyFault::Append(r#"{"jsonrpc":"2.0"}"#.into()), "trailing"),
            (BodyFault::Append("]".into()), "trailing"),
            (BodyFault::Append(" \r\n\t".into()), "ok"),
        ];
        for (fault, want) in cases {
            let mut sc = ServerConfig::default();
            sc.tools_list_fault(Some(fault.clone()));
            let got = match list_tools_once(&sc, ClientConfig::default()).await {
                Ok(_) => "ok",
                Err(ClientError::Protocol(ProtocolError::JsonBody(Verdict::Trailing))) => {
                    "trailing"
                }
                Err(e) => match e.refusal().map(|r| &r.kind) {
                    Some(RefusalKind::Unresumable {
                        partial_id: None, ..
                    }) => "lost",
                    _ => panic!("{fault:?}: {e}"),
                },
            };
            assert_eq!(got, want, "{fault:?}");
        }
    })
    .await
    .unwrap();
}
