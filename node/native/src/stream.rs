//! `ResumableStream`: the sans-IO engine of one logical MCP SSE stream, its outputs as plain
//! objects discriminated by `kind` (`Output` in header.d.ts). Times are seconds on a clock of the
//! caller's choosing (`performance.now() / 1000`, say), as Python's `time.monotonic()` seconds.

use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use napi::bindgen_prelude::{
    Buffer, Either, JsObjectValue, Null, Object, Property, PropertyAttributes, This, TypedArray,
};
use napi::{Env, Error, Result, Status};
use napi_derive::napi;
use ssegate::contract::{
    DEFAULT_BACKOFF, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_DELAY, DEFAULT_MAX_RECONNECT_ATTEMPTS,
    DEFAULT_MAX_RESUMES, DEFAULT_MAX_STALLED_RESUMES, DEFAULT_MIN_DELAY, DEFAULT_REPLAY_TIMEOUT,
    DEFAULT_RETRY,
};
use ssegate::gate::Isa;
use ssegate::message::RpcId;
use ssegate::resume::{self, Answer, EndCause, Failure, Policy, ReconnectResponse, RefusalKind};

use crate::decoder::{DecoderOptions, lossy, partial};
use crate::numbers::{count, count32, invalid};
use crate::views::{Input, Views, input};

/// The property of a `ResumableStream` object that holds the chunk last fed (not enumerable), so
/// that a message lying in it can be handed out as a view of it.
const LAST_CHUNK: &str = "__ssegateLastChunk";

/// The longest duration a setting may have, in seconds (about 31 years), as in Python.
const MAX_SECONDS: f64 = 1e9;

/// The latest `now` accepted, in seconds (2**40: 34,000 years of `performance.now()`).
const MAX_NOW: f64 = (1u64 << 40) as f64;

fn seconds(name: &str, secs: f64) -> Result<Duration> {
    if secs.is_finite() && (0.0..=MAX_SECONDS).contains(&secs) {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(invalid(format!(
            "{name} must be a number of seconds from 0 to 1e9, got {secs}"
        )))
    }
}

/// The caller's seconds to the engine's `Instant`s and back: `now` = 0 is the `Instant` taken at
/// construction. The engine reads no clock, so only differences matter.
struct Clock {
    base: Instant,
}

impl Clock {
    fn instant(&self, now: f64) -> Result<Instant> {
        if !now.is_finite() || !(0.0..=MAX_NOW).contains(&now) {
            return Err(invalid(format!(
                "now must be seconds from 0 to 2**40 (performance.now() / 1000, say), got {now}"
            )));
        }
        self.base
            .checked_add(Duration::from_secs_f64(now))
            .ok_or_else(|| invalid(format!("now = {now} is out of this platform's range")))
    }

    /// Seconds for `at`, rounded up so that `instant(seconds(at)) >= at`: a driver that passes a
    /// deadline back to `handleTimeout` always reaches it.
    fn seconds(&self, at: Instant) -> f64 {
        let mut s = at.saturating_duration_since(self.base).as_secs_f64();
        for _ in 0..64 {
            match self.instant(s) {
                Ok(t) if t < at => s = s.next_up(),
                _ => break,
            }
        }
        s
    }
}

/// A JSON-RPC id for JavaScript: a number (an integer within 2**53, or a fraction), else its JSON
/// text as a string (a string id as itself); null for `null`.
type JsRpcId = Option<Either<f64, String>>;

const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

fn rpc_id_js(id: &RpcId) -> JsRpcId {
    match id {
        RpcId::Number(n) if (*n as f64).abs() <= MAX_SAFE => Some(Either::A(*n as f64)),
        RpcId::Number(n) => Some(Either::B(n.to_string())),
        RpcId::String(s) => Some(Either::B(s.to_string())),
        RpcId::Null => None,
        RpcId::Raw(raw) => {
            let integer = raw.strip_prefix('-').unwrap_or(raw);
            let is_integer = !integer.is_empty() && integer.bytes().all(|b| b.is_ascii_digit());
            match raw.parse::<f64>() {
                Ok(x) if !is_integer || x.abs() <= MAX_SAFE => Some(Either::A(x)),
                _ => Some(Either::B(raw.to_string())),
            }
        }
        #[allow(unreachable_patterns)]
        other => Some(Either::B(other.to_string())),
    }
}

