//! Python buffers in, `Bytes` out, and back: how data crosses the boundary without copies.
//!
//! A `bytes` object is immutable, so the engine can keep slices of it for as long as it likes: a
//! chunk given as `bytes` becomes a [`Bytes`] that shares the object's memory and holds a reference
//! to it ([`Bytes::from_owner`]). Any other buffer (a `bytearray`, a `memoryview`, an `array`, an
//! `mmap`) can change under the engine's feet, from Python or from another thread while the GIL is
//! released, so it is copied once (into a new `bytes` object, shared from then on).
//!
//! Going back, event data that is one slice of such a `bytes` chunk is handed to Python as a
//! read-only `memoryview` of that very object ([`view`]): no copy either way. To find the object a
//! slice belongs to, every shared chunk is listed in [`LIVE`] (its address range and the object) for
//! as long as any slice of it lives: the list entry goes when the last [`Owner`] of the range is
//! dropped. Live objects never overlap in memory, so the entry with the greatest start at or below a
//! slice's address is the only candidate.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use bytes::Bytes;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyMemoryView, PySlice};
use ssegate::sse::Data;

/// Inputs at least this long are scanned with the GIL released (below it, releasing and taking the
/// GIL back costs more than it frees).
pub(crate) const DETACH_AT: usize = 64 << 10;

/// A `bytes` object whose memory the engine shares.
struct Listed {
    /// One past the last byte.
    end: usize,
    /// A read-only `memoryview` of the whole object: data that is a slice of it is handed out as
    /// a slice of this view (one object per event, not two).
    view: Py<PyMemoryView>,
    /// [`Owner`]s alive for this range (one per time the object was fed).
    owners: usize,
}

/// Every shared `bytes` object, by the address of its first byte.
static LIVE: Mutex<BTreeMap<usize, Listed>> = Mutex::new(BTreeMap::new());

fn live() -> MutexGuard<'static, BTreeMap<usize, Listed>> {
    // Nothing panics while the lock is held; a poisoned map is still consistent.
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The owner behind a shared chunk's [`Bytes`]: keeps the `bytes` object alive and its range listed.
struct Owner {
    data: PyBackedBytes,
    start: usize,
}

impl AsRef<[u8]> for Owner {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let removed = {
            let mut map = live();
            match map.get_mut(&self.start) {
                Some(entry) if entry.owners > 1 => {
                    entry.owners -= 1;
                    None
                }
                Some(_) => map.remove(&self.start),
                None => None,
            }
        };
        // Dropped after the lock is released. Without the GIL (inside `Python::detach`), PyO3 defers
        // the decref to the next time a thread attaches.
        drop(removed);
    }
}

/// The memory of `obj`, shared.
fn share(obj: &Bound<'_, PyBytes>) -> PyResult<Bytes> {
    let data = obj.as_bytes();
    if data.is_empty() {
        return Ok(Bytes::new());
    }
    let start = data.as_ptr() as usize;
    let end = start + data.len();
    let listed = live().get_mut(&start).map(|e| e.owners += 1).is_some();
    if !listed {
        // Made before the lock is taken (it calls into Python).
        let view = PyMemoryView::from(obj.as_any())?.unbind();
        let spare = match live().entry(start) {
            Entry::Occupied(mut e) => {
                e.get_mut().owners += 1;
                Some(view)
            }
            Entry::Vacant(e) => {
                e.insert(Listed {
                    end,
                    view,
                    owners: 1,
                });
                None
            }
        };
        // Not needed if another thread listed the object meanwhile: dropped after the lock.
        drop(spare);
    }
    Ok(Bytes::from_owner(Owner {
        data: PyBackedBytes::from(obj.clone()),
        start,
    }))
}

/// A chunk of input as [`Bytes`]: a `bytes` object is shared, any other buffer (`bytearray`,
/// `memoryview`, `array`, `mmap`, ...) is copied once, into a new `bytes` object that is then
/// shared. (The stable ABI of Python 3.10 has no buffer protocol, so a view of a `bytes` object is
/// copied too.)
pub(crate) fn chunk_of(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return share(b);
    }
    share(&copied(obj)?)
}

