//! The guard against the one shared model of MCP servers (`ssegate_oracles::guard_model`, also
//! the `guard_model` fuzz target's oracle): for random scenarios (id schemes, priming styles, cut
//! points, chunkings and server behaviours, correct and faulty), a correct server is never refused
//! and its exchange completes; a faulty one never gets a torn, duplicated or reordered message
//! delivered.

use proptest::prelude::*;
use ssegate_oracles::guard_model::{Behaviour, Scenario, check};

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
