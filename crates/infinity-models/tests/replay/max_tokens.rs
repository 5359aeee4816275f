//! A reply cut off at the output limit reports `MaxTokens`, with the text it got so far.

use infinity_agent_core::model::StopReason;

use crate::replay::fixtures::{anthropic, complete, openai, quick_retries, Conversation};
use crate::replay::recordings::{ANTHROPIC_MAX_TOKENS, OPENAI_LENGTH};
use crate::replay::server::{Reply, Server};

#[tokio::test]
async fn anthropic_max_tokens() {
    let server = Server::start(vec![Reply::sse(ANTHROPIC_MAX_TOKENS)]).await;
    let model = anthropic(&server, quick_retries(2));

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.stop_reason, StopReason::MaxTokens);
    assert_eq!(
        completion.text.as_deref(),
        Some("The forecast for the next")
    );
    assert_eq!(completion.usage.output_tokens, 16384);
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn openai_finish_reason_length() {
    let server = Server::start(vec![Reply::sse(OPENAI_LENGTH)]).await;
    let model = openai(&server, quick_retries(2));

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.stop_reason, StopReason::MaxTokens);
    assert_eq!(
        completion.text.as_deref(),
        Some("The forecast for the next")
    );
    assert_eq!(completion.usage.output_tokens, 16384);
    assert_eq!(server.requests(), 1);
}
