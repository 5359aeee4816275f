//! The tiny MCP server of `infinity_mcp_bridge::test_server`, over stdio, for tests.

use infinity_mcp_bridge::test_server::TinyServer;
use rmcp::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let session = TinyServer::default()
        .serve(rmcp::transport::stdio())
        .await?;
    session.waiting().await?;
    Ok(())
}
