//! One accepted invocation as its handler sees it, and what the handler may send back.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::choice::Questions;
use super::delivery::Delivery;
use crate::wire::{
    Callback, ContentItem, DisplaySegment, Invocation, OAuthRequest, SubscriptionEvent, ToolResult,
    UserChoiceRequest, ViewUpdate, WireError,
};

/// Why a callback was not delivered.
#[derive(Debug, thiserror::Error)]
pub enum CallbackError {
    /// The runtime cancelled the call or closed its thread: nothing more may be sent, so nothing
    /// was. Terminal; the handler should stop.
    #[error("the call was cancelled by the runtime")]
    Cancelled,
    /// The protocol does not allow this callback at this point of the call (a second
    /// `tool_result`, an event before the subscription was confirmed or after its final event,
    /// anything after the handler returned). Terminal: a bug in the handler.
    #[error("callback out of sequence: {reason}")]
    OutOfSequence {
        /// What rule the callback broke.
        reason: &'static str,
    },
    /// The callback breaks a rule of the spec (an `oauth` whose `auth_url` is not HTTPS, a
    /// `user_choice` without choices or whose default is not one of them). Terminal.
    #[error(transparent)]
    Invalid(#[from] WireError),
    /// The runtime answered with a status that says retrying will not help (a 4xx, 429
    /// included: unknown thread, expired callback URL, too many requests). Terminal.
    #[error("the runtime rejected the callback with HTTP {status}: {body}")]
    Rejected {
        /// The HTTP status.
        status: u16,
        /// The start of the answer's body.
        body: String,
    },
    /// The request could not even be built (a `callback_url` that is not a usable URL).
    /// Terminal.
    #[error("the callback could not be sent: {reason}")]
    Unsendable {
        /// What was wrong.
        reason: String,
    },
    /// Every attempt failed in a way a retry might have fixed (no connection, timeout, 5xx)
    /// and the [`super::RetryPolicy`] ran out. Sending again later may work.
    #[error("the runtime was unreachable after {attempts} attempts: {last_error}")]
    Unreachable {
        /// How many attempts were made.
        attempts: u32,
        /// What went wrong the last time.
        last_error: String,
    },
}

impl CallbackError {
    /// True when sending the same callback again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, CallbackError::Unreachable { .. })
    }
}

/// An accepted invocation, handed to the tool's handler, and the way back to the runtime.
///
/// The call lasts as long as the handler's future: when the handler returns, the kit stops
/// tracking the call, sends an error `tool_result` if none was sent, and refuses any later
/// callback. A handler that waits for something outside (an OAuth redirect, a webhook) awaits it
/// inside its own future, for instance on a channel, together with [`Call::cancelled`].
///
/// Callbacks are POSTed to the invocation's `callback_url`, each method returning once the
/// runtime accepted it or delivery failed for good (see [`super::RetryPolicy`]). They follow the
/// protocol's order, which the kit enforces with [`CallbackError::OutOfSequence`]: one
/// `tool_result` per call; `oauth` and `user_choice` before it; subscription events only after
/// [`Call::subscribed`] and none after a final one. Once the call is cancelled nothing is sent
/// any more ([`CallbackError::Cancelled`]).
#[derive(Debug)]
pub struct Call {
    link: Arc<CallLink>,
}

/// What the kit shares with a call: the invocation, the cancellation signal and the progress of
/// the callbacks. The router's table of live calls holds it too.
#[derive(Debug)]
pub(crate) struct CallLink {
    invocation: Invocation,
    cancelled: watch::Sender<bool>,
    progress: Mutex<Progress>,
    delivery: Arc<Delivery>,
    questions: Arc<Questions>,
}

/// How far the call has come.
#[derive(Debug, Default)]
struct Progress {
    /// A `tool_result` was sent (or is being sent).
    result_sent: bool,
    /// That `tool_result` started a subscription.
    subscribed: bool,
    /// The final subscription event was sent (or is being sent).
    final_event_sent: bool,
    /// Nothing more is owed to the runtime: the plain `tool_result` or the final event was
    /// delivered (or delivery gave up).
    completed: bool,
    /// The handler returned (or panicked).
    handler_returned: bool,
}

