//! The session registry: outstanding requests and answered responses, shared by every stream of one
//! MCP session.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::ids::{KeyMap, random_seed, rpc_id_key};
use crate::message::RpcId;

/// The requests of one MCP session that still wait for a response, and the responses already
/// delivered (a bounded window of them), shared by all the session's streams.
///
/// A clone is another handle to the same registry. Give one to each stream of the session
/// ([`StreamConfig::build_in`](crate::resume::StreamConfig::build_in), or a
/// [`Session`](crate::resume::Session)): a response that arrives on another stream than the one
/// that was expected to carry it (the standalone `GET` stream after the `POST` stream was
/// cut) is then recognised, the cut stream no longer needs resuming, and a second copy of the
/// response anywhere in the session is skipped when identical and refused when not.
///
/// Only responses to requested ids are remembered, each as a hash and a length (a few words,
/// whatever the id's size), for the last [`Registry::with_window`] answers (default 4096); each
/// guard compares responses to ids never requested on its own stream
/// ([`GuardConfig::unrequested_window`](super::GuardConfig::unrequested_window)). The lock is taken
/// for responses, disconnects and refusals, never for other events.
#[derive(Clone, Default)]
pub struct Registry {
    book: Arc<Mutex<Book>>,
}

#[derive(Clone, Copy, Debug)]
struct Answer {
    len: usize,
    content: u64,
}

struct Book {
    seed: u64,
    window: usize,
    /// Requested ids with their key (seeded hash): requests are the client's own, so few and small.
    outstanding: Vec<(u64, RpcId)>,
    answered: KeyMap<Answer>,
    order: VecDeque<u64>,
}

impl Default for Book {
    fn default() -> Self {
        Book {
            seed: random_seed(),
            window: DEFAULT_WINDOW,
            outstanding: Vec::new(),
            answered: KeyMap::default(),
            order: VecDeque::new(),
        }
    }
}

/// Default number of answered request ids remembered.
pub(crate) const DEFAULT_WINDOW: usize = 4096;

/// What a registry says about a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Response {
    /// The first response to an outstanding request: now answered.
    New,
    /// A response to an id nobody in the session requested (or one answered too long ago).
    Unrequested,
    /// A second copy of an answered request's response, identical.
    Identical,
    /// A second, different response to an answered request.
    Different,
}

impl Book {
    fn key(&self, id: &RpcId) -> (u64, usize) {
        rpc_id_key(self.seed, id)
    }

    fn answered(&self, id: &RpcId) -> Option<Answer> {
        let (key, len) = self.key(id);
        self.answered.get(&key).copied().filter(|a| a.len == len)
    }

    fn is_outstanding(&self, id: &RpcId) -> Option<usize> {
        let (key, _) = self.key(id);
        self.outstanding
            .iter()
            .position(|(k, o)| *k == key && o == id)
    }
}

impl Registry {
    /// An empty registry remembering the default 4096 answered ids.
    pub fn new() -> Self {
        Registry::default()
    }

    /// An empty registry remembering the last `ids` answered request ids (at least 1).
    pub fn with_window(ids: usize) -> Self {
        let r = Registry::default();
        r.lock().window = ids.max(1);
        r
    }

    fn lock(&self) -> MutexGuard<'_, Book> {
        // A panic elsewhere while holding the lock leaves consistent data: every update is one step.
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a request of the session whose response is awaited (idempotent).
    pub fn expect(&self, id: RpcId) {
        let mut book = self.lock();
        if book.is_outstanding(&id).is_none() {
            let (key, _) = book.key(&id);
            book.outstanding.push((key, id));
        }
    }

    /// Whether a response to `id` was delivered in this session (within the window).
    pub fn is_answered(&self, id: &RpcId) -> bool {
        self.lock().answered(id).is_some()
    }

    /// The session's requests still waiting for a response, in the order they were registered.
    pub fn outstanding(&self) -> Vec<RpcId> {
        self.lock()
            .outstanding
            .iter()
            .map(|(_, id)| id.clone())
            .collect()
    }

    /// Gives up on a request (the call was abandoned): it is no longer outstanding, and no stream
    /// needs resuming for it. A late response to it is delivered like any unrequested message.
    pub fn forget(&self, id: &RpcId) {
        let mut book = self.lock();
        if let Some(at) = book.is_outstanding(id) {
            book.outstanding.remove(at);
        }
    }

    /// Records a response to `id` whose content hashes to `content`.
    pub(crate) fn answer(&self, id: &RpcId, content: u64) -> Response {
        let mut book = self.lock();
        let (key, len) = book.key(id);
        if let Some(seen) = book.answered(id) {
            return if seen.content == content {
                Response::Identical
            } else {
                Response::Different
            };
        }
        let Some(at) = book.is_outstanding(id) else {
            return Response::Unrequested;
        };
        book.outstanding.remove(at);
        book.answered.insert(key, Answer { len, content });
        book.order.push_back(key);
        let window = book.window;
        if book.order.len() == window && book.answered.capacity() < 2 * window + 2 {
            // See `Window::insert`: room for tombstones, so a full window never allocates again.
            book.answered.reserve(window + 2);
        }
        while book.order.len() > book.window {
            let Some(old) = book.order.pop_front() else {
                break;
            };
            book.answered.remove(&old);
        }
        Response::New
    }

    /// Keeps in `ids` only the requests that are still outstanding in the session.
    pub(crate) fn retain_outstanding(&self, ids: &mut smallvec::SmallVec<[RpcId; 2]>) {
        if ids.is_empty() {
            return;
        }
        let book = self.lock();
        ids.retain(|id| book.is_outstanding(id).is_some());
    }

    #[cfg(feature = "__testing")]
    /// Forgets every answer (a private registry after a renegotiation).
    pub(crate) fn clear(&self) {
        let mut book = self.lock();
        book.answered.clear();
        book.order.clear();
        book.outstanding.clear();
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let book = self.lock();
        f.debug_struct("Registry")
            .field("outstanding", &book.outstanding.len())
            .field("answered", &book.order.len())
            .field("window", &book.window)
            .finish()
    }
}
