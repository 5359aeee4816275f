//! Calls that wait for a person's approval (an agent file's `approvals:`): the question is
//! asked, the answer (or the deadline's default) runs the call or declines it. The answers to
//! every question (a tool server's too) come in here.

use crate::effect::{Effect, OutputKind};
use crate::history::ToolCall;
use crate::ids::CallId;
use crate::state::{
    ApprovalDefault, OpenChoice, PendingApproval, PendingCall, PendingKind, MAX_HELD_ARGS_BYTES,
};
use crate::tools::approval;

use super::calls::Performed;
use super::draft::Draft;
use super::inputs::{Applied, DropReason};
use super::timeline::CallResult;

impl Draft<'_> {
    /// When the agent requires approval for `call`'s tool: keeps the call pending, asks a
    /// person (an open choice the answer's input settles) and arranges the rule's deadline.
    /// What came of the call, for its span (`approval`, or `rejected` when its arguments are
    /// too big to hold); `None` when no rule covers the tool.
    pub(super) fn ask_approval(&mut self, call: &ToolCall) -> Option<&'static str> {
        let agent = std::sync::Arc::clone(self.equipment.agent());
        let (rule, pattern) = approval::rule_for(&agent.approvals, &call.name)?;
        // The record holds them until the answer, and it is rewritten at every commit.
        let size = call.args.to_string().len();
        if size > MAX_HELD_ARGS_BYTES {
            self.append(crate::history::Item::tool_error(
                call.id.clone(),
                call.name.clone(),
                format!(
                    "Not run: `{}` needs a person's approval, and its arguments ({size} bytes) \
                     are more than an approval holds ({MAX_HELD_ARGS_BYTES} bytes). Call it \
                     with smaller arguments.",
                    call.name
                ),
            ));
            return Some("rejected");
        }
        let deadline = rule.deadline.as_ref().and_then(|deadline| {
            Some((deadline.due_from(self.now)?, deadline.as_str().to_owned()))
        });
        let prompt = approval::question(
            &call.name,
            &call.args,
            pattern,
            deadline.as_ref().map(|(due, _)| (*due, rule)),
        );
        let mut pending = self.new_pending(call, PendingKind::Dispatched, None);
        pending.approval = Some(Box::new(PendingApproval {
            args: call.args.clone(),
            deadline: rule.deadline.clone(),
            default: rule.default,
        }));
        self.record.pending_calls.push(pending);
        let choice = OpenChoice {
            call_id: call.id.clone(),
            prompt,
            choices: approval::CHOICES.map(str::to_owned).to_vec(),
            default: approval::DO_NOT_RUN,
            response_url: String::new(),
        };
        self.output(OutputKind::ChoiceRequested {
            call_id: choice.call_id.clone(),
            prompt: choice.prompt.clone(),
            choices: choice.choices.clone(),
            default: choice.default,
        });
        self.record.open_choices.push(choice);
        if let Some((due, after)) = deadline {
            self.outbox.push(Effect::SendAt {
                input: approval::deadline_input(&self.record.id, &call.id, after),
                due,
            });
        }
        Some("approval")
    }

    /// Settles the approval `pending` waited for: approved, the call runs now (its result, or
    /// the wait for it, as if it had run when the model made it); declined, it gets a result
    /// saying so, and by whom.
    pub(super) fn settle_approval(
        &mut self,
        mut pending: PendingCall,
        approved: bool,
        by: approval::Settled<'_>,
    ) {
        let Some(approval) = pending.approval.take() else {
            return;
        };
        let (selected, choice) = if approved {
            (approval::RUN, approval::CHOICES[approval::RUN])
        } else {
            (
                approval::DO_NOT_RUN,
                approval::CHOICES[approval::DO_NOT_RUN],
            )
        };
        self.output(OutputKind::ChoiceAnswered {
            call_id: pending.call_id.clone(),
            selected,
            choice: choice.to_owned(),
            by_deadline: matches!(by, approval::Settled::Deadline(_)),
        });
        if !approved {
            self.resolve(pending, CallResult::error(approval::declined_text(by)));
            return;
        }
        let call = ToolCall {
            id: pending.call_id.clone(),
            name: pending.tool.clone(),
            args: approval.args,
        };
        // The tool may be gone since (the thread moved to another version of its agent).
        let tool = match self.checked_tool(&call) {
            Ok(tool) => tool,
            Err(text) => {
                self.resolve(pending, CallResult::error(text));
                return;
            }
        };
        match self.perform(&call, tool.as_ref()) {
            Performed::Now {
                text,
                is_error,
                end_turn,
            } => {
                if end_turn && !pending.moved_on {
                    self.turn.end();
                }
                let result = if is_error {
                    CallResult::error(text)
                } else {
                    CallResult::text(text)
                };
                self.resolve(pending, result);
            }
            // Waiting now for what runs it (a tool server, the application): as if the model
            // had just made the call, but still moved on from if the conversation was.
            Performed::Later(mut waits) => {
                waits.moved_on = pending.moved_on;
                waits.trace = pending.trace;
                self.record.pending_calls.push(waits);
            }
        }
    }

    /// Takes the pending call `call_id` if it waits for a person's approval (the others stay
    /// where they are).
    pub(super) fn take_unapproved(&mut self, call_id: &CallId) -> Option<PendingCall> {
        let waits = self
            .record
            .pending(call_id)
            .is_some_and(|p| p.approval.is_some());
        waits.then(|| self.take_pending(call_id)).flatten()
    }

    /// The approval `call_id` waits for got no answer within its rule's deadline (`after`):
    /// the rule's default settles it. Dropped when it is settled already.
    pub(super) fn approval_deadline(&mut self, call_id: CallId, after: &str) -> Applied {
        let Some(pending) = self.take_unapproved(&call_id) else {
            return Err(DropReason::NoApproval(call_id));
        };
        self.record.open_choices.retain(|c| c.call_id != call_id);
        let approved = pending
            .approval
            .as_ref()
            .is_some_and(|a| a.default == ApprovalDefault::Approve);
        self.settle_approval(pending, approved, approval::Settled::Deadline(after));
        Ok(())
    }

    /// A question was answered (an approval's or a tool server's): it closes, and an approval
    /// is settled by the answer.
    pub(super) fn user_choice_answered(
        &mut self,
        call_id: CallId,
        selected: usize,
        unattended: bool,
    ) -> Applied {
        let Some(at) = self
            .record
            .open_choices
            .iter()
            .position(|c| c.call_id == call_id)
        else {
            return Err(DropReason::NoOpenChoice(call_id));
        };
        let choice = self.record.open_choices.remove(at);
        tracing::info!(thread = %self.record.id, call = %call_id, selected, "user choice answered");
        match self.take_unapproved(&call_id) {
            Some(pending) => {
                let by = match unattended {
                    true => crate::tools::approval::Settled::Unattended,
                    false => crate::tools::approval::Settled::Person,
                };
                self.settle_approval(pending, selected == crate::tools::approval::RUN, by);
            }
            None => self.output(OutputKind::ChoiceAnswered {
                call_id,
                selected,
                choice: choice.choices.get(selected).cloned().unwrap_or_default(),
                by_deadline: false,
            }),
        }
        Ok(())
    }
}
