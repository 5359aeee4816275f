//! The behaviour tests' harness lives in the core's `testing` module, shared with the crates
//! that plug categories in.

pub use infinity_agent_core::testing::harness::*;
