//! A thread's plan (the `plan` tools): steps with statuses, kept on its record.

use serde::{Deserialize, Serialize};

/// A step's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
    /// Given up.
    Failed,
}

impl StepStatus {
    /// The checklist box: `[ ]`, `[/]`, `[x]`, `[!]`.
    pub fn mark(self) -> &'static str {
        match self {
            StepStatus::Pending => "[ ]",
            StepStatus::InProgress => "[/]",
            StepStatus::Completed => "[x]",
            StepStatus::Failed => "[!]",
        }
    }
}

/// One step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanStep {
    /// What to do.
    pub text: String,
    /// How far it got.
    pub status: StepStatus,
}

/// A thread's plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Plan {
    /// The steps, in order.
    pub steps: Vec<PlanStep>,
}

impl Plan {
    /// The plan as a numbered checklist.
    pub fn checklist(&self) -> String {
        self.steps
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{} {}. {}", s.status.mark(), i + 1, s.text))
            .collect::<Vec<_>>()
            .join("\n")
    }
}
