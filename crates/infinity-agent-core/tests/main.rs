//! The core's integration tests, one binary: the behaviours on the embedded host, the
//! deterministic simulation, the fuzzers and the layering rules.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed step should stop the test

mod behaviour;
mod drift;
mod fuzz;
mod layers;
mod simulation;
