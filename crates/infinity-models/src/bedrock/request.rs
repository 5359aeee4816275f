//! The Converse request body, written as bytes straight from our history, as the Anthropic body
//! is: the conversation arranged into [`Turns`] of borrowed blocks, then written into one
//! buffer ([`JsonBuf`]). The model id is not in the body; it is part of the URL.

use infinity_agent_core::history::summary_text;
use infinity_agent_core::model::CompletionRequest;

use crate::convert::{message_text, offered_tools, visible, CONVERSATION_START, NO_OUTPUT};
use crate::json::JsonBuf;
use crate::names::{wire_id, wire_name, MAX_BEDROCK_CALL_ID};
use crate::turns::{Block, Role, Turns};

/// What the injected tool says to the model.
const INJECTED_DESCRIPTION: &str =
    "Reserved: the runtime uses it to deliver events. Never call it.";

/// The Converse body for `request`, asking for at most `max_tokens`.
pub(super) fn body(max_tokens: u32, request: &CompletionRequest<'_>) -> Vec<u8> {
    let turns = Turns::from_history(request.history);
    // Room for what a typical block and tool take; a long tool result grows the buffer.
    let size = request.system.len() + 96 * turns.block_count() + 640 * request.tools.len();
    let mut json = JsonBuf::with_capacity(size);
    json.raw(r#"{"inferenceConfig":{"maxTokens":"#);
    json.number(max_tokens);
    // The cache point after the system prompt caches the stable prefix: tools and system.
    json.raw(r#"},"system":[{"text":"#);
    json.string(request.system);
    json.raw(r#"},{"cachePoint":{"type":"default"}}],"toolConfig":{"tools":"#);
    json.array(
        offered_tools(request, INJECTED_DESCRIPTION),
        |json, (name, description, schema)| {
            json.raw(r#"{"toolSpec":{"name":"#);
            json.string(&name);
            json.raw(r#","description":"#);
            json.string(description);
            json.raw(r#","inputSchema":{"json":"#);
            json.value(schema);
            json.raw("}}}");
        },
    );
    json.raw(r#"},"messages":["#);
    // Converse wants at least one message, and the first from the user.
    let start = turns
        .iter()
        .next()
        .is_none_or(|(role, _)| role == Role::Assistant);
    if start {
        json.raw(r#"{"role":"user","content":[{"text":"#);
        json.string(CONVERSATION_START);
        json.raw("}]}");
    }
    for (t, (role, blocks)) in turns.iter().enumerate() {
        if start || t > 0 {
            json.raw(",");
        }
        json.raw(match role {
            Role::User => r#"{"role":"user","content":"#,
            Role::Assistant => r#"{"role":"assistant","content":"#,
        });
        json.array(blocks, write_block);
        json.raw("}");
    }
    json.raw("]}");
    json.into_bytes()
}

/// A content block: Converse names a block's kind by its only key.
fn write_block(json: &mut JsonBuf, block: &Block<'_>) {
    match *block {
        Block::Text(text) => {
            json.raw(r#"{"text":"#);
            json.string(text);
        }
        Block::Message { text, from } => {
            json.raw(r#"{"text":"#);
            json.string(&message_text(text, from));
        }
        Block::Summary(text) => {
            json.raw(r#"{"text":"#);
            json.string(&summary_text(text));
        }
        Block::ToolUse(call) => {
            json.raw(r#"{"toolUse":{"toolUseId":"#);
            json.string(&wire_id(call.id.as_str(), MAX_BEDROCK_CALL_ID));
            json.raw(r#","name":"#);
            json.string(&wire_name(&call.name));
            // Any JSON value: Converse's input is a document, not only an object.
            json.raw(r#","input":"#);
            json.value(&call.args);
            json.raw("}");
        }
        Block::ToolResult {
            call_id,
            text,
            images,
            is_error,
        } => {
            json.raw(r#"{"toolResult":{"toolUseId":"#);
            json.string(&wire_id(call_id.as_str(), MAX_BEDROCK_CALL_ID));
            // The text unless it is blank (Converse refuses a blank text block), then a note
            // for each image: images reach Bedrock models as notes for now (docs/models.md).
            json.raw(r#","content":["#);
            let text = visible(text).or(images.is_empty().then_some(NO_OUTPUT));
            if let Some(text) = text {
                json.raw(r#"{"text":"#);
                json.string(text);
                json.raw("}");
            }
            for (i, image) in images.iter().enumerate() {
                if text.is_some() || i > 0 {
                    json.raw(",");
                }
                json.raw(r#"{"text":"#);
                json.string(&image.placeholder());
                json.raw("}");
            }
            json.raw("]");
            if is_error {
                json.raw(r#","status":"error""#);
            }
            json.raw("}");
        }
    }
    json.raw("}");
}
