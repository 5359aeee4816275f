//! Input messages: everything that reaches a thread arrives on its input queue as one of these.

mod answer;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::history::Item;
use crate::ids::{CallId, InputId, ThreadId};
use crate::state::{DelegatedBy, Delegation, ParentLink};

pub use answer::{Answer, AnswerTo, Answered, MAX_KEPT_INPUT_BYTES};

/// One message on a thread's input queue.
///
/// On the wire it is a flat JSON object: `{"id": ..., "thread_id": ..., "type": "user_message",
/// "text": ...}`. The `id` is the deduplication key: an input whose id was already processed by
/// its thread changes nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Input {
    /// Unique id of this input.
    pub id: InputId,
    /// The thread it is for.
    pub thread_id: ThreadId,
    /// What it says.
    #[serde(flatten)]
    pub body: InputBody,
}

impl Input {
    /// A new input with a fresh id.
    pub fn new(thread_id: ThreadId, body: InputBody) -> Self {
        Self {
            id: InputId::generate(),
            thread_id,
            body,
        }
    }

    /// The timer input that ends the dispatched call `call_id` when its deadline (`after`, as
    /// the agent file gives it) has passed: its id comes from the call, so the timer armed
    /// again (after a move to another host) counts once.
    pub fn call_deadline(thread_id: &ThreadId, call_id: &CallId, after: &str) -> Self {
        Self {
            id: InputId::derived(call_id.as_str(), "deadline"),
            thread_id: thread_id.clone(),
            body: InputBody::CallDeadline {
                call_id: call_id.clone(),
                after: after.to_owned(),
                result: None,
            },
        }
    }

    /// A user message with a fresh id.
    pub fn user_message(thread_id: ThreadId, text: impl Into<String>) -> Self {
        Self::new(
            thread_id,
            InputBody::UserMessage {
                text: text.into(),
                agent: None,
                while_busy: None,
            },
        )
    }
}

