//! An attempt that outlasts the policy's timeout is abandoned and retried; after
//! `retry.attempts` attempts the error is retryable and says it timed out. The timeout covers
//! the whole attempt: waiting for the response and reading the stream.

use std::time::{Duration, Instant};

use infinity_agent_core::model::{ModelError, ModelErrorKind};
use infinity_models::transport::RequestPolicy;
use infinity_retry::RetryPolicy;

use crate::replay::fixtures::{anthropic, complete, openai, Conversation};
use crate::replay::recordings::{ANTHROPIC_TEXT, OPENAI_TEXT};
use crate::replay::server::{Reply, Server};

const TIMEOUT: Duration = Duration::from_millis(500);

/// Longer than [`TIMEOUT`].
const STALL: Duration = Duration::from_secs(3);

/// One retry, 500 ms per attempt.
fn impatient() -> RequestPolicy {
    RequestPolicy {
        retry: RetryPolicy::new(2, Duration::from_millis(10), Duration::from_millis(10)).jittered(),
        timeout: TIMEOUT,
        // Longer than the stall: these tests are of the whole attempt's timeout.
        first_byte: 2 * STALL,
        idle: 2 * STALL,
    }
}

fn assert_timed_out(err: ModelError, started: Instant) {
    // Two attempts of 500 ms each, not the server's 3 s stall.
    let elapsed = started.elapsed();
    assert!(elapsed >= 2 * TIMEOUT && elapsed < STALL, "{elapsed:?}");
    let ModelError::Retryable {
        kind: ModelErrorKind::TimedOut,
        text: why,
    } = err
    else {
        panic!("expected a retryable error, got {err:?}");
    };
    assert!(why.contains("2 attempts"), "{why}");
    assert!(why.contains("timed out"), "{why}");
}

/// The first half of `body` at once, the rest only after the stall. (Today the adapters report
/// the resulting timeout as "the stream broke: error decoding response body", which the stall
/// tests below catch.)
fn stalling_stream(body: &str) -> Reply {
    let (start, rest) = body.as_bytes().split_at(body.len() / 2);
    Reply::sse_pieces(vec![start.to_vec(), rest.to_vec()], Duration::ZERO)
        .pause_before_piece(1, STALL)
}

#[tokio::test]
async fn anthropic_times_out_waiting_for_the_response() {
    let server = Server::start(vec![Reply::sse(ANTHROPIC_TEXT).after(STALL)]).await;
    let model = anthropic(&server, impatient());
    let started = Instant::now();

    let err = complete(&model, &Conversation::hello()).await.unwrap_err();

    assert_timed_out(err, started);
    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn openai_times_out_waiting_for_the_response() {
    let server = Server::start(vec![Reply::sse(OPENAI_TEXT).after(STALL)]).await;
    let model = openai(&server, impatient());
    let started = Instant::now();

    let err = complete(&model, &Conversation::hello()).await.unwrap_err();

    assert_timed_out(err, started);
    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn anthropic_times_out_when_the_stream_stalls() {
    let server = Server::start(vec![stalling_stream(ANTHROPIC_TEXT)]).await;
    let model = anthropic(&server, impatient());
    let started = Instant::now();

    let err = complete(&model, &Conversation::hello()).await.unwrap_err();

    assert_timed_out(err, started);
    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn openai_times_out_when_the_stream_stalls() {
    let server = Server::start(vec![stalling_stream(OPENAI_TEXT)]).await;
    let model = openai(&server, impatient());
    let started = Instant::now();

    let err = complete(&model, &Conversation::hello()).await.unwrap_err();

    assert_timed_out(err, started);
    assert_eq!(server.requests(), 2);
}

/// One retry; each attempt may take as long as the stall and more, but must begin within
/// [`TIMEOUT`] and never go silent for longer.
fn watchful() -> RequestPolicy {
    RequestPolicy {
        timeout: 4 * STALL,
        first_byte: TIMEOUT,
        idle: TIMEOUT,
        ..impatient()
    }
}

/// Two attempts, each abandoned after [`TIMEOUT`], and the error says which timeout it was.
fn assert_abandoned(err: ModelError, started: Instant, which: &str) {
    let elapsed = started.elapsed();
    assert!(elapsed >= 2 * TIMEOUT && elapsed < STALL, "{elapsed:?}");
    let ModelError::Retryable {
        kind: ModelErrorKind::TimedOut,
        text: why,
    } = err
    else {
        panic!("expected a retryable error, got {err:?}");
    };
    assert!(why.contains("2 attempts") && why.contains(which), "{why}");
}

#[tokio::test]
async fn a_response_that_does_not_begin_is_abandoned_at_the_first_byte_timeout() {
    for provider in ["anthropic", "openai"] {
        let reply = if provider == "anthropic" {
            ANTHROPIC_TEXT
        } else {
            OPENAI_TEXT
        };
        let server = Server::start(vec![Reply::sse(reply).after(STALL)]).await;
        let started = Instant::now();

        let err = if provider == "anthropic" {
            complete(&anthropic(&server, watchful()), &Conversation::hello()).await
        } else {
            complete(&openai(&server, watchful()), &Conversation::hello()).await
        }
        .unwrap_err();

        assert_abandoned(err, started, "first-byte timeout");
        assert_eq!(server.requests(), 2, "{provider}");
    }
}

#[tokio::test]
async fn a_stream_that_goes_silent_is_abandoned_at_the_idle_timeout() {
    for provider in ["anthropic", "openai"] {
        let reply = if provider == "anthropic" {
            ANTHROPIC_TEXT
        } else {
            OPENAI_TEXT
        };
        let server = Server::start(vec![stalling_stream(reply)]).await;
        let started = Instant::now();

        let err = if provider == "anthropic" {
            complete(&anthropic(&server, watchful()), &Conversation::hello()).await
        } else {
            complete(&openai(&server, watchful()), &Conversation::hello()).await
        }
        .unwrap_err();

        assert_abandoned(err, started, "idle timeout");
        assert_eq!(server.requests(), 2, "{provider}");
    }
}