fn rpc_ids_js(ids: &[RpcId]) -> Vec<JsRpcId> {
    ids.iter().map(rpc_id_js).collect()
}

fn opt_buffer<'env>(views: &Views<'env>, b: Option<&Bytes>) -> Result<Option<napi::Unknown<'env>>> {
    b.map(|b| views.copy(b)).transpose()
}

fn kind<'env>(env: &'env Env, kind: &str) -> Result<Object<'env>> {
    let mut o = Object::new(env)?;
    o.set("kind", kind)?;
    Ok(o)
}

/// An engine output as its plain object.
fn output<'env>(
    env: &'env Env,
    views: &Views<'env>,
    out: resume::Output,
    last: Option<(&TypedArray<'env>, &Bytes)>,
) -> Result<Object<'env>> {
    use resume::Output as O;
    Ok(match out {
        O::Deliver(d) => {
            let mut o = kind(env, "deliver")?;
            let data = d.message.data();
            let view = match last {
                Some((chunk, bytes)) => Input::again(chunk, bytes.clone(), data)?,
                None => None,
            };
            o.set("message", views.data(data, view.as_ref())?)?;
            o.set("rpcKind", d.rpc.kind.as_str())?;
            o.set("rpcId", d.rpc.id.as_ref().and_then(rpc_id_js))?;
            o.set("eventId", opt_buffer(views, d.event_id.as_ref())?)?;
            o.set("eventType", d.event_type.as_deref().map(lossy))?;
            o
        }
        O::Skip(s) => {
            let mut o = kind(env, "skip")?;
            o.set("skip", s.as_str())?;
            o.set("reason", s.to_string())?;
            o
        }
        O::Cursor(id) => {
            let mut o = kind(env, "cursor")?;
            o.set("cursor", views.copy(&id)?)?;
            o
        }
        O::Dropped(d) => {
            let mut o = kind(env, "dropped")?;
            o.set("reason", d.error.to_string())?;
            o.set("error", d.error.as_str())?;
            o.set(
                "refusal",
                RefusalKind::DecodeLimit {
                    error: d.error.clone(),
                }
                .as_str(),
            )?;
            o.set("eventId", opt_buffer(views, d.error.id())?)?;
            o.set("cursor", opt_buffer(views, d.cursor.as_ref())?)?;
            o.set("outstanding", rpc_ids_js(&d.outstanding))?;
            o
        }
        O::Disconnected(r) => {
            let mut o = kind(env, "disconnected")?;
            o.set("delay", r.delay.as_secs_f64())?;
            o.set("needed", r.needed)?;
            o.set("lastEventId", opt_buffer(views, r.last_event_id.as_ref())?)?;
            o.set(
                "discarded",
                r.discarded.as_ref().map(|p| partial(env, p)).transpose()?,
            )?;
            o
        }
        O::Reconnect(r) => {
            let mut o = kind(env, "reconnect")?;
            o.set("attempt", r.attempt)?;
            o.set("lastEventId", opt_buffer(views, r.last_event_id.as_ref())?)?;
            o
        }
        O::Finished => kind(env, "finished")?,
        O::Failed(f) => failed(env, views, &f)?,
        // `resume::Output` is non-exhaustive: an output this binding was not written for is a bug
        // here, not something to hand on under a made-up kind.
        other => {
            return Err(Error::new(
                Status::GenericFailure,
                format!("ssegate: an engine output this binding does not know: {other:?}"),
            ));
        }
    })
}

fn failed<'env>(env: &'env Env, views: &Views<'env>, failure: &Failure) -> Result<Object<'env>> {
    let refusal = failure.refusal();
    let mut o = kind(env, "failed")?;
    o.set("failure", failure.as_str())?;
    o.set("reason", failure.to_string())?;
    o.set("refusal", refusal.map(|r| r.kind.as_str()))?;
    o.set(
        "restart",
        refusal.and_then(|r| match r.kind {
            RefusalKind::StreamRestarted { why, .. } => Some(why.as_str()),
            _ => None,
        }),
    )?;
    o.set("mustRenegotiate", failure.must_renegotiate())?;
    o.set(
        "cursor",
        opt_buffer(views, refusal.and_then(|r| r.cursor.as_ref()))?,
    )?;
    o.set("outstanding", rpc_ids_js(failure.outstanding()))?;
    Ok(o)
}

