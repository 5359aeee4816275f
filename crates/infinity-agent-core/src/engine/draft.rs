//! The thread as a slice changes it ([`Draft`]), and what the slice commits.
//!
//! The draft's state is grouped in parts, a file each, whose fields only their own file reads:
//! the engine's files use them through their methods, so a call says which part of the slice's
//! state it reads or changes, and each part's rules are kept in one place:
//!
//! - `equipment`: what the slice runs with, fixed when it is admitted: the agent, the model
//!   that answers, the tools the thread is offered, the host's library;
//! - `history`: the history the slice was loaded with (borrowed) and the entries it appends,
//!   each numbered after the last;
//! - `intake`: the inputs the slice marks processed, and the one being applied;
//! - `outbox`: the effects to commit and the events to show; output events are numbered, and
//!   handed out live, only there;
//! - `accounting`: what the slice counted: the completions of the turn, and what a child or a
//!   delegation reports to its conversation's root;
//! - `turn`: whether the model's turn ended, and what the owed completion asks.
//!
//! Four things stay directly reachable, because nearly every job reads or changes them and
//! methods would only stand in the way: `record` (the thread as it will be committed; its own
//! methods keep its rules), `conversation` (what the conversation's threads share, as the slice
//! sees it; tools get it whole), `now` (the slice's clock) and `ids` (the slice's id source,
//! lent to whatever mints an id). The record as it was loaded is the draft's own: the commit
//! compares the record with it, and the other files ask [`Draft::created`] and
//! [`Draft::version_to_commit`].

mod accounting;
mod equipment;
mod history;
mod intake;
mod outbox;
mod turn;

use jiff::Timestamp;

use crate::commit::Commit;
use crate::effect::OutputEvent;
use crate::ids::IdSource;
use crate::state::{Conversation, ThreadRecord};

use accounting::Accounting;
pub(super) use equipment::Equipment;
pub(super) use history::History;
use intake::Intake;
pub(super) use outbox::Outbox;
use turn::Turn;

/// The thread as the slice changes it: the record and what the conversation's threads share,
/// with the slice's clock and id source, and its state in parts (see the module docs).
pub(super) struct Draft<'a> {
    pub(super) record: ThreadRecord,
    /// What the conversation's threads share, as this slice sees it; written back to the record
    /// by a root.
    pub(super) conversation: Conversation,
    pub(super) now: Timestamp,
    pub(super) ids: &'a mut dyn IdSource,
    pub(super) equipment: Equipment<'a>,
    pub(super) history: History<'a>,
    pub(super) intake: Intake,
    pub(super) outbox: Outbox,
    pub(super) accounting: Accounting,
    pub(super) turn: Turn,
    /// The record as it was loaded (`None` for a thread this slice creates), to tell whether
    /// anything changed.
    original: Option<ThreadRecord>,
}

impl<'a> Draft<'a> {
    /// A draft of `record`, loaded as `original` (`None`: the slice creates it), with the parts
    /// admission made.
    // Called once, by admission, with what it worked out.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        record: ThreadRecord,
        original: Option<ThreadRecord>,
        conversation: Conversation,
        equipment: Equipment<'a>,
        history: History<'a>,
        outbox: Outbox,
        now: Timestamp,
        ids: &'a mut dyn IdSource,
    ) -> Self {
        Self {
            record,
            conversation,
            now,
            ids,
            equipment,
            history,
            intake: Intake::default(),
            outbox,
            accounting: Accounting::default(),
            turn: Turn::default(),
            original,
        }
    }
}

impl Draft<'_> {
    /// True when this slice creates the thread.
    pub(super) fn created(&self) -> bool {
        self.original.is_none()
    }

    /// The version this slice's commit writes: the next after the loaded record's, 1 for a
    /// thread it creates.
    pub(super) fn version_to_commit(&self) -> u64 {
        self.original.as_ref().map_or(1, |r| r.version + 1)
    }

    /// What the slice commits, how many completions it ran, and the live outputs still to hand
    /// out. No commit when nothing changed.
    pub(super) fn into_commit(mut self) -> (Option<Commit>, u32, Vec<OutputEvent>) {
        self.return_if_delegation_done();
        if self.record.status == crate::state::ThreadStatus::Closed {
            self.cancel_pending();
        }
        self.report_usage_to_root();
        if self.record.is_root() {
            self.conversation.budget = self.budget();
            std::mem::take(&mut self.conversation).put_back(&mut self.record);
        }
        self.outbox.flush_live(&mut self.record);
        let outputs = self.outbox.take_live();
        let completions = self.accounting.completions();
        let unchanged = self.history.appended().is_empty()
            && self.outbox.effects().is_empty()
            && self.original.as_ref() == Some(&self.record);
        if unchanged && self.intake.nothing_processed() {
            return (None, completions, outputs);
        }
        // Even when nothing else changed (every input dropped, or a no-op such as writing a note
        // that already says so), the inputs' markers are written: a late duplicate must not be
        // applied again over newer state.
        self.record.version = self.version_to_commit();
        self.record.history_len = self.history.own_len();
        self.record.updated_at = self.now;
        let (effects, events) = self.outbox.into_commit(&mut self.record, self.ids);
        let commit = Commit {
            thread_id: self.record.id.clone(),
            expected_version: self.original.as_ref().map(|r| r.version),
            new_entries: self
                .history
                .appended()
                .iter()
                .map(|e| (**e).clone())
                .collect(),
            processed_inputs: self.intake.take_processed(),
            effects,
            events,
            record: self.record,
        };
        (Some(commit), completions, outputs)
    }
}
