//! The runtime's side of the Reactive Agent Protocol (RAP), over the protocol crate
//! [`infinity_rap`] (wire types, signing, the retry rule) and the runtime's core.
//!
//! - [`client::RapClient`]: discovery, invocations with retries and notifications; it
//!   implements the core's `ToolDiscovery` and `ToolDispatcher`, so any host plugs it in.
//! - [`receiver`]: the axum router (and the plain [`receiver::handle`] function a Lambda uses)
//!   that checks callbacks and queues them as inputs.
//! - [`migration`]: moving a live conversation from one host to another (RAP's session
//!   migration).
//!
//! A tool server depends on `infinity-rap` alone and never compiles the runtime.
#![warn(missing_docs)]

pub mod client;
pub mod migration;
pub mod receiver;
