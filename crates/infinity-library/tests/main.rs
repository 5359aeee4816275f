//! The library crate's integration tests, one binary: each category on the embedded runtime
//! (through the core's behaviour harness) and the knowledge index.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed step should stop the test

mod artifact_tools;
mod knowledge;
mod knowledge_tools;
mod meta;
mod remote_tools;
