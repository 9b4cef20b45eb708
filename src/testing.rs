//! Hooks for the fuzz targets (`fuzz/`) and the regression tests (`tests/regression.rs`): not part of
//! the API, only compiled with the `testing` feature, and free to change in any release.
//!
//! The SSE decoder's reference oracle lives in `src/sse/reference.rs`, compiled into the crate's own
//! unit tests only; this module compiles the same file a second time and re-exports its result as a
//! public type, so that code outside the crate can compare the decoder against it.
#![forbid(unsafe_code)]
#![allow(missing_docs)]

pub mod guard_model;

// Under `cfg(test)` the crate also compiles this file as `sse::reference` (private there).
#[allow(clippy::duplicate_mod)]
#[path = "sse/reference.rs"]
mod reference;

/// What a whole SSE input decodes to, per the literal WHATWG algorithm (owned, copying, slow).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReferenceOutcome {
    /// (event type, data, last event id) of each dispatched event.
    pub events: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
    /// The last event id when the input ended.
    pub last_event_id: Vec<u8>,
    /// The last valid `retry` value.
    pub retry: Option<u64>,
    /// (bytes, data_len, id) of the block still open at the end of the input.
    pub partial: Option<(u64, u64, Option<Vec<u8>>)>,
}

/// Decodes a whole input with the reference oracle.
pub fn reference_decode(input: &[u8]) -> ReferenceOutcome {
    let reference::Outcome {
        events,
        last_event_id,
        retry,
        partial,
    } = reference::decode(input);
    ReferenceOutcome {
        events,
        last_event_id,
        retry,
        partial,
    }
}
