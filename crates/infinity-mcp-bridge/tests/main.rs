//! The bridge's integration tests, one binary: MCP servers (the tiny test server over stdio
//! and Streamable HTTP) bridged to RAP and called as a runtime would.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed step should stop the test

// What the tests share.
mod support;

mod calls;
mod cancellation;
mod discovery;
mod in_process;
mod run;
mod streamable_http;
