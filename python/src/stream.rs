//! `ssegate.ResumableStream` and its outputs: the sans-IO engine, on `time.monotonic()` seconds.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use pyo3::exceptions::{PySystemError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pyclass_init::PyClassInitializer;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};
use ssegate::contract::{
    DEFAULT_BACKOFF, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BLOCK, DEFAULT_MAX_DELAY, DEFAULT_MAX_EVENT,
    DEFAULT_MAX_FIELD, DEFAULT_MAX_LINE, DEFAULT_MAX_RECONNECT_ATTEMPTS, DEFAULT_MAX_RESUMES,
    DEFAULT_MAX_STALLED_RESUMES, DEFAULT_MIN_DELAY, DEFAULT_REPLAY_TIMEOUT, DEFAULT_RETRY,
};
use ssegate::gate::Isa;
use ssegate::message::{RpcId, RpcKind};
use ssegate::resume::{self, Answer, EndCause, Failure, Policy, ReconnectResponse, RefusalKind};
use ssegate::sse::{self, Data};

use crate::chunks::{DETACH_AT, cached_view, chunk_of};
use crate::decoder::PartialEvent;
use crate::text::{bytes_repr, lossy, opt_bytes_repr, opt_str_repr, preview, str_repr};

/// The longest duration a setting may have, in seconds (about 31 years): far beyond any useful
/// timeout, and far enough from `Instant`'s range that no deadline overflows.
const MAX_SECONDS: f64 = 1e9;

/// How far a `now` may be from `time.monotonic()` at the stream's construction, in seconds.
const SPAN_SECONDS: u64 = 1 << 31;

/// A setting in seconds, as a `Duration`.
fn seconds(name: &str, secs: f64) -> PyResult<Duration> {
    if secs.is_finite() && (0.0..=MAX_SECONDS).contains(&secs) {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(PyValueError::new_err(format!(
            "{name} must be a number of seconds from 0 to 1e9, got {secs}"
        )))
    }
}

/// `time.monotonic()` seconds to the engine's `Instant`s and back: a pair of origins taken together
/// at construction. The engine reads no clock, so only differences matter; the base `Instant` is
/// taken 2**31 s ahead so that a `now` before the construction maps too.
struct Clock {
    base: Instant,
    origin: f64,
}

impl Clock {
    fn new(py: Python<'_>) -> PyResult<Clock> {
        let origin: f64 = py
            .import("time")?
            .getattr("monotonic")?
            .call0()?
            .extract()?;
        let now = Instant::now();
        let base = now
            .checked_add(Duration::from_secs(SPAN_SECONDS))
            .unwrap_or(now);
        Ok(Clock { base, origin })
    }

    fn instant(&self, now: f64) -> PyResult<Instant> {
        if !now.is_finite() || now < 0.0 {
            return Err(PyValueError::new_err(format!(
                "now must be a time.monotonic() value (finite, not negative), got {now}"
            )));
        }
        let d = now - self.origin;
        let far = || {
            PyValueError::new_err(format!(
                "now = {now} is more than 2**31 s away from time.monotonic() ({})",
                self.origin
            ))
        };
        if d.abs() > SPAN_SECONDS as f64 {
            return Err(far());
        }
        let at = if d >= 0.0 {
            self.base.checked_add(Duration::from_secs_f64(d))
        } else {
            self.base.checked_sub(Duration::from_secs_f64(-d))
        };
        at.ok_or_else(far)
    }

    /// Seconds for `at`, rounded up so that `instant(seconds(at)) >= at`: a driver that passes a
    /// deadline back to `handle_timeout` always reaches it.
    fn seconds(&self, at: Instant) -> f64 {
        let mut s = match at.checked_duration_since(self.base) {
            Some(d) => self.origin + d.as_secs_f64(),
            None => self.origin - self.base.saturating_duration_since(at).as_secs_f64(),
        };
        for _ in 0..64 {
            match self.instant(s) {
                Ok(t) if t < at => s = s.next_up(),
                _ => break,
            }
        }
        s
    }
}

