//! `Decoder`: the WHATWG SSE decoder, events as plain objects (`Event` in header.d.ts).

use napi::bindgen_prelude::{
    BufferSlice, Float64ArraySlice, FnArgs, Function, JsValue, Object, TypedArray, Unknown,
};
use napi::{Env, Result};
use napi_derive::napi;
use ssegate::contract::{
    DEFAULT_MAX_BLOCK, DEFAULT_MAX_EVENT, DEFAULT_MAX_FIELD, DEFAULT_MAX_LINE,
};
use ssegate::sse;

use crate::errors;
use crate::js;
use crate::numbers::count;
use crate::views::{Input, input, offset_in};

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

/// The events of one `feed` call, laid out for `js`'s `events` (which makes the `Event` objects):
/// FIELDS numbers per event in `meta`, the data that is not a view of the input in `copies`, the
/// event types and ids as text in `text` (a type or id equal to the previous event's is not
/// repeated). Kept by the decoder to reuse its allocations (up to `KEEP`).
#[derive(Default)]
struct Batch {
    meta: Vec<f64>,
    copies: Vec<u8>,
    text: String,
    /// `text`'s length in UTF-16 code units (JavaScript string indices).
    units: usize,
    /// The last type and the last id put in `text`.
    event: Option<Placed>,
    id: Option<Placed>,
}

/// A string in `Batch::text`: its bytes there, its UTF-16 indices.
#[derive(Clone, Copy)]
struct Placed {
    bytes: (usize, usize),
    units: (f64, f64),
}

/// `js`'s `events(buffer, byteOffset, copies, meta, text)`.
type Build<'env> = Function<
    'env,
    FnArgs<(Unknown<'env>, f64, Unknown<'env>, Unknown<'env>, &'env str)>,
    Unknown<'env>,
>;

/// Numbers per event in `Batch::meta`: data start, data length, flags, type start, type end, id
/// start, id end, retry.
const FIELDS: usize = 8;
/// Flags: the event's block carried an `id` field.
const OWN_ID: f64 = 1.0;
/// Flags: the data is in `copies` (else in the input).
const COPIED: f64 = 2.0;
/// The most bytes of copied data (and of `text`, and of `meta`) kept for the next call: more copied
/// data is handed to JavaScript as it is (an external `ArrayBuffer`, no second copy); smaller, it
/// is copied into a new `Buffer` and the allocation reused.
const KEEP: usize = 64 * 1024;

impl Batch {
    fn clear(&mut self) {
        self.meta.clear();
        self.copies.clear();
        self.text.clear();
        if self.meta.capacity() > KEEP / 8 {
            self.meta = Vec::new();
        }
        if self.copies.capacity() > KEEP {
            self.copies = Vec::new();
        }
        if self.text.capacity() > KEEP {
            self.text = String::new();
        }
        self.units = 0;
        self.event = None;
        self.id = None;
    }

    /// Where `bytes` (as text) is in `text`, put there unless `last` is the same bytes.
    fn string(
        text: &mut String,
        units: &mut usize,
        last: &mut Option<Placed>,
        bytes: &[u8],
    ) -> (f64, f64) {
        if let Some(p) = last
            && text.as_bytes()[p.bytes.0..p.bytes.1] == *bytes
        {
            return p.units;
        }
        let s = String::from_utf8_lossy(bytes);
        let n = if s.is_ascii() {
            s.len()
        } else {
            s.encode_utf16().count()
        };
        let at = text.len();
        text.push_str(&s);
        let placed = Placed {
            bytes: (at, text.len()),
            units: (*units as f64, (*units + n) as f64),
        };
        *units += n;
        *last = Some(placed);
        placed.units
    }

    fn push(&mut self, e: &sse::Event, input: &Input<'_>) {
        let (at, mut flags) = match offset_in(&e.data, &input.bytes) {
            Some(at) => (at, 0.0),
            None => {
                let at = self.copies.len();
                self.copies.reserve(e.data.len());
                for chunk in e.data.chunks() {
                    self.copies.extend_from_slice(chunk);
                }
                (at, COPIED)
            }
        };
        if e.has_own_id {
            flags += OWN_ID;
        }
        let (type_start, type_end) = match &e.event {
            Some(t) if !t.is_empty() => {
                Self::string(&mut self.text, &mut self.units, &mut self.event, t)
            }
            _ => (-1.0, -1.0),
        };
        let (id_start, id_end) = if e.last_event_id.is_empty() {
            (-1.0, -1.0)
        } else {
            Self::string(
                &mut self.text,
                &mut self.units,
                &mut self.id,
                &e.last_event_id,
            )
        };
        self.meta.extend_from_slice(&[
            at as f64,
            e.data.len() as f64,
            flags,
            type_start,
            type_end,
            id_start,
            id_end,
            e.retry.map_or(-1.0, |r| r as f64),
        ]);
    }

    /// The `Event[]` of the batch.
    fn events<'env>(&mut self, env: &'env Env, input: &Input<'env>) -> Result<Unknown<'env>> {
        debug_assert_eq!(self.meta.len() % FIELDS, 0);
        if self.meta.is_empty() {
            // Most chunks of a large event complete none: no call into JavaScript.
            return Ok(env.create_array(0)?.to_unknown());
        }
        let build: Build<'env> = js::get(env, "events")?;
        let copies = if self.copies.len() > KEEP {
            BufferSlice::from_data(env, std::mem::take(&mut self.copies))?
        } else {
            BufferSlice::copy_from(env, &self.copies)?
        };
        build.call(FnArgs::from((
            input.buffer,
            input.byte_offset as f64,
            copies.to_unknown(),
            Float64ArraySlice::copy_from(env, &self.meta)?.to_unknown(),
            self.text.as_str(),
        )))
    }
}

/// Incremental SSE decoder (WHATWG "interpreting an event stream").
#[napi]
pub struct Decoder {
    inner: sse::Decoder,
    discarded: Option<sse::PartialEvent>,
    batch: Batch,
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
            batch: Batch::default(),
        })
    }

    /// Decodes a chunk; returns the events it completed. An event over a limit is dropped and
    /// thrown as a `DecodeError` once the chunk is decoded (the decoder goes on from the next
    /// blank line); the error's `events` holds the events the same chunk completed.
    #[napi(ts_args_type = "chunk: Uint8Array", ts_return_type = "Event[]")]
    pub fn feed<'env>(&mut self, env: &'env Env, chunk: TypedArray<'env>) -> Result<Unknown<'env>> {
        let input = input(&chunk)?;
        self.inner.feed(input.bytes.clone());
        self.batch.clear();
        let mut errors = Vec::new();
        while let Some(next) = self.inner.next_event() {
            match next {
                Ok(e) => self.batch.push(&e, &input),
                Err(e) => errors.push(e),
            }
        }
        let events = self.batch.events(env, &input)?;
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
