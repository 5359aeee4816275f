//! Effects: what a slice asks its host to do after the commit.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::ids::{CallId, EffectId, ThreadId};
use crate::input::Input;

/// An effect with its outbox id. The host commits these with the slice and marks each done once
/// performed; after a crash the outbox is flushed again (receivers deduplicate by input id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingEffect {
    /// Outbox id.
    pub id: EffectId,
    /// The effect.
    #[serde(flatten)]
    pub effect: Effect,
}

impl Effect {
    /// The `effect` tag: `send`, `send_at`, `dispatch`, `notify`, `output`, `forward` or
    /// `library`.
    pub fn kind(&self) -> &'static str {
        match self {
            Effect::Send { .. } => "send",
            Effect::SendAt { .. } => "send_at",
            Effect::Dispatch { .. } => "dispatch",
            Effect::Notify { .. } => "notify",
            Effect::Output { .. } => "output",
            Effect::Forward { .. } => "forward",
            Effect::Library { .. } => "library",
        }
    }

    /// A write of `category`'s shelf: `op` as that shelf reads it.
    pub fn library(category: &str, op: &impl Serialize) -> Self {
        Effect::Library {
            category: category.to_owned(),
            // Our own plain types: serializing them cannot fail.
            op: serde_json::to_value(op).unwrap_or_default(),
        }
    }

    /// The category of a [`Effect::Library`] write (`None` for other effects). A write kept in
    /// an outbox from before categories were named in it says which by its operation.
    pub fn library_category(&self) -> Option<&str> {
        let Effect::Library { category, op } = self else {
            return None;
        };
        if !category.is_empty() {
            return Some(category);
        }
        Some(match op.get("op").and_then(serde_json::Value::as_str) {
            Some("save_knowledge") => "knowledge",
            Some("publish_artifact" | "answer_comment") => "artifact",
            _ => "",
        })
    }

    /// An output event for `thread_id` at `at`.
    pub fn output(thread_id: &ThreadId, at: Timestamp, kind: OutputKind) -> Self {
        Effect::Output {
            event: OutputEvent::new(thread_id.clone(), at, kind),
        }
    }
}

/// Something the host does once the slice is committed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "snake_case")]
pub enum Effect {
    /// Put an input on a thread's queue now.
    Send {
        /// The input (its `thread_id` names the queue's group).
        input: Input,
    },
    /// Put an input on a thread's queue at a later time (a timer).
    SendAt {
        /// The input.
        input: Input,
        /// When.
        due: Timestamp,
    },
    /// Invoke an external tool (a tool server); its result comes back as a `tool_result` input.
    Dispatch {
        /// What to invoke.
        invocation: ToolInvocation,
    },
    /// Tell tool servers about a closed thread or a cancelled call (best effort).
    Notify {
        /// The notification.
        notification: Notification,
    },
    /// Show something to the user (CLI, output queue).
    Output {
        /// The event.
        event: OutputEvent,
    },
    /// A write of one category's shelf in the host's library (see [`crate::library`]): the
    /// category, and the write as that category's tool put it (its shelf reads it).
    Library {
        /// The category (`knowledge`, `artifact`, ...). Outboxes written before categories
        /// were named here have none; [`Effect::library_category`] finds it from `op`.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        category: String,
        /// The write.
        op: serde_json::Value,
    },
    /// Hand an input to the host its thread moved to (see [`crate::state::Migration`]).
    Forward {
        /// The destination's forwarding URL for the thread.
        url: String,
        /// The input, as it arrived here.
        input: Input,
    },
}

/// A call of an external tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInvocation {
    /// The calling thread.
    pub thread_id: ThreadId,
    /// The calling thread's lineage, root .. itself (RAP's `stack`).
    #[serde(rename = "stack")]
    pub lineage: Vec<ThreadId>,
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub tool: String,
    /// Validated arguments.
    pub args: serde_json::Value,
    /// For a tool server's tool: the server's base URL and its invocation endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerTarget>,
    /// The key the thread's notifications to that server are signed with, when it is not the
    /// host's own (a thread moved here, see [`crate::state::ThreadRecord::notify_keys`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_key: Option<String>,
}

