//! The durable thread record and everything it embeds: pending calls, children, the plan, the
//! `finish` output, the conversation's memory, delegations and toolset.
//!
//! This is the bottom layer of the core, with [`crate::history`], [`crate::input`] and
//! [`crate::effect`]: it imports nothing from `tools` or `engine`, which build on it.

mod conversation;
mod hourly;
mod memory;
mod migration;
mod output;
mod plan;
mod schedule;
pub mod thread_list;
mod toolset;
pub mod waits;

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::history::Item;
use crate::ids::{CallId, InputId, ThreadId};
use crate::model::Usage;

pub use conversation::Conversation;
pub use hourly::{HourlyUsage, Suspension};
pub use memory::{
    write as memory_write, Memory, MemoryError, MAX_KEYS, MAX_KEY_CHARS, MAX_VALUE_CHARS,
};
pub use migration::{Migration, MigrationState};
pub use output::{FinishStatus, ThreadOutput};
pub use plan::{Plan, PlanStep, StepStatus};
pub use schedule::Schedule;
pub use thread_list::{Activity, Phrase, ThreadKind, ThreadPage, ThreadQuery, ThreadSummary};
pub use toolset::{Deadline, DiscoveredTool, Toolset};

/// The current schema version of [`ThreadRecord`]. Bumped on an incompatible change, with a
/// migration in [`ThreadRecord`]'s loader.
pub const RECORD_SCHEMA: u32 = 1;

/// Whether a thread still takes input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThreadStatus {
    /// The thread takes input.
    Open,
    /// The thread was closed; inputs to it are dropped.
    Closed,
}

/// Where a child thread came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ParentLink {
    /// The parent thread.
    pub thread_id: ThreadId,
    /// The parent's call that spawned this thread (`spawn_thread`, or the subscribing call for a
    /// thread spawned to handle a subscription event).
    pub call_id: CallId,
    /// The tool name of that call.
    pub tool: String,
    /// The arguments of that call (a preview, see [`args_preview`]).
    pub args: serde_json::Value,
    /// How many entries of the parent's *view* (its inherited history plus its own) this thread
    /// inherits. The child's view is the parent's view truncated here, followed by its own entries.
    pub fork_at: u64,
    /// The parent's newest summary within the inherited part, if any (see
    /// [`ThreadRecord::latest_summary`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<SummaryRef>,
}

/// Where a thread's newest summary is in its view, and how many view entries it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SummaryRef {
    /// The summary entry's index in the view.
    pub index: u64,
    /// How many entries (from the start of the view) it stands for.
    pub covers: u64,
}

/// The most bytes of a call's arguments the record keeps (in a pending call, a child's link, a
/// subscription); the history has them whole.
pub const ARGS_PREVIEW_BYTES: usize = 1_000;

/// A call's arguments as the record keeps them: whole when small, otherwise cut to
/// [`ARGS_PREVIEW_BYTES`] with a note. The record is rewritten on every commit, so it must not
/// grow with what the model writes; the history entry of the call keeps the arguments whole.
pub fn args_preview(args: &serde_json::Value) -> serde_json::Value {
    let mut preview = args.clone();
    crate::json::shrink(&mut preview, ARGS_PREVIEW_BYTES, &|left_out| {
        format!(" [… {left_out} more bytes, in the call itself]")
    });
    preview
}

/// How a pending call is waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PendingKind {
    /// The result comes back through the input queue; the next completion waits for it, unless
    /// new input arrives first (the call then gets a stand-in result and its real result comes
    /// as an event).
    Dispatched,
    /// A sleep: holds nothing back. New input wakes the thread; the result is appended later.
    Passive,
}

/// What a person's message does when it arrives while the thread is busy: while a call it
/// dispatched (a tool server's, a delegation, a question to a person) has no result yet and the
/// conversation has not moved on from it. An agent file sets it (`while_busy:`), a message may
/// override it. A sleeping thread is not busy: a message wakes it, whatever the policy.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum WhileBusy {
    /// The conversation moves on: the calls in flight get stand-in results (their real results
    /// come later, as events) and the model answers the message now.
    #[default]
    MoveOn,
    /// The message waits until the thread's turn ends (every call answered, the model done),
    /// then the model answers it.
    Queue,
    /// The calls in flight are cancelled (their tool servers told so), then the model answers
    /// the message.
    Interrupt,
    /// The message is refused, with an error naming why; the thread goes on with its turn.
    Reject,
}

