//! A crash between the commit and the effects loses nothing: the outbox is performed on the
//! next start, and receivers deduplicate what was already delivered.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::harness::{assert_in_order, start_time, tid, Setup};
use infinity_agent_core::agent::Agent;
use infinity_agent_core::effect::Effect;
use infinity_agent_core::host::{run_slice, HostContext, ModelRetry};
use infinity_agent_core::ids::SeededIds;
use infinity_agent_core::input::Input;
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::store::{FileStore, ThreadStore};
use infinity_agent_core::testing::DeadHost;
use infinity_agent_core::tools::ToolRegistry;

const SCRIPT: &str = r#"
rules:
  - thread: child
    when: "Your thread ID is ([A-Za-z0-9_-]+)\\."
    reply:
      tool_calls: [{name: close_thread, args: {thread_id: "$1", report_to_parent: "child ran"}}]
  - thread: root
    when: "^spawn$"
    reply:
      tool_calls: [{name: spawn_thread, args: {instructions: "run once", child_of: "${stack}"}}]
  - thread: root
    when: "Final report from child thread .*: (.*)"
    reply: {text: "parent heard: $1"}
  - thread: root
    reply: {text: "ok"}
"#;

#[tokio::test(start_paused = true)]
async fn effects_committed_but_not_performed_are_performed_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    let model = ScriptedModel::parse(SCRIPT, Path::new("s.yaml")).unwrap();
    let agent = Agent::new("tester", "", Arc::new(model), ToolRegistry::with_builtins());
    let agents: HashMap<String, Arc<Agent>> = [("tester".to_owned(), Arc::new(agent))].into();
    let input = Input::user_message(tid("main"), "spawn");
    let host = HostContext {
        store: &store,
        agents: &agents,
        default_agent: Some("tester"),
        discovery: None,
        effects: &DeadHost,
        live: None,
        model_retry: ModelRetry::default(),
        library: None,
    };
    // The host "crashes" right after the commit: the child seed is in the outbox, never sent.
    let report = run_slice(
        &host,
        &tid("main"),
        vec![input.clone()],
        start_time(),
        &mut SeededIds::new(1),
    )
    .await
    .unwrap();
    assert!(report.effects.is_err());
    let outbox = store.outbox().await.unwrap();
    assert!(outbox
        .iter()
        .any(|(_, e)| matches!(&e.effect, Effect::Send { .. })));
    drop(store);

    let mut setup = Setup::new(SCRIPT);
    setup.store = Some(Arc::new(FileStore::open(dir.path()).unwrap()));
    let mut h = setup.start().await;
    // The redelivered user message is a no-op; the outbox flush spawns the child.
    h.system.send(input);
    h.settle().await;
    let children = h
        .system
        .record(&tid("main"))
        .await
        .unwrap()
        .unwrap()
        .children;
    assert_eq!(children.len(), 1);
    let child = children[0].thread_id.to_string();
    assert_in_order(&h.lines(&child), &["call close_thread", "closed"]);
    assert_in_order(&h.lines("main"), &["assistant: parent heard: child ran"]);
    let history = h.history("main").await;
    assert_eq!(
        history
            .iter()
            .filter(|l| l.as_str() == "message: spawn")
            .count(),
        1
    );
    assert!(h.system.store().outbox().await.unwrap().is_empty());
}
