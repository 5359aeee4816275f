//! The core scenarios end to end through SQS, the real handlers and DynamoDB, on the local
//! emulators (moto server and DynamoDB Local, started by the harness).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed step should stop the test

mod harness;

mod catalog;
mod deadline;
mod delivery;
mod dlq;
mod lists;
mod loopback;
mod migration;
mod oversize;
mod remotes;
mod schedules;
mod store;
mod threads;
mod timers;
mod tool_servers;
mod traces;
mod warm;
