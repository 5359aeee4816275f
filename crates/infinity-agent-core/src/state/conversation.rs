//! What the threads of one conversation share.

use crate::cost::Budget;
use crate::model::Usage;

use super::{Delegation, HourlyUsage, Memory, ThreadRecord, Toolset};

/// What the threads of one conversation share. The root thread's record keeps it; a child's
/// slice sees it as the root had it when the slice began, and sends its changes to the root as
/// inputs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    /// The notes of the `memory` tools.
    pub memory: Memory,
    /// The delegations (`agent` calls) running.
    pub delegations: Vec<Delegation>,
    /// The conversation's tools from tool servers, if it has any configured.
    pub toolset: Option<Toolset>,
    /// What the conversation's threads used in the current hour (its hourly limits).
    pub hourly: HourlyUsage,
    /// What they used and cost over the conversation's life (its budget).
    pub total: Usage,
    /// The budget in force as the root last saw it (for people to read).
    pub budget: Budget,
    /// The budget a person set, over the agent's.
    pub budget_set: Budget,
}

impl Conversation {
    /// The shared part of a root thread's record, copied (for a child's slice).
    pub fn of_root(record: &ThreadRecord) -> Self {
        Self {
            memory: record.memory.clone(),
            delegations: record.delegations.clone(),
            toolset: record.toolset.clone(),
            hourly: record.conversation_hourly,
            total: record.conversation_usage,
            budget: record.conversation_budget,
            budget_set: record.conversation_budget_set,
        }
    }

    /// The shared part of a root thread's record, moved out for the root's own slice; see
    /// [`Conversation::put_back`].
    pub fn take_from(record: &mut ThreadRecord) -> Self {
        Self {
            memory: std::mem::take(&mut record.memory),
            delegations: std::mem::take(&mut record.delegations),
            toolset: record.toolset.take(),
            hourly: std::mem::take(&mut record.conversation_hourly),
            total: std::mem::take(&mut record.conversation_usage),
            budget: std::mem::take(&mut record.conversation_budget),
            budget_set: std::mem::take(&mut record.conversation_budget_set),
        }
    }

    /// Returns what [`Conversation::take_from`] moved out, with the slice's changes.
    pub fn put_back(self, record: &mut ThreadRecord) {
        record.memory = self.memory;
        record.delegations = self.delegations;
        record.toolset = self.toolset;
        record.conversation_hourly = self.hourly;
        record.conversation_usage = self.total;
        record.conversation_budget = self.budget;
        record.conversation_budget_set = self.budget_set;
    }
}
