//! The append-only history of a thread.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::ids::{CallId, InputId, ThreadId};

/// The name of the synthetic tool call the runtime uses to inject events (late results, child
/// reports, associative subscription events) into a conversation. Models may not call it.
pub const INJECTED_TOOL: &str = "receive_event__injected";

/// The text of the notice an interruption leaves in a thread's history (`interrupt` input); the
/// model is not asked to answer past it.
pub const INTERRUPTED_NOTICE: &str = "Interrupted by the user.";

/// The notice an interruption leaves when it found nothing in flight (no pending call, no open
/// question, no open child thread to pass it to); it ends a turn like [`INTERRUPTED_NOTICE`].
/// The web app (`web/transcript.js`) shows it as it is.
pub const INTERRUPTED_IDLE_NOTICE: &str =
    "Nothing to interrupt: the user interrupted while no call, question or child thread was in \
     flight.";

/// True for the notices an interruption leaves ([`INTERRUPTED_NOTICE`],
/// [`INTERRUPTED_IDLE_NOTICE`]): the model is not asked to answer past either.
pub fn is_interruption_notice(text: &str) -> bool {
    text == INTERRUPTED_NOTICE || text == INTERRUPTED_IDLE_NOTICE
}

/// How the stand-in result of a sleep that new input cut short begins (the engine's `move_on`);
/// the web app (`web/transcript.js`) keys on it to label the sleep "interrupted".
pub const SLEEP_INTERRUPTED_PREFIX: &str = "Sleep interrupted:";

/// How the stand-in result of a dispatched call still running at new input begins; its real
/// result comes later as an event (`web/transcript.js` labels the call "still running").
pub const STILL_RUNNING_PREFIX: &str = "Still running:";

/// [`STILL_RUNNING_PREFIX`] for a call whose tool waits for the user to authorize it.
pub const STILL_WAITING_PREFIX: &str = "Still waiting:";

/// A time as the runtime's texts show it to models: RFC 3339 to the second, in UTC
/// (`2026-05-01T21:07:09Z`). Half a second or more rounds up.
pub fn model_time(t: Timestamp) -> String {
    t.round(jiff::Unit::Second).unwrap_or(t).to_string()
}

/// The same second as [`model_time`] as people read it: `2026-05-01 21:07:09 UTC` (the CLI, a
/// thread list's activity, the web app's `status.js`).
pub fn person_time(t: Timestamp) -> String {
    let t = t.round(jiff::Unit::Second).unwrap_or(t);
    t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// One entry of a thread's own history. Entries are never changed once committed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryEntry {
    /// Position in the thread's own history, from 0.
    pub seq: u64,
    /// When the entry was recorded.
    #[schemars(with = "crate::schema::Rfc3339")]
    pub at: Timestamp,
    /// The input that produced this entry, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_id: Option<InputId>,
    /// What happened.
    pub item: Item,
}

/// A tool call as the model issued it (or as the runtime synthesized it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolCall {
    /// The call's id, unique within the thread tree.
    pub id: CallId,
    /// The tool's name.
    pub name: String,
    /// The arguments, a JSON object.
    pub args: serde_json::Value,
}

/// An image, base64-encoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// The bytes, base64 (standard alphabet, padded).
    pub data: String,
}

impl Image {
    /// What a model without image support reads instead of the image.
    pub fn placeholder(&self) -> String {
        let bytes = self.data.len() / 4 * 3;
        format!(
            "[image: {}, about {} KB, not shown: this model does not read images]",
            self.media_type,
            bytes.div_ceil(1024)
        )
    }
}

/// Where a text message came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MessageSource {
    /// A person (or the application) sent it.
    User,
    /// The parent thread sent it with `send_message_to_child`.
    Parent {
        /// The parent's id.
        thread_id: ThreadId,
    },
}

/// The content of a history entry. Tagged with `type`; new variants may be added, never changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Item {
    /// A message to the thread (user role).
    Message {
        /// The text.
        text: String,
        /// Who sent it.
        from: MessageSource,
    },
    /// One model completion: text and tool calls. Synthetic (runtime-made) turns carry
    /// `synthetic: true`, e.g. the `receive_event__injected` call of an injected event.
    Assistant {
        /// Text the model wrote, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// Tool calls the model issued, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// True when the runtime, not the model, wrote this turn.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        synthetic: bool,
    },
    /// The result of a tool call.
    ToolResult {
        /// The call this answers.
        call_id: CallId,
        /// The tool's name (kept so the result reads on its own).
        name: String,
        /// The result text.
        text: String,
        /// True when the call failed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        /// Images that came with the result (a tool server's multimodal content).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Image>,
        /// How people should see the result (RAP `display_as` segments, best first). Never
        /// shown to the model.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        display_as: Vec<serde_json::Value>,
    },
    /// A summary of the earlier conversation, made when the prompt outgrew the model's context
    /// (compaction). Models see it, then the entries from `covers` on; the entries it covers stay
    /// stored (children that inherited them still see them).
    Summary {
        /// The summary.
        text: String,
        /// How many entries of the thread's view (from the start) it stands for.
        covers: u64,
    },
    /// A notice recorded by the runtime for the user (an error the thread ran into, a stopped loop).
    Notice {
        /// What happened.
        text: String,
        /// True for errors.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

impl Item {
    /// A user-role message from a person.
    pub fn user(text: impl Into<String>) -> Self {
        Item::Message {
            text: text.into(),
            from: MessageSource::User,
        }
    }

    /// A successful tool result without images.
    pub fn tool_result(call_id: CallId, name: impl Into<String>, text: impl Into<String>) -> Self {
        Item::ToolResult {
            call_id,
            name: name.into(),
            text: text.into(),
            is_error: false,
            images: Vec::new(),
            display_as: Vec::new(),
        }
    }

    /// A failed tool result.
    pub fn tool_error(call_id: CallId, name: impl Into<String>, text: impl Into<String>) -> Self {
        Item::ToolResult {
            call_id,
            name: name.into(),
            text: text.into(),
            is_error: true,
            images: Vec::new(),
            display_as: Vec::new(),
        }
    }

    /// The tool calls of an assistant turn (empty for other items).
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self {
            Item::Assistant { tool_calls, .. } => tool_calls,
            _ => &[],
        }
    }
}

