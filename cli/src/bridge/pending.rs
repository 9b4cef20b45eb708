//! The relay's table of what is under way between the host and the server, owned by the relay's
//! loop alone: the host's requests being answered (each with the handle that cancels it) and the
//! server's requests asked of the host (each with the sender its answer goes to).
//!
//! A host request is known by its id's JSON text and by a number of its own: when the host cancels
//! request `1` and sends another `1`, the first one's answer, if it was already on its way, is not
//! taken for the second's.

use std::collections::HashMap;

use serde_json::Value;
use ssegate::client::RpcError;
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

/// Where the host's answer to a server request goes.
pub(super) type Reply = oneshot::Sender<Result<Value, RpcError>>;

/// One host request under way.
struct Request {
    seq: u64,
    task: AbortHandle,
}

#[derive(Default)]
pub(super) struct Pending {
    requests: HashMap<String, Request>,
    next_seq: u64,
    asked: HashMap<String, Reply>,
    next_ask: u64,
}

impl Pending {
    /// Whether a request with the id `key` is under way.
    pub(super) fn in_use(&self, key: &str) -> bool {
        self.requests.contains_key(key)
    }

    /// The number the next request is known by (given to its task before it is spawned).
    pub(super) fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Records the request `key` (numbered `seq`), cancelled by `task`.
    pub(super) fn insert(&mut self, key: String, seq: u64, task: AbortHandle) {
        self.requests.insert(key, Request { seq, task });
    }

    /// The request `key` numbered `seq` is answered: whether it was still under way (and is no
    /// longer). `false`: it was cancelled, or the id now belongs to a later request.
    pub(super) fn finish(&mut self, key: &str, seq: u64) -> bool {
        match self.requests.get(key) {
            Some(request) if request.seq == seq => {
                self.requests.remove(key);
                true
            }
            _ => false,
        }
    }

    /// Cancels the request `key`: whether it was under way. Its task is aborted; it gets no
    /// answer.
    pub(super) fn cancel(&mut self, key: &str) -> bool {
        match self.requests.remove(key) {
            Some(request) => {
                request.task.abort();
                true
            }
            None => false,
        }
    }

    /// Cancels every request under way; how many there were.
    pub(super) fn cancel_all(&mut self) -> usize {
        let n = self.requests.len();
        for (_, request) in self.requests.drain() {
            request.task.abort();
        }
        n
    }

    /// Records a server request to ask of the host: the id to ask it under. Requests whose asker
    /// stopped waiting (its deadline passed) are forgotten first.
    pub(super) fn ask(&mut self, reply: Reply) -> String {
        self.asked.retain(|_, reply| !reply.is_closed());
        self.next_ask += 1;
        let id = format!("ssegate-{}", self.next_ask);
        self.asked
            .insert(Value::String(id.clone()).to_string(), reply);
        id
    }

    /// The host answered `key`: where the answer goes, if it was asked and is still awaited.
    pub(super) fn answered(&mut self, key: &str) -> Option<Reply> {
        self.asked.remove(key).filter(|reply| !reply.is_closed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle_task() -> AbortHandle {
        tokio::spawn(std::future::pending::<()>()).abort_handle()
    }

    #[tokio::test]
    async fn an_answer_counts_only_for_the_request_it_was_made_for() {
        let mut pending = Pending::default();
        let first = pending.next_seq();
        pending.insert("1".into(), first, idle_task());
        assert!(pending.in_use("1"));
        assert!(pending.cancel("1"));
        assert!(!pending.in_use("1"));
        // The host reuses the id; the cancelled request's answer arrives late.
        let second = pending.next_seq();
        pending.insert("1".into(), second, idle_task());
        assert!(
            !pending.finish("1", first),
            "the cancelled request's answer"
        );
        assert!(pending.in_use("1"));
        assert!(pending.finish("1", second));
        assert!(!pending.finish("1", second), "answered once");
    }

    #[tokio::test]
    async fn cancelling_aborts_the_task() {
        let mut pending = Pending::default();
        let task = tokio::spawn(std::future::pending::<()>());
        let seq = pending.next_seq();
        pending.insert("\"a\"".into(), seq, task.abort_handle());
        assert!(!pending.cancel("\"b\""));
        assert_eq!(pending.cancel_all(), 1);
        assert!(task.await.unwrap_err().is_cancelled());
        assert!(!pending.in_use("\"a\""));
    }

    #[test]
    fn a_host_answer_goes_to_the_request_asked_once_and_only_while_awaited() {
        let mut pending = Pending::default();
        let (tx, mut rx) = oneshot::channel();
        let id = pending.ask(tx);
        let key = Value::String(id.clone()).to_string();
        let (tx2, rx2) = oneshot::channel();
        let id2 = pending.ask(tx2);
        assert_ne!(id, id2);
        pending
            .answered(&key)
            .expect("asked")
            .send(Ok(Value::Null))
            .unwrap();
        assert!(rx.try_recv().unwrap().is_ok());
        assert!(pending.answered(&key).is_none(), "answered once");
        // The asker stopped waiting: its answer has nowhere to go, and it is forgotten.
        drop(rx2);
        assert!(pending.answered(&Value::String(id2).to_string()).is_none());
        let (tx3, _rx3) = oneshot::channel();
        pending.ask(tx3);
        assert_eq!(pending.asked.len(), 1);
    }
}
