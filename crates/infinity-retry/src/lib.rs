//! One rule for trying again, shared by the model adapters, both sides of RAP and the hosts.
//!
//! - [`RetryPolicy`]: how many attempts, and the wait before each next one: a first wait that
//!   doubles after every failure up to a longest wait, spread by jitter when many clients may
//!   have failed together; a wait the server asked for is taken instead, capped the same way.
//! - [`with_backoff`]: runs the attempts of one request by a policy.
//! - [`retry_after`]: the wait a response asks for (`retry-after-ms`, `retry-after` in seconds or
//!   as an HTTP date).
//! - [`model_status_is_transient`] and [`rap_status_is_transient`]: which HTTP answers are worth
//!   another attempt. They differ on purpose: a model provider's 429 means "later", while RAP's
//!   spec makes every 4xx final, so both sides of RAP agree on what a refusal means.
//!
//! ```
//! use std::time::Duration;
//! use infinity_retry::RetryPolicy;
//!
//! let policy = RetryPolicy::new(4, Duration::from_millis(400), Duration::from_secs(1));
//! assert_eq!(policy.delay(1, None), Duration::from_millis(400));
//! assert_eq!(policy.delay(2, None), Duration::from_millis(800));
//! assert_eq!(policy.delay(3, None), Duration::from_secs(1)); // capped
//! assert_eq!(policy.delay(1, Some(Duration::from_secs(9))), Duration::from_secs(1));
//! ```

use std::future::Future;
use std::time::Duration;

use http::{HeaderMap, StatusCode};

/// How often one request is tried, and how long to wait between two attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1: no retry; 0 is taken as 1).
    pub attempts: u32,
    /// The wait after the first failed attempt; each later wait doubles.
    pub first_delay: Duration,
    /// The longest wait between two attempts; it caps a wait the server asks for too.
    pub max_delay: Duration,
    /// Spread each wait by up to a quarter either way, so that clients that failed together do
    /// not all come back at the same moment.
    pub jitter: bool,
}

impl RetryPolicy {
    /// `attempts` in all, waiting `first_delay`, then twice as long each time up to `max_delay`;
    /// no jitter.
    pub const fn new(attempts: u32, first_delay: Duration, max_delay: Duration) -> Self {
        RetryPolicy {
            attempts,
            first_delay,
            max_delay,
            jitter: false,
        }
    }

    /// The same policy with jitter.
    pub const fn jittered(self) -> Self {
        RetryPolicy {
            jitter: true,
            ..self
        }
    }

    /// True when another attempt may follow the `made` attempts so far.
    pub fn allows_another(&self, made: u32) -> bool {
        made < self.attempts.max(1)
    }

    /// The wait after the `failed`-th failed attempt (1 for the first): `first_delay` doubled
    /// `failed - 1` times, at most `max_delay`, spread when `jitter` is set. A wait the server
    /// asked for (`asked`) is taken instead, also at most `max_delay`.
    pub fn delay(&self, failed: u32, asked: Option<Duration>) -> Duration {
        if let Some(asked) = asked {
            return asked.min(self.max_delay);
        }
        let doublings = failed.saturating_sub(1).min(31);
        let wait = self
            .first_delay
            .saturating_mul(1u32 << doublings)
            .min(self.max_delay);
        if self.jitter {
            spread(wait, clock_noise())
        } else {
            wait
        }
    }
}

/// `wait` moved by up to a quarter either way, by `noise` (any number).
fn spread(wait: Duration, noise: u64) -> Duration {
    let millis = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    let quarter = millis / 4;
    if quarter == 0 {
        return wait;
    }
    Duration::from_millis(millis - quarter + noise % (2 * quarter + 1))
}

/// The clock's nanoseconds: random enough to spread retries, with nothing to seed.
fn clock_noise() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::from(d.subsec_nanos()))
        .unwrap_or(0)
}

/// What one attempt came to.
#[derive(Debug)]
pub enum Attempt<T, E> {
    /// It succeeded.
    Done(T),
    /// It failed for good: no other attempt.
    Final(E),
    /// It failed in a way another attempt may fix: why, and the wait the server asked for.
    Again(String, Option<Duration>),
}

/// Runs `attempt` until it is done or fails for good, waiting by `policy` between attempts.
/// When the attempts run out, `exhausted(attempts made, last failure)` is the error. `what`
/// names the request in logs.
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
    let mut made = 1;
    loop {
        let (failure, asked) = match attempt().await {
            Attempt::Done(value) => return Ok(value),
            Attempt::Final(error) => return Err(error),
            Attempt::Again(why, asked) => (why, asked),
        };
        if !policy.allows_another(made) {
            tracing::warn!(what, attempts = made, last_error = %failure, "giving up");
            return Err(exhausted(made, failure));
        }
        let delay = policy.delay(made, asked);
        tracing::warn!(what, attempt = made, ?delay, error = %failure, "failed; retrying");
        tokio::time::sleep(delay).await;
        made += 1;
    }
}

/// True for a model provider's answers after which the same request may well succeed later:
/// 429 (rate limited) and 5xx (Anthropic's 529 `overloaded_error` among them).
pub fn model_status_is_transient(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() || status.as_u16() == 529
}

/// True for RAP's answers worth another attempt: 5xx. Every 4xx is final, 429 too: the spec
/// forbids a runtime to retry a 4xx, and the kit follows the same rule for its callbacks.
pub fn rap_status_is_transient(status: StatusCode) -> bool {
    status.is_server_error()
}

