//! The decisions of a batch of the input queue, apart from its IO: how its messages group into
//! threads ([`Batch::of`]), which of a thread's messages fail with it ([`ThreadMessages`]), and
//! what the batch answers SQS and leaves behind for the ones that failed ([`Batch::verdict`]).
//! [`super::slices`] does the reading, the slices and the writing.

use std::collections::HashMap;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsMessage};
use jiff::Timestamp;

use super::{attribute, Message};
use crate::dlq::FailureNote;
use crate::wire::parse_input;

/// A message reported as failed: SQS delivers it again, or after the redrive count puts it in
/// the dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Failed {
    /// The SQS message id.
    pub(super) message_id: String,
    /// Its group (the thread it is for), when it has one.
    pub(super) thread: Option<String>,
    /// Why, for whoever finds it in the dead-letter queue.
    pub(super) reason: String,
}

/// A batch's messages, parsed and grouped by thread.
pub(super) struct Batch {
    /// Each thread's messages in the order SQS gave them, the threads in the order of their
    /// first message. A message is grouped by its `MessageGroupId`, else by the thread its
    /// body names, else on its own (by its message id).
    pub(super) threads: Vec<Vec<Message>>,
    /// How each message was delivered.
    pub(super) deliveries: Deliveries,
}

/// Each message's receipt handle and receive count, by message id.
#[derive(Debug, Default)]
pub(super) struct Deliveries(HashMap<String, (String, u32)>);

/// What a batch answers SQS and leaves behind.
#[derive(Debug, Default)]
pub(super) struct Verdict {
    /// The batch item failures.
    pub(super) response: SqsBatchResponse,
    /// The failed messages to deliver again after a short delay: receipt handle and receive
    /// count.
    pub(super) retry: Vec<(String, u32)>,
    /// Why each failed.
    pub(super) notes: Vec<FailureNote>,
}

impl Batch {
    /// Parses and groups the records of one SQS event.
    pub(super) fn of(records: Vec<SqsMessage>) -> Self {
        let mut keys: Vec<String> = Vec::new();
        let mut threads: Vec<Vec<Message>> = Vec::new();
        let mut deliveries = HashMap::new();
        for record in records {
            let message_id = record.message_id.clone().unwrap_or_default();
            let group = attribute(&record, "MessageGroupId");
            let body = record.body.clone().unwrap_or_default();
            let input = parse_input(&body, group, attribute(&record, "MessageDeduplicationId"));
            let key = group
                .map(str::to_owned)
                .or_else(|| input.as_ref().ok().map(|i| i.thread_id().to_string()))
                .unwrap_or_else(|| message_id.clone());
            let receive_count = attribute(&record, "ApproximateReceiveCount")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            if let Some(receipt) = &record.receipt_handle {
                deliveries.insert(message_id.clone(), (receipt.clone(), receive_count));
            }
            let message = Message {
                message_id,
                receive_count,
                group: group.map(str::to_owned),
                body,
                input,
            };
            match keys.iter().position(|k| *k == key) {
                Some(at) => threads[at].push(message),
                None => {
                    keys.push(key);
                    threads.push(vec![message]);
                }
            }
        }
        Self {
            threads,
            deliveries: Deliveries(deliveries),
        }
    }
}

impl Deliveries {
    /// What the batch answers for the messages that `failed` (at `at`): each is a batch item
    /// failure, is delivered again after a short delay when its receipt is known, and leaves a
    /// note saying why, with the delivery that failed.
    pub(super) fn verdict(
        &self,
        failed: impl IntoIterator<Item = Failed>,
        at: Timestamp,
    ) -> Verdict {
        let mut verdict = Verdict::default();
        for failed in failed {
            let delivery = self.0.get(&failed.message_id);
            if let Some(delivery) = delivery {
                verdict.retry.push(delivery.clone());
            }
            verdict.notes.push(FailureNote {
                message_id: failed.message_id.clone(),
                queue: "input".to_owned(),
                thread: failed.thread,
                reason: failed.reason,
                receive_count: delivery.map_or(1, |d| d.1),
                at,
            });
            verdict.response.add_failure(failed.message_id);
        }
        verdict
    }
}

/// Which of one thread's messages fail, as its slice goes: a FIFO group is delivered again in
/// order, so a message that fails takes every later one of its thread with it, and a message
/// kept aside (acknowledged, kept in the table) never fails.
pub(super) struct ThreadMessages<'a> {
    messages: &'a [Message],
    kept_aside: Vec<usize>,
}

impl<'a> ThreadMessages<'a> {
    /// A thread's messages, none kept aside yet.
    pub(super) fn new(messages: &'a [Message]) -> Self {
        Self {
            messages,
            kept_aside: Vec::new(),
        }
    }

    /// The message at `index` was kept aside.
    pub(super) fn keep_aside(&mut self, index: usize) {
        self.kept_aside.push(index);
    }

    /// Every message not kept aside, failed for `reason` (the slice did not finish, or a
    /// stored input could not be read): FIFO delivers them all again, in order.
    pub(super) fn all(&self, reason: &str) -> Vec<Failed> {
        (0..self.messages.len())
            .filter(|i| !self.kept_aside.contains(i))
            .map(|i| self.failed(i, reason))
            .collect()
    }

    /// The message at `index` failed for `reason`, and the ones behind it with it.
    pub(super) fn from(&self, index: usize, reason: &str) -> Vec<Failed> {
        let behind = format!(
            "behind the unusable message {} of its thread",
            self.messages[index].message_id
        );
        std::iter::once(self.failed(index, reason))
            .chain((index + 1..self.messages.len()).map(|i| self.failed(i, &behind)))
            .collect()
    }

    fn failed(&self, index: usize, reason: &str) -> Failed {
        let message = &self.messages[index];
        Failed {
            message_id: message.message_id.clone(),
            thread: message.group.clone(),
            reason: reason.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests;