/// A copy of a buffer as a new `bytes` object (`bytes(memoryview(obj))`: only objects that export
/// a buffer are taken, not `bytes()`'s other arguments such as an int or a list).
fn copied<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let view = PyMemoryView::from(obj).map_err(|_| {
        PyTypeError::new_err(format!(
            "expected bytes, bytearray or memoryview, not {}",
            obj.get_type()
                .name()
                .map_or_else(|_| "?".to_owned(), |n| n.to_string())
        ))
    })?;
    let bytes = obj.py().get_type::<PyBytes>().call1((&view,))?;
    view.call_method0("release")?;
    Ok(bytes.cast_into::<PyBytes>()?)
}

/// The bytes of `obj` for a one-shot scan (the gate): `f` gets the memory of a `bytes` object in
/// place, and a copy of any other buffer (which could change while the GIL is released). `f` runs
/// with the GIL released when the input is [`DETACH_AT`] bytes or more.
pub(crate) fn with_bytes<T: Send>(
    obj: &Bound<'_, PyAny>,
    f: impl FnOnce(&[u8]) -> T + Send,
) -> PyResult<T> {
    let py = obj.py();
    let owned;
    let b = match obj.cast::<PyBytes>() {
        Ok(b) => b,
        Err(_) => {
            owned = copied(obj)?;
            &owned
        }
    };
    // Immutable, and kept alive by the caller's reference (or `owned`) for the whole call.
    let data = b.as_bytes();
    Ok(if data.len() >= DETACH_AT {
        py.detach(|| f(data))
    } else {
        f(data)
    })
}

/// The view of the `bytes` object `segment` is a slice of, if it is one, and where in it the slice
/// starts.
fn owner_of(py: Python<'_>, segment: &[u8]) -> Option<(Py<PyMemoryView>, usize)> {
    let at = segment.as_ptr() as usize;
    let map = live();
    let (&start, entry) = map.range(..=at).next_back()?;
    let end = at.checked_add(segment.len())?;
    (end <= entry.end).then(|| (entry.view.clone_ref(py), at - start))
}

/// Event data as a read-only `memoryview`: of the input `bytes` object it is a slice of (no copy),
/// else of one new `bytes` object (the rope joined once).
pub(crate) fn view<'py>(py: Python<'py>, data: &Data) -> PyResult<Bound<'py, PyAny>> {
    if let [one] = data.segments()
        && let Some((view, from)) = owner_of(py, one)
    {
        // Always a new view (a slice), even of the whole object: the listed view is never handed
        // out, so no caller can release it.
        let range = PySlice::new(py, from as isize, (from + one.len()) as isize, 1);
        return view.into_bound(py).into_any().get_item(range);
    }
    let joined = joined(py, data)?;
    Ok(PyMemoryView::from(joined.as_any())?.into_any())
}

/// [`view`], made once and kept in `cache`. (Not `PyOnceLock`, whose first initialisation lets go
/// of the GIL and takes it back: a cost per event, and a wait behind any other thread.)
pub(crate) fn cached_view(
    py: Python<'_>,
    cache: &OnceLock<Py<PyAny>>,
    data: &Data,
) -> PyResult<Py<PyAny>> {
    if let Some(v) = cache.get() {
        return Ok(v.clone_ref(py));
    }
    let made = view(py, data)?.unbind();
    // Only a thread holding the GIL gets here, and nothing in between lets go of it.
    Ok(cache.get_or_init(|| made).clone_ref(py))
}

/// The data as one new `bytes` object.
pub(crate) fn joined<'py>(py: Python<'py>, data: &Data) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, data.len(), |out| {
        let mut at = 0;
        for s in data.chunks() {
            out[at..at + s.len()].copy_from_slice(s);
            at += s.len();
        }
        Ok(())
    })
}

/// Shared `bytes` objects still listed (tests: nothing leaks once the events are gone).
#[cfg(feature = "testing")]
pub(crate) fn live_chunks() -> usize {
    live().len()
}
