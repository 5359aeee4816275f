//! A bridge started inside a host process with `serve_in_background`, reached over HTTP.

use crate::support;

use infinity_mcp_bridge::{serve_in_background, BridgeError, McpSource};
use infinity_rap::kit::testing::{invocation, CallbackSink};
use infinity_rap::wire::{parse_manifest, Callback};
use serde_json::json;
use support::{tiny_stdio_server, PATIENCE};
use tokio::net::TcpListener;

#[tokio::test]
async fn the_base_url_serves_the_toolset() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();

    let base_url = serve_in_background(tiny_stdio_server(), listener)
        .await
        .unwrap();

    assert_eq!(base_url, format!("http://{address}"));
    let client = reqwest::Client::new();
    let body = client
        .get(format!("{base_url}/.well-known/rap-toolset"))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let manifest = parse_manifest(&body).unwrap();
    assert_eq!(manifest.endpoint, format!("{base_url}/invoke"));

    let sink = CallbackSink::start().await.unwrap();
    let call = invocation(
        "add",
        json!({"a": 2, "b": 3}),
        "thread_1",
        "call_1",
        sink.url(),
    );
    let status = client
        .post(&manifest.endpoint)
        .json(&call)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
    let callbacks = sink.wait_for(1, PATIENCE).await;
    let Some(Callback::ToolResult(result)) = callbacks.first() else {
        panic!("expected a tool_result, got {callbacks:?}");
    };
    assert_eq!(result.text.as_deref(), Some("5"));
}

#[tokio::test]
async fn a_command_that_cannot_start_is_a_terminal_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let source = McpSource::stdio("/nonexistent/mcp-server", ["--stdio".to_owned()]);

    let error = serve_in_background(source, listener).await.unwrap_err();

    assert!(matches!(error, BridgeError::Spawn { .. }), "{error:?}");
    assert!(!error.is_retryable());
    assert!(
        error
            .to_string()
            .contains("`/nonexistent/mcp-server --stdio`"),
        "{error}"
    );
}

#[tokio::test]
async fn a_url_that_is_not_http_is_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();

    let error = serve_in_background(McpSource::http("127.0.0.1:3000/mcp"), listener)
        .await
        .unwrap_err();

    assert!(matches!(error, BridgeError::InvalidUrl { .. }), "{error:?}");
}

#[tokio::test]
async fn an_unreachable_http_server_is_a_retryable_error() {
    // A port that was free a moment ago: nothing listens there.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", closed.local_addr().unwrap());
    drop(closed);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();

    let error = tokio::time::timeout(
        PATIENCE,
        serve_in_background(McpSource::http(url), listener),
    )
    .await
    .expect("the handshake fails in time")
    .unwrap_err();

    assert!(matches!(error, BridgeError::Initialize { .. }), "{error:?}");
    assert!(error.is_retryable());
}