impl WhileBusy {
    /// Every policy, as agent files and messages spell them.
    pub const NAMES: &'static str = "move_on, queue, interrupt or reject";
}

impl std::str::FromStr for WhileBusy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        serde_json::from_value(serde_json::Value::String(text.to_owned()))
            .map_err(|_| format!("`{text}` is not a policy: {}", Self::NAMES))
    }
}

/// A tool call that has no result yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PendingCall {
    /// The call.
    pub call_id: CallId,
    /// The tool's name.
    pub tool: String,
    /// The call's arguments (a preview, see [`args_preview`]).
    pub args: serde_json::Value,
    /// How it is waited for.
    pub kind: PendingKind,
    /// When the call was issued.
    #[schemars(with = "crate::schema::Rfc3339")]
    pub issued_at: Timestamp,
    /// True once the conversation moved on without the result (a placeholder result stands in
    /// the history); the real result, when it comes, is injected as a new event.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub moved_on: bool,
    /// For timers: when the result is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<crate::schema::Rfc3339>")]
    pub due: Option<Timestamp>,
    /// True once the tool server asked the user to authorize it (RAP `oauth`): the call stays
    /// pending, invisibly to the model, until the tool sends its result.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub authorizing: bool,
    /// True when the call delegated a task to a thread of its own (`agent`, a configured
    /// agent's tool, `execute_tool` of an agent): cancelling it closes that thread.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delegated: bool,
    /// The W3C `traceparent` of the call's span, when traces are exported: the span of its
    /// result links to it ([`crate::telemetry`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// For a call of a client tool (an agent file's `client_tools:`): the calling application
    /// runs it and posts its result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<Box<ClientCall>>,
    /// For a call that waits for a person's approval before it runs (an agent file's
    /// `approvals:`): what runs once approved. The call's question is among the thread's
    /// [`open_choices`](ThreadRecord::open_choices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Box<PendingApproval>>,
}

/// The most bytes of arguments (as JSON) the record keeps whole for a call that someone outside
/// the runtime must see until it is answered: a call waiting for approval (it runs with them),
/// a client tool's call (its application may ask for it again after a restart). A bigger call
/// gets an error result instead; every other call keeps an [`args_preview`].
pub const MAX_HELD_ARGS_BYTES: usize = 32_000;

/// A client tool's call, as the record holds it until the application answers (see
/// [`PendingCall::client`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClientCall {
    /// The call's arguments, whole (at most [`MAX_HELD_ARGS_BYTES`]): a stream that attaches
    /// shows the call again with them.
    pub args: serde_json::Value,
    /// The tool's deadline, if it has one (a tool server's is in the session's [`Toolset`]):
    /// kept so that a thread moved to another host arms it there again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Deadline>,
}

/// A call waiting for a person's approval (see [`PendingCall::approval`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PendingApproval {
    /// The call's arguments, whole (at most [`MAX_HELD_ARGS_BYTES`]): they run as they are
    /// once approved.
    pub args: serde_json::Value,
    /// How long after the call the question answers itself, if its rule sets a deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Deadline>,
    /// What it answers then.
    #[serde(default)]
    pub default: ApprovalDefault,
}

/// What an approval question answers when its deadline passes unanswered.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDefault {
    /// The call does not run; the model is told nobody approved it in time.
    #[default]
    Decline,
    /// The call runs.
    Approve,
}

/// Entries held back while dispatched calls are pending (see [`ThreadRecord::deferred`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Deferred {
    /// The input they came from.
    pub input_id: InputId,
    /// The entries to append.
    pub items: Vec<Item>,
}

/// An active subscription: a tool call whose result said more events will follow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Subscription {
    /// The subscribing call.
    pub call_id: CallId,
    /// The tool's name.
    pub tool: String,
    /// The call's arguments (a preview, see [`args_preview`]).
    pub args: serde_json::Value,
    /// The call's `wake_if` expression: events that do not match it wake nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_if: Option<String>,
    /// Events that did not match `wake_if` since the model last heard of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filtered: Option<Filtered>,
}

