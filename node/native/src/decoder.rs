//! `Decoder`: the WHATWG SSE decoder, events as plain objects (`Event` in header.d.ts).

use napi::bindgen_prelude::{Object, TypedArray};
use napi::{Env, Result};
use napi_derive::napi;
use ssegate::contract::{
    DEFAULT_MAX_BLOCK, DEFAULT_MAX_EVENT, DEFAULT_MAX_FIELD, DEFAULT_MAX_LINE,
};
use ssegate::sse;

use crate::errors;
use crate::numbers::count;
use crate::views::{Input, Views, input};

/// The decoder's limits (bytes); each defaults to the contract's (`contract.DEFAULT_MAX_*`).
#[napi(object)]
pub struct DecoderOptions {
    /// The longest line (`DEFAULT_MAX_LINE`).
    pub max_line: Option<f64>,
    /// The largest event's data (`DEFAULT_MAX_EVENT`).
    pub max_event: Option<f64>,
    /// The longest `event`/`id`/`retry` value (`DEFAULT_MAX_FIELD`).
    pub max_field: Option<f64>,
    /// The largest block on the wire, comments included (`DEFAULT_MAX_BLOCK`).
    pub max_block: Option<f64>,
    /// Data shorter than this is copied rather than sliced (the Rust config's default when absent).
    pub copy_below: Option<f64>,
}

pub(crate) fn config(o: Option<&DecoderOptions>, config: &mut sse::DecoderConfig) -> Result<()> {
    let get = |v: Option<f64>, name: &str, default: usize| match v {
        Some(v) => count(name, v),
        None => Ok(default),
    };
    config
        .max_line(get(
            o.and_then(|o| o.max_line),
            "maxLine",
            DEFAULT_MAX_LINE,
        )?)
        .max_event(get(
            o.and_then(|o| o.max_event),
            "maxEvent",
            DEFAULT_MAX_EVENT,
        )?)
        .max_field(get(
            o.and_then(|o| o.max_field),
            "maxField",
            DEFAULT_MAX_FIELD,
        )?)
        .max_block(get(
            o.and_then(|o| o.max_block),
            "maxBlock",
            DEFAULT_MAX_BLOCK,
        )?);
    if let Some(n) = o.and_then(|o| o.copy_below) {
        config.copy_below(count("copyBelow", n)?);
    }
    Ok(())
}

/// Bytes as text, invalid UTF-8 replaced (as WHATWG decodes an event stream).
pub(crate) fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A discarded partial block as `{bytes, dataLen, id}`.
pub(crate) fn partial<'env>(env: &'env Env, p: &sse::PartialEvent) -> Result<Object<'env>> {
    let mut o = Object::new(env)?;
    o.set("bytes", p.bytes as f64)?;
    o.set("dataLen", p.data_len as f64)?;
    o.set("id", p.id.as_deref().map(lossy))?;
    Ok(o)
}

fn event<'env>(
    views: &Views<'env>,
    env: &'env Env,
    e: &sse::Event,
    input: &Input<'env>,
) -> Result<Object<'env>> {
    let mut o = Object::new(env)?;
    o.set("data", views.data(&e.data, Some(input))?)?;
    o.set("event", e.event.as_deref().map(lossy))?;
    o.set(
        "id",
        (!e.last_event_id.is_empty()).then(|| lossy(&e.last_event_id)),
    )?;
    o.set("hasOwnId", e.has_own_id)?;
    o.set("retry", e.retry.map(|r| r as f64))?;
    Ok(o)
}

/// Incremental SSE decoder (WHATWG "interpreting an event stream").
#[napi]
pub struct Decoder {
    inner: sse::Decoder,
    discarded: Option<sse::PartialEvent>,
}

#[napi]
impl Decoder {
    #[napi(constructor)]
    pub fn new(options: Option<DecoderOptions>) -> Result<Self> {
        let mut c = sse::DecoderConfig::default();
        config(options.as_ref(), &mut c)?;
        Ok(Decoder {
            inner: c.build(),
            discarded: None,
        })
    }

    /// Decodes a chunk; returns the events it completed. An event over a limit is dropped and
    /// thrown as a `DecodeError` once the chunk is decoded (the decoder goes on from the next
    /// blank line); the error's `events` holds the events the same chunk completed.
    #[napi(ts_args_type = "chunk: Uint8Array", ts_return_type = "Event[]")]
    pub fn feed<'env>(
        &mut self,
        env: &'env Env,
        chunk: TypedArray<'env>,
    ) -> Result<Vec<Object<'env>>> {
        let input = input(&chunk)?;
        self.inner.feed(input.bytes.clone());
        let views = Views::new(env)?;
        let mut events = Vec::new();
        let mut errors = Vec::new();
        while let Some(next) = self.inner.next_event() {
            match next {
                Ok(e) => events.push(event(&views, env, &e, &input)?),
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(events)
        } else {
            Err(errors::throw(env, &errors, events))
        }
    }

    /// Ends the connection's input. Returns the events still to dispatch: always none (`feed`
    /// returns every event it completes; an unterminated block is discarded, as WHATWG says, and
    /// reported in `discarded`). `lastEventId` and `retry` are kept for the next connection.
    #[napi(ts_return_type = "Event[]")]
    pub fn finish(&mut self) -> Vec<Object<'static>> {
        self.discarded = self.inner.finish();
        Vec::new()
    }

    /// The block the last `finish()` discarded, if the input ended inside one.
    #[napi(getter, ts_return_type = "PartialEvent | null")]
    pub fn discarded<'env>(&self, env: &'env Env) -> Result<Option<Object<'env>>> {
        self.discarded.as_ref().map(|p| partial(env, p)).transpose()
    }

    /// The committed last event ID (null when empty).
    #[napi(getter)]
    pub fn last_event_id(&self) -> Option<String> {
        let id = self.inner.last_event_id();
        (!id.is_empty()).then(|| lossy(id))
    }

    /// The reconnection time (ms) from the last valid `retry` field.
    #[napi(getter)]
    pub fn retry(&self) -> Option<f64> {
        self.inner.retry().map(|r| r as f64)
    }

    /// Bytes of this connection's input decoded so far.
    #[napi(getter)]
    pub fn offset(&self) -> f64 {
        self.inner.offset() as f64
    }
}
