//! The answers among a slice's inputs, held to the one that stands (see
//! [`Answer`](crate::input::Answer)) before the engine applies any of them.
//!
//! A front keeps a person's or an application's answer before it queues it, and refuses a later
//! one at once. But answers also come another way (a deadline's timer, an input put on the
//! queue directly, an interrupt that cancels the call), and two fronts may race. So the host
//! takes each answer's turn here as well, through the same store: an answer that finds another
//! standing is overruled, and the one that stands is applied in its place (its input may not
//! have reached the queue, if the process that kept it died first); the engine drops the loser,
//! marked processed, naming the answer that stands. An interrupt, a close, or a person's message
//! that interrupts (`while_busy: interrupt`) keeps "cancelled" for the calls it cancels; an
//! answer kept before it is applied first.

use std::collections::{HashMap, HashSet};

use jiff::Timestamp;

use crate::ids::{CallId, InputId};
use crate::input::{Answer, AnswerTo, Answered};
use crate::input::{Input, InputBody};
use crate::state::{ApprovalDefault, ThreadRecord, WhileBusy};
use crate::store::{StoreError, ThreadStore};
use crate::tools::approval;

/// What an input does to calls that wait for an answer.
enum Turn {
    /// Nothing: the engine decides about it as about any input.
    None,
    /// It answers a call that waits.
    Answers(Box<Answer>),
    /// It cancels these waits (calls, and what of them waits), by `by`.
    Cancels(Vec<(CallId, AnswerTo)>, &'static str),
}

/// The inputs a slice takes, answers held to the one that stands.
pub(super) struct Held {
    /// The batch's inputs, and the answers that stand and did not come with it.
    pub(super) inputs: Vec<Input>,
    /// The answers that lost, by input, with the one that stands: the engine drops them.
    pub(super) overruled: HashMap<InputId, String>,
}

/// `inputs`, with every answer that lost to another marked overruled (or, carrying the same
/// input id, replaced by it) and the answers that stand (and did not come with them) put in.
pub(super) async fn standing_answers(
    store: &dyn ThreadStore,
    record: Option<&ThreadRecord>,
    inputs: Vec<Input>,
    processed: &HashSet<InputId>,
    now: Timestamp,
) -> Result<Held, StoreError> {
    let mut held = Held {
        inputs: Vec::with_capacity(inputs.len()),
        overruled: HashMap::new(),
    };
    let Some(record) = record else {
        held.inputs = inputs;
        return Ok(held);
    };
    for input in inputs {
        let turn = match processed.contains(&input.id) {
            true => Turn::None,
            false => turn_of(record, &input, now),
        };
        match turn {
            Turn::None => held.inputs.push(input),
            Turn::Answers(answer) => match store.claim_answer(&record.id, &answer).await? {
                None => held.inputs.push(input),
                Some(standing) if standing.same_as(&answer) => held.inputs.push(input),
                Some(standing) => {
                    tracing::info!(
                        thread = %record.id, input = %input.id, %standing,
                        "an answer that came after the one that stands is dropped"
                    );
                    let why = standing.to_string();
                    match standing.input {
                        // The same input id with another body: the one that stands replaces it.
                        Some(theirs) if theirs.id == input.id => held.inputs.push(theirs),
                        theirs => {
                            held.overruled.insert(input.id.clone(), why);
                            held.inputs.push(input);
                            put_in(store, record, &mut held.inputs, theirs, processed).await?;
                        }
                    }
                }
            },
            Turn::Cancels(calls, by) => {
                for (call, to) in calls {
                    let cancelled = Answer::cancelled(call, to, by, now);
                    if let Some(standing) = store.claim_answer(&record.id, &cancelled).await? {
                        // Answered before the cancel: that answer is applied first.
                        put_in(store, record, &mut held.inputs, standing.input, processed).await?;
                    }
                }
                held.inputs.push(input);
            }
        }
    }
    Ok(held)
}

/// Adds the input of an answer that stands, unless the thread has it already (in this batch,
/// or processed before: the store is asked, as the answer did not come with the batch).
async fn put_in(
    store: &dyn ThreadStore,
    record: &ThreadRecord,
    kept: &mut Vec<Input>,
    input: Option<Input>,
    processed: &HashSet<InputId>,
) -> Result<(), StoreError> {
    let Some(input) = input else { return Ok(()) };
    if processed.contains(&input.id) || kept.iter().any(|k| k.id == input.id) {
        return Ok(());
    }
    let ids = std::slice::from_ref(&input.id);
    if store.processed(&record.id, ids).await?.is_empty() {
        kept.push(input);
    }
    Ok(())
}

/// The calls of `record` that wait for someone outside the thread, and for what.
fn waiting(record: &ThreadRecord) -> Vec<(CallId, AnswerTo)> {
    record
        .pending_calls
        .iter()
        .filter_map(|p| match (&p.approval, &p.client) {
            (Some(_), _) => Some((p.call_id.clone(), AnswerTo::Question)),
            (None, Some(_)) => Some((p.call_id.clone(), AnswerTo::Result)),
            (None, None) => None,
        })
        .collect()
}

/// What `input` does to the calls of `record` that wait for an answer.
fn turn_of(record: &ThreadRecord, input: &Input, now: Timestamp) -> Turn {
    let waits_for_application = |call: &CallId| {
        record
            .pending(call)
            .is_some_and(|p| p.client.is_some() && p.approval.is_none())
    };
    let (call_id, what) = match &input.body {
        InputBody::UserChoiceAnswered {
            call_id, selected, ..
        } => {
            let Some(choice) = record.open_choices.iter().find(|c| &c.call_id == call_id) else {
                return Turn::None;
            };
            let choice = choice.choices.get(*selected).cloned().unwrap_or_default();
            let selected = *selected;
            (call_id, Answered::Choice { selected, choice })
        }
        InputBody::ToolResult {
            call_id,
            text,
            is_error,
            ..
        } if waits_for_application(call_id) => {
            let is_error = *is_error;
            let bytes = text.len();
            (call_id, Answered::Result { is_error, bytes })
        }
        InputBody::ApprovalDeadline { call_id, after } => {
            let Some(approval) = record.pending(call_id).and_then(|p| p.approval.as_ref()) else {
                return Turn::None;
            };
            let chosen = match approval.default {
                ApprovalDefault::Approve => approval::RUN,
                ApprovalDefault::Decline => approval::DO_NOT_RUN,
            };
            let choice = Some(approval::CHOICES[chosen].to_owned());
            let after = after.clone();
            (call_id, Answered::Deadline { after, choice })
        }
        InputBody::CallDeadline { call_id, after, .. } if waits_for_application(call_id) => {
            let after = after.clone();
            (
                call_id,
                Answered::Deadline {
                    after,
                    choice: None,
                },
            )
        }
        InputBody::Interrupt { .. } => return Turn::Cancels(waiting(record), "an interrupt"),
        InputBody::Close {} => return Turn::Cancels(waiting(record), "the thread's close"),
        // A person's message that interrupts a busy thread (its own `while_busy`, or its
        // agent's as the last slice saw it) cancels as an interrupt does.
        InputBody::UserMessage { while_busy, .. }
            if record.is_busy()
                && while_busy.or(record.while_busy) == Some(WhileBusy::Interrupt) =>
        {
            return Turn::Cancels(waiting(record), "an interrupting message");
        }
        _ => return Turn::None,
    };
    Turn::Answers(Box::new(Answer::new(call_id.clone(), what, input, now)))
}
