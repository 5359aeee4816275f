//! The thread's timeline as a slice changes it: appending entries and showing them, standing in
//! for the calls the conversation moved on from, and injecting late results and events.

use serde_json::json;

use crate::effect::{Effect, OutputKind};
use crate::history::{
    model_time, Image, Item, ToolCall, INJECTED_TOOL, SLEEP_INTERRUPTED_PREFIX,
    STILL_RUNNING_PREFIX, STILL_WAITING_PREFIX,
};
use crate::ids::{CallId, InputId};
use crate::state::{PendingCall, PendingKind};
use crate::telemetry;

use super::draft::Draft;

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

impl Draft<'_> {
    /// Shows an event: now (live) or after the commit (an effect).
    pub(super) fn output(&mut self, kind: OutputKind) {
        let effect = Effect::output(&self.record.id, self.now, kind);
        self.outbox.push(effect);
        self.outbox.flush_live(&mut self.record);
    }

    /// Appends one entry to the thread's own history and shows it.
    pub(super) fn append(&mut self, item: Item) {
        self.outbox.flush_live(&mut self.record);
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
        let input_id = self.intake.current().cloned();
        self.history.push(self.now, input_id, item);
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
            .intake
            .current()
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
        let current = self.intake.applying(None);
        for deferred in held {
            self.intake.applying(Some(deferred.input_id));
            for item in deferred.items {
                self.append(item);
            }
        }
        self.intake.applying(current);
    }

    /// Appends the messages queued while the thread was busy ([`crate::state::WhileBusy::Queue`]),
    /// once it is not (its turn is over): true when there were any.
    pub(super) fn flush_queued(&mut self) -> bool {
        if self.record.queued.is_empty() || self.record.is_busy() {
            return false;
        }
        let queued = std::mem::take(&mut self.record.queued);
        self.append_held(queued);
        self.accounting.new_turn();
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
                    model_time(due)
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
}
