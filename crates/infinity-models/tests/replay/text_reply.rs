//! A plain text reply: text, `EndTurn` and usage as the runtime counts it.

use infinity_agent_core::model::StopReason;

use crate::replay::fixtures::{anthropic, complete, openai, quick_retries, usage, Conversation};
use crate::replay::recordings::{ANTHROPIC_TEXT, OPENAI_TEXT, TEXT};
use crate::replay::server::{Reply, Server};

#[tokio::test]
async fn anthropic_text_reply() {
    let server = Server::start(vec![Reply::sse(ANTHROPIC_TEXT)]).await;
    let model = anthropic(&server, quick_retries(2));

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text.as_deref(), Some(TEXT));
    assert!(completion.tool_calls.is_empty());
    assert_eq!(completion.stop_reason, StopReason::EndTurn);
    // input, output (from message_delta), cache read, cache write.
    assert_eq!(completion.usage, usage(25, 15, 3400, 1200));
    assert_eq!(server.requests(), 1);
    assert_eq!(server.received()[0].path, "/v1/messages");
}

#[tokio::test]
async fn openai_text_reply() {
    let server = Server::start(vec![Reply::sse(OPENAI_TEXT)]).await;
    let model = openai(&server, quick_retries(2));

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text.as_deref(), Some(TEXT));
    assert!(completion.tool_calls.is_empty());
    assert_eq!(completion.stop_reason, StopReason::EndTurn);
    // 1500 prompt tokens of which 1280 cached: 220 uncached input, 1280 cache reads.
    assert_eq!(completion.usage, usage(220, 12, 1280, 0));
    assert_eq!(server.requests(), 1);
    assert_eq!(server.received()[0].path, "/v1/chat/completions");
}
