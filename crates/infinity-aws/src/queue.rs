//! Queues and timers on AWS: the FIFO input queue, the relay queue with per-message
//! `DelaySeconds`, one-time EventBridge Scheduler schedules for long delays, and the output queue.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_scheduler::types::{
    ActionAfterCompletion, FlexibleTimeWindow, FlexibleTimeWindowMode, Target,
};
use infinity_agent_core::effect::OutputEvent;
use infinity_agent_core::host::{InputSender, OutputError, SendError, Timers};
use infinity_agent_core::ids::{EffectId, InputId};
use infinity_agent_core::input::Input;
use infinity_agent_core::runtime::PostError;
use jiff::Timestamp;

use crate::config::AwsConfig;
use crate::item::sdk_detail;
use crate::store::DynamoThreadStore;
use crate::wire::{Carried, RelayEnvelope};

/// Room kept in a message for what SQS counts besides the body (message attributes).
const MESSAGE_MARGIN: usize = 1_024;
/// The message size assumed when a queue's own limit cannot be read: SQS's old limit, which
/// every queue allows.
const ASSUMED_QUEUE_LIMIT: usize = 262_144;
/// The largest schedule target input sent to EventBridge Scheduler; a bigger input is stored.
pub const SCHEDULE_INPUT_LIMIT: usize = 8_192;

/// A queue's largest message, read once from its `MaximumMessageSize` attribute (a queue made
/// before SQS raised its limit to 1 MiB may still be at 256 KiB).
#[derive(Debug, Clone)]
struct QueueLimit {
    queue_url: String,
    bytes: std::sync::Arc<tokio::sync::OnceCell<usize>>,
}

impl QueueLimit {
    fn new(queue_url: &str) -> Self {
        Self {
            queue_url: queue_url.to_owned(),
            bytes: std::sync::Arc::default(),
        }
    }

    /// The most body bytes a message to this queue may have.
    async fn body_bytes(&self, sqs: &aws_sdk_sqs::Client) -> usize {
        let limit = *self
            .bytes
            .get_or_init(|| async {
                let read = sqs
                    .get_queue_attributes()
                    .queue_url(&self.queue_url)
                    .attribute_names(aws_sdk_sqs::types::QueueAttributeName::MaximumMessageSize)
                    .send()
                    .await;
                let size = read.as_ref().ok().and_then(|out| {
                    out.attributes()?
                        .get(&aws_sdk_sqs::types::QueueAttributeName::MaximumMessageSize)?
                        .parse::<usize>()
                        .ok()
                });
                match (size, read) {
                    (Some(size), _) => size,
                    (None, Err(err)) => {
                        tracing::warn!(queue = %self.queue_url, error = %sdk_detail(&err), "cannot read the queue's message size limit; assuming {ASSUMED_QUEUE_LIMIT} bytes");
                        ASSUMED_QUEUE_LIMIT
                    }
                    (None, Ok(_)) => ASSUMED_QUEUE_LIMIT,
                }
            })
            .await;
        limit.saturating_sub(MESSAGE_MARGIN)
    }
}

fn send_error(input: &Input, reason: impl std::fmt::Display) -> SendError {
    SendError {
        input_id: input.id.clone(),
        thread_id: input.thread_id.clone(),
        reason: reason.to_string(),
    }
}

/// [`InputSender`] on the SQS FIFO input queue: `MessageGroupId` = thread id,
/// `MessageDeduplicationId` = input id, body = the input as JSON (which carries its id, so
/// content-based deduplication, which Scheduler targets need, never merges two inputs). An input
/// too big for the queue's messages is stored in the table, and the message carries a reference
/// ([`SqsInputSender::with_stash`]; without a table such an input is refused).
#[derive(Debug, Clone)]
pub struct SqsInputSender {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    limit: QueueLimit,
    stash: Option<DynamoThreadStore>,
}

impl SqsInputSender {
    /// A sender to the queue at `queue_url`.
    pub fn new(sqs: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        let queue_url = queue_url.into();
        Self {
            sqs,
            limit: QueueLimit::new(&queue_url),
            queue_url,
            stash: None,
        }
    }

