//! A batch of the input queue: its messages grouped by thread, one slice per thread, and what
//! is done with a message no slice can use.

use super::batch::{Batch, Failed, ThreadMessages, Verdict};
use super::*;

impl AgentHandler {
    /// Handles one SQS batch. Messages are grouped by thread (`MessageGroupId`) in order; each
    /// thread's messages run as one slice, threads run concurrently. A failing message and every
    /// later message of its thread are reported as batch item failures (FIFO semantics); other
    /// threads are unaffected. With a `deadline` (the invocation's), each slice starts a
    /// completion only while one fits before it, and otherwise commits and hands itself on to
    /// the next invocation (a `continue` input; see [`SliceBudget`]).
    pub async fn handle_until(
        self: &Arc<Self>,
        event: SqsEvent,
        deadline: Option<tokio::time::Instant>,
    ) -> SqsBatchResponse {
        if let Some(deadline) = deadline {
            self.warn_if_short(deadline);
        }
        let Batch {
            threads,
            deliveries,
        } = Batch::of(event.records);
        let mut tasks = JoinSet::new();
        for messages in threads {
            let this = Arc::clone(self);
            tasks.spawn(async move { this.handle_thread(messages, deadline).await });
        }
        let mut failed = Vec::new();
        while let Some(result) = tasks.join_next().await {
            match result {
                Ok(thread_failed) => failed.extend(thread_failed),
                Err(err) => tracing::error!(%err, "a thread's task failed"),
            }
        }
        let Verdict {
            response,
            retry,
            notes,
        } = deliveries.verdict(failed, Timestamp::now());
        // Why each failed, for whoever finds it in the dead-letter queue.
        self.notes.write(&notes).await;
        // Failed messages come back after a short, growing delay, not the queue's visibility
        // timeout (sized for a function that runs to its own timeout).
        self.sender.retry_later(&retry).await;
        // The batch's performed outboxes, deleted together (no thread of the batch gets its
        // next message before this returns).
        if let Err(err) = self.store.flush_outbox_deletes().await {
            tracing::warn!(%err, "performed outbox items not deleted; a thread's next slice performs them again");
        }
        response
    }

    /// Runs one thread's messages; returns the messages to report as failed, each with its
    /// thread (its group) and why.
    async fn handle_thread(
        &self,
        messages: Vec<Message>,
        deadline: Option<tokio::time::Instant>,
    ) -> Vec<Failed> {
        let mut thread = ThreadMessages::new(&messages);
        let mut inputs: Vec<Input> = Vec::new();
        let mut failed: Vec<Failed> = Vec::new();
        for (i, message) in messages.iter().enumerate() {
            let input = match &message.input {
                Ok(Carried::Input(input)) => Ok(Some(input.clone())),
                Ok(Carried::StoredInput(stored)) => match self.resolve(stored).await {
                    Ok(found) => found,
                    // The table is unavailable: the whole batch of the thread again, later.
                    Err(err) => {
                        tracing::warn!(thread = %stored.thread_id, %err, "cannot read a stored input; the thread's messages will be redelivered");
                        return thread.all(&format!("a stored input could not be read: {err}"));
                    }
                },
                Err(err) => Err(err.clone()),
            };
            match input {
                Ok(Some(input)) => inputs.push(input),
                Ok(None) => {} // a copy of an input already processed
                Err(err) => {
                    // Terminal: retrying the same bytes cannot help. Reported as failed, it
                    // would hold the rest of its FIFO group with it until they all reached the
                    // dead-letter queue; kept aside in the table instead, it is acknowledged and
                    // the messages behind it go on.
                    match self.keep_aside(message, &err).await {
                        Ok(()) => thread.keep_aside(i),
                        Err(why) => {
                            tracing::warn!(message_id = %message.message_id, error = %err, %why, "an unusable input message could not be kept aside; it and the rest of its thread's messages will be redelivered");
                            failed = thread
                                .from(i, &format!("unusable ({err}) and not kept aside: {why}"));
                            break;
                        }
                    }
                }
            }
        }
        let Some(thread_id) = inputs.first().map(|i| i.thread_id.clone()) else {
            return failed;
        };
        let attempt = messages.iter().map(|m| m.receive_count).max().unwrap_or(1);
        let first_delivery = messages.iter().any(|m| m.receive_count <= 1);
        let run = self.run(&thread_id, inputs, attempt, first_delivery, deadline);
        if let Err(err) = run.await {
            let ids: Vec<&str> = messages.iter().map(|m| m.message_id.as_str()).collect();
            tracing::warn!(thread = %thread_id, %err, message_ids = ?ids, "slice not finished; its messages will be redelivered");
            // Report the whole thread's batch: FIFO redelivers it, in order.
            failed = thread.all(&format!("the slice did not finish: {err}"));
        }
        failed
    }

