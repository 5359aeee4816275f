//! The built-in tools every agent has: sleeps ([`sleep`]), thread management ([`threads`]) and
//! recurring schedules ([`schedule`]).

pub mod schedule;
pub(crate) mod sleep;
pub(crate) mod threads;

use std::sync::Arc;

use serde_json::Value;

use super::Tool;

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
    "schedule_create",
    "schedule_list",
    "schedule_delete",
];

/// One instance of every built-in tool.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(sleep::Sleep),
        Arc::new(sleep::SleepUntil),
        Arc::new(sleep::SleepUntilEventOrInput),
        Arc::new(threads::SpawnThread),
        Arc::new(threads::ReportToParent),
        Arc::new(threads::CloseThread),
        Arc::new(threads::SendMessageToChild),
        Arc::new(threads::CancelSubscription),
        Arc::new(schedule::ScheduleCreate),
        Arc::new(schedule::ScheduleList),
        Arc::new(schedule::ScheduleDelete),
    ]
}

/// A string argument (the registry checked the schema; absent reads as empty).
fn str_arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or_default()
}