/// Where a tool server's tool is invoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerTarget {
    /// The server's base URL, as configured (its auth settings are looked up by it).
    pub base_url: String,
    /// The manifest's `endpoint`, where invocations are POSTed.
    pub endpoint: String,
}

impl ToolInvocation {
    /// The error result a host sends back when it cannot deliver this call (no tool server for
    /// it, or the server refused it), so the thread never waits for a result that cannot come.
    pub fn undeliverable(&self, reason: &str) -> Input {
        Input {
            id: crate::ids::InputId::derived(self.call_id.as_str(), "undeliverable"),
            thread_id: self.thread_id.clone(),
            body: crate::input::InputBody::tool_error(
                self.call_id.clone(),
                format!("Error: the call could not be delivered: {reason}"),
            ),
        }
    }
}

/// A best-effort notification to tool servers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Notification {
    /// The thread was closed.
    CloseThread {
        /// The thread.
        thread_id: ThreadId,
        /// The thread's own notification keys, by server (see
        /// [`crate::state::ThreadRecord::notify_keys`]).
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        keys: std::collections::BTreeMap<String, String>,
    },
    /// A subscription was cancelled.
    CancelToolCall {
        /// The thread.
        thread_id: ThreadId,
        /// The subscribing call.
        call_id: CallId,
        /// The tool.
        tool: String,
        /// The thread's own notification keys, by server.
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        keys: std::collections::BTreeMap<String, String>,
    },
}

/// Receives output events as a slice produces them, before its commit (the embedded runtime
/// shows them at once; a host without one gets them as `output` effects after the commit).
pub type LiveOutput<'a> = dyn Fn(OutputEvent) + Send + Sync + 'a;

/// Something to show the user. Serialized flat: `{"thread_id": ..., "type": ..., ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OutputEvent {
    /// The thread it happened on.
    pub thread_id: ThreadId,
    /// The event's number in its thread (1, 2, ...; the SSE `id` of `GET
    /// /threads/{id}/events`), given when its slice commits it; a client that saw events up to
    /// `N` resumes after `N` and misses nothing. Absent for what is shown live only (streamed
    /// text, a host's own errors): those are not kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// When.
    #[schemars(with = "crate::schema::Rfc3339")]
    pub at: Timestamp,
    /// What.
    #[serde(flatten)]
    pub kind: OutputKind,
}

impl OutputEvent {
    /// An event not numbered yet (its slice numbers it, see [`OutputEvent::seq`]).
    pub fn new(thread_id: ThreadId, at: Timestamp, kind: OutputKind) -> Self {
        Self {
            thread_id,
            seq: None,
            at,
            kind,
        }
    }

    /// The event as JSON of at most `max_bytes` (a queue's message limit): whole when it fits;
    /// otherwise its longest texts are cut, each ending in a note of how much was left out and
    /// where to read all of it (`infinity thread show`, since the history keeps everything), and
    /// the event carries `"truncated": true`.
    pub fn to_json_within(&self, max_bytes: usize) -> Result<String, serde_json::Error> {
        let whole = serde_json::to_string(self)?;
        if whole.len() <= max_bytes {
            return Ok(whole);
        }
        let mut value = serde_json::to_value(self)?;
        if let Some(map) = value.as_object_mut() {
            map.insert("truncated".into(), serde_json::Value::Bool(true));
        }
        let thread = self.thread_id.clone();
        let note = move |left_out: usize| {
            format!(" [… {left_out} more bytes; `infinity thread show {thread}` has all of it]")
        };
        crate::json::shrink(&mut value, max_bytes, &note);
        serde_json::to_string(&value)
    }
}

