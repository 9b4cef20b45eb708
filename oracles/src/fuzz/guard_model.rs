//! `guard_model`: the one guard model ([`crate::guard_model`], also run by the library's
//! `tests/guard_prop.rs`): the input bytes decode to a scenario (id scheme, priming style, cut
//! points, chunking, a correct or faulty server behaviour, the status and headers of one resume's
//! answer, `contiguous_ids`, `null`-id errors, a decoder limit), which is run through the real
//! decoder and guard; the oracle panics when a correct server is refused, a faulty one gets a
//! torn, duplicated or reordered message delivered, or an answer to a resume is not decided as the
//! decision table says.

/// The `guard_model` oracle (see the module docs).
pub fn guard_model(data: &[u8]) {
    crate::guard_model::check_bytes(data);
}
