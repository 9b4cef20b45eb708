//! The sans-IO resumable stream's timing and budget rules, driven with a synthetic clock.
//!
//! Each test states a rule from the outside (what a driver sees: outputs, deadlines, reconnects)
//! without looking at the stream's internals.

use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use ssegate::message::RpcId;
use ssegate::resume::RefusalKind;
use ssegate::resume::{
    Answer, EndCause, Failure, Output, Reconnect, ReconnectResponse, ResumableStream, StreamConfig,
    parse_retry_after,
};

const RESULT: &[u8] = b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"ok\":true}}\n\n";

/// Drains the stream; returns every output.
fn drain(stream: &mut ResumableStream) -> Vec<Output> {
    std::iter::from_fn(|| stream.poll()).collect()
}

/// Advances the synthetic clock to each deadline until a reconnect comes out.
fn next_reconnect(stream: &mut ResumableStream, now: &mut Instant) -> Reconnect {
    for _ in 0..100 {
        for out in drain(stream) {
            match out {
                Output::Reconnect(r) => return r,
                Output::Failed(f) => panic!("failed instead of reconnecting: {f}"),
                _ => {}
            }
        }
        *now = stream
            .poll_timeout()
            .expect("a deadline while waiting to reconnect");
        stream.handle_timeout(*now);
    }
    panic!("no reconnect");
}

fn failure(outputs: Vec<Output>) -> Option<Failure> {
    outputs.into_iter().find_map(|o| match o {
        Output::Failed(f) => Some(f),
        _ => None,
    })
}

fn stream_with(config: &mut StreamConfig) -> ResumableStream {
    let mut s = config.build();
    s.expect_response(RpcId::Number(1));
    s
}

fn cut_after_priming(stream: &mut ResumableStream, now: Instant, id: &'static [u8]) {
    let mut frame = b"id: ".to_vec();
    frame.extend_from_slice(id);
    frame.extend_from_slice(b"\ndata:\n\ndata: {\"jsonrpc\"");
    stream.feed(Bytes::from(frame), now);
    stream.connection_ended(EndCause::Error, now);
}

#[test]
fn the_reconnect_waits_the_servers_retry_clamped_by_max_delay() {
    let mut config = StreamConfig::default();
    config.max_delay(Duration::from_secs(5));
    let mut s = stream_with(&mut config);
    let t0 = Instant::now();
    // A hostile server asks for 10^12 ms.
    s.feed(
        Bytes::from_static(b"retry: 1000000000000\nid: a\ndata:\n\n"),
        t0,
    );
    s.connection_ended(EndCause::Eof, t0);
    let outs = drain(&mut s);
    assert!(
        matches!(outs.last(), Some(Output::Disconnected(_))),
        "{outs:?}"
    );
    assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(5)));
    s.handle_timeout(t0 + Duration::from_secs(4));
    assert!(s.poll().is_none(), "nothing before the deadline");
    let mut now = t0;
    let r = next_reconnect(&mut s, &mut now);
    assert_eq!(now, t0 + Duration::from_secs(5));
    assert_eq!(r.last_event_id.as_deref(), Some(&b"a"[..]));
}

#[test]
fn last_event_id_carries_the_ids_exact_bytes() {
    let mut s = stream_with(&mut StreamConfig::default());
    let t0 = Instant::now();
    // Not UTF-8: no lossy conversion may touch it.
    s.feed(Bytes::from_static(b"id: caf\xe9-\xff\ndata:\n\n"), t0);
    s.connection_ended(EndCause::Error, t0);
    let mut now = t0;
    let r = next_reconnect(&mut s, &mut now);
    assert_eq!(r.last_event_id.as_deref(), Some(&b"caf\xe9-\xff"[..]));
}