/// A JSON-RPC id from Python: an `int` (beyond 64 bits: compared as its JSON text) or a `str`.
fn rpc_id_of(obj: &Bound<'_, PyAny>) -> PyResult<RpcId> {
    if obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(
            "a JSON-RPC id is an int or a str, not a bool",
        ));
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        return Ok(match i.extract::<i64>() {
            Ok(n) => RpcId::Number(n),
            Err(_) => RpcId::Raw(i.str()?.to_str()?.into()),
        });
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(RpcId::String(s.to_str()?.into()));
    }
    Err(PyTypeError::new_err(format!(
        "a JSON-RPC id is an int or a str, not {}",
        obj.get_type().name()?
    )))
}

/// A JSON-RPC id for Python: `int`, `str` or None (`null`); any other id as the number its JSON
/// text is (a huge integer, a fraction), else that text.
fn rpc_id_py<'py>(py: Python<'py>, id: &RpcId) -> PyResult<Bound<'py, PyAny>> {
    Ok(match id {
        RpcId::Number(n) => PyInt::new(py, *n).into_any(),
        RpcId::String(s) => PyString::new(py, s).into_any(),
        RpcId::Null => py.None().into_bound(py),
        RpcId::Raw(raw) => {
            let integer = raw.strip_prefix('-').unwrap_or(raw);
            if !integer.is_empty() && integer.bytes().all(|b| b.is_ascii_digit()) {
                py.get_type::<PyInt>().call1((&**raw,))?
            } else if let Ok(x) = raw.parse::<f64>() {
                PyFloat::new(py, x).into_any()
            } else {
                PyString::new(py, raw).into_any()
            }
        }
        #[allow(unreachable_patterns)]
        _ => PyString::new(py, &id.to_string()).into_any(),
    })
}

fn rpc_ids_py<'py>(py: Python<'py>, ids: &[RpcId]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for id in ids {
        list.append(rpc_id_py(py, id)?)?;
    }
    Ok(list)
}

fn rpc_ids_repr(py: Python<'_>, ids: &[RpcId]) -> String {
    rpc_ids_py(py, ids)
        .and_then(|l| l.repr().map(|r| r.to_string()))
        .unwrap_or_else(|_| "[...]".to_owned())
}

fn opt_bytes<'py>(py: Python<'py>, b: Option<&Bytes>) -> Option<Bound<'py, PyBytes>> {
    b.map(|b| PyBytes::new(py, b))
}

/// What a `ResumableStream` hands back from `poll()`; `kind` says which subclass it is.
#[pyclass(module = "ssegate._ssegate", name = "Output", subclass, frozen)]
pub(crate) struct Output {
    kind: &'static str,
}

#[pymethods]
impl Output {
    /// `"deliver"`, `"skip"`, `"cursor"`, `"dropped"`, `"disconnected"`, `"reconnect"`,
    /// `"finished"` or `"failed"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn __repr__(&self) -> String {
        format!("Output(kind={})", str_repr(self.kind))
    }
}

fn base(kind: &'static str) -> PyClassInitializer<Output> {
    PyClassInitializer::from(Output { kind })
}

/// A complete, new message: exactly one JSON value. `message` is a read-only memoryview: of the
/// input `bytes` chunk when the message is one slice of it (no copy), else of one new `bytes`.
#[pyclass(module = "ssegate._ssegate", name = "Deliver", extends = Output, frozen)]
pub(crate) struct Deliver {
    data: Data,
    view: OnceLock<Py<PyAny>>,
    rpc_kind: RpcKind,
    rpc_id: Option<RpcId>,
    event_id: Option<Bytes>,
    event_type: Option<Bytes>,
}

