//! What a slice hands its host to write in one atomic step.

use crate::effect::PendingEffect;
use crate::history::HistoryEntry;
use crate::ids::{InputId, ThreadId};
use crate::state::ThreadRecord;

/// What the host writes in one atomic step: the new record, the new entries, the processed
/// input ids (deduplication markers) and the outbox effects. All of it or none of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Commit {
    /// The thread.
    pub thread_id: ThreadId,
    /// The record version the slice started from; `None` when the slice creates the thread.
    pub expected_version: Option<u64>,
    /// The new record (its `version` is `expected_version + 1`).
    pub record: ThreadRecord,
    /// Entries to append to the thread's own history, in order.
    pub new_entries: Vec<HistoryEntry>,
    /// Input ids to mark processed.
    pub processed_inputs: Vec<InputId>,
    /// Effects to put in the outbox and perform after the commit.
    pub effects: Vec<PendingEffect>,
}
