//! What ssegate's tests, benches and fuzz targets share, in one unpublished crate (`publish =
//! false`): the oracles the fast code is checked against, and the fixtures the tests measure with.
//!
//! - [`sse_reference`]: the SSE decoder's reference, the WHATWG algorithm applied literally;
//! - [`guard_model`]: the one model of MCP servers answering a resumed stream, driving the real
//!   decoder and guard (`tests/guard_prop.rs` and the `guard_model` fuzz target);
//! - [`fuzz`]: one oracle per fuzz target, which `tests/regression.rs` replays the saved inputs
//!   through;
//! - [`alloc`]: the counting global allocator of every memory test and allocation bench;
//! - [`redis_server`]: a `redis-server` child process per test.
//!
//! The library's integration tests that use this crate are left out of its published package
//! (cargo drops path-only dev-dependencies when packaging); the crate reaches the library's
//! internals only through its PRIVATE `__testing` feature (`ssegate::hooks`).

pub mod alloc;
pub mod fuzz;
pub mod guard_model;
pub mod redis_server;
pub mod sse_reference;
