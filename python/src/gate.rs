//! `ssegate.gate`: the JSON completeness gate over one buffer.

use pyo3::prelude::*;
use ssegate::gate::{GateConfig, Verdict, verdict_of};

use crate::chunks::with_bytes;

/// The verdict under the nesting limit `max_depth`, or the gate's default one (None).
fn judge(data: &[u8], max_depth: Option<usize>) -> Verdict {
    let Some(max_depth) = max_depth else {
        return verdict_of(data);
    };
    let mut gate = GateConfig::new().max_depth(max_depth).build();
    gate.feed(data);
    gate.verdict()
}

/// The verdict's name (`ssegate.gate` wraps it in `Verdict`).
#[pyfunction]
#[pyo3(signature = (data, /, max_depth = None))]
pub(crate) fn gate(data: &Bound<'_, PyAny>, max_depth: Option<usize>) -> PyResult<&'static str> {
    with_bytes(data, |bytes| judge(bytes, max_depth).as_str())
}
