//! One real completion per provider, to catch what a replay cannot (a changed API, a retired
//! model id). Each test skips, without touching the network, when its provider's key is not set.

use std::sync::Arc;
use std::time::Duration;

use infinity_agent_core::history::{HistoryEntry, HistoryView, Item};
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::model::{CompletionRequest, ModelProvider};
use infinity_models::anthropic::{AnthropicConfig, AnthropicModel};
use infinity_models::openai::{OpenAiConfig, OpenAiModel};
use infinity_models::transport::RequestPolicy;

/// The value of `name`, unless unset or blank.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A patient policy, but not the default's five minutes per attempt.
fn retry() -> RequestPolicy {
    RequestPolicy {
        timeout: Duration::from_secs(60),
        ..RequestPolicy::default()
    }
}

/// Asks `model` to say pong and returns its text.
async fn ping(model: &dyn ModelProvider) -> String {
    let thread = ThreadId::new("t").unwrap();
    let stack = [thread.clone()];
    let history = [Arc::new(HistoryEntry {
        seq: 0,
        at: jiff::Timestamp::now(),
        input_id: None,
        item: Item::user("Reply with the word pong."),
    })];
    let request = CompletionRequest {
        thread_id: &thread,
        is_root: true,
        lineage: &stack,
        system: "You are a smoke test. Do exactly what the user asks.",
        tools: &[],
        history: HistoryView::from_slice(&history),
    };
    let completion = model.complete(request).await.unwrap();
    eprintln!("{}: {completion:?}", model.name());
    completion.text.unwrap_or_default()
}

#[tokio::test]
async fn anthropic_replies() {
    if env("ANTHROPIC_API_KEY").is_none() {
        eprintln!("skipped: ANTHROPIC_API_KEY is not set");
        return;
    }
    let model_id = env("INFINITY_SMOKE_ANTHROPIC_MODEL")
        .unwrap_or_else(|| "claude-3-5-haiku-latest".to_owned());
    let config = AnthropicConfig {
        request: retry(),
        ..AnthropicConfig::from_env().unwrap()
    };

    let reply = ping(&AnthropicModel::new(&model_id, config)).await;

    assert!(!reply.trim().is_empty(), "an empty reply from {model_id}");
}

#[tokio::test]
async fn openai_replies() {
    if env("OPENAI_API_KEY").is_none() {
        eprintln!("skipped: OPENAI_API_KEY is not set");
        return;
    }
    let model_id = env("INFINITY_SMOKE_OPENAI_MODEL").unwrap_or_else(|| "gpt-4.1-mini".to_owned());
    let config = OpenAiConfig {
        request: retry(),
        ..OpenAiConfig::from_env().unwrap()
    };

    let reply = ping(&OpenAiModel::new(&model_id, config)).await;

    assert!(!reply.trim().is_empty(), "an empty reply from {model_id}");
}
