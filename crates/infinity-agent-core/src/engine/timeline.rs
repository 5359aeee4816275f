//! The thread as a slice changes it ([`Draft`]), and its timeline: appending entries and showing
//! them, standing in for the calls the conversation moved on from, and injecting late results
//! and events.

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::json;

use crate::agent::Agent;
use crate::commit::Commit;
use crate::effect::{Effect, OutputEvent, OutputKind};
use crate::history::{
    show_time, HistoryEntry, HistoryView, Image, Item, ToolCall, INJECTED_TOOL,
    SLEEP_INTERRUPTED_PREFIX, STILL_RUNNING_PREFIX, STILL_WAITING_PREFIX,
};
use crate::ids::{CallId, IdSource, InputId};
use crate::model::ToolSpec;
use crate::state::{Conversation, PendingCall, PendingKind, ThreadRecord};
use crate::telemetry;
use crate::tools::ToolRegistry;

/// What a pending call's result carries.
#[derive(Debug, Default)]
pub(super) struct CallResult {
    pub(super) text: String,
    pub(super) is_error: bool,
    pub(super) images: Vec<Image>,
    pub(super) display_as: Vec<serde_json::Value>,
}

impl CallResult {
    pub(super) fn text(text: String) -> Self {
        Self {
            text,
            ..Self::default()
        }
    }

    pub(super) fn error(text: String) -> Self {
        Self {
            text,
            is_error: true,
            ..Self::default()
        }
    }
}

/// The thread as the slice changes it: the record, the entries appended so far, the effects to
/// commit, and the slice's bookkeeping.
pub(super) struct Draft<'a> {
    pub(super) record: ThreadRecord,
    /// The record as it was loaded (`None` for a thread this slice creates), to tell whether
    /// anything changed.
    pub(super) original: Option<ThreadRecord>,
    /// The history the slice started from.
    pub(super) base: &'a [Arc<HistoryEntry>],
    /// The index of `base`'s first entry in the whole history (entries before it were not loaded).
    pub(super) skipped: usize,
    /// Entries this slice appended.
    pub(super) added: Vec<Arc<HistoryEntry>>,
    pub(super) own_len_at_start: u64,
    pub(super) effects: Vec<Effect>,
    /// True: output events go to `outputs` as they happen; false: they are effects.
    pub(super) live: bool,
    pub(super) outputs: Vec<OutputEvent>,
    /// The live output events shown so far, numbered, for the commit to keep.
    pub(super) shown: Vec<OutputEvent>,
    pub(super) agent: Arc<Agent>,
    /// The model that answers: the agent's, or the one a person switched the thread to.
    pub(super) model: Arc<dyn crate::model::ModelProvider>,
    /// The conversation's tools from tool servers, compiled.
    pub(super) conversation_tools: Option<Arc<ToolRegistry>>,
    /// The specs this thread is offered, when they are not simply the agent's.
    pub(super) offered: Option<Vec<ToolSpec>>,
    /// The system prompt, made at the first completion.
    pub(super) system: Option<String>,
    /// The history of the owed completion, when it is not the view as it stands (a compacted
    /// view, or the summary request).
    pub(super) prompt: Option<Vec<Arc<HistoryEntry>>>,
    pub(super) now: Timestamp,
    pub(super) ids: &'a mut dyn IdSource,
    /// The input being applied (its id goes on the entries it produces).
    pub(super) current_input: Option<InputId>,
    pub(super) created: bool,
    /// Set by a tool that ends the turn (`finish`), or by an error that stops the loop.
    pub(super) turn_ended: bool,
    /// What the conversation's threads share, as this slice sees it; written back to the record
    /// by a root.
    pub(super) conversation: Conversation,
    pub(super) expected_version: Option<u64>,
    pub(super) processed: Vec<InputId>,
    pub(super) completions: u32,
    /// Completions the turn ran in earlier slices, handed over by a `continue` input (they count
    /// against `limits.max_completions_per_slice` too); a new message starts a turn afresh.
    pub(super) carried: u32,
    pub(super) compacted: bool,
    /// For a child: what this slice counted against the conversation's hour, sent to the root
    /// with the commit.
    pub(super) usage_to_report: crate::state::HourlyUsage,
    /// What this slice spent, for the conversation's lifetime totals: a child's goes to its
    /// root, a delegation's root's (and its tree's) to the conversation it works for.
    pub(super) total_to_report: crate::model::Usage,
    /// The host's library, for tools that read it.
    pub(super) library: Option<&'a crate::library::Library>,
}

