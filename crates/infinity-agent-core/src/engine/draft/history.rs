//! The thread's history as the slice sees it: the entries it was loaded with, borrowed (a slice
//! costs the same at any history length), and the entries it appends, kept apart.

use std::sync::Arc;

use jiff::Timestamp;

use crate::history::{HistoryEntry, HistoryView, Item};
use crate::ids::InputId;

/// The history the slice started from and what it appended. Entries are only appended, each
/// numbered after the last of the thread's own.
pub(in crate::engine) struct History<'a> {
    /// The entries loaded: inherited ones, then the thread's own.
    base: &'a [Arc<HistoryEntry>],
    /// The index of `base`'s first entry in the whole history (entries before it were not
    /// loaded).
    skipped: usize,
    /// The length of the thread's own history when the slice began.
    own_len_at_start: u64,
    /// Entries this slice appended.
    added: Vec<Arc<HistoryEntry>>,
}

impl<'a> History<'a> {
    /// A history loaded from `view_start` on (`base`), of a thread whose own history had
    /// `own_len` entries.
    pub(in crate::engine) fn new(
        base: &'a [Arc<HistoryEntry>],
        view_start: u64,
        own_len: u64,
    ) -> Self {
        Self {
            base,
            skipped: usize::try_from(view_start).unwrap_or(usize::MAX),
            own_len_at_start: own_len,
            added: Vec::new(),
        }
    }

    /// The whole history as it stands: what was loaded, then what the slice appended.
    pub(in crate::engine) fn view(&self) -> HistoryView<'_> {
        HistoryView::window(self.skipped, self.base, &self.added)
    }

    /// Appends `item`, made `at`, by the input `input_id` (`None`: by none).
    pub(in crate::engine) fn push(&mut self, at: Timestamp, input_id: Option<InputId>, item: Item) {
        let entry = HistoryEntry {
            seq: self.own_len(),
            at,
            input_id,
            item,
        };
        self.added.push(Arc::new(entry));
    }

    /// The entries this slice appended, in order.
    pub(in crate::engine) fn appended(&self) -> &[Arc<HistoryEntry>] {
        &self.added
    }

    /// The length of the thread's own history now.
    pub(in crate::engine) fn own_len(&self) -> u64 {
        self.own_len_at_start + self.added.len() as u64
    }
}
