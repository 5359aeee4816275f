//! What a slice hands its host to write in one atomic step.

use crate::effect::{Effect, OutputEvent, PendingEffect};
use crate::history::HistoryEntry;
use crate::ids::{InputId, ThreadId};
use crate::state::ThreadRecord;

/// What the host writes in one atomic step: the new record, the new entries, the processed
/// input ids (deduplication markers), the outbox effects and the output events to keep. All of
/// it or none of it.
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
    /// The output events the slice showed, numbered from the previous record's
    /// [`last_event_seq`](ThreadRecord::last_event_seq) + 1 to the new record's: the store keeps
    /// them for clients that resume a stream
    /// ([`ThreadStore::events_after`](crate::store::ThreadStore::events_after)).
    pub events: Vec<OutputEvent>,
}

/// Numbers `event` as `record`'s next output event.
pub(crate) fn number(record: &mut ThreadRecord, event: &mut OutputEvent) {
    record.last_event_seq += 1;
    event.seq = Some(record.last_event_seq);
}

/// Numbers the output events among `effects` (in order) as `record`'s next ones, and returns
/// copies of them to keep.
pub(crate) fn number_outputs(
    record: &mut ThreadRecord,
    effects: &mut [Effect],
) -> Vec<OutputEvent> {
    let mut kept = Vec::new();
    for effect in effects {
        if let Effect::Output { event } = effect {
            number(record, event);
            kept.push(event.clone());
        }
    }
    kept
}
