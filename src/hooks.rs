//! Hooks into the crate's internals for the unpublished `ssegate-oracles` crate (the fuzz oracles
//! and the regression tests): only compiled with the PRIVATE `__testing` feature, not part of the
//! API, and free to change in any release.
#![forbid(unsafe_code)]

/// The address of the byte every static `"\n"` join segment of an SSE [`Data`](crate::sse::Data)
/// rope points at: a join is that segment, not any one-byte `"\n"`.
pub fn sse_join_ptr() -> *const u8 {
    crate::sse::JOIN.as_ptr()
}

/// The SSE decoder's default [`DecoderConfig::copy_below`](crate::sse::DecoderConfig::copy_below).
pub const SSE_COPY_BELOW: usize = crate::sse::COPY_BELOW;
