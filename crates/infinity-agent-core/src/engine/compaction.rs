//! Compaction: when the last prompt used more of the model's context window than the agent
//! allows, the older part of the conversation is summarized by the thread's own model, and later
//! completions see the summary and what follows it. The summarized entries stay stored
//! (children that inherited them still see them).

use std::collections::HashSet;
use std::sync::Arc;

use crate::history::{HistoryEntry, Item};
use crate::ids::CallId;
use crate::model::{Completion, ModelError};
use crate::state::SummaryRef;

use super::draft::Draft;

/// Entries kept verbatim after a cut.
const KEEP: usize = 6;

/// What the summarizing completion is asked.
const SUMMARY_REQUEST: &str = "Summarize the conversation above for your own later use: the \
    task, what was decided and done, ids of threads and tool calls still relevant, and what is \
    left to do. Reply with the summary only.";

/// The system prompt of the summarizing completion.
pub(super) const SUMMARY_SYSTEM: &str = "You summarize conversations faithfully and concisely.";

impl Draft<'_> {
    /// True when the last prompt used more of the model's context window than the agent allows.
    pub(super) fn over_compaction_threshold(&self) -> bool {
        let window = u64::from(self.equipment.model().context_window());
        let allowed = window * u64::from(self.equipment.agent().limits.compact_at_percent) / 100;
        self.record.last_prompt_tokens > allowed
    }

    /// The newest summary in the view: its index and how many entries it covers.
    fn latest_summary(&self) -> Option<(usize, usize)> {
        self.record
            .latest_summary
            .map(|s| (s.index as usize, s.covers as usize))
    }

    /// What the model sees when the thread has been compacted: the newest summary, then the
    /// entries from the point it covers to. `None`: the whole view, as it is.
    pub(super) fn model_view(&self) -> Option<Vec<Arc<HistoryEntry>>> {
        let (index, covers) = self.latest_summary()?;
        let view = self.history.view();
        let mut out = Vec::with_capacity(view.len().saturating_sub(covers));
        out.extend(view.get(index).cloned());
        out.extend(
            view.since(covers)
                .enumerate()
                .filter(|(i, _)| covers + i != index)
                .map(|(_, e)| Arc::clone(e)),
        );
        Some(out)
    }

    /// The history of the summarizing completion, or `None` when nothing is worth summarizing
    /// yet. The cut is the newest clean boundary (a message or a model turn with every earlier
    /// call answered) that keeps at least [`KEEP`] entries verbatim.
    pub(super) fn summary_prompt(&self) -> Option<Vec<Arc<HistoryEntry>>> {
        let cut = self.compaction_cut()?;
        let view = self.history.view();
        let start = self.latest_summary().map_or(0, |(_, covers)| covers);
        let mut history: Vec<Arc<HistoryEntry>> = Vec::new();
        if let Some((index, _)) = self.latest_summary() {
            history.extend(view.get(index).cloned());
        }
        history.extend(view.since(start).take(cut - start).cloned());
        history.push(Arc::new(HistoryEntry {
            seq: 0,
            at: self.now,
            input_id: None,
            item: Item::user(SUMMARY_REQUEST),
        }));
        Some(history)
    }

    fn compaction_cut(&self) -> Option<usize> {
        let view = self.history.view();
        let start = self.latest_summary().map_or(0, |(_, covers)| covers);
        // No call is open across the previous cut (it was a clean boundary), so the walk starts
        // there: a windowed view has nothing older loaded, and needs nothing older.
        let first = start.max(view.skipped());
        let mut open: HashSet<&CallId> = HashSet::new();
        let mut boundary = None;
        for (i, entry) in (first..).zip(view.since(first)) {
            let clean = open.is_empty()
                && matches!(entry.item, Item::Message { .. } | Item::Assistant { .. });
            if clean && i > start && i + KEEP <= view.len() {
                boundary = Some(i);
            }
            match &entry.item {
                Item::Assistant { tool_calls, .. } => open.extend(tool_calls.iter().map(|c| &c.id)),
                Item::ToolResult { call_id, .. } => {
                    open.remove(call_id);
                }
                _ => {}
            }
        }
        boundary
    }

    /// Records the summary the model wrote (a terminal failure is recorded as an error and the
    /// turn goes on uncompacted).
    pub(super) fn on_summary(&mut self, result: Result<Completion, ModelError>) {
        let summary = match result {
            Ok(summary) => summary,
            Err(why) => {
                let name = self.equipment.model().name().to_owned();
                self.notice_error(format!("Compaction failed ({name}): {why}"));
                return;
            }
        };
        let Some(cut) = self.compaction_cut() else {
            return;
        };
        self.spend(summary.usage);
        tracing::info!(thread = %self.record.id, covers = cut, "history compacted");
        self.record.latest_summary = Some(SummaryRef {
            index: self.history.view().len() as u64,
            covers: cut as u64,
        });
        self.append(Item::Summary {
            text: summary.text.unwrap_or_default(),
            covers: cut as u64,
        });
    }
}
