//! Tool names and call ids as the providers take them.
//!
//! Our tools may have names no provider takes: RAP allows 128 characters, other tools any. The
//! three APIs take `^[a-zA-Z0-9_-]{1,64}$` (Anthropic's tool definitions, OpenAI's function
//! names, Bedrock's `ToolName`). A name they take is sent as it is; any other is sent as
//! [`wire_name`]: its characters outside that set made `_`, cut to leave room for `_` and a
//! hash of the whole original name. The mapping is a pure function of the name, so it is the
//! same in every request of a thread (the prompt cache holds), two names that share a long
//! prefix stay apart (their hashes differ), and a call that comes back is mapped to our name
//! by [`restore_tool_names`]; the history keeps our names.
//!
//! Call ids are ours (`[A-Za-z0-9_-]`, up to 128 characters); OpenAI takes 40 at most and
//! Bedrock 64, so a longer id is cut the same way ([`wire_id`]), the same in a call and in its
//! result.

use std::borrow::Cow;

use infinity_agent_core::model::{CompletionRequest, ModelToolCall};

/// The longest tool name the providers take.
pub(crate) const MAX_TOOL_NAME: usize = 64;

/// The longest call id OpenAI takes (it answers longer ones with `string_above_max_length`).
pub(crate) const MAX_OPENAI_CALL_ID: usize = 40;

/// The longest call id Bedrock takes (its `ToolUseId` shape).
pub(crate) const MAX_BEDROCK_CALL_ID: usize = 64;

/// Hex digits of the hash that ends a changed name: 64 bits.
const HASH_DIGITS: usize = 16;

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// `name` as the providers take it: itself when it is 1 to 64 of `[a-zA-Z0-9_-]`, else its
/// allowed characters (others made `_`) cut to 47, `_`, and 16 hex digits of its hash.
pub(crate) fn wire_name(name: &str) -> Cow<'_, str> {
    if !name.is_empty() && name.len() <= MAX_TOOL_NAME && name.chars().all(allowed) {
        return Cow::Borrowed(name);
    }
    let prefix: String = name
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(MAX_TOOL_NAME - 1 - HASH_DIGITS)
        .collect();
    Cow::Owned(format!("{prefix}_{:016x}", fnv1a(name)))
}

/// `id` for a provider that takes ids of at most `max` characters: itself when it fits, else
/// cut with a hash of the whole id at its end. Call ids hold only `[A-Za-z0-9_-]`.
pub(crate) fn wire_id(id: &str, max: usize) -> Cow<'_, str> {
    if id.len() <= max {
        return Cow::Borrowed(id);
    }
    let keep = max.saturating_sub(1 + HASH_DIGITS);
    // Ids are ASCII, so any byte is a character boundary; `get` keeps that an assumption
    // checked rather than a panic.
    let prefix = id.get(..keep).unwrap_or_default();
    Cow::Owned(format!("{prefix}_{:016x}", fnv1a(id)))
}

/// Gives each call our name for the tool it names: a name the provider was sent in place of
/// one of the request's tools' becomes that tool's name; others are left as they came.
pub(crate) fn restore_tool_names(request: &CompletionRequest<'_>, calls: &mut [ModelToolCall]) {
    for call in calls {
        if request.tools.iter().any(|tool| tool.name == call.name) {
            continue;
        }
        if let Some(tool) = request
            .tools
            .iter()
            .find(|tool| wire_name(&tool.name) == call.name.as_str())
        {
            call.name.clone_from(&tool.name);
        }
    }
}

/// FNV-1a, 64 bits: the same in every process and version, unlike the standard library's
/// hasher.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn takes(name: &str) -> bool {
        (1..=MAX_TOOL_NAME).contains(&name.len()) && name.chars().all(allowed)
    }

    #[test]
    fn names_the_providers_take_are_sent_as_they_are() {
        for name in ["get_weather", "a", "x-y_Z9", &"n".repeat(64)] {
            assert_eq!(wire_name(name), name);
        }
    }

    #[test]
    fn other_names_become_names_they_take_and_stay_apart() {
        let toolset = "acme_inventory_service__";
        let long_a = format!("{toolset}{}_list_every_warehouse", "x".repeat(60));
        let long_b = format!("{toolset}{}_list_every_supplier", "x".repeat(60));
        for name in [&long_a, &long_b, "files.read", "", "météo", &"é".repeat(40)] {
            let wire = wire_name(name);
            assert!(takes(&wire), "{name:?} -> {wire:?}");
            assert_ne!(wire, name);
        }
        assert_ne!(wire_name(&long_a), wire_name(&long_b));
        assert_ne!(wire_name("files.read"), wire_name("files_read"));
        assert!(wire_name("files.read").starts_with("files_read_"));
        // The same name maps the same every time (a pinned value: the hash must not change
        // between versions, or a thread's cached prompt would no longer match).
        assert_eq!(wire_name("files.read"), "files_read_d5ab421fd0376a62");
    }

    #[test]
    fn long_ids_are_cut_with_a_hash() {
        let id = format!("call_{}", "a".repeat(100));
        let other = format!("call_{}b", "a".repeat(99));
        assert_eq!(wire_id("call_1", MAX_OPENAI_CALL_ID), "call_1");
        for max in [MAX_OPENAI_CALL_ID, MAX_BEDROCK_CALL_ID] {
            let wire = wire_id(&id, max);
            assert_eq!(wire.len(), max, "{wire}");
            assert_ne!(wire, wire_id(&other, max));
        }
    }
}
