//! The thread tools: `spawn_thread`, `report_to_parent`, `close_thread`,
//! `send_message_to_child`, `cancel_subscription`; and the thread mechanics the engine shares
//! with them (spawning a child, closing a thread).

use jiff::Timestamp;
use serde_json::{json, Value};

use super::str_arg;
use crate::effect::{Effect, Notification, OutputKind};
use crate::history::{HistoryView, Item, ToolCall};
use crate::ids::{CallId, IdSource, InputId, ThreadId};
use crate::input::{Input, InputBody};
use crate::model::ToolSpec;
use crate::state::{args_preview, ChildLink, ParentLink, ThreadRecord, ThreadStatus};
use crate::tools::{Tool, ToolContext, ToolOutcome};

/// Calls of the newest assistant turn in `view` that have no result yet.
pub(crate) fn open_calls(view: HistoryView<'_>) -> Vec<ToolCall> {
    let Some(turn) = view.rposition(|e| matches!(e.item, Item::Assistant { .. })) else {
        return Vec::new();
    };
    let answered: Vec<&CallId> = view
        .since(turn + 1)
        .filter_map(|e| match &e.item {
            Item::ToolResult { call_id, .. } => Some(call_id),
            _ => None,
        })
        .collect();
    let Some(turn) = view.get(turn) else {
        return Vec::new();
    };
    turn.item
        .tool_calls()
        .iter()
        .filter(|c| !answered.contains(&&c.id))
        .cloned()
        .collect()
}

/// The newest turn of `view`, if it made `call` and the call is still running (as a
/// `spawn_thread` call is while it spawns): its index, and the turn as the child sees it (its
/// text and that one call).
fn own_turn(view: HistoryView<'_>, call: &CallId) -> Option<(usize, Item)> {
    if !open_calls(view).iter().any(|c| &c.id == call) {
        return None;
    }
    let index = view.rposition(|e| matches!(e.item, Item::Assistant { .. }))?;
    let Item::Assistant {
        text,
        tool_calls,
        synthetic,
    } = &view.get(index)?.item
    else {
        return None;
    };
    let own = tool_calls.iter().find(|c| &c.id == call)?;
    Some((
        index,
        Item::Assistant {
            text: text.clone(),
            tool_calls: vec![own.clone()],
            synthetic: *synthetic,
        },
    ))
}

/// What a new child thread is spawned from.
pub(crate) struct ChildOrigin<'a> {
    pub call_id: &'a CallId,
    pub tool: &'a str,
    pub args: &'a Value,
}

/// Creates a child of `record`: records the link, emits its seed and the output event, and returns
/// its id. `seed_for` builds the child's own first entries, given the child's id.
///
/// When the spawning call is running in the thread's newest turn (`spawn_thread`), the child forks just
/// before that turn and its history starts with a copy of the turn that holds its own call
/// only: a child never sees its siblings' calls, so spawning N children costs N small seeds,
/// not N². Otherwise (a thread for a subscription's event) it forks at the end of the view, and
/// the calls of the newest turn still open get results saying they belong to the parent, so the
/// child's conversation is well formed.
pub(crate) fn spawn_child(
    record: &mut ThreadRecord,
    view: HistoryView<'_>,
    now: Timestamp,
    ids: &mut dyn IdSource,
    origin: ChildOrigin<'_>,
    effects: &mut Vec<Effect>,
    seed_for: impl FnOnce(&ThreadId) -> Vec<Item>,
) -> ThreadId {
    let child_id = ids.thread_id();
    let (fork_at, mut seed) = match own_turn(view, origin.call_id) {
        Some((index, item)) => (index, vec![item]),
        None => {
            let placeholders = open_calls(view)
                .into_iter()
                .filter(|c| &c.id != origin.call_id)
                .map(|c| {
                    Item::tool_result(
                        c.id,
                        c.name,
                        "(This call belongs to the parent thread; it is not part of this thread.)",
                    )
                })
                .collect();
            (view.len(), placeholders)
        }
    };
    seed.extend(seed_for(&child_id));
    let parent = ParentLink {
        thread_id: record.id.clone(),
        call_id: origin.call_id.clone(),
        tool: origin.tool.to_owned(),
        args: args_preview(origin.args),
        fork_at: fork_at as u64,
        summary: record.latest_summary,
    };
    record.children.push(ChildLink {
        thread_id: child_id.clone(),
        call_id: origin.call_id.clone(),
        tool: origin.tool.to_owned(),
        args: args_preview(origin.args),
        closed: false,
    });
    effects.push(Effect::Send {
        input: Input {
            id: InputId::derived(child_id.as_str(), "seed"),
            thread_id: child_id.clone(),
            body: InputBody::ChildSeed {
                agent: record.agent.clone(),
                parent,
                parent_lineage: record.lineage.clone(),
                seed,
                depth: record.depth,
            },
        },
    });
    effects.push(Effect::output(
        &record.id,
        now,
        OutputKind::ThreadSpawned {
            child_id: child_id.clone(),
        },
    ));
    child_id
}

