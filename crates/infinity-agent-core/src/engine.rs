//! The slice engine: the functional core.
//!
//! [`run_slice`] takes a thread's state and a batch of inputs, runs completions and synchronous
//! tools, and returns the new entries, the new record and the effects as values. It does no IO of
//! its own besides calling the model; the host commits the result atomically and then performs
//! the effects.

use std::collections::HashSet;
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::json;

use crate::agent::{Agent, AgentLookup};
use crate::effect::{Effect, LiveOutput, OutputEvent, OutputKind, PendingEffect};
use crate::history::{
    show_time, HistoryEntry, HistoryView, Image, Item, MessageSource, ToolCall, INJECTED_TOOL,
};
use crate::ids::{CallId, EffectId, InputId, ThreadId};
use crate::input::{Input, InputBody};
use crate::model::{CompletionRequest, ModelError, StopReason};
use crate::thread::{Deferred, PendingCall, PendingKind, Subscription, ThreadRecord, ThreadStatus};
use crate::tools::internal::{delegation, Conversation};
use crate::tools::{builtin, ToolContext, ToolOutcome};

/// Everything a slice starts from.
pub struct SliceRequest<'a> {
    /// The thread.
    pub thread_id: ThreadId,
    /// Its record, or `None` if the thread does not exist yet.
    pub record: Option<ThreadRecord>,
    /// Its history view: inherited entries, then its own. For a thread that does not exist yet
    /// and whose inputs hold a child seed, the parent's history up to the fork point. Borrowed:
    /// the engine reads it and keeps its own additions apart, so a slice costs the same at any
    /// history length.
    pub view: &'a [Arc<HistoryEntry>],
    /// New inputs, in queue order.
    pub inputs: Vec<Input>,
    /// Which of these inputs' ids the thread has already processed (from the store).
    pub already_processed: HashSet<InputId>,
    /// Agents by name.
    pub agents: &'a dyn AgentLookup,
    /// The agent for a root thread created by a first user message.
    pub default_agent: Option<&'a str>,
    /// The slice's clock.
    pub now: Timestamp,
    /// For a child thread: what the conversation's threads share, as the root thread holds it
    /// (the host reads it from the root's record). Ignored for a root thread, which holds its own.
    pub conversation: Option<crate::tools::internal::Conversation>,
    /// For a slice that starts a session (creates a root thread): the tools its agent's tool
    /// servers offer, discovered by the host. Ignored otherwise.
    pub session_toolset: Option<crate::tools::remote::Toolset>,
    /// Receives output events as they happen, the model's text as it streams included
    /// (`None`: output events become `output` effects, performed after the commit).
    pub live: Option<&'a LiveOutput<'a>>,
}

impl std::fmt::Debug for SliceRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SliceRequest")
            .field("thread_id", &self.thread_id)
            .field("inputs", &self.inputs.len())
            .finish_non_exhaustive()
    }
}

/// What the host writes in one atomic step.
#[derive(Debug, Clone, PartialEq)]
pub struct Commit {
    /// The thread.
    pub thread_id: ThreadId,
    /// The record version the slice started from; `None` when the slice creates the thread.
    pub expected_version: Option<u64>,
    /// The new record (its `version` is `expected_version + 1`).
    pub record: ThreadRecord,
    /// Entries to append to the thread's own history, in order.
    pub new_entries: Vec<HistoryEntry>,
    /// Input ids to mark processed (deduplication markers).
    pub processed_inputs: Vec<InputId>,
    /// Effects to put in the outbox and perform after the commit.
    pub effects: Vec<PendingEffect>,
}

/// An input the slice did not act on, and why. Dropping is not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedInput {
    /// The input.
    pub input_id: InputId,
    /// Its kind.
    pub kind: &'static str,
    /// Why it was dropped.
    pub reason: String,
}

/// The result of a slice.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceOutcome {
    /// What to commit; `None` when nothing changed (every input was a duplicate or was dropped
    /// before the thread existed).
    pub commit: Option<Commit>,
    /// Inputs that were dropped.
    pub dropped: Vec<DroppedInput>,
    /// Completions the slice ran.
    pub completions: u32,
}

/// Why a slice could not finish. Nothing of it may be committed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SliceError {
    /// The model is temporarily unavailable; run the slice again later with the same inputs.
    #[error("retry later: {0}")]
    Retryable(String),
    /// The thread's agent is not known to this host.
    #[error("thread {thread_id} runs agent `{agent}`, which this host does not have")]
    UnknownAgent {
        /// The thread.
        thread_id: ThreadId,
        /// The agent.
        agent: String,
    },
}

impl SliceError {
    /// True when running the same slice again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, SliceError::Retryable(_))
    }
}

pub(crate) fn output_effect(thread_id: &ThreadId, at: Timestamp, kind: OutputKind) -> Effect {
    Effect::Output {
        event: OutputEvent {
            thread_id: thread_id.clone(),
            at,
            kind,
        },
    }
}