/// A header value given as a string (Latin-1 when every character fits, as HTTP stacks decode
/// header bytes; else UTF-8) or bytes.
fn header(value: Option<Either<String, Buffer>>) -> Option<Vec<u8>> {
    match value? {
        Either::A(s) => Some(match s.chars().map(u8::try_from).collect() {
            Ok(latin1) => latin1,
            Err(_) => s.into_bytes(),
        }),
        Either::B(b) => Some(b.to_vec()),
    }
}

/// Every `StreamConfig` knob, as Python's `ResumableStream` takes them: limits in bytes, durations
/// in seconds. Each defaults to the library's (`contract.DEFAULT_*`, or the Rust config's own).
#[napi(object)]
pub struct StreamOptions {
    /// Whether a cut may be resumed (true).
    pub resumable: Option<bool>,
    /// Keep the stream open after every expected response (the GET stream) (false).
    pub keep_open: Option<bool>,
    pub max_event: Option<f64>,
    pub max_line: Option<f64>,
    pub max_field: Option<f64>,
    pub max_block: Option<f64>,
    pub copy_below: Option<f64>,
    pub replay_timeout: Option<f64>,
    /// Seconds without a byte before the connection counts as cut; null: never.
    pub idle_timeout: Option<Either<f64, Null>>,
    pub default_retry: Option<f64>,
    pub max_delay: Option<f64>,
    pub min_delay: Option<f64>,
    pub backoff: Option<f64>,
    pub max_resumes: Option<f64>,
    pub max_stalled_resumes: Option<f64>,
    pub max_reconnect_attempts: Option<f64>,
    pub jitter_seed: Option<f64>,
    pub gate_ahead: Option<f64>,
    /// `"verified"` (default) or `"strict"`.
    #[napi(ts_type = "\"verified\" | \"strict\"")]
    pub policy: Option<String>,
    pub window: Option<f64>,
    pub unrequested_window: Option<f64>,
    pub contiguous_ids: Option<bool>,
    pub max_depth: Option<f64>,
    /// `"portable"`, `"neon"`, `"avx2"` or `"avx512"`: the best instruction set the gate may use.
    pub max_isa: Option<String>,
}

/// One logical SSE stream of MCP Streamable HTTP (a POST's response and its resumptions, or the
/// standalone GET stream): decoder, gate and resumption guard, with no IO and no clock.
#[napi]
pub struct ResumableStream {
    inner: resume::ResumableStream,
    clock: Clock,
    /// The engine's copy of the chunk last fed (the JavaScript chunk is `LAST_CHUNK` of `this`).
    last: Option<Bytes>,
}

