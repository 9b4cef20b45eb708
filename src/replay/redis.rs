//! A [`ReplayStore`] on Redis Streams, shared by every server instance (feature `redis`).
//!
//! Layout: one Redis stream per SSE stream, `ssegate:{<name>}:e`, whose entries are the encoded
//! frames under the Redis id `0-<seq + 1>`, and a hash `ssegate:{<name>}:m` with the next sequence
//! number, the closed flag and the frame bytes held. `<name>` is 128 random bits in hex, so SSE ids
//! (`<name>-<seq>`) are unique across instances and name their stream: any instance finds the stream
//! from a `Last-Event-ID`. The `{<name>}` hash tag keeps both keys of a stream on one Redis Cluster
//! slot (each operation is one script over those two keys).
//!
//! Appends and replays are Lua scripts, so each is atomic: an append assigns the sequence number,
//! trims the stream oldest-first until it fits the per-stream budget ([`RedisConfig::max_stream_bytes`],
//! [`RedisConfig::max_stream_events`]; exact, not approximate, trimming) and refreshes the keys' expiry
//! ([`RedisConfig::ttl`], so streams expire with an idle session). An event too large for the budget
//! is not stored and evicts nothing; a small marker entry (at most [`RedisConfig::max_too_large`] per
//! stream, outside the budget) makes its miss say `too_large`. A replay is `XRANGE` with an exclusive
//! start after the `Last-Event-ID`'s entry, checked for gaps: either every later event or a [`Miss`].
//!
//! A lost connection is [`MissReason::Unavailable`] (or [`AppendError::Unavailable`],
//! [`StoreError::Unavailable`]) with [`RedisConfig::retry_after`] as the retry hint — a `503` with
//! `Retry-After` on the wire, never an empty stream. The connection manager reconnects on the next
//! operation once Redis is back.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::future::Future;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Script, Value};

use super::frame::{check_event, frame_capacity, put_field, put_tail};
use super::{AppendError, Appended, Miss, MissReason, Replay, ReplayStore, StoreError};

/// Length of a stream name: 128 bits in lower-case hex.
const NAME_LEN: usize = 32;

/// Append: KEYS = stream, meta; ARGV = frame tail (after the id line), id prefix (`<name>-`),
/// max_stream_events, max_stream_bytes, max_event_bytes, max_too_large, ttl_ms, create ('1': open the stream if
/// it does not exist). Returns {status, seq, stored}: status 0 ok, -1 closed, -2 unknown stream.
const APPEND: &str = r#"
local e, m = KEYS[1], KEYS[2]
local st = redis.call('HMGET', m, 'next', 'closed', 'bytes', 'marks')
if not st[1] then
  if ARGV[8] ~= '1' then return {-2, 0, 0} end
  st = {'0', false, '0', '0'}
end
if st[2] == '1' then return {-1, 0, 0} end
local seq = tonumber(st[1])
local bytes = tonumber(st[3] or '0')
local marks = tonumber(st[4] or '0')
local idline = 'id: ' .. ARGV[2] .. seq .. '\n'
local len = #idline + #ARGV[1]
local max_stream_events, max_stream_bytes = tonumber(ARGV[3]), tonumber(ARGV[4])
local max_event, max_marks = tonumber(ARGV[5]), tonumber(ARGV[6])
local xid = '0-' .. (seq + 1)
local stored = 0
if len <= max_event and len <= max_stream_bytes and max_stream_events > 0 then
  -- Make room oldest-first (markers at the front go with the events behind them).
  while true do
    local events = redis.call('XLEN', e) - marks
    if events == 0 or (bytes + len <= max_stream_bytes and events + 1 <= max_stream_events) then break end
    local first = redis.call('XRANGE', e, '-', '+', 'COUNT', 1)[1]
    redis.call('XDEL', e, first[1])
    if first[2][1] == 'f' then bytes = bytes - #first[2][2] else marks = marks - 1 end
  end
  redis.call('XADD', e, xid, 'f', idline .. ARGV[1])
  bytes = bytes + len
  stored = 1
elseif marks < max_marks then
  redis.call('XADD', e, xid, 't', '1')
  marks = marks + 1
