//! Chunks in, event data out.
//!
//! A chunk (`Uint8Array` or `Buffer`) is copied once into a [`Bytes`] the engine keeps: the caller's
//! memory can change after `feed` returns (a reused read buffer), and the engine must keep checking
//! and delivering exactly the bytes it was given. Event data that is ONE slice of the chunk just
//! fed is handed back as a `Buffer` view of the caller's own input at the same place (no copy on
//! the way out): the slice's address, minus the address of the chunk's `Bytes`, is its offset in
//! the input. Data that is not (it spans chunks, lies in an earlier chunk, or the decoder copied
//! it) is joined into one new `Buffer`.

use bytes::Bytes;
use napi::bindgen_prelude::{
    BufferSlice, FnArgs, Function, JsObjectValue, JsValue, Object, TypedArray, TypedArrayType,
    Unknown,
};
use napi::{Env, JsGlobal, Result};
use ssegate::sse::Data;

use crate::numbers::invalid;

/// The chunk just fed: the engine's copy and where it came from.
pub(crate) struct Input<'env> {
    pub(crate) bytes: Bytes,
    /// The caller's `ArrayBuffer` (its `buffer` property) and where the chunk starts in it.
    pub(crate) buffer: Unknown<'env>,
    pub(crate) byte_offset: usize,
}

impl<'env> Input<'env> {
    /// The chunk `chunk` was when `bytes` was copied from it, if it still holds the same bytes
    /// where `data` lies (the caller may have changed it since): then `data` can be a view of it.
    pub(crate) fn again(
        chunk: &TypedArray<'env>,
        bytes: Bytes,
        data: &Data,
    ) -> Result<Option<Self>> {
        let Some(at) = offset_in(data, &bytes) else {
            return Ok(None);
        };
        let now: &[u8] = &chunk.arraybuffer;
        let same =
            now.len() == bytes.len() && now[at..at + data.len()] == bytes[at..at + data.len()];
        if !same {
            return Ok(None);
        }
        Ok(Some(Input {
            bytes,
            buffer: chunk.get_named_property("buffer")?,
            byte_offset: chunk.byte_offset,
        }))
    }
}

/// A `Uint8Array` (or `Buffer`) argument as the engine's copy and the caller's memory.
pub(crate) fn input<'env>(chunk: &TypedArray<'env>) -> Result<Input<'env>> {
    if !matches!(
        chunk.typed_array_type,
        TypedArrayType::Uint8 | TypedArrayType::Uint8Clamped
    ) {
        return Err(invalid("expected a Uint8Array or a Buffer".to_owned()));
    }
    Ok(Input {
        bytes: Bytes::copy_from_slice(&chunk.arraybuffer),
        buffer: chunk.get_named_property("buffer")?,
        byte_offset: chunk.byte_offset,
    })
}

/// Makes `Buffer`s for event data: views of the input where it can, else copies.
pub(crate) struct Views<'env> {
    env: &'env Env,
    buffer_class: Object<'env>,
    from: Function<'env, FnArgs<(Unknown<'env>, f64, f64)>, Unknown<'env>>,
}

impl<'env> Views<'env> {
    pub(crate) fn new(env: &'env Env) -> Result<Self> {
        let global: JsGlobal = env.get_global()?;
        // A function (a class), taken as the object whose `from` is called.
        let buffer_class: Object<'env> = global
            .get_named_property::<Unknown<'env>>("Buffer")?
            .coerce_to_object()?;
        let from = buffer_class.get_named_property("from")?;
        Ok(Views {
            env,
            buffer_class,
            from,
        })
    }

    /// `data` as a `Buffer`: a view of `input` when it is one slice of it, else one copy.
    pub(crate) fn data(&self, data: &Data, input: Option<&Input<'env>>) -> Result<Unknown<'env>> {
        if let Some(input) = input
            && let Some(at) = offset_in(data, &input.bytes)
        {
            return self.from.apply(
                self.buffer_class,
                FnArgs::from((
                    input.buffer,
                    (input.byte_offset + at) as f64,
                    data.len() as f64,
                )),
            );
        }
        let mut joined = Vec::with_capacity(data.len());
        for chunk in data.chunks() {
            joined.extend_from_slice(chunk);
        }
        Ok(BufferSlice::from_data(self.env, joined)?.to_unknown())
    }

    /// A copy of `bytes` as a new `Buffer`.
    pub(crate) fn copy(&self, bytes: &[u8]) -> Result<Unknown<'env>> {
        Ok(BufferSlice::copy_from(self.env, bytes)?.to_unknown())
    }
}

/// Where `data` starts in `chunk`, when it is one slice of it (by address: `data` shares
/// `chunk`'s memory).
pub(crate) fn offset_in(data: &Data, chunk: &Bytes) -> Option<usize> {
    let [one] = data.segments() else { return None };
    let start = chunk.as_ptr() as usize;
    let at = (one.as_ptr() as usize).checked_sub(start)?;
    (!one.is_empty() && at.checked_add(one.len())? <= chunk.len()).then_some(at)
}