#[pymethods]
impl Deliver {
    /// The JSON-RPC message (a read-only memoryview; `bytes(out.message)` copies it).
    #[getter]
    fn message(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        cached_view(py, &self.view, &self.data)
    }

    /// `"request"`, `"response"`, `"notification"`, `"batch"` or `"other"`, from its top-level keys.
    #[getter]
    fn rpc_kind(&self) -> &'static str {
        self.rpc_kind.as_str()
    }

    /// The top-level `id` (int, str; None when absent or `null`).
    #[getter]
    fn rpc_id<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.rpc_id {
            Some(id) => rpc_id_py(py, id),
            None => Ok(py.None().into_bound(py)),
        }
    }

    /// The event's own id (raw bytes), if it had one.
    #[getter]
    fn event_id<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        opt_bytes(py, self.event_id.as_ref())
    }

    /// The event type; None for the default `message`.
    #[getter]
    fn event_type(&self) -> Option<String> {
        self.event_type.as_deref().map(lossy)
    }

    fn __len__(&self) -> usize {
        self.data.len()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let id = self
            .rpc_id(py)
            .and_then(|i| i.repr().map(|r| r.to_string()))
            .unwrap_or_default();
        format!(
            "Deliver(rpc_kind={}, rpc_id={id}, event_id={}, event_type={}, message={})",
            str_repr(self.rpc_kind()),
            opt_bytes_repr(self.event_id.as_deref()),
            opt_str_repr(self.event_type().as_deref()),
            preview(&self.data)
        )
    }
}

/// An event that carries nothing new (an exact replay, a duplicate response, a keep-alive, an
/// `event: error` frame without a message).
#[pyclass(module = "ssegate._ssegate", name = "Skip", extends = Output, frozen)]
pub(crate) struct Skip {
    /// `"exact-replay"`, `"duplicate-response"`, `"keep-alive"` or `"error-frame"`.
    #[pyo3(get)]
    skip: &'static str,
    /// Why, in a few words.
    #[pyo3(get)]
    reason: String,
}

#[pymethods]
impl Skip {
    fn __repr__(&self) -> String {
        format!(
            "Skip(skip={}, reason={})",
            str_repr(self.skip),
            str_repr(&self.reason)
        )
    }
}

/// A priming event (empty data, its own id): the cursor moved.
#[pyclass(module = "ssegate._ssegate", name = "Cursor", extends = Output, frozen)]
pub(crate) struct Cursor {
    id: Bytes,
}

#[pymethods]
impl Cursor {
    /// The new cursor (raw bytes).
    #[getter]
    fn cursor<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.id)
    }

    fn __repr__(&self) -> String {
        format!("Cursor(cursor={})", bytes_repr(&self.id))
    }
}

/// The decoder dropped an event over one of its limits; the stream goes on (the message it carried
/// is lost: if a request in `outstanding` needed it, end the call).
#[pyclass(module = "ssegate._ssegate", name = "Dropped", extends = Output, frozen)]
pub(crate) struct Dropped {
    /// The decoder's error, in words.
    #[pyo3(get)]
    reason: String,
    /// Which limit: `"line-too-long"`, `"event-too-large"`, `"field-too-long"` or `"block-too-large"`.
    #[pyo3(get)]
    error: &'static str,
    /// The refusal a driver ends a call with when the dropped event may have been its answer
    /// (`"decode-limit"`: the `data.refusal` of that error).
    #[pyo3(get)]
    refusal: &'static str,
    event_id: Option<Bytes>,
    cursor: Option<Bytes>,
    outstanding: Vec<RpcId>,
}

#[pymethods]
impl Dropped {
    /// The dropped event's own id, when its `id` line came before the limit was crossed.
    #[getter]
    fn event_id<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        opt_bytes(py, self.event_id.as_ref())
    }

    /// The cursor after the drop.
    #[getter]
    fn cursor<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        opt_bytes(py, self.cursor.as_ref())
    }

    /// Requests this stream still had to deliver.
    #[getter]
    fn outstanding<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        rpc_ids_py(py, &self.outstanding)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Dropped(error={}, outstanding={}, reason={})",
            str_repr(self.error),
            rpc_ids_repr(py, &self.outstanding),
            str_repr(&self.reason)
        )
    }
}

