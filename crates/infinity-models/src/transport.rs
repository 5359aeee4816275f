//! HTTP with retries, shared by the adapters.
//!
//! Retries with exponential backoff and jitter on 429, 5xx (including Anthropic's 529
//! `overloaded_error`) and connection errors, honouring `retry-after` (seconds or an HTTP date)
//! and `retry-after-ms`; never on other 4xx. An adapter whose errors name their type (Bedrock)
//! decides per error instead ([`send_with_retries`]). Every attempt has three timeouts: for the
//! response to begin (`first_byte`), for each silence in its body (`idle`) and for the whole of it
//! (`timeout`); each is retried like a broken connection. Errors never
//! contain request headers, so API keys and signatures stay out of logs and of the thread.

use std::time::Duration;

use infinity_agent_core::model::{ModelError, ModelErrorKind, Streamed, TextSink};
use infinity_retry::{model_status_is_transient, retry_after, Attempt as Next, RetryPolicy};
use reqwest::header::HeaderMap;
use reqwest::{RequestBuilder, Response, StatusCode};

/// How a model request is retried ([`RequestPolicy::retry`], with the status rule
/// [`model_status_is_transient`]) and how long each attempt may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestPolicy {
    /// Attempts, and the waits between them (jittered; a `retry-after` is honoured up to its
    /// `max_delay`).
    pub retry: RetryPolicy,
    /// The timeout of one attempt, streaming included.
    pub timeout: Duration,
    /// How long an attempt may wait for the response to begin (its status and headers).
    pub first_byte: Duration,
    /// How long a response's body may go silent between two pieces (a stalled stream).
    pub idle: Duration,
}

/// Five attempts, waiting 0.5 s doubling up to 30 s between them, with jitter.
pub const MODEL_REQUEST_RETRY: RetryPolicy =
    RetryPolicy::new(5, Duration::from_millis(500), Duration::from_secs(30)).jittered();

impl Default for RequestPolicy {
    fn default() -> Self {
        Self {
            retry: MODEL_REQUEST_RETRY,
            timeout: Duration::from_secs(300),
            first_byte: Duration::from_secs(60),
            idle: Duration::from_secs(60),
        }
    }
}

/// What a failed attempt means.
#[derive(Debug)]
pub enum Attempt {
    /// Try again (after at least this long, if the server said): what kind of failure, and why.
    Retry(ModelErrorKind, String, Option<Duration>),
    /// Give up with this error.
    Fail(ModelError),
}

/// Sends a request built by `build` until it yields a successful response, then hands that
/// response to `read` (which may itself ask for a retry, e.g. an `overloaded_error` inside a
/// stream). `provider` names the provider in errors.
pub async fn with_retries<T, B, R, F>(
    provider: &str,
    policy: &RequestPolicy,
    build: B,
    read: R,
) -> Result<T, ModelError>
where
    B: Fn() -> RequestBuilder,
    R: Fn(Response) -> F,
    F: std::future::Future<Output = Result<T, Attempt>>,
{
    send_with_retries(
        provider,
        policy,
        || Ok(build()),
        |failure| failure.by_status(provider),
        read,
    )
    .await
}

/// [`with_retries`] for a provider whose requests are built afresh for each attempt and may fail
/// to build (a signature that includes the time), and whose error responses say more than their
/// status (an error type in a header): `failed` decides what each one means.
pub async fn send_with_retries<T, B, E, R, F>(
    provider: &str,
    policy: &RequestPolicy,
    build: B,
    failed: E,
    read: R,
) -> Result<T, ModelError>
where
    B: Fn() -> Result<RequestBuilder, ModelError>,
    E: Fn(ErrorResponse) -> Attempt,
    R: Fn(Response) -> F,
    F: std::future::Future<Output = Result<T, Attempt>>,
{
    let one_attempt = || async {
        let request = build().map_err(Attempt::Fail)?;
        let sent = tokio::time::timeout(policy.first_byte, request.timeout(policy.timeout).send());
        let failure = match sent.await {
            Err(_) => Attempt::Retry(
                ModelErrorKind::TimedOut,
                format!(
                    "{provider}: no response within {:?} (the first-byte timeout)",
                    policy.first_byte
                ),
                None,
            ),
            Ok(Err(err)) => {
                let (kind, why) = if err.is_timeout() {
                    (
                        ModelErrorKind::TimedOut,
                        format!(
                            "{provider}: the request timed out after {:?}",
                            policy.timeout
                        ),
                    )
                } else if err.is_connect() {
                    (
                        ModelErrorKind::Network,
                        format!("{provider}: cannot connect: {}", without_url(&err)),
                    )
                } else {
                    (
                        ModelErrorKind::Network,
                        format!("{provider}: request failed: {}", without_url(&err)),
                    )
                };
                Attempt::Retry(kind, why, None)
            }
            Ok(Ok(response)) if response.status().is_success() => {
                return read(response).await;
            }
            Ok(Ok(response)) => {
                let status = response.status();
                let wait = retry_after(response.headers());
                // A copy: `text()` reads the charset from the headers.
                let headers = response.headers().clone();
                let body = response.text().await.unwrap_or_default();
                failed(ErrorResponse {
                    status,
                    headers,
                    body,
                    retry_after: wait,
                })
            }
        };
        Err(failure)
    };
    // The kind of the last failure, for the error when the attempts run out.
    let last = std::sync::Mutex::new(ModelErrorKind::Other);
    infinity_retry::with_backoff(
        &policy.retry,
        provider,
        || async {
            match one_attempt().await {
                Ok(value) => Next::Done(value),
                Err(Attempt::Fail(err)) => Next::Final(err),
                Err(Attempt::Retry(kind, why, wait)) => {
                    *last
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = kind;
                    Next::Again(why, wait)
                }
            }
        },
        |made, why| {
            let kind = *last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            ModelError::retryable(kind, format!("{why} (gave up after {made} attempts)"))
        },
    )
    .await
}