    /// Keeps a message no slice can use in the table under its thread, with an ERROR and an
    /// `error` event on the thread; the message is then acknowledged. A message with no thread
    /// to keep it under (no group, or a group that is no thread id) holds no thread back: it
    /// is reported as failed and reaches the dead-letter queue after the redrive count.
    async fn keep_aside(&self, message: &Message, err: &WireError) -> Result<(), String> {
        let Some(thread_id) = message
            .group
            .as_deref()
            .and_then(|group| ThreadId::new(group).ok())
        else {
            return Err("the message names no thread to keep it under".to_owned());
        };
        let reason = err.to_string();
        let kept = self
            .store
            .keep_unusable_input(&thread_id, &message.message_id, &message.body, &reason)
            .await
            .map_err(|e| e.to_string())?;
        tracing::error!(thread = %thread_id, message_id = %message.message_id, bytes = kept.body_bytes, %reason, "unusable input message kept aside in the table; `infinity thread outbox {thread_id}` shows it");
        let text = format!(
            "a message for this thread could not be used and was kept aside ({reason}); `infinity thread outbox {thread_id}` shows it"
        );
        self.publish_error(
            &thread_id,
            EffectId::derived("unusable", &message.message_id),
            text,
        )
        .await;
        Ok(())
    }

    /// Publishes an `error` event the handler makes itself (not a slice's), with `id` as its
    /// event id; a failure to publish is logged only.
    async fn publish_error(&self, thread_id: &ThreadId, id: EffectId, text: String) {
        let event = OutputEvent::new(
            thread_id.clone(),
            Timestamp::now(),
            OutputKind::Error { text },
        );
        if let Err(e) = self.output_effects(&[(&id, &event)]).await {
            tracing::warn!(thread = %thread_id, error = %e, "could not publish an error event");
        }
    }

    /// The input a message refers to: `Ok(None)` when the table no longer has it because it was
    /// processed (this message is a copy), an error when it was never processed.
    async fn resolve(
        &self,
        stored: &crate::wire::StoredInput,
    ) -> Result<Result<Option<Input>, WireError>, StoreError> {
        if let Some(input) = self.store.stashed_input(stored).await? {
            return Ok(Ok(Some(input)));
        }
        let processed = self
            .store
            .processed(&stored.thread_id, std::slice::from_ref(&stored.id))
            .await?;
        if processed.contains(&stored.id) {
            return Ok(Ok(None));
        }
        Ok(Err(WireError::StoredInputMissing {
            thread_id: stored.thread_id.clone(),
            id: stored.id.clone(),
        }))
    }

    /// After effects failed: on an early attempt, an error (SQS delivers the thread's messages
    /// again, and the outbox is tried again first). On the last, the effects still in the outbox
    /// are set aside as failed, each reported as an ERROR and an `error` event, and the thread
    /// goes on: an effect that can never be performed must not stop its thread, and the input
    /// that made it is in the history already.
    async fn retry_or_set_aside(
        &self,
        thread_id: &ThreadId,
        err: PerformError,
        attempt: u32,
    ) -> Result<(), HandlerError> {
        if attempt < EFFECT_ATTEMPTS || !matches!(err, PerformError::Effects { .. }) {
            return Err(err.into());
        }
        let reason = err.to_string();
        let set_aside = self
            .store
            .set_aside_outbox(thread_id, &reason, attempt)
            .await?;
        for failed in &set_aside {
            tracing::error!(thread = %thread_id, effect = %failed.effect.id, kind = failed.effect.effect.kind(), attempts = attempt, %reason, "effect set aside after its attempts; `infinity thread outbox {thread_id}` retries or drops it");
        }
        if let Some(first) = set_aside.first() {
            let text = format!(
                "{} effect(s) of this thread failed {attempt} times and were set aside ({reason}); `infinity thread outbox {thread_id}` shows, retries or drops them",
                set_aside.len()
            );
            let id = EffectId::derived(first.effect.id.as_str(), "set-aside");
            self.publish_error(thread_id, id, text).await;
        }
        Ok(())
    }