end
redis.call('HSET', m, 'next', seq + 1, 'bytes', bytes, 'marks', marks)
redis.call('PEXPIRE', m, ARGV[7])
if redis.call('EXISTS', e) == 1 then redis.call('PEXPIRE', e, ARGV[7]) end
return {0, seq, stored}
"#;

/// Replay: KEYS = stream, meta; ARGV = the sequence number replayed after.
/// Returns {0, closed, frames...}, or {status, seq}: 1 evicted at seq, 2 too large at seq,
/// -2 unknown stream, -3 unknown event.
const REPLAY: &str = r#"
local e, m = KEYS[1], KEYS[2]
local st = redis.call('HMGET', m, 'next', 'closed')
if not st[1] then return {-2, 0} end
local after, next = tonumber(ARGV[1]), tonumber(st[1])
if after >= next then return {-3, 0} end
local entries = redis.call('XRANGE', e, '(0-' .. (after + 1), '+')
local out = {0, (st[2] == '1') and 1 or 0}
local expected = after + 1
for _, entry in ipairs(entries) do
  local seq = tonumber(string.sub(entry[1], 3)) - 1
  if seq ~= expected then return {1, expected} end
  if entry[2][1] ~= 'f' then return {2, expected} end
  out[#out + 1] = entry[2][2]
  expected = expected + 1
end
if expected < next then return {1, expected} end
return out
"#;

/// Open: KEYS = stream, meta; ARGV = ttl_ms. Close: the same, with the closed flag.
const OPEN: &str = r#"
redis.call('HSET', KEYS[2], 'next', 0, 'bytes', 0, 'marks', 0)
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 0
"#;

const CLOSE: &str = r#"
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('HSET', KEYS[2], 'closed', 1)
redis.call('PEXPIRE', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return 1
"#;

/// Limits and timing of a [`RedisStore`]. Setters take `&mut self` and chain; each limit reads as the
/// field of the same name.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisConfig {
    /// Frame bytes kept per stream (trimmed oldest-first beyond). Default 16 MiB.
    pub max_stream_bytes: usize,
    /// Events kept per stream (trimmed oldest-first beyond). Default 100 000.
    pub max_stream_events: usize,
    /// The per-event cap: a larger frame is not stored. Default 8 MiB.
    pub max_event_bytes: usize,
    /// Too-large markers kept per stream (beyond, such a miss says `evicted`). Default 64.
    pub max_too_large: usize,
    /// How long a stream's keys live after its last write (default 1 h): the session's lifetime.
    pub ttl: Duration,
    /// The retry hint of every miss and error (default 1 s).
    pub retry_after: Duration,
    /// How long one Redis operation may take before it counts as a lost connection (default 5 s).
    pub response_timeout: Duration,
    /// How long connecting may take (default 1 s).
    pub connection_timeout: Duration,
}

impl Default for RedisConfig {
    fn default() -> Self {
        RedisConfig {
            max_stream_bytes: 16 << 20,
            max_stream_events: 100_000,
            max_event_bytes: 8 << 20,
            max_too_large: 64,
            ttl: Duration::from_secs(3600),
            retry_after: Duration::from_secs(1),
            response_timeout: Duration::from_secs(5),
            connection_timeout: Duration::from_secs(1),
        }
    }
}

impl RedisConfig {
    /// Sets [`RedisConfig::max_stream_bytes`].
    pub fn max_stream_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_stream_bytes = bytes;
        self
    }

    /// Sets [`RedisConfig::max_stream_events`].
    pub fn max_stream_events(&mut self, events: usize) -> &mut Self {
        self.max_stream_events = events;
        self
    }

    /// Sets [`RedisConfig::max_event_bytes`].
    pub fn max_event_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_event_bytes = bytes;
        self
    }

    /// Sets [`RedisConfig::max_too_large`].
    pub fn max_too_large(&mut self, n: usize) -> &mut Self {
        self.max_too_large = n;
        self
    }

    /// Sets [`RedisConfig::ttl`] (at least 1 ms is used).
    pub fn ttl(&mut self, ttl: Duration) -> &mut Self {
        self.ttl = ttl;
        self
    }

    /// Sets [`RedisConfig::retry_after`].
    pub fn retry_after(&mut self, delay: Duration) -> &mut Self {
        self.retry_after = delay;
        self
    }

    /// Sets [`RedisConfig::response_timeout`].
    pub fn response_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.response_timeout = timeout;
        self
    }

    /// Sets [`RedisConfig::connection_timeout`].
    pub fn connection_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.connection_timeout = timeout;
        self
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

