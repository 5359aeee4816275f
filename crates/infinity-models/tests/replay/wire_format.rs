//! The whole body each adapter sends for a varied history, against bodies written out in full
//! in `tests/bodies/` (checked in, not produced by the code under test): every field, every
//! value, every cache breakpoint.

use infinity_models::anthropic::{AnthropicConfig, AnthropicModel};
use serde_json::Value;

use crate::common::{assert_body, varied_history};
use crate::replay::fixtures::{complete, openai, quick_retries, Conversation, API_KEY};
use crate::replay::recordings::{ANTHROPIC_TEXT, OPENAI_TEXT};
use crate::replay::server::{Reply, Server};

async fn sent_to_anthropic(model: &str, conversation: &Conversation) -> Value {
    let server = Server::start(vec![Reply::sse(ANTHROPIC_TEXT)]).await;
    let model = AnthropicModel::new(
        model,
        AnthropicConfig {
            base_url: server.url.clone(),
            api_key: API_KEY.to_owned(),
            request: quick_retries(0),
        },
    );
    complete(&model, conversation).await.unwrap();
    server.received().remove(0).body
}

async fn sent_to_openai(conversation: &Conversation) -> Value {
    let server = Server::start(vec![Reply::sse(OPENAI_TEXT)]).await;
    complete(&openai(&server, quick_retries(0)), conversation)
        .await
        .unwrap();
    server.received().remove(0).body
}

#[tokio::test]
async fn anthropic_body_for_a_varied_history() {
    let conversation = Conversation::new(varied_history());

    let sent = sent_to_anthropic("claude-sonnet-4-5", &conversation).await;

    assert_body(&sent, include_str!("../bodies/anthropic_varied.json"));
}

#[tokio::test]
async fn anthropic_body_for_a_model_without_images() {
    let conversation = Conversation::new(varied_history());

    let sent = sent_to_anthropic("claude-3-5-haiku-latest", &conversation).await;

    assert_body(
        &sent,
        include_str!("../bodies/anthropic_varied_without_images.json"),
    );
}

#[tokio::test]
async fn anthropic_body_for_an_empty_history() {
    let sent = sent_to_anthropic("claude-sonnet-4-5", &Conversation::new(vec![])).await;

    assert_body(&sent, include_str!("../bodies/anthropic_empty.json"));
}

#[tokio::test]
async fn openai_body_for_a_varied_history() {
    let sent = sent_to_openai(&Conversation::new(varied_history())).await;

    assert_body(&sent, include_str!("../bodies/openai_varied.json"));
}

#[tokio::test]
async fn openai_body_for_an_empty_history() {
    let sent = sent_to_openai(&Conversation::new(vec![])).await;

    assert_body(&sent, include_str!("../bodies/openai_empty.json"));
}