/// What a callback does to the call, for the sequence checks.
#[derive(Debug, Clone, Copy)]
enum Step {
    Result { subscription: bool },
    Event { is_final: bool },
    OAuth,
    UserChoice,
    ViewUpdate,
}

impl Call {
    pub(crate) fn new(link: Arc<CallLink>) -> Self {
        Call { link }
    }

    /// The tool's name (the invocation's `operation`).
    pub fn operation(&self) -> &str {
        &self.link.invocation.operation
    }

    /// The arguments, a JSON object (the invocation's `arguments`).
    pub fn args(&self) -> &Map<String, Value> {
        &self.link.invocation.arguments
    }

    /// The arguments as a typed value, e.g. a `#[derive(Deserialize)]` struct.
    ///
    /// The error is serde's: it names a missing or unknown field, but for a value of the wrong
    /// type only the types; check by hand when the model needs a more precise message.
    pub fn args_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_value(Value::Object(self.args().clone()))
    }

    /// The tool call id (the invocation's `id`).
    pub fn id(&self) -> &str {
        &self.link.invocation.id
    }

    /// The model-specific secondary call id, when the invocation had one; the kit echoes it.
    pub fn call_id(&self) -> Option<&str> {
        self.link.invocation.call_id.as_deref()
    }

    /// The conversation thread of the call (the invocation's `group_id`).
    pub fn thread_id(&self) -> &str {
        &self.link.invocation.group_id
    }

    /// The thread's ancestors, root first, up to its parent; empty for a root thread.
    pub fn thread_ancestors(&self) -> &[String] {
        self.link
            .invocation
            .thread_ancestors
            .as_option()
            .map_or(&[], Vec::as_slice)
    }

    /// The end user the call is made for, when the runtime said.
    pub fn user_id(&self) -> Option<&str> {
        self.link.invocation.user_id.as_deref()
    }

    /// Completes the call with a text result.
    pub async fn result_text(&self, text: impl Into<String>) -> Result<(), CallbackError> {
        self.link
            .send_result(Some(text.into()), None, Vec::new(), false)
            .await
    }

    /// Completes the call with a text result for the model, and `display_as`: what people see
    /// instead, in order of preference (a runtime shows the first segment it can render, so end
    /// with a short [`DisplaySegment::Text`]). The model always gets `text`.
    ///
    /// ```no_run
    /// # use infinity_rap::kit::{Call, CallbackError};
    /// # async fn edited(call: Call) -> Result<(), CallbackError> {
    /// use infinity_rap::wire::{DiffContent, DisplaySegment};
    ///
    /// let diff = DiffContent {
    ///     path: "src/main.rs".to_owned(),
    ///     patch: "--- src/main.rs\n+++ src/main.rs\n@@ -1 +1,2 @@\n fn main() {\n+    run();\n"
    ///         .to_owned(),
    /// };
    /// let display = vec![
    ///     DisplaySegment::Diff(diff),
    ///     DisplaySegment::Text("edit_file src/main.rs: 1 insertion".to_owned()),
    /// ];
    /// call.result_displayed("Replaced text in src/main.rs", display).await
    /// # }
    /// ```
    pub async fn result_displayed(
        &self,
        text: impl Into<String>,
        display_as: Vec<DisplaySegment>,
    ) -> Result<(), CallbackError> {
        self.link
            .send_result(Some(text.into()), None, display_as, false)
            .await
    }

    /// Completes the call with an error result: `text`, prefixed with `Error: ` unless it
    /// already starts so (the spec's convention; there is no separate error message).
    pub async fn result_error(&self, text: impl Into<String>) -> Result<(), CallbackError> {
        self.link
            .send_result(Some(error_text(text.into())), None, Vec::new(), false)
            .await
    }

    /// Completes the call with text and image items; lead with a text item, as the spec asks.
    pub async fn result_content(&self, content: Vec<ContentItem>) -> Result<(), CallbackError> {
        self.link
            .send_result(None, Some(content), Vec::new(), false)
            .await
    }

    /// Answers the call with a result that starts a subscription (`subscription: true`), after
    /// which [`Call::event`] may send events until a final one or a cancellation.
    pub async fn subscribed(&self, text: impl Into<String>) -> Result<(), CallbackError> {
        self.link
            .send_result(Some(text.into()), None, Vec::new(), true)
            .await
    }

    /// Sends one subscription event; `text` should be JSON. `associative` puts it into the
    /// subscribing thread itself instead of a child thread; `is_final` ends the subscription.
    pub async fn event(
        &self,
        text: impl Into<String>,
        associative: bool,
        is_final: bool,
    ) -> Result<(), CallbackError> {
        let event = SubscriptionEvent {
            group_id: self.thread_id().to_owned(),
            tool_call_id: self.id().to_owned(),
            text: text.into(),
            associative: Some(associative),
            final_event: is_final.then_some(true),
        };
        self.link
            .send(Step::Event { is_final }, Callback::SubscriptionEvent(event))
            .await
    }

    /// Asks the runtime to send the user to `auth_url` (HTTPS) to authorize the tool. The call
    /// stays pending: a `tool_result` must follow, an error one if the authorization fails.
    pub async fn oauth(&self, auth_url: impl Into<String>) -> Result<(), CallbackError> {
        let request = OAuthRequest {
            group_id: self.thread_id().to_owned(),
            id: self.id().to_owned(),
            call_id: self.link.invocation.call_id.clone(),
            auth_url: auth_url.into(),
        };
        request.validate()?;
        self.link.send(Step::OAuth, Callback::OAuth(request)).await
    }

    /// Asks the user to pick one of `choices` (at least one), and waits for the pick: its index,
    /// or `default` when the user dismisses the question. The call stays pending: a
    /// `tool_result` must follow, as for [`Call::oauth`].
    ///
    /// The runtime POSTs the answer to a `response_url` the kit serves
    /// (`{public_url}/user_choice/{token}`, a random token per question), so the server must be
    /// reachable from the runtime at the public URL given to [`super::ToolServer::router`]. The
    /// wait has no time limit (people take their time); it ends with
    /// [`CallbackError::Cancelled`] when the call is cancelled, and a handler that wants a limit
    /// wraps it in [`tokio::time::timeout`]. Once the wait ends, its URL answers 404.
    ///
    /// ```no_run
    /// # use infinity_rap::kit::{Call, CallbackError};
    /// # async fn deploy(call: Call) -> Result<(), CallbackError> {
    /// let picked = call
    ///     .user_choice("Deploy to production?", ["Yes", "No"], 1)
    ///     .await?;
    /// if picked == 0 {
    ///     call.result_text("Deployed").await
    /// } else {
    ///     call.result_error("the user declined the deployment").await
    /// }
    /// # }
    /// ```
    pub async fn user_choice(
        &self,
        prompt: impl Into<String>,
        choices: impl IntoIterator<Item = impl Into<String>>,
        default: usize,
    ) -> Result<usize, CallbackError> {
        let choices = choices.into_iter().map(Into::into).collect();
        self.link.ask(prompt.into(), choices, default).await
    }

    /// Replaces the content of the thread's view `view_type` (e.g. `diff`); `{}` clears it.
    /// Allowed at any point while the handler runs, also after the result.
    pub async fn view_update(
        &self,
        view_type: impl Into<String>,
        content: Map<String, Value>,
    ) -> Result<(), CallbackError> {
        let update = ViewUpdate {
            group_id: self.thread_id().to_owned(),
            view_type: view_type.into(),
            content,
        };
        self.link
            .send(Step::ViewUpdate, Callback::ViewUpdate(update))
            .await
    }

    /// Resolves once the runtime cancels the call (`/cancel_tool_call`) or closes its thread
    /// (`/close_thread`); at once if that already happened. Never resolves otherwise.
    pub async fn cancelled(&self) {
        self.link.cancelled().await;
    }

    /// True once the runtime cancelled the call or closed its thread.
    pub fn is_cancelled(&self) -> bool {
        self.link.is_cancelled()
    }
}

