//! Callback delivery: one POST to a `callback_url`, retried with backoff while a retry can help.

use std::time::Duration;

use reqwest::StatusCode;

use super::CallbackError;
use crate::wire::Callback;

/// How long one callback POST may take before it counts as a failed attempt (default client).
pub(crate) const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest part of a rejecting runtime's answer kept in [`CallbackError::Rejected`].
const MAX_BODY_CHARS: usize = 512;

/// When and how often a callback is sent again after a failed attempt.
///
/// An attempt fails in a way worth retrying when the runtime is unreachable, times out, or
/// answers 5xx or 429; the delay before the next attempt starts at `first_delay` and doubles up
/// to `max_delay`. Any other non-2xx answer (a 4xx: unknown thread, expired URL) is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; at least 1.
    pub max_attempts: u32,
    /// The wait after the first failed attempt.
    pub first_delay: Duration,
    /// The longest wait between two attempts.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// Six attempts, waiting 0.2, 0.4, 0.8, 1.6 and 3.2 s in between (6.2 s in all).
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 6,
            first_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
        }
    }
}

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

    /// POSTs `callback` as JSON to `url` until it is accepted (2xx), rejected (other non-2xx
    /// than 5xx and 429), or the attempts run out.
    pub(crate) async fn deliver(
        &self,
        url: &str,
        callback: &Callback,
    ) -> Result<(), CallbackError> {
        let mut delay = self.retry.first_delay;
        let mut attempt = 1;
        loop {
            let failure = match self.client.post(url).json(callback).send().await {
                Ok(response) if response.status().is_success() => return Ok(()),
                Ok(response) if is_retryable(response.status()) => {
                    format!("the runtime answered {}", response.status())
                }
                Ok(response) => {
                    let status = response.status();
                    let body = response.text().await.unwrap_or_default();
                    let body: String = body.chars().take(MAX_BODY_CHARS).collect();
                    tracing::warn!(
                        %status, %body, callback = callback.type_name(),
                        "the runtime rejected a callback; not retrying"
                    );
                    return Err(CallbackError::Rejected {
                        status: status.as_u16(),
                        body,
                    });
                }
                Err(error) if error.is_builder() => {
                    return Err(CallbackError::Unsendable {
                        reason: error.to_string(),
                    });
                }
                Err(error) => error.to_string(),
            };
            if attempt >= self.retry.max_attempts {
                tracing::warn!(
                    attempts = attempt, last_error = %failure, callback = callback.type_name(),
                    "giving up on a callback"
                );
                return Err(CallbackError::Unreachable {
                    attempts: attempt,
                    last_error: failure,
                });
            }
            tracing::debug!(
                attempt, ?delay, error = %failure, callback = callback.type_name(),
                "callback failed; retrying"
            );
            tokio::time::sleep(delay).await;
            delay = delay.saturating_mul(2).min(self.retry.max_delay);
            attempt += 1;
        }
    }
}

/// True for the answers after which the same callback may well be accepted later.
fn is_retryable(status: StatusCode) -> bool {
    status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_server_errors_and_throttling_are_retried() {
        for retried in [500, 502, 503, 504, 429] {
            assert!(
                is_retryable(StatusCode::from_u16(retried).unwrap()),
                "{retried}"
            );
        }
        for final_answer in [400, 401, 403, 404, 409, 410, 422, 301] {
            assert!(
                !is_retryable(StatusCode::from_u16(final_answer).unwrap()),
                "{final_answer}"
            );
        }
    }
}
