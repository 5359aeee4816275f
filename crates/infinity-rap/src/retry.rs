//! Retrying HTTP requests, for both sides of RAP: the runtime's invocations and the kit's
//! callback deliveries follow one rule for which answers are worth another attempt (connection
//! errors, timeouts, 5xx; never a 4xx, 429 included) and one backoff schedule.

use std::future::Future;
use std::time::Duration;

use reqwest::StatusCode;

/// When and how often a request is sent again after a failed attempt.
///
/// The delay before the next attempt starts at `first_delay` and doubles up to `max_delay`.
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

/// True for the answers after which the same request may well succeed later: 5xx.
///
/// A 4xx is final, 429 too: the spec forbids a runtime to retry a 4xx, and the kit follows the
/// same rule for its callbacks, so both sides agree on what a refusal means.
pub fn is_retryable(status: StatusCode) -> bool {
    status.is_server_error()
}

/// What one attempt came to.
#[derive(Debug)]
pub enum Attempt<T, E> {
    /// It succeeded.
    Done(T),
    /// It failed for good: no retry.
    Final(E),
    /// It failed in a way another attempt may fix; why.
    Again(String),
}

/// Runs `attempt` until it is done or fails for good, waiting by `policy` between attempts; when
/// the attempts run out, `exhausted(attempts made, last failure)` is the error. `what` names the
/// request in logs.
pub async fn with_backoff<T, E, F, Fut>(
    policy: &RetryPolicy,
    what: &str,
    mut attempt: F,
    exhausted: impl FnOnce(u32, String) -> E,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Attempt<T, E>>,
{
    let mut delay = policy.first_delay;
    let mut made = 1;
    loop {
        let failure = match attempt().await {
            Attempt::Done(value) => return Ok(value),
            Attempt::Final(error) => return Err(error),
            Attempt::Again(why) => why,
        };
        if made >= policy.max_attempts {
            tracing::warn!(what, attempts = made, last_error = %failure, "giving up");
            return Err(exhausted(made, failure));
        }
        tracing::debug!(what, attempt = made, ?delay, error = %failure, "failed; retrying");
        tokio::time::sleep(delay).await;
        delay = delay.saturating_mul(2).min(policy.max_delay);
        made += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_server_errors_are_retried() {
        for retried in [500, 502, 503, 504] {
            assert!(
                is_retryable(StatusCode::from_u16(retried).unwrap()),
                "{retried}"
            );
        }
        for final_answer in [400, 401, 403, 404, 409, 410, 422, 429, 301] {
            assert!(
                !is_retryable(StatusCode::from_u16(final_answer).unwrap()),
                "{final_answer}"
            );
        }
    }

    #[tokio::test]
    async fn attempts_stop_at_the_limit_or_a_final_answer() {
        let policy = RetryPolicy {
            max_attempts: 3,
            first_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
        };
        let mut calls = 0;
        let out: Result<(), String> = with_backoff(
            &policy,
            "test",
            || {
                calls += 1;
                async { Attempt::Again("busy".to_owned()) }
            },
            |n, last| format!("{last} after {n}"),
        )
        .await;
        assert_eq!((out, calls), (Err("busy after 3".to_owned()), 3));
        let mut calls = 0;
        let out: Result<(), String> = with_backoff(
            &policy,
            "test",
            || {
                calls += 1;
                async { Attempt::Final("refused".to_owned()) }
            },
            |_, last| last,
        )
        .await;
        assert_eq!((out, calls), (Err("refused".to_owned()), 1));
    }
}
