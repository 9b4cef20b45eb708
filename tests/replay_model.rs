//! The replay buffer against its model and invariants (the `replay_buffer` fuzz oracle, compiled
//! in), on random operation sequences: see `fuzz/src/oracles/replay_buffer.rs` for the model and
//! the three invariants it checks on the buffer's own answers.

use proptest::prelude::*;

#[path = "../fuzz/src/oracles/replay_buffer.rs"]
#[allow(dead_code)]
mod oracle;

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn buffer_matches_model_and_invariants(data in proptest::collection::vec(any::<u8>(), 0..3000)) {
        oracle::replay_buffer(&data);
    }
}
