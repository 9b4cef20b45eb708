//! The replay buffer against its model and invariants (the `replay_buffer` fuzz oracle), on random
//! operation sequences: see `ssegate_oracles::fuzz::replay_buffer` for the model and
//! the three invariants it checks on the buffer's own answers (an event that is not stored never
//! evicts another; a replay is the exact stored suffix or a miss naming the first event not held;
//! memory within the limits).

use proptest::prelude::*;

use ssegate_oracles::fuzz::replay_buffer as oracle;
use ssegate_oracles::fuzz::replay_buffer::{Case, Limits, Op};

fn limits() -> impl Strategy<Value = Limits> {
    (0u16..4096, 0u8..12, 0u16..2048, 0u8..4, 0u8..5, 0u8..5).prop_map(
        |(max_bytes, max_events, max_event_bytes, pin_last, max_streams, max_too_large)| Limits {
            max_bytes,
            max_events,
            max_event_bytes,
            pin_last,
            max_streams,
            max_too_large,
        },
    )
}

fn op() -> impl Strategy<Value = Op> {
    // Stream and sequence numbers are small so that operations hit the streams that exist.
    prop_oneof![
        2 => Just(Op::Open),
        1 => (0u8..8).prop_map(Op::Close),
        1 => (0u8..8).prop_map(Op::Forget),
        4 => (0u8..8, 0u8..6, proptest::collection::vec(any::<u8>(), 0..64), any::<Option<u32>>())
            .prop_map(|(stream, event, data, retry)| Op::Append { stream, event, data, retry }),
        3 => (0u8..8, 0u8..4, any::<u8>(), 0u16..3000)
            .prop_map(|(stream, event, byte, len)| Op::AppendSized { stream, event, byte, len }),
        4 => (0u8..8, 0u8..16).prop_map(|(stream, seq)| Op::ReplayAfter { stream, seq }),
        1 => "[0-9a-]{0,6}".prop_map(Op::ReplayRaw),
        1 => (0u8..8, 0u8..16).prop_map(|(stream, seq)| Op::Frame { stream, seq }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn buffer_matches_model_and_invariants(
        limits in limits(),
        ops in proptest::collection::vec(op(), 0..120),
    ) {
        oracle::run(&Case { limits, ops });
    }

    #[test]
    fn random_fuzz_inputs_pass_the_oracle(data in proptest::collection::vec(any::<u8>(), 0..3000)) {
        oracle::replay_buffer(&data);
    }
}
