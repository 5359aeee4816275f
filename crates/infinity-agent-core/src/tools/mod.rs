//! Tools: the [`Tool`] trait, the registry that validates calls, and the built-in tools.
//!
//! A tool runs in one of three ways, chosen per call by what [`Tool::call`] returns:
//! - synchronously: it returns [`ToolOutcome::Result`], the result goes into the history at once
//!   and the engine loops back to the model;
//! - dispatched: it emits effects and returns [`ToolOutcome::Dispatched`]; the result comes back
//!   later as a `tool_result` input and the next completion waits for it;
//! - passive: a sleep. It returns [`ToolOutcome::Passive`]; nothing waits for it, new input wakes
//!   the thread at once, and the sleep's own result is appended when it arrives.
//!
//! Tools of tool servers are registry tools like the others ([`servers::ServerTool`]): the
//! registry checks their arguments and they dispatch.

pub mod approval;
mod arguments;
pub(crate) mod builtin;
pub mod client;
pub mod internal;
mod registry;
pub mod servers;
mod set_title;
pub mod wake_if;

use std::fmt;

use jiff::Timestamp;

pub(crate) use arguments::schema_problems;
pub use arguments::{argument_problems, CallRejection};
pub use builtin::schedule::create as create_schedule;
pub use builtin::{builtin_tools, BUILTIN_TOOL_NAMES};
pub use registry::{OfferedTools, RegistryError, ToolRegistry};
pub use set_title::SetTitle;

use crate::effect::{Effect, OutputKind, ServerTarget, ToolInvocation};
use crate::history::{HistoryView, ToolCall};
use crate::ids::{IdSource, InputId};
use crate::input::{Input, InputBody};
use crate::model::ToolSpec;
use crate::state::{Conversation, ThreadRecord};

/// The error result of a call that would start a thread past the conversation's hourly limit
/// (`thread_spawn`, `agent`).
pub(crate) fn threads_exhausted() -> String {
    "Error: this conversation has started as many threads this hour as its agent allows \
     (limits.conversation_threads_per_hour). Do the work in this thread, or wait."
        .to_owned()
}

/// `text` cut to at most `max` characters, marked with `…` when cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

/// What a tool call did.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// Finished now with this result.
    Result {
        /// The result text.
        text: String,
        /// True when the call failed.
        is_error: bool,
    },
    /// Handed off; the result arrives later as a `tool_result` input.
    Dispatched,
    /// Finished now with this result, and the turn ends: no further completion runs until new
    /// input arrives (`finish`).
    EndTurn {
        /// The result text.
        text: String,
    },
    /// A sleep; the result arrives later (a timer) or never (woken by input).
    Passive {
        /// When the timer falls due, if there is one.
        due: Option<Timestamp>,
    },
}

impl ToolOutcome {
    /// A successful result.
    pub fn ok(text: impl Into<String>) -> Self {
        ToolOutcome::Result {
            text: text.into(),
            is_error: false,
        }
    }

    /// A failed result; the model sees the text and can correct itself.
    pub fn error(text: impl Into<String>) -> Self {
        ToolOutcome::Result {
            text: text.into(),
            is_error: true,
        }
    }
}

/// What a tool may see and change while it runs.
pub struct ToolContext<'a> {
    /// The slice's clock.
    pub now: Timestamp,
    /// The calling thread's record; tools may change it (title, children, subscriptions).
    pub record: &'a mut ThreadRecord,
    /// The thread's history as it stands (inherited entries, then its own).
    pub view: HistoryView<'a>,
    /// The call being run.
    pub call: &'a ToolCall,
    /// What the conversation's threads share (the `memory` notes, running delegations): the
    /// root's own, or for a child the root's as the slice began plus the child's changes.
    pub conversation: &'a mut Conversation,
    /// How many more threads the conversation may start this hour (its
    /// `limits.conversation_threads_per_hour`); a tool that starts one refuses at 0.
    pub threads_left: u32,
    /// Where fresh ids come from (never mint one at random: a seeded run must replay).
    pub ids: &'a mut dyn IdSource,
    pub(crate) effects: &'a mut Vec<Effect>,
    /// The host's library (knowledge, the meta catalog); `None` when it keeps none.
    pub library: Option<&'a crate::library::Library>,
    /// The tools this thread is offered (the agent's and its conversation's), for
    /// `execute_tool`.
    pub offered: OfferedTools<'a>,
}

impl fmt::Debug for ToolContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("thread", &self.record.id)
            .field("call", &self.call.id)
            .finish_non_exhaustive()
    }
}

