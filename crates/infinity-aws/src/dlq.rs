//! The dead-letter queues, as an operator's tool (`infinity dlq`): what is in them, why each
//! message failed, sending a message back once the cause is fixed, or dropping it.
//!
//! **Why a message failed.** Each time a handler reports a message as failed (the input queue's
//! agent function, the relay function), it leaves a [`FailureNote`] in the table under the
//! message's id: the queue, the thread, the reason and the delivery it was. The last note of a
//! message in a dead-letter queue is why it got there. The same reason is in the function's log
//! with the message id; the note is what a command can read. Notes expire with the dead-letter
//! queues' retention (14 days), plus a day.
//!
//! **Reading a queue without taking from it.** SQS has no peek: [`DeadLetters::list`] receives
//! the messages with a short visibility timeout and makes each visible again at once.
//!
//! **Sending back.** A message goes back to the queue it failed on with its thread (the FIFO
//! message group) and its input's identity: an input whose id was its deduplication id gets that
//! id in its body, so the thread recognizes it if it was handled after all. Sending the same
//! message back twice within SQS's five-minute deduplication window sends it once.

use std::time::Duration;

use aws_sdk_dynamodb::Client as DynamoDb;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use aws_sdk_sqs::Client as Sqs;
use jiff::Timestamp;

use crate::item::{n, number, s, sdk_detail, text};

/// How long a failure note is kept: the dead-letter queues keep a message 14 days.
pub const NOTE_TTL: Duration = Duration::from_secs(15 * 24 * 3600);

/// How long one note may take to write: a handler reporting failures does not wait on a table
/// that may be the very thing failing.
const NOTE_WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long [`DeadLetters::list`] holds the messages it reads before making them visible again.
const READ_HOLD_SECONDS: i32 = 30;

/// Why a handler last reported a message as failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureNote {
    /// The SQS message id.
    pub message_id: String,
    /// The queue it failed on: `input` or `relay`.
    pub queue: String,
    /// Its thread, when it names one.
    pub thread: Option<String>,
    /// What went wrong.
    pub reason: String,
    /// Which delivery of the message failed (SQS's receive count).
    pub receive_count: u32,
    /// When.
    pub at: Timestamp,
}

fn note_key(message_id: &str) -> String {
    format!("M#{message_id}")
}

/// Where the handlers leave their failure notes: the stack's table.
#[derive(Debug, Clone)]
pub struct FailureNotes {
    dynamodb: DynamoDb,
    table: String,
}

impl FailureNotes {
    /// The notes of the table `table`.
    pub fn new(dynamodb: DynamoDb, table: impl Into<String>) -> Self {
        Self {
            dynamodb,
            table: table.into(),
        }
    }

    /// Leaves `notes`, each in place of the message's earlier one. Best effort: a note that
    /// cannot be written within two seconds is logged and skipped (the reason is in the log too).
    pub async fn write(&self, notes: &[FailureNote]) {
        let writes = notes.iter().map(|note| async move {
            let mut put = self
                .dynamodb
                .put_item()
                .table_name(&self.table)
                .item("pk", s(note_key(&note.message_id)))
                .item("sk", s("failure"))
                .item("queue", s(&note.queue))
                .item("reason", s(&note.reason))
                .item("receive_count", n(note.receive_count))
                .item("at", s(note.at.to_string()))
                .item("ttl", n(note.at.as_second() + NOTE_TTL.as_secs() as i64));
            if let Some(thread) = &note.thread {
                put = put.item("thread", s(thread));
            }
            match tokio::time::timeout(NOTE_WRITE_TIMEOUT, put.send()).await {
                Ok(Ok(_)) => {}
                Ok(Err(err)) => {
                    tracing::warn!(message_id = %note.message_id, error = %sdk_detail(&err), "failure note not written");
                }
                Err(_) => {
                    tracing::warn!(message_id = %note.message_id, "failure note not written in time");
                }
            }
        });
        futures_util::future::join_all(writes).await;
    }

    /// The last note on `message_id`, if a handler left one.
    pub async fn read(&self, message_id: &str) -> Result<Option<FailureNote>, String> {
        let got = self
            .dynamodb
            .get_item()
            .table_name(&self.table)
            .key("pk", s(note_key(message_id)))
            .key("sk", s("failure"))
            .send()
            .await
            .map_err(|e| {
                format!(
                    "reading the failure note of {message_id}: {}",
                    sdk_detail(&e)
                )
            })?;
        let Some(item) = got.item() else {
            return Ok(None);
        };
        Ok(Some(FailureNote {
            message_id: message_id.to_owned(),
            queue: text(item, "queue").to_owned(),
            thread: Some(text(item, "thread").to_owned()).filter(|t| !t.is_empty()),
            reason: text(item, "reason").to_owned(),
            receive_count: u32::try_from(number(item, "receive_count")).unwrap_or_default(),
            at: text(item, "at").parse().unwrap_or(Timestamp::UNIX_EPOCH),
        }))
    }
}

