//! Tools: the [`Tool`] trait, the registry that validates calls, and the built-in tools.
//!
//! A tool runs in one of three ways, chosen per call by what [`Tool::call`] returns:
//! - synchronously: it returns [`ToolOutcome::Result`], the result goes into the history at once
//!   and the engine loops back to the model;
//! - dispatched: it emits effects and returns [`ToolOutcome::Dispatched`]; the result comes back
//!   later as a `tool_result` input and the next completion waits for it;
//! - passive: a sleep. It returns [`ToolOutcome::Passive`]; nothing waits for it, new input wakes
//!   the thread at once, and the sleep's own result is appended when it arrives.

pub(crate) mod builtin;
pub mod internal;
pub mod remote;
mod set_title;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;

pub use builtin::{builtin_tools, BUILTIN_TOOL_NAMES};
pub use set_title::SetTitle;

use crate::effect::{Effect, OutputEvent, OutputKind};
use crate::history::{HistoryView, ToolCall, INJECTED_TOOL};
use crate::input::{Input, InputBody};
use crate::model::ToolSpec;
use crate::thread::ThreadRecord;

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
    pub conversation: &'a mut internal::Conversation,
    pub(crate) effects: &'a mut Vec<Effect>,
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

    /// Shows an event to the user.
    pub fn output(&mut self, kind: OutputKind) {
        let event = OutputEvent {
            thread_id: self.record.id.clone(),
            at: self.now,
            kind,
        };
        self.effects.push(Effect::Output { event });
    }

    /// Sends this call's result back to this thread through the input queue.
    pub fn send_own_result(&mut self, text: impl Into<String>) {
        let input = Input {
            id: crate::ids::InputId::derived(self.call.id.as_str(), "result"),
            thread_id: self.record.id.clone(),
            body: InputBody::ToolResult {
                call_id: self.call.id.clone(),
                text: text.into(),
                is_error: false,
                subscription: false,
                images: Vec::new(),
            },
        };
        self.effects.push(Effect::Send { input });
    }
}

/// A tool an agent can call.
pub trait Tool: Send + Sync + fmt::Debug {
    /// Name, description and argument schema.
    fn spec(&self) -> ToolSpec;

    /// Runs the call. `args` already passed the spec's JSON Schema.
    fn call(&self, args: &serde_json::Value, ctx: &mut ToolContext<'_>) -> ToolOutcome;

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

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Two tools with one name.
    #[error("tool `{name}` is registered twice{}", if *.builtin { " (it is a built-in tool; rename yours)" } else { "" })]
    Duplicate {
        /// The name.
        name: String,
        /// True when the existing one is built in.
        builtin: bool,
    },
    /// The reserved injection tool name.
    #[error("tool name `{INJECTED_TOOL}` is reserved for events the runtime injects")]
    Reserved,
    /// An application or tool-server tool has the name of an internal tool the agent has on.
    #[error("tool `{name}` has the name of an internal tool of the `{flag}` category, which this agent has on: set `internal_tools: {{{flag}: false}}` in the agent file, or rename the tool")]
    ClashesWithInternal {
        /// The tool.
        name: String,
        /// The `internal_tools` flag that turns the internal one off.
        flag: &'static str,
    },
    /// The schema does not compile.
    #[error("tool `{name}` has an invalid input schema: {reason}")]
    BadSchema {
        /// The tool.
        name: String,
        /// Why.
        reason: String,
    },
}

struct Registered {
    spec: ToolSpec,
    tool: Arc<dyn Tool>,
    validator: jsonschema::Validator,
}

/// The tools of one agent, with their compiled argument schemas.
pub struct ToolRegistry {
    tools: Vec<Registered>,
    by_name: HashMap<String, usize>,
    specs: Vec<ToolSpec>,
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.specs.iter().map(|s| &s.name))
            .finish()
    }
}

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
/// valid: the [`schema_problems`], then the schema (clipped).
pub(crate) fn argument_problems(
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

/// Why a call was refused before it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallRejection {
    Unknown(String),
    NotOffered(String),
    Reserved,
    BadArguments(String),
}