/// The connection is over for the stream: drop it. A `reconnect` follows after `delay` seconds
/// (wait with `poll_timeout()` / `handle_timeout()`).
#[pyclass(module = "ssegate._ssegate", name = "Disconnected", extends = Output, frozen)]
pub(crate) struct Disconnected {
    /// Seconds before the reconnect.
    #[pyo3(get)]
    delay: f64,
    /// Whether a response this stream must deliver is still outstanding.
    #[pyo3(get)]
    needed: bool,
    last_event_id: Option<Bytes>,
    discarded: Option<sse::PartialEvent>,
}

#[pymethods]
impl Disconnected {
    /// The `Last-Event-ID` the reconnect will send (raw bytes; None: no id was ever received).
    #[getter]
    fn last_event_id<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        opt_bytes(py, self.last_event_id.as_ref())
    }

    /// The partial event discarded at the cut, if the connection ended inside one.
    #[getter]
    fn discarded(&self) -> Option<PartialEvent> {
        self.discarded.clone().map(PartialEvent::from)
    }

    fn __repr__(&self) -> String {
        format!(
            "Disconnected(delay={:?}, last_event_id={}, needed={})",
            self.delay,
            opt_bytes_repr(self.last_event_id.as_deref()),
            if self.needed { "True" } else { "False" }
        )
    }
}

/// Send the reconnect now: `GET` with `Accept: text/event-stream` and `Last-Event-ID`, then report
/// the answer with `reconnect_response()` (or `reconnect_failed()`).
#[pyclass(module = "ssegate._ssegate", name = "Reconnect", extends = Output, frozen)]
pub(crate) struct Reconnect {
    /// Which attempt at this resume it is (1 for the first).
    #[pyo3(get)]
    attempt: u32,
    last_event_id: Option<Bytes>,
}

#[pymethods]
impl Reconnect {
    /// The `Last-Event-ID` header's exact bytes (None: send none).
    #[getter]
    fn last_event_id<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        opt_bytes(py, self.last_event_id.as_ref())
    }

    fn __repr__(&self) -> String {
        format!(
            "Reconnect(last_event_id={}, attempt={})",
            opt_bytes_repr(self.last_event_id.as_deref()),
            self.attempt
        )
    }
}

/// The stream ended with nothing outstanding.
#[pyclass(module = "ssegate._ssegate", name = "Finished", extends = Output, frozen)]
pub(crate) struct Finished {}

#[pymethods]
impl Finished {
    fn __repr__(&self) -> &'static str {
        "Finished()"
    }
}

/// The stream stopped for good.
#[pyclass(module = "ssegate._ssegate", name = "Failed", extends = Output, frozen)]
pub(crate) struct Failed {
    /// `"refused"`, `"too-many-resumes"`, `"no-progress"` or `"reconnect-failed"`.
    #[pyo3(get)]
    failure: &'static str,
    /// What happened, in words.
    #[pyo3(get)]
    reason: String,
    /// The refusal's kind (`"gap"`, `"session-expired"`, `"stream-restarted"`, ...), if a refusal
    /// stopped the stream (for `"reconnect-failed"`: the server's last answer, if it answered).
    #[pyo3(get)]
    refusal: Option<&'static str>,
    /// For a `"stream-restarted"` refusal, the evidence: `"id-reused"`, `"backwards"`,
    /// `"other-stream"` or `"message-repeated"`.
    #[pyo3(get)]
    restart: Option<&'static str>,
    /// Whether a new session is needed to get the outstanding responses.
    #[pyo3(get)]
    must_renegotiate: bool,
    cursor: Option<Bytes>,
    outstanding: Vec<RpcId>,
}

