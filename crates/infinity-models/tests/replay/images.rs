//! Images in tool results: image blocks for models that read images, a text note otherwise.

use infinity_agent_core::history::{Image, Item};
use infinity_models::anthropic::{AnthropicConfig, AnthropicModel};
use infinity_models::openai::{OpenAiConfig, OpenAiModel};
use serde_json::{json, Value};

use crate::replay::fixtures::{assistant, call, quick_retries, Conversation};

/// A request body read back as JSON.
fn body(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

fn with_image() -> Conversation {
    Conversation::new(vec![
        Item::user("What does the chart show?"),
        assistant(
            None,
            vec![call("toolu_1", "get_weather", json!({"city": "Paris"}))],
        ),
        Item::ToolResult {
            call_id: infinity_agent_core::ids::CallId::new("toolu_1").unwrap(),
            name: "get_weather".into(),
            text: "Here is the chart.".into(),
            is_error: false,
            images: vec![Image {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
            }],
            display_as: Vec::new(),
        },
    ])
}

#[test]
fn anthropic_sends_image_blocks_to_models_that_read_images() {
    let server_url = "http://unused".to_owned();
    let model = AnthropicModel::new(
        "claude-sonnet-4-5",
        AnthropicConfig {
            base_url: server_url,
            api_key: "k".into(),
            request: quick_retries(0),
        },
    );
    let conversation = with_image();
    let body = body(&model.request_body(&conversation.request()));
    let result = &body["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(
        result["content"][0],
        json!({"type": "text", "text": "Here is the chart."})
    );
    assert_eq!(
        result["content"][1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}})
    );
}

#[test]
fn models_without_image_support_get_a_placeholder() {
    let model = AnthropicModel::new(
        "claude-3-5-haiku-latest",
        AnthropicConfig {
            base_url: "http://unused".into(),
            api_key: "k".into(),
            request: quick_retries(0),
        },
    );
    let conversation = with_image();
    let body = body(&model.request_body(&conversation.request()));
    let part = &body["messages"][2]["content"][0]["content"][1];
    assert_eq!(part["type"], "text");
    assert!(
        part["text"]
            .as_str()
            .unwrap()
            .starts_with("[image: image/png"),
        "{part}"
    );
}

#[test]
fn openai_tool_messages_carry_a_note_for_each_image() {
    let model = OpenAiModel::new(
        "gpt-4.1-mini",
        OpenAiConfig {
            base_url: "http://unused/v1".into(),
            api_key: None,
            request: quick_retries(0),
        },
    );
    let conversation = with_image();
    let body = body(&model.request_body(&conversation.request()));
    let tool = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let content = tool["content"].as_str().unwrap();
    assert!(
        content.starts_with("Here is the chart.\n[image: image/png"),
        "{content}"
    );
}
