//! Incremental, zero-copy Server-Sent Events decoder (WHATWG "interpreting an event stream").
#![forbid(unsafe_code)]

mod event;

pub use event::{Data, Event, PartialEvent};
