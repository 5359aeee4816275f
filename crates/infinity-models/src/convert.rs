//! What every adapter converts alike.

use std::borrow::Cow;
use std::sync::LazyLock;

use infinity_agent_core::history::MessageSource;
use serde_json::{json, Value};

/// The arguments schema of a tool that takes none (the injected tool's).
pub(crate) static NO_ARGUMENTS: LazyLock<Value> =
    LazyLock::new(|| json!({"type": "object", "properties": {}}));

/// A message as the model reads it: a parent's message says who sent it.
pub(crate) fn message_text<'a>(text: &'a str, from: &MessageSource) -> Cow<'a, str> {
    match from {
        MessageSource::User => Cow::Borrowed(text),
        MessageSource::Parent { thread_id } => Cow::Owned(format!(
            "[Message from your parent thread {thread_id}]\n{text}"
        )),
    }
}