impl CallLink {
    pub(crate) fn new(
        invocation: Invocation,
        delivery: Arc<Delivery>,
        questions: Arc<Questions>,
    ) -> Self {
        CallLink {
            invocation,
            cancelled: watch::Sender::new(false),
            progress: Mutex::new(Progress::default()),
            delivery,
            questions,
        }
    }

    pub(crate) fn invocation(&self) -> &Invocation {
        &self.invocation
    }

    /// Signals the cancellation to the handler and blocks every later callback.
    pub(crate) fn cancel(&self) {
        self.cancelled.send_replace(true);
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        *self.cancelled.borrow()
    }

    pub(crate) async fn cancelled(&self) {
        let mut receiver = self.cancelled.subscribe();
        // The sender lives in `self`, so the wait can only end with `true`.
        let _ = receiver.wait_for(|cancelled| *cancelled).await;
    }

    /// True while the runtime should keep waiting: a result or more events are still to come.
    ///
    /// Once the handler returned, the router forgets the call as soon as [`CallLink::finish`]
    /// is done, which ends its life as far as the runtime can ask.
    pub(crate) fn is_alive(&self) -> bool {
        !self.is_cancelled() && !self.progress().completed
    }

    /// Marks the handler as returned (no callback is accepted from now on) and completes a call
    /// the handler left unanswered with an error `tool_result` built from `failure`, or one
    /// saying the tool sent no result.
    pub(crate) async fn finish(&self, failure: Option<String>) {
        let (result_sent, subscription_open) = {
            let mut progress = self.progress();
            progress.handler_returned = true;
            (
                progress.result_sent,
                progress.subscribed && !progress.final_event_sent,
            )
        };
        if self.is_cancelled() {
            return;
        }
        if !result_sent {
            let text = failure.unwrap_or_else(|| {
                format!(
                    "the tool `{}` finished without sending a result",
                    self.invocation.operation
                )
            });
            let result = self.tool_result(Some(error_text(text)), None, Vec::new(), false);
            if let Err(error) = self.deliver(Callback::ToolResult(result)).await {
                tracing::warn!(%error, "could not send the error result of an unanswered call");
            }
            return;
        }
        if let Some(failure) = failure {
            tracing::warn!(%failure, "the tool failed after sending its result");
        } else if subscription_open {
            tracing::warn!("the handler returned without a final event; the subscription ends");
        }
    }

