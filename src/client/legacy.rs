//! The 2024-11-05 HTTP+SSE transport: one `GET` event stream per session, whose first `endpoint`
//! event names the URL every message is `POST`ed to; every message of the server (responses,
//! requests, notifications) arrives on that one stream.
//!
//! The stream is read by one task per session (the reader) through the session's
//! [`ResumableStream`], so every message is judged by the gate and the guard as on Streamable
//! HTTP: one response per id (a second, different one is refused), the decoder's limits. A call
//! registers itself with the reader before its `POST` (the response may come before the `POST`'s
//! `202`) and waits for its response there. When the stream ends, is cut or is refused, the
//! session is over: every call still waiting gets a lost-stream failure (the server may have run
//! it), and the next call opens a new session. The stream is never resumed: the transport has no
//! resumption (a new `GET` is a new session).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Instant;

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use reqwest::header::{self, HeaderMap, HeaderValue};
use tokio::sync::{oneshot, watch};
use tracing::{debug, warn};

use super::transport::{Body, mime_is, status_error};
use super::{Client, ClientError, Inner, ProtocolError, Session};
use crate::guard::{Refusal, RefusalKind};
use crate::message::{Message, RpcId, RpcKind};
use crate::resume::{self, EndCause, Failure, Output, ResumableStream};
use crate::sse::Decoder;

/// Server requests of one session handled at once; past it the reader waits (and reads no more)
/// until one is answered.
const MAX_SERVER_REQUESTS: usize = 64;

/// A session on the HTTP+SSE transport: where messages are posted, and its reader.
#[derive(Clone, Debug)]
pub(super) struct Legacy {
    /// The `endpoint` event's URL, resolved against the stream's URL (same origin).
    pub(super) endpoint: reqwest::Url,
    pub(super) shared: Arc<Shared>,
    /// Ends the reader when the last copy of the session goes; `None` in the reader's own copy.
    reader: Option<Arc<Reader>>,
}

impl Legacy {
    /// Ends the session now: the stream is dropped, waiting calls fail.
    pub(super) fn end(&self) {
        if let Some(reader) = &self.reader {
            reader.task.abort();
        }
        self.shared.end(cut(None));
    }
}

/// The reader task's handle: dropping the last session that holds it stops the reader.
struct Reader {
    task: tokio::task::AbortHandle,
    shared: Arc<Shared>,
}

impl fmt::Debug for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader").finish_non_exhaustive()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.task.abort();
        self.shared.end(cut(None));
    }
}

type Waiting = oneshot::Sender<Result<Message, Failure>>;

/// What the reader shares with the calls waiting for responses.
pub(super) struct Shared {
    state: Mutex<State>,
    ended: watch::Sender<bool>,
}

#[derive(Default)]
struct State {
    waiting: HashMap<RpcId, Waiting>,
    /// Why the session ended, once it has.
    ended: Option<Failure>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("Shared")
            .field("waiting", &state.waiting.len())
            .field("ended", &state.ended)
            .finish()
    }
}

/// The failure a cut stream is: nothing to resume from.
fn cut(cursor: Option<Bytes>) -> Failure {
    Failure::Refused(Refusal {
        kind: RefusalKind::Unresumable {
            partial_bytes: 0,
            partial_id: None,
        },
        cursor,
        outstanding: Vec::new(),
    })
}

/// `failure` as `id`'s: the same failure, naming only `id` as outstanding.
fn for_request(failure: &Failure, id: &RpcId) -> Failure {
    match failure {
        Failure::Refused(r) => Failure::Refused(Refusal {
            kind: r.kind.clone(),
            cursor: r.cursor.clone(),
            outstanding: vec![id.clone()],
        }),
        other => other.clone(),
    }
}