    /// A sender to a deployment's input queue that stores inputs too big for a message in its
    /// table: what every function of the stack uses.
    pub fn for_deployment(clients: &crate::config::Clients, config: &AwsConfig) -> Self {
        Self::new(clients.sqs.clone(), config.input_queue_url.clone()).with_stash(
            DynamoThreadStore::new(
                clients.dynamodb.clone(),
                config.table.clone(),
                config.dedup_ttl,
            ),
        )
    }

    /// The same sender, storing inputs too big for a message in `store`'s table.
    pub fn with_stash(mut self, store: DynamoThreadStore) -> Self {
        self.stash = Some(store);
        self
    }

    /// What a message of at most `limit` bytes carries for `input`: the input itself when its
    /// JSON fits, otherwise a reference to it, stored in the table.
    pub async fn carry(&self, input: &Input, limit: usize) -> Result<Carried, SendError> {
        let len = serde_json::to_string(input)
            .map_err(|e| send_error(input, e))?
            .len();
        if len <= limit {
            return Ok(Carried::Input(input.clone()));
        }
        let Some(store) = &self.stash else {
            return Err(send_error(
                input,
                format!("the input is {len} bytes, more than a message holds ({limit}), and there is no table to store it in (pass --table or set INFINITY_TABLE)"),
            ));
        };
        let stored = store
            .stash_input(input)
            .await
            .map_err(|e| send_error(input, format!("storing the {len}-byte input: {e}")))?;
        tracing::info!(thread = %input.thread_id, input = %input.id, bytes = len, "input stored in the table; its message carries a reference");
        Ok(Carried::StoredInput(stored))
    }

    /// Sends what a message carries to the input queue.
    pub async fn send_carried(&self, carried: &Carried) -> Result<(), SendError> {
        let failed = |reason: String| SendError {
            input_id: carried.input_id().clone(),
            thread_id: carried.thread_id().clone(),
            reason,
        };
        let body = carried.body().map_err(|e| failed(e.to_string()))?;
        self.sqs
            .send_message()
            .queue_url(&self.queue_url)
            .message_group_id(carried.thread_id().as_str())
            .message_deduplication_id(carried.input_id().as_str())
            .message_body(body)
            .send()
            .await
            .map_err(|e| failed(sdk_detail(&e)))?;
        Ok(())
    }
}

/// The most entries one `SendMessageBatch` request takes.
const BATCH_ENTRIES: usize = 10;

/// How long a message whose slice failed stays invisible before its next delivery: 15 s after
/// the first, doubling, at most 15 minutes. The input queue's visibility timeout is sized for a
/// function that runs to its timeout (docs/aws.md); a failure reported early comes back on this
/// shorter, growing delay instead.
pub fn retry_delay(receive_count: u32) -> Duration {
    let doublings = receive_count.saturating_sub(1).min(6);
    (Duration::from_secs(15) * 2u32.pow(doublings)).min(Duration::from_secs(900))
}