#[test]
fn the_replay_deadline_runs_while_no_bytes_arrive_not_while_bytes_arrive() {
    let mut s = stream_with(StreamConfig::default().replay_timeout(Duration::from_secs(2)));
    let t0 = Instant::now();
    cut_after_priming(&mut s, t0, b"p");
    let mut now = t0;
    next_reconnect(&mut s, &mut now);
    assert_eq!(
        s.reconnect_response(&ReconnectResponse::event_stream(), now),
        Answer::Read
    );
    // A slow replay: a few bytes every second for 10 s, far longer than the replay timeout.
    let body = b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"slow but steady\"}\n\n";
    for piece in body.chunks(6) {
        now += Duration::from_secs(1);
        if let Some(deadline) = s.poll_timeout()
            && deadline <= now
        {
            s.handle_timeout(deadline);
        }
        s.feed(Bytes::copy_from_slice(piece), now);
        let outs = drain(&mut s);
        assert!(failure(outs).is_none(), "refused while bytes were arriving");
    }
    assert!(!s.is_done());
    assert_eq!(s.guard().stats().delivered, 1);

    // The same resume with silence refuses once the timeout has passed since the last byte.
    let mut s = stream_with(StreamConfig::default().replay_timeout(Duration::from_secs(2)));
    cut_after_priming(&mut s, t0, b"p");
    let mut now = t0;
    next_reconnect(&mut s, &mut now);
    let _ = s.reconnect_response(&ReconnectResponse::event_stream(), now);
    let deadline = s.poll_timeout().expect("a replay deadline");
    assert_eq!(deadline, now + Duration::from_secs(2));
    s.handle_timeout(deadline);
    let f = failure(drain(&mut s)).expect("held open with nothing: refused");
    assert!(matches!(
        f.refusal().map(|e| &e.kind),
        Some(RefusalKind::ReplayMissed { waited: Some(_) })
    ));
}

#[test]
fn an_idle_connection_is_a_cut_to_resume() {
    let mut config = StreamConfig::default();
    config.idle_timeout(Some(Duration::from_secs(30)));
    let mut s = stream_with(&mut config);
    let t0 = Instant::now();
    s.feed(Bytes::from_static(b"id: 41\ndata:\n\n"), t0);
    let _ = drain(&mut s);
    assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(30)));
    s.handle_timeout(t0 + Duration::from_secs(30));
    let outs = drain(&mut s);
    assert!(
        matches!(outs.as_slice(), [Output::Disconnected(r)] if r.needed),
        "{outs:?}"
    );
    assert!(!s.is_open(), "the idle connection must be dropped");
    let mut now = t0;
    let r = next_reconnect(&mut s, &mut now);
    assert_eq!(r.last_event_id.as_deref(), Some(&b"41"[..]));
}

#[test]
fn no_reconnect_comes_sooner_than_the_jittered_floor_whatever_the_server_asks() {
    // `retry: 0` and an immediate reconnect failure: without a floor, a reconnect storm.
    let floor = Duration::from_millis(200);
    let mut config = StreamConfig::default();
    config.min_delay(floor).backoff(Duration::ZERO);
    let mut s = stream_with(&mut config);
    let t0 = Instant::now();
    s.feed(Bytes::from_static(b"retry: 0\n"), t0);
    cut_after_priming(&mut s, t0, b"p");
    let mut now = t0;
    let mut waits = Vec::new();
    let mut before = now;
    let _ = next_reconnect(&mut s, &mut now);
    waits.push(now - before);
    for _ in 0..4 {
        s.reconnect_failed(now);
        before = now;
        let _ = next_reconnect(&mut s, &mut now);
        waits.push(now - before);
    }
    for w in &waits {
        assert!(
            *w >= floor && *w <= floor * 3 / 2,
            "{w:?} outside [{floor:?}, 1.5x]"
        );
    }
    // Jittered: not all the same.
    assert!(waits.windows(2).any(|w| w[0] != w[1]), "{waits:?}");
    // The floor never exceeds the clamp.
    let mut config = StreamConfig::default();
    config
        .min_delay(Duration::from_secs(10))
        .max_delay(Duration::from_secs(1));
    let mut s = stream_with(&mut config);
    cut_after_priming(&mut s, t0, b"p");
    let mut now = t0;
    let _ = next_reconnect(&mut s, &mut now);
    assert_eq!(now - t0, Duration::from_secs(1));
}

