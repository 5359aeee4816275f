//! `run`, the `infinity mcp-bridge` command, serving a stdio MCP server.

use crate::support;

use std::time::Duration;

use infinity_mcp_bridge::test_server::NOTE_VARIABLE;
use infinity_mcp_bridge::{run, BridgeArgs};
use infinity_rap::wire::parse_manifest;
use support::PATIENCE;
use tokio::net::TcpListener;

#[tokio::test]
async fn run_serves_the_toolset_at_the_public_url() {
    // A port that was free a moment ago.
    let probe = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let args = BridgeArgs {
        port,
        host: "127.0.0.1".to_owned(),
        public_url: Some("https://tools.example.com/mcp".to_owned()),
        url: None,
        env: vec![(NOTE_VARIABLE.to_owned(), "Passed on by --env.".to_owned())],
        command: vec![env!("CARGO_BIN_EXE_tiny-mcp-server").to_owned()],
    };
    let running = tokio::spawn(run(args));

    let discovery = format!("http://127.0.0.1:{port}/.well-known/rap-toolset");
    let client = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let body = loop {
        match client.get(&discovery).send().await {
            Ok(response) if response.status().is_success() => {
                break response.bytes().await.unwrap()
            }
            _ if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            outcome => panic!("the bridge did not serve its manifest: {outcome:?}"),
        }
    };
    running.abort();

    let manifest = parse_manifest(&body).unwrap();
    assert_eq!(manifest.name, "tiny-test-server");
    let description = manifest.description.unwrap_or_default();
    assert!(
        description.ends_with("Passed on by --env."),
        "{description}"
    );
    assert_eq!(manifest.endpoint, "https://tools.example.com/mcp/invoke");
    assert_eq!(manifest.tools.len(), 4);
}
