//! Infinity's core: threads that advance in slices, built-in tools, the scripted model and the
//! embedded runtime.
//!
//! The modules are layered; a lower one never imports a higher one:
//!
//! - the data at the bottom: [`ids`], [`json`] (values cut to a size), [`text`] (text others
//!   wrote, made safe to show), [`history`], [`model`] (the model interface and its types),
//!   [`state`] (the thread record and everything it embeds), [`input`], [`effect`], [`commit`];
//! - [`library`]: what a host holds for tools beyond a conversation (the shelves categories plug
//!   in, the models people switch threads to);
//! - [`tools`]: the [`tools::Tool`] trait, the registry, the built-in tools, the seam internal
//!   tool categories plug into and the core's own ([`tools::internal`]), and tool servers'
//!   tools;
//! - [`agent`] (agents and agent files) and [`scripted`] (the scripted model); [`catalog`]
//!   (stored agent versions);
//! - [`engine`]: the slice as a synchronous state machine ([`engine::Slice`]), sans-IO;
//! - [`store`] (the [`store::ThreadStore`] trait, memory and file stores) and [`host`] (the one
//!   driver loop and effect performer both hosts share);
//! - [`runtime`]: the embedded host on tokio ([`runtime::AgentSystemBuilder`]).
//!
//! This crate depends on no AWS SDK and no HTTP client, and holds no product category (those are
//! the `infinity-library` crate's); hosts and model adapters depend on it.
#![warn(missing_docs)]

pub mod agent;
pub mod catalog;
pub mod commit;
pub mod cost;
pub mod effect;
pub mod engine;
pub mod history;
pub mod host;
pub mod ids;
pub mod input;
pub mod json;
pub mod library;
pub mod migration;
pub mod model;
pub mod runtime;
pub mod schema;
pub mod scripted;
pub mod state;
pub mod store;
pub mod telemetry;
#[cfg(feature = "test-util")]
pub mod testing;
pub mod text;
pub mod tools;

/// The README's Rust examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