/// The kinds of output event. Tagged with `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputKind {
    /// A message entered the thread (from the user or from the parent).
    UserMessage {
        /// The text.
        text: String,
    },
    /// The model wrote text.
    AssistantText {
        /// The text.
        text: String,
    },
    /// Text the model is writing, as it streams (live only; the whole text follows as
    /// `assistant_text`). Not stored and not sent to the output queue.
    AssistantDelta {
        /// The new text.
        text: String,
    },
    /// The deltas streamed so far are withdrawn (live only, like them): the model's stream broke
    /// off and it is asked again, so its text starts over. The deltas after this one add up to
    /// the `assistant_text` that follows.
    AssistantRestarted {},
    /// The model called a tool (or the runtime injected an event as a call).
    ToolCall {
        /// The call.
        call_id: CallId,
        /// The tool.
        name: String,
        /// The arguments.
        args: serde_json::Value,
    },
    /// A tool call got its result.
    ToolResult {
        /// The call.
        call_id: CallId,
        /// The tool.
        name: String,
        /// The result text.
        text: String,
        /// True for errors.
        is_error: bool,
        /// How the tool asks people to see the result (RAP `display_as`: `text`, `diff` and
        /// `image` segments, best first); the model gets `text`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        display_as: Vec<serde_json::Value>,
    },
    /// A child thread was spawned.
    ThreadSpawned {
        /// The child.
        child_id: ThreadId,
    },
    /// The thread was closed.
    ThreadClosed {},
    /// The thread is sleeping.
    Sleeping {
        /// The sleep call.
        call_id: CallId,
        /// Until when; absent for `sleep_until_event_or_input`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(with = "Option<crate::schema::Rfc3339>")]
        until: Option<Timestamp>,
    },
    /// A tool server needs the user to authorize it; the call waits.
    AuthorizationRequested {
        /// The call waiting for it.
        call_id: CallId,
        /// Where the user authorizes.
        auth_url: String,
    },
    /// A tool server asks the user to choose; answer with `infinity choose THREAD CALL INDEX`.
    ChoiceRequested {
        /// The call waiting for it.
        call_id: CallId,
        /// The question.
        prompt: String,
        /// The options, numbered from 0.
        choices: Vec<String>,
        /// The option sent on dismissal.
        default: usize,
    },
    /// A question was answered (by a person, or by its deadline); it is no longer open.
    ChoiceAnswered {
        /// The call whose question it was.
        call_id: CallId,
        /// The option taken, numbered from 0.
        selected: usize,
        /// Its text.
        choice: String,
        /// True when nobody answered and the question's deadline did (an approval's default).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        by_deadline: bool,
    },
    /// The model called a client tool: the application that runs it answers with `POST
    /// /threads/{id}/tool_results/{call_id}` (or a `tool_result` input). Shown once the call is
    /// recorded, so an answer posted at once finds it.
    ClientToolCall {
        /// The call, which the answer names.
        call_id: CallId,
        /// The tool.
        name: String,
        /// The arguments, checked against the tool's schema.
        args: serde_json::Value,
        /// When the call gets an error result if no answer came, if its tool has a deadline.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(with = "Option<crate::schema::Rfc3339>")]
        deadline: Option<Timestamp>,
    },
    /// New content for one of the thread's views.
    ViewUpdated {
        /// The view's type.
        view_type: String,
        /// Its content (empty: the view was cleared).
        content: serde_json::Map<String, serde_json::Value>,
    },
    /// The thread's plan changed; `checklist` shows it (`[ ]`, `[/]`, `[x]`, `[!]`).
    PlanUpdated {
        /// One line per step.
        checklist: String,
    },
    /// A widget to show (the `widget` tool); clients render it, `infinity` as text.
    Widget {
        /// The UI description (see `schemas/widget.schema.json`).
        ui: serde_json::Value,
    },
    /// The thread called `finish`.
    Finished {
        /// How it finished.
        status: crate::state::FinishStatus,
        /// The result.
        result: serde_json::Value,
    },
    /// The thread's title changed.
    TitleChanged {
        /// The new title.
        title: String,
    },
    /// A person interrupted the thread; its calls in flight were cancelled.
    Interrupted {
        /// How many calls were cancelled.
        calls: u32,
        /// True when the interruption found nothing in flight: no pending call, no open
        /// question, no open child thread to pass it to (absent in events of older versions,
        /// and when false).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        nothing_in_flight: bool,
    },
    /// The thread ran into an error (recorded in its history too).
    Error {
        /// What went wrong.
        text: String,
    },
    /// The events numbered after `after` were shown by a slice that then failed, so they were
    /// not kept: forget them (the next events are numbered from `after + 1` again). Live only;
    /// its SSE `id` is `after`.
    Withdrawn {
        /// The last event still standing.
        after: u64,
    },
}

