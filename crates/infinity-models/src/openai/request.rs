//! The chat completions request, written as bytes straight from our history: each entry becomes
//! at most one chat message, written into one buffer as the history is walked (see
//! [`JsonBuf`]); neither a JSON tree nor a list of messages is built on the way.

use std::borrow::Cow;

use infinity_agent_core::history::{summary_text, Item, ToolCall};
use infinity_agent_core::ids::CallId;
use infinity_agent_core::model::CompletionRequest;

use crate::convert::{message_text, offered_tools, visible, NO_OUTPUT};
use crate::json::JsonBuf;
use crate::names::{wire_id, wire_name, MAX_OPENAI_CALL_ID};

/// What the injected tool says to the model.
const INJECTED_DESCRIPTION: &str =
    "Reserved: the runtime uses it to deliver events. Never call it.";

/// The request body for `request` to `model`.
pub(super) fn body(
    model: &str,
    max_completion_tokens: u32,
    request: &CompletionRequest<'_>,
) -> Vec<u8> {
    // Room for what a typical entry and tool take; a long tool result grows the buffer.
    let entries = request.history.iter().size_hint().0;
    let size = request.system.len() + 128 * entries + 640 * request.tools.len();
    let mut json = JsonBuf::with_capacity(size);
    json.raw(r#"{"model":"#);
    json.string(model);
    json.raw(r#","max_completion_tokens":"#);
    json.number(max_completion_tokens);
    json.raw(r#","messages":[{"role":"system","content":"#);
    json.string(request.system);
    json.raw("}");
    let mut arguments = JsonBuf::default();
    // The API wants an assistant message's tool calls answered by the messages right after it:
    // a message that arrived while calls were open waits until the last of them is answered.
    let mut open: Vec<&CallId> = Vec::new();
    let mut held: Vec<&Item> = Vec::new();
    for entry in request.history.iter() {
        let item = &entry.item;
        match item {
            Item::Message { .. } | Item::Summary { .. } if !open.is_empty() => {
                held.push(item);
                continue;
            }
            Item::ToolResult { call_id, .. } => open.retain(|id| *id != call_id),
            Item::Assistant { tool_calls, .. } => {
                // Calls left without a result (none in a thread the engine kept) are answered,
                // so that the request stays one the API takes.
                for call_id in open.drain(..) {
                    write_result(&mut json, call_id, NO_OUTPUT);
                }
                for held in held.drain(..) {
                    write_message(&mut json, held, &mut arguments);
                }
                open.extend(tool_calls.iter().map(|call| &call.id));
            }
            _ => {}
        }
        write_message(&mut json, item, &mut arguments);
        if open.is_empty() {
            for held in held.drain(..) {
                write_message(&mut json, held, &mut arguments);
            }
        }
    }
    for held in held {
        write_message(&mut json, held, &mut arguments);
    }
    json.raw(r#"],"tools":"#);
    json.array(
        offered_tools(request, INJECTED_DESCRIPTION),
        |json, (name, description, parameters)| {
            json.raw(r#"{"type":"function","function":{"name":"#);
            json.string(&name);
            json.raw(r#","description":"#);
            json.string(description);
            json.raw(r#","parameters":"#);
            json.value(parameters);
            json.raw("}}");
        },
    );
    json.raw(r#","stream":true,"stream_options":{"include_usage":true}}"#);
    json.into_bytes()
}

/// Appends, after a comma, the chat message for `item`; nothing for what the model does not see
/// (notices, empty turns). `arguments` is room to write a call's arguments in.
fn write_message(json: &mut JsonBuf, item: &Item, arguments: &mut JsonBuf) {
    match item {
        Item::Message { text, from } => {
            json.raw(r#",{"role":"user","content":"#);
            json.string(&message_text(text, from));
            json.raw("}");
        }
        Item::Assistant {
            text, tool_calls, ..
        } => {
            if tool_calls.is_empty() && text.as_deref().is_none_or(|t| t.trim().is_empty()) {
                return; // chat APIs reject a null content without tool calls
            }
            json.raw(r#",{"role":"assistant","content":"#);
            match text {
                Some(text) => json.string(text),
                None => json.raw("null"),
            }
            if !tool_calls.is_empty() {
                json.raw(r#","tool_calls":"#);
                json.array(tool_calls, |json, call| write_call(json, call, arguments));
            }
            json.raw("}");
        }
        Item::ToolResult {
            call_id,
            text,
            is_error,
            images,
            ..
        } => {
            // Chat completions take no images in tool messages: the model reads a note for
            // each, after the text unless it is blank.
            let content = if images.is_empty() {
                Cow::Borrowed(visible(text).unwrap_or(NO_OUTPUT))
            } else {
                let mut content = visible(text).unwrap_or_default().to_owned();
                for image in images {
                    if !content.is_empty() {
                        content.push('\n');
                    }
                    content.push_str(&image.placeholder());
                }
                Cow::Owned(content)
            };
            let content = if *is_error {
                Cow::Owned(format!("[error] {content}"))
            } else {
                content
            };
            write_result(json, call_id, &content);
        }
        Item::Summary { text, .. } => {
            json.raw(r#",{"role":"user","content":"#);
            json.string(&summary_text(text));
            json.raw("}");
        }
        Item::Notice { .. } => {}
    }
}

/// A tool call, its arguments as a string of JSON.
fn write_call(json: &mut JsonBuf, call: &ToolCall, arguments: &mut JsonBuf) {
    arguments.clear();
    arguments.value(&call.args);
    json.raw(r#"{"id":"#);
    json.string(&wire_id(call.id.as_str(), MAX_OPENAI_CALL_ID));
    json.raw(r#","type":"function","function":{"name":"#);
    json.string(&wire_name(&call.name));
    json.raw(r#","arguments":"#);
    json.string(arguments.as_str());
    json.raw("}}");
}

/// Appends, after a comma, the tool message answering `call_id` with `content`.
fn write_result(json: &mut JsonBuf, call_id: &CallId, content: &str) {
    json.raw(r#",{"role":"tool","tool_call_id":"#);
    json.string(&wire_id(call_id.as_str(), MAX_OPENAI_CALL_ID));
    json.raw(r#","content":"#);
    json.string(content);
    json.raw("}");
}
