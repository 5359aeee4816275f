//! What every adapter converts alike.

use std::borrow::Cow;
use std::sync::LazyLock;

use infinity_agent_core::history::MessageSource;
use serde_json::{json, Value};

/// The arguments schema of a tool that takes none (the injected tool's).
pub(crate) static NO_ARGUMENTS: LazyLock<Value> =
    LazyLock::new(|| json!({"type": "object", "properties": {}}));

/// The tools a request offers, then the one the runtime delivers events through (described as
/// `injected_description`), as `(name, description, input schema)`.
pub(crate) fn offered_tools<'r>(
    request: &'r infinity_agent_core::model::CompletionRequest<'_>,
    injected_description: &'static str,
) -> impl Iterator<Item = (&'r str, &'r str, &'r Value)> {
    let injected = (
        infinity_agent_core::history::INJECTED_TOOL,
        injected_description,
        &*NO_ARGUMENTS,
    );
    request
        .tools
        .iter()
        .map(|t| (&*t.name, &*t.description, &t.input_schema))
        .chain([injected])
}

/// A message as the model reads it: a parent's message says who sent it.
pub(crate) fn message_text<'a>(text: &'a str, from: &MessageSource) -> Cow<'a, str> {
    match from {
        MessageSource::User => Cow::Borrowed(text),
        MessageSource::Parent { thread_id } => Cow::Owned(format!(
            "[Message from your parent thread {thread_id}]\n{text}"
        )),
    }
}
