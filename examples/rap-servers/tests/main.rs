//! The example servers' tests, one binary: each served over real HTTP and called.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed step should stop the test

mod get_time;
mod ticker;
