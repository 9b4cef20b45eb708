//! The guard against the one shared model of MCP servers (`ssegate_oracles::guard_model`, also
//! the `guard_model` fuzz target's oracle): for random scenarios (id schemes, priming styles, cut
//! points, chunkings and server behaviours, correct and faulty), a correct server is never refused
//! and its exchange completes; a faulty one never gets a torn, duplicated or reordered message
//! delivered.

use std::time::Duration;

use proptest::prelude::*;
use ssegate::resume::RefusalKind;
use ssegate_oracles::guard_model::{
    Answer, Behaviour, Ids, Oversized, Priming, Scenario, check, play,
};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn the_guard_satisfies_the_server_model(bytes in proptest::collection::vec(any::<u8>(), 0..48)) {
        let scenario = Scenario::from_bytes(&bytes);
        if let Err(e) = check(&scenario) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// Every behaviour, id scheme and priming style is reached by the byte decoding.
#[test]
fn the_scenario_space_is_covered() {
    let mut behaviours = std::collections::HashSet::new();
    for b in 0..=255u8 {
        for c in 0..16u8 {
            let s = Scenario::from_bytes(&[b, c, b.wrapping_mul(7), 0, b, 0]);
            behaviours.insert(format!("{:?}/{:?}/{:?}", s.behaviour, s.ids, s.priming));
        }
    }
    assert!(behaviours.len() >= 7 * 4 * 2, "{}", behaviours.len());
    let s = Scenario::from_bytes(&[0, 0, 0, 0, 1, 0]);
    assert_eq!(s.behaviour, Behaviour::ResendLast);
}

/// Calls registered with the guard and calls that are not are both reached (flags, byte 13).
#[test]
fn registered_and_unregistered_calls_are_reached() {
    let mut bytes = [0u8; 14];
    assert!(Scenario::from_bytes(&bytes).registered);
    bytes[13] = 0b1100;
    assert!(!Scenario::from_bytes(&bytes).registered);
}

/// A second, different response to the call after a resume is refused whether the call was
/// registered or not (cut at the boundary after the priming event, and inside the next event).
#[test]
fn a_second_response_is_refused_registered_or_not() {
    for registered in [true, false] {
        for first_cut in [14, 20] {
            let s = Scenario {
                ids: Ids::Plain,
                priming: Priming::First,
                behaviour: Behaviour::SecondResponse,
                progress: 2,
                result_len: 20,
                first_cut,
                reply_cuts: Vec::new(),
                strict: false,
                chunk: usize::MAX,
                id_after_data: false,
                seed: 1,
                registered,
                ..Scenario::from_bytes(&[])
            };
            check(&s).unwrap();
            let out = play(&s).unwrap();
            assert!(
                out.event_before_cut && out.response_outstanding_at_cut,
                "{out:?}"
            );
            assert!(
                matches!(out.refused, Some(RefusalKind::DuplicateResponse { .. })),
                "registered: {registered}, cut {first_cut}: {out:?}"
            );
            assert_eq!(out.delivered.len(), 3, "{out:?}");
        }
    }
}

/// A plain scenario: ids 0.., a priming event, two progress notifications and a short result,
/// cut after the priming event and the first progress notification (at a boundary).
fn base() -> Scenario {
    Scenario {
        ids: Ids::Plain,
        priming: Priming::First,
        behaviour: Behaviour::Correct,
        progress: 2,
        result_len: 20,
        // "id: 0\ndata: \n\n" is 14 bytes, the first progress event 109.
        first_cut: 14 + 109,
        reply_cuts: Vec::new(),
        strict: false,
        chunk: usize::MAX,
        id_after_data: false,
        seed: 1,
        registered: true,
        ..Scenario::from_bytes(&[])
    }
}

/// The parts after the reply cuts (answer, its round and `Retry-After`, contiguous ids, `null`-id
/// errors, an oversized event) are reached by the byte decoding, and absent in an input that ends
/// before them.
#[test]
fn the_extended_scenario_parts_are_reached() {
    let s = Scenario::from_bytes(&[0; 22]);
    assert_eq!(s.answer, Answer::EventStream);
    assert!(!s.contiguous && !s.null_errors && s.oversized.is_none() && s.retry_after.is_none());
    // 21 bytes up to the round count (0 rounds: no reply cuts), then the extension.
    let mut bytes = [0u8; 28];
    bytes[21] = 5;
    bytes[22] = 0b0111_1101;
    bytes[23] = 7;
    bytes[24] = 0b101;
    bytes[25] = 3;
    bytes[26] = 2;
    let s = Scenario::from_bytes(&bytes);
    assert_eq!(s.answer, Answer::NotFound);
    assert_eq!(s.answer_round, 1);
    assert_eq!(s.retry_after, Some(Duration::from_secs(7)));
    assert!(s.contiguous && s.null_errors && s.error_json);
    assert_eq!(s.busy_times, 2);
    assert_eq!(
        s.oversized,
        Some(Oversized {
            at: 2,
            slack: 3,
            over: 16
        })
    );
}

/// Every answer to the resume is decided as the decision table says, with the `Retry-After` it
/// carried; a busy server's resume goes on when tried again.
#[test]
fn every_answer_to_a_resume_is_decided() {
    let later = Some(Duration::from_secs(3));
    let cases: [(Answer, Option<RefusalKind>); 9] = [
        (Answer::EventStream, None),
        (Answer::EventStreamParams, None),
        (Answer::Busy(503), None),
        (
            Answer::NotEventStream("application/json"),
            Some(RefusalKind::UnexpectedResponse {
                status: 200,
                content_type: Some("application/json".into()),
            }),
        ),
        (
            Answer::NoContentType,
            Some(RefusalKind::UnexpectedResponse {
                status: 200,
                content_type: None,
            }),
        ),
        (Answer::NotFound, Some(RefusalKind::SessionExpired)),
        (
            Answer::CannotReplay(410),
            Some(RefusalKind::ReplayUnavailable {
                status: Some(410),
                retry_after: later,
            }),
        ),
        (
            Answer::Other(500),
            Some(RefusalKind::UnexpectedResponse {
                status: 500,
                content_type: None,
            }),
        ),
        (
            Answer::ErrorEvent,
            Some(RefusalKind::ReplayUnavailable {
                status: None,
                retry_after: later,
            }),
        ),
    ];
    for (answer, refusal) in cases {
        let s = Scenario {
            answer,
            retry_after: later,
            busy_times: 2,
            ..base()
        };
        check(&s).unwrap();
        let out = play(&s).unwrap();
        assert!(out.answered.is_some(), "{answer:?}: {out:?}");
        assert_eq!(out.refused, refusal, "{answer:?}: {out:?}");
        assert_eq!(out.finished, refusal.is_none(), "{answer:?}: {out:?}");
        assert_eq!(out.busy, if answer == Answer::Busy(503) { 2 } else { 0 });
        // Nothing after the refusal: the priming event and one progress notification only.
        let delivered = if refusal.is_none() { 3 } else { 1 };
        assert_eq!(out.delivered.len(), delivered, "{answer:?}: {out:?}");
    }
}

/// With contiguous ids, a server that skips the next event is refused although the cut fell at a
/// boundary (no interrupted event's id to expect); a correct one is not.
#[test]
fn contiguous_ids_refuse_a_skipped_event() {
    for (behaviour, refused) in [
        (Behaviour::SkipInterrupted, true),
        (Behaviour::Correct, false),
    ] {
        let s = Scenario {
            behaviour,
            contiguous: true,
            progress: 3,
            ..base()
        };
        check(&s).unwrap();
        let out = play(&s).unwrap();
        assert_eq!(
            matches!(out.refused, Some(RefusalKind::Gap { .. })),
            refused,
            "{behaviour:?}: {out:?}"
        );
    }
}

/// Two different error responses with a `null` id are both delivered.
#[test]
fn null_id_errors_are_all_delivered() {
    let s = Scenario {
        null_errors: true,
        ..base()
    };
    check(&s).unwrap();
    let out = play(&s).unwrap();
    assert!(out.finished && out.refused.is_none(), "{out:?}");
    assert_eq!(out.delivered.len(), 5, "{out:?}");
}

/// An event over the decoder's `max_event` is dropped (also as the replay of the interrupted
/// event, with its id known) and the exchange goes on to deliver everything else.
#[test]
fn an_oversized_event_is_dropped_and_the_exchange_goes_on() {
    for first_cut in [14 + 109 + 40, 14 + 60, 14 + 109 + 1500] {
        let s = Scenario {
            oversized: Some(Oversized {
                at: 1,
                slack: 0,
                over: 1000,
            }),
            first_cut,
            ..base()
        };
        check(&s).unwrap();
        let out = play(&s).unwrap();
        assert!(
            out.finished && out.refused.is_none(),
            "cut {first_cut}: {out:?}"
        );
        assert!(out.dropped >= 1, "cut {first_cut}: {out:?}");
        assert_eq!(out.delivered.len(), 3, "cut {first_cut}: {out:?}");
    }
}

/// `tests/regression/guard_model/contiguous-gap-after-dropped-replay`: with contiguous ids, a
/// correct server whose first event after a resume is dropped over the decoder's limit is not
/// refused: the dropped event is taken to be the replay of the interrupted one
/// (`Guard::on_decode_error`), and only the first new event must be `cursor + 1`
/// (`GuardConfig::contiguous_ids`), which the guard cannot check past an event it never saw.
#[test]
fn contiguous_ids_after_a_dropped_replay_are_not_a_gap() {
    let s = Scenario {
        contiguous: true,
        oversized: Some(Oversized {
            at: 1,
            slack: 0,
            over: 1000,
        }),
        ..base()
    };
    let out = play(&s).unwrap();
    assert!(out.dropped_on_resume, "{out:?}");
    assert!(out.refused.is_none() && out.finished, "{out:?}");
}
