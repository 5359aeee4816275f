//! The checks of a call's arguments against its tool's schema, and why a call is refused before
//! it runs: shared by the registry and the tools that call others (`meta`'s `use_tool`).

use super::clip;
use crate::history::INJECTED_TOOL;
use crate::model::ToolSpec;

/// Where `value` breaks `validator`'s schema: at most five problems, each clipped (a message
/// quotes the offending value, and a large one must not flood the conversation) and placed by
/// its path. Empty when the value is valid.
pub(crate) fn schema_problems(
    validator: &jsonschema::Validator,
    value: &serde_json::Value,
) -> Vec<String> {
    validator
        .iter_errors(value)
        .take(5)
        .map(|e| {
            let message = clip(&e.to_string(), 200);
            let path = e.instance_path().to_string();
            if path.is_empty() {
                message
            } else {
                format!("at `{path}`: {message}")
            }
        })
        .collect()
}

/// What is wrong with `args` by `validator` (compiled from `schema`), or `None` when they are
/// valid: what breaks the schema, then the schema (clipped).
pub fn argument_problems(
    validator: &jsonschema::Validator,
    args: &serde_json::Value,
    schema: &serde_json::Value,
) -> Option<String> {
    let problems = schema_problems(validator, args);
    if problems.is_empty() {
        return None;
    }
    Some(format!(
        "{}. Expected arguments matching the schema {}",
        problems.join("; "),
        clip(&schema.to_string(), 1_000)
    ))
}

/// Why a call was refused before it ran ([`crate::tools::OfferedTools::check`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallRejection {
    /// No tool has the name.
    Unknown(String),
    /// The tool is not offered to the calling thread (what it says instead).
    NotOffered(String),
    /// The name is reserved for events the runtime injects.
    Reserved,
    /// The arguments break the tool's schema (what is wrong).
    BadArguments(String),
}

impl CallRejection {
    /// What the model is told: the tool result of the refused call.
    pub fn message(&self, name: &str, available: &[ToolSpec]) -> String {
        match self {
            CallRejection::Unknown(n) => {
                let names: Vec<&str> = available.iter().map(|s| s.name.as_str()).collect();
                format!(
                    "Error: there is no tool named `{n}`. Available tools: {}.",
                    names.join(", ")
                )
            }
            CallRejection::NotOffered(text) => text.clone(),
            CallRejection::Reserved => format!(
                "Error: `{INJECTED_TOOL}` is reserved for events the runtime injects; it cannot be called."
            ),
            CallRejection::BadArguments(why) => {
                format!("Error: invalid arguments for `{name}`: {why}")
            }
        }
    }
}
