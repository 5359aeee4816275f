//! Infinity's core: threads that advance in slices, built-in tools, the scripted model and the
//! embedded runtime.
//!
//! - [`engine::run_slice`] is the functional core: thread state and inputs in; new history
//!   entries, the new record and [`effect::Effect`]s out, as values.
//! - [`thread`], [`history`], [`input`] and [`effect`] are the durable, serde-tagged types.
//! - [`tools`] holds the [`tools::Tool`] trait and the built-in tools.
//! - [`store`] holds the [`store::ThreadStore`] trait and the memory and file stores; [`host`]
//!   the [`host::InputSender`] and [`host::Timers`] traits a host implements.
//! - [`runtime`] is the embedded host on tokio ([`runtime::AgentSystemBuilder`]).
//! - [`scripted`] is the scripted model for tests and offline demos.
//!
//! This crate depends on no AWS SDK and no HTTP client; hosts and model adapters depend on it.
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

/// The README's Rust examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