#[test]
fn two_streams_back_off_on_different_schedules_unless_seeded() {
    // The jitter is seeded from the OS per stream, also for the streams built from one configuration
    // (a client's): a fleet cut by one server restart does not come back in lockstep.
    let mut config = StreamConfig::default();
    config.backoff(Duration::from_millis(100));
    let schedule = |config: &mut StreamConfig| {
        let mut s = stream_with(config);
        let t0 = Instant::now();
        cut_after_priming(&mut s, t0, b"p");
        let mut now = t0;
        let mut at = vec![];
        let _ = next_reconnect(&mut s, &mut now);
        at.push(now - t0);
        for _ in 0..3 {
            s.reconnect_failed(now);
            let _ = next_reconnect(&mut s, &mut now);
            at.push(now - t0);
        }
        at
    };
    let (a, b) = (schedule(&mut config), schedule(&mut config));
    assert_ne!(a, b);
    // A seed makes it reproducible.
    config.jitter_seed(7);
    let (a, b) = (schedule(&mut config), schedule(&mut config));
    assert_eq!(a, b);
}

#[test]
fn failed_reconnects_back_off_with_jitter_then_give_up() {
    let mut config = StreamConfig::default();
    config
        .backoff(Duration::from_millis(100))
        .min_delay(Duration::ZERO)
        .max_reconnect_attempts(4);
    let mut s = stream_with(&mut config);
    let t0 = Instant::now();
    cut_after_priming(&mut s, t0, b"p");
    let mut now = t0;
    let first = next_reconnect(&mut s, &mut now);
    assert_eq!(first.attempt, 1);
    let mut waits = Vec::new();
    for attempt in 2..=4 {
        s.reconnect_failed(now);
        let before = now;
        let r = next_reconnect(&mut s, &mut now);
        assert_eq!(r.attempt, attempt);
        waits.push(now - before);
    }
    // Exponential with jitter: attempt k waits within [50 %, 100 %] of 100 ms * 2^(k-2).
    for (k, w) in waits.iter().enumerate() {
        let full = Duration::from_millis(100) * (1 << k);
        assert!(*w >= full / 2 && *w <= full, "wait {k}: {w:?} vs {full:?}");
    }
    s.reconnect_failed(now);
    let f = failure(drain(&mut s)).expect("gave up");
    assert!(
        matches!(f, Failure::ReconnectFailed { attempts: 4, .. }),
        "{f}"
    );
    assert!(f.must_renegotiate());
    assert_eq!(f.outstanding(), &[RpcId::Number(1)]);
}

#[test]
fn busy_answers_wait_the_servers_retry_after_and_are_bounded() {
    let mut config = StreamConfig::default();
    config
        .max_reconnect_attempts(3)
        .max_delay(Duration::from_secs(30));
    let mut s = stream_with(&mut config);
    let t0 = Instant::now();
    cut_after_priming(&mut s, t0, b"p");
    let mut now = t0;
    next_reconnect(&mut s, &mut now);
    let busy = ReconnectResponse::from_raw(503, Some(b"7"), None, SystemTime::now());
    assert_eq!(s.reconnect_response(&busy, now), Answer::Drop);
    let before = now;
    next_reconnect(&mut s, &mut now);
    assert_eq!(now - before, Duration::from_secs(7));
    // A decades-long Retry-After is clamped.
    let hostile = ReconnectResponse::from_raw(429, Some(b"999999999999"), None, SystemTime::now());
    let _ = s.reconnect_response(&hostile, now);
    let before = now;
    next_reconnect(&mut s, &mut now);
    assert_eq!(now - before, Duration::from_secs(30));
    let _ = s.reconnect_response(&busy, now);
    let f = failure(drain(&mut s)).expect("busy too often");
    assert!(
        matches!(&f, Failure::ReconnectFailed { last: Some(e), .. } if matches!(e.kind, RefusalKind::Busy { status: 503, .. })),
        "{f}"
    );
}

