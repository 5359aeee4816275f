//! The relay Lambda.

use super::*;

/// The relay Lambda: forwards due timers to the input queue and delays the others again.
#[derive(Debug, Clone)]
pub struct RelayHandler {
    timers: AwsTimers,
    /// Why a timer was reported as failed, for `infinity dlq show` (see [`crate::dlq`]).
    notes: FailureNotes,
}

impl RelayHandler {
    /// A relay with these timers. An input that fit the relay queue but not the input queue
    /// (their limits may differ) is stored in the table on the way.
    pub fn new(clients: &Clients, config: &AwsConfig) -> Self {
        Self {
            timers: AwsTimers::new(
                clients.sqs.clone(),
                clients.scheduler.clone(),
                config.clone(),
            )
            .with_stash(DynamoThreadStore::new(
                clients.dynamodb.clone(),
                config.table.clone(),
                config.dedup_ttl,
            )),
            notes: FailureNotes::new(clients.dynamodb.clone(), config.table.clone()),
        }
    }

    /// Handles one batch; each message stands alone (a standard queue).
    pub async fn handle(&self, event: SqsEvent) -> SqsBatchResponse {
        let mut response = SqsBatchResponse::default();
        let mut notes = Vec::new();
        for record in event.records {
            let message_id = record.message_id.clone().unwrap_or_default();
            let receive_count = attribute(&record, "ApproximateReceiveCount")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            let note = |thread: Option<String>, reason: String| FailureNote {
                message_id: message_id.clone(),
                queue: "relay".to_owned(),
                thread,
                reason,
                receive_count,
                at: Timestamp::now(),
            };
            let envelope: RelayEnvelope = match serde_json::from_str(
                record.body.as_deref().unwrap_or(""),
            ) {
                Ok(e) => e,
                Err(err) => {
                    tracing::error!(%message_id, %err, "malformed relay message; it will reach the relay dead-letter queue");
                    notes.push(note(None, format!("not a timer: {err}")));
                    response.add_failure(message_id);
                    continue;
                }
            };
            if let Err(err) = self.forward(&envelope).await {
                tracing::warn!(%message_id, %err, "relay failed; the message will be retried");
                let thread = envelope.carried.thread_id().to_string();
                notes.push(note(Some(thread), format!("not forwarded: {err}")));
                response.add_failure(message_id);
            }
        }
        // Why each failed, for whoever finds it in the dead-letter queue.
        self.notes.write(&notes).await;
        response
    }

    /// A wake-up is never delivered before it is due: more than a second ahead, it goes round
    /// the relay queue again (SQS delays are whole seconds, and an emulator's may end a little
    /// early); a second or less ahead, the handler waits that long and delivers it. The messages
    /// of a batch are forwarded one after the other, so the waits of one batch add up to about a
    /// second at most.
    async fn forward(&self, envelope: &RelayEnvelope) -> Result<(), SendError> {
        let ahead = envelope.due.duration_since(Timestamp::now());
        match Duration::try_from(ahead) {
            Ok(left) if left > Duration::from_secs(1) => {
                let secs = left.as_secs_f64().ceil() as u64;
                self.timers.relay(envelope, Duration::from_secs(secs)).await
            }
            Ok(left) => {
                tokio::time::sleep(left).await;
                self.timers.deliver_now(&envelope.carried).await
            }
            // Past due.
            Err(_) => self.timers.deliver_now(&envelope.carried).await,
        }
    }
}