impl Shared {
    fn new() -> Shared {
        Shared {
            state: Mutex::new(State::default()),
            ended: watch::Sender::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `id` as waiting for its response (before its `POST`); the session's guard
    /// expects it. A session that has ended takes nothing: `Err` is the failure that says so
    /// (the request was not sent, so it may always be sent on a new session).
    pub(super) fn wait(
        self: &Arc<Self>,
        id: RpcId,
        streams: &resume::Session,
    ) -> Result<Waiter, Box<Failure>> {
        let (tx, rx) = oneshot::channel();
        let mut state = self.lock();
        if state.ended.is_some() {
            return Err(Box::new(Failure::Refused(Refusal {
                kind: RefusalKind::SessionExpired,
                cursor: None,
                outstanding: vec![id],
            })));
        }
        streams.registry().expect(id.clone());
        state.waiting.insert(id.clone(), tx);
        Ok(Waiter {
            shared: self.clone(),
            streams: streams.clone(),
            id,
            rx: Some(rx),
        })
    }

    /// Ends the session with `failure`: every waiting call gets it (as its own), later calls are
    /// not taken. The first end is the one kept.
    fn end(&self, failure: Failure) {
        let waiting = {
            let mut state = self.lock();
            if state.ended.is_none() {
                state.ended = Some(failure);
            }
            std::mem::take(&mut state.waiting)
        };
        let failure = self.lock().ended.clone().expect("set above");
        for (id, tx) in waiting {
            let _ = tx.send(Err(for_request(&failure, &id)));
        }
        self.ended.send_replace(true);
    }

    /// Fails every waiting call with `failure` (an event dropped over a decoder limit may have
    /// been any of their responses); the session goes on.
    fn fail_waiting(&self, failure: &Failure) {
        let waiting = std::mem::take(&mut self.lock().waiting);
        for (id, tx) in waiting {
            let _ = tx.send(Err(for_request(failure, &id)));
        }
    }

    fn take(&self, id: &RpcId) -> Option<Waiting> {
        self.lock().waiting.remove(id)
    }

    fn is_waiting(&self) -> bool {
        !self.lock().waiting.is_empty()
    }

    /// Resolves when the session has ended.
    pub(super) fn ended(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
        let mut rx = self.ended.subscribe();
        async move {
            let _ = rx.wait_for(|ended| *ended).await;
        }
    }
}

/// A call waiting for its response on the session's stream; dropped, it waits no more.
pub(super) struct Waiter {
    shared: Arc<Shared>,
    streams: resume::Session,
    id: RpcId,
    rx: Option<oneshot::Receiver<Result<Message, Failure>>>,
}

impl Waiter {
    /// The response, or the failure that ended the session (or dropped it) first.
    pub(super) async fn response(&mut self) -> Result<Message, Failure> {
        let Some(rx) = self.rx.take() else {
            return Err(cut(None));
        };
        match rx.await {
            Ok(answer) => answer,
            Err(_) => {
                let ended = self.shared.lock().ended.clone();
                Err(for_request(&ended.unwrap_or_else(|| cut(None)), &self.id))
            }
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.shared.take(&self.id);
        self.streams.forget(&self.id);
    }
}

/// Why the `GET` found no HTTP+SSE stream.
pub(super) enum Open {
    /// `400`, `404`, `405`, or an answer that is no event stream: not this transport at this URL
    /// (a Streamable HTTP server answers a `GET` without a session `400` or `405`).
    NotHere(ClientError),
    /// Any other failure (unreachable, `401`, `5xx`, a broken `endpoint` event).
    Failed(ClientError),
}

/// An HTTP+SSE stream whose `endpoint` event was read: the endpoint, and the rest of the stream.
pub(super) struct Opened {
    endpoint: reqwest::Url,
    body: Body,
}

/// Reads the stream's first `endpoint` event (at most `max` bytes of stream before it is
/// complete) with the crate's SSE decoder: its data, and the bytes read past it (the session's
/// stream goes on from there).
async fn read_endpoint(body: &mut Body, max: usize) -> Result<(String, Bytes), ClientError> {
    let too_far = || {
        ClientError::Protocol(ProtocolError::NoEndpoint(format!(
            "no endpoint event in the first {max} bytes"
        )))
    };
    let mut decoder = Decoder::new();
    // What was fed, kept to hand the bytes past the endpoint event on (at most `max` + a chunk).
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut fed = 0u64;
    loop {
        // A limit error is skipped: the decoder has resynchronised, and `max` bounds the wait.
        while let Some(event) = decoder.next_event() {
            let Ok(event) = event else { continue };
            if event.event.as_deref() != Some(b"endpoint".as_slice()) {
                debug!("an event before the endpoint event: ignored");
                continue;
            }
            let mut end = decoder.offset();
            // The decoder dispatches at a CR; the LF of a CRLF belongs to this event too.
            if end > 0 && byte_at(&chunks, end - 1) == Some(b'\r') {
                if fed == end {
                    match body.next().await {
                        Some(Ok(chunk)) => chunks.push(chunk),
                        Some(Err(e)) => return Err(e),
                        None => {}
                    }
                }
                if byte_at(&chunks, end) == Some(b'\n') {
                    end += 1;
                }
            }
            if end > max as u64 {
                return Err(too_far());
            }
            let text = String::from_utf8(event.data.contiguous().to_vec()).map_err(|_| {
                ClientError::Protocol(ProtocolError::NoEndpoint(
                    "the endpoint event's data is not UTF-8".to_owned(),
                ))
            })?;
            let mut rest = Vec::new();
            let mut base = 0u64;
            for chunk in &chunks {
                let len = chunk.len() as u64;
                if base + len > end {
                    rest.extend_from_slice(&chunk[end.saturating_sub(base) as usize..]);
                }
                base += len;
            }
            return Ok((text, Bytes::from(rest)));
        }
        if fed > max as u64 {
            return Err(too_far());
        }
        match body.next().await {
            Some(Ok(chunk)) => {
                fed += chunk.len() as u64;
                chunks.push(chunk.clone());
                decoder.feed(chunk);
            }
            Some(Err(e)) => return Err(e),
            None => {
                return Err(ClientError::Protocol(ProtocolError::NoEndpoint(
                    "the stream ended before its endpoint event".to_owned(),
                )));
            }
        }
    }
}

/// The byte at stream offset `at` of `chunks` (fed in order from offset 0).
fn byte_at(chunks: &[Bytes], at: u64) -> Option<u8> {
    let mut base = 0u64;
    for chunk in chunks {
        let len = chunk.len() as u64;
        if at < base + len {
            return Some(chunk[(at - base) as usize]);
        }
        base += len;
    }
    None
}

/// Now, on the clock tokio's timers use.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl Client {
    /// `GET`s the URL for an HTTP+SSE stream and reads its `endpoint` event.
    pub(super) async fn open_legacy_stream(&self) -> Result<Opened, Open> {
        let fresh = Session::default();
        let mut extra = HeaderMap::new();
        extra.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        let res = self
            .send(
                reqwest::Method::GET,
                &fresh,
                extra,
                None,
                "open the SSE stream",
            )
            .await
            .map_err(Open::Failed)?;
        let status = res.status().as_u16();
        if matches!(status, 400 | 404 | 405) {
            let cap = self.inner.config.max_error_body;
            return Err(Open::NotHere(
                status_error(res, "open the SSE stream", cap).await,
            ));
        }
        let res = self
            .expect_ok(res, "open the SSE stream")
            .await
            .map_err(Open::Failed)?;
        let content_type = res
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if !mime_is(content_type.as_deref(), "text/event-stream") {
            return Err(Open::NotHere(ClientError::Protocol(
                ProtocolError::ContentType(content_type),
            )));
        }
        let base = res.url().clone();
        let mut body: Body = Box::pin(
            res.bytes_stream()
                .map_err(ClientError::http("the SSE stream")),
        );
        let (data, rest) = read_endpoint(&mut body, self.inner.config.max_endpoint_event)
            .await
            .map_err(Open::Failed)?;
        let endpoint = base.join(&data).map_err(|e| {
            Open::Failed(ClientError::Protocol(ProtocolError::NoEndpoint(format!(
                "{data:?} is no URI reference: {e}"
            ))))
        })?;
        if endpoint.origin() != self.inner.url.origin() {
            return Err(Open::Failed(ClientError::Protocol(
                ProtocolError::ForeignEndpoint(endpoint.to_string()),
            )));
        }
        debug!(%endpoint, "HTTP+SSE stream open");
        let body: Body = if rest.is_empty() {
            body
        } else {
            Box::pin(futures_util::stream::once(async move { Ok(rest) }).chain(body))
        };
        Ok(Opened { endpoint, body })
    }

    /// A fresh session on `opened`, its reader started.
    pub(super) fn legacy_session(&self, opened: Opened) -> Session {
        let Opened { endpoint, body } = opened;
        let shared = Arc::new(Shared::new());
        let streams = resume::Session::new(self.inner.config.stream.clone());
        let mut stream = streams.listen_stream();
        // No resumption on this transport: a cut ends the session.
        stream.keep_open(false);
        stream.resumable(false);
        let reader_session = Session {
            legacy: Some(Legacy {
                endpoint: endpoint.clone(),
                shared: shared.clone(),
                reader: None,
            }),
            streams: streams.clone(),
            ..Session::default()
        };
        let task = tokio::spawn(read(
            Arc::downgrade(&self.inner),
            reader_session,
            stream,
            body,
            shared.clone(),
        ))
        .abort_handle();
        Session {
            legacy: Some(Legacy {
                endpoint,
                shared: shared.clone(),
                reader: Some(Arc::new(Reader { task, shared })),
            }),
            streams,
            ..Session::default()
        }
    }
}

/// The reader: the session's stream through its guard, each response to its waiting call,
/// everything else to the handler, until the stream ends.
async fn read(
    client: Weak<Inner>,
    session: Session,
    mut stream: ResumableStream,
    mut body: Body,
    shared: Arc<Shared>,
) {
    let idle = client
        .upgrade()
        .and_then(|inner| inner.config.stream.idle_timeout_ref());
    let mut transport: Option<ClientError> = None;
    let requests = Arc::new(tokio::sync::Semaphore::new(MAX_SERVER_REQUESTS));
    loop {
        while let Some(output) = stream.poll() {
            match output {
                Output::Deliver(d) => {
                    if d.rpc.kind == RpcKind::Response
                        && let Some(tx) = d.rpc.id.as_ref().and_then(|id| shared.take(id))
                    {
                        let _ = tx.send(Ok(Message::new(d.message.data().clone())));
                        continue;
                    }
                    let Some(inner) = client.upgrade() else {
                        return;
                    };
                    let client = Client { inner };
                    if d.rpc.kind == RpcKind::Request {
                        // Answered on its own: a handler that waits (for a host, a user) holds
                        // up no response.
                        let session = session.clone();
                        let Ok(permit) = requests.clone().acquire_owned().await else {
                            return;
                        };
                        tokio::spawn(async move {
                            client.dispatch(&session, d).await;
                            drop(permit);
                        });
                    } else {
                        client.dispatch(&session, d).await;
                    }
                }
                Output::Dropped(dropped) => {
                    warn!(error = %dropped, "an event over the decoder's limits was dropped");
                    shared.fail_waiting(&Failure::Refused(dropped.into_refusal()));
                }
                Output::Failed(failure) => {
                    warn!(%failure, "the HTTP+SSE stream was refused; the session is over");
                    shared.end(failure);
                    return;
                }
                Output::Finished | Output::Disconnected(_) | Output::Reconnect(_) => {
                    match &transport {
                        Some(e) => debug!(error = %e, "the HTTP+SSE stream was cut"),
                        None => debug!("the HTTP+SSE stream ended"),
                    }
                    shared.end(cut(stream.cursor().cloned()));
                    return;
                }
                _ => {}
            }
        }
        let next = match idle {
            // A call waits: a stream silent for this long is as good as cut.
            Some(t) if shared.is_waiting() => match tokio::time::timeout(t, body.next()).await {
                Ok(next) => next,
                Err(_) => {
                    debug!("the HTTP+SSE stream went idle with calls waiting");
                    None
                }
            },
            _ => body.next().await,
        };
        match next {
            Some(Ok(chunk)) => stream.feed(chunk, now()),
            Some(Err(e)) => {
                transport = Some(e);
                stream.connection_ended(EndCause::Error, now());
            }
            None => stream.connection_ended(EndCause::Eof, now()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(chunks: &[&'static [u8]]) -> Body {
        let chunks: Vec<Result<Bytes, ClientError>> =
            chunks.iter().map(|c| Ok(Bytes::from_static(c))).collect();
        Box::pin(futures_util::stream::iter(chunks))
    }

    #[tokio::test]
    async fn the_endpoint_event_is_read_across_any_chunking() {
        let text: &[u8] = b"\xef\xbb\xbf: hello\r\n\r\nevent: endpoint\r\ndata: /messages?sessionId=1\r\n\r\nevent: message\ndata: {}\n\n";
        for size in 1..text.len() {
            let chunks: Vec<&'static [u8]> = text.chunks(size).collect();
            let mut b = body(&chunks);
            let (data, rest) = read_endpoint(&mut b, 1024).await.unwrap();
            assert_eq!(data, "/messages?sessionId=1", "chunks of {size}");
            let mut all = rest.to_vec();
            while let Some(Ok(c)) = b.next().await {
                all.extend_from_slice(&c);
            }
            assert_eq!(all, b"event: message\ndata: {}\n\n", "chunks of {size}");
        }
    }

    #[tokio::test]
    async fn no_endpoint_event_is_a_typed_error() {
        let mut b = body(&[b"event: message\ndata: {}\n\n"]);
        let err = read_endpoint(&mut b, 1024).await.unwrap_err();
        assert!(
            matches!(err, ClientError::Protocol(ProtocolError::NoEndpoint(_))),
            "{err}"
        );
        // An endless comment: refused at the limit, not held.
        let mut b: Body = Box::pin(futures_util::stream::repeat_with(|| {
            Ok(Bytes::from_static(b": padding padding padding"))
        }));
        let err = read_endpoint(&mut b, 4096).await.unwrap_err();
        assert!(err.to_string().contains("4096"), "{err}");
    }
}
