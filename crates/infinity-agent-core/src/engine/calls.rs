//! The completion loop and tool calls: whether the thread needs an answer, what the model is
//! asked, and what its tool calls do.

use serde_json::json;

use crate::effect::Effect;
use crate::history::{HistoryView, Item, ToolCall};
use crate::ids::{InputId, ThreadId};
use crate::input::{Input, InputBody};
use crate::model::{Completion, CompletionRequest, StopReason};
use crate::state::{PendingCall, PendingKind, ThreadStatus};
use crate::telemetry;
use crate::tools::builtin::threads::close_now;
use crate::tools::internal::delegation;
use crate::tools::{OfferedTools, ToolContext, ToolOutcome};

use super::compaction::SUMMARY_SYSTEM;
use super::timeline::Draft;
use super::Purpose;

/// What running a tool came to (see [`Draft::perform`]).
pub(super) enum Performed {
    /// Its result, now.
    Now {
        /// The result text.
        text: String,
        /// True when the call failed.
        is_error: bool,
        /// True when the turn ends with it (`finish`).
        end_turn: bool,
    },
    /// It waits: the call to keep pending.
    Later(PendingCall),
}

impl Draft<'_> {
    /// What the slice asks the model next, or `None` when the loop is over: the thread is
    /// closed, waits for a dispatched call, ended its turn, has nothing to answer, or reached
    /// the agent's completion limit (recorded as an error).
    pub(super) fn next(&mut self) -> Option<Purpose> {
        // A thread that moves, or moved, to another host runs nothing here.
        if self.record.migration.is_some() {
            return None;
        }
        if self.record.status == ThreadStatus::Closed {
            self.cancel_pending();
            return None;
        }
        if self.record.has_dispatched_pending() {
            return None;
        }
        self.flush_deferred();
        if self.turn_ended || !self.needs_answer() {
            // The turn is over: messages queued while it ran start the next one.
            if !self.flush_queued() {
                return None;
            }
            self.turn_ended = false;
        }
        if self.held_by_limits() {
            return None;
        }
        let limit = self.agent.limits.max_completions_per_slice;
        let ran = self.completions + self.carried;
        if ran >= limit {
            self.notice_error(format!(
                "Stopped after {ran} completions in one slice (the agent's \
                 limits.max_completions_per_slice); the model kept calling tools without \
                 finishing. The thread waits for new input."
            ));
            return None;
        }
        self.move_on();
        self.summarize_filtered();
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

    /// Stops before the owed completion, for lack of time: the thread sends itself a `continue`
    /// input (after the commit, like any effect) so its next slice asks the model instead. The
    /// id is the thread's and the version this slice commits, so a repeat of the same hand-off
    /// is the same input.
    pub(super) fn hand_off(&mut self) {
        let version = self.expected_version.map_or(1, |v| v + 1);
        let id = InputId::derived(self.record.id.as_str(), &format!("continue-{version}"));
        self.effects.push(Effect::Send {
            input: Input {
                id,
                thread_id: self.record.id.clone(),
                body: InputBody::Continue {
                    completions: self.completions + self.carried,
                },
            },
        });
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
                // A successful `finish` ended the turn: a later input that brings the model
                // nothing to read (a nudge, a move to another version or model) starts none.
                Item::ToolResult {
                    name,
                    text,
                    is_error: false,
                    ..
                } if name == crate::tools::internal::FINISH
                    && text == crate::tools::internal::FINISH_TURN_ENDED =>
                {
                    return false
                }
                Item::ToolResult { .. } => saw_result = true,
                Item::Notice {
                    text,
                    is_error: false,
                } if crate::history::is_interruption_notice(text) => return false,
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
        let usage = completion.usage;
        self.record.last_prompt_tokens =
            usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
        self.spend(usage);
        // Call ids are ours, never the provider's: ids derived from a call (its wake-up, its
        // result) must be unique in the thread, and some servers (llama.cpp, for one) name every
        // call `call_0`. Providers only need the ids in our history to agree, which they do.
        let calls: Vec<ToolCall> = completion
            .tool_calls
            .into_iter()
            .map(|c| ToolCall {
                id: self.ids.call_id(),
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
            if self.record.status == ThreadStatus::Closed {
                // An earlier call of this turn closed the thread.
                self.append(Item::tool_error(
                    call.id.clone(),
                    call.name.clone(),
                    "Error: not run: an earlier call of this turn closed the thread.",
                ));
                continue;
            }
            self.run_tool(call);
        }
    }

    /// A closed thread waits for nothing: each call still pending gets its result now. When
    /// this slice itself sent the call's result to the thread (`report_to_parent` before
    /// `close_thread` in one turn), that result is recorded (the input would only be dropped);
    /// otherwise an error result says the thread closed first. A call whose conversation moved
    /// on already has its stand-in result.
    pub(super) fn cancel_pending(&mut self) {
        for pending in std::mem::take(&mut self.record.pending_calls) {
            // Whoever runs the call stops: its tool server, its delegated conversation.
            self.cancel_call(&pending);
            if pending.moved_on {
                continue;
            }
            let own_result = self.effects.iter().position(|e| match e {
                Effect::Send { input } => {
                    input.thread_id == self.record.id
                        && matches!(&input.body, InputBody::ToolResult { call_id, .. } if *call_id == pending.call_id)
                }
                _ => false,
            });
            let sent = own_result.map(|i| self.effects.remove(i));
            match sent {
                Some(Effect::Send {
                    input:
                        Input {
                            body:
                                InputBody::ToolResult {
                                    text,
                                    is_error,
                                    images,
                                    display_as,
                                    ..
                                },
                            ..
                        },
                }) => self.append(Item::ToolResult {
                    call_id: pending.call_id,
                    name: pending.tool,
                    text,
                    is_error,
                    images,
                    display_as,
                }),
                _ => self.append(Item::tool_error(
                    pending.call_id,
                    pending.tool,
                    "No result: the thread was closed before this call's result arrived.",
                )),
            }
        }
    }

    /// A model error retrying cannot fix: recorded, and the loop ends.
    pub(super) fn on_model_error(&mut self, why: &str) {
        let name = self.model.name().to_owned();
        self.notice_error(format!("Model error ({name}): {why}"));
        self.turn_ended = true;
    }

    fn run_tool(&mut self, call: &ToolCall) {
        let span = tracing::info_span!("tool", otel.name = %format!("execute_tool {}", call.name));
        let _entered = span.enter();
        let outcome = self.run_tool_in(call);
        if !telemetry::exporting() {
            return;
        }
        telemetry::set(&span, "gen_ai.operation.name", "execute_tool");
        telemetry::set(&span, "gen_ai.tool.name", call.name.clone());
        telemetry::set(&span, "gen_ai.tool.call.id", call.id.to_string());
        telemetry::set(&span, "infinity.tool.outcome", outcome);
        if matches!(outcome, "dispatched" | "waiting" | "approval") {
            if let Some(pending) = self.record.pending_calls.last_mut() {
                pending.trace = telemetry::traceparent(&span);
            }
        } else if matches!(outcome, "error" | "rejected") {
            telemetry::set_error(&span, outcome);
        }
    }

    /// Runs a call; what came of it, for its span: `result`, `error`, `rejected` (not run),
    /// `end_turn`, `dispatched` (its result comes later), `waiting` (a sleep, a subscription),
    /// `approval` (it waits for a person's yes).
    fn run_tool_in(&mut self, call: &ToolCall) -> &'static str {
        let tool = match self.checked_tool(call) {
            Ok(tool) => tool,
            Err(text) => {
                self.append(Item::tool_error(call.id.clone(), call.name.clone(), text));
                return "rejected";
            }
        };
        if let Some(outcome) = self.ask_approval(call) {
            return outcome;
        }
        let (id, name) = (call.id.clone(), call.name.clone());
        match self.perform(call, tool.as_ref()) {
            Performed::Now {
                text,
                end_turn: true,
                ..
            } => {
                self.turn_ended = true;
                self.append(Item::tool_result(id, name, text));
                "end_turn"
            }
            Performed::Now {
                text,
                is_error: true,
                ..
            } => {
                self.append(Item::tool_error(id, name, text));
                "error"
            }
            Performed::Now { text, .. } => {
                self.append(Item::tool_result(id, name, text));
                "result"
            }
            Performed::Later(pending) => {
                let outcome = if pending.kind == PendingKind::Dispatched {
                    "dispatched"
                } else {
                    "waiting"
                };
                self.record.pending_calls.push(pending);
                outcome
            }
        }
    }

    /// The tool `call` names, once its arguments passed its schema; otherwise the error result
    /// the call gets (naming the tools this thread has, when it has none by that name).
    pub(super) fn checked_tool(
        &self,
        call: &ToolCall,
    ) -> Result<std::sync::Arc<dyn crate::tools::Tool>, String> {
        let conversation_tools = self.conversation_tools.clone();
        let offered = OfferedTools::new(&self.agent.tools, conversation_tools.as_deref());
        offered
            .check(&call.name, &call.args, &self.record)
            .map(std::sync::Arc::clone)
            .map_err(|rejection| {
                rejection.message(&call.name, &offered.specs_for(&self.record, None))
            })
    }

    /// Runs `tool` for `call`: what it answered now, or the pending call that waits for its
    /// result (a dispatched call, a client tool's, a sleep).
    pub(super) fn perform(&mut self, call: &ToolCall, tool: &dyn crate::tools::Tool) -> Performed {
        let agent = std::sync::Arc::clone(&self.agent);
        let conversation_tools = self.conversation_tools.clone();
        let offered = OfferedTools::new(&agent.tools, conversation_tools.as_deref());
        let threads_left = self.threads_left();
        let before = self.effects.len();
        let outcome = {
            let mut ctx = ToolContext {
                now: self.now,
                record: &mut self.record,
                view: HistoryView::window(self.skipped, self.base, &self.added),
                call,
                conversation: &mut self.conversation,
                threads_left,
                ids: &mut *self.ids,
                effects: &mut self.effects,
                library: self.library,
                offered,
            };
            tool.call(&call.args, &mut ctx)
        };
        let made = &self.effects[before..];
        let started = starts_threads(made);
        let delegated = made.iter().any(|e| {
            matches!(e, Effect::Send { input } if matches!(input.body, InputBody::DelegatedTask { .. }))
        });
        let client = crate::tools::client::held_call(made).map(Box::new);
        self.count_threads(started);
        self.flush_live();
        let (kind, due) = match outcome {
            ToolOutcome::Dispatched => (PendingKind::Dispatched, None),
            ToolOutcome::Passive { due } => (PendingKind::Passive, due),
            ToolOutcome::Result { text, is_error } => {
                return Performed::Now {
                    text,
                    is_error,
                    end_turn: false,
                }
            }
            ToolOutcome::EndTurn { text } => {
                return Performed::Now {
                    text,
                    is_error: false,
                    end_turn: true,
                }
            }
        };
        let mut pending = self.new_pending(call, kind, due);
        pending.delegated = delegated;
        pending.client = client;
        Performed::Later(pending)
    }

    /// A pending call for `call`, issued now.
    pub(super) fn new_pending(
        &self,
        call: &ToolCall,
        kind: PendingKind,
        due: Option<jiff::Timestamp>,
    ) -> PendingCall {
        PendingCall {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            args: crate::state::args_preview(&call.args),
            kind,
            issued_at: self.now,
            moved_on: false,
            due,
            authorizing: false,
            delegated: false,
            trace: None,
            client: None,
            approval: None,
        }
    }

    /// True while something can still bring this thread input of its own accord: a call's
    /// result, a timer, a subscription's event, an open child's report. (A person or a parent
    /// may write to it too, but nobody writes to a delegated thread.)
    fn can_be_woken(&self) -> bool {
        self.record
            .pending_calls
            .iter()
            .any(|p| p.kind == PendingKind::Dispatched || p.due.is_some())
            || !self.record.subscriptions.is_empty()
            || self.record.children.iter().any(|c| !c.closed)
    }

    /// For a delegated thread whose turn is over (a successful `finish`, a reply without tool
    /// calls, or an error that stopped it, with no call pending; or a wait for input that
    /// nothing can send): returns its result to the caller and closes the thread.
    pub(super) fn return_if_delegation_done(&mut self) {
        let Some(by) = &self.record.delegated_by else {
            return;
        };
        if by.returned || self.record.status == ThreadStatus::Closed || self.added.is_empty() {
            return;
        }
        let (text, is_error) = if self.record.pending_calls.is_empty() {
            let view = self.view();
            match view.get(view.len().wrapping_sub(1)).map(|e| &e.item) {
                Some(Item::Assistant {
                    text, tool_calls, ..
                }) if tool_calls.is_empty() => {
                    delegation::result_text(&self.record, text.as_deref())
                }
                Some(Item::Notice {
                    text,
                    is_error: true,
                }) => (
                    format!("The delegated agent stopped with an error: {text}"),
                    true,
                ),
                _ if self.turn_ended => delegation::result_text(&self.record, None),
                _ => return,
            }
        } else if self.can_be_woken() {
            return;
        } else {
            // It waits (`sleep_until_event_or_input`) for input nothing can send.
            let view = self.view();
            let last_text = view.iter().rev().find_map(|e| match &e.item {
                Item::Assistant {
                    text: Some(text),
                    synthetic: false,
                    ..
                } => Some(text.as_str()),
                _ => None,
            });
            delegation::result_text(&self.record, last_text)
        };
        delegation::return_result(&mut self.record, text, is_error, &mut self.effects);
        let cause = format!("{}-returned", self.record.id);
        close_now(&mut self.record, self.now, None, &cause, &mut self.effects);
    }
}

/// How many of these effects start a thread (a child's seed, a delegated task).
pub(super) fn starts_threads(effects: &[Effect]) -> u32 {
    effects
        .iter()
        .filter(|e| {
            matches!(
                e,
                Effect::Send {
                    input: Input {
                        body: InputBody::ChildSeed { .. } | InputBody::DelegatedTask { .. },
                        ..
                    }
                }
            )
        })
        .count() as u32
}