    /// Performs what an earlier slice left in the outbox, then runs a slice through the shared
    /// driver (which commits and performs its effects).
    /// `attempt`: how many times SQS has delivered these messages (see [`EFFECT_ATTEMPTS`]);
    /// `first_delivery`: whether one of them is delivered for the first time (an error that
    /// every delivery meets again is published once, on the first).
    async fn run(
        &self,
        thread_id: &ThreadId,
        inputs: Vec<Input>,
        attempt: u32,
        first_delivery: bool,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<(), HandlerError> {
        if inputs.iter().any(|i| matches!(i.body, InputBody::Nudge {})) {
            // An operator put effects back in the outbox: read it, whatever this instance kept.
            self.store.forget(thread_id);
        }
        let input_ids: Vec<InputId> = inputs.iter().map(|i| i.id.clone()).collect();
        let newest_input = input_ids.last().cloned();
        let mut state = self.store.load_slice(thread_id, &input_ids, true).await?;
        // A crash after an earlier commit leaves its effects here; perform them first.
        let leftover = state.outbox.take().unwrap_or_default();
        if !leftover.is_empty() {
            tracing::info!(thread = %thread_id, effects = leftover.len(), "performing effects left by an earlier slice");
            if let Err(err) = perform_effects(self, &self.store, thread_id, &leftover, None).await {
                self.retry_or_set_aside(thread_id, err, attempt).await?;
            }
        }
        let host = HostContext {
            store: &self.store,
            agents: &self.agents,
            default_agent: Some(&self.default_agent),
            discovery: self
                .tool_servers
                .as_deref()
                .map(|c| c as &dyn infinity_agent_core::tools::servers::ToolDiscovery),
            effects: self,
            live: None,
            model_retry: LAMBDA_MODEL_RETRY,
            budget: deadline.map(|deadline| SliceBudget {
                deadline,
                completion: self.completion_timeout,
                reserve: COMMIT_RESERVE,
            }),
            library: Some(&self.library),
        };
        let mut ids = RandomIds;
        let slice = run_loaded_slice(&host, thread_id, inputs, state, Timestamp::now(), &mut ids);
        match slice.await {
            Ok(report) => match report.effects {
                Ok(()) => Ok(()),
                Err(err) => self.retry_or_set_aside(thread_id, err, attempt).await,
            },
            Err(SliceFailure::Slice(SliceError::UnknownAgent { thread_id, agent })) => {
                // Retrying cannot help, and the input must not vanish: it is reported as failed,
                // so the queue moves it to the dead-letter queue after the redrive count.
                // Every delivery meets the same refusal: the user is told once, when new input
                // arrives, not once per delivery.
                let err = HandlerError::UnknownAgent {
                    thread_id: thread_id.clone(),
                    agent,
                };
                tracing::error!(%err, attempt, "input refused");
                if first_delivery {
                    let id = EffectId::derived(
                        newest_input.as_ref().map_or("input", InputId::as_str),
                        "unknown-agent",
                    );
                    self.publish_error(&thread_id, id, err.to_string()).await;
                }
                Err(err)
            }
            Err(err) => {
                if let SliceFailure::Slice(SliceError::Retryable(why)) = &err {
                    // The user sees that the model is unavailable, once per delivery (each is
                    // a new try); SQS retries the input later.
                    let id = EffectId::derived(
                        newest_input.as_ref().map_or("input", InputId::as_str),
                        &format!("unavailable-{attempt}"),
                    );
                    let text = format!("model unavailable, will retry: {why}");
                    self.publish_error(thread_id, id, text).await;
                }
                Err(err.into())
            }
        }
    }
}