/// One SSE stream in a [`RedisStore`]: its name (128 random bits in hex), shared by every instance.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RedisStream(Arc<str>);

impl RedisStream {
    /// The stream's name, as it appears before the last `-` in its event ids.
    pub fn name(&self) -> &str {
        &self.0
    }

    /// The stream named by an event id `<name>-<seq>` of this store, and the sequence number.
    pub fn parse_id(id: &str) -> Option<(RedisStream, u64)> {
        let (name, seq) = id.split_once('-')?;
        let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
        if name.len() != NAME_LEN || !name.bytes().all(hex) {
            return None;
        }
        if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some((RedisStream(name.into()), seq.parse().ok()?))
    }

    fn keys(&self) -> (String, String) {
        (
            format!("ssegate:{{{}}}:e", self.0),
            format!("ssegate:{{{}}}:m", self.0),
        )
    }

    /// The stream named by a key of another system (an rmcp stream id): the same on every instance.
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn for_key(key: &str) -> RedisStream {
        let h = crate::hash::xxh3_128(key.as_bytes());
        RedisStream(format!("{h:032x}").into())
    }

    fn random() -> RedisStream {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        // SipHash under fresh OS-seeded keys of a process-wide counter: unique and unpredictable.
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let a = RandomState::new().hash_one((n, std::process::id()));
        let b = RandomState::new().hash_one((n, a));
        RedisStream(format!("{a:016x}{b:016x}").into())
    }
}

impl fmt::Debug for RedisStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisStream({})", self.0)
    }
}

impl fmt::Display for RedisStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug)]
struct Scripts {
    append: Script,
    replay: Script,
    open: Script,
    close: Script,
}

/// A [`ReplayStore`] on Redis Streams, shared by every server instance. Cloning is cheap: every clone
/// shares the connection; use one per task.
///
/// Layout: one Redis stream per SSE stream, `ssegate:{<name>}:e`, whose entries are the encoded
/// frames under the Redis id `0-<seq + 1>`, and a hash `ssegate:{<name>}:m` with the next sequence
/// number, the closed flag and the frame bytes held. `<name>` is 128 random bits in hex, so SSE ids
/// (`<name>-<seq>`) are unique across instances and name their stream: any instance finds the stream
/// from a `Last-Event-ID`. The `{<name>}` hash tag keeps both keys of a stream on one Redis Cluster
/// slot (each operation is one script over those two keys).
///
/// Appends and replays are Lua scripts, so each is atomic: an append assigns the sequence number,
/// trims the stream oldest-first until it fits the per-stream budget ([`RedisConfig::max_stream_bytes`],
/// [`RedisConfig::max_stream_events`]; exact, not approximate, trimming) and refreshes the keys' expiry
/// ([`RedisConfig::ttl`], so streams expire with an idle session). An event too large for the budget
/// is not stored and evicts nothing; a small marker entry (at most [`RedisConfig::max_too_large`] per
/// stream, outside the budget) makes its miss say `too_large`. A replay is `XRANGE` with an exclusive
/// start after the `Last-Event-ID`'s entry, checked for gaps: either every later event or a [`Miss`].
///
/// A lost connection is [`MissReason::Unavailable`] (or [`AppendError::Unavailable`],
/// [`StoreError::Unavailable`]) with [`RedisConfig::retry_after`] as the retry hint — a `503` with
/// `Retry-After` on the wire, never an empty stream. The connection manager reconnects on the next
/// operation once Redis is back.
///
/// Sequence numbers are exact below 10^14 per stream (Lua numbers are doubles).
///
/// With the feature `rmcp-server`, this type also implements rmcp 3.x's `EventStore`: an rmcp stream
/// id maps to the Redis stream named by a 128-bit hash of it, so every instance finds it.
#[derive(Clone)]
pub struct RedisStore<C = ConnectionManager> {
    conn: C,
    config: Arc<RedisConfig>,
    scripts: Arc<Scripts>,
}

