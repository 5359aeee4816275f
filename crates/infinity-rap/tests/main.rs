//! The protocol crate's integration tests, one binary: the spec's examples round-trip, and the
//! kit serves tools over real HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed step should stop the test

mod conformance;
mod kit;