    async fn send_result(
        &self,
        text: Option<String>,
        content: Option<Vec<ContentItem>>,
        display_as: Vec<DisplaySegment>,
        subscription: bool,
    ) -> Result<(), CallbackError> {
        let result = self.tool_result(text, content, display_as, subscription);
        self.send(Step::Result { subscription }, Callback::ToolResult(result))
            .await
    }

    /// A `tool_result` of this call; no `display_as` at all when there are no segments.
    fn tool_result(
        &self,
        text: Option<String>,
        content: Option<Vec<ContentItem>>,
        display_as: Vec<DisplaySegment>,
        subscription: bool,
    ) -> ToolResult {
        ToolResult {
            group_id: self.invocation.group_id.clone(),
            id: self.invocation.id.clone(),
            call_id: self.invocation.call_id.clone(),
            text,
            content,
            display_as: (!display_as.is_empty()).then_some(display_as),
            subscription: subscription.then_some(true),
        }
    }

    /// Sends a `user_choice` whose `response_url` the kit serves, then waits for its answer or
    /// the call's cancellation. The question is withdrawn however the wait ends.
    async fn ask(
        &self,
        prompt: String,
        choices: Vec<String>,
        default: usize,
    ) -> Result<usize, CallbackError> {
        let (response_url, mut pending) = self.questions.ask(&self.invocation.id, choices.len());
        let request = UserChoiceRequest {
            group_id: self.invocation.group_id.clone(),
            id: self.invocation.id.clone(),
            call_id: self.invocation.call_id.clone(),
            prompt,
            choices,
            default_choice: default,
            response_url,
        };
        request.validate()?;
        self.send(Step::UserChoice, Callback::UserChoice(request))
            .await?;
        tokio::select! {
            () = self.cancelled() => Err(CallbackError::Cancelled),
            // The question closes without an answer only when withdrawn, which `pending` does.
            answer = pending.answer() => answer.ok_or(CallbackError::Cancelled),
        }
    }

    /// Checks that `step` may happen now, records it, delivers the callback and records the
    /// completion it brings.
    async fn send(&self, step: Step, callback: Callback) -> Result<(), CallbackError> {
        self.claim(step)?;
        let outcome = self.deliver(callback).await;
        if matches!(
            step,
            Step::Result {
                subscription: false
            } | Step::Event { is_final: true }
        ) {
            self.progress().completed = true;
        }
        outcome
    }

