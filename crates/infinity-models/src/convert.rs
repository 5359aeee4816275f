//! What every adapter converts alike.

use std::borrow::Cow;
use std::sync::LazyLock;

use infinity_agent_core::history::{Image, MessageSource};
use serde_json::{json, Value};

use crate::names::wire_name;

/// The arguments schema of a tool that takes none (the injected tool's).
pub(crate) static NO_ARGUMENTS: LazyLock<Value> =
    LazyLock::new(|| json!({"type": "object", "properties": {}}));

/// The tools a request offers, then the one the runtime delivers events through (described as
/// `injected_description`), as `(name, description, input schema)`; each name as the providers
/// take it ([`wire_name`]).
pub(crate) fn offered_tools<'r>(
    request: &'r infinity_agent_core::model::CompletionRequest<'_>,
    injected_description: &'static str,
) -> impl Iterator<Item = (Cow<'r, str>, &'r str, &'r Value)> {
    let injected = (
        Cow::Borrowed(infinity_agent_core::history::INJECTED_TOOL),
        injected_description,
        &*NO_ARGUMENTS,
    );
    request
        .tools
        .iter()
        .map(|t| (wire_name(&t.name), &*t.description, &t.input_schema))
        .chain([injected])
}

/// What the model reads for a message that is empty or only whitespace (Anthropic and Bedrock
/// refuse a blank text block; a thread's history may still hold such a message).
pub(crate) const BLANK_MESSAGE: &str = "(an empty message)";

/// What the model reads for a tool result with no text and no images.
pub(crate) const NO_OUTPUT: &str = "(no output)";

/// The user turn that leads a conversation that would otherwise start with a model turn or be
/// empty: Anthropic needs a message at least, Bedrock one from the user first.
pub(crate) const CONVERSATION_START: &str = "(the conversation starts here)";

/// The image types Anthropic and Bedrock read (Anthropic's `media_type`, Bedrock's
/// `ImageFormat` after `image/`); another type is left out with a note saying so.
pub(crate) const IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// `text` unless it is blank.
pub(crate) fn visible(text: &str) -> Option<&str> {
    Some(text).filter(|t| !t.trim().is_empty())
}

/// A message as the model reads it: a parent's message says who sent it; a blank one says it
/// is empty.
pub(crate) fn message_text<'a>(text: &'a str, from: &MessageSource) -> Cow<'a, str> {
    let text = visible(text).unwrap_or(BLANK_MESSAGE);
    match from {
        MessageSource::User => Cow::Borrowed(text),
        MessageSource::Parent { thread_id } => Cow::Owned(format!(
            "[Message from your parent thread {thread_id}]\n{text}"
        )),
    }
}

/// How an image reaches a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ImagePart<'a> {
    /// As an image of this type (one of [`IMAGE_TYPES`]).
    Image(&'a str),
    /// As this note.
    Note(String),
}

/// How `image` reaches a model of `provider` that reads images when `reads_images`: an image
/// of a type it takes, else a note saying what was left out and why.
pub(crate) fn image_part<'a>(
    image: &'a Image,
    provider: &str,
    reads_images: bool,
) -> ImagePart<'a> {
    if !reads_images {
        return ImagePart::Note(image.placeholder());
    }
    match IMAGE_TYPES.iter().find(|t| **t == image.media_type) {
        Some(media_type) => ImagePart::Image(media_type),
        None => ImagePart::Note(format!(
            "[image: {}, not shown: {provider} reads only JPEG, PNG, GIF and WebP images]",
            image.media_type
        )),
    }
}