impl OutputKind {
    /// The `type` tag.
    pub fn kind(&self) -> &'static str {
        match self {
            OutputKind::UserMessage { .. } => "user_message",
            OutputKind::AssistantText { .. } => "assistant_text",
            OutputKind::AssistantDelta { .. } => "assistant_delta",
            OutputKind::AssistantRestarted {} => "assistant_restarted",
            OutputKind::ToolCall { .. } => "tool_call",
            OutputKind::ToolResult { .. } => "tool_result",
            OutputKind::ThreadSpawned { .. } => "thread_spawned",
            OutputKind::ThreadClosed {} => "thread_closed",
            OutputKind::Interrupted { .. } => "interrupted",
            OutputKind::Sleeping { .. } => "sleeping",
            OutputKind::TitleChanged { .. } => "title_changed",
            OutputKind::PlanUpdated { .. } => "plan_updated",
            OutputKind::AuthorizationRequested { .. } => "authorization_requested",
            OutputKind::ChoiceRequested { .. } => "choice_requested",
            OutputKind::ChoiceAnswered { .. } => "choice_answered",
            OutputKind::ClientToolCall { .. } => "client_tool_call",
            OutputKind::ViewUpdated { .. } => "view_updated",
            OutputKind::Finished { .. } => "finished",
            OutputKind::Widget { .. } => "widget",
            OutputKind::Error { .. } => "error",
            OutputKind::Withdrawn { .. } => "withdrawn",
        }
    }

    /// True for an event that asks someone to answer (a question, a client tool's call): it is
    /// shown only once its slice is committed, so an answer sent at once finds what it answers.
    pub fn awaits_answer(&self) -> bool {
        matches!(
            self,
            OutputKind::ChoiceRequested { .. } | OutputKind::ClientToolCall { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_too_big_for_a_message_is_cut_to_fit_and_says_where_the_rest_is() {
        let thread = ThreadId::new("t1").unwrap();
        let event = OutputEvent {
            thread_id: thread.clone(),
            seq: None,
            at: Timestamp::UNIX_EPOCH,
            kind: OutputKind::AssistantText {
                text: "word ".repeat(10_000),
            },
        };
        let whole = event.to_json_within(100_000).unwrap();
        assert_eq!(
            whole,
            serde_json::to_string(&event).unwrap(),
            "fits: untouched"
        );
        let cut = event.to_json_within(2_000).unwrap();
        assert!(cut.len() <= 2_000, "{}", cut.len());
        let value: serde_json::Value = serde_json::from_str(&cut).unwrap();
        assert_eq!(value["truncated"], true);
        let back: OutputEvent = serde_json::from_str(&cut).unwrap();
        assert_eq!(back.thread_id, thread);
        let OutputKind::AssistantText { text } = back.kind else {
            panic!("{back:?}");
        };
        assert!(text.starts_with("word word"));
        assert!(
            text.ends_with("more bytes; `infinity thread show t1` has all of it]"),
            "{text}"
        );
    }

    #[test]
    fn an_effect_kind_is_its_tag() {
        let thread = ThreadId::new("t1").unwrap();
        let effects = [
            Effect::Send {
                input: Input::user_message(thread.clone(), "hi"),
            },
            Effect::SendAt {
                input: Input::user_message(thread.clone(), "hi"),
                due: Timestamp::UNIX_EPOCH,
            },
            Effect::output(&thread, Timestamp::UNIX_EPOCH, OutputKind::ThreadClosed {}),
        ];
        for effect in effects {
            let tag = serde_json::to_value(&effect).unwrap()["effect"].clone();
            assert_eq!(tag, effect.kind());
        }
    }
}
