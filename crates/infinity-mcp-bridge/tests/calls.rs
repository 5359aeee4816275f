//! Calls of bridged MCP tools over real HTTP, each answered by one `tool_result`.

use crate::support;

use infinity_mcp_bridge::test_server::{FAILURE_TEXT, PICTURE_PNG, PICTURE_TEXT};
use infinity_rap::wire::{ContentItem, ImageData};
use serde_json::json;
use support::{bridged_tiny_server, call, error_text};

#[tokio::test]
async fn a_text_result_becomes_text() {
    let (server, sink) = bridged_tiny_server().await;

    let result = call(&server, &sink, "add", json!({"a": 2, "b": 3})).await;

    assert_eq!(result.text.as_deref(), Some("5"));
    assert_eq!(result.content, None);
}

#[tokio::test]
async fn an_mcp_error_result_becomes_an_error_result() {
    let (server, sink) = bridged_tiny_server().await;

    let result = call(&server, &sink, "fail", json!({})).await;

    assert_eq!(error_text(&result), format!("Error: {FAILURE_TEXT}"));
}

#[tokio::test]
async fn images_become_content_items() {
    let (server, sink) = bridged_tiny_server().await;

    let result = call(&server, &sink, "picture", json!({})).await;

    assert_eq!(
        result.content,
        Some(vec![
            ContentItem::Text {
                text: PICTURE_TEXT.to_owned()
            },
            ContentItem::Image(ImageData {
                data: PICTURE_PNG.to_owned(),
                media_type: "image/png".to_owned()
            }),
        ])
    );
}

#[tokio::test]
async fn an_mcp_protocol_error_becomes_an_error_result_naming_it() {
    let (server, sink) = bridged_tiny_server().await;

    let result = call(&server, &sink, "add", json!({"a": "two", "b": 3})).await;

    let text = error_text(&result);
    assert!(
        text.contains("`add`") && text.contains("`a` must be a number"),
        "{text}"
    );
}

#[tokio::test]
async fn an_unknown_operation_gets_the_kits_error_result() {
    let (server, sink) = bridged_tiny_server().await;

    let result = call(&server, &sink, "files.read", json!({})).await;

    let text = error_text(&result);
    assert!(
        text.contains("unknown operation `files.read`") && text.contains("add"),
        "{text}"
    );
}
