//! The chat completions request, written as bytes straight from our history: each entry becomes
//! at most one chat message, written into one buffer as the history is walked (see
//! [`JsonBuf`]); neither a JSON tree nor a list of messages is built on the way.

use std::borrow::Cow;

use infinity_agent_core::history::{summary_text, Item, ToolCall};
use infinity_agent_core::model::CompletionRequest;

use crate::convert::{message_text, offered_tools};
use crate::json::JsonBuf;

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
    for entry in request.history.iter() {
        write_message(&mut json, &entry.item, &mut arguments);
    }
    json.raw(r#"],"tools":"#);
    json.array(
        offered_tools(request, INJECTED_DESCRIPTION),
        |json, (name, description, parameters)| {
            json.raw(r#"{"type":"function","function":{"name":"#);
            json.string(name);
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
            let mut content = if *is_error {
                Cow::Owned(format!("[error] {text}"))
            } else {
                Cow::Borrowed(text.as_str())
            };
            // Chat completions take no images in tool messages: the model reads a note.
            for image in images {
                let content = content.to_mut();
                content.push('\n');
                content.push_str(&image.placeholder());
            }
            json.raw(r#",{"role":"tool","tool_call_id":"#);
            json.string(call_id.as_str());
            json.raw(r#","content":"#);
            json.string(&content);
            json.raw("}");
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
    json.string(call.id.as_str());
    json.raw(r#","type":"function","function":{"name":"#);
    json.string(&call.name);
    json.raw(r#","arguments":"#);
    json.string(arguments.as_str());
    json.raw("}}");
}
