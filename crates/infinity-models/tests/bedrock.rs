//! The Bedrock Converse adapter against a local HTTP server speaking Converse's JSON.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed step should stop the test

mod common;

use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use infinity_agent_core::history::{HistoryEntry, HistoryView, Item, ToolCall};
use infinity_agent_core::ids::{CallId, ThreadId};
use infinity_agent_core::model::{
    CompletionRequest, ModelError, ModelProvider, StopReason, ToolSpec,
};
use infinity_models::bedrock::BedrockModel;
use serde_json::{json, Value};

#[derive(Clone, Default)]
struct Seen {
    bodies: Arc<Mutex<Vec<(String, Value)>>>,
}

async fn serve(reply: (u16, Vec<(&'static str, &'static str)>, Value)) -> (String, Seen) {
    let seen = Seen::default();
    let app = Router::new()
        .route(
            "/model/{id}/converse",
            post(
                move |State(seen): State<Seen>, Path(id): Path<String>, body: String| {
                    let reply = reply.clone();
                    async move {
                        seen.bodies
                            .lock()
                            .unwrap()
                            .push((id, serde_json::from_str(&body).unwrap()));
                        let mut headers = HeaderMap::new();
                        for (k, v) in reply.1 {
                            headers.insert(k, v.parse().unwrap());
                        }
                        (
                            StatusCode::from_u16(reply.0).unwrap(),
                            headers,
                            reply.2.to_string(),
                        )
                            .into_response()
                    }
                },
            ),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

async fn model(url: &str) -> BedrockModel {
    let config = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(aws_sdk_bedrockruntime::config::BehaviorVersion::latest())
        .region(aws_sdk_bedrockruntime::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_bedrockruntime::config::Credentials::new(
            "AKID", "SECRET", None, None, "test",
        ))
        .endpoint_url(url)
        .retry_config(aws_sdk_bedrockruntime::config::retry::RetryConfig::disabled())
        .build();
    BedrockModel::new(
        "anthropic.claude-sonnet-4-5-v1:0",
        aws_sdk_bedrockruntime::Client::from_conf(config),
    )
}

fn entry(item: Item) -> Arc<HistoryEntry> {
    Arc::new(HistoryEntry {
        seq: 0,
        at: jiff::Timestamp::UNIX_EPOCH,
        input_id: None,
        item,
    })
}

async fn ask(
    m: &BedrockModel,
    history: &[Arc<HistoryEntry>],
) -> Result<infinity_agent_core::model::Completion, ModelError> {
    let id = ThreadId::new("t").unwrap();
    let stack = [id.clone()];
    let tools = [ToolSpec {
        name: "lookup".into(),
        description: "Look something up.".into(),
        input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    }];
    m.complete(CompletionRequest {
        thread_id: &id,
        is_root: true,
        stack: &stack,
        system: "Be brief.",
        tools: &tools,
        history: HistoryView::from_slice(history),
    })
    .await
}

fn conversation() -> Vec<Arc<HistoryEntry>> {
    let call = ToolCall {
        id: CallId::new("tooluse_1").unwrap(),
        name: "lookup".into(),
        args: json!({"q": "x", "n": 2}),
    };
    vec![
        entry(Item::user("find x")),
        entry(Item::Assistant {
            text: Some("Looking.".into()),
            tool_calls: vec![call.clone()],
            synthetic: false,
        }),
        entry(Item::ToolResult {
            call_id: call.id,
            name: call.name,
            text: "not found".into(),
            is_error: true,
            images: Vec::new(),
            display_as: Vec::new(),
        }),
    ]
}

#[tokio::test]
async fn text_tool_calls_usage_and_the_request_shape() {
    let reply = json!({
        "output": {"message": {"role": "assistant", "content": [
            {"text": "Trying again."},
            {"toolUse": {"toolUseId": "tooluse_2", "name": "lookup", "input": {"q": "y", "deep": [1, 2.5]}}}
        ]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 100, "outputTokens": 20, "totalTokens": 120, "cacheReadInputTokens": 80, "cacheWriteInputTokens": 5},
        "metrics": {"latencyMs": 3}
    });
    let (url, seen) = serve((200, vec![], reply)).await;
    let m = model(&url).await;
    let c = ask(&m, &conversation()).await.unwrap();
    assert_eq!(c.text.as_deref(), Some("Trying again."));
    assert_eq!(c.stop_reason, StopReason::ToolUse);
    assert_eq!(c.tool_calls[0].id.as_deref(), Some("tooluse_2"));
    assert_eq!(c.tool_calls[0].args, json!({"q": "y", "deep": [1, 2.5]}));
    assert_eq!(
        (
            c.usage.input_tokens,
            c.usage.output_tokens,
            c.usage.cache_read_tokens,
            c.usage.cache_write_tokens
        ),
        (100, 20, 80, 5)
    );

    let (id, body) = seen.bodies.lock().unwrap()[0].clone();
    assert_eq!(id, "anthropic.claude-sonnet-4-5-v1:0");
    assert_eq!(body["system"][0]["text"], "Be brief.");
    assert!(body["system"][1]["cachePoint"].is_object(), "{body}");
    let tools = body["toolConfig"]["tools"].as_array().unwrap();
    assert_eq!(tools[0]["toolSpec"]["name"], "lookup");
    assert_eq!(
        tools[0]["toolSpec"]["inputSchema"]["json"]["properties"]["q"]["type"],
        "string"
    );
    assert_eq!(
        tools.last().unwrap()["toolSpec"]["name"],
        "receive_event__injected"
    );
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(
        messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["user", "assistant", "user"]
    );
    assert_eq!(
        messages[1]["content"][1]["toolUse"]["toolUseId"],
        "tooluse_1"
    );
    assert_eq!(
        messages[1]["content"][1]["toolUse"]["input"],
        json!({"q": "x", "n": 2})
    );
    assert_eq!(
        messages[2]["content"][0]["toolResult"]["toolUseId"],
        "tooluse_1"
    );
    assert_eq!(messages[2]["content"][0]["toolResult"]["status"], "error");
    assert_eq!(body["inferenceConfig"]["maxTokens"], 16384);
}

#[tokio::test]
async fn max_tokens_is_reported() {
    let reply = json!({
        "output": {"message": {"role": "assistant", "content": [{"text": "cut"}]}},
        "stopReason": "max_tokens",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1}
    });
    let (url, _) = serve((200, vec![], reply)).await;
    let c = ask(&model(&url).await, &conversation()[..1]).await.unwrap();
    assert_eq!(c.stop_reason, StopReason::MaxTokens);
}

#[tokio::test]
async fn validation_errors_are_terminal_and_throttling_is_retryable() {
    let (url, _) = serve((
        400,
        vec![("x-amzn-errortype", "ValidationException")],
        json!({"message": "bad tool schema"}),
    ))
    .await;
    match ask(&model(&url).await, &conversation()[..1]).await {
        Err(ModelError::Terminal(why)) => assert!(
            why.contains("ValidationException") && why.contains("bad tool schema"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    let (url, _) = serve((
        429,
        vec![("x-amzn-errortype", "ThrottlingException")],
        json!({"message": "slow down"}),
    ))
    .await;
    match ask(&model(&url).await, &conversation()[..1]).await {
        Err(ModelError::Retryable(why)) => assert!(why.contains("ThrottlingException"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn missing_credentials_fail_at_once_and_say_so_and_a_dead_endpoint_is_retryable() {
    // No credentials at all: the request cannot be signed, however often it is tried.
    #[derive(Debug)]
    struct None_;
    impl aws_credential_types::provider::ProvideCredentials for None_ {
        fn provide_credentials<'a>(
            &'a self,
        ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            aws_credential_types::provider::future::ProvideCredentials::ready(Err(
                aws_credential_types::provider::error::CredentialsError::not_loaded(
                    "no credentials found in chain",
                ),
            ))
        }
    }
    let config = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(aws_sdk_bedrockruntime::config::BehaviorVersion::latest())
        .region(aws_sdk_bedrockruntime::config::Region::new("us-east-1"))
        .credentials_provider(None_)
        .endpoint_url("http://127.0.0.1:9")
        .retry_config(aws_sdk_bedrockruntime::config::retry::RetryConfig::disabled())
        .build();
    let unsigned = BedrockModel::new("m", aws_sdk_bedrockruntime::Client::from_conf(config));
    match ask(&unsigned, &conversation()[..1]).await {
        Err(ModelError::Terminal(why)) => assert!(
            why.contains("no credentials found") && why.contains("AWS_REGION"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    // Nothing listens there: the network may come back.
    let dead = model("http://127.0.0.1:9").await;
    match ask(&dead, &conversation()[..1]).await {
        Err(ModelError::Retryable(why)) => assert!(why.starts_with("bedrock: "), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_whole_request_for_a_varied_history() {
    // The body is written out in full in tests/bodies/, not produced by the code under test.
    let reply = json!({
        "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1}
    });
    let (url, seen) = serve((200, vec![], reply)).await;
    let history: Vec<_> = common::varied_history().into_iter().map(entry).collect();

    ask(&model(&url).await, &history).await.unwrap();

    let (_, body) = seen.bodies.lock().unwrap()[0].clone();
    common::assert_body(&body, include_str!("bodies/bedrock_varied.json"));
}
