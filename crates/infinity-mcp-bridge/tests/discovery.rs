//! The manifest of a bridged MCP server: its tools, named, described and typed as MCP says.

use crate::support;

use infinity_mcp_bridge::Bridge;
use infinity_rap::kit::testing::LocalServer;
use infinity_rap::wire::parse_manifest;
use serde_json::json;
use support::tiny_stdio_server;

#[tokio::test]
async fn the_manifest_lists_the_mcp_tools_with_their_schemas() {
    let bridge = Bridge::connect(tiny_stdio_server()).await.unwrap();
    let server = LocalServer::start(bridge.tool_server()).await.unwrap();

    let manifest = parse_manifest(&server.discover().await.unwrap()).unwrap();

    assert_eq!(manifest.name, "tiny-test-server");
    let description = manifest.description.as_deref().unwrap();
    assert!(
        description.contains("tiny test server 0.1.0") && description.contains("for tests"),
        "{description}"
    );
    assert_eq!(manifest.endpoint, format!("{}/invoke", server.base_url()));
    // Three pages of two tools: every page was read; `files.read` is no RAP name.
    let names: Vec<&str> = manifest
        .tools
        .iter()
        .map(|tool| tool.name.as_str())
        .collect();
    assert_eq!(names, ["add", "fail", "picture", "slow"]);

    let add = manifest.tool("add").unwrap();
    assert_eq!(add.description, "Adds two numbers");
    assert_eq!(
        add.input_schema,
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "number", "description": "The first number"},
                "b": {"type": "number", "description": "The second number"}
            },
            "required": ["a", "b"]
        })
    );
    let no_arguments = json!({"type": "object", "additionalProperties": false});
    let fail = manifest.tool("fail").unwrap();
    assert_eq!(
        fail.description,
        "The `fail` tool of the MCP server `tiny-test-server`."
    );
    assert_eq!(fail.input_schema, no_arguments);
    assert_eq!(manifest.tool("picture").unwrap().input_schema, no_arguments);
}
