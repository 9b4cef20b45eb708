//! `DecodeError`, a JavaScript `Error` subclass. Node-API cannot declare a class that extends
//! `Error`, so the class is made once per Node environment (the main thread, each worker) by a
//! few lines of JavaScript when the module loads (`js`), exported as `DecodeError`, and kept as
//! the environment's instance data so that `Decoder.feed` can throw instances of it.

use napi::bindgen_prelude::{Function, JsObjectValue, JsValue, Object, Unknown};
use napi::{Env, Error, Result, Status};
use napi_derive::napi;
use ssegate::sse;

/// Makes the class (and the rest of `js`), keeps it for this environment and exports it.
#[napi(module_exports)]
pub fn init(mut exports: Object, env: Env) -> Result<()> {
    crate::js::load(&env)?;
    let class: Function<String, Unknown> = crate::js::get(&env, "DecodeError")?;
    exports.set_named_property("DecodeError", class)?;
    exports.set_named_property("contract", crate::contract::contract())?;
    Ok(())
}

fn limit_of(error: &sse::DecodeError) -> Option<usize> {
    match error {
        sse::DecodeError::LineTooLong { limit, .. }
        | sse::DecodeError::EventTooLarge { limit, .. }
        | sse::DecodeError::FieldTooLong { limit, .. }
        | sse::DecodeError::BlockTooLarge { limit, .. } => Some(*limit),
        _ => None,
    }
}

/// Sets the members of a `DecodeError` for `error` (but `events` and `errors`).
fn set_fields(o: &mut Object<'_>, error: &sse::DecodeError) -> Result<()> {
    o.set("kind", error.as_str())?;
    o.set("limit", limit_of(error).map(|n| n as f64))?;
    o.set("offset", error.offset() as f64)?;
    o.set(
        "id",
        error
            .id()
            .map(|id| String::from_utf8_lossy(id).into_owned()),
    )?;
    Ok(())
}

/// Throws `errors[0]` as a `DecodeError` carrying `events` (what the same call completed) and
/// `errors` (every error of the call, the first included).
pub(crate) fn throw(env: &Env, errors: &[sse::DecodeError], events: Unknown<'_>) -> Error {
    match throw_inner(env, errors, events) {
        Ok(()) => Error::new(Status::PendingException, "DecodeError"),
        Err(e) => e,
    }
}

fn throw_inner(env: &Env, errors: &[sse::DecodeError], events: Unknown<'_>) -> Result<()> {
    let class: Function<String, Unknown> = crate::js::get(env, "DecodeError")?;
    let mut all = Vec::with_capacity(errors.len());
    for e in errors {
        let instance: Object = class.new_instance(e.to_string())?.coerce_to_object()?;
        let mut instance = instance;
        set_fields(&mut instance, e)?;
        instance.set("events", Vec::<Object>::new())?;
        instance.set("errors", Vec::<Object>::new())?;
        all.push(instance);
    }
    let mut first = all[0];
    first.set("events", events)?;
    first.set("errors", all)?;
    env.throw(first)?;
    Ok(())
}
