//! The model adapters' integration tests, one binary: replays against a local server, Bedrock
//! against its stand-in, and one real completion per provider when its key is set.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed step should stop the test

// What the tests share.
mod common;

mod bedrock;
mod replay;
mod smoke;