#[pymethods]
impl Failed {
    /// Requests still unanswered.
    #[getter]
    fn outstanding<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        rpc_ids_py(py, &self.outstanding)
    }

    /// The cursor at the refusal, if a refusal stopped the stream.
    #[getter]
    fn cursor<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        opt_bytes(py, self.cursor.as_ref())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Failed(failure={}, refusal={}, outstanding={}, must_renegotiate={}, reason={})",
            str_repr(self.failure),
            opt_str_repr(self.refusal),
            rpc_ids_repr(py, &self.outstanding),
            if self.must_renegotiate {
                "True"
            } else {
                "False"
            },
            str_repr(&self.reason)
        )
    }
}

fn failed(failure: Failure) -> Failed {
    let refusal = failure.refusal();
    Failed {
        failure: failure.as_str(),
        reason: failure.to_string(),
        refusal: refusal.map(|r| r.kind.as_str()),
        restart: refusal.and_then(|r| match r.kind {
            RefusalKind::StreamRestarted { why, .. } => Some(why.as_str()),
            _ => None,
        }),
        must_renegotiate: failure.must_renegotiate(),
        cursor: refusal.and_then(|r| r.cursor.clone()),
        outstanding: failure.outstanding().to_vec(),
    }
}

/// An engine output as its Python object.
fn output(py: Python<'_>, out: resume::Output) -> PyResult<Py<PyAny>> {
    use resume::Output as O;
    let obj = match out {
        O::Deliver(d) => Py::new(
            py,
            base("deliver").add_subclass(Deliver {
                data: d.message.into_data(),
                view: OnceLock::new(),
                rpc_kind: d.rpc.kind,
                rpc_id: d.rpc.id,
                event_id: d.event_id,
                event_type: d.event_type,
            }),
        )?
        .into_any(),
        O::Skip(s) => Py::new(
            py,
            base("skip").add_subclass(Skip {
                skip: s.as_str(),
                reason: s.to_string(),
            }),
        )?
        .into_any(),
        O::Cursor(id) => Py::new(py, base("cursor").add_subclass(Cursor { id }))?.into_any(),
        O::Dropped(d) => Py::new(
            py,
            base("dropped").add_subclass(Dropped {
                reason: d.error.to_string(),
                error: d.error.as_str(),
                refusal: RefusalKind::DecodeLimit {
                    error: d.error.clone(),
                }
                .as_str(),
                event_id: d.error.id().cloned(),
                cursor: d.cursor,
                outstanding: d.outstanding,
            }),
        )?
        .into_any(),
        O::Disconnected(r) => Py::new(
            py,
            base("disconnected").add_subclass(Disconnected {
                delay: r.delay.as_secs_f64(),
                needed: r.needed,
                last_event_id: r.last_event_id,
                discarded: r.discarded,
            }),
        )?
        .into_any(),
        O::Reconnect(r) => Py::new(
            py,
            base("reconnect").add_subclass(Reconnect {
                attempt: r.attempt,
                last_event_id: r.last_event_id,
            }),
        )?
        .into_any(),
        O::Finished => Py::new(py, base("finished").add_subclass(Finished {}))?.into_any(),
        O::Failed(f) => Py::new(py, base("failed").add_subclass(failed(f)))?.into_any(),
        // `resume::Output` is non-exhaustive: an output this binding was not written for is a bug
        // here, not something to hand on under a made-up kind.
        other => {
            return Err(PySystemError::new_err(format!(
                "ssegate: an engine output this binding does not know: {other:?}"
            )));
        }
    };
    Ok(obj)
}