/// Events a subscription's `wake_if` kept from the model, folded into a count until its next
/// completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Filtered {
    /// How many.
    pub count: u64,
    /// When the first of them arrived.
    #[schemars(with = "crate::schema::Rfc3339")]
    pub since: Timestamp,
    /// The newest of them (its first 300 characters).
    pub last: String,
}

/// A child thread as its parent sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChildLink {
    /// The child's id.
    pub thread_id: ThreadId,
    /// The call that spawned it.
    pub call_id: CallId,
    /// The tool name of that call.
    pub tool: String,
    /// The arguments of that call (a preview, see [`args_preview`]).
    pub args: serde_json::Value,
    /// True once the child reported that it shut down.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closed: bool,
}

/// Where a delegated thread (the `agent` tool) came from: the calling thread and call, which get
/// its result, and the conversation whose running delegations it counts against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DelegatedBy {
    /// The thread whose `agent` call started this one.
    pub thread_id: ThreadId,
    /// That call; this thread's result becomes its result.
    pub call_id: CallId,
    /// The root thread of the calling conversation, which counts its running delegations.
    pub conversation: ThreadId,
    /// True once the result went back to the caller.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub returned: bool,
}

/// A running delegation of a conversation, as its root thread keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Delegation {
    /// The delegated thread.
    pub thread_id: ThreadId,
    /// The thread that called `agent`.
    pub caller: ThreadId,
    /// The call.
    pub call_id: CallId,
}

/// A question a tool server asked the user (RAP `user_choice`), open until answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpenChoice {
    /// The call that asked.
    pub call_id: CallId,
    /// The question.
    pub prompt: String,
    /// The options.
    pub choices: Vec<String>,
    /// The option sent on dismissal.
    pub default: usize,
    /// Where the answer goes; empty for a question the runtime asked itself (an approval),
    /// which the answer's input settles.
    pub response_url: String,
}

