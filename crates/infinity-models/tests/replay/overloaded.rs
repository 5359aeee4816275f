//! Anthropic's `overloaded_error`, as HTTP 529 or as an `error` event inside a stream that had
//! already begun, is retried; other error events are not.

use infinity_agent_core::model::{ModelError, ModelErrorKind};

use crate::replay::fixtures::{anthropic, complete, quick_retries, Conversation};
use crate::replay::recordings::{
    ANTHROPIC_OVERLOADED_BODY, ANTHROPIC_OVERLOADED_EVENT, ANTHROPIC_TEXT, TEXT,
};
use crate::replay::server::{Reply, Server};

#[tokio::test]
async fn anthropic_529_overloaded_then_success() {
    let server = Server::start(vec![
        Reply::error(529, ANTHROPIC_OVERLOADED_BODY),
        Reply::sse(ANTHROPIC_TEXT),
    ])
    .await;
    let model = anthropic(&server, quick_retries(2));

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text.as_deref(), Some(TEXT));
    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn anthropic_529_every_time_gives_up_retryable() {
    let server = Server::start(vec![Reply::error(529, ANTHROPIC_OVERLOADED_BODY)]).await;
    let model = anthropic(&server, quick_retries(2));

    let err = complete(&model, &Conversation::hello()).await.unwrap_err();

    let ModelError::Retryable {
        kind: ModelErrorKind::Unavailable,
        text: why,
    } = err
    else {
        panic!("expected a retryable error, got {err:?}");
    };
    assert!(why.contains("529"), "{why}");
    assert!(why.contains("overloaded_error: Overloaded"), "{why}");
    assert_eq!(server.requests(), 3);
}

#[tokio::test]
async fn anthropic_overloaded_error_event_mid_stream_then_success() {
    let server = Server::start(vec![
        Reply::sse(ANTHROPIC_OVERLOADED_EVENT),
        Reply::sse(ANTHROPIC_TEXT),
    ])
    .await;
    let model = anthropic(&server, quick_retries(2));

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    // Only the second attempt's text: nothing of the broken stream leaks into the reply.
    assert_eq!(completion.text.as_deref(), Some(TEXT));
    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn anthropic_invalid_request_error_event_is_terminal() {
    let stream = "event: error\n\
                  data: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long\"}}\n\n";
    let server = Server::start(vec![Reply::sse(stream), Reply::sse(ANTHROPIC_TEXT)]).await;
    let model = anthropic(&server, quick_retries(2));

    let err = complete(&model, &Conversation::hello()).await.unwrap_err();

    let ModelError::Terminal { text: why, .. } = err else {
        panic!("expected a terminal error, got {err:?}");
    };
    assert!(why.contains("prompt is too long"), "{why}");
    assert_eq!(server.requests(), 1);
}
