//! The model's turn as the slice runs it: whether it ended, whether the slice compacted the
//! history already, and what the owed completion asks (its system prompt and history).

use std::sync::Arc;

use crate::history::{HistoryEntry, HistoryView};

/// The model's turn as the slice runs it.
#[derive(Debug, Default)]
pub(in crate::engine) struct Turn {
    /// Set by a tool that ends the turn (`finish`), or by an error that stops the loop.
    ended: bool,
    /// True once the slice compacted, or found nothing worth summarizing: it compacts at most
    /// once.
    compacted: bool,
    /// The system prompt, made at the first completion.
    system: Option<String>,
    /// The history of the owed completion, when it is not the view as it stands (a compacted
    /// view, or the summary request).
    prompt: Option<Vec<Arc<HistoryEntry>>>,
}

impl Turn {
    /// The turn ends: the model is not asked again until something new comes.
    pub(in crate::engine) fn end(&mut self) {
        self.ended = true;
    }

    /// True when the turn ended.
    pub(in crate::engine) fn ended(&self) -> bool {
        self.ended
    }

    /// A new turn begins (messages queued while the last one ran start it).
    pub(in crate::engine) fn begin(&mut self) {
        self.ended = false;
    }

    /// True the first time the slice would compact: it compacts at most once.
    pub(in crate::engine) fn first_compaction(&mut self) -> bool {
        !std::mem::replace(&mut self.compacted, true)
    }

    /// The owed completion is the summary of `prompt`.
    pub(in crate::engine) fn ask_summary(&mut self, prompt: Vec<Arc<HistoryEntry>>) {
        self.prompt = Some(prompt);
    }

    /// The owed completion is the model's turn, on `prompt` (`None`: the view as it stands);
    /// the system prompt is made by `system` the first time.
    pub(in crate::engine) fn ask_turn(
        &mut self,
        system: impl FnOnce() -> String,
        prompt: Option<Vec<Arc<HistoryEntry>>>,
    ) {
        if self.system.is_none() {
            self.system = Some(system());
        }
        self.prompt = prompt;
    }

    /// The system prompt of the model's turns.
    pub(in crate::engine) fn system(&self) -> &str {
        self.system.as_deref().unwrap_or_default()
    }

    /// The history the owed completion reads, when it is not the view as it stands.
    pub(in crate::engine) fn prompt(&self) -> Option<HistoryView<'_>> {
        self.prompt.as_deref().map(HistoryView::from_slice)
    }
}