fn note_dropped(
    dropped: &mut Vec<DroppedInput>,
    thread_id: &ThreadId,
    input_id: InputId,
    kind: &'static str,
    reason: String,
) {
    tracing::info!(thread = %thread_id, input = %input_id, kind, %reason, "input dropped");
    dropped.push(DroppedInput {
        input_id,
        kind,
        reason,
    });
}

/// Runs one slice. See the module docs.
pub async fn run_slice(request: SliceRequest<'_>) -> Result<SliceOutcome, SliceError> {
    let SliceRequest {
        thread_id,
        record,
        view,
        inputs,
        already_processed,
        agents,
        default_agent,
        now,
        conversation,
        session_toolset,
        live,
    } = request;
    let mut dropped = Vec::new();

    // Deduplicate: against the store, and within the batch.
    let mut seen = already_processed;
    let mut fresh = Vec::with_capacity(inputs.len());
    for input in inputs {
        if input.thread_id != thread_id {
            note_dropped(
                &mut dropped,
                &thread_id,
                input.id.clone(),
                input.body.kind(),
                format!("addressed to thread {}", input.thread_id),
            );
        } else if !seen.insert(input.id.clone()) {
            note_dropped(
                &mut dropped,
                &thread_id,
                input.id.clone(),
                input.body.kind(),
                "already processed".to_owned(),
            );
        } else {
            fresh.push(input);
        }
    }

    if fresh.is_empty() {
        return Ok(SliceOutcome {
            commit: None,
            dropped,
            completions: 0,
        });
    }

    // Find or create the record.
    let expected_version = record.as_ref().map(|r| r.version);
    let mut processed = Vec::new();
    let record = match record {
        Some(record) => record,
        None => {
            let creator = fresh.iter().position(|i| match &i.body {
                InputBody::UserMessage { .. } => default_agent.is_some(),
                InputBody::ChildSeed { .. } | InputBody::DelegatedTask { .. } => true,
                _ => false,
            });
            let Some(creator) = creator else {
                for input in &fresh {
                    note_dropped(
                        &mut dropped,
                        &thread_id,
                        input.id.clone(),
                        input.body.kind(),
                        "unknown thread".to_owned(),
                    );
                }
                return Ok(SliceOutcome {
                    commit: None,
                    dropped,
                    completions: 0,
                });
            };
            for input in fresh.drain(..creator) {
                note_dropped(
                    &mut dropped,
                    &thread_id,
                    input.id.clone(),
                    input.body.kind(),
                    "unknown thread (arrived before the thread was created)".to_owned(),
                );
            }
            match &fresh[0].body {
                InputBody::ChildSeed {
                    agent,
                    parent,
                    parent_stack,
                    depth,
                    ..
                } => {
                    let mut record = ThreadRecord::new(
                        thread_id.clone(),
                        agent.clone(),
                        Some((parent.clone(), parent_stack.clone())),
                        now,
                    );
                    record.depth = *depth;
                    record
                }
                InputBody::DelegatedTask {
                    agent,
                    delegated_by,
                    depth,
                    ..
                } => {
                    let mut record = ThreadRecord::new(thread_id.clone(), agent.clone(), None, now);
                    record.depth = *depth;
                    record.delegated_by = Some(delegated_by.clone());
                    record
                }
                _ => ThreadRecord::new(
                    thread_id.clone(),
                    default_agent.unwrap_or_default(),
                    None,
                    now,
                ),
            }
        }
    };
    let Some(agent) = agents.agent(&record.agent) else {
        return Err(SliceError::UnknownAgent {
            thread_id,
            agent: record.agent,
        });
    };

    let original = expected_version.map(|_| record.clone());
    let mut slice = Slice {
        own_len_at_start: record.history_len,
        record,
        base: view,
        added: Vec::new(),
        effects: Vec::new(),
        agent: &agent,
        now,
        current_input: None,
        created: expected_version.is_none(),
        live,
        turn_ended: false,
        conversation: Default::default(),
    };
    slice.conversation = if slice.record.is_root() {
        Conversation::take_from(&mut slice.record)
    } else {
        conversation.unwrap_or_default()
    };
    if slice.created && slice.record.is_root() {
        if let Some(toolset) = session_toolset {
            for problem in &toolset.problems {
                slice.output(OutputKind::Error {
                    text: problem.clone(),
                });
            }
            slice.conversation.toolset = Some(toolset);
        }
    }
    for input in fresh {
        processed.push(input.id.clone());
        if slice.record.status == ThreadStatus::Closed {
            note_dropped(
                &mut dropped,
                &thread_id,
                input.id.clone(),
                input.body.kind(),
                "thread is closed".to_owned(),
            );
            continue;
        }
        slice.current_input = Some(input.id.clone());
        let (id, kind) = (input.id.clone(), input.body.kind());
        if let Err(reason) = slice.apply(input.body) {
            note_dropped(&mut dropped, &thread_id, id, kind, reason);
        }
        slice.flush_live();
    }
    slice.current_input = None;
    let completions = slice.run_loop().await?;
    slice.return_if_delegation_done();
    if slice.record.is_root() {
        std::mem::take(&mut slice.conversation).put_back(&mut slice.record);
    }
    let unchanged = slice.added.is_empty()
        && slice.effects.is_empty()
        && original.as_ref() == Some(&slice.record);
    if unchanged {
        // Every input was dropped (a closed thread, an unknown call): nothing to write.
        return Ok(SliceOutcome {
            commit: None,
            dropped,
            completions,
        });
    }
    Ok(SliceOutcome {
        commit: Some(slice.into_commit(thread_id, expected_version, processed)),
        dropped,
        completions,
    })
}