#[test]
fn resumes_must_make_progress() {
    let mut config = StreamConfig::default();
    config.max_stalled_resumes(3).max_delay(Duration::ZERO);
    let mut s = stream_with(&mut config);
    let t0 = Instant::now();
    let mut now = t0;
    cut_after_priming(&mut s, now, b"p");
    // A proxy that always cuts at the same byte inside the replayed event.
    let mut resumes = 0;
    let f = loop {
        let outs = drain(&mut s);
        if let Some(f) = failure(outs) {
            break f;
        }
        next_reconnect(&mut s, &mut now);
        let _ = s.reconnect_response(&ReconnectResponse::event_stream(), now);
        resumes += 1;
        s.feed(
            Bytes::from_static(b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"re"),
            now,
        );
        s.connection_ended(EndCause::Error, now);
        assert!(resumes < 10, "looped");
    };
    assert!(matches!(f, Failure::NoProgress { resumes: 3, .. }), "{f}");
}

#[test]
fn resumes_are_bounded_over_the_streams_life() {
    let mut config = StreamConfig::default();
    config.max_resumes(2).max_delay(Duration::ZERO);
    let mut s = stream_with(&mut config);
    let mut now = Instant::now();
    for n in 0..3u8 {
        // Each connection makes progress (a new notification), then is cut.
        let frame = format!(
            "id: n{n}\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progress\":{n}}}}}\n\n"
        );
        s.feed(Bytes::from(frame), now);
        s.connection_ended(EndCause::Error, now);
        if n < 2 {
            next_reconnect(&mut s, &mut now);
            let _ = s.reconnect_response(&ReconnectResponse::event_stream(), now);
        }
    }
    let f = failure(drain(&mut s)).expect("over budget");
    assert!(
        matches!(f, Failure::TooManyResumes { resumes: 2, .. }),
        "{f}"
    );
}

#[test]
fn a_stream_with_nothing_outstanding_finishes_unless_kept_open() {
    let mut s = ResumableStream::new();
    s.expect_response(RpcId::Number(1));
    let now = Instant::now();
    s.feed(Bytes::from_static(RESULT), now);
    s.connection_ended(EndCause::Eof, now);
    let outs = drain(&mut s);
    assert!(
        matches!(outs.as_slice(), [Output::Deliver(_), Output::Finished]),
        "{outs:?}"
    );
    assert!(s.is_done() && s.poll_timeout().is_none());

    let mut s = StreamConfig::default().keep_open(true).build();
    s.feed(Bytes::from_static(b"id: g1\ndata:\n\n"), now);
    s.connection_ended(EndCause::Eof, now);
    let mut at = now;
    let r = next_reconnect(&mut s, &mut at);
    assert_eq!(r.last_event_id.as_deref(), Some(&b"g1"[..]));
}

#[test]
fn bytes_after_the_connection_ended_are_never_decoded() {
    let mut s = stream_with(&mut StreamConfig::default());
    let now = Instant::now();
    cut_after_priming(&mut s, now, b"p");
    // The driver still had bytes of the dead connection buffered.
    s.feed(Bytes::from_static(RESULT), now);
    let outs = drain(&mut s);
    assert!(
        !outs.iter().any(|o| matches!(o, Output::Deliver(_))),
        "{outs:?}"
    );
}

#[test]
fn retry_after_parses_both_forms() {
    let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
    assert_eq!(
        parse_retry_after(b" 120 ", now),
        Some(Duration::from_secs(120))
    );
    assert_eq!(
        parse_retry_after(b"Wed, 21 Oct 2015 07:30:00 GMT", now),
        Some(Duration::from_secs(120))
    );
    assert_eq!(
        parse_retry_after(b"Wed, 21 Oct 2015 07:00:00 GMT", now),
        Some(Duration::ZERO),
        "a date in the past is now"
    );
    assert_eq!(parse_retry_after(b"soon", now), None);
    assert_eq!(parse_retry_after(b"-5", now), None);
    assert_eq!(
        parse_retry_after(b"99999999999999999999999", now),
        Some(Duration::from_secs(u64::MAX)),
        "saturates; the stream clamps it"
    );
}

