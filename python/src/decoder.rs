//! `ssegate.Decoder`, `Event`, `PartialEvent` and `DecodeError`: the WHATWG SSE decoder.

use std::sync::OnceLock;

use bytes::Bytes;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use ssegate::contract::{
    DEFAULT_MAX_BLOCK, DEFAULT_MAX_EVENT, DEFAULT_MAX_FIELD, DEFAULT_MAX_LINE,
};
use ssegate::sse::{self, Data};

use crate::chunks::{DETACH_AT, cached_view, chunk_of};
use crate::text::{lossy, opt_str_repr, preview};

pyo3::create_exception!(
    ssegate,
    DecodeError,
    PyValueError,
    "An SSE event went over one of the decoder's limits and was dropped (the decoder skipped to the \
next blank line and went on)."
);

fn error_limit(error: &sse::DecodeError) -> Option<usize> {
    match error {
        sse::DecodeError::LineTooLong { limit, .. }
        | sse::DecodeError::EventTooLarge { limit, .. }
        | sse::DecodeError::FieldTooLong { limit, .. }
        | sse::DecodeError::BlockTooLarge { limit, .. } => Some(*limit),
        _ => None,
    }
}

/// A `DecodeError` instance for `error`, its attributes set (`events` empty).
fn decode_error<'py>(py: Python<'py>, error: &sse::DecodeError) -> PyResult<Bound<'py, PyAny>> {
    let err = DecodeError::new_err(error.to_string());
    let value = err.value(py).clone().into_any();
    value.setattr("kind", error.as_str())?;
    value.setattr("limit", error_limit(error))?;
    value.setattr("offset", error.offset())?;
    value.setattr("id", error.id().map(|id| lossy(id)))?;
    value.setattr("events", PyList::empty(py))?;
    value.setattr("errors", PyList::empty(py))?;
    Ok(value)
}

/// One dispatched event.
///
/// `data` is a read-only `memoryview`: of the `bytes` chunk it lies in when the decoder kept it as
/// one slice of its input (no copy), else of one new `bytes` object (pieces joined once).
/// `bytes(ev.data)` is the data as `bytes`.
#[pyclass(module = "ssegate._ssegate", name = "Event", frozen)]
pub(crate) struct Event {
    data: Data,
    view: OnceLock<Py<PyAny>>,
    event: Option<Bytes>,
    last_event_id: Bytes,
    has_own_id: bool,
    retry: Option<u64>,
}

impl From<sse::Event> for Event {
    fn from(e: sse::Event) -> Self {
        Event {
            data: e.data,
            view: OnceLock::new(),
            event: e.event,
            last_event_id: e.last_event_id,
            has_own_id: e.has_own_id,
            retry: e.retry,
        }
    }
}

#[pymethods]
impl Event {
    /// The `data` lines joined with LF (a read-only memoryview; see the class docs).
    #[getter]
    fn data(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        cached_view(py, &self.view, &self.data)
    }

    /// The event type from the `event` field; None when absent or empty (the type is `message`).
    #[getter]
    fn event(&self) -> Option<String> {
        self.event.as_deref().map(lossy)
    }

    /// The last event ID at dispatch (WHATWG `lastEventId`: inherited from earlier events when this
    /// one has no `id` field of its own); None when it is empty.
    #[getter]
    fn id(&self) -> Option<String> {
        (!self.last_event_id.is_empty()).then(|| lossy(&self.last_event_id))
    }

    /// Whether this event's own block carried an `id` field.
    #[getter]
    fn has_own_id(&self) -> bool {
        self.has_own_id
    }

    /// The reconnection time (ms) from a valid `retry` field in this event's block.
    #[getter]
    fn retry(&self) -> Option<u64> {
        self.retry
    }

    fn __len__(&self) -> usize {
        self.data.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Event(event={}, id={}, retry={}, data={})",
            opt_str_repr(self.event().as_deref()),
            opt_str_repr(self.id().as_deref()),
            self.retry
                .map_or_else(|| "None".to_owned(), |r| r.to_string()),
            preview(&self.data),
        )
    }
}

/// The block still open when a connection's input ended: it is never dispatched.
#[pyclass(module = "ssegate._ssegate", name = "PartialEvent", frozen)]
pub(crate) struct PartialEvent {
    /// Wire bytes of the open block (every line and line end since the last blank line).
    #[pyo3(get)]
    bytes: u64,
    /// Data bytes it had accumulated.
    #[pyo3(get)]
    data_len: u64,
    own_id: Option<Bytes>,
}

impl From<sse::PartialEvent> for PartialEvent {
    fn from(p: sse::PartialEvent) -> Self {
        PartialEvent {
            bytes: p.bytes,
            data_len: p.data_len,
            own_id: p.id,
        }
    }
}

