#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ssegate_oracles::fuzz::gate_differential(data));
