//! The wire contract (`ssegate::contract`) as module attributes of `ssegate._ssegate`, read by
//! `ssegate/contract.py`: the error codes with their words and messages, the `data.kind` and
//! `data.outcome` words, the `data` keys, the default limits, and the stable words of the engine's
//! reported enums. Nothing here is a literal: every value is the library's.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use ssegate::contract::{self, Code, Kind, Outcome, data, method};
use ssegate::message::RpcKind;
use ssegate::resume::{Failure, RefusalKind, Restart, Skip};

use ssegate::sse::DecodeError;

/// The code of the error answering a `method` request that failed with the kind `kind` (a word),
/// whose outcome is `outcome` (a word): `Code::for_answer`, as its JSON-RPC value.
#[pyfunction]
#[pyo3(signature = (method, kind, outcome, /))]
pub(crate) fn code_for(method: &str, kind: &str, outcome: &str) -> PyResult<i32> {
    let kind = Kind::from_word(kind)
        .ok_or_else(|| PyValueError::new_err(format!("not a kind word: {kind:?}")))?;
    let outcome = Outcome::ALL
        .into_iter()
        .find(|o| o.as_str() == outcome)
        .ok_or_else(|| PyValueError::new_err(format!("not an outcome word: {outcome:?}")))?;
    Ok(Code::for_answer(method, kind, outcome).value())
}

/// Adds the contract's attributes to the module (each listed in its `__all__`).
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(code_for, m)?)?;
    // (value, word, message) per code, in the contract table's order.
    let codes = Code::ALL
        .iter()
        .map(|c| (c.value(), c.as_str(), c.message()).into_pyobject(py))
        .collect::<PyResult<Vec<_>>>()?;
    m.add("CODES", PyTuple::new(py, codes)?)?;
    m.add("KINDS", words(py, Kind::ALL.map(Kind::as_str))?)?;
    m.add("OUTCOMES", words(py, Outcome::ALL.map(Outcome::as_str))?)?;

    m.add("TOOLS_CALL", method::TOOLS_CALL)?;
    m.add("DATA_KIND", data::KIND)?;
    m.add("DATA_OUTCOME", data::OUTCOME)?;
    m.add("DATA_METHOD", data::METHOD)?;
    m.add("DATA_REASON", data::REASON)?;
    m.add("DATA_REFUSAL", data::REFUSAL)?;
    m.add("DATA_STATUS", data::STATUS)?;

    m.add("DEFAULT_MAX_EVENT", contract::DEFAULT_MAX_EVENT)?;
    m.add("DEFAULT_MAX_LINE", contract::DEFAULT_MAX_LINE)?;
    m.add("DEFAULT_MAX_FIELD", contract::DEFAULT_MAX_FIELD)?;
    m.add("DEFAULT_MAX_BLOCK", contract::DEFAULT_MAX_BLOCK)?;
    m.add("DEFAULT_MAX_JSON_BODY", contract::DEFAULT_MAX_JSON_BODY)?;
    m.add("DEFAULT_MAX_ERROR_BODY", contract::DEFAULT_MAX_ERROR_BODY)?;
    m.add("DEFAULT_MAX_RESUMES", contract::DEFAULT_MAX_RESUMES)?;
    m.add(
        "DEFAULT_MAX_STALLED_RESUMES",
        contract::DEFAULT_MAX_STALLED_RESUMES,
    )?;
    m.add(
        "DEFAULT_MAX_RECONNECT_ATTEMPTS",
        contract::DEFAULT_MAX_RECONNECT_ATTEMPTS,
    )?;
    // Durations in seconds, as every `*_timeout` and delay of the Python API is.
    for (name, value) in [
        ("DEFAULT_CALL_TIMEOUT", contract::DEFAULT_CALL_TIMEOUT),
        ("DEFAULT_CONNECT_TIMEOUT", contract::DEFAULT_CONNECT_TIMEOUT),
        ("DEFAULT_REPLAY_TIMEOUT", contract::DEFAULT_REPLAY_TIMEOUT),
        ("DEFAULT_IDLE_TIMEOUT", contract::DEFAULT_IDLE_TIMEOUT),
        ("DEFAULT_MAX_DELAY", contract::DEFAULT_MAX_DELAY),
        ("DEFAULT_MIN_DELAY", contract::DEFAULT_MIN_DELAY),
        ("DEFAULT_RETRY", contract::DEFAULT_RETRY),
        ("DEFAULT_BACKOFF", contract::DEFAULT_BACKOFF),
    ] {
        m.add(name, value.as_secs_f64())?;
    }

    m.add("REFUSAL_KINDS", words(py, RefusalKind::WORDS)?)?;
    m.add("FAILURE_KINDS", words(py, Failure::WORDS)?)?;
    m.add("RESTART_KINDS", words(py, Restart::WORDS)?)?;
    m.add("SKIP_KINDS", words(py, Skip::WORDS)?)?;
    m.add("DECODE_ERROR_KINDS", words(py, DecodeError::WORDS)?)?;
    m.add("RPC_KINDS", words(py, RpcKind::WORDS)?)?;
    Ok(())
}

fn words<'py, const N: usize>(
    py: Python<'py>,
    words: [&'static str; N],
) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, words)
}
