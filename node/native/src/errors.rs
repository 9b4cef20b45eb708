//! `DecodeError`, a JavaScript `Error` subclass. Node-API cannot declare a class that extends
//! `Error`, so the class is made once per Node environment (the main thread, each worker) by a
//! few lines of JavaScript when the module loads, exported as `DecodeError`, and kept as the
//! environment's instance data so that `Decoder.feed` can throw instances of it.

use napi::bindgen_prelude::{Function, FunctionRef, JsObjectValue, JsValue, Object, Unknown};
use napi::{Env, Error, Result, Status};
use napi_derive::napi;
use ssegate::sse;

type Class = FunctionRef<String, Unknown<'static>>;

/// The class: an `Error` named `DecodeError` (its members are set on each instance).
const SOURCE: &str = r#"(class DecodeError extends Error {
  get name() { return "DecodeError"; }
})"#;

/// Makes the class, keeps it for this environment and exports it.
#[napi(module_exports)]
pub fn init(mut exports: Object, env: Env) -> Result<()> {
    let class: Function<String, Unknown<'static>> = env.run_script(SOURCE)?;
    env.set_instance_data(class.create_ref()?, (), |_| {})?;
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
pub(crate) fn throw(env: &Env, errors: &[sse::DecodeError], events: Vec<Object<'_>>) -> Error {
    match throw_inner(env, errors, events) {
        Ok(()) => Error::new(Status::PendingException, "DecodeError"),
        Err(e) => e,
    }
}

fn throw_inner(env: &Env, errors: &[sse::DecodeError], events: Vec<Object<'_>>) -> Result<()> {
    let class = env
        .get_instance_data::<Class>()?
        .ok_or_else(|| Error::from_reason("ssegate: DecodeError class missing"))?
        .borrow_back(env)?;
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