impl Draft<'_> {
    pub(super) fn view(&self) -> HistoryView<'_> {
        HistoryView::window(self.skipped, self.base, &self.added)
    }

    /// Shows an event: now (live) or after the commit (an effect).
    pub(super) fn output(&mut self, kind: OutputKind) {
        let effect = Effect::output(&self.record.id, self.now, kind);
        self.effects.push(effect);
        self.flush_live();
    }

    /// With live output, moves the output effects produced so far (tools add theirs as effects)
    /// to the events handed out at once.
    pub(super) fn flush_live(&mut self) {
        if !self.live
            || !self
                .effects
                .iter()
                .any(|e| matches!(e, Effect::Output { .. }))
        {
            return;
        }
        let mut kept = Vec::with_capacity(self.effects.len());
        for effect in std::mem::take(&mut self.effects) {
            match effect {
                // Shown after the commit, like a host without live output shows every event.
                Effect::Output { event } if event.kind.awaits_answer() => {
                    kept.push(Effect::Output { event });
                }
                Effect::Output { mut event } => {
                    crate::commit::number(&mut self.record, &mut event);
                    self.shown.push(event.clone());
                    self.outputs.push(event);
                }
                other => kept.push(other),
            }
        }
        self.effects = kept;
    }

    /// The live output events waiting to be handed out.
    pub(super) fn take_outputs(&mut self) -> Vec<OutputEvent> {
        std::mem::take(&mut self.outputs)
    }

    /// Appends one entry to the thread's own history and shows it.
    pub(super) fn append(&mut self, item: Item) {
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
                display_as,
                ..
            } => self.output(OutputKind::ToolResult {
                call_id: call_id.clone(),
                name: name.clone(),
                text: text.clone(),
                is_error: *is_error,
                display_as: display_as.clone(),
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

    /// Records an error on the thread (the user sees it; the model does not answer it).
    pub(super) fn notice_error(&mut self, text: String) {
        tracing::warn!(thread = %self.record.id, %text, "error recorded on thread");
        self.append(Item::Notice {
            text,
            is_error: true,
        });
    }

    /// An event injected as a synthetic `receive_event__injected` call and its result. The call
    /// id is derived from the input that brought the event, so a replayed slice names it the
    /// same.
    pub(super) fn injected_pair(
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
        let id = CallId::derived(base, salt);
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
            Item::tool_result(id, INJECTED_TOOL, text),
        ]
    }

    /// Appends entries that call for an answer. Calls still pending get a stand-in result first
    /// (the conversation moves on without them; their results arrive later as events), so a
    /// tool call is always directly followed by its result and new input is never held back
    /// behind a call that may take hours.
    pub(super) fn actionable(&mut self, items: Vec<Item>) {
        self.move_on();
        self.flush_deferred();
        for item in items {
            self.append(item);
        }
    }

    /// Appends inputs an older version held back while dispatched calls were pending (records
    /// written before new input moved the conversation on), once none is.
    pub(super) fn flush_deferred(&mut self) {
        if self.record.deferred.is_empty() || self.record.has_dispatched_pending() {
            return;
        }
        let deferred = std::mem::take(&mut self.record.deferred);
        self.append_held(deferred);
    }

    /// Appends entries held back, each under the input it came from, after stand-in results
    /// for the calls still pending.
    fn append_held(&mut self, held: Vec<crate::state::Deferred>) {
        self.move_on();
        let current = self.current_input.take();
        for deferred in held {
            self.current_input = Some(deferred.input_id);
            for item in deferred.items {
                self.append(item);
            }
        }
        self.current_input = current;
    }

    /// Appends the messages queued while the thread was busy ([`crate::state::WhileBusy::Queue`]),
    /// once it is not (its turn is over): true when there were any.
    pub(super) fn flush_queued(&mut self) -> bool {
        if self.record.queued.is_empty() || self.record.is_busy() {
            return false;
        }
        let queued = std::mem::take(&mut self.record.queued);
        self.append_held(queued);
        self.carried = 0;
        true
    }

    /// The conversation moves on without the results of pending calls: each gets a stand-in
    /// result now; its real result, if one comes, is injected later as an event.
    pub(super) fn move_on(&mut self) {
        let mut placeholders = Vec::new();
        self.record.pending_calls.retain_mut(|p| {
            if p.moved_on {
                return true;
            }
            let text = match (p.kind, p.due) {
                (PendingKind::Passive, Some(due)) => format!(
                    "{SLEEP_INTERRUPTED_PREFIX} new input arrived before {}. The sleep's own \
                     result will arrive as an event when it ends.",
                    show_time(due)
                ),
                (PendingKind::Passive, None) => "Woke up: new input arrived.".to_owned(),
                (PendingKind::Dispatched, _) if p.approval.is_some() => format!(
                    "{STILL_WAITING_PREFIX} a person was asked to approve this call and has not \
                     answered yet. New input arrived meanwhile; if they approve, the call runs \
                     and its result arrives as an event."
                ),
                (PendingKind::Dispatched, _) if p.authorizing => format!(
                    "{STILL_WAITING_PREFIX} the user was asked to authorize this tool and has \
                     not yet. New input arrived meanwhile; the call's result will arrive as an \
                     event."
                ),
                (PendingKind::Dispatched, _) => format!(
                    "{STILL_RUNNING_PREFIX} new input arrived before this call's result. Its \
                     result will arrive as an event when the tool sends it."
                ),
            };
            placeholders.push(Item::tool_result(p.call_id.clone(), p.tool.clone(), text));
            p.moved_on = true;
            // A wait with no timer has no result to come: forget it.
            p.kind == PendingKind::Dispatched || p.due.is_some()
        });
        for item in placeholders {
            self.append(item);
        }
    }

    /// Removes and returns the pending call with this id.
    pub(super) fn take_pending(&mut self, call_id: &CallId) -> Option<PendingCall> {
        let index = self
            .record
            .pending_calls
            .iter()
            .position(|p| &p.call_id == call_id)?;
        Some(self.record.pending_calls.remove(index))
    }

    /// The span of a call's result arriving, linked to the call's span (in the slice that made
    /// the call, perhaps long before).
    fn trace_result(&self, pending: &PendingCall, is_error: bool) {
        if !telemetry::exporting() {
            return;
        }
        let span = tracing::info_span!(
            "tool_result",
            otel.name = %format!("tool_result {}", pending.tool)
        );
        telemetry::set(&span, "gen_ai.operation.name", "execute_tool");
        telemetry::set(&span, "gen_ai.tool.name", pending.tool.clone());
        telemetry::set(&span, "gen_ai.tool.call.id", pending.call_id.to_string());
        let waited = self.now.duration_since(pending.issued_at).as_secs_f64();
        telemetry::set(&span, "infinity.tool.waited_seconds", waited.max(0.0));
        if is_error {
            telemetry::set_error(&span, "the call's result is an error");
        }
        if let Some(call) = &pending.trace {
            telemetry::link(&span, call);
        }
    }

    /// A result for a pending call: appended in place, or injected if the conversation moved on.
    pub(super) fn resolve(&mut self, pending: PendingCall, result: CallResult) {
        let CallResult {
            text,
            is_error,
            images,
            display_as,
        } = result;
        self.trace_result(&pending, is_error);
        if pending.moved_on {
            let mut items =
                self.injected_pair(&pending.tool, &pending.call_id, &pending.args, text, "late");
            if let Some(Item::ToolResult {
                images: slot,
                display_as: shown,
                ..
            }) = items.last_mut()
            {
                *slot = images;
                *shown = display_as;
            }
            self.actionable(items);
        } else {
            self.append(Item::ToolResult {
                call_id: pending.call_id,
                name: pending.tool,
                text,
                is_error,
                images,
                display_as,
            });
            self.flush_deferred();
        }
    }

    /// What the slice commits, how many completions it ran, and the live outputs still to hand
    /// out. No commit when nothing changed.
    pub(super) fn into_commit(mut self) -> (Option<Commit>, u32, Vec<OutputEvent>) {
        self.return_if_delegation_done();
        if self.record.status == crate::state::ThreadStatus::Closed {
            self.cancel_pending();
        }
        self.report_usage_to_root();
        if self.record.is_root() {
            self.conversation.budget = self.budget();
            std::mem::take(&mut self.conversation).put_back(&mut self.record);
        }
        self.flush_live();
        let outputs = std::mem::take(&mut self.outputs);
        let unchanged = self.added.is_empty()
            && self.effects.is_empty()
            && self.original.as_ref() == Some(&self.record);
        if unchanged && self.processed.is_empty() {
            return (None, self.completions, outputs);
        }
        // Even when nothing else changed (every input dropped, or a no-op such as writing a note
        // that already says so), the inputs' markers are written: a late duplicate must not be
        // applied again over newer state.
        self.record.version = self.expected_version.map_or(1, |v| v + 1);
        self.record.history_len = self.own_len_at_start + self.added.len() as u64;
        self.record.updated_at = self.now;
        let mut events = std::mem::take(&mut self.shown);
        events.extend(crate::commit::number_outputs(
            &mut self.record,
            &mut self.effects,
        ));
        let effects = super::with_ids(std::mem::take(&mut self.effects), self.ids);
        let commit = Commit {
            thread_id: self.record.id.clone(),
            expected_version: self.expected_version,
            new_entries: self.added.iter().map(|e| (**e).clone()).collect(),
            processed_inputs: std::mem::take(&mut self.processed),
            effects,
            events,
            record: self.record,
        };
        (Some(commit), self.completions, outputs)
    }
}
