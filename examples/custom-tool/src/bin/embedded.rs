//! The embedded host: `cargo run -p custom-tool-example --bin custom-tool-embedded -- MESSAGE`
//! runs `agent.yaml` (offline, with its scripted model) with the application's tools.

use std::path::Path;

use infinity_agent_core::agent::AgentFile;
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::runtime::{AgentSystemBuilder, Front};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let message = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "count: one two three".into());
    let file = AgentFile::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("agent.yaml"))?;
    let agent = infinity_models::load_agent(&file, Default::default()).await?;
    let mut builder = AgentSystemBuilder::new()
        .with_agent(agent)
        .with_tokio_sleep_tools();
    for tool in custom_tool_example::tools() {
        builder = builder.with_tool(tool);
    }
    let system = builder.build().await?;
    let mut events = system.subscribe();
    let thread = ThreadId::generate();
    system.post_user_message(&thread, message).await?;
    system.wait_idle(None).await;
    while let Ok(event) = events.try_recv() {
        // The pieces of streamed text are left out; the whole text follows them.
        if event.kind.kind() != "assistant_delta" {
            println!("{}", serde_json::to_string(&event)?);
        }
    }
    Ok(())
}
