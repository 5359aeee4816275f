//! Performing committed effects: written once here, for every host, behind
//! [`EffectPerformer`].

use async_trait::async_trait;
use jiff::Timestamp;

use super::{DispatchError, SendError, ToolDispatcher};
use crate::effect::{Effect, Notification, OutputEvent, PendingEffect, ToolInvocation};
use crate::ids::{EffectId, ThreadId};
use crate::input::Input;
use crate::store::{StoreError, ThreadStore};
use crate::telemetry;
use tracing::Instrument;

/// The outbox effect an input is sent for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectRef {
    /// The thread whose outbox holds it.
    pub thread_id: ThreadId,
    /// The effect.
    pub effect_id: EffectId,
}

/// Output events that could not be shown.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot show {count} output event(s): {reason}")]
pub struct OutputError {
    /// How many.
    pub count: usize,
    /// Why.
    pub reason: String,
}

/// An effect that could not be performed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EffectFailure {
    /// An input could not be sent.
    #[error(transparent)]
    Send(#[from] SendError),
    /// Output events could not be shown.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// A write to the library (knowledge) could not be made.
    #[error("library write: {0}")]
    Library(String),
}

/// What became of an input a host accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handoff {
    /// It is delivered durably (an SQS queue, a timer service): the effect is done.
    Delivered,
    /// It is queued in memory: the host marks the effect done itself once the receiving thread
    /// has committed (or deliberately dropped) it, so a crash before that performs it again.
    AwaitsReceiver,
}

/// How a host performs effects: the queue, the timers, tool servers and the user's screen.
/// The embedded runtime and the Lambda handler implement it; [`perform_effects`] is the one
/// place that uses it.
#[async_trait]
pub trait EffectPerformer: Send + Sync {
    /// Puts `input` on its thread's input queue now.
    async fn send(&self, input: &Input, from: &EffectRef) -> Result<Handoff, SendError>;

    /// Puts several inputs on their threads' input queues now, in order: one result per input,
    /// in the same order. A host whose queue takes several messages in one request (SQS's
    /// `SendMessageBatch`) sends them that way; by default they are sent one by one.
    async fn send_all(&self, inputs: &[(&Input, EffectRef)]) -> Vec<Result<Handoff, SendError>> {
        let mut results = Vec::with_capacity(inputs.len());
        for (input, from) in inputs {
            results.push(self.send(input, from).await);
        }
        results
    }

    /// Puts `input` on its thread's input queue at `due` (a timer).
    async fn send_at(
        &self,
        input: &Input,
        due: Timestamp,
        from: &EffectRef,
    ) -> Result<Handoff, SendError>;

    /// Shows output events, in order.
    async fn output(&self, events: &[&OutputEvent]) -> Result<(), OutputError>;

    /// Shows the output events of outbox effects, in order, each with the id of the effect that
    /// carries it. An effect performed again (after a crash) has the same id, so a host whose
    /// readers may see an event twice (a queue) publishes the id with the event as their
    /// deduplication key; by default the ids are left out ([`EffectPerformer::output`]).
    async fn output_effects(
        &self,
        events: &[(&EffectId, &OutputEvent)],
    ) -> Result<(), OutputError> {
        let events: Vec<&OutputEvent> = events.iter().map(|(_, event)| *event).collect();
        self.output(&events).await
    }

    /// The host's client for tool servers (`None`: it has none, and calls of tools that run
    /// elsewhere get an error result).
    fn tool_dispatcher(&self) -> Option<&dyn ToolDispatcher> {
        None
    }

    /// Invokes a tool server's tool; its result comes back later as a `tool_result` input.
    async fn dispatch(&self, invocation: &ToolInvocation) -> Result<(), DispatchError> {
        match self.tool_dispatcher() {
            Some(client) => client.dispatch(invocation).await,
            None => Err(DispatchError::NoServer(invocation.tool.clone())),
        }
    }

    /// Hands an input to the host its thread moved to, at the forwarding URL the destination
    /// signed for it.
    async fn forward(&self, url: &str, input: &Input) -> Result<(), SendError> {
        let refused = |reason: String| SendError {
            input_id: input.id.clone(),
            thread_id: input.thread_id.clone(),
            reason,
        };
        match self.tool_dispatcher() {
            Some(client) => client
                .forward(url, input)
                .await
                .map_err(|e| refused(format!("forwarding to the thread's new host: {e}"))),
            None => Err(refused(
                "the thread moved to another host, and this host has no HTTP client to forward \
                 its inputs with"
                    .to_owned(),
            )),
        }
    }

