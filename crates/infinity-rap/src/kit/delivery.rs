//! Callback delivery: one POST to a `callback_url`, retried with backoff while a retry can help.

use std::time::Duration;

use super::CallbackError;
use crate::wire::Callback;
use infinity_retry::{rap_status_is_transient, with_backoff, Attempt, RetryPolicy};

/// How long one callback POST may take before it counts as a failed attempt (default client).
pub(crate) const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest part of a rejecting runtime's answer kept in [`CallbackError::Rejected`].
const MAX_BODY_CHARS: usize = 512;

/// Sends callbacks: one HTTP client, built once and shared by every call of a server.
#[derive(Debug)]
pub(crate) struct Delivery {
    client: reqwest::Client,
    retry: RetryPolicy,
}

impl Delivery {
    pub(crate) fn new(client: reqwest::Client, retry: RetryPolicy) -> Self {
        Delivery { client, retry }
    }

    /// POSTs `callback` as JSON to `url` until it is accepted (2xx), rejected (a non-2xx other
    /// than 5xx), or the attempts run out.
    pub(crate) async fn deliver(
        &self,
        url: &str,
        callback: &Callback,
    ) -> Result<(), CallbackError> {
        let client = &self.client;
        with_backoff(
            &self.retry,
            callback.type_name(),
            move || async move {
                match client.post(url).json(callback).send().await {
                    Ok(response) if response.status().is_success() => Attempt::Done(()),
                    Ok(response) if rap_status_is_transient(response.status()) => {
                        Attempt::Again(format!("the runtime answered {}", response.status()), None)
                    }
                    Ok(response) => {
                        let status = response.status();
                        let body = response.text().await.unwrap_or_default();
                        let body: String = body.chars().take(MAX_BODY_CHARS).collect();
                        tracing::warn!(
                            %status, %body, callback = callback.type_name(),
                            "the runtime rejected a callback; not retrying"
                        );
                        Attempt::Final(CallbackError::Rejected {
                            status: status.as_u16(),
                            body,
                        })
                    }
                    Err(error) if error.is_builder() => Attempt::Final(CallbackError::Unsendable {
                        reason: error.to_string(),
                    }),
                    Err(error) => Attempt::Again(error.to_string(), None),
                }
            },
            |attempts, last_error| CallbackError::Unreachable {
                attempts,
                last_error,
            },
        )
        .await
    }
}
