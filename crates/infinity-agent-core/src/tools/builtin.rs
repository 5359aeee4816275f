//! The built-in tools every agent has: sleeps and thread management.

use std::sync::Arc;

use jiff::{civil::DateTime, tz::TimeZone, SignedDuration, Timestamp};
use serde_json::{json, Value};

use super::{Tool, ToolContext, ToolOutcome};
use crate::effect::{Effect, Notification, OutputKind};
use crate::history::{show_time, HistoryView, Item, ToolCall};
use crate::ids::{CallId, InputId, ThreadId};
use crate::input::{Input, InputBody};
use crate::model::ToolSpec;
use crate::thread::{ChildLink, ParentLink, ThreadRecord, ThreadStatus};

/// Names of the built-in tools, in the order they are offered.
pub const BUILTIN_TOOL_NAMES: &[&str] = &[
    "sleep",
    "sleep_until",
    "sleep_until_event_or_input",
    "spawn_thread",
    "report_to_parent",
    "close_thread",
    "send_message_to_child",
    "cancel_subscription",
];

/// The longest sleep accepted: ten years.
const MAX_SLEEP_SECONDS: u64 = 10 * 366 * 24 * 3600;

/// One instance of every built-in tool.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(Sleep),
        Arc::new(SleepUntil),
        Arc::new(SleepUntilEventOrInput),
        Arc::new(SpawnThread),
        Arc::new(ReportToParent),
        Arc::new(CloseThread),
        Arc::new(SendMessageToChild),
        Arc::new(CancelSubscription),
    ]
}

fn spec(name: &str, description: &str, schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: schema,
    }
}

fn str_arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn schedule_wake(ctx: &mut ToolContext<'_>, due: Timestamp) {
    let input = Input {
        id: InputId::derived(ctx.call.id.as_str(), "wake"),
        thread_id: ctx.record.id.clone(),
        body: InputBody::TimerWakeUp {
            call_id: ctx.call.id.clone(),
        },
    };
    ctx.emit(Effect::SendAt { input, due });
    ctx.output(OutputKind::Sleeping {
        call_id: ctx.call.id.clone(),
        until: Some(due),
    });
}

#[derive(Debug)]
struct Sleep;