/// One message in a dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Its SQS message id (the same as on the queue it failed on).
    pub message_id: String,
    /// Its body.
    pub body: String,
    /// Its message group (its thread), on a FIFO queue.
    pub group: Option<String>,
    /// Its deduplication id, on a FIFO queue.
    pub dedup_id: Option<String>,
    /// When it was first sent.
    pub sent_at: Option<Timestamp>,
    receipt: String,
}

/// A dead-letter queue and the queue whose messages it takes.
#[derive(Debug, Clone)]
pub struct DeadLetters {
    sqs: Sqs,
    /// The dead-letter queue.
    pub url: String,
    /// The queue its messages failed on, where they are sent back.
    pub source_url: String,
    fifo: bool,
}

impl DeadLetters {
    /// The dead-letter queue of the queue at `source_url`, from that queue's redrive policy.
    pub async fn of(sqs: Sqs, source_url: &str) -> Result<Self, String> {
        let attributes = sqs
            .get_queue_attributes()
            .queue_url(source_url)
            .attribute_names(QueueAttributeName::RedrivePolicy)
            .send()
            .await
            .map_err(|e| format!("reading the queue {source_url}: {}", sdk_detail(&e)))?;
        let policy = attributes
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::RedrivePolicy))
            .ok_or_else(|| format!("the queue {source_url} has no dead-letter queue"))?;
        let arn = serde_json::from_str::<serde_json::Value>(policy)
            .ok()
            .and_then(|p| p["deadLetterTargetArn"].as_str().map(str::to_owned))
            .ok_or_else(|| {
                format!("the queue {source_url} has a redrive policy without a target: {policy}")
            })?;
        let name = arn.rsplit(':').next().unwrap_or_default().to_owned();
        let url = sqs
            .get_queue_url()
            .queue_name(&name)
            .send()
            .await
            .map_err(|e| format!("finding the dead-letter queue {name}: {}", sdk_detail(&e)))?
            .queue_url()
            .unwrap_or_default()
            .to_owned();
        Ok(Self {
            sqs,
            url,
            source_url: source_url.to_owned(),
            fifo: name.ends_with(".fifo"),
        })
    }

    /// Every message in the queue (up to `max`), left in it.
    pub async fn list(&self, max: usize) -> Result<Vec<DeadLetter>, String> {
        let held = self.take(max).await?;
        self.release(&held).await;
        Ok(held)
    }

    /// Sends back to the source queue the messages `ids` names (all when `None`), each deleted
    /// from here once sent. Returns what happened to each message it found.
    pub async fn redrive(
        &self,
        ids: Option<&[String]>,
    ) -> Result<Vec<(String, Result<(), String>)>, String> {
        let held = self.take(usize::MAX).await?;
        let (chosen, others): (Vec<_>, Vec<_>) = held
            .into_iter()
            .partition(|m| ids.is_none_or(|ids| ids.contains(&m.message_id)));
        self.release(&others).await;
        let mut done = Vec::new();
        for message in chosen {
            let result = match self.send_back(&message).await {
                Ok(()) => self.delete(&message).await,
                Err(why) => {
                    self.release(std::slice::from_ref(&message)).await;
                    Err(why)
                }
            };
            done.push((message.message_id, result));
        }
        Ok(done)
    }

    /// Deletes the messages `ids` names for good. Returns what happened to each one found.
    pub async fn drop_messages(
        &self,
        ids: &[String],
    ) -> Result<Vec<(String, Result<(), String>)>, String> {
        let held = self.take(usize::MAX).await?;
        let (chosen, others): (Vec<_>, Vec<_>) =
            held.into_iter().partition(|m| ids.contains(&m.message_id));
        self.release(&others).await;
        let mut done = Vec::new();
        for message in chosen {
            let result = self.delete(&message).await;
            done.push((message.message_id, result));
        }
        Ok(done)
    }

    /// Receives every message (up to `max`), holding each for [`READ_HOLD_SECONDS`].
    async fn take(&self, max: usize) -> Result<Vec<DeadLetter>, String> {
        let mut held: Vec<DeadLetter> = Vec::new();
        while held.len() < max {
            let received = self
                .sqs
                .receive_message()
                .queue_url(&self.url)
                .max_number_of_messages(10)
                .visibility_timeout(READ_HOLD_SECONDS)
                .wait_time_seconds(0)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .send()
                .await
                .map_err(|e| format!("reading {}: {}", self.url, sdk_detail(&e)))?;
            let mut new = 0;
            for m in received.messages() {
                let (Some(id), Some(receipt)) = (m.message_id(), m.receipt_handle()) else {
                    continue;
                };
                // Seen already (its hold ran out while the rest was read): only its newest
                // receipt deletes or releases it.
                if let Some(seen) = held.iter_mut().find(|h| h.message_id == id) {
                    seen.receipt = receipt.to_owned();
                    continue;
                }
                let attribute = |name: MessageSystemAttributeName| {
                    m.attributes().and_then(|a| a.get(&name)).cloned()
                };
                held.push(DeadLetter {
                    message_id: id.to_owned(),
                    body: m.body().unwrap_or_default().to_owned(),
                    group: attribute(MessageSystemAttributeName::MessageGroupId),
                    dedup_id: attribute(MessageSystemAttributeName::MessageDeduplicationId),
                    sent_at: attribute(MessageSystemAttributeName::SentTimestamp)
                        .and_then(|ms| ms.parse::<i64>().ok())
                        .and_then(|ms| Timestamp::from_millisecond(ms).ok()),
                    receipt: receipt.to_owned(),
                });
                new += 1;
            }
            if new == 0 {
                break;
            }
        }
        Ok(held)
    }

    /// Makes held messages visible again at once.
    async fn release(&self, held: &[DeadLetter]) {
        for message in held {
            let released = self
                .sqs
                .change_message_visibility()
                .queue_url(&self.url)
                .receipt_handle(&message.receipt)
                .visibility_timeout(0)
                .send()
                .await;
            if let Err(err) = released {
                tracing::warn!(message_id = %message.message_id, error = %sdk_detail(&err), "not made visible again; it is after {READ_HOLD_SECONDS} s");
            }
        }
    }

    async fn send_back(&self, message: &DeadLetter) -> Result<(), String> {
        let mut send = self
            .sqs
            .send_message()
            .queue_url(&self.source_url)
            .message_body(body_with_identity(
                &message.body,
                message.dedup_id.as_deref(),
            ));
        if self.fifo {
            let group = message
                .group
                .as_deref()
                .ok_or("a message of a FIFO queue without its group")?;
            send = send
                .message_group_id(group)
                .message_deduplication_id(format!("redrive-{}", message.message_id));
        }
        send.send()
            .await
            .map(|_| ())
            .map_err(|e| format!("sending it back to {}: {}", self.source_url, sdk_detail(&e)))
    }

    async fn delete(&self, message: &DeadLetter) -> Result<(), String> {
        self.sqs
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(&message.receipt)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| format!("deleting it from {}: {}", self.url, sdk_detail(&e)))
    }
}

