//! Tool calls: ids, names and arguments assembled from streamed pieces.

use infinity_agent_core::model::{ModelToolCall, StopReason};
use serde_json::{json, Value};

use crate::replay::fixtures::{anthropic, complete, openai, quick_retries, usage, Conversation};
use crate::replay::recordings::{
    ANTHROPIC_TOOL_CALL, ANTHROPIC_TOOL_CALLS, OPENAI_TOOL_CALL, OPENAI_TOOL_CALLS,
};
use crate::replay::server::{Reply, Server};

fn tool_call(id: &str, name: &str, args: Value) -> ModelToolCall {
    ModelToolCall {
        id: Some(id.into()),
        name: name.into(),
        args,
    }
}

/// The three calls of the "several tool calls" recordings, with the given ids.
fn three_calls(ids: [&str; 3]) -> Vec<ModelToolCall> {
    vec![
        tool_call(ids[0], "get_weather", json!({"city": "Paris"})),
        tool_call(ids[1], "current_time", json!({})),
        tool_call(
            ids[2],
            "search",
            json!({"query": "Oslo forecast", "limit": 3, "filters": {"sites": ["yr.no"]}}),
        ),
    ]
}

#[tokio::test]
async fn anthropic_one_tool_call() {
    let server = Server::start(vec![Reply::sse(ANTHROPIC_TOOL_CALL)]).await;
    let model = anthropic(&server, quick_retries(2));

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text.as_deref(), Some("Let me check."));
    assert_eq!(
        completion.tool_calls,
        vec![tool_call(
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "get_weather",
            json!({"city": "Paris", "unit": "celsius"})
        )]
    );
    assert_eq!(completion.stop_reason, StopReason::ToolUse);
    assert_eq!(completion.usage, usage(472, 89, 0, 0));
}

#[tokio::test]
async fn anthropic_several_tool_calls() {
    let server = Server::start(vec![Reply::sse(ANTHROPIC_TOOL_CALLS)]).await;
    let model = anthropic(&server, quick_retries(2));

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text, None);
    assert_eq!(
        completion.tool_calls,
        three_calls(["toolu_01Paris", "toolu_02Time", "toolu_03Search"])
    );
    assert_eq!(completion.stop_reason, StopReason::ToolUse);
    assert_eq!(completion.usage, usage(512, 120, 2048, 0));
}

#[tokio::test]
async fn openai_one_tool_call() {
    let server = Server::start(vec![Reply::sse(OPENAI_TOOL_CALL)]).await;
    let model = openai(&server, quick_retries(2));

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text, None);
    assert_eq!(
        completion.tool_calls,
        vec![tool_call(
            "call_DdmO9pD3xa9XTPNJ32zg2hcA",
            "get_weather",
            json!({"city": "Paris", "unit": "celsius"})
        )]
    );
    assert_eq!(completion.stop_reason, StopReason::ToolUse);
    assert_eq!(completion.usage, usage(472, 21, 0, 0));
}

#[tokio::test]
async fn openai_several_tool_calls() {
    let server = Server::start(vec![Reply::sse(OPENAI_TOOL_CALLS)]).await;
    let model = openai(&server, quick_retries(2));

    let completion = complete(&model, &Conversation::hello()).await.unwrap();

    assert_eq!(completion.text, None);
    assert_eq!(
        completion.tool_calls,
        three_calls(["call_paris", "call_time", "call_search"])
    );
    assert_eq!(completion.stop_reason, StopReason::ToolUse);
    assert_eq!(completion.usage, usage(512, 64, 2048, 0));
}
