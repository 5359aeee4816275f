//! The `plan` internal tools, and the rules for internal tool names.

use std::sync::Arc;

use crate::behaviour::harness::{assert_in_order, start, tid, Setup};
use infinity_agent_core::agent::AgentSpec;
use infinity_agent_core::runtime::{AgentSystemBuilder, BuildError};
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::state::StepStatus;
use infinity_agent_core::testing::DispatchedTool;
use infinity_agent_core::tools::internal::InternalTools;
use infinity_agent_core::tools::RegistryError;

const SCRIPT: &str = r#"
rules:
  - when: "^plan$"
    reply:
      tool_calls: [{name: plan_create, args: {steps: ["Find a venue", "Send invitations", "Order cake"]}}]
  - when: "plan_create .* -> Plan created"
    reply:
      tool_calls:
        - {name: plan_update, args: {step: 1, status: completed}}
        - {name: plan_update, args: {step: 2, status: in_progress}}
        - {name: plan_update, args: {step: 3, status: failed}}
        - {name: plan_update, args: {step: 9, status: completed}}
        - {name: plan_update, args: {step: 1, status: done}}
  - when: "plan_update"
    reply:
      tool_calls: [{name: plan_load}]
  - when: "plan_load \\{\\} -> ([\\s\\S]*)"
    reply: {text: "Plan now: $1"}
  - reply: {text: "ok"}
"#;

#[tokio::test(start_paused = true)]
async fn a_plan_is_created_updated_and_loaded() {
    let mut h = start(SCRIPT).await;
    h.say("main", "plan").await;
    let lines = h.lines("main");
    assert_in_order(
        &lines,
        &[
            "result plan_create: Plan created:",
            "[ ] 1. Find a venue",
            "result plan_update: Plan updated:",
            "error plan_update: Error: the plan has steps 1 to 3; there is no step 9.",
            "error plan_update: Error: invalid arguments for `plan_update`",
            "result plan_load: [x] 1. Find a venue\n[/] 2. Send invitations\n[!] 3. Order cake",
            "assistant: Plan now: [x] 1. Find a venue",
        ],
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("plan [x] 1. Find a venue | [/] 2. Send invitations")),
        "{lines:#?}"
    );
    // The plan is durable on the thread's record.
    let plan = h
        .system
        .record(&tid("main"))
        .await
        .unwrap()
        .unwrap()
        .plan
        .unwrap();
    let statuses: Vec<StepStatus> = plan.steps.iter().map(|s| s.status).collect();
    assert_eq!(
        statuses,
        [
            StepStatus::Completed,
            StepStatus::InProgress,
            StepStatus::Failed
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn plan_update_without_a_plan_is_an_error_and_off_means_absent() {
    let mut h = start("rules:\n  - when: '^go$'\n    reply: {tool_calls: [{name: plan_update, args: {step: 1, status: completed}}]}\n  - reply: {text: ok}\n").await;
    h.say("main", "go").await;
    assert_in_order(
        &h.lines("main"),
        &["error plan_update: Error: there is no plan yet"],
    );

    let mut setup = Setup::new(SCRIPT);
    setup.internal_tools = InternalTools::builder().plan(false).build();
    let mut h = setup.start().await;
    h.say("main", "plan").await;
    assert_in_order(
        &h.lines("main"),
        &["error plan_create: Error: there is no tool named `plan_create`"],
    );
}

#[tokio::test]
async fn an_application_tool_may_not_take_an_enabled_internal_tool_name() {
    let model = Arc::new(
        ScriptedModel::parse(
            "rules:\n  - reply: {text: ok}\n",
            std::path::Path::new("s.yaml"),
        )
        .unwrap(),
    );
    let clash = AgentSystemBuilder::new()
        .with_agent(AgentSpec::new("a", "", model.clone()))
        .with_tool(Arc::new(DispatchedTool("plan_create")))
        .with_tokio_sleep_tools()
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(
            &clash,
            BuildError::Tool(RegistryError::ClashesWithInternal { flag: "plan", .. })
        ),
        "{clash}"
    );
    assert!(
        clash.to_string().contains("internal_tools: {plan: false}"),
        "{clash}"
    );
    // With the category off, the name is free.
    let mut spec = AgentSpec::new("a", "", model);
    spec.internal_tools = InternalTools::builder().plan(false).build();
    AgentSystemBuilder::new()
        .with_agent(spec)
        .with_tool(Arc::new(DispatchedTool("plan_create")))
        .with_tokio_sleep_tools()
        .build()
        .await
        .unwrap();
}