    /// The host's library (the categories' shelves), when it keeps one.
    fn library(&self) -> Option<&crate::library::Library> {
        None
    }

    /// Tells tool servers about a closed thread or a cancelled call (best effort).
    async fn notify(&self, notification: &Notification) {
        match self.tool_dispatcher() {
            Some(client) => client.notify(notification).await,
            None => tracing::debug!(?notification, "no tool servers to notify"),
        }
    }
}

/// Some of a thread's effects could not be performed; they stay in its outbox.
#[derive(Debug, thiserror::Error)]
pub enum PerformError {
    /// An effect failed.
    #[error("thread {thread_id}: {failed} effect(s) not performed, first: {first}")]
    Effects {
        /// The thread.
        thread_id: ThreadId,
        /// How many failed.
        failed: usize,
        /// The first failure.
        first: EffectFailure,
    },
    /// Performed effects could not be marked done (they will be performed again; receivers
    /// deduplicate).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The span of effects performed together (one, or a run handed over at once).
fn effect_span(kind: &'static str, ids: &[&EffectId]) -> tracing::Span {
    let span = tracing::info_span!("effect", otel.name = %format!("effect {kind}"));
    if !telemetry::exporting() {
        return span;
    }
    telemetry::set(&span, "infinity.effect.type", kind);
    let ids: Vec<&str> = ids.iter().map(|id| id.as_str()).collect();
    telemetry::set_strings(&span, "infinity.effect.ids", &ids);
    span
}

/// Performs a thread's outbox effects, then marks done the ones that are: tool invocations all at
/// once, the others in order alongside them. Output
/// events go out together in one call. A call that cannot be delivered to its tool server gets
/// an error result instead (so the thread never waits for a result that cannot come).
/// `commit_version`: the version of the commit all of `effects` came from, when they are that
/// whole commit's effects (a store may then drop them in one request).
pub async fn perform_effects(
    performer: &dyn EffectPerformer,
    store: &dyn ThreadStore,
    thread_id: &ThreadId,
    effects: &[PendingEffect],
    commit_version: Option<u64>,
) -> Result<(), PerformError> {
    let total = effects.len();
    let mut done = Vec::with_capacity(total);
    let mut failures: Vec<EffectFailure> = Vec::new();
    let outputs: Vec<(&EffectId, &OutputEvent)> = effects
        .iter()
        .filter_map(|e| match &e.effect {
            Effect::Output { event } => Some((&e.id, event)),
            _ => None,
        })
        .collect();
    let outputs_shown = if outputs.is_empty() {
        Ok(())
    } else {
        let ids: Vec<&EffectId> = outputs.iter().map(|(id, _)| *id).collect();
        performer
            .output_effects(&outputs)
            .instrument(effect_span("output", &ids))
            .await
    };
    let from = |id: &EffectId| EffectRef {
        thread_id: thread_id.clone(),
        effect_id: id.clone(),
    };
    // Invocations go out all at once, each with its own retries: a tool server slow to
    // acknowledge delays no other call, nor the rest of the outbox.
    let dispatches = effects.iter().filter_map(|PendingEffect { id, effect }| {
        let Effect::Dispatch { invocation } = effect else {
            return None;
        };
        let from = from(id);
        let span = effect_span("dispatch", &[id]);
        if telemetry::exporting() {
            telemetry::set(&span, "gen_ai.tool.name", invocation.tool.clone());
            telemetry::set(&span, "gen_ai.tool.call.id", invocation.call_id.to_string());
        }
        let traced = span.clone();
        Some(async move {
            let result = match performer.dispatch(invocation).await {
                Ok(()) => Ok(Handoff::Delivered),
                Err(why) => {
                    tracing::warn!(thread = %thread_id, call = %invocation.call_id, %why, "call not delivered; it gets an error result");
                    telemetry::set_error(&traced, &why.to_string());
                    let input = invocation.undeliverable(&why.to_string());
                    performer.send(&input, &from).await.map_err(Into::into)
                }
            };
            (id, result)
        }
        .instrument(span))
    });
    // The rest in order (inputs to one queue keep their order); a run of inputs sent now goes
    // to the host together.
    let in_order = async {
        let mut results = Vec::new();
        let mut sends: Vec<(&EffectId, &Input)> = Vec::new();
        for (at, PendingEffect { id, effect }) in effects.iter().enumerate() {
            if let Effect::Send { input } = effect {
                sends.push((id, input));
                // (Calls are dispatched apart, so they do not end a run.)
                let run_ends = !matches!(
                    effects[at + 1..]
                        .iter()
                        .find(|e| !matches!(e.effect, Effect::Dispatch { .. })),
                    Some(PendingEffect {
                        effect: Effect::Send { .. },
                        ..
                    })
                );
                if run_ends {
                    let run: Vec<(&Input, EffectRef)> =
                        sends.iter().map(|(id, input)| (*input, from(id))).collect();
                    let ids: Vec<&EffectId> = sends.iter().map(|(id, _)| *id).collect();
                    let span = effect_span("send", &ids);
                    if telemetry::exporting() {
                        let kinds: Vec<&str> = sends.iter().map(|(_, i)| i.body.kind()).collect();
                        telemetry::set_strings(&span, "infinity.input.types", &kinds);
                    }
                    let sent = performer.send_all(&run).instrument(span).await;
                    for ((id, _), result) in sends.drain(..).zip(sent) {
                        results.push((id, result.map_err(EffectFailure::from)));
                    }
                }
                continue;
            }
            // (Outputs were shown together above, calls dispatched apart.)
            let span = match effect {
                Effect::Dispatch { .. } | Effect::Send { .. } => continue,
                Effect::Output { .. } => tracing::Span::none(),
                Effect::SendAt { .. } => effect_span("send_at", &[id]),
                Effect::Notify { .. } => effect_span("notify", &[id]),
                Effect::Forward { .. } => effect_span("forward", &[id]),
                Effect::Library { .. } => effect_span("library", &[id]),
            };
            let result: Result<Handoff, EffectFailure> = match effect {
                Effect::Dispatch { .. } | Effect::Send { .. } => continue,
                Effect::Output { .. } => match &outputs_shown {
                    Ok(()) => Ok(Handoff::Delivered),
                    Err(err) => Err(err.clone().into()),
                },
                Effect::SendAt { input, due } => performer
                    .send_at(input, *due, &from(id))
                    .instrument(span.clone())
                    .await
                    .map_err(Into::into),
                Effect::Notify { notification } => {
                    performer
                        .notify(notification)
                        .instrument(span.clone())
                        .await;
                    Ok(Handoff::Delivered)
                }
                Effect::Forward { url, input } => performer
                    .forward(url, input)
                    .instrument(span.clone())
                    .await
                    .map(|()| Handoff::Delivered)
                    .map_err(Into::into),
                effect @ Effect::Library { op, .. } => {
                    let category = effect.library_category().unwrap_or_default();
                    match performer.library() {
                        Some(library) => {
                            match library.perform(category, op).instrument(span.clone()).await {
                                Ok(()) => Ok(Handoff::Delivered),
                                // Retrying cannot fix a write that breaks a limit (the tool
                                // checked it): it is logged and dropped rather than retried for ever.
                                Err(err) if !err.is_retryable() => {
                                    tracing::error!(thread = %thread_id, category, %err, "a library write was refused; dropped");
                                    Ok(Handoff::Delivered)
                                }
                                Err(err) => Err(EffectFailure::Library(err.to_string())),
                            }
                        }
                        None => Err(EffectFailure::Library(format!(
                            "this host keeps no library (a write of the {category} category)"
                        ))),
                    }
                }
            };
            if let Err(failed) = &result {
                telemetry::set_error(&span, &failed.to_string());
            }
            results.push((id, result));
        }
        results
    };
    let (dispatched, performed) =
        futures_util::future::join(futures_util::future::join_all(dispatches), in_order).await;
    for (id, result) in dispatched.into_iter().chain(performed) {
        match result {
            Ok(Handoff::Delivered) => done.push(id.clone()),
            Ok(Handoff::AwaitsReceiver) => {}
            Err(err) => {
                tracing::warn!(thread = %thread_id, effect = %id, %err, "effect failed; it stays in the outbox");
                failures.push(err);
            }
        }
    }
    if !done.is_empty() {
        match commit_version {
            Some(version) if done.len() == total => {
                store
                    .complete_commit_effects(thread_id, version, &done)
                    .await?
            }
            _ => store.complete_effects(thread_id, &done).await?,
        }
    }
    let failed = failures.len();
    match failures.into_iter().next() {
        None => Ok(()),
        Some(first) => Err(PerformError::Effects {
            thread_id: thread_id.clone(),
            failed,
            first,
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::ids::CallId;
    use crate::store::MemoryStore;

    /// Records how the outbox's inputs were handed over: one list per `send_all`, and the
    /// timers, in the order they came.
    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<Vec<String>>>,
    }

    #[async_trait]
    impl EffectPerformer for Recorder {
        /// Only the error result of a call that could not be dispatched comes here.
        async fn send(&self, input: &Input, _: &EffectRef) -> Result<Handoff, SendError> {
            self.calls.lock().unwrap().push(vec![text(input)]);
            Ok(Handoff::Delivered)
        }

        async fn send_all(
            &self,
            inputs: &[(&Input, EffectRef)],
        ) -> Vec<Result<Handoff, SendError>> {
            let texts = inputs.iter().map(|(i, _)| text(i)).collect();
            self.calls.lock().unwrap().push(texts);
            inputs
                .iter()
                .map(|(input, _)| match text(input).as_str() {
                    "refused" => Err(SendError {
                        input_id: input.id.clone(),
                        thread_id: input.thread_id.clone(),
                        reason: "refused".into(),
                    }),
                    _ => Ok(Handoff::Delivered),
                })
                .collect()
        }

        async fn send_at(
            &self,
            input: &Input,
            _: Timestamp,
            _: &EffectRef,
        ) -> Result<Handoff, SendError> {
            self.calls
                .lock()
                .unwrap()
                .push(vec![format!("at {}", text(input))]);
            Ok(Handoff::Delivered)
        }

        async fn output(&self, _: &[&OutputEvent]) -> Result<(), OutputError> {
            Ok(())
        }
    }

    fn text(input: &Input) -> String {
        match &input.body {
            crate::input::InputBody::UserMessage { text, .. } => text.clone(),
            other => format!("{other:?}"),
        }
    }

    fn pending(effect: Effect) -> PendingEffect {
        PendingEffect {
            id: EffectId::generate(),
            effect,
        }
    }

    fn send(thread: &ThreadId, text: &str) -> PendingEffect {
        pending(Effect::Send {
            input: Input::user_message(thread.clone(), text),
        })
    }

    #[tokio::test]
    async fn a_run_of_inputs_goes_to_the_host_together_and_each_keeps_its_result() {
        let thread = ThreadId::new("t").unwrap();
        let other = ThreadId::new("u").unwrap();
        let call = pending(Effect::Dispatch {
            invocation: ToolInvocation {
                thread_id: thread.clone(),
                lineage: vec![thread.clone()],
                call_id: CallId::new("c1").unwrap(),
                tool: "elsewhere".into(),
                args: serde_json::json!({}),
                server: None,
                notify_key: None,
            },
        });
        let effects = vec![
            send(&thread, "1"),
            // A call is dispatched apart (here it fails, and its error result is sent on its
            // own): it does not split the run.
            call,
            send(&other, "2"),
            send(&thread, "refused"),
            pending(Effect::SendAt {
                input: Input::user_message(thread.clone(), "later"),
                due: Timestamp::UNIX_EPOCH,
            }),
            send(&thread, "3"),
            send(&other, "4"),
        ];
        let recorder = Recorder::default();
        let store = MemoryStore::new();
        let performed = perform_effects(&recorder, &store, &thread, &effects, None).await;
        let calls = recorder.calls.lock().unwrap().clone();
        let (results, runs): (Vec<&Vec<String>>, Vec<&Vec<String>>) =
            calls.iter().partition(|c| c[0].starts_with("ToolResult"));
        assert_eq!(results.len(), 1, "the call's error result: {calls:?}");
        assert_eq!(
            runs,
            [
                &vec!["1".to_owned(), "2".into(), "refused".into()],
                &vec!["at later".to_owned()],
                &vec!["3".to_owned(), "4".into()],
            ]
        );
        // The refused input alone failed, and stays in the outbox.
        match performed {
            Err(PerformError::Effects { failed, first, .. }) => {
                assert_eq!(failed, 1);
                assert!(first.to_string().contains("refused"), "{first}");
            }
            other => panic!("{other:?}"),
        }
    }
}