/// Everything about a thread except its history entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThreadRecord {
    /// Schema version of this record, see [`RECORD_SCHEMA`].
    pub schema: u32,
    /// The thread's id.
    pub id: ThreadId,
    /// The agent (by name) that runs this thread.
    pub agent: String,
    /// The model this thread's completions use instead of its agent's (`PROVIDER:MODEL`), when a
    /// person switched it (`use_model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The parent, for child threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
    // Its lineage, kept as `stack`: the name RAP's invocation and a model's prompt give it.
    /// The ids from the root thread to this one, inclusive.
    #[serde(rename = "stack")]
    pub lineage: Vec<ThreadId>,
    /// Open or closed.
    pub status: ThreadStatus,
    /// A title, set by a tool such as `set_title`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The thread's output (the `finish` tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<ThreadOutput>,
    /// What the threads of its conversation share, kept on the root thread only (a child's is
    /// empty): written as the record's own fields, as before there was one field for them.
    #[serde(flatten)]
    pub conversation: Conversation,
    /// How many delegations (`agent` calls) lie between this thread's conversation and one a
    /// person started (0). Children inherit it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub depth: u32,
    /// For a thread started by the `agent` tool: who gets its result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegated_by: Option<DelegatedBy>,
    /// Questions tool servers asked the user, not answered yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_choices: Vec<OpenChoice>,
    /// The latest content of each of the thread's views (RAP `view_update`), by view type.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub views: std::collections::BTreeMap<String, serde_json::Map<String, serde_json::Value>>,
    /// The thread's plan (the `plan` internal tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
    /// Calls without results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_calls: Vec<PendingCall>,
    /// Inputs an older version held back while dispatched calls were pending, in arrival order;
    /// appended at the next input. New input no longer waits: pending calls get stand-in
    /// results instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deferred: Vec<Deferred>,
    /// People's messages that arrived while the thread was busy under the `queue` policy
    /// ([`WhileBusy::Queue`]), in arrival order: the model answers them once its turn ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queued: Vec<Deferred>,
    /// What a person's message does while the thread is busy, when the message does not say:
    /// its agent's `while_busy:`, as its last slice saw it (absent: `move_on`). Hosts read it to
    /// refuse a message at once under `reject`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub while_busy: Option<WhileBusy>,
    /// Active subscriptions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subscriptions: Vec<Subscription>,
    /// Recurring schedules (the `schedule_*` tools); closing the thread deletes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<Schedule>,
    /// What each category of the library keeps on the thread, by category (the `artifact`
    /// category: the pages it published and the comments on them), as that category writes
    /// it (see [`crate::library::Shelf`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub category_notes: BTreeMap<String, serde_json::Value>,
    /// A record written before [`ThreadRecord::category_notes`] kept the `artifact` category's
    /// notes under `artifacts`; they stay there, written back as read, until
    /// [`ThreadRecord::notes_mut`] moves them (so an older record loses nothing).
    #[serde(default, rename = "artifacts", skip_serializing_if = "Option::is_none")]
    legacy_notes: Option<serde_json::Value>,
    /// Children spawned by this thread.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<ChildLink>,
    /// Token usage.
    #[serde(default)]
    pub usage: Usage,
    /// What this thread used in the current hour (its hourly limits).
    #[serde(default, skip_serializing_if = "HourlyUsage::is_empty")]
    pub hourly: HourlyUsage,
    /// Set when the thread reached an hourly limit: it runs no completion until a person writes
    /// to it (or, for a child, its parent does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended: Option<Suspension>,
    /// Number of the thread's own history entries.
    pub history_len: u64,
    // Kept as `events`.
    /// Number of the output events the thread has shown and kept: the last one's
    /// [`seq`](crate::effect::OutputEvent::seq).
    #[serde(default, rename = "events", skip_serializing_if = "is_zero_u64")]
    pub last_event_seq: u64,
    /// The newest summary in the thread's view (its own, or inherited at the fork), so the engine
    /// finds it without scanning the history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_summary: Option<SummaryRef>,
    /// The size of the last prompt, in tokens (input + cache reads + cache writes); compaction
    /// starts when it passes the agent's share of the model's context window.
    #[serde(default)]
    pub last_prompt_tokens: u64,
    /// Set while the thread moves to another host, and once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<Migration>,
    /// The keys this thread's notifications to tool servers (by base URL) are signed with when
    /// they are not this host's own: a thread moved here keeps the keys its servers learned
    /// where it ran before.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub notify_keys: std::collections::BTreeMap<String, String>,
    /// Inputs that arrived while the thread was moving, in arrival order, each as its JSON (the
    /// record sits below inputs in the layers): forwarded to the destination when the move
    /// completes, applied here if it is abandoned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<serde_json::Value>,
    /// Incremented on every commit; the store checks it (optimistic concurrency).
    pub version: u64,
    /// When the thread was created.
    #[schemars(with = "crate::schema::Rfc3339")]
    pub created_at: Timestamp,
    /// When the thread last committed.
    #[schemars(with = "crate::schema::Rfc3339")]
    pub updated_at: Timestamp,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// The category whose notes an older record kept under their own key (`artifacts`).
const LEGACY_NOTES_CATEGORY: &str = "artifact";

impl ThreadRecord {
    /// What `category` keeps on this thread (`Null`: nothing yet).
    pub fn notes(&self, category: &str) -> &serde_json::Value {
        static NOTHING: serde_json::Value = serde_json::Value::Null;
        match (self.category_notes.get(category), &self.legacy_notes) {
            (Some(notes), _) => notes,
            (None, Some(legacy)) if category == LEGACY_NOTES_CATEGORY => legacy,
            _ => &NOTHING,
        }
    }

    /// What `category` keeps on this thread, to change (an older record's notes moved to
    /// [`ThreadRecord::category_notes`] first).
    pub fn notes_mut(&mut self, category: &str) -> &mut serde_json::Value {
        if category == LEGACY_NOTES_CATEGORY && !self.category_notes.contains_key(category) {
            if let Some(legacy) = self.legacy_notes.take() {
                self.category_notes.insert(category.to_owned(), legacy);
            }
        }
        self.category_notes
            .entry(category.to_owned())
            .or_insert(serde_json::Value::Null)
    }