impl CallRejection {
    pub(crate) fn message(&self, name: &str, available: &[ToolSpec]) -> String {
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

impl ToolRegistry {
    /// A registry holding only the built-in tools.
    pub fn with_builtins() -> Self {
        let mut registry = Self::empty();
        for tool in builtin_tools() {
            // Built-in schemas are ours and compile; a failure here is a bug caught by tests.
            if let Err(err) = registry.insert(tool) {
                tracing::error!(%err, "built-in tool failed to register");
            }
        }
        registry
    }

    /// The tools of an agent: the built-ins, the internal tools its flags switch on, then the
    /// application's tools. An application tool with the name of a built-in or of an enabled
    /// internal tool is refused with an error naming what to change.
    pub fn for_agent(
        internal: &internal::InternalTools,
        settings: &internal::ToolSettings,
        app_tools: &[Arc<dyn Tool>],
    ) -> Result<Self, RegistryError> {
        let mut registry = Self::with_builtins();
        let app_names: Vec<String> = app_tools.iter().map(|t| t.spec().name).collect();
        for (def, tool) in internal::agent_tools(internal, settings) {
            let on = internal.enabled(def.category);
            if app_names.iter().any(|n| n == def.name) {
                if on {
                    return Err(RegistryError::ClashesWithInternal {
                        name: def.name.to_owned(),
                        flag: def.category.flag(),
                    });
                }
                continue; // the category is off: the name is the application's
            }
            registry.insert(tool)?;
        }
        for tool in app_tools {
            registry.insert(Arc::clone(tool))?;
        }
        Ok(registry)
    }

    /// A registry with no tools at all.
    pub fn empty() -> Self {
        Self {
            tools: Vec::new(),
            by_name: HashMap::new(),
            specs: Vec::new(),
        }
    }

    /// Adds an application tool next to the built-ins.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        self.insert(tool)
    }

    fn insert(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let spec = tool.spec();
        if spec.name == INJECTED_TOOL {
            return Err(RegistryError::Reserved);
        }
        if self.by_name.contains_key(&spec.name) {
            return Err(RegistryError::Duplicate {
                builtin: BUILTIN_TOOL_NAMES.contains(&spec.name.as_str()),
                name: spec.name,
            });
        }
        let validator = jsonschema::validator_for(&spec.input_schema).map_err(|e| {
            RegistryError::BadSchema {
                name: spec.name.clone(),
                reason: e.to_string(),
            }
        })?;
        self.by_name.insert(spec.name.clone(), self.tools.len());
        self.specs.push(spec.clone());
        self.tools.push(Registered {
            spec,
            tool,
            validator,
        });
        Ok(())
    }

    /// The specs, in registration order (built-ins first).
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// The specs of the tools this thread is offered.
    pub fn specs_for(&self, record: &ThreadRecord) -> std::borrow::Cow<'_, [ToolSpec]> {
        if self.tools.iter().all(|r| r.tool.offered_to(record)) {
            return std::borrow::Cow::Borrowed(&self.specs);
        }
        std::borrow::Cow::Owned(
            self.tools
                .iter()
                .filter(|r| r.tool.offered_to(record))
                .map(|r| r.spec.clone())
                .collect(),
        )
    }

    /// The tool with this name, if any.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name).map(|&i| &self.tools[i].tool)
    }

    /// Checks a call: known tool, not reserved, arguments valid.
    pub(crate) fn check(
        &self,
        name: &str,
        args: &serde_json::Value,
        record: &ThreadRecord,
    ) -> Result<&Arc<dyn Tool>, CallRejection> {
        if name == INJECTED_TOOL {
            return Err(CallRejection::Reserved);
        }
        let Some(&index) = self.by_name.get(name) else {
            return Err(CallRejection::Unknown(name.to_owned()));
        };
        let registered = &self.tools[index];
        if !registered.tool.offered_to(record) {
            return Err(CallRejection::NotOffered(
                registered.tool.not_offered(record),
            ));
        }
        match argument_problems(&registered.validator, args, &registered.spec.input_schema) {
            None => Ok(&registered.tool),
            Some(why) => Err(CallRejection::BadArguments(why)),
        }
    }
}
