//! The few lines of JavaScript the addon runs once per Node environment (the main thread, each
//! worker) when the module loads, kept as the environment's instance data:
//!
//! - `DecodeError`: Node-API cannot declare a class that extends `Error`, so it is made here (its
//!   members are set on each instance by `errors`).
//! - `events`: builds the `Event` objects of one `Decoder#feed` call from one batch (see
//!   `decoder::Batch`): creating each object and its `Buffer` in JavaScript costs a fraction of
//!   setting five properties and calling `Buffer.from` through Node-API once per event.

use napi::bindgen_prelude::{FromNapiValue, JsObjectValue, Object, ObjectRef, ValidateNapiValue};
use napi::{Env, Error, Result};

/// `{DecodeError, events}`. `Buffer` is taken once: Node's global `Buffer` is an accessor, which
/// costs a call on every read.
const SOURCE: &str = r#"((Buffer) => ({
  DecodeError: class DecodeError extends Error {
    get name() { return "DecodeError"; }
  },
  // One feed's events. `meta` holds FIELDS (8) numbers per event: where its data starts and its
  // length (in `buffer` from `byteOffset` on, or in `copies` when flags & 2), the flags (1: its
  // block carried an `id` field), its type and its id as [start, end) in `text` (-1: null; the
  // same start as the event before: the same string), its retry (-1: null).
  events(buffer, byteOffset, copies, meta, text) {
    const n = meta.length >>> 3;
    const out = new Array(n);
    const copied = copies.buffer;
    const copiedAt = copies.byteOffset;
    let typeAt = -1;
    let type = null;
    let idAt = -1;
    let id = null;
    for (let i = 0, k = 0; i < n; i++, k += 8) {
      const flags = meta[k + 2];
      const t = meta[k + 3];
      if (t !== typeAt) {
        typeAt = t;
        type = t < 0 ? null : text.slice(t, meta[k + 4]);
      }
      const d = meta[k + 5];
      if (d !== idAt) {
        idAt = d;
        id = d < 0 ? null : text.slice(d, meta[k + 6]);
      }
      const retry = meta[k + 7];
      out[i] = {
        data: (flags & 2) === 0
          ? Buffer.from(buffer, byteOffset + meta[k], meta[k + 1])
          : Buffer.from(copied, copiedAt + meta[k], meta[k + 1]),
        event: type,
        id,
        hasOwnId: (flags & 1) !== 0,
        retry: retry < 0 ? null : retry,
      };
    }
    return out;
  },
}))(Buffer)"#;

/// The object `SOURCE` makes, for this environment.
struct Scripts(ObjectRef<false>);

/// Runs `SOURCE` and keeps its object for this environment.
pub(crate) fn load(env: &Env) -> Result<()> {
    let scripts: Object = env.run_script(SOURCE)?;
    env.set_instance_data(Scripts(scripts.create_ref()?), (), |_| {})?;
    Ok(())
}

/// `name` of the object `SOURCE` made for this environment.
pub(crate) fn get<T: FromNapiValue + ValidateNapiValue>(env: &Env, name: &str) -> Result<T> {
    let scripts = env
        .get_instance_data::<Scripts>()?
        .ok_or_else(|| Error::from_reason("ssegate: the module's scripts are missing"))?;
    scripts.0.get_value(env)?.get_named_property(name)
}