impl SqsInputSender {
    /// Makes received messages (`(receipt handle, receive count)`) visible again after
    /// [`retry_delay`] of their count, in batches of ten. Best effort: a message whose change
    /// fails comes back after the queue's visibility timeout instead.
    pub async fn retry_later(&self, messages: &[(String, u32)]) {
        for chunk in messages.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .filter_map(|(i, (receipt, count))| {
                    aws_sdk_sqs::types::ChangeMessageVisibilityBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(receipt)
                        .visibility_timeout(retry_delay(*count).as_secs() as i32)
                        .build()
                        .ok()
                });
            let sent = self
                .sqs
                .change_message_visibility_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries.collect()))
                .send()
                .await;
            match sent {
                Ok(out) if out.failed().is_empty() => {}
                Ok(out) => {
                    tracing::warn!(failed = out.failed().len(), "some failed messages keep the queue's visibility timeout before their retry")
                }
                Err(err) => {
                    tracing::warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&err), "failed messages keep the queue's visibility timeout before their retry")
                }
            }
        }
    }

    /// Sends `inputs` in order, in `SendMessageBatch` requests of up to ten messages whose bodies
    /// together fit one message's limit (SQS's rule for a batch). On a FIFO queue the messages of
    /// one request are queued in the order they are listed, so a thread's inputs keep their
    /// order, as with one `SendMessage` each, for a tenth of the requests. One result per input,
    /// in the same order: an input SQS refused, or whose request failed, gets its error, and the
    /// others are sent.
    pub async fn send_all(&self, inputs: &[&Input]) -> Vec<Result<(), SendError>> {
        let limit = self.limit.body_bytes(&self.sqs).await;
        let mut results: Vec<Result<(), SendError>> = Vec::with_capacity(inputs.len());
        let mut bodies = Vec::with_capacity(inputs.len());
        for (index, input) in inputs.iter().enumerate() {
            let body = match self.carry(input, limit).await {
                Ok(carried) => carried.body().map_err(|e| send_error(input, e)),
                Err(err) => Err(err),
            };
            match body {
                Ok(body) => {
                    results.push(Ok(()));
                    bodies.push((index, body));
                }
                Err(err) => results.push(Err(err)),
            }
        }
        for batch in batches(bodies, limit) {
            let indexes: Vec<usize> = batch.iter().map(|(index, _)| *index).collect();
            let entries = batch
                .into_iter()
                .map(|(index, body)| {
                    let input = inputs[index];
                    aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                        .id(index.to_string())
                        .message_group_id(input.thread_id.as_str())
                        .message_deduplication_id(input.id.as_str())
                        .message_body(body)
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string());
            let sent = match entries {
                Ok(entries) => send_batch(&self.sqs, &self.queue_url, entries).await,
                Err(why) => Err(why),
            };
            match sent {
                Ok(out) => {
                    for failed in out.failed() {
                        let Some(index) = failed
                            .id()
                            .parse::<usize>()
                            .ok()
                            .filter(|i| indexes.contains(i))
                        else {
                            continue;
                        };
                        let why = format!(
                            "{}: {}",
                            failed.code(),
                            failed.message().unwrap_or("refused in a batch")
                        );
                        results[index] = Err(send_error(inputs[index], why));
                    }
                }
                Err(why) => {
                    for index in indexes {
                        results[index] = Err(send_error(inputs[index], &why));
                    }
                }
            }
        }
        results
    }
}

impl SqsInputSender {
    /// Queueing with this sender, as a front posts inputs
    /// ([`PostInput`](infinity_agent_core::runtime::PostInput)).
    pub fn poster<'a>(
        &'a self,
    ) -> impl Fn(Input) -> futures_util::future::BoxFuture<'a, Result<InputId, PostError>>
           + Send
           + Sync
           + 'a {
        move |input| {
            Box::pin(async move {
                self.send_to_input_queue(&input)
                    .await
                    .map_err(|e| PostError::Unavailable(e.to_string()))?;
                Ok(input.id)
            })
        }
    }
}