#[napi]
impl ResumableStream {
    #[napi(constructor)]
    pub fn new(options: Option<StreamOptions>) -> Result<Self> {
        let o = options.unwrap_or(StreamOptions {
            resumable: None,
            keep_open: None,
            max_event: None,
            max_line: None,
            max_field: None,
            max_block: None,
            copy_below: None,
            replay_timeout: None,
            idle_timeout: None,
            default_retry: None,
            max_delay: None,
            min_delay: None,
            backoff: None,
            max_resumes: None,
            max_stalled_resumes: None,
            max_reconnect_attempts: None,
            jitter_seed: None,
            gate_ahead: None,
            policy: None,
            window: None,
            unrequested_window: None,
            contiguous_ids: None,
            max_depth: None,
            max_isa: None,
        });
        let mut config = resume::ResumableStream::config();
        crate::decoder::config(
            Some(&DecoderOptions {
                max_line: o.max_line,
                max_event: o.max_event,
                max_field: o.max_field,
                max_block: o.max_block,
                copy_below: o.copy_below,
            }),
            config.decoder_mut(),
        )?;
        let policy = match o.policy.as_deref() {
            None | Some("verified") => Policy::Verified,
            Some("strict") => Policy::Strict,
            Some(other) => {
                return Err(invalid(format!(
                    "policy must be \"verified\" or \"strict\", got {other:?}"
                )));
            }
        };
        let guard = config.guard_mut();
        guard
            .policy(policy)
            .contiguous_ids(o.contiguous_ids.unwrap_or(false));
        if let Some(ids) = o.window {
            guard.window(count("window", ids)?);
        }
        if let Some(ids) = o.unrequested_window {
            guard.unrequested_window(count("unrequestedWindow", ids)?);
        }
        if let Some(levels) = o.max_depth {
            guard.max_depth(count("maxDepth", levels)?);
        }
        if let Some(name) = o.max_isa.as_deref() {
            let isa = Isa::all()
                .iter()
                .copied()
                .find(|isa| isa.name() == name)
                .ok_or_else(|| {
                    invalid(format!(
                        "maxIsa must be \"portable\", \"neon\", \"avx2\" or \"avx512\", got {name:?}"
                    ))
                })?;
            guard.max_isa(isa);
        }
        let secs = |v: Option<f64>, name: &str, default: Duration| match v {
            Some(s) => seconds(name, s),
            None => Ok(default),
        };
        let idle_timeout = match o.idle_timeout {
            None => Some(DEFAULT_IDLE_TIMEOUT),
            Some(Either::B(Null)) => None,
            Some(Either::A(s)) => Some(seconds("idleTimeout", s)?),
        };
        let n32 = |v: Option<f64>, name: &str, default: u32| match v {
            Some(n) => count32(name, n),
            None => Ok(default),
        };
        config
            .replay_timeout(secs(
                o.replay_timeout,
                "replayTimeout",
                DEFAULT_REPLAY_TIMEOUT,
            )?)
            .idle_timeout(idle_timeout)
            .default_retry(secs(o.default_retry, "defaultRetry", DEFAULT_RETRY)?)
            .max_delay(secs(o.max_delay, "maxDelay", DEFAULT_MAX_DELAY)?)
            .min_delay(secs(o.min_delay, "minDelay", DEFAULT_MIN_DELAY)?)
            .backoff(secs(o.backoff, "backoff", DEFAULT_BACKOFF)?)
            .max_resumes(n32(o.max_resumes, "maxResumes", DEFAULT_MAX_RESUMES)?)
            .max_stalled_resumes(n32(
                o.max_stalled_resumes,
                "maxStalledResumes",
                DEFAULT_MAX_STALLED_RESUMES,
            )?)
            .max_reconnect_attempts(n32(
                o.max_reconnect_attempts,
                "maxReconnectAttempts",
                DEFAULT_MAX_RECONNECT_ATTEMPTS,
            )?)
            .keep_open(o.keep_open.unwrap_or(false));
        if let Some(from) = o.gate_ahead {
            config.gate_ahead(count("gateAhead", from)?);
        }
        if let Some(seed) = o.jitter_seed {
            config.jitter_seed(count("jitterSeed", seed)? as u64);
        }
        let mut inner = config.build();
        inner.resumable(o.resumable.unwrap_or(true));
        Ok(ResumableStream {
            inner,
            clock: Clock {
                base: Instant::now(),
            },
            last: None,
        })
    }

    /// Registers a request (its JSON-RPC id: an integer or a string) whose response this stream
    /// must deliver.
    #[napi(ts_args_type = "id: number | string")]
    pub fn expect_response(&mut self, id: Either<f64, String>) -> Result<()> {
        let id = match id {
            Either::A(n) if n.is_finite() && n.fract() == 0.0 && n.abs() <= MAX_SAFE => {
                RpcId::Number(n as i64)
            }
            Either::A(n) => {
                return Err(invalid(format!(
                    "a JSON-RPC id is an integer within 2**53 or a string, got {n}"
                )));
            }
            Either::B(s) => RpcId::String(s.into()),
        };
        self.inner.expect_response(id);
        Ok(())
    }

    /// A body chunk arrived at `now` (seconds). The chunk is copied; see `Deliver.message`.
    #[napi(ts_args_type = "chunk: Uint8Array, now: number")]
    pub fn feed(&mut self, mut this: This, chunk: TypedArray, now: f64) -> Result<()> {
        let at = self.clock.instant(now)?;
        let copied = input(&chunk)?;
        if self.last.is_none() {
            this.object.define_properties(&[Property::new()
                .with_utf8_name(LAST_CHUNK)?
                .with_value(&chunk)
                .with_property_attributes(
                    PropertyAttributes::Writable | PropertyAttributes::Configurable,
                )])?;
        } else {
            this.object.set_named_property(LAST_CHUNK, chunk)?;
        }
        self.last = Some(copied.bytes.clone());
        self.inner.feed(copied.bytes, at);
        Ok(())
    }

    /// The open connection's body ended at `now`: `cause` is `"eof"` or `"error"`.
    #[napi(ts_args_type = "cause: \"eof\" | \"error\", now: number")]
    pub fn connection_ended(&mut self, cause: String, now: f64) -> Result<()> {
        let cause = match cause.as_str() {
            "eof" => EndCause::Eof,
            "error" => EndCause::Error,
            other => {
                return Err(invalid(format!(
                    "cause must be \"eof\" or \"error\", got {other:?}"
                )));
            }
        };
        let at = self.clock.instant(now)?;
        self.inner.connection_ended(cause, at);
        Ok(())
    }

