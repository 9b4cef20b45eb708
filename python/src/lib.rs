//! `ssegate._ssegate`, the native core of the `ssegate` Python package: the crate's SSE decoder,
//! JSON completeness gate and resumable stream engine, with data handed across without copies
//! where Python's rules allow it (see `chunks`). The Python-facing API and its docs are in
//! `ssegate/__init__.py` and `ssegate/_ssegate.pyi`.

use pyo3::prelude::*;

mod chunks;
mod contract;
mod decoder;
mod gate;
mod stream;
mod text;

/// Shared `bytes` chunks still referenced by event data: a hook for python/tests, compiled only
/// with the `testing` feature (python/test turns it on; wheels and `pip install ./python` leave it
/// off), set as a module attribute outside `__all__` and the stub.
#[cfg(feature = "testing")]
#[pyfunction]
fn _live_chunks() -> usize {
    chunks::live_chunks()
}

#[pymodule]
fn _ssegate(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(gate::gate, m)?)?;
    #[cfg(feature = "testing")]
    m.setattr("_live_chunks", wrap_pyfunction!(_live_chunks, m)?)?;
    m.add_class::<decoder::Decoder>()?;
    m.add_class::<decoder::Event>()?;
    m.add_class::<decoder::PartialEvent>()?;
    m.add("DecodeError", py.get_type::<decoder::DecodeError>())?;
    m.add_class::<stream::ResumableStream>()?;
    m.add_class::<stream::Output>()?;
    m.add_class::<stream::Deliver>()?;
    m.add_class::<stream::Skip>()?;
    m.add_class::<stream::Cursor>()?;
    m.add_class::<stream::Dropped>()?;
    m.add_class::<stream::Disconnected>()?;
    m.add_class::<stream::Reconnect>()?;
    m.add_class::<stream::Finished>()?;
    m.add_class::<stream::Failed>()?;
    contract::add(m)?;
    Ok(())
}