#[async_trait]
impl InputSender for SqsInputSender {
    async fn send_to_input_queue(&self, message: &Input) -> Result<(), SendError> {
        let limit = self.limit.body_bytes(&self.sqs).await;
        let carried = self.carry(message, limit).await?;
        self.send_carried(&carried).await
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

/// Deletes the one-time Scheduler schedule (in `group`) that would bring the timer input
/// `input_id` back, for a timer no longer wanted (a recurring schedule's next occurrence after
/// the schedule is deleted). `Ok(true)` when there was one; `Ok(false)` when there was none (the
/// timer waits on the relay queue instead, which its thread then drops, or it fired already).
pub async fn delete_timer_schedule(
    scheduler: &aws_sdk_scheduler::Client,
    group: &str,
    input_id: &InputId,
) -> Result<bool, String> {
    let deleted = scheduler
        .delete_schedule()
        .name(schedule_name(input_id))
        .group_name(group)
        .send()
        .await;
    match deleted {
        Ok(_) => Ok(true),
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            Ok(false)
        }
        Err(err) => Err(match err.as_service_error() {
            Some(e) => format!("{e:?}"),
            None => err.to_string(),
        }),
    }
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
    relay_limit: QueueLimit,
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
            relay_limit: QueueLimit::new(&config.relay_queue_url),
            sqs,
            scheduler,
            config,
        }
    }

    /// The same timers, storing inputs too big for a message or a schedule in `store`'s table.
    pub fn with_stash(mut self, store: DynamoThreadStore) -> Self {
        self.input = self.input.with_stash(store);
        self
    }

    /// Puts an envelope on the relay queue, delayed by `delay` (at most 900 s).
    pub async fn relay(&self, envelope: &RelayEnvelope, delay: Duration) -> Result<(), SendError> {
        let failed = |reason: String| SendError {
            input_id: envelope.carried.input_id().clone(),
            thread_id: envelope.carried.thread_id().clone(),
            reason,
        };
        let body = serde_json::to_string(envelope).map_err(|e| failed(e.to_string()))?;
        let seconds = delay.as_secs().min(900) as i32;
        self.sqs
            .send_message()
            .queue_url(&self.config.relay_queue_url)
            .delay_seconds(seconds)
            .message_body(body)
            .send()
            .await
            .map_err(|e| failed(sdk_detail(&e)))?;
        Ok(())
    }

    /// Forwards an input (or its reference) that is due now to the input queue.
    pub async fn deliver_now(&self, carried: &Carried) -> Result<(), SendError> {
        match carried {
            Carried::Input(input) => self.input.send_to_input_queue(input).await,
            Carried::StoredInput(_) => self.input.send_carried(carried).await,
        }
    }

    async fn create_schedule(&self, envelope: &RelayEnvelope) -> Result<(), SendError> {
        let failed = |reason: String| SendError {
            input_id: envelope.carried.input_id().clone(),
            thread_id: envelope.carried.thread_id().clone(),
            reason,
        };
        let early = jiff::SignedDuration::try_from(self.config.schedule_early).unwrap_or_default();
        let fire = envelope
            .due
            .checked_sub(early)
            .map_err(|e| failed(e.to_string()))?;
        let expression = format!("at({})", fire.strftime("%Y-%m-%dT%H:%M:%S"));
        let body = serde_json::to_string(envelope).map_err(|e| failed(e.to_string()))?;
        let target = Target::builder()
            .arn(&self.config.relay_queue_arn)
            .role_arn(&self.config.scheduler_role_arn)
            .input(body)
            .build()
            .map_err(|e| failed(e.to_string()))?;
        let window = FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .map_err(|e| failed(e.to_string()))?;
        let result = self
            .scheduler
            .create_schedule()
            .name(schedule_name(envelope.carried.input_id()))
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
                Err(failed(why))
            }
        }
    }
}

#[async_trait]
impl Timers for AwsTimers {
    async fn schedule(&self, input: Input, due: Timestamp) -> Result<(), SendError> {
        /// Room for the envelope around the input (`{"due": ..., "input": ...}`).
        const ENVELOPE: usize = 100;
        let ahead = due.duration_since(Timestamp::now());
        let Ok(delay) = Duration::try_from(ahead) else {
            // Already due.
            return self.input.send_to_input_queue(&input).await;
        };
        if delay <= self.config.relay_threshold {
            let limit = self.relay_limit.body_bytes(&self.sqs).await;
            let carried = self.input.carry(&input, limit - ENVELOPE).await?;
            self.relay(&RelayEnvelope { due, carried }, delay).await
        } else {
            let carried = self
                .input
                .carry(&input, SCHEDULE_INPUT_LIMIT - ENVELOPE)
                .await?;
            self.create_schedule(&RelayEnvelope { due, carried }).await
        }
    }
}

/// Sends output events to the output queue as JSON `{thread_id, type, text, ...}`.
#[derive(Debug, Clone)]
pub struct OutputQueue {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    limit: QueueLimit,
}

impl OutputQueue {
    /// A publisher to the queue at `queue_url`.
    pub fn new(sqs: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        let queue_url = queue_url.into();
        Self {
            sqs,
            limit: QueueLimit::new(&queue_url),
            queue_url,
        }
    }

