//! The one counting global allocator of the workspace's memory tests, allocation benches and the
//! `sse_memory` fuzz target: it forwards every call to [`System`] and counts, both process-wide
//! and per thread, the bytes in use, their peak, the allocations made and the bytes allocated.
//!
//! A test binary installs it and measures a stretch of code with a [`Span`]:
//!
//! ```
//! use ssegate_oracles::alloc::{Counting, Span};
//!
//! #[global_allocator]
//! static ALLOC: Counting = Counting;
//!
//! fn main() {
//!     let span = Span::thread();
//!     let v = vec![0u8; 1 << 20];
//!     assert!(span.peak() >= 1 << 20 && span.allocations() >= 1);
//!     drop(v);
//!     assert!(span.held() <= 0);
//! }
//! ```
//!
//! Counting rules (the same for every user, so figures compare across tests and benches):
//!
//! - `alloc` and `alloc_zeroed` of `n` bytes: one allocation, `n` bytes allocated, `n` more live;
//! - `dealloc` of `n` bytes: `n` fewer live;
//! - `realloc` from `old` to `new` bytes: one allocation, the growth (`new - old`, if positive)
//!   allocated; live counts the new block *before* the old one is freed, so the peak includes both,
//!   as it does when the block moves;
//! - a failed call (a null pointer) counts nothing.
//!
//! Per-thread counts are what a test that runs on its own thread and frees what it allocates on
//! that thread should measure: they stay exact while other tests of the binary run in parallel. A
//! thread's live count may go negative when it frees what another thread allocated. Process-wide
//! counts see every thread (a runtime's workers, a server in the same process); a test that
//! measures them must run alone (one test function, or a lock around the measured stretch).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicU64, Ordering::Relaxed};

/// The counting global allocator (see the module docs). Install it with `#[global_allocator]`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counting;

/// What the allocator counted, process-wide or for one thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Bytes in use now.
    pub live: isize,
    /// Most bytes in use at once since the last peak reset (a [`Span`]'s start).
    pub peak: isize,
    /// Allocations made (`alloc`, `alloc_zeroed` and `realloc` calls).
    pub allocations: u64,
    /// Bytes allocated (a `realloc` counts its growth).
    pub allocated: u64,
}

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED: AtomicU64 = AtomicU64::new(0);

// Const initialisers and no destructors: touching them never allocates, so the allocator may.
thread_local! {
    static T_LIVE: Cell<isize> = const { Cell::new(0) };
    static T_PEAK: Cell<isize> = const { Cell::new(0) };
    static T_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static T_ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

/// One allocation of `allocated` bytes (0 for a shrinking `realloc`).
fn allocation(allocated: usize) {
    let allocated = allocated as u64;
    ALLOCATIONS.fetch_add(1, Relaxed);
    ALLOCATED.fetch_add(allocated, Relaxed);
    // `try_with`: a thread being torn down has no counters left; nothing to count there then.
    let _ = T_ALLOCATIONS.try_with(|a| a.set(a.get() + 1));
    let _ = T_ALLOCATED.try_with(|a| a.set(a.get() + allocated));
}

/// `delta` bytes more (or fewer) in use.
fn live(delta: isize) {
    let now = LIVE.fetch_add(delta, Relaxed) + delta;
    PEAK.fetch_max(now, Relaxed);
    let _ = T_LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = T_PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is forwarded unchanged to `System`, whose result is returned as is; the
// counters are atomics and thread-local cells with const initialisers, so counting never
// allocates (no re-entry) and never unwinds.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            allocation(layout.size());
            live(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            allocation(layout.size());
            live(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `System`'s (`ptr` came from it, with `layout`).
        unsafe { System.dealloc(ptr, layout) };
        live(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            allocation(new_size.saturating_sub(layout.size()));
            live(new_size as isize);
            live(-(layout.size() as isize));
        }
        p
    }
}

impl Counting {
    /// Process-wide counts so far.
    pub fn process() -> Counts {
        Counts {
            live: LIVE.load(Relaxed),
            peak: PEAK.load(Relaxed),
            allocations: ALLOCATIONS.load(Relaxed),
            allocated: ALLOCATED.load(Relaxed),
        }
    }

    /// The current thread's counts so far.
    pub fn thread() -> Counts {
        Counts {
            live: T_LIVE.with(Cell::get),
            peak: T_PEAK.with(Cell::get),
            allocations: T_ALLOCATIONS.with(Cell::get),
            allocated: T_ALLOCATED.with(Cell::get),
        }
    }
}

/// Whose allocations a [`Span`] measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every thread's (measure one stretch of code at a time).
    Process,
    /// The current thread's.
    Thread,
}

/// A measurement from its start on: the peak of its scope is reset to the bytes in use at the
/// start, and every figure is relative to the start.
#[derive(Clone, Copy, Debug)]
#[must_use = "a span measures nothing unless read"]
pub struct Span {
    scope: Scope,
    start: Counts,
}

impl Span {
    /// Starts measuring every thread's allocations (resets the process-wide peak).
    pub fn process() -> Span {
        let live = LIVE.load(Relaxed);
        PEAK.store(live, Relaxed);
        Span {
            scope: Scope::Process,
            start: Counting::process(),
        }
    }

    /// Starts measuring the current thread's allocations (resets the thread's peak).
    pub fn thread() -> Span {
        let live = T_LIVE.with(Cell::get);
        T_PEAK.with(|p| p.set(live));
        Span {
            scope: Scope::Thread,
            start: Counting::thread(),
        }
    }

    /// What this span measures.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    fn now(&self) -> Counts {
        match self.scope {
            Scope::Process => Counting::process(),
            Scope::Thread => Counting::thread(),
        }
    }

    /// The most bytes in use at once since the start, above what was in use at the start.
    pub fn peak(&self) -> usize {
        (self.now().peak - self.start.live).max(0) as usize
    }

    /// Bytes in use now minus bytes in use at the start (negative when more was freed).
    pub fn held(&self) -> isize {
        self.now().live - self.start.live
    }

    /// Allocations made since the start.
    pub fn allocations(&self) -> u64 {
        self.now().allocations - self.start.allocations
    }

    /// Bytes allocated since the start.
    pub fn allocated(&self) -> u64 {
        self.now().allocated - self.start.allocated
    }
}
