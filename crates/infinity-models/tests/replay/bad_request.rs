//! A 400 is not retried: one request, a terminal error carrying the provider's message, and no
//! API key anywhere in it.

use infinity_agent_core::model::{ModelError, ModelErrorKind};

use crate::replay::fixtures::{anthropic, complete, openai, quick_retries, Conversation, API_KEY};
use crate::replay::recordings::{
    ANTHROPIC_BAD_REQUEST_BODY, ANTHROPIC_BAD_REQUEST_MESSAGE, ANTHROPIC_TEXT,
    OPENAI_BAD_REQUEST_BODY, OPENAI_BAD_REQUEST_MESSAGE, OPENAI_TEXT,
};
use crate::replay::server::{Reply, Server};

/// The message of a terminal error, checked to keep the key out in every rendering.
fn terminal_message(err: ModelError) -> String {
    for rendering in [err.to_string(), format!("{err:?}")] {
        assert!(!rendering.contains(API_KEY), "the key leaked: {rendering}");
    }
    match err {
        ModelError::Terminal { kind, text } => {
            assert_eq!(kind, ModelErrorKind::Refused, "{text}");
            text
        }
        ModelError::Retryable { text: why, .. } => {
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

/// On the engine: a refused request ends the turn once, with the provider's message in the
/// thread for people to read, and is not asked again on its own; a person's next message asks
/// the model again with the whole history.
#[tokio::test]
async fn a_refused_request_stops_the_thread_with_the_message_until_a_person_goes_on() {
    use infinity_agent_core::agent::AgentSpec;
    use infinity_agent_core::history::Item;
    use infinity_agent_core::ids::ThreadId;
    use infinity_agent_core::runtime::AgentSystemBuilder;

    let server = Server::start(vec![
        Reply::error(400, ANTHROPIC_BAD_REQUEST_BODY),
        Reply::sse(ANTHROPIC_TEXT),
    ])
    .await;
    let model = std::sync::Arc::new(anthropic(&server, quick_retries(3)));
    let system = AgentSystemBuilder::new()
        .with_agent(AgentSpec::new("a", "You help.", model))
        .with_tokio_sleep_tools()
        .build()
        .await
        .unwrap();
    let thread = ThreadId::new("main").unwrap();

    system.send_user_message(&thread, "hi").await.unwrap();
    system.wait_idle(None).await;

    let notices: Vec<String> = system
        .view(&thread)
        .await
        .unwrap()
        .iter()
        .filter_map(|entry| match &entry.item {
            Item::Notice {
                text,
                is_error: true,
            } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].starts_with("Model error (anthropic:claude-sonnet-4-5)")
            && notices[0].contains(ANTHROPIC_BAD_REQUEST_MESSAGE),
        "{notices:?}"
    );
    assert_eq!(server.requests(), 1, "a refused request is not sent again");

    system
        .send_user_message(&thread, "try again")
        .await
        .unwrap();
    system.wait_idle(None).await;

    assert_eq!(server.requests(), 2);
    let history = system.view(&thread).await.unwrap();
    assert!(
        matches!(&history.last().unwrap().item,
            Item::Assistant { text: Some(text), .. } if text == crate::replay::recordings::TEXT),
        "{history:?}"
    );
}
