//! The Reactive Agent Protocol (RAP) for Infinity.
//!
//! RAP connects an agent runtime to tool servers over plain HTTP, fire and forget: the runtime
//! POSTs an invocation, the tool acknowledges at once, works on its own schedule and POSTs
//! callbacks (results, subscription events, OAuth and user-choice requests, view updates) to the
//! `callback_url` it was given. The runtime can hibernate in between.
//!
//! - [`wire`] holds the serde types of every RAP message, named and shaped exactly as the spec
//!   puts them on the wire, and the parse functions that check the rules serde cannot
//!   ([`wire::parse_callback`], [`wire::parse_manifest`], [`wire::parse`]).
//!
//! - [`signing::CallbackSigner`]: callback URLs signed for one thread and call, with an expiry,
//!   and the keys that sign the runtime's notifications to each tool server
//!   ([`signing::NotificationKey`]).
//! - Which failed requests are worth another attempt, and the backoff between them, both sides
//!   take from the crate `infinity-retry` (`rap_status_is_transient`: 5xx, never a 4xx).
//! - [`kit`] (feature `kit`, on by default): write RAP tool servers in Rust.
//!
//! The runtime's side (its client, the callback receiver, session migration) is the crate
//! `infinity-rap-runtime`; this one does not depend on the runtime, so a tool server built with
//! it compiles none of it.
//!
//! ```
//! use infinity_rap::wire::{parse_callback, Callback};
//!
//! let body = br#"{"type": "tool_result", "group_id": "thread_xyz", "id": "call_abc123",
//!                 "text": "Deployed instance i-0abc123"}"#;
//! let callback = parse_callback(body)?;
//! assert_eq!(callback.group_id(), "thread_xyz");
//! assert_eq!(callback.tool_call_id(), Some("call_abc123"));
//! if let Callback::ToolResult(result) = &callback {
//!     assert_eq!(result.text.as_deref(), Some("Deployed instance i-0abc123"));
//! }
//!
//! // A callback type the spec does not define is rejected, and the error names it.
//! let error = parse_callback(br#"{"type": "tool_progress", "group_id": "thread_xyz"}"#)
//!     .unwrap_err();
//! assert!(error.to_string().contains("`tool_progress`"));
//! # Ok::<(), infinity_rap::wire::WireError>(())
//! ```
#![warn(missing_docs)]

pub mod signing;
pub mod wire;

#[cfg(feature = "kit")]
pub mod kit;
