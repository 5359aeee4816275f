//! The append-only history of a thread.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::ids::{CallId, InputId, ThreadId};

/// The name of the synthetic tool call the runtime uses to inject events (late results, child
/// reports, associative subscription events) into a conversation. Models may not call it.
pub const INJECTED_TOOL: &str = "receive_event__injected";

/// One entry of a thread's own history. Entries are never changed once committed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// Position in the thread's own history, from 0.
    pub seq: u64,
    /// When the entry was recorded.
    pub at: Timestamp,
    /// The input that produced this entry, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_id: Option<InputId>,
    /// What happened.
    pub item: Item,
}

/// A tool call as the model issued it (or as the runtime synthesized it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, unique within the thread tree.
    pub id: CallId,
    /// The tool's name.
    pub name: String,
    /// The arguments, a JSON object.
    pub args: serde_json::Value,
}

/// Where a text message came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

    /// The tool calls of an assistant turn (empty for other items).
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self {
            Item::Assistant { tool_calls, .. } => tool_calls,
            _ => &[],
        }
    }
}