struct Slice<'a> {
    record: ThreadRecord,
    /// The history the slice started from.
    base: &'a [Arc<HistoryEntry>],
    /// Entries this slice appended.
    added: Vec<Arc<HistoryEntry>>,
    own_len_at_start: u64,
    effects: Vec<Effect>,
    agent: &'a Agent,
    now: Timestamp,
    current_input: Option<InputId>,
    created: bool,
    live: Option<&'a LiveOutput<'a>>,
    /// Set by a tool that ends the turn (`finish`): no further completion in this slice.
    turn_ended: bool,
    /// What the conversation's threads share, as this slice sees it; written back to the record
    /// by a root.
    conversation: Conversation,
}

impl Slice<'_> {
    fn view(&self) -> HistoryView<'_> {
        HistoryView::new(self.base, &self.added)
    }

    fn output(&mut self, kind: OutputKind) {
        self.effects
            .push(output_effect(&self.record.id, self.now, kind));
        self.flush_live();
    }

    /// With a live sink, hands it the output effects produced so far (tools add theirs as
    /// effects) instead of leaving them for after the commit.
    fn flush_live(&mut self) {
        let Some(live) = self.live else { return };
        if !self
            .effects
            .iter()
            .any(|e| matches!(e, Effect::Output { .. }))
        {
            return;
        }
        let mut kept = Vec::with_capacity(self.effects.len());
        for effect in std::mem::take(&mut self.effects) {
            match effect {
                Effect::Output { event } => live(event),
                other => kept.push(other),
            }
        }
        self.effects = kept;
    }

    /// Appends one entry to the thread's own history and shows it.
    fn append(&mut self, item: Item) {
        self.flush_live();
        match &item {
            Item::Message { text, .. } => {
                self.output(OutputKind::UserMessage { text: text.clone() })
            }
            Item::Assistant {
                text, tool_calls, ..
            } => {
                if let Some(text) = text.as_ref().filter(|t| !t.trim().is_empty()) {
                    self.output(OutputKind::AssistantText { text: text.clone() });
                }
                for call in tool_calls {
                    self.output(OutputKind::ToolCall {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        args: call.args.clone(),
                    });
                }
            }
            Item::ToolResult {
                call_id,
                name,
                text,
                is_error,
                ..
            } => self.output(OutputKind::ToolResult {
                call_id: call_id.clone(),
                name: name.clone(),
                text: text.clone(),
                is_error: *is_error,
            }),
            Item::Notice { text, is_error } => {
                if *is_error {
                    self.output(OutputKind::Error { text: text.clone() });
                }
            }
            Item::Summary { .. } => {}
        }
        let entry = HistoryEntry {
            seq: self.own_len_at_start + self.added.len() as u64,
            at: self.now,
            input_id: self.current_input.clone(),
            item,
        };
        self.added.push(Arc::new(entry));
    }

    fn notice_error(&mut self, text: String) {
        tracing::warn!(thread = %self.record.id, %text, "error recorded on thread");
        self.append(Item::Notice {
            text,
            is_error: true,
        });
    }

    /// An event injected as a synthetic `receive_event__injected` call and its result.
    fn injected_pair(
        &self,
        tool: &str,
        call_id: &CallId,
        args: &serde_json::Value,
        text: String,
        salt: &str,
    ) -> Vec<Item> {
        let base = self
            .current_input
            .as_ref()
            .map(InputId::as_str)
            .unwrap_or(call_id.as_str());
        let id = CallId::derived_from(base, salt);
        vec![
            Item::Assistant {
                text: None,
                tool_calls: vec![ToolCall {
                    id: id.clone(),
                    name: INJECTED_TOOL.to_owned(),
                    args: json!({
                        "original_tool_name": tool,
                        "original_tool_call_id": call_id,
                        "original_args": args,
                    }),
                }],
                synthetic: true,
            },
            Item::ToolResult {
                call_id: id,
                name: INJECTED_TOOL.to_owned(),
                text,
                is_error: false,
                images: Vec::new(),
            },
        ]
    }

    /// Appends entries that call for an answer, or holds them while dispatched calls are pending
    /// (so a tool call is always directly followed by its result).
    fn actionable(&mut self, items: Vec<Item>) {
        if self.record.has_dispatched_pending() {
            let input_id = self.current_input.clone().unwrap_or_else(InputId::generate);
            self.record.deferred.push(Deferred { input_id, items });
            return;
        }
        self.flush_deferred();
        self.move_on_passive();
        for item in items {
            self.append(item);
        }
    }

    fn flush_deferred(&mut self) {
        if self.record.deferred.is_empty() || self.record.has_dispatched_pending() {
            return;
        }
        self.move_on_passive();
        let current = self.current_input.take();
        for deferred in std::mem::take(&mut self.record.deferred) {
            self.current_input = Some(deferred.input_id);
            for item in deferred.items {
                self.append(item);
            }
        }
        self.current_input = current;
    }

    /// The conversation moves on without the results of pending sleeps: each gets a stand-in
    /// result now; its real result, if one comes, is injected later.
    fn move_on_passive(&mut self) {
        let mut placeholders = Vec::new();
        self.record.pending_calls.retain_mut(|p| {
            if p.kind != PendingKind::Passive || p.moved_on {
                return true;
            }
            let text = match p.due {
                Some(due) => format!(
                    "Sleep interrupted: new input arrived before {}. The sleep's own result \
                     will arrive as an event when it ends.",
                    show_time(due)
                ),
                None => "Woke up: new input arrived.".to_owned(),
            };
            placeholders.push(Item::ToolResult {
                call_id: p.call_id.clone(),
                name: p.tool.clone(),
                text,
                is_error: false,
                images: Vec::new(),
            });
            p.moved_on = true;
            // A wait with no timer has no result to come: forget it.
            p.due.is_some()
        });
        for item in placeholders {
            self.append(item);
        }
    }

    fn take_pending(&mut self, call_id: &CallId) -> Option<PendingCall> {
        let index = self
            .record
            .pending_calls
            .iter()
            .position(|p| &p.call_id == call_id)?;
        Some(self.record.pending_calls.remove(index))
    }

    /// A result for a pending call: appended in place, or injected if the conversation moved on.
    fn resolve(&mut self, pending: PendingCall, text: String, is_error: bool, images: Vec<Image>) {
        if pending.moved_on {
            let mut items =
                self.injected_pair(&pending.tool, &pending.call_id, &pending.args, text, "late");
            if let Some(Item::ToolResult { images: slot, .. }) = items.last_mut() {
                *slot = images;
            }
            self.actionable(items);
        } else {
            self.append(Item::ToolResult {
                call_id: pending.call_id,
                name: pending.tool,
                text,
                is_error,
                images,
            });
            self.flush_deferred();
        }
    }

    /// Applies one input. `Err` carries the reason it was dropped.
    fn apply(&mut self, body: InputBody) -> Result<(), String> {
        match body {
            InputBody::UserMessage { text } => {
                self.actionable(vec![Item::user(text)]);
            }
            InputBody::MessageFromParent { text } => {
                let Some(parent) = self.record.parent.as_ref().map(|p| p.thread_id.clone()) else {
                    return Err("message from a parent, but this is a root thread".to_owned());
                };
                self.actionable(vec![Item::Message {
                    text,
                    from: MessageSource::Parent { thread_id: parent },
                }]);
            }
            InputBody::ToolResult {
                call_id,
                text,
                is_error,
                subscription,
                images,
            } => {
                let Some(pending) = self.take_pending(&call_id) else {
                    return Err(format!("no pending call {call_id}"));
                };
                self.record.open_choices.retain(|c| c.call_id != call_id);
                if subscription && !is_error {
                    self.record.subscriptions.push(Subscription {
                        call_id: pending.call_id.clone(),
                        tool: pending.tool.clone(),
                        args: pending.args.clone(),
                    });
                }
                self.resolve(pending, text, is_error, images);
            }
            InputBody::TimerWakeUp { call_id } => {
                let Some(pending) = self.take_pending(&call_id) else {
                    return Err(format!("no pending sleep {call_id}"));
                };
                let due = show_time(pending.due.unwrap_or(self.now));
                let text = if pending.moved_on {
                    format!(
                        "The sleep that was interrupted earlier has ended (it was due at {due})."
                    )
                } else {
                    format!("Slept until {due}; woke at {}.", show_time(self.now))
                };
                self.resolve(pending, text, false, Vec::new());
            }
            InputBody::SubscriptionEvent {
                call_id,
                text,
                associative,
                is_final,
            } => {
                let Some(index) = self
                    .record
                    .subscriptions
                    .iter()
                    .position(|s| s.call_id == call_id)
                else {
                    return Err(format!("no active subscription {call_id}"));
                };
                let sub = if is_final {
                    self.record.subscriptions.remove(index)
                } else {
                    self.record.subscriptions[index].clone()
                };
                let text = if is_final {
                    format!("{text}\n(This was the subscription's final event.)")
                } else {
                    text
                };
                if associative {
                    let items =
                        self.injected_pair(&sub.tool, &sub.call_id, &sub.args, text, "event");
                    self.actionable(items);
                } else {
                    self.spawn_event_thread(&sub, text);
                }
            }
            InputBody::ChildReport {
                child_id,
                call_id: _,
                report,
                closed,
            } => {
                let Some(link) = self
                    .record
                    .children
                    .iter_mut()
                    .find(|c| c.thread_id == child_id)
                else {
                    return Err(format!("{child_id} is not a child of this thread"));
                };
                if closed {
                    link.closed = true;
                    if report.is_empty() {
                        return Ok(());
                    }
                }
                let link = link.clone();
                let text = if closed {
                    format!(
                        "Final report from child thread {child_id} (the child has shut down): {report}"
                    )
                } else {
                    format!("Report from child thread {child_id}: {report}")
                };
                let items =
                    self.injected_pair(&link.tool, &link.call_id, &link.args, text, "report");
                self.actionable(items);
            }
            InputBody::ChildSeed { seed, .. } => {
                if !self.created || !self.added.is_empty() {
                    return Err("thread already exists".to_owned());
                }
                for item in seed {
                    self.append(item);
                }
            }
            InputBody::WidgetAction { action, values } => {
                let text = if values.is_empty() {
                    format!("[widget] The user pressed `{action}`.")
                } else {
                    format!(
                        "[widget] The user pressed `{action}` with {}.",
                        serde_json::Value::Object(values)
                    )
                };
                self.actionable(vec![Item::user(text)]);
            }
            InputBody::MemoryWrite { key, value } => {
                if !self.record.is_root() {
                    return Err("memory writes go to the root thread".to_owned());
                }
                crate::tools::internal::memory_write(&mut self.conversation.memory, &key, &value)?;
            }
            InputBody::DelegatedTask { text, .. } => {
                if !self.created || !self.added.is_empty() {
                    return Err("thread already exists".to_owned());
                }
                self.actionable(vec![Item::user(text)]);
            }
            InputBody::ToolAuthorization { call_id, auth_url } => {
                let Some(pending) = self
                    .record
                    .pending_calls
                    .iter_mut()
                    .find(|p| p.call_id == call_id && p.kind == PendingKind::Dispatched)
                else {
                    return Err(format!("no pending call {call_id}"));
                };
                let first = !pending.moved_on;
                pending.moved_on = true;
                let (tool, call) = (pending.tool.clone(), pending.call_id.clone());
                self.output(OutputKind::AuthorizationRequested {
                    call_id: call.clone(),
                    auth_url,
                });
                if first {
                    // The call stays pending; the conversation may go on meanwhile.
                    self.append(Item::ToolResult {
                        call_id: call,
                        name: tool,
                        text: "Authorization in progress: the user was asked to authorize this \
                               tool. Its result will arrive as an event once they have."
                            .to_owned(),
                        is_error: false,
                        images: Vec::new(),
                    });
                    self.flush_deferred();
                }
            }
            InputBody::UserChoiceRequest {
                call_id,
                prompt,
                choices,
                default,
                response_url,
            } => {
                if self.record.pending(&call_id).is_none() {
                    return Err(format!("no pending call {call_id}"));
                }
                self.record.open_choices.retain(|c| c.call_id != call_id);
                self.record.open_choices.push(crate::thread::OpenChoice {
                    call_id: call_id.clone(),
                    prompt: prompt.clone(),
                    choices: choices.clone(),
                    default,
                    response_url,
                });
                self.output(OutputKind::ChoiceRequested {
                    call_id,
                    prompt,
                    choices,
                    default,
                });
            }
            InputBody::UserChoiceAnswered { call_id, selected } => {
                let before = self.record.open_choices.len();
                self.record.open_choices.retain(|c| c.call_id != call_id);
                if self.record.open_choices.len() == before {
                    return Err(format!("no open choice for call {call_id}"));
                }
                tracing::info!(thread = %self.record.id, call = %call_id, selected, "user choice sent");
            }
            InputBody::ViewUpdate { view_type, content } => {
                if content.is_empty() {
                    self.record.views.remove(&view_type);
                } else {
                    self.record.views.insert(view_type.clone(), content.clone());
                }
                self.output(OutputKind::ViewUpdated { view_type, content });
            }
            InputBody::DelegationUpdate {
                delegation,
                running,
            } => {
                if !self.record.is_root() {
                    return Err("delegation updates go to the root thread".to_owned());
                }
                delegation::apply_update(&mut self.conversation, delegation, running)?;
            }
            InputBody::CloseRequest { call_id } => {
                let cause = call_id.as_str().to_owned();
                builtin::close_now(&mut self.record, self.now, None, &cause, &mut self.effects);
                if let Some(parent) = &self.record.parent {
                    self.effects.push(Effect::Send {
                        input: Input {
                            id: InputId::derived(call_id.as_str(), "closed"),
                            thread_id: parent.thread_id.clone(),
                            body: InputBody::ToolResult {
                                call_id,
                                text: format!("Thread {} is closed.", self.record.id),
                                is_error: false,
                                subscription: false,
                                images: Vec::new(),
                            },
                        },
                    });
                }
            }
        }
        Ok(())
    }

    fn spawn_event_thread(&mut self, sub: &Subscription, text: String) {
        let seed_call = CallId::derived_from(
            self.current_input
                .as_ref()
                .map(InputId::as_str)
                .unwrap_or(sub.call_id.as_str()),
            "event",
        );
        let seed_args = json!({
            "original_tool_name": sub.tool,
            "original_tool_call_id": sub.call_id,
            "original_args": sub.args,
        });
        builtin::spawn_child(
            &mut self.record,
            HistoryView::new(self.base, &self.added),
            self.now,
            builtin::ChildOrigin {
                call_id: &sub.call_id,
                tool: &sub.tool,
                args: &sub.args,
            },
            &mut self.effects,
            |child_id| {
                vec![
                    Item::Assistant {
                        text: None,
                        tool_calls: vec![ToolCall {
                            id: seed_call.clone(),
                            name: INJECTED_TOOL.to_owned(),
                            args: seed_args,
                        }],
                        synthetic: true,
                    },
                    Item::ToolResult {
                        call_id: seed_call,
                        name: INJECTED_TOOL.to_owned(),
                        text: format!(
                            "{text}\n\nYou are in a thread spawned to handle this event of \
                             subscription {}. Handle it, report to your parent if it needs to \
                             know, then close this thread. Your thread ID is {child_id}.",
                            sub.call_id
                        ),
                        is_error: false,
                        images: Vec::new(),
                    },
                ]
            },
        );
    }

    /// For a delegated thread whose turn is over (a successful `finish`, a reply without tool
    /// calls, or an error that stopped it, with no call pending): returns its result to the
    /// caller and closes the thread.
    fn return_if_delegation_done(&mut self) {
        let Some(by) = &self.record.delegated_by else {
            return;
        };
        if by.returned
            || self.record.status == ThreadStatus::Closed
            || !self.record.pending_calls.is_empty()
            || self.added.is_empty()
        {
            return;
        }
        let view = self.view();
        let (text, is_error) = match view.get(view.len().wrapping_sub(1)).map(|e| &e.item) {
            Some(Item::Assistant {
                text, tool_calls, ..
            }) if tool_calls.is_empty() => delegation::result_text(&self.record, text.as_deref()),
            Some(Item::Notice {
                text,
                is_error: true,
            }) => (
                format!("The delegated agent stopped with an error: {text}"),
                true,
            ),
            _ if self.turn_ended => delegation::result_text(&self.record, None),
            _ => return,
        };
        delegation::return_result(&mut self.record, text, is_error, &mut self.effects);
        let cause = format!("{}-returned", self.record.id);
        builtin::close_now(&mut self.record, self.now, None, &cause, &mut self.effects);
    }

    /// True when the newest entries call for a completion: a message or injected event since the
    /// last completion, or every call of the last completion answered.
    fn needs_answer(&self) -> bool {
        let live_pending = self.record.pending_calls.iter().any(|p| !p.moved_on);
        let mut saw_result = false;
        for entry in self.view().iter().rev() {
            match &entry.item {
                Item::Message { .. } => return true,
                Item::Assistant {
                    synthetic: true, ..
                } => return true,
                Item::Assistant { .. } => return saw_result && !live_pending,
                Item::ToolResult { .. } => saw_result = true,
                Item::Notice { .. } | Item::Summary { .. } => {}
            }
        }
        saw_result && !live_pending
    }

    /// True when the last prompt used more of the model's context window than the agent allows.
    fn over_compaction_threshold(&self) -> bool {
        let window = u64::from(self.agent.model.context_window());
        let allowed = window * u64::from(self.agent.limits.compact_at_percent) / 100;
        self.record.last_prompt_tokens > allowed
    }

    /// The newest summary in the view: its index and how many entries it covers.
    fn latest_summary(&self) -> Option<(usize, usize)> {
        self.record
            .latest_summary
            .map(|s| (s.index as usize, s.covers as usize))
    }

    /// What the model sees when the thread has been compacted: the newest summary, then the
    /// entries from the point it covers to. `None`: the whole view, as it is.
    fn model_view(&self) -> Option<Vec<Arc<HistoryEntry>>> {
        let (index, covers) = self.latest_summary()?;
        let view = self.view();
        let mut out = Vec::with_capacity(view.len().saturating_sub(covers));
        out.extend(view.get(index).cloned());
        out.extend(
            view.since(covers)
                .enumerate()
                .filter(|(i, _)| covers + i != index)
                .map(|(_, e)| Arc::clone(e)),
        );
        Some(out)
    }

    /// Summarizes the older part of the conversation with the thread's own model and records the
    /// summary. The cut is the newest clean boundary (a message or a model turn with every earlier
    /// call answered) that keeps at least a few entries verbatim.
    async fn compact(&mut self) -> Result<(), SliceError> {
        const KEEP: usize = 6;
        let view = self.view();
        let start = self.latest_summary().map_or(0, |(_, covers)| covers);
        let mut open: std::collections::HashSet<&CallId> = std::collections::HashSet::new();
        let mut boundary = None;
        for (i, entry) in view.iter().enumerate() {
            let clean = open.is_empty()
                && matches!(entry.item, Item::Message { .. } | Item::Assistant { .. });
            if clean && i > start && i + KEEP <= view.len() {
                boundary = Some(i);
            }
            match &entry.item {
                Item::Assistant { tool_calls, .. } => open.extend(tool_calls.iter().map(|c| &c.id)),
                Item::ToolResult { call_id, .. } => {
                    open.remove(call_id);
                }
                _ => {}
            }
        }
        let Some(cut) = boundary else {
            return Ok(()); // nothing worth summarizing yet
        };
        let mut history: Vec<Arc<HistoryEntry>> = Vec::new();
        if let Some((index, _)) = self.latest_summary() {
            history.extend(view.get(index).cloned());
        }
        history.extend(view.since(start).take(cut - start).cloned());
        history.push(Arc::new(HistoryEntry {
            seq: 0,
            at: self.now,
            input_id: None,
            item: Item::user(
                "Summarize the conversation above for your own later use: the task, what was \
                 decided and done, ids of threads and tool calls still relevant, and what is \
                 left to do. Reply with the summary only.",
            ),
        }));
        let request = CompletionRequest {
            thread_id: &self.record.id,
            is_root: self.record.is_root(),
            stack: &self.record.stack,
            system: "You summarize conversations faithfully and concisely.",
            tools: &[],
            history: HistoryView::from_slice(&history),
        };
        let summary = match self.agent.model.complete(request).await {
            Ok(c) => c,
            Err(ModelError::Retryable(why)) => return Err(SliceError::Retryable(why)),
            Err(ModelError::Terminal(why)) => {
                self.notice_error(format!(
                    "Compaction failed ({}): {why}",
                    self.agent.model.name()
                ));
                return Ok(());
            }
        };
        let mut usage = summary.usage;
        usage.completions = 1;
        self.record.usage.add(&usage);
        tracing::info!(thread = %self.record.id, covers = cut, "history compacted");
        self.record.latest_summary = Some(crate::thread::SummaryRef {
            index: self.view().len() as u64,
            covers: cut as u64,
        });
        self.append(Item::Summary {
            text: summary.text.unwrap_or_default(),
            covers: cut as u64,
        });
        Ok(())
    }

    /// The agent's system prompt and the thread's place in its tree.
    fn system_prompt(&self) -> String {
        let stack: Vec<&str> = self.record.stack.iter().map(ThreadId::as_str).collect();
        let place = format!(
            "Your thread ID is {}. Your thread stack, root first: {}.",
            self.record.id,
            json!(stack)
        );
        if self.agent.system_prompt.is_empty() {
            place
        } else {
            format!("{}\n\n{place}", self.agent.system_prompt)
        }
    }

    async fn run_loop(&mut self) -> Result<u32, SliceError> {
        let mut completions = 0u32;
        let mut system: Option<String> = None;
        let mut compacted = false;
        loop {
            if self.record.status == ThreadStatus::Closed
                || self.record.has_dispatched_pending()
                || self.turn_ended
            {
                break;
            }
            self.flush_deferred();
            if !self.needs_answer() {
                break;
            }
            if completions >= self.agent.limits.max_completions_per_slice {
                self.notice_error(format!(
                    "Stopped after {completions} completions in one slice (the agent's \
                     limits.max_completions_per_slice); the model kept calling tools without \
                     finishing. The thread waits for new input."
                ));
                break;
            }
            self.move_on_passive();
            if !compacted && self.over_compaction_threshold() {
                compacted = true;
                self.compact().await?;
            }
            let tools = Arc::clone(&self.agent.tools);
            // Borrowed unless some tool is hidden from this thread or the session has tools
            // from tool servers.
            let specs = self.offered_specs(&tools);
            let system = system.get_or_insert_with(|| self.system_prompt());
            let model_view = self.model_view();
            let request = CompletionRequest {
                thread_id: &self.record.id,
                is_root: self.record.is_root(),
                stack: &self.record.stack,
                system,
                tools: &specs,
                history: match &model_view {
                    Some(v) => HistoryView::from_slice(v),
                    None => HistoryView::new(self.base, &self.added),
                },
            };
            let result = match self.live {
                Some(live) => {
                    let (thread_id, at) = (self.record.id.clone(), self.now);
                    let sink = move |text: &str| {
                        live(OutputEvent {
                            thread_id: thread_id.clone(),
                            at,
                            kind: OutputKind::AssistantDelta {
                                text: text.to_owned(),
                            },
                        })
                    };
                    self.agent.model.complete_streaming(request, &sink).await
                }
                None => self.agent.model.complete(request).await,
            };
            let completion = match result {
                Ok(c) => c,
                Err(ModelError::Retryable(why)) => return Err(SliceError::Retryable(why)),
                Err(ModelError::Terminal(why)) => {
                    self.notice_error(format!("Model error ({}): {why}", self.agent.model.name()));
                    break;
                }
            };
            completions += 1;
            let mut usage = completion.usage;
            usage.completions = 1;
            self.record.usage.add(&usage);
            self.record.last_prompt_tokens =
                usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
            let calls: Vec<ToolCall> = completion
                .tool_calls
                .into_iter()
                .map(|c| ToolCall {
                    id: c
                        .id
                        .as_deref()
                        .map(CallId::from_provider)
                        .unwrap_or_else(CallId::generate),
                    name: c.name,
                    args: c.args,
                })
                .collect();
            self.append(Item::Assistant {
                text: completion.text,
                tool_calls: calls.clone(),
                synthetic: false,
            });
            if completion.stop_reason == StopReason::MaxTokens {
                self.notice_error(
                    "The model's reply was cut off at its output token limit; the turn did not \
                     finish."
                        .to_owned(),
                );
            }
            for call in &calls {
                self.run_tool(call, &tools);
            }
        }
        Ok(completions)
    }

    /// The tools this thread is offered: the agent's, then the session's from tool servers.
    fn offered_specs<'t>(
        &self,
        tools: &'t crate::tools::ToolRegistry,
    ) -> std::borrow::Cow<'t, [crate::model::ToolSpec]> {
        let own = tools.specs_for(&self.record);
        match &self.conversation.toolset {
            Some(toolset) if !toolset.tools.is_empty() => {
                let mut all = own.into_owned();
                all.extend(toolset.tools.iter().map(|t| t.spec.clone()));
                std::borrow::Cow::Owned(all)
            }
            _ => own,
        }
    }

    /// Runs a call of a tool server's tool: checks the arguments against its `inputSchema` and
    /// dispatches it. `None` when the session has no tool of that name.
    fn run_remote_tool(&mut self, call: &ToolCall) -> Option<()> {
        let remote = self.conversation.toolset.as_ref()?.get(&call.name)?;
        // The schema compiled when the session's toolset was assembled.
        let problems = match jsonschema::validator_for(&remote.spec.input_schema) {
            Ok(validator) => {
                crate::tools::argument_problems(&validator, &call.args, &remote.spec.input_schema)
            }
            Err(e) => Some(format!("the tool's inputSchema is invalid: {e}")),
        };
        if let Some(why) = problems {
            self.append(Item::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                text: format!("Error: invalid arguments for `{}`: {why}", call.name),
                is_error: true,
                images: Vec::new(),
            });
            return Some(());
        }
        let invocation = crate::effect::ToolInvocation {
            thread_id: self.record.id.clone(),
            stack: self.record.stack.clone(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            args: call.args.clone(),
            server: Some(crate::effect::RemoteTarget {
                base_url: remote.server.clone(),
                endpoint: remote.endpoint.clone(),
            }),
        };
        self.effects.push(Effect::Dispatch { invocation });
        self.record.pending_calls.push(PendingCall {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            args: call.args.clone(),
            kind: PendingKind::Dispatched,
            issued_at: self.now,
            moved_on: false,
            due: None,
        });
        Some(())
    }

    fn run_tool(&mut self, call: &ToolCall, tools: &crate::tools::ToolRegistry) {
        let tool = match tools.check(&call.name, &call.args, &self.record) {
            Ok(tool) => Arc::clone(tool),
            Err(crate::tools::CallRejection::Unknown(_))
                if self.run_remote_tool(call).is_some() =>
            {
                return;
            }
            Err(rejection) => {
                let text = rejection.message(&call.name, &self.offered_specs(tools));
                self.append(Item::ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    text,
                    is_error: true,
                    images: Vec::new(),
                });
                return;
            }
        };
        let outcome = {
            let mut ctx = ToolContext {
                now: self.now,
                record: &mut self.record,
                view: HistoryView::new(self.base, &self.added),
                call,
                conversation: &mut self.conversation,
                effects: &mut self.effects,
            };
            tool.call(&call.args, &mut ctx)
        };
        self.flush_live();
        match outcome {
            ToolOutcome::EndTurn { text } => {
                self.turn_ended = true;
                self.append(Item::ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    text,
                    is_error: false,
                    images: Vec::new(),
                });
            }
            ToolOutcome::Result { text, is_error } => self.append(Item::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                text,
                is_error,
                images: Vec::new(),
            }),
            ToolOutcome::Dispatched | ToolOutcome::Passive { .. } => {
                let (kind, due) = match outcome {
                    ToolOutcome::Passive { due } => (PendingKind::Passive, due),
                    _ => (PendingKind::Dispatched, None),
                };
                self.record.pending_calls.push(PendingCall {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    args: call.args.clone(),
                    kind,
                    issued_at: self.now,
                    moved_on: false,
                    due,
                });
            }
        }
    }

    fn into_commit(
        mut self,
        thread_id: ThreadId,
        expected_version: Option<u64>,
        processed_inputs: Vec<InputId>,
    ) -> Commit {
        self.record.version = expected_version.map_or(1, |v| v + 1);
        self.record.history_len = self.own_len_at_start + self.added.len() as u64;
        self.record.updated_at = self.now;
        let effects = self
            .effects
            .into_iter()
            .map(|effect| PendingEffect {
                id: EffectId::generate(),
                effect,
            })
            .collect();
        Commit {
            thread_id,
            expected_version,
            record: self.record,
            new_entries: self.added.iter().map(|e| (**e).clone()).collect(),
            processed_inputs,
            effects,
        }
    }
}