/// The body to send back: an input that took its id from its deduplication id (it had none in
/// its body) gets it in its body, so it keeps its identity under a new deduplication id.
fn body_with_identity(body: &str, dedup_id: Option<&str>) -> String {
    let Some(dedup_id) = dedup_id else {
        return body.to_owned();
    };
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(mut object))
            if !object.contains_key("id") && !object.contains_key("stored_input") =>
        {
            object.insert("id".into(), serde_json::Value::String(dedup_id.to_owned()));
            serde_json::Value::Object(object).to_string()
        }
        _ => body.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_keeps_its_identity_when_sent_back() {
        let no_id = r#"{"thread_id":"t","body":{"type":"user_message","text":"hi"}}"#;
        let with = body_with_identity(no_id, Some("abc123"));
        let value: serde_json::Value = serde_json::from_str(&with).unwrap();
        assert_eq!(value["id"], "abc123");
        assert_eq!(value["body"]["text"], "hi");
        // An id of its own, a stored input, a body that is not JSON, or no dedup id: as it is.
        let own = r#"{"id":"in-1","thread_id":"t"}"#;
        assert_eq!(body_with_identity(own, Some("abc")), own);
        let stored = r#"{"stored_input":{"thread_id":"t","input_id":"in-1"}}"#;
        assert_eq!(body_with_identity(stored, Some("abc")), stored);
        assert_eq!(body_with_identity("not json", Some("abc")), "not json");
        assert_eq!(body_with_identity(no_id, None), no_id);
    }
}
