//! The Messages API request, written as bytes straight from our history: the conversation is
//! arranged into turns of blocks that borrow from its entries, then written into one buffer
//! (see [`JsonBuf`]); no JSON tree is built and none of the conversation's text is copied on
//! the way.

use infinity_agent_core::history::{
    summary_text, HistoryView, Image, Item, MessageSource, ToolCall, INJECTED_TOOL,
};
use infinity_agent_core::ids::CallId;
use infinity_agent_core::model::CompletionRequest;

use crate::convert::{message_text, NO_ARGUMENTS};
use crate::json::JsonBuf;

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
    let messages = Messages::from_history(request.history);
    // Room for what a typical block and tool take; a long tool result grows the buffer.
    let size = request.system.len() + 96 * messages.blocks.len() + 640 * request.tools.len();
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
    let injected = (INJECTED_TOOL, INJECTED_DESCRIPTION, &*NO_ARGUMENTS);
    let offered = request
        .tools
        .iter()
        .map(|t| (&*t.name, &*t.description, &t.input_schema));
    json.array(
        offered.chain([injected]),
        |json, (name, description, schema)| {
            json.raw(r#"{"name":"#);
            json.string(name);
            json.raw(r#","description":"#);
            json.string(description);
            json.raw(r#","input_schema":"#);
            json.value(schema);
            json.raw("}");
        },
    );
    json.raw(r#","messages":"#);
    messages.write(&mut json, settings.images);
    json.raw(r#","stream":true}"#);
    json.into_bytes()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    User,
    Assistant,
}

/// The conversation as turns: consecutive entries of one role merge into one turn (the API
/// wants roles to alternate). The blocks of every turn share one list, so the conversation
/// costs two allocations however long it is.
struct Messages<'a> {
    blocks: Vec<Block<'a>>,
    /// Each turn's role and the index of its first block; a turn runs to the next one's.
    turns: Vec<(Role, usize)>,
}

/// A content block of a turn, borrowed from the entry it comes from. Thin references
/// (`&String`, not `&str`) keep a block at 32 bytes: a long conversation's list of them is
/// written and read on every request.
#[derive(Clone, Copy)]
enum Block<'a> {
    Text(&'a String),
    Message {
        text: &'a String,
        from: &'a MessageSource,
    },
    Summary(&'a String),
    ToolUse(&'a ToolCall),
    ToolResult {
        call_id: &'a CallId,
        text: &'a String,
        images: &'a Vec<Image>,
        is_error: bool,
    },
}

impl<'a> Messages<'a> {
    /// Our history as Messages API turns. Notices are for people and are left out.
    fn from_history(history: HistoryView<'a>) -> Self {
        let max_blocks = max_blocks(history);
        let mut messages = Self {
            blocks: Vec::with_capacity(max_blocks),
            turns: Vec::with_capacity(max_blocks),
        };
        for entry in history.iter() {
            match &entry.item {
                Item::Message { text, from } => {
                    messages.push(Role::User, Block::Message { text, from });
                }
                Item::Assistant {
                    text, tool_calls, ..
                } => {
                    if let Some(text) = text.as_ref().filter(|t| !t.trim().is_empty()) {
                        messages.push(Role::Assistant, Block::Text(text));
                    }
                    for call in tool_calls {
                        messages.push(Role::Assistant, Block::ToolUse(call));
                    }
                }
                Item::ToolResult {
                    call_id,
                    text,
                    is_error,
                    images,
                    ..
                } => {
                    let result = Block::ToolResult {
                        call_id,
                        text,
                        images,
                        is_error: *is_error,
                    };
                    messages.push(Role::User, result);
                }
                Item::Summary { text, .. } => messages.push(Role::User, Block::Summary(text)),
                Item::Notice { .. } => {}
            }
        }
        messages
    }

    /// Adds `block` to the last turn when it has `role`, else as a new turn. Tool results go
    /// before anything else in their user turn, as the API requires.
    fn push(&mut self, role: Role, block: Block<'a>) {
        match self.turns.last() {
            Some(&(last, start)) if last == role => {
                if block.is_tool_result() {
                    let turn = &self.blocks[start..];
                    let at = start + turn.iter().take_while(|b| b.is_tool_result()).count();
                    self.blocks.insert(at, block);
                } else {
                    self.blocks.push(block);
                }
            }
            _ => {
                self.turns.push((role, self.blocks.len()));
                self.blocks.push(block);
            }
        }
    }

    /// Writes the turns. The conversation so far is cached: a breakpoint ends its last block,
    /// so the next slice re-reads everything up to here from the cache.
    fn write(&self, json: &mut JsonBuf, images_supported: bool) {
        let last = self.blocks.len().saturating_sub(1);
        let ends = self.turns.iter().skip(1).map(|&(_, start)| start);
        let ends = ends.chain([self.blocks.len()]);
        json.array(
            self.turns.iter().zip(ends),
            |json, (&(role, start), end)| {
                json.raw(match role {
                    Role::User => r#"{"role":"user","content":"#,
                    Role::Assistant => r#"{"role":"assistant","content":"#,
                });
                json.array(start..end, |json, i| {
                    self.blocks[i].write(json, images_supported, i == last);
                });
                json.raw("}");
            },
        );
    }
}

impl Block<'_> {
    fn is_tool_result(&self) -> bool {
        matches!(self, Block::ToolResult { .. })
    }

    fn write(&self, json: &mut JsonBuf, images_supported: bool, cache_breakpoint: bool) {
        match *self {
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
                json.string(&call.name);
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
                    json.string(text);
                } else {
                    // The text, then each image: an image block, or for a model that reads no
                    // images the note that stands for it.
                    json.raw(r#"[{"type":"text","text":"#);
                    json.string(text);
                    json.raw("}");
                    for image in images {
                        if images_supported {
                            json.raw(r#",{"type":"image","source":{"type":"base64","media_type":"#);
                            json.string(&image.media_type);
                            json.raw(r#","data":"#);
                            json.string(&image.data);
                            json.raw("}}");
                        } else {
                            json.raw(r#",{"type":"text","text":"#);
                            json.string(&image.placeholder());
                            json.raw("}");
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
}

/// At most how many blocks `history` becomes: one per message, result and summary, one per
/// model turn's text and one per call. Counting first lets the blocks go into a list made once
/// at its final size.
fn max_blocks(history: HistoryView<'_>) -> usize {
    history
        .iter()
        .map(|entry| match &entry.item {
            Item::Assistant { tool_calls, .. } => 1 + tool_calls.len(),
            Item::Notice { .. } => 0,
            _ => 1,
        })
        .sum()
}