#[derive(Debug)]
pub(super) struct SpawnThread;

impl Tool for SpawnThread {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "spawn_thread",
            "Spawn a child thread that starts from this conversation and works on `instructions` \
             in parallel. `child_of` must be your full thread stack, root first, ending with your \
             own thread ID. Returns the child's thread ID at once; the child reports back with \
             report_to_parent.",
            json!({
                "type": "object",
                "properties": {
                    "instructions": {"type": "string", "minLength": 1},
                    "child_of": {"type": "array", "items": {"type": "string"}, "minItems": 1}
                },
                "required": ["instructions", "child_of"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let child_of: Vec<&str> = args
            .get("child_of")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let stack: Vec<&str> = ctx.record.lineage.iter().map(ThreadId::as_str).collect();
        if child_of != stack {
            return ToolOutcome::error(format!(
                "Error: child_of must be your full thread stack, from the root to yourself: {}. \
                 You passed {}. You are thread {}: focus on your own task and spawn only \
                 children of your own.",
                json!(stack),
                json!(child_of),
                ctx.record.id
            ));
        }
        if ctx.threads_left == 0 {
            return ToolOutcome::error(crate::tools::threads_exhausted());
        }
        let instructions = str_arg(args, "instructions").to_owned();
        let call = ctx.call.clone();
        let child_id = spawn_child(
            ctx.record,
            ctx.view,
            ctx.now,
            ctx.ids,
            ChildOrigin {
                call_id: &call.id,
                tool: &call.name,
                args: &call.args,
            },
            ctx.effects,
            |child_id| {
                vec![Item::tool_result(
                    call.id.clone(),
                    call.name.clone(),
                    format!(
                        "You are now inside the spawned thread, not the thread that spawned it. \
                         Your task: {instructions}\nWork on this task only. When it is done, \
                         call report_to_parent with the result, then close_thread with your own \
                         thread ID. Your thread ID is {child_id}."
                    ),
                )]
            },
        );
        ToolOutcome::ok(format!("Child thread spawned with ID: {child_id}"))
    }
}

#[derive(Debug)]
pub(super) struct ReportToParent;

impl Tool for ReportToParent {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "report_to_parent",
            "Send a report to the thread that spawned this one. The parent sees it as an event \
             tied to its spawn call.",
            json!({
                "type": "object",
                "properties": {"report": {"type": "string"}},
                "required": ["report"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let Some(parent) = ctx.record.parent.clone() else {
            return ToolOutcome::error(
                "Error: this is a root thread; there is no parent to report to. Answer the user \
                 directly instead.",
            );
        };
        let report = str_arg(args, "report").to_owned();
        ctx.emit(Effect::Send {
            input: Input {
                id: InputId::derived(ctx.call.id.as_str(), "report"),
                thread_id: parent.thread_id.clone(),
                body: InputBody::ChildReport {
                    child_id: ctx.record.id.clone(),
                    call_id: parent.call_id,
                    report: report.clone(),
                    closed: false,
                },
            },
        });
        ctx.send_own_result(format!(
            "Report delivered to parent thread {}.",
            parent.thread_id
        ));
        ToolOutcome::Dispatched
    }
}

/// Closes `record` now: marks it closed, closes its open children, tells its parent (with the
/// report, if any) and the tool servers, and shows it. Input held back is discarded; the
/// engine gives the calls still pending their "cancelled" results.
pub(crate) fn close_now(
    record: &mut ThreadRecord,
    now: Timestamp,
    report: Option<String>,
    cause: &str,
    effects: &mut Vec<Effect>,
) {
    if record.status == ThreadStatus::Closed {
        return;
    }
    record.status = ThreadStatus::Closed;
    // Its schedules go with it (their armed timers find nothing and are dropped).
    record.schedules.clear();
    crate::tools::internal::delegation::on_close(record, report.as_deref(), effects);
    // Its pending calls are answered by the engine ("cancelled"), so the history stays whole.
    record.deferred.clear();
    for child in record.children.iter_mut().filter(|c| !c.closed) {
        child.closed = true;
        effects.push(Effect::Send {
            input: Input {
                id: InputId::derived(child.thread_id.as_str(), "close"),
                thread_id: child.thread_id.clone(),
                body: InputBody::CloseRequest {
                    call_id: CallId::derived(cause, child.thread_id.as_str()),
                },
            },
        });
    }
    if let Some(parent) = &record.parent {
        effects.push(Effect::Send {
            input: Input {
                id: InputId::derived(record.id.as_str(), "closed"),
                thread_id: parent.thread_id.clone(),
                body: InputBody::ChildReport {
                    child_id: record.id.clone(),
                    call_id: parent.call_id.clone(),
                    report: report.unwrap_or_default(),
                    closed: true,
                },
            },
        });
    }
    for sub in record.subscriptions.drain(..) {
        effects.push(Effect::Notify {
            notification: Notification::CancelToolCall {
                thread_id: record.id.clone(),
                call_id: sub.call_id,
                tool: sub.tool,
                keys: record.notify_keys.clone(),
            },
        });
    }
    effects.push(Effect::Notify {
        notification: Notification::CloseThread {
            thread_id: record.id.clone(),
            keys: record.notify_keys.clone(),
        },
    });
    effects.push(Effect::output(&record.id, now, OutputKind::ThreadClosed {}));
}

#[derive(Debug)]
pub(super) struct CloseThread;

impl Tool for CloseThread {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "close_thread",
            "Close a thread: your own (pass your thread ID; optionally a final report for your \
             parent) or one of your direct children. A closed thread takes no more input.",
            json!({
                "type": "object",
                "properties": {
                    "thread_id": {"type": "string"},
                    "report_to_parent": {"type": "string",
                        "description": "When closing yourself: a final report for your parent."}
                },
                "required": ["thread_id"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let target = str_arg(args, "thread_id");
        if target == ctx.record.id.as_str() {
            let report = args
                .get("report_to_parent")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let call_id = ctx.call.id.as_str().to_owned();
            close_now(ctx.record, ctx.now, report, &call_id, ctx.effects);
            return ToolOutcome::ok("This thread is closed.");
        }
        let Some(child) = ctx
            .record
            .children
            .iter_mut()
            .find(|c| c.thread_id.as_str() == target)
        else {
            return ToolOutcome::error(format!(
                "Error: close_thread can close only this thread ({}) or one of its direct \
                 children ({}); `{target}` is neither.",
                ctx.record.id,
                child_list(ctx.record)
            ));
        };
        if child.closed {
            return ToolOutcome::error(format!("Error: thread {target} is already closed."));
        }
        child.closed = true;
        let input = Input {
            id: InputId::derived(ctx.call.id.as_str(), "close"),
            thread_id: child.thread_id.clone(),
            body: InputBody::CloseRequest {
                call_id: ctx.call.id.clone(),
            },
        };
        ctx.emit(Effect::Send { input });
        ToolOutcome::Dispatched
    }
}

fn child_list(record: &ThreadRecord) -> String {
    let open: Vec<&str> = record
        .children
        .iter()
        .filter(|c| !c.closed)
        .map(|c| c.thread_id.as_str())
        .collect();
    if open.is_empty() {
        "none open".to_owned()
    } else {
        open.join(", ")
    }
}

#[derive(Debug)]
pub(super) struct SendMessageToChild;

impl Tool for SendMessageToChild {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "send_message_to_child",
            "Send a message to one of your direct child threads.",
            json!({
                "type": "object",
                "properties": {
                    "thread_id": {"type": "string"},
                    "message": {"type": "string"}
                },
                "required": ["thread_id", "message"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let target = str_arg(args, "thread_id");
        let Some(child) = ctx
            .record
            .children
            .iter()
            .find(|c| c.thread_id.as_str() == target && !c.closed)
        else {
            return ToolOutcome::error(format!(
                "Error: `{target}` is not an open direct child of this thread; open children: {}.",
                child_list(ctx.record)
            ));
        };
        let input = Input {
            id: InputId::derived(ctx.call.id.as_str(), "message"),
            thread_id: child.thread_id.clone(),
            body: InputBody::MessageFromParent {
                text: str_arg(args, "message").to_owned(),
            },
        };
        ctx.emit(Effect::Send { input });
        ctx.send_own_result(format!("Message delivered to thread {target}."));
        ToolOutcome::Dispatched
    }
}

#[derive(Debug)]
pub(super) struct CancelSubscription;

impl Tool for CancelSubscription {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "cancel_subscription",
            "Cancel one of this thread's active subscriptions, by the id of the tool call that \
             started it. No further events arrive for it.",
            json!({
                "type": "object",
                "properties": {"tool_call_id": {"type": "string"}},
                "required": ["tool_call_id"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let target = str_arg(args, "tool_call_id");
        let Some(index) = ctx
            .record
            .subscriptions
            .iter()
            .position(|s| s.call_id.as_str() == target)
        else {
            let active: Vec<&str> = ctx
                .record
                .subscriptions
                .iter()
                .map(|s| s.call_id.as_str())
                .collect();
            return ToolOutcome::error(format!(
                "Error: `{target}` is not an active subscription of this thread; active: {}.",
                if active.is_empty() {
                    "none".to_owned()
                } else {
                    active.join(", ")
                }
            ));
        };
        let sub = ctx.record.subscriptions.remove(index);
        ctx.emit(Effect::Notify {
            notification: Notification::CancelToolCall {
                thread_id: ctx.record.id.clone(),
                call_id: sub.call_id,
                tool: sub.tool,
                keys: ctx.record.notify_keys.clone(),
            },
        });
        ToolOutcome::ok(format!("Subscription {target} cancelled."))
    }
}
