//! The completion loop and tool calls: whether the thread needs an answer, what the model is
//! asked, and what its tool calls do.

use serde_json::json;

use crate::history::{HistoryView, Item, ToolCall};
use crate::ids::{CallId, ThreadId};
use crate::model::{Completion, CompletionRequest, StopReason};
use crate::state::{PendingCall, PendingKind, ThreadStatus};
use crate::tools::builtin::threads::close_now;
use crate::tools::internal::delegation;
use crate::tools::{OfferedTools, ToolContext, ToolOutcome};

use super::compaction::SUMMARY_SYSTEM;
use super::timeline::Draft;
use super::Purpose;

impl Draft<'_> {
    /// What the slice asks the model next, or `None` when the loop is over: the thread is
    /// closed, waits for a dispatched call, ended its turn, has nothing to answer, or reached
    /// the agent's completion limit (recorded as an error).
    pub(super) fn next(&mut self) -> Option<Purpose> {
        if self.record.status == ThreadStatus::Closed
            || self.record.has_dispatched_pending()
            || self.turn_ended
        {
            return None;
        }
        self.flush_deferred();
        if !self.needs_answer() {
            return None;
        }
        let limit = self.agent.limits.max_completions_per_slice;
        if self.completions >= limit {
            self.notice_error(format!(
                "Stopped after {} completions in one slice (the agent's \
                 limits.max_completions_per_slice); the model kept calling tools without \
                 finishing. The thread waits for new input.",
                self.completions
            ));
            return None;
        }
        self.move_on_passive();
        if !self.compacted && self.over_compaction_threshold() {
            self.compacted = true;
            if let Some(prompt) = self.summary_prompt() {
                self.prompt = Some(prompt);
                return Some(Purpose::Summary);
            }
        }
        if self.system.is_none() {
            self.system = Some(self.system_prompt());
        }
        self.prompt = self.model_view();
        Some(Purpose::Turn)
    }

    /// The owed completion's request, borrowed from the draft.
    pub(super) fn request(&self, purpose: Purpose) -> CompletionRequest<'_> {
        let history = match &self.prompt {
            Some(prompt) => HistoryView::from_slice(prompt),
            None => self.view(),
        };
        let (system, tools) = match purpose {
            Purpose::Summary => (SUMMARY_SYSTEM, &[][..]),
            Purpose::Turn => (
                self.system.as_deref().unwrap_or_default(),
                self.offered
                    .as_deref()
                    .unwrap_or_else(|| self.agent.tools.specs()),
            ),
        };
        CompletionRequest {
            thread_id: &self.record.id,
            is_root: self.record.is_root(),
            stack: &self.record.stack,
            system,
            tools,
            history,
        }
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

    /// Records the model's turn and runs its tool calls (synchronous ones inline; dispatched and
    /// passive ones become pending calls).
    pub(super) fn on_turn(&mut self, completion: Completion) {
        self.completions += 1;
        let mut usage = completion.usage;
        usage.completions = 1;
        self.record.usage.add(&usage);
        self.record.last_prompt_tokens =
            usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
        let calls: Vec<ToolCall> = completion
            .tool_calls
            .into_iter()
            .map(|c| ToolCall {
                id: match c.id.as_deref().and_then(CallId::from_provider) {
                    Some(id) => id,
                    None => self.ids.call_id(),
                },
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
            self.run_tool(call);
        }
    }

    /// A model error retrying cannot fix: recorded, and the loop ends.
    pub(super) fn on_model_error(&mut self, why: &str) {
        let name = self.agent.model.name().to_owned();
        self.notice_error(format!("Model error ({name}): {why}"));
        self.turn_ended = true;
    }

    fn run_tool(&mut self, call: &ToolCall) {
        let agent = std::sync::Arc::clone(&self.agent);
        let session = self.session_tools.clone();
        let offered = OfferedTools::new(&agent.tools, session.as_deref());
        let tool = match offered.check(&call.name, &call.args, &self.record) {
            Ok(tool) => tool,
            Err(rejection) => {
                let text = rejection.message(&call.name, &offered.specs_for(&self.record));
                self.append(Item::tool_error(call.id.clone(), call.name.clone(), text));
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
                ids: &mut *self.ids,
                effects: &mut self.effects,
            };
            tool.call(&call.args, &mut ctx)
        };
        self.flush_live();
        let (id, name) = (call.id.clone(), call.name.clone());
        match outcome {
            ToolOutcome::EndTurn { text } => {
                self.turn_ended = true;
                self.append(Item::tool_result(id, name, text));
            }
            ToolOutcome::Result {
                text,
                is_error: false,
            } => self.append(Item::tool_result(id, name, text)),
            ToolOutcome::Result {
                text,
                is_error: true,
            } => self.append(Item::tool_error(id, name, text)),
            ToolOutcome::Dispatched => self.add_pending(call, PendingKind::Dispatched, None),
            ToolOutcome::Passive { due } => self.add_pending(call, PendingKind::Passive, due),
        }
    }

    fn add_pending(&mut self, call: &ToolCall, kind: PendingKind, due: Option<jiff::Timestamp>) {
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

    /// For a delegated thread whose turn is over (a successful `finish`, a reply without tool
    /// calls, or an error that stopped it, with no call pending): returns its result to the
    /// caller and closes the thread.
    pub(super) fn return_if_delegation_done(&mut self) {
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
        close_now(&mut self.record, self.now, None, &cause, &mut self.effects);
    }
}
