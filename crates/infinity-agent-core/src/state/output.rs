//! A thread's output: what its `finish` call recorded.

use serde::{Deserialize, Serialize};

/// How a thread finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FinishStatus {
    /// The task was done.
    Succeeded,
    /// The task could not be done.
    Failed,
    /// The task was abandoned.
    Cancelled,
}

impl FinishStatus {
    /// The status as written in `finish` calls and output events.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishStatus::Succeeded => "succeeded",
            FinishStatus::Failed => "failed",
            FinishStatus::Cancelled => "cancelled",
        }
    }
}

/// A thread's output, set by `finish`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThreadOutput {
    /// How it finished.
    pub status: FinishStatus,
    /// The result.
    pub result: serde_json::Value,
}
