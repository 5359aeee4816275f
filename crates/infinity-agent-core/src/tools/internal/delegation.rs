//! The `agent` category: `agent(task, context?)` delegates a side task to a copy of the calling
//! agent.
//!
//! The copy runs as a thread of its own: same agent definition and tools, a fresh context (none
//! of the caller's conversation; the task and context are its first message), its own memory
//! and plan. The call is dispatched: the caller waits for it like for any dispatched tool. When
//! the copy's turn is over (a successful `finish`, or a reply without tool calls, or an error
//! that stops it) its `finish` result, or else its last text, goes back to the caller through the
//! input queue as the call's result, and the copy's thread closes.
//!
//! Limits: a conversation a person starts is at depth 0 and each delegation adds one; the tool is
//! offered below [`MAX_DEPTH`]. At most [`MAX_RUNNING`] delegations of one conversation (its root
//! thread and all its children) run at once; the root thread's record keeps the running ones.

use serde_json::{json, Value};

use crate::effect::{Effect, OutputKind};
use crate::ids::{CallId, InputId, ThreadId};
use crate::input::{Input, InputBody};
use crate::model::ToolSpec;
use crate::state::{Conversation, DelegatedBy, Delegation, FinishStatus, ThreadRecord};
use crate::tools::{Tool, ToolContext, ToolOutcome};

/// Delegation depth at which the `agent` tool is no longer offered.
pub const MAX_DEPTH: u32 = 3;
/// Delegations of one conversation that may run at once.
pub const MAX_RUNNING: usize = 2;

/// The name of the tool that delegates.
pub(crate) const TOOL: &str = "agent";

/// The thread an `agent` call of `caller` runs in. Derived, so a retried slice names the same
/// thread.
pub fn delegated_thread_id(caller: &ThreadId, call_id: &CallId) -> ThreadId {
    ThreadId::derived(&format!("{caller}-{call_id}"), "agent")
}

/// A stored agent an agent file lists under `agents:`, offered as a tool that delegates to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubAgent {
    /// The agent's name (its newest version runs each delegation).
    pub name: String,
    /// What it does (its file's `description:`), for the tool's description.
    pub description: Option<String>,
}

/// The tool that delegates to a configured agent: its name with `.` written `_` (tool names
/// allow letters, digits, `_` and `-`).
pub fn agent_tool_name(agent: &str) -> String {
    agent.replace('.', "_")
}

/// `agent` (a copy of the calling agent, `target` none) or a configured agent's tool.
#[derive(Debug)]
pub struct DelegateTool {
    target: Option<SubAgent>,
}

impl DelegateTool {
    /// The `agent` tool: delegates to a copy of the caller.
    pub(super) fn copy() -> Self {
        Self { target: None }
    }

    /// The tool that delegates to the configured agent `target`.
    pub fn to(target: SubAgent) -> Self {
        Self {
            target: Some(target),
        }
    }

    fn name(&self) -> String {
        match &self.target {
            Some(target) => agent_tool_name(&target.name),
            None => TOOL.to_owned(),
        }
    }
}

impl Tool for DelegateTool {
    fn spec(&self) -> ToolSpec {
        let description = match &self.target {
            None => format!(
                "Delegate a side task to a copy of yourself: same instructions and tools, but a \
                 fresh context that holds none of this conversation, so put everything it needs \
                 in `task` and `context`. It runs as a thread of its own; its finish result (or \
                 its last message) comes back as this call's result. At most {MAX_RUNNING} \
                 delegations of a conversation run at once."
            ),
            Some(target) => format!(
                "Delegate a task to the agent `{}`{}. It starts a fresh conversation that holds \
                 none of this one, so put everything it needs in `task` and `context`; its \
                 finish result (or its last message) comes back as this call's result. At most \
                 {MAX_RUNNING} delegations of a conversation run at once.",
                target.name,
                target
                    .description
                    .as_deref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            ),
        };
        ToolSpec {
            name: self.name(),
            description,
            input_schema: delegation_schema(),
        }
    }

    fn offered_to(&self, record: &ThreadRecord) -> bool {
        record.depth < MAX_DEPTH
    }