impl ToolContext<'_> {
    /// Asks the host to do something after the commit.
    pub fn emit(&mut self, effect: Effect) {
        self.effects.push(effect);
    }

    /// Dispatches this call to the tool `tool` of the server `target`, with `args` (already
    /// checked): performed after the commit; the result arrives as a `tool_result` input.
    pub fn dispatch(&mut self, target: ServerTarget, tool: &str, args: serde_json::Value) {
        let notify_key = self
            .record
            .notify_keys
            .get(target.base_url.trim_end_matches('/'))
            .cloned();
        let invocation = ToolInvocation {
            thread_id: self.record.id.clone(),
            lineage: self.record.lineage.clone(),
            call_id: self.call.id.clone(),
            tool: tool.to_owned(),
            args,
            server: Some(target),
            notify_key,
        };
        self.emit(Effect::Dispatch { invocation });
    }

    /// Shows an event to the user.
    pub fn output(&mut self, kind: OutputKind) {
        self.effects
            .push(Effect::output(&self.record.id, self.now, kind));
    }

    /// Arranges this call's timer, for a passive tool (one that returns
    /// [`ToolOutcome::Passive`] with `due: Some(due)`): the host delivers a `timer_wake_up`
    /// input for the call at `due`, on whichever host runs the thread (a tokio timer embedded;
    /// the relay queue or EventBridge Scheduler on AWS), and the user sees the thread sleeping.
    /// The input's id comes from the call, so a replayed slice arranges the same timer.
    pub fn wake_at(&mut self, due: Timestamp) {
        let input = Input {
            id: InputId::derived(self.call.id.as_str(), "wake"),
            thread_id: self.record.id.clone(),
            body: InputBody::TimerWakeUp {
                call_id: self.call.id.clone(),
            },
        };
        self.effects.push(Effect::SendAt { input, due });
        self.output(OutputKind::Sleeping {
            call_id: self.call.id.clone(),
            until: Some(due),
        });
    }

    /// Sends this call's result back to this thread through the input queue.
    pub fn send_own_result(&mut self, text: impl Into<String>) {
        let input = Input {
            id: InputId::derived(self.call.id.as_str(), "result"),
            thread_id: self.record.id.clone(),
            body: InputBody::tool_result(self.call.id.clone(), text),
        };
        self.effects.push(Effect::Send { input });
    }
}

/// A tool an agent can call. Give it to [`crate::runtime::AgentSystemBuilder::with_tool`] (and
/// to the AWS host's `AgentLambda::with_tool`): the same value runs on both hosts.
///
/// ```
/// use infinity_agent_core::model::ToolSpec;
/// use infinity_agent_core::tools::{Tool, ToolContext, ToolOutcome};
/// use serde_json::{json, Value};
///
/// /// Adds two numbers: synchronous, so the model gets the result in the same slice.
/// #[derive(Debug)]
/// struct Add;
///
/// impl Tool for Add {
///     fn spec(&self) -> ToolSpec {
///         ToolSpec::new(
///             "add",
///             "Adds `a` and `b`.",
///             json!({"type": "object",
///                    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
///                    "required": ["a", "b"]}),
///         )
///     }
///
///     fn call(&self, args: &Value, _: &mut ToolContext<'_>) -> ToolOutcome {
///         // The registry checked `args` against the schema before this runs.
///         let sum = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
///         ToolOutcome::ok(sum.to_string())
///     }
/// }
///
/// assert_eq!(Add.spec().name, "add");
/// ```
///
/// A passive tool arranges its timer with [`ToolContext::wake_at`] and returns
/// [`ToolOutcome::Passive`]; a dispatched one emits effects ([`ToolContext::emit`]) and returns
/// [`ToolOutcome::Dispatched`]. Never read the clock or draw random numbers in `call`: use
/// `ctx.now` and `ctx.ids`, so a slice run again after a crash does the same thing.
pub trait Tool: Send + Sync + fmt::Debug {
    /// Name, description and argument schema.
    fn spec(&self) -> ToolSpec;

    /// Runs the call. `args` already passed the spec's JSON Schema.
    fn call(&self, args: &serde_json::Value, ctx: &mut ToolContext<'_>) -> ToolOutcome;

    /// True when the spec models see depends on what the host's library holds now
    /// ([`Tool::spec_in`]); such a tool's spec is made again for each slice.
    fn describes_library(&self) -> bool {
        false
    }

    /// The spec with what `library` holds now (`search_tools` says how many apps the catalog
    /// has). Only asked of tools that [`Tool::describes_library`]; default: [`Tool::spec`].
    fn spec_in(&self, library: &crate::library::Library) -> ToolSpec {
        let _ = library;
        self.spec()
    }

    /// Whether this thread is offered the tool (some tools are for top-level threads only,
    /// some for children only). Default: every thread.
    fn offered_to(&self, record: &ThreadRecord) -> bool {
        let _ = record;
        true
    }

    /// The error result for a call from a thread the tool is not offered to.
    fn not_offered(&self, record: &ThreadRecord) -> String {
        let _ = record;
        format!(
            "Error: the tool `{}` is not available in this thread.",
            self.spec().name
        )
    }
}