/// How a summary reads to a model (as a user-role message at the start of the conversation).
pub fn summary_text(text: &str) -> String {
    format!("[Summary of the earlier conversation, which was compacted to save context]\n{text}")
}

/// A thread's history as one sequence without copying it: the entries the slice started from,
/// then the entries it added. Cheap to copy; indexing and iteration cost nothing extra.
///
/// A view may be a *window*: the store loaded only the entries from `skipped` on (a compacted
/// thread's model sees nothing older than its newest summary's cut). Indexes stay those of the
/// whole history: [`HistoryView::len`] counts the skipped entries, [`HistoryView::get`] is `None`
/// for them, and iteration starts at the window.
#[derive(Debug, Clone, Copy)]
pub struct HistoryView<'a> {
    skipped: usize,
    earlier: &'a [std::sync::Arc<HistoryEntry>],
    newer: &'a [std::sync::Arc<HistoryEntry>],
}

impl<'a> HistoryView<'a> {
    /// `earlier` followed by `newer`.
    pub fn new(
        earlier: &'a [std::sync::Arc<HistoryEntry>],
        newer: &'a [std::sync::Arc<HistoryEntry>],
    ) -> Self {
        Self::window(0, earlier, newer)
    }

    /// `earlier` followed by `newer`, which start at index `skipped` of the whole history.
    pub fn window(
        skipped: usize,
        earlier: &'a [std::sync::Arc<HistoryEntry>],
        newer: &'a [std::sync::Arc<HistoryEntry>],
    ) -> Self {
        Self {
            skipped,
            earlier,
            newer,
        }
    }

    /// A view of one slice.
    pub fn from_slice(entries: &'a [std::sync::Arc<HistoryEntry>]) -> Self {
        Self::new(entries, &[])
    }

    /// Number of entries in the whole history, skipped ones included.
    pub fn len(&self) -> usize {
        self.skipped + self.earlier.len() + self.newer.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many of the oldest entries are not loaded (the index of the first one that is).
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// The entry at `index` (`None` past the end, or when it is skipped).
    pub fn get(&self, index: usize) -> Option<&'a std::sync::Arc<HistoryEntry>> {
        let index = index.checked_sub(self.skipped)?;
        match index.checked_sub(self.earlier.len()) {
            None => self.earlier.get(index),
            Some(i) => self.newer.get(i),
        }
    }

    /// The loaded entries, oldest first (the first is at index [`HistoryView::skipped`]).
    pub fn iter(
        &self,
    ) -> std::iter::Chain<
        std::slice::Iter<'a, std::sync::Arc<HistoryEntry>>,
        std::slice::Iter<'a, std::sync::Arc<HistoryEntry>>,
    > {
        self.earlier.iter().chain(self.newer.iter())
    }

    /// The loaded entries from index `start` on, oldest first.
    pub fn since(
        &self,
        start: usize,
    ) -> impl DoubleEndedIterator<Item = &'a std::sync::Arc<HistoryEntry>> {
        let start = start.saturating_sub(self.skipped);
        let (e, n) = if start <= self.earlier.len() {
            (&self.earlier[start..], self.newer)
        } else {
            let skip = (start - self.earlier.len()).min(self.newer.len());
            (&self.earlier[self.earlier.len()..], &self.newer[skip..])
        };
        e.iter().chain(n.iter())
    }

    /// Index of the newest loaded entry matching `pred`.
    pub fn rposition(&self, mut pred: impl FnMut(&HistoryEntry) -> bool) -> Option<usize> {
        self.newer
            .iter()
            .rposition(|e| pred(e))
            .map(|i| i + self.earlier.len())
            .or_else(|| self.earlier.iter().rposition(|e| pred(e)))
            .map(|i| i + self.skipped)
    }

    /// The entries as one vector (copies the pointers).
    pub fn to_vec(&self) -> Vec<std::sync::Arc<HistoryEntry>> {
        self.iter().cloned().collect()
    }
}
