//! Queues and timers on AWS: the FIFO input queue, the relay queue with per-message
//! `DelaySeconds`, one-time EventBridge Scheduler schedules for long delays, and the output queue.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_scheduler::types::{
    ActionAfterCompletion, FlexibleTimeWindow, FlexibleTimeWindowMode, Target,
};
use infinity_agent_core::effect::OutputEvent;
use infinity_agent_core::host::{InputSender, OutputError, SendError, Timers};
use infinity_agent_core::ids::{InputId, ThreadId};
use infinity_agent_core::input::Input;
use jiff::Timestamp;

use crate::config::AwsConfig;
use crate::wire::RelayEnvelope;

fn send_error(input: &Input, reason: impl std::fmt::Display) -> SendError {
    SendError {
        input_id: input.id.clone(),
        thread_id: input.thread_id.clone(),
        reason: reason.to_string(),
    }
}

fn detail<E: aws_sdk_sqs::error::ProvideErrorMetadata + std::fmt::Debug>(
    err: &aws_sdk_sqs::error::SdkError<E>,
) -> String {
    match err.as_service_error() {
        Some(e) => format!(
            "{}: {}",
            e.code().unwrap_or("error"),
            e.message().unwrap_or("")
        ),
        None => err.to_string(),
    }
}

/// [`InputSender`] on the SQS FIFO input queue: `MessageGroupId` = thread id,
/// `MessageDeduplicationId` = input id, body = the input as JSON (which carries its id, so
/// content-based deduplication, which Scheduler targets need, never merges two inputs).
#[derive(Debug, Clone)]
pub struct SqsInputSender {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsInputSender {
    /// A sender to the queue at `queue_url`.
    pub fn new(sqs: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        Self {
            sqs,
            queue_url: queue_url.into(),
        }
    }
}

#[async_trait]
impl InputSender for SqsInputSender {
    async fn send_to_input_queue(
        &self,
        message: &Input,
        group_id: &ThreadId,
        dedup_id: &InputId,
    ) -> Result<(), SendError> {
        let body = serde_json::to_string(message).map_err(|e| send_error(message, e))?;
        self.sqs
            .send_message()
            .queue_url(&self.queue_url)
            .message_group_id(group_id.as_str())
            .message_deduplication_id(dedup_id.as_str())
            .message_body(body)
            .send()
            .await
            .map_err(|e| send_error(message, detail(&e)))?;
        Ok(())
    }
}

/// A Scheduler schedule name for an input: stable (a retried slice finds the schedule it already
/// created), at most 64 characters of `[0-9A-Za-z_.-]`.
pub fn schedule_name(input_id: &InputId) -> String {
    let id = input_id.as_str();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let head: String = id.chars().take(40).collect();
    format!("in-{head}-{hash:016x}")
}

/// [`Timers`] on AWS. A delay up to `relay_threshold` (at most 900 s) goes to the relay queue with
/// `DelaySeconds`; a longer one becomes a one-time Scheduler schedule, `at(...)` in UTC with the
/// flexible window off and `ActionAfterCompletion: DELETE`, firing `schedule_early` before the
/// due time onto the relay queue. The relay forwards a due input to the input queue, or delays it
/// again until it is due, so every timer lands to the second.
#[derive(Debug, Clone)]
pub struct AwsTimers {
    sqs: aws_sdk_sqs::Client,
    scheduler: aws_sdk_scheduler::Client,
    input: SqsInputSender,
    config: AwsConfig,
}

impl AwsTimers {
    /// Timers with these clients and settings.
    pub fn new(
        sqs: aws_sdk_sqs::Client,
        scheduler: aws_sdk_scheduler::Client,
        config: AwsConfig,
    ) -> Self {
        Self {
            input: SqsInputSender::new(sqs.clone(), config.input_queue_url.clone()),
            sqs,
            scheduler,
            config,
        }
    }

    /// Puts an envelope on the relay queue, delayed by `delay` (at most 900 s).
    pub async fn relay(&self, envelope: &RelayEnvelope, delay: Duration) -> Result<(), SendError> {
        let body = serde_json::to_string(envelope).map_err(|e| send_error(&envelope.input, e))?;
        let seconds = delay.as_secs().min(900) as i32;
        self.sqs
            .send_message()
            .queue_url(&self.config.relay_queue_url)
            .delay_seconds(seconds)
            .message_body(body)
            .send()
            .await
            .map_err(|e| send_error(&envelope.input, detail(&e)))?;
        Ok(())
    }