    /// The index of the oldest entry of its view a slice needs: where its newest summary's cut
    /// is (the model sees the summary and what follows the cut; compaction looks for its next
    /// cut after it), or 0 for a thread never compacted.
    pub fn view_start(&self) -> u64 {
        self.latest_summary.map_or(0, |s| s.covers)
    }

    /// The length of its whole view: the inherited entries, then its own.
    pub fn view_len(&self) -> u64 {
        self.parent.as_ref().map_or(0, |p| p.fork_at) + self.history_len
    }

    /// A new open thread with no history.
    pub fn new(
        id: ThreadId,
        agent: impl Into<String>,
        parent: Option<(ParentLink, Vec<ThreadId>)>,
        now: Timestamp,
    ) -> Self {
        let (parent, mut lineage) = match parent {
            Some((link, parent_lineage)) => (Some(link), parent_lineage),
            None => (None, Vec::new()),
        };
        let latest_summary = parent.as_ref().and_then(|p| p.summary);
        lineage.push(id.clone());
        Self {
            schema: RECORD_SCHEMA,
            id,
            agent: agent.into(),
            model: None,
            parent,
            lineage,
            status: ThreadStatus::Open,
            title: None,
            plan: None,
            output: None,
            conversation: Conversation::default(),
            depth: 0,
            delegated_by: None,
            open_choices: Vec::new(),
            views: Default::default(),
            pending_calls: Vec::new(),
            deferred: Vec::new(),
            queued: Vec::new(),
            while_busy: None,
            subscriptions: Vec::new(),
            schedules: Vec::new(),
            category_notes: BTreeMap::new(),
            legacy_notes: None,
            children: Vec::new(),
            usage: Usage::default(),
            hourly: HourlyUsage::default(),
            suspended: None,
            history_len: 0,
            last_event_seq: 0,
            latest_summary,
            last_prompt_tokens: 0,
            migration: None,
            notify_keys: Default::default(),
            held: Vec::new(),
            version: 0,
            created_at: now,
            updated_at: now,
        }
    }

    /// True for threads without a parent.
    pub fn is_root(&self) -> bool {
        self.parent.is_none()
    }

    /// True for the root thread of a conversation a person started: not a child, not a
    /// delegation.
    pub fn is_top_level(&self) -> bool {
        self.is_root() && self.delegated_by.is_none()
    }

    /// The root thread of this thread's tree.
    pub fn root(&self) -> &ThreadId {
        self.lineage.first().unwrap_or(&self.id)
    }

    /// Whether a person's message finds the thread busy (see [`WhileBusy`]).
    pub fn is_busy(&self) -> bool {
        self.has_dispatched_pending()
    }

    /// Whether a person's message with this policy (`None`: the agent's) is refused now: the
    /// thread is busy and the policy is `reject`. Hosts check it before posting.
    pub fn refuses_message(&self, while_busy: Option<WhileBusy>) -> bool {
        self.is_busy() && while_busy.or(self.while_busy).unwrap_or_default() == WhileBusy::Reject
    }

    /// True while a dispatched call has no result.
    pub fn has_dispatched_pending(&self) -> bool {
        self.pending_calls
            .iter()
            .any(|p| p.kind == PendingKind::Dispatched && !p.moved_on)
    }

    /// The pending call with this id.
    pub fn pending(&self, call_id: &CallId) -> Option<&PendingCall> {
        self.pending_calls.iter().find(|p| &p.call_id == call_id)
    }

    /// The earliest due time of this thread's timers.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.pending_calls.iter().filter_map(|p| p.due).min()
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn small_arguments_are_kept_whole_and_big_ones_as_a_preview() {
        let small = json!({"instructions": "do it", "child_of": ["root"]});
        assert_eq!(args_preview(&small), small);
        let big = json!({"instructions": "x".repeat(500_000), "child_of": ["root"]});
        let preview = args_preview(&big);
        assert!(crate::json::json_len(&preview) <= ARGS_PREVIEW_BYTES);
        assert_eq!(preview["child_of"], json!(["root"]));
        let text = preview["instructions"].as_str().unwrap();
        assert!(text.starts_with("xxx") && text.ends_with("more bytes, in the call itself]"));
    }
}