/// A response that is not a success, read to its end.
#[derive(Debug)]
pub struct ErrorResponse {
    /// A status other than a success.
    pub status: StatusCode,
    /// Where some providers name the error (Bedrock's `x-amzn-ErrorType`).
    pub headers: HeaderMap,
    /// The body as text (empty when it could not be read).
    pub body: String,
    /// The wait it asks for ([`infinity_retry::retry_after`]).
    pub retry_after: Option<Duration>,
}

impl ErrorResponse {
    /// What the status alone says: retry on 429 and 5xx, give up on the rest; the error names
    /// `provider`, the status and the body's message.
    pub fn by_status(self, provider: &str) -> Attempt {
        let why = format!(
            "{provider}: HTTP {}: {}",
            self.status,
            error_message(&self.body)
        );
        let kind = status_kind(self.status);
        if model_status_is_transient(self.status) {
            Attempt::Retry(kind, why, self.retry_after)
        } else {
            Attempt::Fail(ModelError::terminal(kind, why))
        }
    }
}

/// Reads a Server-Sent Events response to its end, handing each event's data to `on_data`.
pub async fn read_sse(
    provider: &str,
    policy: &RequestPolicy,
    response: Response,
    mut on_data: impl FnMut(&str) -> Result<(), Attempt>,
) -> Result<(), Attempt> {
    let mut stream = response.bytes_stream();
    let mut parser = crate::sse::SseParser::new();
    while let Some(chunk) = next_piece(provider, policy, &mut stream).await? {
        for event in parser.push(&chunk) {
            on_data(&event.data)?;
        }
    }
    if let Some(event) = parser.finish() {
        on_data(&event.data)?;
    }
    Ok(())
}

/// The next piece of a response's body, `None` at its end; a retry when the body broke off or
/// went silent for longer than the policy's `idle`.
pub async fn next_piece<S>(
    provider: &str,
    policy: &RequestPolicy,
    body: &mut S,
) -> Result<Option<bytes::Bytes>, Attempt>
where
    S: futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin,
{
    use futures_util::StreamExt;
    match tokio::time::timeout(policy.idle, body.next()).await {
        Err(_) => Err(Attempt::Retry(
            ModelErrorKind::TimedOut,
            format!(
                "{provider}: the stream stalled: nothing for {:?} (the idle timeout)",
                policy.idle
            ),
            None,
        )),
        Ok(None) => Ok(None),
        Ok(Some(piece)) => piece
            .map(Some)
            .map_err(|e| body_error(provider, policy, &e)),
    }
}

/// What streams a completion's text to a sink across the attempts of one request: when an
/// attempt that streamed text fails and another begins, the sink hears that the text so far is
/// withdrawn ([`Streamed::Restarted`]).
pub(crate) struct LiveText<'a> {
    sink: &'a TextSink<'a>,
    streamed: std::sync::atomic::AtomicBool,
}

impl<'a> LiveText<'a> {
    /// Streams to `sink`.
    pub(crate) fn new(sink: &'a TextSink<'a>) -> Self {
        Self {
            sink,
            streamed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// An attempt begins: text an earlier one streamed is withdrawn.
    pub(crate) fn attempt(&self) {
        if self
            .streamed
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            (self.sink)(Streamed::Restarted);
        }
    }

    /// More text.
    pub(crate) fn text(&self, text: &str) {
        self.streamed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        (self.sink)(Streamed::Text(text));
    }
}

/// The retry for an error while reading a response body (a stream that broke or stalled).
pub fn body_error(provider: &str, policy: &RequestPolicy, err: &reqwest::Error) -> Attempt {
    if err.is_timeout() {
        let why = format!(
            "{provider}: the request timed out after {:?} (the stream stalled)",
            policy.timeout
        );
        Attempt::Retry(ModelErrorKind::TimedOut, why, None)
    } else {
        let why = format!("{provider}: the stream broke: {}", without_url(err));
        Attempt::Retry(ModelErrorKind::Network, why, None)
    }
}

/// What an error status says failed.
pub fn status_kind(status: StatusCode) -> ModelErrorKind {
    match status.as_u16() {
        429 => ModelErrorKind::RateLimited,
        401 | 403 => ModelErrorKind::Credentials,
        408 => ModelErrorKind::TimedOut,
        500..=599 => ModelErrorKind::Unavailable,
        _ => ModelErrorKind::Refused,
    }
}

/// A reqwest error's message without the URL (which may carry a key for some gateways).
fn without_url(err: &reqwest::Error) -> String {
    let mut msg = err.to_string();
    if let Some(url) = err.url() {
        msg = msg.replace(url.as_str(), "<url>");
    }
    msg
}

/// The human part of a provider's JSON error body (`{"error": {"message": ...}}`), or the body.
pub fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .and_then(|m| m.as_str())
            .map(
                |m| match v.pointer("/error/type").and_then(|t| t.as_str()) {
                    Some(kind) => format!("{kind}: {m}"),
                    None => m.to_owned(),
                },
            )
    });
    let text = message.unwrap_or_else(|| body.trim().to_owned());
    text.chars().take(500).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_read_well() {
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "overloaded_error: Overloaded"
        );
        assert_eq!(error_message("plain failure\n"), "plain failure");
    }
}