    /// Sends events in order, up to ten per request and within the queue's message size (which
    /// also bounds a batch). Each goes out with its id as an `"id"` field: the same id every time
    /// the same event is published (an outbox effect performed again after a crash), so readers
    /// drop copies by it (on a FIFO output queue it is the deduplication id too, and the thread
    /// the message group). An event larger than a message goes out truncated, saying where the
    /// whole of it is (see [`OutputEvent::to_json_within`]).
    pub async fn publish(&self, events: &[(&EffectId, &OutputEvent)]) -> Result<(), OutputError> {
        let failed = |reason: String| OutputError {
            count: events.len(),
            reason,
        };
        let max_bytes = self.limit.body_bytes(&self.sqs).await;
        let mut bodies = Vec::with_capacity(events.len());
        for (i, (id, event)) in events.iter().enumerate() {
            let body = with_id(id, event, max_bytes).map_err(|e| failed(e.to_string()))?;
            bodies.push((i, body));
        }
        let fifo = self.queue_url.ends_with(".fifo");
        for batch in batches(bodies, max_bytes) {
            let entries = batch
                .into_iter()
                .map(|(i, body)| {
                    let (id, event) = events[i];
                    let entry = aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(body);
                    if fifo {
                        entry
                            .message_group_id(event.thread_id.as_str())
                            .message_deduplication_id(id.as_str())
                    } else {
                        entry
                    }
                    .build()
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| failed(e.to_string()))?;
            let out = send_batch(&self.sqs, &self.queue_url, entries)
                .await
                .map_err(failed)?;
            if let Some(f) = out.failed().first() {
                return Err(failed(format!(
                    "output event {} not sent: {}",
                    f.id(),
                    f.message().unwrap_or(f.code())
                )));
            }
        }
        Ok(())
    }
}

/// The ids of the output events a reader saw last, to drop the copies a queue delivers (an
/// effect performed again after a crash, SQS's at-least-once delivery): remembers the newest
/// `capacity` ids.
#[derive(Debug)]
pub struct SeenEvents {
    order: std::collections::VecDeque<String>,
    seen: std::collections::HashSet<String>,
    capacity: usize,
}

impl SeenEvents {
    /// A memory of the last `capacity` ids.
    pub fn new(capacity: usize) -> Self {
        Self {
            order: std::collections::VecDeque::new(),
            seen: std::collections::HashSet::new(),
            capacity: capacity.max(1),
        }
    }

    /// Whether the output message `body` is new: true the first time its `"id"` is seen (and
    /// for a body without one), false for a copy.
    pub fn first_time(&mut self, body: &str) -> bool {
        #[derive(serde::Deserialize)]
        struct Id {
            id: Option<String>,
        }
        let Some(id) = serde_json::from_str::<Id>(body).ok().and_then(|b| b.id) else {
            return true;
        };
        if self.seen.contains(&id) {
            return false;
        }
        if self.order.len() == self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        self.seen.insert(id.clone());
        self.order.push_back(id);
        true
    }
}

/// An output event's message body: its JSON of at most `max_bytes`, `"id"` first.
fn with_id(
    id: &EffectId,
    event: &OutputEvent,
    max_bytes: usize,
) -> Result<String, serde_json::Error> {
    let id = serde_json::to_string(id)?;
    let prefix = format!("{{\"id\":{id},");
    let body = event.to_json_within(max_bytes.saturating_sub(prefix.len()))?;
    // An event is a JSON object with fields (its thread at least): `{...}`.
    Ok(match body.strip_prefix('{') {
        Some(rest) => format!("{prefix}{rest}"),
        None => body,
    })
}

/// Groups message bodies (with their indexes) into `SendMessageBatch` requests, in order: at most
/// ten entries each, their bodies together within `limit` (SQS's rule for a batch).
fn batches(bodies: Vec<(usize, String)>, limit: usize) -> Vec<Vec<(usize, String)>> {
    let mut all = Vec::new();
    let mut batch: Vec<(usize, String)> = Vec::new();
    let mut size = 0;
    for (i, body) in bodies {
        if batch.len() == BATCH_ENTRIES || (size + body.len() > limit && !batch.is_empty()) {
            all.push(std::mem::take(&mut batch));
            size = 0;
        }
        size += body.len();
        batch.push((i, body));
    }
    if !batch.is_empty() {
        all.push(batch);
    }
    all
}

/// One `SendMessageBatch` request; `Err` says why the request failed (entries SQS refused are in
/// the output's `failed`).
async fn send_batch(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    entries: Vec<aws_sdk_sqs::types::SendMessageBatchRequestEntry>,
) -> Result<aws_sdk_sqs::operation::send_message_batch::SendMessageBatchOutput, String> {
    sqs.send_message_batch()
        .queue_url(queue_url)
        .set_entries(Some(entries))
        .send()
        .await
        .map_err(|e| sdk_detail(&e))
}

#[cfg(test)]
mod tests;
