//! What the bridge's tests share: the tiny MCP server and ways to read callbacks.
#![allow(dead_code)] // each test file uses some of it

use std::time::Duration;

use infinity_mcp_bridge::{Bridge, McpSource};
use infinity_rap::kit::testing::{invocation, CallbackSink, LocalServer};
use infinity_rap::wire::{Callback, ToolResult};
use serde_json::Value;

/// Long enough for anything that should happen to happen.
pub const PATIENCE: Duration = Duration::from_secs(10);
/// How long to watch for something that should not happen.
pub const QUIET: Duration = Duration::from_millis(500);

/// The tiny MCP server of `test_server`, started over stdio.
pub fn tiny_stdio_server() -> McpSource {
    McpSource::stdio(env!("CARGO_BIN_EXE_tiny-mcp-server"), [])
}

/// A bridge to the tiny server over stdio, served in-process, and a callback sink.
pub async fn bridged_tiny_server() -> (LocalServer, CallbackSink) {
    let bridge = Bridge::connect(tiny_stdio_server()).await.unwrap();
    let server = LocalServer::start(bridge.tool_server()).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();
    (server, sink)
}

/// Invokes `operation` with `arguments` as the call `call_1` of `thread_1`, and returns the
/// one callback that answers it, a `tool_result`.
pub async fn call(
    server: &LocalServer,
    sink: &CallbackSink,
    operation: &str,
    arguments: Value,
) -> ToolResult {
    let body = invocation(operation, arguments, "thread_1", "call_1", sink.url());
    assert_eq!(server.invoke(&body).await.unwrap(), 200);
    let callbacks = sink.wait_for(1, PATIENCE).await;
    assert_eq!(callbacks.len(), 1, "{callbacks:?}");
    let Callback::ToolResult(result) = &callbacks[0] else {
        panic!("expected a tool_result, got {:?}", callbacks[0]);
    };
    assert_eq!(
        (result.group_id.as_str(), result.id.as_str()),
        ("thread_1", "call_1")
    );
    result.clone()
}

/// The text of an error result, after checking it is one.
pub fn error_text(result: &ToolResult) -> &str {
    assert!(result.content.is_none(), "{result:?}");
    let text = result.text.as_deref().unwrap();
    assert!(text.starts_with("Error"), "{text}");
    text
}
