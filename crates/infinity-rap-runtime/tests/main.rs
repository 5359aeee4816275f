//! The runtime's side of RAP, one test binary: calls to real tool servers over HTTP, signed
//! notifications, moving threads between hosts, and the receiver under fuzzed input.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed step should stop the test

mod fuzz;
mod migration;
mod runtime;
mod signed_notifications;
