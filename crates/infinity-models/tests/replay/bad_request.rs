//! A 400 is not retried: one request, a terminal error carrying the provider's message, and no
//! API key anywhere in it.

use infinity_agent_core::model::ModelError;

use crate::fixtures::{anthropic, complete, openai, quick_retries, Conversation, API_KEY};
use crate::recordings::{
    ANTHROPIC_BAD_REQUEST_BODY, ANTHROPIC_BAD_REQUEST_MESSAGE, ANTHROPIC_TEXT,
    OPENAI_BAD_REQUEST_BODY, OPENAI_BAD_REQUEST_MESSAGE, OPENAI_TEXT,
};
use crate::server::{Reply, Server};

/// The message of a terminal error, checked to keep the key out in every rendering.
fn terminal_message(err: ModelError) -> String {
    for rendering in [err.to_string(), format!("{err:?}")] {
        assert!(!rendering.contains(API_KEY), "the key leaked: {rendering}");
    }
    match err {
        ModelError::Terminal(why) => why,
        ModelError::Retryable(why) => {
            panic!("expected a terminal error, got a retryable one: {why}")
        }
    }
}

#[tokio::test]
async fn anthropic_400_is_terminal_without_retry() {
    let server = Server::start(vec![
        Reply::error(400, ANTHROPIC_BAD_REQUEST_BODY),
        Reply::sse(ANTHROPIC_TEXT),
    ])
    .await;
    let model = anthropic(&server, quick_retries(3));

    let why = terminal_message(complete(&model, &Conversation::hello()).await.unwrap_err());

    assert!(why.contains(ANTHROPIC_BAD_REQUEST_MESSAGE), "{why}");
    assert!(why.contains("400"), "{why}");
    assert_eq!(server.requests(), 1);
    // The key did travel, in its header.
    assert_eq!(server.received()[0].header("x-api-key"), Some(API_KEY));
}

#[tokio::test]
async fn openai_400_is_terminal_without_retry() {
    let server = Server::start(vec![
        Reply::error(400, OPENAI_BAD_REQUEST_BODY),
        Reply::sse(OPENAI_TEXT),
    ])
    .await;
    let model = openai(&server, quick_retries(3));

    let why = terminal_message(complete(&model, &Conversation::hello()).await.unwrap_err());

    assert!(why.contains(OPENAI_BAD_REQUEST_MESSAGE), "{why}");
    assert!(why.contains("400"), "{why}");
    assert_eq!(server.requests(), 1);
    let bearer = format!("Bearer {API_KEY}");
    assert_eq!(
        server.received()[0].header("authorization"),
        Some(bearer.as_str())
    );
}
