//! The `memory` category: `memory_set(key, value)`, `memory_get(key)`, `memory_getall()`.
//!
//! Scratch notes for one conversation: the root thread and all its children share them. They
//! live on the root thread's record (durable across slices and restarts). A child reads the
//! notes as they stood when its slice began (plus its own writes), and its writes reach the root
//! as `memory_write` inputs.

use serde_json::{json, Value};

use crate::effect::Effect;
use crate::ids::InputId;
use crate::input::{Input, InputBody};
use crate::model::ToolSpec;
use crate::state::memory_write;
use crate::tools::{Tool, ToolContext, ToolOutcome};

#[derive(Debug)]
pub(super) struct MemorySet;

impl Tool for MemorySet {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "memory_set",
            "Store a note under a key, shared by every thread of this conversation.",
            json!({
                "type": "object",
                "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
                "required": ["key", "value"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let key = args["key"].as_str().unwrap_or_default();
        let value = args["value"].as_str().unwrap_or_default();
        if let Err(why) = memory_write(&mut ctx.conversation.memory, key, value) {
            return ToolOutcome::error(format!("Error: {why}."));
        }
        if !ctx.record.is_root() {
            let root = ctx.record.root().clone();
            ctx.emit(Effect::Send {
                input: Input {
                    id: InputId::derived(ctx.call.id.as_str(), "memory"),
                    thread_id: root,
                    body: InputBody::MemoryWrite {
                        key: key.to_owned(),
                        value: value.to_owned(),
                    },
                },
            });
        }
        ToolOutcome::ok(format!("Stored `{key}`."))
    }
}

#[derive(Debug)]
pub(super) struct MemoryGet;

impl Tool for MemoryGet {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "memory_get",
            "Read the note stored under a key.",
            json!({
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "required": ["key"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let key = args["key"].as_str().unwrap_or_default();
        match ctx.conversation.memory.get(key) {
            Some(value) => ToolOutcome::ok(value.clone()),
            None => ToolOutcome::ok(format!("There is no note under `{key}`.")),
        }
    }
}

#[derive(Debug)]
pub(super) struct MemoryGetAll;

impl Tool for MemoryGetAll {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "memory_getall",
            "Read every note of this conversation.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
    }

    fn call(&self, _args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        if ctx.conversation.memory.is_empty() {
            return ToolOutcome::ok("There are no notes yet.");
        }
        ToolOutcome::ok(serde_json::to_string_pretty(&ctx.conversation.memory).unwrap_or_default())
    }
}
