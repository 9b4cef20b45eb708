//! `gate(bytes, {maxDepth})`: the JSON completeness gate over one buffer.

use napi::Result;
use napi::bindgen_prelude::Uint8ArraySlice;
use napi_derive::napi;
use ssegate::gate::{GateConfig, Verdict, verdict_of};

use crate::numbers::count;

#[napi(object)]
pub struct GateOptions {
    /// The nesting limit (levels of arrays and objects); the gate's default when absent.
    pub max_depth: Option<f64>,
}

/// The verdict on `data`: `"complete"` (exactly one JSON value, whitespace around it allowed),
/// `"incomplete"` (a proper prefix of one), `"trailing"` (one value and then more) or `"invalid"`.
#[napi(ts_return_type = "Verdict")]
pub fn gate(data: Uint8ArraySlice, options: Option<GateOptions>) -> Result<&'static str> {
    let max_depth = match options.and_then(|o| o.max_depth) {
        Some(d) => Some(count("maxDepth", d)?),
        None => None,
    };
    Ok(judge(&data, max_depth).as_str())
}

fn judge(data: &[u8], max_depth: Option<usize>) -> Verdict {
    let Some(max_depth) = max_depth else {
        return verdict_of(data);
    };
    let mut gate = GateConfig::new().max_depth(max_depth).build();
    gate.feed(data);
    gate.verdict()
}
