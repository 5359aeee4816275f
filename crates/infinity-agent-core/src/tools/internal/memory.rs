//! The `memory` category: `memory_set(key, value)`, `memory_get(key)`, `memory_getall()`.
//!
//! Scratch notes for one conversation: the root thread and all its children share them. They
//! live on the root thread's record (durable across slices and restarts). A child reads the
//! notes as they stood when its slice began (plus its own writes), and its writes reach the root
//! as `memory_write` inputs.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::effect::Effect;
use crate::ids::InputId;
use crate::input::{Input, InputBody};
use crate::model::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolOutcome};

/// A conversation's notes.
pub type Memory = BTreeMap<String, String>;

/// The longest key, in characters.
pub const MAX_KEY_CHARS: usize = 100;
/// The longest value, in characters.
pub const MAX_VALUE_CHARS: usize = 10_000;
/// The most keys.
pub const MAX_KEYS: usize = 200;

fn spec(name: &str, description: &str, schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: schema,
    }
}

/// Applies a write, or says why it is refused.
pub fn write(memory: &mut Memory, key: &str, value: &str) -> Result<(), String> {
    if key.is_empty() || key.chars().count() > MAX_KEY_CHARS {
        return Err(format!("a key must be 1 to {MAX_KEY_CHARS} characters"));
    }
    if value.chars().count() > MAX_VALUE_CHARS {
        return Err(format!(
            "the value is {} characters; the most a note holds is {MAX_VALUE_CHARS}",
            value.chars().count()
        ));
    }
    if !memory.contains_key(key) && memory.len() >= MAX_KEYS {
        return Err(format!(
            "memory holds {MAX_KEYS} notes already; overwrite one or store less"
        ));
    }
    memory.insert(key.to_owned(), value.to_owned());
    Ok(())
}

#[derive(Debug)]
pub(super) struct MemorySet;

impl Tool for MemorySet {
    fn spec(&self) -> ToolSpec {
        spec(
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
        if let Err(why) = write(&mut ctx.conversation.memory, key, value) {
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
        spec(
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
        spec(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_bounded_with_reasons() {
        let mut m = Memory::new();
        assert!(write(&mut m, "", "x").unwrap_err().contains("1 to 100"));
        assert!(write(&mut m, "k", &"x".repeat(MAX_VALUE_CHARS + 1))
            .unwrap_err()
            .contains("10000"));
        for i in 0..MAX_KEYS {
            write(&mut m, &format!("k{i}"), "v").unwrap();
        }
        assert!(write(&mut m, "one more", "v")
            .unwrap_err()
            .contains("200 notes"));
        write(&mut m, "k0", "overwrite is fine").unwrap();
    }
}
