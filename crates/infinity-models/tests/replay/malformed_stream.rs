//! An event that is not JSON fails the attempt: it is retried, and after `retry.attempts`
//! broken streams the error is retryable.

use infinity_agent_core::model::{ModelError, ModelErrorKind};

use crate::replay::fixtures::{anthropic, complete, openai, quick_retries, Conversation};
use crate::replay::recordings::{
    ANTHROPIC_MALFORMED, ANTHROPIC_TEXT, OPENAI_MALFORMED, OPENAI_TEXT, TEXT,
};
use crate::replay::server::{Reply, Server};

fn retryable_message(err: ModelError) -> String {
    match err {
        ModelError::Retryable { kind, text } => {
            assert!(
                matches!(kind, ModelErrorKind::BadAnswer | ModelErrorKind::Network),
                "{kind:?}: {text}"
            );
            text
        }
        ModelError::Terminal { text: why, .. } => {
            panic!("expected a retryable error, got a terminal one: {why}")
        }
    }
}

#[tokio::test]
async fn anthropic_malformed_event_then_success() {
    let server = Server::start(vec![
        Reply::sse(ANTHROPIC_MALFORMED),
        Reply::sse(ANTHROPIC_TEXT),
    ])
    .await;
    let model = anthropic(&server, quick_retries(2));

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text.as_deref(), Some(TEXT));
    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn anthropic_malformed_every_time_gives_up_retryable() {
    let server = Server::start(vec![Reply::sse(ANTHROPIC_MALFORMED)]).await;
    let model = anthropic(&server, quick_retries(2));

    let why = retryable_message(complete(&model, &Conversation::hello()).await.unwrap_err());

    assert!(why.contains("malformed"), "{why}");
    assert!(why.contains("3 attempts"), "{why}");
    assert_eq!(server.requests(), 3);
}

#[tokio::test]
async fn openai_malformed_chunk_then_success() {
    let server = Server::start(vec![Reply::sse(OPENAI_MALFORMED), Reply::sse(OPENAI_TEXT)]).await;
    let model = openai(&server, quick_retries(2));

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text.as_deref(), Some(TEXT));
    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn openai_malformed_every_time_gives_up_retryable() {
    let server = Server::start(vec![Reply::sse(OPENAI_MALFORMED)]).await;
    let model = openai(&server, quick_retries(2));

    let why = retryable_message(complete(&model, &Conversation::hello()).await.unwrap_err());

    assert!(why.contains("malformed"), "{why}");
    assert!(why.contains("3 attempts"), "{why}");
    assert_eq!(server.requests(), 3);
}
