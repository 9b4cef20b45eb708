//! `guard_model`: the one guard model ([`crate::guard_model`], also run by the library's
//! `tests/guard_prop.rs`): the input bytes decode to a scenario (id scheme, priming style, cut
//! points, chunking, a correct or faulty server behaviour), which is run through the real decoder
//! and guard; the oracle panics when a correct server is refused or a faulty one gets a torn,
//! duplicated or reordered message delivered.

/// The `guard_model` oracle (see the module docs).
pub fn guard_model(data: &[u8]) {
    crate::guard_model::check_bytes(data);
}
