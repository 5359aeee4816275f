//! Rate limits and server errors are retried (honouring `retry-after`), and the retried request
//! is the same request.

use std::time::{Duration, Instant};

use infinity_models::transport::RequestPolicy;
use infinity_retry::RetryPolicy;

use crate::replay::fixtures::{anthropic, complete, openai, quick_retries, Conversation};
use crate::replay::recordings::{
    ANTHROPIC_RATE_LIMIT_BODY, ANTHROPIC_SERVER_ERROR_BODY, ANTHROPIC_TEXT, OPENAI_RATE_LIMIT_BODY,
    OPENAI_SERVER_ERROR_BODY, OPENAI_TEXT, TEXT,
};
use crate::replay::server::{Reply, Server};

/// Backoff so long that a test only finishes in time if `retry-after` replaced it.
fn patient() -> RequestPolicy {
    RequestPolicy {
        retry: RetryPolicy::new(3, Duration::from_secs(30), Duration::from_secs(30)).jittered(),
        timeout: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        idle: Duration::from_secs(5),
    }
}

#[tokio::test]
async fn anthropic_429_with_retry_after_zero_then_success() {
    let server = Server::start(vec![
        Reply::error(429, ANTHROPIC_RATE_LIMIT_BODY).header("retry-after", "0"),
        Reply::sse(ANTHROPIC_TEXT),
    ])
    .await;
    let model = anthropic(&server, patient());
    let started = Instant::now();

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text.as_deref(), Some(TEXT));
    assert_eq!(server.requests(), 2);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waited the backoff, not retry-after"
    );
}

#[tokio::test]
async fn openai_429_with_retry_after_zero_then_success() {
    let server = Server::start(vec![
        Reply::error(429, OPENAI_RATE_LIMIT_BODY).header("retry-after", "0"),
        Reply::sse(OPENAI_TEXT),
    ])
    .await;
    let model = openai(&server, patient());
    let started = Instant::now();

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text.as_deref(), Some(TEXT));
    assert_eq!(server.requests(), 2);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waited the backoff, not retry-after"
    );
}

#[tokio::test]
async fn openai_429_waits_as_long_as_retry_after_ms_asks() {
    let server = Server::start(vec![
        Reply::error(429, OPENAI_RATE_LIMIT_BODY).header("retry-after-ms", "300"),
        Reply::sse(OPENAI_TEXT),
    ])
    .await;
    // Its own backoff is 10 ms; `max_delay`, which also caps `retry-after`, allows 300 ms.
    let quick = quick_retries(2);
    let policy = RequestPolicy {
        retry: RetryPolicy {
            max_delay: Duration::from_secs(2),
            ..quick.retry
        },
        ..quick
    };
    let model = openai(&server, policy);
    let started = Instant::now();

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text.as_deref(), Some(TEXT));
    assert_eq!(server.requests(), 2);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn anthropic_retry_after_is_capped_by_max_delay() {
    let server = Server::start(vec![
        Reply::error(429, ANTHROPIC_RATE_LIMIT_BODY).header("retry-after", "600"),
        Reply::sse(ANTHROPIC_TEXT),
    ])
    .await;
    let model = anthropic(&server, quick_retries(2));
    let started = Instant::now();

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text.as_deref(), Some(TEXT));
    assert_eq!(server.requests(), 2);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn anthropic_500_then_success() {
    let server = Server::start(vec![
        Reply::error(500, ANTHROPIC_SERVER_ERROR_BODY),
        Reply::sse(ANTHROPIC_TEXT),
    ])
    .await;
    let model = anthropic(&server, quick_retries(2));

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text.as_deref(), Some(TEXT));
    let received = server.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].body, received[1].body);
}

#[tokio::test]
async fn openai_500_then_success() {
    let server = Server::start(vec![
        Reply::error(500, OPENAI_SERVER_ERROR_BODY),
        Reply::sse(OPENAI_TEXT),
    ])
    .await;
    let model = openai(&server, quick_retries(2));

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text.as_deref(), Some(TEXT));
    let received = server.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].body, received[1].body);
}