    /// Forwards an input that is due now to the input queue.
    pub async fn deliver_now(&self, input: &Input) -> Result<(), SendError> {
        self.input
            .send_to_input_queue(input, &input.thread_id, &input.id)
            .await
    }

    async fn create_schedule(&self, envelope: &RelayEnvelope) -> Result<(), SendError> {
        let input = &envelope.input;
        let early = jiff::SignedDuration::try_from(self.config.schedule_early).unwrap_or_default();
        let fire = envelope
            .due
            .checked_sub(early)
            .map_err(|e| send_error(input, e))?;
        let expression = format!("at({})", fire.strftime("%Y-%m-%dT%H:%M:%S"));
        let body = serde_json::to_string(envelope).map_err(|e| send_error(input, e))?;
        let target = Target::builder()
            .arn(&self.config.relay_queue_arn)
            .role_arn(&self.config.scheduler_role_arn)
            .input(body)
            .build()
            .map_err(|e| send_error(input, e))?;
        let window = FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .map_err(|e| send_error(input, e))?;
        let result = self
            .scheduler
            .create_schedule()
            .name(schedule_name(&input.id))
            .group_name(&self.config.schedule_group)
            .schedule_expression(expression)
            .schedule_expression_timezone("UTC")
            .flexible_time_window(window)
            .action_after_completion(ActionAfterCompletion::Delete)
            .target(target)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Created by an earlier attempt of the same slice.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conflict_exception()) =>
            {
                Ok(())
            }
            Err(err) => {
                let why = match err.as_service_error() {
                    Some(e) => format!("{e:?}"),
                    None => err.to_string(),
                };
                Err(send_error(input, why))
            }
        }
    }
}

#[async_trait]
impl Timers for AwsTimers {
    async fn schedule(&self, input: Input, due: Timestamp) -> Result<(), SendError> {
        let ahead = due.duration_since(Timestamp::now());
        let Ok(delay) = Duration::try_from(ahead) else {
            return self.deliver_now(&input).await; // already due
        };
        let envelope = RelayEnvelope { due, input };
        if delay <= self.config.relay_threshold {
            self.relay(&envelope, delay).await
        } else {
            self.create_schedule(&envelope).await
        }
    }
}

/// Sends output events to the output queue as JSON `{thread_id, type, text, ...}`.
#[derive(Debug, Clone)]
pub struct OutputQueue {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
}

impl OutputQueue {
    /// A publisher to the queue at `queue_url`.
    pub fn new(sqs: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        Self {
            sqs,
            queue_url: queue_url.into(),
        }
    }

    /// Sends events in order, up to ten per request (and under SQS's 256 KB per batch).
    pub async fn publish(&self, events: &[&OutputEvent]) -> Result<(), OutputError> {
        const MAX_BATCH_BYTES: usize = 250_000;
        let failed = |reason: String| OutputError {
            count: events.len(),
            reason,
        };
        let mut batch: Vec<aws_sdk_sqs::types::SendMessageBatchRequestEntry> = Vec::new();
        let mut size = 0;
        for (i, event) in events.iter().enumerate() {
            let body = serde_json::to_string(event).map_err(|e| failed(e.to_string()))?;
            if batch.len() == 10 || (size + body.len() > MAX_BATCH_BYTES && !batch.is_empty()) {
                self.send_batch(std::mem::take(&mut batch))
                    .await
                    .map_err(failed)?;
                size = 0;
            }
            size += body.len();
            batch.push(
                aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                    .id(format!("e{i}"))
                    .message_body(body)
                    .build()
                    .map_err(|e| failed(e.to_string()))?,
            );
        }
        if !batch.is_empty() {
            self.send_batch(batch).await.map_err(failed)?;
        }
        Ok(())
    }

    /// One batch; `Err` says why (the first entry SQS refused, or the request's error).
    async fn send_batch(
        &self,
        entries: Vec<aws_sdk_sqs::types::SendMessageBatchRequestEntry>,
    ) -> Result<(), String> {
        let out = self
            .sqs
            .send_message_batch()
            .queue_url(&self.queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| detail(&e))?;
        match out.failed().first() {
            None => Ok(()),
            Some(f) => Err(format!(
                "output event {} not sent: {}",
                f.id(),
                f.message().unwrap_or(f.code())
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_names_are_stable_short_and_valid() {
        let id = InputId::new("x".repeat(128)).unwrap();
        let a = schedule_name(&id);
        assert_eq!(a, schedule_name(&id));
        assert!(a.len() <= 64, "{a}");
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)));
        assert_ne!(a, schedule_name(&InputId::new("x".repeat(127)).unwrap()));
    }
}
