//! The Messages API request, written as bytes straight from our history: the conversation is
//! arranged into turns of blocks that borrow from its entries ([`Turns`]), then written into one
//! buffer (see [`JsonBuf`]); no JSON tree is built and none of the conversation's text is copied
//! on the way.

use infinity_agent_core::history::summary_text;
use infinity_agent_core::model::CompletionRequest;

use crate::convert::{
    image_part, message_text, offered_tools, visible, ImagePart, CONVERSATION_START, NO_OUTPUT,
};
use crate::json::JsonBuf;
use crate::names::wire_name;
use crate::turns::{Block, Role, Turns};

/// What the injected tool says to the model.
const INJECTED_DESCRIPTION: &str = "Reserved: the runtime uses it to deliver events (late \
    results, reports, subscription events). Never call it.";

/// A prompt-cache breakpoint, at the end of the block it ends.
const CACHE_BREAKPOINT: &str = r#","cache_control":{"type":"ephemeral"}"#;

/// A model's settings for one request.
#[derive(Debug, Clone, Copy)]
pub(super) struct Settings<'a> {
    pub model: &'a str,
    pub max_tokens: u32,
    /// Whether the model reads images (otherwise it reads a note in their place).
    pub images: bool,
}

/// The request body for `request`.
pub(super) fn body(settings: Settings<'_>, request: &CompletionRequest<'_>) -> Vec<u8> {
    let turns = Turns::from_history(request.history);
    // Room for what a typical block and tool take; a long tool result grows the buffer.
    let size = request.system.len() + 96 * turns.block_count() + 640 * request.tools.len();
    let mut json = JsonBuf::with_capacity(size);
    json.raw(r#"{"model":"#);
    json.string(settings.model);
    json.raw(r#","max_tokens":"#);
    json.number(settings.max_tokens);
    // The breakpoint on the system prompt caches the stable prefix: tools and system.
    json.raw(r#","system":[{"type":"text","text":"#);
    json.string(request.system);
    json.raw(CACHE_BREAKPOINT);
    json.raw(r#"}],"tools":"#);
    json.array(
        offered_tools(request, INJECTED_DESCRIPTION),
        |json, (name, description, schema)| {
            json.raw(r#"{"name":"#);
            json.string(&name);
            json.raw(r#","description":"#);
            json.string(description);
            json.raw(r#","input_schema":"#);
            json.value(schema);
            json.raw("}");
        },
    );
    json.raw(r#","messages":"#);
    write_messages(&mut json, &turns, settings.images);
    json.raw(r#","stream":true}"#);
    json.into_bytes()
}

/// Writes the turns. The conversation so far is cached: a breakpoint ends its last block, so
/// the next slice re-reads everything up to here from the cache.
fn write_messages(json: &mut JsonBuf, turns: &Turns<'_>, images_supported: bool) {
    json.raw("[");
    // The API wants at least one message, and the first from the user.
    let start = turns
        .iter()
        .next()
        .is_none_or(|(role, _)| role == Role::Assistant);
    if start {
        json.raw(r#"{"role":"user","content":"#);
        json.string(CONVERSATION_START);
        json.raw("}");
    }
    let last_turn = turns.turn_count().saturating_sub(1);
    for (t, (role, blocks)) in turns.iter().enumerate() {
        if start || t > 0 {
            json.raw(",");
        }
        write_turn(json, role, blocks, images_supported, t == last_turn);
    }
    json.raw("]");
}

/// Writes a turn of `role`'s `blocks`; its last block ends with a cache breakpoint when
/// `breakpoint`.
fn write_turn(
    json: &mut JsonBuf,
    role: Role,
    blocks: &[Block<'_>],
    images_supported: bool,
    breakpoint: bool,
) {
    json.raw(match role {
        Role::User => r#"{"role":"user","content":"#,
        Role::Assistant => r#"{"role":"assistant","content":"#,
    });
    let last_block = blocks.len().saturating_sub(1);
    json.array(blocks.iter().enumerate(), |json, (i, block)| {
        write_block(json, block, images_supported, breakpoint && i == last_block);
    });
    json.raw("}");
}

/// Writes `block`, a cache breakpoint at its end when asked.
fn write_block(
    json: &mut JsonBuf,
    block: &Block<'_>,
    images_supported: bool,
    cache_breakpoint: bool,
) {
    match *block {
        Block::Text(text) => {
            json.raw(r#"{"type":"text","text":"#);
            json.string(text);
        }
        Block::Message { text, from } => {
            json.raw(r#"{"type":"text","text":"#);
            json.string(&message_text(text, from));
        }
        Block::Summary(text) => {
            json.raw(r#"{"type":"text","text":"#);
            json.string(&summary_text(text));
        }
        Block::ToolUse(call) => {
            json.raw(r#"{"type":"tool_use","id":"#);
            json.string(call.id.as_str());
            json.raw(r#","name":"#);
            json.string(&wire_name(&call.name));
            json.raw(r#","input":"#);
            if call.args.is_object() {
                json.value(&call.args);
            } else {
                json.raw("{}"); // the API takes objects only
            }
        }
        Block::ToolResult {
            call_id,
            text,
            images,
            is_error,
        } => {
            json.raw(r#"{"type":"tool_result","tool_use_id":"#);
            json.string(call_id.as_str());
            json.raw(r#","content":"#);
            if images.is_empty() {
                json.string(visible(text).unwrap_or(NO_OUTPUT));
            } else {
                // The text unless it is blank (the API refuses a blank text block), then each
                // image: an image block of a type the API takes, or the note that stands for it.
                json.raw("[");
                let text = visible(text);
                if let Some(text) = text {
                    json.raw(r#"{"type":"text","text":"#);
                    json.string(text);
                    json.raw("}");
                }
                for (i, image) in images.iter().enumerate() {
                    if text.is_some() || i > 0 {
                        json.raw(",");
                    }
                    match image_part(image, "Anthropic", images_supported) {
                        ImagePart::Image(media_type) => {
                            json.raw(r#"{"type":"image","source":{"type":"base64","media_type":"#);
                            json.string(media_type);
                            json.raw(r#","data":"#);
                            json.string(&image.data);
                            json.raw("}}");
                        }
                        ImagePart::Note(note) => {
                            json.raw(r#"{"type":"text","text":"#);
                            json.string(&note);
                            json.raw("}");
                        }
                    }
                }
                json.raw("]");
            }
            if is_error {
                json.raw(r#","is_error":true"#);
            }
        }
    }
    if cache_breakpoint {
        json.raw(CACHE_BREAKPOINT);
    }
    json.raw("}");
}