/// A header value given as `str` (ISO-8859-1, as HTTP stacks decode them) or `bytes`.
fn header(value: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<Vec<u8>>> {
    let Some(value) = value else { return Ok(None) };
    if value.is_none() {
        return Ok(None);
    }
    if let Ok(s) = value.cast::<PyString>() {
        let s = s.to_str()?;
        // Latin-1 when every character fits (what httpx decodes header bytes as), else UTF-8.
        return Ok(Some(match s.chars().map(u8::try_from).collect() {
            Ok(latin1) => latin1,
            Err(_) => s.as_bytes().to_vec(),
        }));
    }
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(Some(b.as_bytes().to_vec()));
    }
    Err(PyTypeError::new_err(format!(
        "{name} must be a str, bytes or None"
    )))
}

/// One logical SSE stream of MCP Streamable HTTP (a POST's response and its resumptions, or the
/// standalone GET stream): decoder, gate and resumption guard, with no IO and no clock.
#[pyclass(module = "ssegate._ssegate", name = "ResumableStream")]
pub(crate) struct ResumableStream {
    inner: resume::ResumableStream,
    /// The first output of a big chunk, decided while `feed` had the GIL released.
    peeked: Option<resume::Output>,
    clock: Clock,
}

#[pymethods]
impl ResumableStream {
    #[new]
    // Every limit defaults to the library's: the contract's `DEFAULT_*` constants, which the module
    // exports under the same names (the text signature names them, and `inspect.signature` reads
    // their values from the module), or, for a setting the contract has no constant for, None:
    // the setter is not called and the Rust config's own default holds.
    #[pyo3(signature = (
        *,
        resumable = true,
        keep_open = false,
        max_event = DEFAULT_MAX_EVENT,
        max_line = DEFAULT_MAX_LINE,
        max_field = DEFAULT_MAX_FIELD,
        max_block = DEFAULT_MAX_BLOCK,
        copy_below = None,
        replay_timeout = DEFAULT_REPLAY_TIMEOUT.as_secs_f64(),
        idle_timeout = Some(DEFAULT_IDLE_TIMEOUT.as_secs_f64()),
        default_retry = DEFAULT_RETRY.as_secs_f64(),
        max_delay = DEFAULT_MAX_DELAY.as_secs_f64(),
        min_delay = DEFAULT_MIN_DELAY.as_secs_f64(),
        backoff = DEFAULT_BACKOFF.as_secs_f64(),
        max_resumes = DEFAULT_MAX_RESUMES,
        max_stalled_resumes = DEFAULT_MAX_STALLED_RESUMES,
        max_reconnect_attempts = DEFAULT_MAX_RECONNECT_ATTEMPTS,
        jitter_seed = None,
        gate_ahead = None,
        policy = "verified",
        window = None,
        unrequested_window = None,
        contiguous_ids = false,
        max_depth = None,
        max_isa = None,
    ),
    text_signature = "(*, resumable=True, keep_open=False, max_event=DEFAULT_MAX_EVENT, max_line=DEFAULT_MAX_LINE, max_field=DEFAULT_MAX_FIELD, max_block=DEFAULT_MAX_BLOCK, copy_below=None, replay_timeout=DEFAULT_REPLAY_TIMEOUT, idle_timeout=DEFAULT_IDLE_TIMEOUT, default_retry=DEFAULT_RETRY, max_delay=DEFAULT_MAX_DELAY, min_delay=DEFAULT_MIN_DELAY, backoff=DEFAULT_BACKOFF, max_resumes=DEFAULT_MAX_RESUMES, max_stalled_resumes=DEFAULT_MAX_STALLED_RESUMES, max_reconnect_attempts=DEFAULT_MAX_RECONNECT_ATTEMPTS, jitter_seed=None, gate_ahead=None, policy='verified', window=None, unrequested_window=None, contiguous_ids=False, max_depth=None, max_isa=None)")]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        resumable: bool,
        keep_open: bool,
        max_event: usize,
        max_line: usize,
        max_field: usize,
        max_block: usize,
        copy_below: Option<usize>,
        replay_timeout: f64,
        idle_timeout: Option<f64>,
        default_retry: f64,
        max_delay: f64,
        min_delay: f64,
        backoff: f64,
        max_resumes: u32,
        max_stalled_resumes: u32,
        max_reconnect_attempts: u32,
        jitter_seed: Option<u64>,
        gate_ahead: Option<usize>,
        policy: &str,
        window: Option<usize>,
        unrequested_window: Option<usize>,
        contiguous_ids: bool,
        max_depth: Option<usize>,
        max_isa: Option<&str>,
    ) -> PyResult<Self> {
        let mut config = resume::ResumableStream::config();
        let decoder = config.decoder_mut();
        decoder
            .max_event(max_event)
            .max_line(max_line)
            .max_field(max_field)
            .max_block(max_block);
        if let Some(n) = copy_below {
            decoder.copy_below(n);
        }
        let policy = match policy {
            "verified" => Policy::Verified,
            "strict" => Policy::Strict,
            other => {
                return Err(PyValueError::new_err(format!(
                    "policy must be \"verified\" or \"strict\", got {other:?}"
                )));
            }
        };
        let guard = config.guard_mut();
        guard.policy(policy).contiguous_ids(contiguous_ids);
        if let Some(ids) = window {
            guard.window(ids);
        }
        if let Some(ids) = unrequested_window {
            guard.unrequested_window(ids);
        }
        if let Some(levels) = max_depth {
            guard.max_depth(levels);
        }
        if let Some(name) = max_isa {
            let isa = Isa::all()
                .iter()
                .copied()
                .find(|isa| isa.name() == name)
                .ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "max_isa must be \"portable\", \"neon\", \"avx2\" or \"avx512\", got {name:?}"
                    ))
                })?;
            guard.max_isa(isa);
        }
        config
            .replay_timeout(seconds("replay_timeout", replay_timeout)?)
            .idle_timeout(
                idle_timeout
                    .map(|t| seconds("idle_timeout", t))
                    .transpose()?,
            )
            .default_retry(seconds("default_retry", default_retry)?)
            .max_delay(seconds("max_delay", max_delay)?)
            .min_delay(seconds("min_delay", min_delay)?)
            .backoff(seconds("backoff", backoff)?)
            .max_resumes(max_resumes)
            .max_stalled_resumes(max_stalled_resumes)
            .max_reconnect_attempts(max_reconnect_attempts)
            .keep_open(keep_open);
        if let Some(from) = gate_ahead {
            config.gate_ahead(from);
        }
        if let Some(seed) = jitter_seed {
            config.jitter_seed(seed);
        }
        let mut inner = config.build();
        inner.resumable(resumable);
        Ok(ResumableStream {
            inner,
            peeked: None,
            clock: Clock::new(py)?,
        })
    }

    /// Registers a request (its JSON-RPC id) whose response this stream must deliver.
    fn expect_response(&mut self, id: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inner.expect_response(rpc_id_of(id)?);
        Ok(())
    }

    /// A body chunk arrived at `now`.
    fn feed(&mut self, py: Python<'_>, data: &Bound<'_, PyAny>, now: f64) -> PyResult<()> {
        let at = self.clock.instant(now)?;
        let chunk = chunk_of(data)?;
        let big = chunk.len() >= DETACH_AT;
        let Self { inner, peeked, .. } = self;
        let open = inner.is_open();
        inner.feed(chunk, at);
        if big && open && peeked.is_none() {
            // Scan the chunk (up to its first output) without the GIL: the work is here.
            *peeked = py.detach(|| inner.poll());
        }
        Ok(())
    }

    /// The open connection's body ended at `now`: `cause` is `"eof"` or `"error"`.
    fn connection_ended(&mut self, cause: &str, now: f64) -> PyResult<()> {
        let cause = match cause {
            "eof" => EndCause::Eof,
            "error" => EndCause::Error,
            other => {
                return Err(PyValueError::new_err(format!(
                    "cause must be \"eof\" or \"error\", got {other:?}"
                )));
            }
        };
        let at = self.clock.instant(now)?;
        self.inner.connection_ended(cause, at);
        Ok(())
    }

    /// The next output, or None until more input or time.
    fn poll(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match self.peeked.take().or_else(|| self.inner.poll()) {
            Some(out) => output(py, out).map(Some),
            None => Ok(None),
        }
    }

    /// When the stream next needs `handle_timeout()` (`time.monotonic()` seconds), if ever.
    fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(|at| self.clock.seconds(at))
    }

    /// Time passed: `now` is at or after `poll_timeout()` (earlier calls do nothing).
    fn handle_timeout(&mut self, now: f64) -> PyResult<()> {
        let at = self.clock.instant(now)?;
        self.inner.handle_timeout(at);
        Ok(())
    }

    /// The reconnect request was answered at `now`: `"read"` (feed its body) or `"drop"`.
    fn reconnect_response(
        &mut self,
        status: u16,
        content_type: Option<&Bound<'_, PyAny>>,
        retry_after: Option<&Bound<'_, PyAny>>,
        now: f64,
    ) -> PyResult<&'static str> {
        let at = self.clock.instant(now)?;
        let content_type = header(content_type, "content_type")?;
        let retry_after = header(retry_after, "retry_after")?;
        let response = ReconnectResponse::from_raw(
            status,
            retry_after.as_deref(),
            content_type.as_deref(),
            SystemTime::now(),
        );
        Ok(match self.inner.reconnect_response(&response, at) {
            Answer::Read => "read",
            Answer::Drop => "drop",
        })
    }

    /// The reconnect request failed at `now` before a response head.
    fn reconnect_failed(&mut self, now: f64) -> PyResult<()> {
        let at = self.clock.instant(now)?;
        self.inner.reconnect_failed(at);
        Ok(())
    }

    /// The id of the last event processed (sent as `Last-Event-ID` on a resume).
    #[getter]
    fn cursor<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        opt_bytes(py, self.inner.cursor())
    }

    /// Whether the stream finished or failed.
    #[getter]
    fn is_done(&self) -> bool {
        self.inner.is_done()
    }

    /// Whether a connection is open and wants its bytes.
    #[getter]
    fn is_open(&self) -> bool {
        self.inner.is_open()
    }

    /// Requests this stream must still deliver.
    #[getter]
    fn outstanding<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        rpc_ids_py(py, &self.inner.outstanding())
    }

    /// Resumes so far.
    #[getter]
    fn resumes(&self) -> u32 {
        self.inner.resumes()
    }

    /// The stream's counters.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("events", s.events)?;
        d.set_item("delivered", s.delivered)?;
        d.set_item("delivered_bytes", s.delivered_bytes)?;
        d.set_item("skipped", s.skipped)?;
        d.set_item("discarded_partials", s.discarded_partials)?;
        d.set_item("discarded_bytes", s.discarded_bytes)?;
        d.set_item("resumes", s.resumes)?;
        Ok(d)
    }

    /// The delay (seconds) the server last asked for (`retry:` or `Retry-After`), before clamps.
    #[getter]
    fn server_retry(&self) -> Option<f64> {
        self.inner.server_retry().map(|d| d.as_secs_f64())
    }

    /// The instruction set the stream's gate runs on.
    #[getter]
    fn gate_isa(&self) -> &'static str {
        self.inner.gate_isa().name()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "ResumableStream(open={}, done={}, resumes={}, cursor={}, outstanding={})",
            if self.inner.is_open() {
                "True"
            } else {
                "False"
            },
            if self.inner.is_done() {
                "True"
            } else {
                "False"
            },
            self.inner.resumes(),
            opt_bytes_repr(self.inner.cursor().map(|c| &c[..])),
            rpc_ids_repr(py, &self.inner.outstanding())
        )
    }
}
