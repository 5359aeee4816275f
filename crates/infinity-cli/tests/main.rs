//! The `infinity` command's integration tests, one binary: the commands, the HTTP API, the
//! web app in a browser, the remote hub and the stack on the local emulators.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed step should stop the test

// What the tests share.
mod aws_stack;
mod browser;
mod common;
mod lambda;
mod remotes;

mod agents;
mod api_errors;
mod artifacts;
mod cli;
mod meta;
mod migrate;
mod people;
mod remote;
mod serve;
mod stack;
mod stack_remote;
mod streams;
mod tool_servers;
mod traces;
mod versions;
mod web;