impl<C> fmt::Debug for RedisStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RedisStore<ConnectionManager> {
    /// Connects to `url` (`redis://host:port/db`) with a connection manager that reconnects after a
    /// lost connection.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] if the URL is invalid or Redis cannot be reached.
    pub async fn connect(url: &str, config: RedisConfig) -> Result<Self, StoreError> {
        let unavailable = StoreError::Unavailable {
            retry_after: config.retry_after,
        };
        let client = redis::Client::open(url).map_err(|_| unavailable)?;
        let manager = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.connection_timeout))
            .set_response_timeout(Some(config.response_timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(200));
        let conn = ConnectionManager::new_with_config(client, manager)
            .await
            .map_err(|_| unavailable)?;
        Ok(RedisStore::with_connection(conn, config))
    }
}

impl<C> RedisStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// A store over an existing connection (a `ConnectionManager`, a cluster connection, ...).
    pub fn with_connection(conn: C, config: RedisConfig) -> Self {
        RedisStore {
            conn,
            config: Arc::new(config),
            scripts: Arc::new(Scripts {
                append: Script::new(APPEND),
                replay: Script::new(REPLAY),
                open: Script::new(OPEN),
                close: Script::new(CLOSE),
            }),
        }
    }

    /// The limits.
    pub fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// Runs one of the stream-level scripts (open, close) on `stream`'s two keys with the TTL.
    async fn run_on_keys(
        &mut self,
        script: fn(&Scripts) -> &Script,
        stream: &RedisStream,
    ) -> Result<(), StoreError> {
        let (e, m) = stream.keys();
        let _: i64 = script(&self.scripts)
            .key(&e)
            .key(&m)
            .arg(self.config.ttl_ms())
            .invoke_async(&mut self.conn)
            .await
            .map_err(|_| self.unavailable())?;
        Ok(())
    }

    fn unavailable(&self) -> StoreError {
        StoreError::Unavailable {
            retry_after: self.config.retry_after,
        }
    }

    #[cold]
    fn miss(&self, reason: MissReason, missing: Option<String>) -> Miss {
        Miss::new(reason, missing, self.config.retry_after)
    }

    async fn append_inner(
        &mut self,
        stream: &RedisStream,
        event: Option<&str>,
        data: &[u8],
        retry: Option<u64>,
    ) -> Result<Appended, AppendError> {
        self.append_opening(stream, event, data, retry, false).await
    }

    /// Appends; with `create`, opens the stream first if it does not exist (atomically).
    pub(crate) async fn append_opening(
        &mut self,
        stream: &RedisStream,
        event: Option<&str>,
        data: &[u8],
        retry: Option<u64>,
        create: bool,
    ) -> Result<Appended, AppendError> {
        if let Some(event) = event {
            check_event(event)?;
        }
        let mut tail = BytesMut::with_capacity(frame_capacity(None, event, data, retry));
        put_tail(&mut tail, event, data, retry);
        let (e, m) = stream.keys();
        let prefix = format!("{}-", stream.0);
        let reply: (i64, u64, i64) = self
            .scripts
            .append
            .key(&e)
            .key(&m)
            .arg(&tail[..])
            .arg(&prefix)
            .arg(self.config.max_stream_events)
            .arg(self.config.max_stream_bytes)
            .arg(self.config.max_event_bytes)
            .arg(self.config.max_too_large)
            .arg(self.config.ttl_ms())
            .arg(if create { "1" } else { "0" })
            .invoke_async(&mut self.conn)
            .await
            .map_err(|_| AppendError::Unavailable {
                retry_after: self.config.retry_after,
            })?;
        match reply {
            (0, seq, stored) => {
                let id = format!("{prefix}{seq}");
                let mut frame = BytesMut::with_capacity(id.len() + 5 + tail.len());
                put_field(&mut frame, b"id", id.as_bytes());
                frame.put_slice(&tail);
                Ok(Appended {
                    id,
                    seq,
                    frame: frame.freeze(),
                    oversized: stored == 0,
                })
            }
            (-1, ..) => Err(AppendError::Closed),
            _ => Err(AppendError::UnknownStream),
        }
    }

    pub(crate) async fn replay_inner(
        &mut self,
        last_event_id: &str,
    ) -> Result<Replay<RedisStream>, Miss> {
        let Some((stream, seq)) = RedisStream::parse_id(last_event_id) else {
            return Err(self.miss(MissReason::Unknown, None));
        };
        let (e, m) = stream.keys();
        let reply: Value = self
            .scripts
            .replay
            .key(&e)
            .key(&m)
            .arg(seq)
            .invoke_async(&mut self.conn)
            .await
            .map_err(|_| self.miss(MissReason::Unavailable, None))?;
        let Value::Array(items) = reply else {
            return Err(self.miss(MissReason::Unavailable, None));
        };
        let mut items = items.into_iter();
        let (Some(Value::Int(status)), Some(Value::Int(arg))) = (items.next(), items.next()) else {
            return Err(self.miss(MissReason::Unavailable, None));
        };
        let missing = |reason| {
            let id = format!("{}-{arg}", stream.0);
            Err(self.miss(reason, Some(id)))
        };
        match status {
            0 => {}
            1 => return missing(MissReason::Evicted),
            2 => return missing(MissReason::TooLarge),
            _ => return Err(self.miss(MissReason::Unknown, None)),
        }
        let mut frames = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Value::BulkString(frame) => frames.push(Bytes::from(frame)),
                _ => return Err(self.miss(MissReason::Unavailable, None)),
            }
        }
        Ok(Replay {
            stream,
            frames,
            closed: arg == 1,
        })
    }
}