#[pymethods]
impl PartialEvent {
    /// The block's `id` value, when its `id` line had arrived whole.
    #[getter]
    fn id(&self) -> Option<String> {
        self.own_id.as_deref().map(lossy)
    }

    fn __repr__(&self) -> String {
        format!(
            "PartialEvent(bytes={}, data_len={}, id={})",
            self.bytes,
            self.data_len,
            opt_str_repr(self.id().as_deref())
        )
    }
}

/// Incremental, zero-copy SSE decoder (WHATWG "interpreting an event stream").
#[pyclass(module = "ssegate._ssegate", name = "Decoder")]
pub(crate) struct Decoder {
    inner: sse::Decoder,
    discarded: Option<sse::PartialEvent>,
}

/// Feeds `chunk` and pulls every event it completes.
fn drain(decoder: &mut sse::Decoder, chunk: Bytes) -> Vec<Result<sse::Event, sse::DecodeError>> {
    decoder.feed(chunk);
    let mut out = Vec::new();
    while let Some(next) = decoder.next_event() {
        out.push(next);
    }
    out
}

#[pymethods]
impl Decoder {
    // The limits default to the contract's constants, which the module exports under these names
    // (`inspect.signature` reads their values there); `copy_below` to the Rust config's own.
    #[new]
    #[pyo3(
        signature = (
            *,
            max_line = DEFAULT_MAX_LINE,
            max_event = DEFAULT_MAX_EVENT,
            max_field = DEFAULT_MAX_FIELD,
            max_block = DEFAULT_MAX_BLOCK,
            copy_below = None,
        ),
        text_signature = "(*, max_line=DEFAULT_MAX_LINE, max_event=DEFAULT_MAX_EVENT, max_field=DEFAULT_MAX_FIELD, max_block=DEFAULT_MAX_BLOCK, copy_below=None)"
    )]
    fn new(
        max_line: usize,
        max_event: usize,
        max_field: usize,
        max_block: usize,
        copy_below: Option<usize>,
    ) -> Self {
        let mut config = sse::DecoderConfig::default();
        config
            .max_line(max_line)
            .max_event(max_event)
            .max_field(max_field)
            .max_block(max_block);
        if let Some(n) = copy_below {
            config.copy_below(n);
        }
        let inner = config.build();
        Decoder {
            inner,
            discarded: None,
        }
    }

    /// Decodes a chunk; returns the events it completed.
    fn feed<'py>(&mut self, py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<Vec<Event>> {
        let chunk = chunk_of(data)?;
        let decoder = &mut self.inner;
        let results = if chunk.len() >= DETACH_AT {
            py.detach(|| drain(decoder, chunk))
        } else {
            drain(decoder, chunk)
        };
        let mut events = Vec::with_capacity(results.len());
        let mut errors: Vec<sse::DecodeError> = Vec::new();
        for r in results {
            match r {
                Ok(e) => events.push(Event::from(e)),
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            return Ok(events);
        }
        let all = PyList::empty(py);
        for e in &errors {
            all.append(decode_error(py, e)?)?;
        }
        let first = all.get_item(0)?;
        first.setattr("events", PyList::new(py, events)?)?;
        first.setattr("errors", &all)?;
        Err(PyErr::from_value(first))
    }

    /// Ends the connection's input. Returns the events still to dispatch: always none, as `feed`
    /// returns every event it completes, and an unterminated block is discarded (WHATWG); it is
    /// reported in `discarded`. `last_event_id` and `retry` are kept for the next connection.
    fn finish(&mut self) -> Vec<Event> {
        self.discarded = self.inner.finish();
        Vec::new()
    }

    /// The block the last `finish()` discarded, if the input ended inside one.
    #[getter]
    fn discarded(&self) -> Option<PartialEvent> {
        self.discarded.clone().map(PartialEvent::from)
    }

    /// The committed last event ID (None when empty).
    #[getter]
    fn last_event_id(&self) -> Option<String> {
        let id = self.inner.last_event_id();
        (!id.is_empty()).then(|| lossy(id))
    }

    /// The reconnection time (ms) from the last valid `retry` field.
    #[getter]
    fn retry(&self) -> Option<u64> {
        self.inner.retry()
    }

    /// Bytes of this connection's input decoded so far.
    #[getter]
    fn offset(&self) -> u64 {
        self.inner.offset()
    }

    fn __repr__(&self) -> String {
        format!(
            "Decoder(offset={}, last_event_id={})",
            self.inner.offset(),
            opt_str_repr(self.last_event_id().as_deref())
        )
    }
}
