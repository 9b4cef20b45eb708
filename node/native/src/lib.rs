//! The native core of the `ssegate` npm package: the crate's JSON completeness gate, SSE decoder and
//! resumable stream engine for Node.js (Node-API via napi-rs). The JavaScript API and its types are
//! in the generated `index.d.ts` (with `node/native/header.d.ts` for the objects built by hand).
//!
//! Data crosses the boundary this way: a chunk given to `feed` is copied once into a `Bytes` the
//! engine keeps (so that nothing the caller does to its buffer afterwards can change what the
//! engine has checked), and event data that is one slice of the chunk just fed is handed back as a
//! `Buffer` view of the caller's own memory (see `views`). `Decoder#feed` hands its events to a few
//! lines of JavaScript as one batch per call, which make the objects and their `Buffer`s there
//! (see `decoder` and `js`): per event, that is a fraction of the cost of Node-API calls.

// Under `cfg(test)` napi-derive's export registration is not compiled, so every item reached only
// from JavaScript looks unused to the `lib test` target (`cargo clippy --all-targets`).
#![cfg_attr(test, allow(dead_code))]

mod contract;
mod decoder;
mod errors;
mod gate;
mod js;
mod numbers;
mod stream;

mod views;
