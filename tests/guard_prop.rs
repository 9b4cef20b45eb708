//! The guard against the one shared model of MCP servers (`ssegate_oracles::guard_model`, also
//! the `guard_model` fuzz target's oracle): for random scenarios (id schemes, priming styles, cut
//! points, chunkings and server behaviours, correct and faulty), a correct server is never refused
//! and its exchange completes; a faulty one never gets a torn, duplicated or reordered message
//! delivered.

use proptest::prelude::*;
use ssegate::guard::RefusalKind;
use ssegate_oracles::guard_model::{Behaviour, Ids, Priming, Scenario, check, play};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn the_guard_satisfies_the_server_model(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
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
