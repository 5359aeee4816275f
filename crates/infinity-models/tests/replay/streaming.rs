//! Text is handed on as it streams, and the pieces add up to the completion's text.

use std::sync::Mutex;

use infinity_agent_core::model::{ModelProvider, Streamed};

use crate::replay::fixtures::{anthropic, openai, quick_retries, Conversation};
use crate::replay::recordings::{ANTHROPIC_TEXT, OPENAI_TEXT, TEXT};
use crate::replay::server::{Reply, Server};

async fn streamed(model: &dyn ModelProvider) -> (Vec<String>, Option<String>) {
    let pieces = Mutex::new(Vec::new());
    let sink = |piece: Streamed<'_>| match piece {
        Streamed::Text(t) => pieces.lock().unwrap().push(t.to_owned()),
        Streamed::Restarted => panic!("nothing broke, yet the stream restarted"),
    };
    let conversation = Conversation::hello();
    let completion = model
        .complete_streaming(conversation.request(), &sink)
        .await
        .unwrap();
    (pieces.into_inner().unwrap(), completion.text)
}

#[tokio::test]
async fn anthropic_streams_text_as_it_arrives() {
    let server = Server::start(vec![Reply::sse(ANTHROPIC_TEXT)]).await;
    let (pieces, text) = streamed(&anthropic(&server, quick_retries(0))).await;
    assert!(pieces.len() > 1, "{pieces:?}");
    assert_eq!(pieces.concat(), TEXT);
    assert_eq!(text.as_deref(), Some(TEXT));
}

#[tokio::test]
async fn openai_streams_text_as_it_arrives() {
    let server = Server::start(vec![Reply::sse(OPENAI_TEXT)]).await;
    let (pieces, text) = streamed(&openai(&server, quick_retries(0))).await;
    assert!(pieces.len() > 1, "{pieces:?}");
    assert_eq!(pieces.concat(), TEXT);
    assert_eq!(text.as_deref(), Some(TEXT));
}
