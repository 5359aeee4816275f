//! A crash between the commit and the effects loses nothing: the outbox is performed on the
//! next start, and receivers deduplicate what was already delivered.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use crate::harness::{assert_in_order, start_time, tid, Setup};
use infinity_agent_core::agent::{Agent, Limits};
use infinity_agent_core::effect::Effect;
use infinity_agent_core::engine::{run_slice, SliceRequest};
use infinity_agent_core::input::Input;
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::store::{FileStore, ThreadStore};
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
    let agent = Agent {
        name: "tester".into(),
        system_prompt: String::new(),
        model: Arc::new(model),
        tools: Arc::new(ToolRegistry::with_builtins()),
        limits: Limits::default(),
        tool_servers: Vec::new(),
    };
    let agents: HashMap<String, Arc<Agent>> = [("tester".to_owned(), Arc::new(agent))].into();
    let input = Input::user_message(tid("main"), "spawn");
    let outcome = run_slice(SliceRequest {
        thread_id: tid("main"),
        record: None,
        view: &[],
        inputs: vec![input.clone()],
        already_processed: HashSet::new(),
        agents: &agents,
        default_agent: Some("tester"),
        now: start_time(),
        conversation: None,
        session_toolset: None,
        live: None,
    })
    .await
    .unwrap();
    let commit = outcome.commit.unwrap();
    assert!(commit
        .effects
        .iter()
        .any(|e| matches!(&e.effect, Effect::Send { .. })));
    store.commit(&commit).await.unwrap();
    // The host "crashes" here: the child seed was committed to the outbox, never sent.
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
