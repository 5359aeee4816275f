//! Two application tools, written once and run by both hosts:
//!
//! - [`WordCount`] is **synchronous**: it answers inside the slice, and the model is asked again
//!   at once with the result.
//! - [`Pause`] is **passive**: it asks the host for a timer ([`ToolContext::wake_at`]) and
//!   returns [`ToolOutcome::Passive`]. Nothing waits for it: the thread yields, costs nothing
//!   until the timer (a tokio timer embedded; the relay queue or EventBridge Scheduler on
//!   Lambda), and a message that comes first wakes it at once.
//!
//! [`tools`] is what both binaries register: `src/bin/embedded.rs` gives them to
//! `AgentSystemBuilder::with_tool`, `src/bin/lambda.rs` to `AgentLambda::with_tool`.

use std::sync::Arc;

use infinity_agent_core::model::ToolSpec;
use infinity_agent_core::tools::{Tool, ToolContext, ToolOutcome};
use serde_json::{json, Value};

/// Counts the words of a text.
#[derive(Debug)]
pub struct WordCount;

impl Tool for WordCount {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "word_count",
            "Counts the words (whitespace-separated) of `text`.",
            json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The text."}},
                "required": ["text"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, _: &mut ToolContext<'_>) -> ToolOutcome {
        // The registry checked `args` against the schema before this runs.
        let text = args["text"].as_str().unwrap_or_default();
        let words = text.split_whitespace().count();
        ToolOutcome::ok(format!("{words} words"))
    }
}

/// The longest pause accepted.
pub const MAX_PAUSE_MINUTES: u64 = 7 * 24 * 60;

/// Pauses the thread for some minutes, to pick the work up later.
#[derive(Debug)]
pub struct Pause;

impl Tool for Pause {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "pause",
            "Pause this thread for `minutes` and resume then; a message wakes it earlier.",
            json!({
                "type": "object",
                "properties": {
                    "minutes": {"type": "integer", "minimum": 1, "maximum": MAX_PAUSE_MINUTES}
                },
                "required": ["minutes"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let minutes = args["minutes"].as_u64().unwrap_or(1);
        // Time comes from the slice (`ctx.now`), never from the clock: a replayed slice must do
        // the same thing.
        let Ok(due) = ctx
            .now
            .checked_add(jiff::SignedDuration::from_mins(minutes as i64))
        else {
            return ToolOutcome::error("Error: that pause ends beyond the supported dates.");
        };
        ctx.wake_at(due);
        ToolOutcome::Passive { due: Some(due) }
    }
}

/// The application's tools, for either host.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(WordCount), Arc::new(Pause)]
}

/// The Rust of docs/rust-api.md and docs/internal-tools.md, compiled (and run, where it can) as
/// doc tests, so the guides cannot drift from the API.
#[cfg(doctest)]
mod guides {
    #[doc = include_str!("../../../docs/rust-api.md")]
    struct RustApi;

    #[doc = include_str!("../../../docs/internal-tools.md")]
    struct InternalTools;
}