/// The wait a response's headers ask for: `retry-after-ms` (milliseconds), else `retry-after`
/// in seconds or as an HTTP date (the time until then; none once it has passed).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Duration::try_from_secs_f64(ms.max(0.0) / 1000.0).ok();
    }
    let value = text("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(secs.max(0.0)).ok();
    }
    // An HTTP date, e.g. "Wed, 21 Oct 2015 07:28:00 GMT".
    let when = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    Duration::try_from(when.duration_since(jiff::Timestamp::now())).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn waits_double_up_to_the_longest() {
        let policy = RetryPolicy::new(6, ms(200), ms(1000));
        let waits: Vec<Duration> = (1..=5).map(|n| policy.delay(n, None)).collect();
        assert_eq!(waits, [ms(200), ms(400), ms(800), ms(1000), ms(1000)]);
        // Far past any sensible count, still the cap and no overflow.
        assert_eq!(policy.delay(200, None), ms(1000));
    }

    #[test]
    fn a_wait_the_server_asks_for_is_taken_and_capped() {
        let policy = RetryPolicy::new(3, ms(500), ms(2000)).jittered();
        assert_eq!(policy.delay(1, Some(ms(1500))), ms(1500));
        assert_eq!(policy.delay(3, Some(ms(9000))), ms(2000));
        assert_eq!(policy.delay(1, Some(Duration::ZERO)), Duration::ZERO);
    }

    #[test]
    fn jitter_stays_within_a_quarter_and_moves() {
        let seen: std::collections::BTreeSet<Duration> =
            (0..400).map(|noise| spread(ms(1000), noise)).collect();
        assert!(
            seen.iter().all(|w| *w >= ms(750) && *w <= ms(1250)),
            "{seen:?}"
        );
        assert!(seen.len() > 100, "jitter barely moves: {}", seen.len());
        assert_eq!(spread(ms(3), 7), ms(3), "too short to spread");
    }

    #[test]
    fn attempts_are_counted_with_the_first() {
        let once = RetryPolicy::new(1, ms(1), ms(1));
        assert!(!once.allows_another(1));
        let zero = RetryPolicy::new(0, ms(1), ms(1));
        assert!(!zero.allows_another(1), "0 attempts is taken as 1");
        let three = RetryPolicy::new(3, ms(1), ms(1));
        assert!(three.allows_another(2) && !three.allows_another(3));
    }

    #[test]
    fn the_two_status_rules() {
        let s = |n| StatusCode::from_u16(n).unwrap();
        for transient in [500, 502, 503, 504, 529] {
            assert!(model_status_is_transient(s(transient)), "{transient}");
            assert!(rap_status_is_transient(s(transient)), "{transient}");
        }
        assert!(model_status_is_transient(s(429)));
        assert!(!rap_status_is_transient(s(429)), "RAP never retries a 4xx");
        for final_answer in [400, 401, 403, 404, 409, 410, 422, 301] {
            assert!(
                !model_status_is_transient(s(final_answer)),
                "{final_answer}"
            );
            assert!(!rap_status_is_transient(s(final_answer)), "{final_answer}");
        }
    }

    #[test]
    fn retry_after_in_each_form() {
        let headers = |pairs: &[(&'static str, String)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, value.parse().unwrap());
            }
            map
        };
        assert_eq!(
            retry_after(&headers(&[("retry-after", " 2 ".into())])),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry_after(&headers(&[
                ("retry-after", "9".into()),
                ("retry-after-ms", "1500".into())
            ])),
            Some(ms(1500)),
            "the finer header wins"
        );
        let soon = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(120);
        let date = jiff::fmt::rfc2822::DateTimePrinter::new()
            .timestamp_to_rfc9110_string(&soon)
            .unwrap();
        let wait = retry_after(&headers(&[("retry-after", date)])).unwrap();
        assert!(
            wait > Duration::from_secs(100) && wait <= Duration::from_secs(120),
            "{wait:?}"
        );
        let past = "Wed, 21 Oct 2015 07:28:00 GMT".to_owned();
        assert_eq!(retry_after(&headers(&[("retry-after", past)])), None);
        assert_eq!(
            retry_after(&headers(&[("retry-after", "soon".into())])),
            None
        );
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[tokio::test(start_paused = true)]
    async fn attempts_stop_at_the_limit_or_a_final_answer() {
        let policy = RetryPolicy::new(3, ms(100), ms(150));
        let started = tokio::time::Instant::now();
        let mut calls = 0;
        let out: Result<(), String> = with_backoff(
            &policy,
            "test",
            || {
                calls += 1;
                async { Attempt::Again("busy".to_owned(), None) }
            },
            |n, last| format!("{last} after {n}"),
        )
        .await;
        assert_eq!(out, Err("busy after 3".to_owned()));
        assert_eq!(calls, 3);
        assert_eq!(started.elapsed(), ms(250), "waits of 100 and 150 ms");

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
        assert_eq!(out, Err("refused".to_owned()));
        assert_eq!(calls, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_success_after_failures_is_returned_and_asked_waits_are_kept() {
        let policy = RetryPolicy::new(5, ms(10), ms(5000));
        let started = tokio::time::Instant::now();
        let mut calls = 0;
        let out: Result<u32, String> = with_backoff(
            &policy,
            "test",
            || {
                calls += 1;
                let n = calls;
                async move {
                    if n < 3 {
                        Attempt::Again("later".to_owned(), Some(ms(2000)))
                    } else {
                        Attempt::Done(n)
                    }
                }
            },
            |_, last| last,
        )
        .await;
        assert_eq!(out, Ok(3));
        assert_eq!(started.elapsed(), ms(4000));
    }
}
