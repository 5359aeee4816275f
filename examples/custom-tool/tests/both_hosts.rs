//! The example's tools on the embedded runtime (a real `AgentSystem`, time paused so the pause
//! passes at once), and registered by the Lambda assembly from the same agent file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed step should stop the test

use std::path::Path;

use infinity_agent_core::agent::AgentFile;
use infinity_agent_core::effect::OutputKind;
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::runtime::{AgentSystem, AgentSystemBuilder, Front};

fn agent_file() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("agent.yaml")
}

async fn system() -> AgentSystem {
    let file = AgentFile::load(&agent_file()).unwrap();
    let agent = infinity_models::load_agent(&file, Default::default())
        .await
        .unwrap();
    let mut builder = AgentSystemBuilder::new()
        .with_agent(agent)
        .with_tokio_sleep_tools();
    for tool in custom_tool_example::tools() {
        builder = builder.with_tool(tool);
    }
    builder.build().await.unwrap()
}

fn texts(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<infinity_agent_core::effect::OutputEvent>,
) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(event) = events.try_recv() {
        match event.kind {
            OutputKind::AssistantText { text } => out.push(text),
            OutputKind::ToolResult { name, text, .. } => out.push(format!("{name} -> {text}")),
            OutputKind::Sleeping { .. } => out.push("sleeping".into()),
            _ => {}
        }
    }
    out
}

#[tokio::test(start_paused = true)]
async fn the_sync_tool_answers_and_the_passive_one_sleeps_until_its_timer() {
    let system = system().await;
    let mut events = system.subscribe();
    let thread = ThreadId::new("t").unwrap();
    system
        .post_user_message(&thread, "count: the quick brown fox".into())
        .await
        .unwrap();
    system.wait_idle(None).await;
    assert_eq!(
        texts(&mut events),
        ["word_count -> 4 words", "That is 4 words."]
    );

    system
        .post_user_message(&thread, "pause 1".into())
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    system.wait_idle(None).await;
    // The thread slept for the minute (paused time runs the timer), then resumed.
    assert!(started.elapsed() >= std::time::Duration::from_secs(60));
    let seen = texts(&mut events);
    assert_eq!(seen[..2], ["Pausing.", "sleeping"], "{seen:#?}");
    assert!(seen[2].starts_with("pause -> Slept until"), "{seen:#?}");
    assert_eq!(seen[3], "Back from the pause.");
}

#[tokio::test]
async fn the_lambda_assembly_offers_the_same_tools() {
    // What the agent Lambda builds at cold start, from the same file and tools.
    std::env::remove_var("INFINITY_AGENT_YAML");
    std::env::set_var("INFINITY_AGENT_FILE", agent_file());
    let mut lambda = infinity_aws::lambda::AgentLambda::new();
    for tool in custom_tool_example::tools() {
        lambda = lambda.with_tool(tool);
    }
    let agent = lambda.agent_from_env().await.unwrap();
    let names: Vec<&str> = agent
        .tools
        .specs()
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    for name in ["word_count", "pause", "set_title", "sleep"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    // A tool whose name clashes with a built-in one is refused, naming it.
    let clash = infinity_aws::lambda::AgentLambda::new()
        .with_tool(std::sync::Arc::new(Clash))
        .agent_from_env()
        .await
        .unwrap_err();
    assert!(clash.to_string().contains("sleep"), "{clash}");
}

#[derive(Debug)]
struct Clash;

impl infinity_agent_core::tools::Tool for Clash {
    fn spec(&self) -> infinity_agent_core::model::ToolSpec {
        infinity_agent_core::model::ToolSpec::new(
            "sleep",
            "Not the built-in sleep.",
            serde_json::json!({"type": "object"}),
        )
    }

    fn call(
        &self,
        _: &serde_json::Value,
        _: &mut infinity_agent_core::tools::ToolContext<'_>,
    ) -> infinity_agent_core::tools::ToolOutcome {
        infinity_agent_core::tools::ToolOutcome::ok("")
    }
}