    fn claim(&self, step: Step) -> Result<(), CallbackError> {
        if self.is_cancelled() {
            return Err(CallbackError::Cancelled);
        }
        let mut progress = self.progress();
        let out_of_sequence = |reason| Err(CallbackError::OutOfSequence { reason });
        if progress.handler_returned {
            return out_of_sequence("the handler already returned, which ended the call");
        }
        match step {
            Step::Result { subscription } => {
                if progress.result_sent {
                    return out_of_sequence("the call already has its tool_result");
                }
                progress.result_sent = true;
                progress.subscribed = subscription;
            }
            Step::Event { is_final } => {
                if !progress.subscribed {
                    return out_of_sequence(
                        "subscription events need a subscribed tool_result first",
                    );
                }
                if progress.final_event_sent {
                    return out_of_sequence("the subscription already sent its final event");
                }
                progress.final_event_sent = is_final;
            }
            Step::OAuth | Step::UserChoice => {
                if progress.result_sent {
                    return out_of_sequence(
                        "oauth and user_choice must come before the call's tool_result",
                    );
                }
            }
            Step::ViewUpdate => {}
        }
        Ok(())
    }

    /// Delivers with retries, giving up as soon as the call is cancelled.
    async fn deliver(&self, callback: Callback) -> Result<(), CallbackError> {
        tokio::select! {
            biased;
            () = self.cancelled() => Err(CallbackError::Cancelled),
            outcome = self.delivery.deliver(&self.invocation.callback_url, &callback) => outcome,
        }
    }

    fn progress(&self) -> MutexGuard<'_, Progress> {
        // The guarded data is plain flags, always consistent: a panic elsewhere cannot break it.
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `text` with the spec's `Error: ` prefix, added only when missing.
fn error_text(text: String) -> String {
    if text.starts_with("Error:") {
        text
    } else {
        format!("Error: {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::CALLBACK_RETRY;
    use crate::wire::Nullable;

    fn link() -> CallLink {
        let invocation = Invocation {
            operation: "ticker".to_owned(),
            arguments: Map::new(),
            id: "call_1".to_owned(),
            call_id: Nullable::Absent,
            callback_url: "http://127.0.0.1:9/callback".to_owned(),
            group_id: "thread_1".to_owned(),
            thread_ancestors: Nullable::Absent,
            user_id: Nullable::Absent,
        };
        let delivery = Delivery::new(reqwest::Client::new(), CALLBACK_RETRY);
        let questions = Questions::new("http://127.0.0.1:9");
        CallLink::new(invocation, Arc::new(delivery), Arc::new(questions))
    }

    fn out_of_sequence(outcome: Result<(), CallbackError>) -> bool {
        matches!(outcome, Err(CallbackError::OutOfSequence { .. }))
    }

    #[test]
    fn the_protocol_order_is_enforced() {
        let link = link();
        assert!(out_of_sequence(link.claim(Step::Event { is_final: false })));
        assert!(link.claim(Step::OAuth).is_ok());
        assert!(link.claim(Step::UserChoice).is_ok());
        assert!(link.claim(Step::Result { subscription: true }).is_ok());
        assert!(out_of_sequence(link.claim(Step::OAuth)));
        assert!(out_of_sequence(link.claim(Step::UserChoice)));
        assert!(out_of_sequence(link.claim(Step::Result {
            subscription: false
        })));
        assert!(link.claim(Step::Event { is_final: false }).is_ok());
        assert!(link.claim(Step::Event { is_final: true }).is_ok());
        assert!(out_of_sequence(link.claim(Step::Event { is_final: false })));
        assert!(link.claim(Step::ViewUpdate).is_ok());
    }

    #[test]
    fn nothing_is_sent_after_a_cancellation() {
        let link = link();
        assert!(link.is_alive());
        link.cancel();
        assert!(!link.is_alive());
        assert!(matches!(
            link.claim(Step::ViewUpdate),
            Err(CallbackError::Cancelled)
        ));
    }

    #[test]
    fn errors_get_the_prefix_once() {
        assert_eq!(error_text("no such zone".to_owned()), "Error: no such zone");
        assert_eq!(
            error_text("Error: no such zone".to_owned()),
            "Error: no such zone"
        );
    }
}