    fn not_offered(&self, record: &ThreadRecord) -> String {
        format!(
            "Error: `{}` is not available here: this thread is at delegation depth {} and \
             delegation stops at depth {MAX_DEPTH}. Do the task yourself.",
            self.name(),
            record.depth
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let agent = match &self.target {
            Some(target) => target.name.clone(),
            None => ctx.record.agent.clone(),
        };
        delegate(&agent, args, ctx)
    }
}

/// The arguments of every delegation: `task`, `context`, `images`.
pub fn delegation_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "task": {"type": "string", "minLength": 1,
                     "description": "What the agent should do, and what to return."},
            "context": {"type": "string",
                        "description": "Facts from this conversation it needs."},
            "images": {"type": "array", "maxItems": 8,
                       "items": {"type": "string", "minLength": 1, "maxLength": 2048},
                       "description": "URLs of images the task is about (passed on as links)."}
        },
        "required": ["task"],
        "additionalProperties": false
    })
}

/// Delegates the task in `args` (see [`delegation_schema`]) to a fresh thread of `agent`
/// (`NAME` for its newest version, `NAME@VERSION` for that one), under the `agent` category's
/// limits: [`MAX_DEPTH`] (checked by the caller's offer) and [`MAX_RUNNING`] per conversation.
pub fn delegate(agent: &str, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
    if ctx.record.depth >= MAX_DEPTH {
        return ToolOutcome::error(format!(
            "Error: delegation is not available here: this thread is at delegation depth {} \
             and delegation stops at depth {MAX_DEPTH}. Do the task yourself.",
            ctx.record.depth
        ));
    }
    if ctx.threads_left == 0 {
        return ToolOutcome::error(crate::tools::threads_exhausted());
    }
    let running = &ctx.conversation.delegations;
    if running.len() >= MAX_RUNNING {
        let ids: Vec<&str> = running.iter().map(|d| d.thread_id.as_str()).collect();
        return ToolOutcome::error(format!(
            "Error: this conversation already has {MAX_RUNNING} delegations running ({}); \
             at most {MAX_RUNNING} run at once. Wait until one of them returns, or do the \
             task yourself.",
            ids.join(", ")
        ));
    }
    let task = args["task"].as_str().unwrap_or_default();
    let mut text = format!("Task: {task}");
    if let Some(context) = args["context"].as_str().filter(|c| !c.trim().is_empty()) {
        text.push_str(&format!("\n\nContext:\n{context}"));
    }
    let images: Vec<&str> = args["images"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !images.is_empty() {
        text.push_str("\n\nImages:");
        for url in images {
            text.push_str(&format!("\n- {url}"));
        }
    }
    text.push_str(
        "\n\n(Another thread delegated this task to you; you do not see its \
             conversation. Work on the task on your own. When it is done, call finish with the \
             result: that result is returned to the delegating thread and this thread ends.)",
    );
    let thread_id = delegated_thread_id(&ctx.record.id, &ctx.call.id);
    let delegation = Delegation {
        thread_id: thread_id.clone(),
        caller: ctx.record.id.clone(),
        call_id: ctx.call.id.clone(),
    };
    ctx.conversation.delegations.push(delegation.clone());
    if !ctx.record.is_root() {
        let root = ctx.record.root().clone();
        ctx.emit(Effect::Send {
            input: Input {
                id: InputId::derived(thread_id.as_str(), "started"),
                thread_id: root,
                body: InputBody::DelegationUpdate {
                    delegation,
                    running: true,
                },
            },
        });
    }
    ctx.emit(Effect::Send {
        input: Input {
            id: InputId::derived(thread_id.as_str(), "task"),
            thread_id: thread_id.clone(),
            body: InputBody::DelegatedTask {
                agent: agent.to_owned(),
                delegated_by: DelegatedBy {
                    thread_id: ctx.record.id.clone(),
                    call_id: ctx.call.id.clone(),
                    conversation: ctx.record.root().clone(),
                    returned: false,
                },
                depth: ctx.record.depth + 1,
                text,
            },
        },
    });
    ctx.output(OutputKind::ThreadSpawned {
        child_id: thread_id,
    });
    ToolOutcome::Dispatched
}

/// A `delegation_update` that says a delegation ended which the conversation does not count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("delegation {0} is not running in this conversation")]
pub struct NotRunning(pub ThreadId);

/// Applies a `delegation_update` to the conversation's running delegations (root thread only).
pub(crate) fn apply_update(
    conversation: &mut Conversation,
    delegation: Delegation,
    running: bool,
) -> Result<(), NotRunning> {
    let position = conversation
        .delegations
        .iter()
        .position(|d| d.thread_id == delegation.thread_id);
    match (running, position) {
        (true, None) => conversation.delegations.push(delegation),
        (true, Some(_)) => {}
        (false, Some(i)) => {
            conversation.delegations.remove(i);
        }
        (false, None) => return Err(NotRunning(delegation.thread_id)),
    }
    Ok(())
}

/// What a delegated thread returns when its turn is over: its `finish` output if it has one,
/// else `last_text`. `is_error` for a failed or cancelled finish.
pub(crate) fn result_text(record: &ThreadRecord, last_text: Option<&str>) -> (String, bool) {
    match &record.output {
        Some(output) => {
            let status = output.status.as_str();
            let result = match &output.result {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (
                format!("The delegated agent finished ({status}). Result: {result}"),
                output.status != FinishStatus::Succeeded,
            )
        }
        None => match last_text.filter(|t| !t.trim().is_empty()) {
            Some(text) => (
                format!(
                    "The delegated agent ended without calling finish. Its last message: {text}"
                ),
                false,
            ),
            None => (
                "The delegated agent ended without a result.".to_owned(),
                true,
            ),
        },
    }
}

/// Sends a delegated thread's result to its caller, and tells the caller's conversation that
/// the delegation ended (first, so the conversation counts it gone before the caller goes on).
/// Once only; a no-op for other threads.
pub(crate) fn return_result(
    record: &mut ThreadRecord,
    text: String,
    is_error: bool,
    effects: &mut Vec<Effect>,
) {
    let Some(by) = record.delegated_by.as_mut().filter(|b| !b.returned) else {
        return;
    };
    by.returned = true;
    let by = by.clone();
    effects.push(Effect::Send {
        input: Input {
            id: InputId::derived(record.id.as_str(), "ended"),
            thread_id: by.conversation.clone(),
            body: InputBody::DelegationUpdate {
                delegation: Delegation {
                    thread_id: record.id.clone(),
                    caller: by.thread_id.clone(),
                    call_id: by.call_id.clone(),
                },
                running: false,
            },
        },
    });
    effects.push(Effect::Send {
        input: Input {
            id: InputId::derived(record.id.as_str(), "result"),
            thread_id: by.thread_id,
            body: if is_error {
                InputBody::tool_error(by.call_id, text)
            } else {
                InputBody::tool_result(by.call_id, text)
            },
        },
    });
}

/// When a thread closes: a delegated thread that has not returned yet returns now (its report,
/// or a note that it closed without a result), and delegations it started itself are closed.
pub(crate) fn on_close(record: &mut ThreadRecord, report: Option<&str>, effects: &mut Vec<Effect>) {
    let (text, is_error) = match report {
        Some(report) => (
            format!("The delegated agent closed its thread. Its report: {report}"),
            false,
        ),
        None => result_text(record, None),
    };
    return_result(record, text, is_error, effects);
    let open: Vec<CallId> = record
        .pending_calls
        .iter()
        .filter(|p| p.delegated || p.tool == TOOL)
        .map(|p| p.call_id.clone())
        .collect();
    for call_id in open {
        close_delegated(&record.id, &call_id, effects);
    }
}

/// Closes the thread that `caller`'s `agent` call `call_id` delegated to.
pub(crate) fn close_delegated(caller: &ThreadId, call_id: &CallId, effects: &mut Vec<Effect>) {
    let target = delegated_thread_id(caller, call_id);
    effects.push(Effect::Send {
        input: Input {
            id: InputId::derived(target.as_str(), "close"),
            thread_id: target,
            body: InputBody::CloseRequest {
                call_id: call_id.clone(),
            },
        },
    });
}
