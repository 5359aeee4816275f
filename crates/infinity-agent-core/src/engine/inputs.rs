//! One function per input kind: what each does to the thread.

use serde_json::json;

use crate::effect::{Effect, Notification, OutputKind};
use crate::history::{
    model_time, Item, ToolCall, INJECTED_TOOL, INTERRUPTED_IDLE_NOTICE, INTERRUPTED_NOTICE,
};
use crate::ids::{CallId, InputId, ThreadId};
use crate::input::{Input, InputBody};
use crate::state::{memory_write, Delegation, MemoryError, OpenChoice, PendingKind, Subscription};
use crate::tools::builtin::threads::{close_now, spawn_child, ChildOrigin};
use crate::tools::internal::delegation::{self, NotRunning};

use super::draft::Draft;
use super::filters::filtered_notice;
use super::timeline::CallResult;

/// Why an input was dropped. Dropping is not an error: the input is marked processed and
/// changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DropReason {
    /// The input names another thread.
    #[error("addressed to thread {0}")]
    OtherThread(ThreadId),
    /// The thread processed an input with this id before.
    #[error("already processed")]
    AlreadyProcessed,
    /// No thread has this id, and the input does not create one.
    #[error("unknown thread")]
    UnknownThread,
    /// The input came before the one that created the thread.
    #[error("unknown thread (arrived before the thread was created)")]
    BeforeCreation,
    /// The thread is closed.
    #[error("thread is closed")]
    ThreadClosed,
    /// The input creates a thread that already exists.
    #[error("thread already exists")]
    ThreadExists,
    /// A message from a parent reached a root thread.
    #[error("message from a parent, but this is a root thread")]
    NoParent,
    /// A message with no text (empty or only whitespace): the front doors refuse one, and one
    /// that came another way is dropped, with an error on the thread saying so.
    #[error("the message is empty")]
    EmptyMessage,
    /// A person's message found the thread busy under `while_busy: reject`.
    #[error("the thread is busy and refuses messages (while_busy: reject)")]
    Busy,
    /// An input for the root thread reached a child.
    #[error("{0} go to the root thread")]
    NotRoot(&'static str),
    /// No call with this id is pending.
    #[error("no pending call {0}")]
    NoPendingCall(CallId),
    /// A result (or a deadline) for a call that has not run: it waits for a person's approval.
    #[error("call {0} waits for a person's approval and has not run")]
    AwaitsApproval(CallId),
    /// No call with this id waits for approval (answered already, or never asked).
    #[error("no call {0} waits for approval")]
    NoApproval(CallId),
    /// No sleep with this id is pending.
    #[error("no pending sleep {0}")]
    NoPendingSleep(CallId),
    /// No subscription with this id is active.
    #[error("no active subscription {0}")]
    NoSubscription(CallId),
    /// No schedule with this id (deleted, or its thread closed).
    #[error("no schedule {0}")]
    NoSchedule(String),
    /// A person's schedule that is not valid (any more).
    #[error("schedule {0} not created: {1}")]
    BadSchedule(String, String),
    /// A schedule's timer for an occurrence it no longer waits for.
    #[error("schedule {0} no longer waits for this occurrence")]
    StaleOccurrence(String),
    /// No open question for this call.
    #[error("no open choice for call {0}")]
    NoOpenChoice(CallId),
    /// Another answer to the call stands (the first one): this one lost.
    #[error("overruled: {0}")]
    Overruled(String),
    /// The reporting thread is not a child of this one.
    #[error("{0} is not a child of this thread")]
    NotAChild(ThreadId),
    /// A child's memory write broke the rules.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// A delegation ended that the conversation does not count.
    #[error(transparent)]
    Delegation(#[from] NotRunning),
    /// An input of a library category that its shelf refused (a comment on a page the thread
    /// did not publish, or one it has already), or that this host keeps no shelf for.
    #[error("{0}")]
    CategoryEvent(String),
}

pub(super) type Applied = Result<(), DropReason>;

impl Draft<'_> {
    /// Applies one input.
    pub(super) fn apply(&mut self, body: InputBody) -> Applied {
        match body {
            InputBody::UserMessage {
                text, while_busy, ..
            } => self.user_message(text, while_busy),
            InputBody::MessageFromParent { text } => self.message_from_parent(text),
            InputBody::ToolResult {
                call_id,
                text,
                is_error,
                subscription,
                images,
                display_as,
            } => self.tool_result(
                call_id,
                subscription,
                CallResult {
                    text,
                    is_error,
                    images,
                    display_as,
                },
            ),
            InputBody::TimerWakeUp { call_id } => self.timer_wake_up(call_id),
            InputBody::SubscriptionEvent {
                call_id,
                text,
                associative,
                is_final,
            } => self.subscription_event(call_id, text, associative, is_final),
            InputBody::ChildReport {
                child_id,
                call_id: _,
                report,
                closed,
            } => self.child_report(child_id, report, closed),
            InputBody::ChildSeed { seed, .. } => self.child_seed(seed),
            InputBody::DelegatedTask { text, .. } => self.delegated_task(text),
            InputBody::WidgetAction { action, values } => self.widget_action(action, values),
            // Inputs of a library category go to its shelf.
            body @ (InputBody::CategoryEvent { .. } | InputBody::ArtifactCommentV1(_)) => {
                self.category_event(&body)
            }
            InputBody::MemoryWrite { key, value } => self.memory_write(&key, &value),
            InputBody::ToolAuthorization { call_id, auth_url } => {
                self.tool_authorization(call_id, auth_url)
            }
            InputBody::UserChoiceRequest {
                call_id,
                prompt,
                choices,
                default,
                response_url,
            } => self.user_choice_request(OpenChoice {
                call_id,
                prompt,
                choices,
                default,
                response_url,
            }),
            InputBody::UserChoiceAnswered {
                call_id,
                selected,
                unattended,
            } => self.user_choice_answered(call_id, selected, unattended),
            InputBody::ViewUpdate { view_type, content } => self.view_update(view_type, content),
            InputBody::DelegationUpdate {
                delegation,
                running,
            } => self.delegation_update(delegation, running),
            InputBody::CloseRequest { call_id } => self.close_request(call_id),
            InputBody::ConversationUsage { usage, total } => self.conversation_usage(usage, total),
            InputBody::SetBudget { usd, tokens } => {
                self.set_budget(usd, tokens);
                Ok(())
            }
            // Applied when the slice chose its agent (`admit`), before any input.
            InputBody::Nudge {} | InputBody::UseAgent { .. } | InputBody::UseModel { .. } => Ok(()),
            InputBody::Continue { completions } => {
                self.accounting.carry(completions);
                Ok(())
            }
            InputBody::Interrupt { tree } => self.interrupt(tree),
            InputBody::Close {} => self.close(),
            InputBody::Schedule { schedule_id, at } => self.schedule(schedule_id, at),
            InputBody::ScheduleCreate { schedule_id, args } => {
                self.schedule_create(schedule_id, args)
            }
            InputBody::ScheduleDelete { schedule_id } => {
                crate::tools::builtin::schedule::delete(&mut self.record, &schedule_id)
                    .map_err(|_| DropReason::NoSchedule(schedule_id))
            }
            InputBody::CallDeadline {
                call_id,
                after,
                result,
            } => self.call_deadline(call_id, after, result),
            InputBody::ApprovalDeadline { call_id, after } => {
                self.approval_deadline(call_id, &after)
            }
        }
    }

    fn conversation_usage(
        &mut self,
        usage: crate::state::HourlyUsage,
        total: crate::model::Usage,
    ) -> Applied {
        if !self.record.is_root() {
            return Err(DropReason::NotRoot("usage reports"));
        }
        self.add_reported(&usage, &total);
        Ok(())
    }

    fn tool_result(&mut self, call_id: CallId, subscription: bool, result: CallResult) -> Applied {
        self.refuse_unapproved(&call_id)?;
        let Some(pending) = self.take_pending(&call_id) else {
            return Err(DropReason::NoPendingCall(call_id));
        };
        self.record.open_choices.retain(|c| c.call_id != call_id);
        if subscription && !result.is_error {
            let wake_if = self
                .conversation
                .toolset
                .as_ref()
                .and_then(|t| t.get(&pending.tool))
                .and_then(|tool| crate::tools::servers::wake_if_of(tool, &pending.args))
                .map(str::to_owned);
            self.record.subscriptions.push(Subscription {
                call_id: pending.call_id.clone(),
                tool: pending.tool.clone(),
                args: pending.args.clone(),
                wake_if,
                filtered: None,
            });
        }
        self.resolve(pending, result);
        Ok(())
    }

    fn timer_wake_up(&mut self, call_id: CallId) -> Applied {
        let Some(pending) = self.take_pending(&call_id) else {
            return Err(DropReason::NoPendingSleep(call_id));
        };
        let due = model_time(pending.due.unwrap_or(self.now));
        let text = if pending.moved_on {
            format!("The sleep that was interrupted earlier has ended (it was due at {due}).")
        } else {
            format!("Slept until {due}; woke at {}.", model_time(self.now))
        };
        self.resolve(pending, CallResult::text(text));
        Ok(())
    }

    fn subscription_event(
        &mut self,
        call_id: CallId,
        text: String,
        associative: bool,
        is_final: bool,
    ) -> Applied {
        let Some(index) = self
            .record
            .subscriptions
            .iter()
            .position(|s| s.call_id == call_id)
        else {
            return Err(DropReason::NoSubscription(call_id));
        };
        if !is_final && !self.wakes(index, &text) {
            return Ok(());
        }
        let sub = if is_final {
            let mut ended = self.record.subscriptions.remove(index);
            // What it kept from the model ends with it: the notice comes before the last event.
            if let Some(f) = ended.filtered.take() {
                let text = filtered_notice(&ended, &f);
                self.append(Item::Notice {
                    text,
                    is_error: false,
                });
            }
            ended
        } else {
            self.record.subscriptions[index].clone()
        };
        let text = if is_final {
            format!("{text}\n(This was the subscription's final event.)")
        } else {
            text
        };
        if associative {
            let items = self.injected_pair(&sub.tool, &sub.call_id, &sub.args, text, "event");
            self.actionable(items);
        } else {
            self.spawn_event_thread(&sub, text);
        }
        Ok(())
    }

    /// A non-associative event is handled by a child thread of its own (counted against the
    /// conversation's threads, but never refused: an event must not be lost).
    fn spawn_event_thread(&mut self, sub: &Subscription, text: String) {
        self.count_threads(1);
        let seed_call = CallId::derived(
            self.intake
                .current()
                .map(InputId::as_str)
                .unwrap_or(sub.call_id.as_str()),
            "event",
        );
        let seed_args = json!({
            "original_tool_name": sub.tool,
            "original_tool_call_id": sub.call_id,
            "original_args": sub.args,
        });
        spawn_child(
            &mut self.record,
            self.history.view(),
            self.now,
            self.ids,
            ChildOrigin {
                call_id: &sub.call_id,
                tool: &sub.tool,
                args: &sub.args,
            },
            self.outbox.effects_mut(),
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
                    Item::tool_result(
                        seed_call,
                        INJECTED_TOOL,
                        format!(
                            "{text}\n\nYou are in a thread spawned to handle this event of \
                             subscription {}. Handle it, report to your parent if it needs to \
                             know, then close this thread. Your thread ID is {child_id}.",
                            sub.call_id
                        ),
                    ),
                ]
            },
        );
    }

    fn child_report(&mut self, child_id: ThreadId, report: String, closed: bool) -> Applied {
        let Some(link) = self
            .record
            .children
            .iter_mut()
            .find(|c| c.thread_id == child_id)
        else {
            return Err(DropReason::NotAChild(child_id));
        };
        if closed {
            link.closed = true;
            if report.is_empty() {
                return Ok(());
            }
        }
        let link = link.clone();
        let text = if closed {
            format!("Final report from child thread {child_id} (the child has shut down): {report}")
        } else {
            format!("Report from child thread {child_id}: {report}")
        };
        let items = self.injected_pair(&link.tool, &link.call_id, &link.args, text, "report");
        self.actionable(items);
        Ok(())
    }

    fn child_seed(&mut self, seed: Vec<Item>) -> Applied {
        if !self.created() || !self.history.appended().is_empty() {
            return Err(DropReason::ThreadExists);
        }
        for item in seed {
            self.append(item);
        }
        Ok(())
    }

    fn delegated_task(&mut self, text: String) -> Applied {
        if !self.created() || !self.history.appended().is_empty() {
            return Err(DropReason::ThreadExists);
        }
        self.actionable(vec![Item::user(text)]);
        Ok(())
    }

    fn widget_action(
        &mut self,
        action: String,
        values: serde_json::Map<String, serde_json::Value>,
    ) -> Applied {
        let text = if values.is_empty() {
            format!("[widget] The user pressed `{action}`.")
        } else {
            format!(
                "[widget] The user pressed `{action}` with {}.",
                serde_json::Value::Object(values)
            )
        };
        self.actionable(vec![Item::user(text)]);
        Ok(())
    }

    /// An input of a library category: its shelf applies it to what the category keeps on the
    /// thread, and what it returns is shown to the model, which may answer it. An input the
    /// shelf refuses, or that this host keeps no shelf for, is dropped with its reason.
    fn category_event(&mut self, body: &InputBody) -> Applied {
        let Some((category, event)) = body.category_event() else {
            return Err(DropReason::CategoryEvent(format!(
                "a {} input belongs to no category",
                body.kind()
            )));
        };
        let Some(library) = self.equipment.library() else {
            return Err(DropReason::CategoryEvent(format!(
                "an input of the {category} category, and this host keeps no library"
            )));
        };
        // On a copy: a refused input leaves the record as it was.
        let mut notes = self.record.notes(category).clone();
        let shown = library
            .on_event(category, &mut notes, &event)
            .map_err(|why| DropReason::CategoryEvent(why.text().to_owned()))?;
        *self.record.notes_mut(category) = notes;
        self.actionable(vec![Item::user(shown)]);
        Ok(())
    }

    fn memory_write(&mut self, key: &str, value: &str) -> Applied {
        if !self.record.is_root() {
            return Err(DropReason::NotRoot("memory writes"));
        }
        memory_write(&mut self.conversation.memory, key, value)?;
        Ok(())
    }

    /// The tool needs the user's authorization first (RAP `oauth`): the user gets the link; the
    /// call stays pending and the model is not told (the detour is the tool's business; its
    /// result, when it comes, is the call's own result). Should the conversation move on
    /// meanwhile, the call's stand-in result says what it waits for.
    fn tool_authorization(&mut self, call_id: CallId, auth_url: String) -> Applied {
        let Some(pending) = self
            .record
            .pending_calls
            .iter_mut()
            .find(|p| p.call_id == call_id && p.kind == PendingKind::Dispatched)
        else {
            return Err(DropReason::NoPendingCall(call_id));
        };
        pending.authorizing = true;
        self.output(OutputKind::AuthorizationRequested { call_id, auth_url });
        Ok(())
    }

    /// A person interrupts the thread: every call in flight is cancelled. Each gets an
    /// "interrupted" result (calls the conversation had moved on from already have a stand-in
    /// and get nothing more), tool servers are told (`/cancel_tool_call`), delegated threads are
    /// closed, open questions are withdrawn, and results that arrive later are dropped. The
    /// model is not asked to answer: the thread waits for the person's next message. With
    /// nothing in flight (no pending call, no open question, no open child to pass it to), the
    /// event and the notice say so instead.
    pub(super) fn interrupt(&mut self, tree: bool) -> Applied {
        let nothing_in_flight = self.record.pending_calls.is_empty()
            && self.record.open_choices.is_empty()
            && !(tree && self.record.children.iter().any(|c| !c.closed));
        if tree {
            let cause = self.intake.current().cloned();
            for child in self.record.children.iter().filter(|c| !c.closed) {
                let id = match &cause {
                    Some(cause) => InputId::derived(cause.as_str(), child.thread_id.as_str()),
                    None => InputId::derived(child.thread_id.as_str(), "interrupt"),
                };
                self.outbox.push(Effect::Send {
                    input: Input {
                        id,
                        thread_id: child.thread_id.clone(),
                        body: InputBody::Interrupt { tree: true },
                    },
                });
            }
        }
        let pending = std::mem::take(&mut self.record.pending_calls);
        self.record.open_choices.clear();
        let cancelled = pending.len();
        for call in pending {
            self.cancel_call(&call);
            if !call.moved_on {
                self.append(Item::tool_error(
                    call.call_id,
                    call.tool,
                    "Interrupted by the user before a result arrived; the call was cancelled.",
                ));
            }
        }
        self.output(OutputKind::Interrupted {
            calls: cancelled as u32,
            nothing_in_flight,
        });
        // The notice, not the slice, ends the turn: a message later in the same batch is
        // answered.
        let notice = if nothing_in_flight {
            INTERRUPTED_IDLE_NOTICE
        } else {
            INTERRUPTED_NOTICE
        };
        self.append(Item::Notice {
            text: notice.to_owned(),
            is_error: false,
        });
        Ok(())
    }

    /// Refuses what would end a call that waits for a person's approval other than its answer
    /// (a result nobody should have, a tool's deadline timer): it has not run.
    fn refuse_unapproved(&self, call_id: &CallId) -> Applied {
        match self.record.pending(call_id) {
            Some(pending) if pending.approval.is_some() => {
                Err(DropReason::AwaitsApproval(call_id.clone()))
            }
            _ => Ok(()),
        }
    }

    /// A dispatched call reached the deadline its tool server has in the agent file: it gets an
    /// error result (or the one its tool set for this end) and the server is told to cancel it;
    /// a result that comes later is dropped.
    fn call_deadline(&mut self, call_id: CallId, after: String, result: Option<String>) -> Applied {
        self.refuse_unapproved(&call_id)?;
        let Some(pending) = self.take_pending(&call_id) else {
            return Err(DropReason::NoPendingCall(call_id));
        };
        self.record.open_choices.retain(|c| c.call_id != call_id);
        self.cancel_call(&pending);
        // A tool may end its calls with a result whatever became of them (a command on a
        // remote: its status is `lost`).
        if let Some(text) = result {
            self.resolve(pending, CallResult::text(text));
            return Ok(());
        }
        let text = if pending.client.is_some() {
            crate::tools::client::deadline_text(&after)
        } else {
            format!(
                "Error: no result from the tool server within {after} (the deadline its agent \
                 file sets); the call was cancelled. You may try again or tell the user."
            )
        };
        self.resolve(pending, CallResult::error(text));
        Ok(())
    }

    /// Tells whoever runs a pending call that it is cancelled: a delegated thread is closed,
    /// tool servers get `/cancel_tool_call` (for any call a dispatcher performs); the built-in
    /// tools' waits and timers need nothing (their inputs are dropped once the call is no longer
    /// pending).
    pub(super) fn cancel_call(&mut self, call: &crate::state::PendingCall) {
        // A call waiting for approval never left; a client tool's application sees its
        // result (an interruption, a stand-in) on the event stream.
        if call.kind != PendingKind::Dispatched || call.approval.is_some() || call.client.is_some()
        {
            return;
        }
        if call.delegated || call.tool == delegation::TOOL {
            delegation::close_delegated(&self.record.id, &call.call_id, self.outbox.effects_mut());
        } else if !crate::tools::BUILTIN_TOOL_NAMES.contains(&call.tool.as_str()) {
            self.outbox.push(Effect::Notify {
                notification: Notification::CancelToolCall {
                    thread_id: self.record.id.clone(),
                    call_id: call.call_id.clone(),
                    tool: call.tool.clone(),
                    keys: self.record.notify_keys.clone(),
                },
            });
        }
    }

    fn user_choice_request(&mut self, choice: OpenChoice) -> Applied {
        if self.record.pending(&choice.call_id).is_none() {
            return Err(DropReason::NoPendingCall(choice.call_id));
        }
        self.record
            .open_choices
            .retain(|c| c.call_id != choice.call_id);
        self.output(OutputKind::ChoiceRequested {
            call_id: choice.call_id.clone(),
            prompt: choice.prompt.clone(),
            choices: choice.choices.clone(),
            default: choice.default,
        });
        self.record.open_choices.push(choice);
        Ok(())
    }

    /// A question was answered: a tool server's (the answer went to it, its result follows) or
    /// an approval the runtime asked (0 runs the call).
    fn view_update(
        &mut self,
        view_type: String,
        content: serde_json::Map<String, serde_json::Value>,
    ) -> Applied {
        if content.is_empty() {
            self.record.views.remove(&view_type);
        } else {
            self.record.views.insert(view_type.clone(), content.clone());
        }
        self.output(OutputKind::ViewUpdated { view_type, content });
        Ok(())
    }

    fn delegation_update(&mut self, delegation: Delegation, running: bool) -> Applied {
        if !self.record.is_root() {
            return Err(DropReason::NotRoot("delegation updates"));
        }
        delegation::apply_update(&mut self.conversation, delegation, running)?;
        Ok(())
    }

    /// The parent closes this thread; its `close_thread` call gets its result once it is closed
    /// (also when the thread had closed itself meanwhile).
    /// A person closes the thread (and so its descendants); its parent, if any, is told.
    fn close(&mut self) -> Applied {
        let cause = self
            .intake
            .current()
            .map_or_else(|| "close".to_owned(), |id| id.to_string());
        let report = self
            .record
            .parent
            .is_some()
            .then(|| "A person closed this thread.".to_owned());
        close_now(
            &mut self.record,
            self.now,
            report,
            &cause,
            self.outbox.effects_mut(),
        );
        Ok(())
    }

    fn close_request(&mut self, call_id: CallId) -> Applied {
        let cause = call_id.as_str().to_owned();
        close_now(
            &mut self.record,
            self.now,
            None,
            &cause,
            self.outbox.effects_mut(),
        );
        if let Some(parent) = &self.record.parent {
            self.outbox.push(Effect::Send {
                input: Input {
                    id: InputId::derived(call_id.as_str(), "closed"),
                    thread_id: parent.thread_id.clone(),
                    body: InputBody::tool_result(
                        call_id,
                        format!("Thread {} is closed.", self.record.id),
                    ),
                },
            });
        }
        Ok(())
    }
}