impl<C> ReplayStore for RedisStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    type Stream = RedisStream;

    async fn open_stream(&mut self) -> Result<RedisStream, StoreError> {
        let stream = RedisStream::random();
        self.run_on_keys(|s| &s.open, &stream).await?;
        Ok(stream)
    }

    fn append(
        &mut self,
        stream: &RedisStream,
        event: Option<&str>,
        data: &[u8],
        retry: Option<u64>,
    ) -> impl Future<Output = Result<Appended, AppendError>> + Send {
        self.append_inner(stream, event, data, retry)
    }

    async fn close_stream(&mut self, stream: &RedisStream) -> Result<(), StoreError> {
        self.run_on_keys(|s| &s.close, stream).await
    }

    async fn forget_stream(&mut self, stream: &RedisStream) -> Result<(), StoreError> {
        let (e, m) = stream.keys();
        let _: i64 = redis::cmd("DEL")
            .arg(&e)
            .arg(&m)
            .query_async(&mut self.conn)
            .await
            .map_err(|_| self.unavailable())?;
        Ok(())
    }

    fn replay_after(
        &mut self,
        last_event_id: &str,
    ) -> impl Future<Output = Result<Replay<RedisStream>, Miss>> + Send {
        self.replay_inner(last_event_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_hex_and_ids_parse_back() {
        let a = RedisStream::random();
        let b = RedisStream::random();
        assert_ne!(a, b);
        assert_eq!(a.name().len(), NAME_LEN);
        let id = format!("{a}-42");
        assert_eq!(RedisStream::parse_id(&id), Some((a.clone(), 42)));
        let (e, m) = a.keys();
        assert_eq!(e, format!("ssegate:{{{a}}}:e"));
        assert_eq!(m, format!("ssegate:{{{a}}}:m"));
        for bad in [
            "1-0",
            "",
            &format!("{a}-"),
            &format!("{a}-x"),
            &format!("{}-1", &a.name()[1..]),
            &format!("{}}}-1", &a.name()[1..]),
            &format!("{}-1", a.name().to_uppercase()),
        ] {
            assert_eq!(RedisStream::parse_id(bad), None, "{bad:?}");
        }
    }
}