#[test]
fn a_refused_reconnect_fails_the_stream_at_the_next_poll() {
    let mut s = stream_with(&mut StreamConfig::default());
    let mut now = Instant::now();
    cut_after_priming(&mut s, now, b"p");
    next_reconnect(&mut s, &mut now);
    let gone = ReconnectResponse::from_raw(409, Some(b"3"), None, SystemTime::now());
    assert_eq!(s.reconnect_response(&gone, now), Answer::Drop);
    let f = failure(drain(&mut s)).expect("409 refuses");
    assert!(matches!(
        f.refusal().map(|e| &e.kind),
        Some(RefusalKind::ReplayUnavailable { status: Some(409), retry_after: Some(d) }) if *d == Duration::from_secs(3)
    ));
    assert!(s.is_done() && s.poll().is_none());
}

#[test]
fn a_response_on_the_get_stream_releases_the_cut_post_stream() {
    use ssegate::resume::Session;
    let session = Session::default();
    let mut post = session.request_stream(RpcId::Number(1));
    let mut get = session.listen_stream();
    let now = Instant::now();
    // The POST stream is cut inside the result...
    post.feed(
        Bytes::from_static(b"id: p1\ndata:\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"res"),
        now,
    );
    // ...and the server delivers the response on the GET stream instead.
    get.feed(
        Bytes::from_static(b"id: g1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"),
        now,
    );
    assert!(matches!(drain(&mut get).as_slice(), [Output::Deliver(_)]));
    assert!(session.outstanding().is_empty());
    post.connection_ended(EndCause::Error, now);
    let outs = drain(&mut post);
    assert!(
        matches!(outs.as_slice(), [Output::Cursor(_), Output::Finished]),
        "nothing left to resume for: {outs:?}"
    );
    // A second, identical copy of the response on another stream is skipped; a different one refused.
    let mut other = session.request_stream(RpcId::Number(2));
    other.feed(
        Bytes::from_static(b"id: x1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"),
        now,
    );
    assert!(matches!(drain(&mut other).as_slice(), [Output::Skip(_)]));
    other.feed(
        Bytes::from_static(
            b"id: x2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":1}}\n\n",
        ),
        now,
    );
    assert!(failure(drain(&mut other)).is_some());
}

/// Setting one timing value keeps every other setting: `guard(g).replay_timeout(t)` once replaced
/// `g` (its policy, nesting limit, instruction-set cap and window) with the defaults.
#[cfg(feature = "client")]
#[test]
fn the_replay_timeout_keeps_the_guards_settings() {
    use ssegate::client::ClientConfig;
    use ssegate::resume::Policy;

    let mut g = ssegate::resume::GuardConfig::default();
    g.policy(Policy::Strict).max_depth(8);
    let mut client = ClientConfig::default();
    client.guard(g).replay_timeout(Duration::from_secs(3));
    // Edited in place, too: nothing else moves.
    client.stream_mut().guard_mut().window(64);
    let config = client.stream_ref().clone();

    let mut s = config.build();
    assert_eq!(s.replay_timeout(), Duration::from_secs(3));
    s.expect_response(RpcId::Number(1));
    // Strict: a cut inside an event is refused, not resumed.
    let t0 = Instant::now();
    cut_after_priming(&mut s, t0, b"p");
    let f = failure(drain(&mut s)).expect("strict refuses the partial event");
    assert!(
        matches!(
            f.refusal().map(|e| &e.kind),
            Some(RefusalKind::PartialEvent { .. })
        ),
        "{f}"
    );
    // Nesting limit 8: a message 9 levels deep is refused.
    let mut s = config.build();
    let deep = format!(
        "id: 1\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{}{}}}\n\n",
        "[".repeat(8),
        "]".repeat(8)
    );
    s.feed(Bytes::from(deep), t0);
    let f = failure(drain(&mut s)).expect("too deep");
    assert!(
        matches!(
            f.refusal().map(|e| &e.kind),
            Some(RefusalKind::InvalidMessage { .. })
        ),
        "{f}"
    );
}
