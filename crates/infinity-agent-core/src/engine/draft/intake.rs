//! The inputs the slice takes in: those it marks processed (their markers are committed, so a
//! redelivered input changes nothing), and the one it is applying.

use crate::ids::{InputId, ThreadId};

/// The inputs the slice takes in.
#[derive(Debug, Default)]
pub(in crate::engine) struct Intake {
    /// The inputs to mark processed with the commit, in order.
    processed: Vec<InputId>,
    /// The input being applied: its id goes on the entries it produces, and names what is
    /// derived from it.
    current: Option<InputId>,
}

impl Intake {
    /// Marks `input` processed: the commit records it.
    pub(in crate::engine) fn mark_processed(&mut self, input: InputId) {
        self.processed.push(input);
    }

    /// The input being applied, if any.
    pub(in crate::engine) fn current(&self) -> Option<&InputId> {
        self.current.as_ref()
    }

    /// The input applied from now on (`None`: none); returns the one before.
    pub(in crate::engine) fn applying(&mut self, input: Option<InputId>) -> Option<InputId> {
        std::mem::replace(&mut self.current, input)
    }

    /// What the ids of inputs this slice of `thread` sends on its own account derive from: the
    /// thread and the slice's first input, so that running the same inputs again names them
    /// the same.
    pub(in crate::engine) fn id_base(&self, thread: &ThreadId) -> String {
        match self.processed.first() {
            Some(input) => format!("{thread}-{input}"),
            None => thread.to_string(),
        }
    }

    /// True when the slice marked no input processed.
    pub(in crate::engine) fn nothing_processed(&self) -> bool {
        self.processed.is_empty()
    }

    /// The inputs to mark processed, for the commit.
    pub(in crate::engine) fn take_processed(&mut self) -> Vec<InputId> {
        std::mem::take(&mut self.processed)
    }
}