impl Tool for Sleep {
    fn spec(&self) -> ToolSpec {
        spec(
            "sleep",
            "Sleep for a number of seconds. The thread wakes early if a message, event or report \
             arrives; the sleep's own result is then delivered later as an event.",
            json!({
                "type": "object",
                "properties": {
                    "seconds": {"type": "number", "minimum": 0, "maximum": MAX_SLEEP_SECONDS,
                                "description": "How long to sleep, in seconds."}
                },
                "required": ["seconds"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let seconds = args.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
        let millis = (seconds * 1000.0).round() as i64;
        if millis <= 0 {
            return ToolOutcome::ok("Slept 0 seconds.");
        }
        let Ok(due) = ctx.now.checked_add(SignedDuration::from_millis(millis)) else {
            return ToolOutcome::error("Error: that sleep ends beyond the supported date range.");
        };
        schedule_wake(ctx, due);
        ToolOutcome::Passive { due: Some(due) }
    }
}

#[derive(Debug)]
struct SleepUntil;

/// Resolves a local date and time in an IANA zone to an instant.
///
/// A local time that does not exist (skipped by a DST change) is moved forward by the length of
/// the gap (02:30 on a spring-forward night in New York is 03:30 EDT); a local time that occurs
/// twice (fall back) resolves to the earlier of the two instants.
pub(crate) fn resolve_local_time(date: &str, time: &str, zone: &str) -> Result<Timestamp, String> {
    let date_ok = date.len() == 10
        && date.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    if !date_ok {
        return Err(format!("date `{date}` must be YYYY-MM-DD"));
    }
    let time_ok = (time.len() == 5 || time.len() == 8)
        && time.bytes().enumerate().all(|(i, b)| {
            if i == 2 || i == 5 {
                b == b':'
            } else {
                b.is_ascii_digit()
            }
        });
    if !time_ok {
        return Err(format!("time `{time}` must be HH:MM or HH:MM:SS"));
    }
    let civil: DateTime = format!("{date}T{time}")
        .parse()
        .map_err(|e| format!("`{date} {time}` is not a valid date and time: {e}"))?;
    let tz = TimeZone::get(zone)
        .map_err(|_| format!("`{zone}` is not a known IANA time zone (e.g. Europe/Paris)"))?;
    tz.to_timestamp(civil)
        .map_err(|e| format!("cannot place `{date} {time}` in {zone}: {e}"))
}

impl Tool for SleepUntil {
    fn spec(&self) -> ToolSpec {
        spec(
            "sleep_until",
            "Sleep until a local date and time in an IANA time zone. A time in the past returns at \
             once. Interrupted like `sleep` by new input.",
            json!({
                "type": "object",
                "properties": {
                    "date": {"type": "string", "description": "YYYY-MM-DD"},
                    "time": {"type": "string", "description": "HH:MM or HH:MM:SS, local time"},
                    "timezone": {"type": "string", "description": "IANA zone, e.g. Europe/Paris"}
                },
                "required": ["date", "time", "timezone"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let (date, time, zone) = (
            str_arg(args, "date"),
            str_arg(args, "time"),
            str_arg(args, "timezone"),
        );
        let due = match resolve_local_time(date, time, zone) {
            Ok(due) => due,
            Err(why) => return ToolOutcome::error(format!("Error: {why}.")),
        };
        if due <= ctx.now {
            return ToolOutcome::ok(format!(
                "{date} {time} {zone} ({}) is already past (now {}); not sleeping.",
                show_time(due),
                show_time(ctx.now)
            ));
        }
        schedule_wake(ctx, due);
        ToolOutcome::Passive { due: Some(due) }
    }
}

#[derive(Debug)]
struct SleepUntilEventOrInput;

impl Tool for SleepUntilEventOrInput {
    fn spec(&self) -> ToolSpec {
        spec(
            "sleep_until_event_or_input",
            "Wait, with no timer, until the next message, event or report arrives.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
    }

    fn call(&self, _args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        ctx.output(OutputKind::Sleeping {
            call_id: ctx.call.id.clone(),
            until: None,
        });
        ToolOutcome::Passive { due: None }
    }
}

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

/// What a new child thread is spawned from.
pub(crate) struct ChildOrigin<'a> {
    pub call_id: &'a CallId,
    pub tool: &'a str,
    pub args: &'a Value,
}

/// Creates a child of `record`: records the link, emits its seed and the output event, and returns
/// its id. `seed_for` builds the child's own first entries that follow the inherited view,
/// given the child's id; results for calls of the inherited last turn that the child does not
/// own are added first, so the child's conversation is well formed.
pub(crate) fn spawn_child(
    record: &mut ThreadRecord,
    view: HistoryView<'_>,
    now: Timestamp,
    origin: ChildOrigin<'_>,
    effects: &mut Vec<Effect>,
    seed_for: impl FnOnce(&ThreadId) -> Vec<Item>,
) -> ThreadId {
    let child_id = ThreadId::generate();
    let mut seed: Vec<Item> = open_calls(view)
        .into_iter()
        .filter(|c| &c.id != origin.call_id)
        .map(|c| Item::ToolResult {
            call_id: c.id,
            name: c.name,
            text: "(This call belongs to the parent thread; it is not part of this thread.)"
                .to_owned(),
            is_error: false,
            images: Vec::new(),
        })
        .collect();
    seed.extend(seed_for(&child_id));
    let parent = ParentLink {
        thread_id: record.id.clone(),
        call_id: origin.call_id.clone(),
        tool: origin.tool.to_owned(),
        args: origin.args.clone(),
        fork_at: view.len() as u64,
        summary: record.latest_summary,
    };
    record.children.push(ChildLink {
        thread_id: child_id.clone(),
        call_id: origin.call_id.clone(),
        tool: origin.tool.to_owned(),
        args: origin.args.clone(),
        closed: false,
    });
    effects.push(Effect::Send {
        input: Input {
            id: InputId::derived(child_id.as_str(), "seed"),
            thread_id: child_id.clone(),
            body: InputBody::ChildSeed {
                agent: record.agent.clone(),
                parent,
                parent_stack: record.stack.clone(),
                seed,
                depth: record.depth,
            },
        },
    });
    effects.push(crate::engine::output_effect(
        &record.id,
        now,
        OutputKind::ThreadSpawned {
            child_id: child_id.clone(),
        },
    ));
    child_id
}

#[derive(Debug)]
struct SpawnThread;

impl Tool for SpawnThread {
    fn spec(&self) -> ToolSpec {
        spec(
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
        let stack: Vec<&str> = ctx.record.stack.iter().map(ThreadId::as_str).collect();
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
        let instructions = str_arg(args, "instructions").to_owned();
        let call = ctx.call.clone();
        let child_id = spawn_child(
            ctx.record,
            ctx.view,
            ctx.now,
            ChildOrigin {
                call_id: &call.id,
                tool: &call.name,
                args: &call.args,
            },
            ctx.effects,
            |child_id| {
                vec![Item::ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    text: format!(
                        "You are now inside the spawned thread, not the thread that spawned it. \
                         Your task: {instructions}\nWork on this task only. When it is done, \
                         call report_to_parent with the result, then close_thread with your own \
                         thread ID. Your thread ID is {child_id}."
                    ),
                    is_error: false,
                    images: Vec::new(),
                }]
            },
        );
        ToolOutcome::ok(format!("Child thread spawned with ID: {child_id}"))
    }
}

#[derive(Debug)]
struct ReportToParent;

impl Tool for ReportToParent {
    fn spec(&self) -> ToolSpec {
        spec(
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
/// report, if any) and the tool servers, and shows it.
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
    super::internal::delegation::on_close(record, report.as_deref(), effects);
    record.pending_calls.clear();
    record.deferred.clear();
    for child in record.children.iter_mut().filter(|c| !c.closed) {
        child.closed = true;
        effects.push(Effect::Send {
            input: Input {
                id: InputId::derived(child.thread_id.as_str(), "close"),
                thread_id: child.thread_id.clone(),
                body: InputBody::CloseRequest {
                    call_id: CallId::derived_from(cause, child.thread_id.as_str()),
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
            },
        });
    }
    effects.push(Effect::Notify {
        notification: Notification::CloseThread {
            thread_id: record.id.clone(),
        },
    });
    effects.push(crate::engine::output_effect(
        &record.id,
        now,
        OutputKind::ThreadClosed {},
    ));
}

#[derive(Debug)]
struct CloseThread;

impl Tool for CloseThread {
    fn spec(&self) -> ToolSpec {
        spec(
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
struct SendMessageToChild;

impl Tool for SendMessageToChild {
    fn spec(&self) -> ToolSpec {
        spec(
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
struct CancelSubscription;

impl Tool for CancelSubscription {
    fn spec(&self) -> ToolSpec {
        spec(
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
            },
        });
        ToolOutcome::ok(format!("Subscription {target} cancelled."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_time_in_a_named_zone() {
        let t = resolve_local_time("2026-07-01", "09:00", "Europe/Paris").unwrap();
        assert_eq!(t.to_string(), "2026-07-01T07:00:00Z");
    }

    #[test]
    fn nonexistent_local_time_moves_forward_by_the_gap() {
        // 2026-03-08 02:30 does not exist in New York (clocks jump 02:00 -> 03:00 EDT).
        let t = resolve_local_time("2026-03-08", "02:30", "America/New_York").unwrap();
        assert_eq!(t.to_string(), "2026-03-08T07:30:00Z"); // 03:30 EDT
    }

    #[test]
    fn ambiguous_local_time_takes_the_earlier_instant() {
        // 2026-11-01 01:30 happens twice in New York; the first is EDT (-04:00).
        let t = resolve_local_time("2026-11-01", "01:30:00", "America/New_York").unwrap();
        assert_eq!(t.to_string(), "2026-11-01T05:30:00Z");
    }

    #[test]
    fn bad_inputs_name_the_problem() {
        assert!(resolve_local_time("2026-7-1", "09:00", "UTC")
            .unwrap_err()
            .contains("YYYY-MM-DD"));
        assert!(resolve_local_time("2026-07-01", "9am", "UTC")
            .unwrap_err()
            .contains("HH:MM"));
        assert!(resolve_local_time("2026-07-01", "09:00", "Mars/Olympus")
            .unwrap_err()
            .contains("Mars/Olympus"));
        assert!(resolve_local_time("2026-02-30", "09:00", "UTC")
            .unwrap_err()
            .contains("not a valid date"));
    }
}