/// The kinds of input. Tagged with `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InputBody {
    /// A person's message. The first one to an unknown thread id creates a root thread.
    UserMessage {
        /// The text.
        text: String,
        /// For a message that creates a conversation: the agent it runs (`NAME`, or
        /// `NAME@VERSION` of a stored one); without it, the host's default agent. Ignored by a
        /// thread that exists.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        /// What the message does if the thread is busy, instead of what its agent says
        /// (`while_busy:`, default `move_on`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        while_busy: Option<crate::state::WhileBusy>,
    },
    /// The result of a dispatched call.
    ToolResult {
        /// The call it answers.
        call_id: CallId,
        /// The result text.
        text: String,
        /// True when the call failed.
        #[serde(default)]
        is_error: bool,
        /// True when more events will follow as subscription events.
        #[serde(default)]
        subscription: bool,
        /// Images that came with the result.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<crate::history::Image>,
        /// How people should see the result (RAP `display_as`), best segment first.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        display_as: Vec<serde_json::Value>,
    },
    /// An event of an active subscription.
    SubscriptionEvent {
        /// The subscribing call.
        call_id: CallId,
        /// The event text.
        text: String,
        /// True: inject the event into this thread. False: handle it in a new child thread.
        #[serde(default)]
        associative: bool,
        /// True for the subscription's last event.
        #[serde(default, rename = "final")]
        is_final: bool,
    },
    /// A timer set by a sleep call fell due.
    TimerWakeUp {
        /// The sleep call.
        call_id: CallId,
    },
    /// A child thread reported to its parent (this thread).
    ChildReport {
        /// The child.
        child_id: ThreadId,
        /// The call (in this thread) that spawned the child.
        call_id: CallId,
        /// The report.
        report: String,
        /// True when the child shut down with this report.
        #[serde(default)]
        closed: bool,
    },
    /// The parent sent this thread a message.
    MessageFromParent {
        /// The text.
        text: String,
    },
    /// Creates a child thread. The first input of every child.
    ChildSeed {
        /// The agent that runs the child.
        agent: String,
        /// Where the child forks from its parent.
        parent: ParentLink,
        /// The parent's lineage (root .. parent); on the wire `parent_stack`.
        #[serde(rename = "parent_stack")]
        parent_lineage: Vec<ThreadId>,
        /// The child's first own history entries.
        seed: Vec<Item>,
        /// The parent's delegation depth, which the child shares.
        #[serde(default)]
        depth: u32,
    },
    /// Creates a thread for an `agent` call: a copy of the calling agent on a side task, with a
    /// fresh context. The first input of every delegated thread.
    DelegatedTask {
        /// The agent that runs it (the caller's).
        agent: String,
        /// The caller, which gets the result.
        delegated_by: DelegatedBy,
        /// Its delegation depth (the caller's plus one).
        depth: u32,
        /// The task and its context, as its first message.
        text: String,
    },
    /// A tool server needs the user to authorize it before the call can go on (RAP `oauth`).
    /// The call stays pending; the model is told authorization is in progress.
    ToolAuthorization {
        /// The call.
        call_id: CallId,
        /// Where the user authorizes (shown to them, not to the model).
        auth_url: String,
    },
    /// A tool server asks the user to choose (RAP `user_choice`). The call stays pending until
    /// the tool's result comes.
    UserChoiceRequest {
        /// The call.
        call_id: CallId,
        /// The question.
        prompt: String,
        /// The options, in order.
        choices: Vec<String>,
        /// The option sent if the user dismisses the question.
        default: usize,
        /// Where the answer is POSTed (`{id, selected}`).
        response_url: String,
    },
    /// The user's choice was sent to the tool server: the question is no longer open.
    UserChoiceAnswered {
        /// The call.
        call_id: CallId,
        /// The option sent.
        selected: usize,
        /// True when nobody could answer (`infinity run` runs without people) and the default
        /// was taken for them: a declined approval tells the model so, not that a person said no.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unattended: bool,
    },
    /// New content for one of the thread's views (RAP `view_update`); an empty object clears it.
    ViewUpdate {
        /// The view's type (e.g. `diff`).
        view_type: String,
        /// Its content, opaque to the runtime.
        content: serde_json::Map<String, serde_json::Value>,
    },
    /// A delegation of this conversation started or ended (kept by the root thread).
    DelegationUpdate {
        /// The delegation.
        delegation: Delegation,
        /// True when it started, false when it ended.
        running: bool,
    },
    /// An input for one internal tool category (a person's comment on one of the thread's
    /// pages, for `artifact`): the engine hands `event` to that category's shelf in the host's
    /// library ([`crate::library::Shelf::on_event`]), which says what the model is shown.
    CategoryEvent {
        /// The category's flag.
        category: String,
        /// What the category's shelf reads.
        event: serde_json::Value,
    },
    /// A comment on a page as it was sent before category events were generic (wire name
    /// `artifact_comment`): read as the `artifact` category's event, never written.
    #[serde(rename = "artifact_comment")]
    ArtifactCommentV1(serde_json::Map<String, serde_json::Value>),
    /// The user pressed a widget's button.
    WidgetAction {
        /// The button's `action`.
        action: String,
        /// The values of the widget's inputs and selects, by name.
        #[serde(default)]
        values: serde_json::Map<String, serde_json::Value>,
    },
    /// A child wrote a note to the conversation's memory (kept by the root thread).
    MemoryWrite {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// A child tells its conversation's root what it used this hour (the conversation's hourly
    /// limits; kept by the root thread).
    ConversationUsage {
        /// The counts, of the hour they were made in.
        usage: crate::state::HourlyUsage,
        /// What the thread used and cost since its last report, for the conversation's lifetime
        /// totals (its budget). A delegation's root reports its whole tree's to the conversation
        /// that delegated to it.
        #[serde(default)]
        total: crate::model::Usage,
    },
    /// A person sets the conversation's lifetime budget (to its root thread; what it leaves
    /// out stays as it was). Threads stopped at the budget go on when it is no longer reached;
    /// the root passes it down to the threads below it.
    SetBudget {
        /// Dollars the conversation may spend over its life.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usd: Option<crate::cost::Usd>,
        /// Tokens it may use over its life.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<u64>,
    },
    /// The parent asks this thread to close.
    CloseRequest {
        /// The parent's `close_thread` call, answered once the thread has closed.
        call_id: CallId,
    },
    /// Tells the thread nothing: it makes the host run the thread now, which performs what its
    /// outbox holds first (`infinity thread outbox --retry` sends one after putting effects
    /// back).
    Nudge {},
    /// The thread's own hand-off between slices: the slice before it stopped before a completion
    /// because its host's time was running out (a Lambda invocation's deadline), committed what
    /// it had, and sent this so the next slice goes on where it stopped. It carries how many
    /// completions the turn has run so far, so `limits.max_completions_per_slice` holds across
    /// the hand-offs.
    Continue {
        /// Completions the turn ran before this hand-off (in all its slices so far).
        completions: u32,
    },
    /// A person interrupts the thread: the calls in flight are cancelled (each gets an
    /// "interrupted" result; tool servers get `/cancel_tool_call`; later results are dropped)
    /// and the model is not asked to go on until the next message. With `tree`, every open
    /// descendant is interrupted too.
    Interrupt {
        /// Interrupt the thread's open descendants as well.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        tree: bool,
    },
    /// An occurrence of one of the thread's recurring schedules.
    Schedule {
        /// The schedule.
        schedule_id: String,
        /// The occurrence (when it was due).
        at: jiff::Timestamp,
    },
    /// A person creates a recurring schedule on the thread: `args` as `schedule_create` takes
    /// them, and the id it gets.
    ScheduleCreate {
        /// The new schedule's id (`sch-...`).
        schedule_id: String,
        /// `message`, `rrule` or `cron`, `timezone`, `start`, `until`, `count`.
        args: serde_json::Value,
    },
    /// A person deletes one of the thread's recurring schedules.
    ScheduleDelete {
        /// The schedule.
        schedule_id: String,
    },
    /// A person closes the thread. Its open children are closed with it, and theirs (a thread
    /// never outlives its parent): pending calls are cancelled, subscriptions cancelled at their
    /// servers, and each parent gets its children's final reports.
    Close {},
    /// A person moves the thread to another version of its agent (`NAME` for the newest
    /// stored one, `NAME@VERSION` for that one, older ones included): the thread runs it from
    /// this slice on, and a conversation's root takes the version's tool servers afresh. A
    /// thread keeps its agent: another agent's name is refused, with a notice.
    UseAgent {
        /// The version to run.
        agent: String,
    },
    /// A person switches the model the thread's completions use (`PROVIDER:MODEL`), from this
    /// slice on; `None` goes back to the agent's model.
    UseModel {
        /// The model, or none for the agent's.
        #[serde(default)]
        model: Option<String>,
    },
    /// A dispatched call reached its tool server's deadline (`deadline` in the agent file): it
    /// gets an error result unless its result came first.
    CallDeadline {
        /// The call.
        call_id: CallId,
        /// The deadline as the agent file gives it (e.g. `2h`), for the error text.
        after: String,
        /// The call's result when the deadline passes, in place of the tool-server error (a
        /// tool whose calls end with a result whatever became of them, like `remote_exec`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<String>,
    },
    /// A call waiting for a person's approval reached its rule's deadline (`approvals:` in the
    /// agent file): the rule's default answers the question, unless a person did first.
    ApprovalDeadline {
        /// The call.
        call_id: CallId,
        /// The deadline as the agent file gives it (e.g. `24h`), for the call's result.
        after: String,
    },
}