    /// The next output, or null until more input or time.
    #[napi(ts_return_type = "Output | null")]
    pub fn poll<'env>(&mut self, env: &'env Env, this: This<'env>) -> Result<Option<Object<'env>>> {
        let Some(out) = self.inner.poll() else {
            return Ok(None);
        };
        let chunk: Option<TypedArray> = match (&self.last, &out) {
            (Some(_), resume::Output::Deliver(_)) => {
                this.object.get_named_property(LAST_CHUNK).ok()
            }
            _ => None,
        };
        let last = chunk.as_ref().zip(self.last.as_ref());
        output(env, &Views::new(env)?, out, last).map(Some)
    }

    /// When the stream next needs `handleTimeout()` (seconds, on the caller's clock), if ever.
    #[napi]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(|at| self.clock.seconds(at))
    }

    /// Time passed: `now` is at or after `pollTimeout()` (earlier calls do nothing).
    #[napi]
    pub fn handle_timeout(&mut self, now: f64) -> Result<()> {
        let at = self.clock.instant(now)?;
        self.inner.handle_timeout(at);
        Ok(())
    }

    /// The reconnect request was answered at `now`: `"read"` (feed its body) or `"drop"`.
    #[napi(
        ts_args_type = "status: number, contentType: string | Buffer | null | undefined, retryAfter: string | Buffer | null | undefined, now: number",
        ts_return_type = "\"read\" | \"drop\""
    )]
    pub fn reconnect_response(
        &mut self,
        status: u32,
        content_type: Option<Either<String, Buffer>>,
        retry_after: Option<Either<String, Buffer>>,
        now: f64,
    ) -> Result<&'static str> {
        let status = u16::try_from(status)
            .map_err(|_| invalid(format!("status must be an HTTP status, got {status}")))?;
        let at = self.clock.instant(now)?;
        let content_type = header(content_type);
        let retry_after = header(retry_after);
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
    #[napi]
    pub fn reconnect_failed(&mut self, now: f64) -> Result<()> {
        let at = self.clock.instant(now)?;
        self.inner.reconnect_failed(at);
        Ok(())
    }

    /// The id of the last event processed (sent as `Last-Event-ID` on a resume).
    #[napi(getter)]
    pub fn cursor(&self) -> Option<Buffer> {
        self.inner.cursor().map(|c| Buffer::from(c.to_vec()))
    }

    /// Whether the stream finished or failed.
    #[napi(getter)]
    pub fn is_done(&self) -> bool {
        self.inner.is_done()
    }

    /// Whether a connection is open and wants its bytes.
    #[napi(getter)]
    pub fn is_open(&self) -> bool {
        self.inner.is_open()
    }

    /// Requests this stream must still deliver.
    #[napi(getter, ts_return_type = "RpcId[]")]
    pub fn outstanding(&self) -> Vec<JsRpcId> {
        rpc_ids_js(&self.inner.outstanding())
    }

    /// Resumes so far.
    #[napi(getter)]
    pub fn resumes(&self) -> u32 {
        self.inner.resumes()
    }

    /// The stream's counters.
    #[napi(getter, ts_return_type = "Stats")]
    pub fn stats<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let s = self.inner.stats();
        let mut d = Object::new(env)?;
        d.set("events", s.events as f64)?;
        d.set("delivered", s.delivered as f64)?;
        d.set("deliveredBytes", s.delivered_bytes as f64)?;
        d.set("skipped", s.skipped as f64)?;
        d.set("discardedPartials", s.discarded_partials as f64)?;
        d.set("discardedBytes", s.discarded_bytes as f64)?;
        d.set("resumes", s.resumes as f64)?;
        Ok(d)
    }

    /// The delay (seconds) the server last asked for (`retry:` or `Retry-After`), before clamps.
    #[napi(getter)]
    pub fn server_retry(&self) -> Option<f64> {
        self.inner.server_retry().map(|d| d.as_secs_f64())
    }

    /// The instruction set the stream's gate runs on.
    #[napi(getter)]
    pub fn gate_isa(&self) -> &'static str {
        self.inner.gate_isa().name()
    }
}
