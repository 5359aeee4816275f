//! The bridge over MCP's Streamable HTTP transport, to the tiny server served in-process.

use crate::support;

use std::sync::Arc;

use infinity_mcp_bridge::test_server::TinyServer;
use infinity_mcp_bridge::{Bridge, McpSource};
use infinity_rap::kit::testing::{invocation, CallbackSink, LocalServer};
use infinity_rap::wire::parse_manifest;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use support::{call, PATIENCE, QUIET};
use tokio::net::TcpListener;

/// Serves `server` over Streamable HTTP on a free port of 127.0.0.1; its MCP endpoint.
async fn serve_over_http(server: TinyServer) -> String {
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}

#[tokio::test]
async fn tools_are_listed_and_called_over_streamable_http() {
    let url = serve_over_http(TinyServer::default()).await;
    let bridge = Bridge::connect(McpSource::http(url)).await.unwrap();
    let server = LocalServer::start(bridge.tool_server()).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();

    let manifest = parse_manifest(&server.discover().await.unwrap()).unwrap();
    assert_eq!(manifest.name, "tiny-test-server");
    assert_eq!(manifest.tools.len(), 4);

    let result = call(&server, &sink, "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(result.text.as_deref(), Some("5"));
}

#[tokio::test]
async fn a_cancelled_call_is_cancelled_at_the_mcp_server() {
    let tiny = TinyServer::default();
    let slow_calls = tiny.slow_calls();
    let url = serve_over_http(tiny).await;
    let bridge = Bridge::connect(McpSource::http(url)).await.unwrap();
    let server = LocalServer::start(bridge.tool_server()).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();

    let body = invocation("slow", json!({}), "thread_1", "call_1", sink.url());
    assert_eq!(server.invoke(&body).await.unwrap(), 200);
    tokio::time::timeout(PATIENCE, slow_calls.started.notified())
        .await
        .expect("the MCP server got the call");
    server.cancel_tool_call("thread_1", "call_1").await.unwrap();

    tokio::time::timeout(PATIENCE, slow_calls.cancelled.notified())
        .await
        .expect("the MCP server saw the cancellation");
    assert!(sink.wait_for(1, QUIET).await.is_empty());
}
