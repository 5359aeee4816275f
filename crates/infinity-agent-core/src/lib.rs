//! Infinity's core: threads that advance in slices, built-in tools, the scripted model and the
//! embedded runtime.
#![warn(missing_docs)]

pub mod agent;
pub mod effect;
pub mod engine;
pub mod history;
pub mod host;
pub mod ids;
pub mod input;
pub mod model;
pub mod runtime;
pub mod scripted;
pub mod store;
pub mod thread;
pub mod tools;