impl InputBody {
    /// The category an input is for and what it brings, for an input a library category takes
    /// (a person's comment on a page: `artifact`); the engine hands it to that category's shelf
    /// ([`crate::library::Shelf::on_event`]).
    pub fn category_event(&self) -> Option<(&str, serde_json::Value)> {
        match self {
            InputBody::CategoryEvent { category, event } => Some((category, event.clone())),
            InputBody::ArtifactCommentV1(event) => {
                Some(("artifact", serde_json::Value::Object(event.clone())))
            }
            _ => None,
        }
    }

    /// A successful result for a dispatched call.
    pub fn tool_result(call_id: CallId, text: impl Into<String>) -> Self {
        InputBody::ToolResult {
            call_id,
            text: text.into(),
            is_error: false,
            subscription: false,
            images: Vec::new(),
            display_as: Vec::new(),
        }
    }

    /// A failed result for a dispatched call.
    pub fn tool_error(call_id: CallId, text: impl Into<String>) -> Self {
        InputBody::ToolResult {
            call_id,
            text: text.into(),
            is_error: true,
            subscription: false,
            images: Vec::new(),
            display_as: Vec::new(),
        }
    }

    /// The `type` tag of this input, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            InputBody::UserMessage { .. } => "user_message",
            InputBody::ToolResult { .. } => "tool_result",
            InputBody::SubscriptionEvent { .. } => "subscription_event",
            InputBody::TimerWakeUp { .. } => "timer_wake_up",
            InputBody::ChildReport { .. } => "child_report",
            InputBody::MessageFromParent { .. } => "message_from_parent",
            InputBody::ChildSeed { .. } => "child_seed",
            InputBody::DelegatedTask { .. } => "delegated_task",
            InputBody::ToolAuthorization { .. } => "tool_authorization",
            InputBody::UserChoiceRequest { .. } => "user_choice_request",
            InputBody::UserChoiceAnswered { .. } => "user_choice_answered",
            InputBody::ViewUpdate { .. } => "view_update",
            InputBody::DelegationUpdate { .. } => "delegation_update",
            InputBody::CloseRequest { .. } => "close_request",
            InputBody::Nudge {} => "nudge",
            InputBody::Continue { .. } => "continue",
            InputBody::Interrupt { .. } => "interrupt",
            InputBody::Close {} => "close",
            InputBody::Schedule { .. } => "schedule",
            InputBody::ScheduleDelete { .. } => "schedule_delete",
            InputBody::ScheduleCreate { .. } => "schedule_create",
            InputBody::CallDeadline { .. } => "call_deadline",
            InputBody::ApprovalDeadline { .. } => "approval_deadline",
            InputBody::MemoryWrite { .. } => "memory_write",
            InputBody::WidgetAction { .. } => "widget_action",
            InputBody::CategoryEvent { .. } => "category_event",
            InputBody::ArtifactCommentV1(..) => "artifact_comment",
            InputBody::ConversationUsage { .. } => "conversation_usage",
            InputBody::SetBudget { .. } => "set_budget",
            InputBody::UseAgent { .. } => "use_agent",
            InputBody::UseModel { .. } => "use_model",
        }
    }
}

/// An input that should be delivered later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimedInput {
    /// The input.
    pub input: Input,
    /// When to deliver it.
    pub due: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_message_wire_format_is_flat() {
        let input: Input = serde_json::from_str(
            r#"{"type":"user_message","thread_id":"abc","text":"hi","id":"m1"}"#,
        )
        .unwrap();
        assert_eq!(input.thread_id.as_str(), "abc");
        assert_eq!(
            input.body,
            InputBody::UserMessage {
                text: "hi".into(),
                agent: None,
                while_busy: None,
            }
        );
        let back = serde_json::to_value(&input).unwrap();
        assert_eq!(back["type"], "user_message");
        assert_eq!(back["id"], "m1");
    }

    #[test]
    fn bad_thread_id_is_rejected_with_reason() {
        let err = serde_json::from_str::<Input>(
            r#"{"type":"user_message","thread_id":"a/b","text":"hi","id":"m1"}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("a/b"), "{err}");
    }
}
