//! A crash between the commit and the effects loses nothing: the outbox is performed on the
//! next start, and receivers deduplicate what was already delivered.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::behaviour::harness::{assert_in_order, start_time, tid, Setup};
use infinity_agent_core::agent::Agent;
use infinity_agent_core::effect::Effect;
use infinity_agent_core::host::{run_slice, HostContext, MODEL_RETRY};
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
        model_retry: MODEL_RETRY,
        budget: None,
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

const SLOW: &str = "rules:\n  - reply: {text: \"too late\", delay_ms: 600000}\n";
const FAST: &str = "rules:\n  - reply: {text: \"heard\"}\n";

/// One life of a runtime on the store in `dir`: `act` runs on it, then the process "dies"
/// (its tokio runtime is dropped with every task in the middle of what it was doing).
fn life<F, T>(
    dir: &Path,
    script: &str,
    act: impl FnOnce(crate::behaviour::harness::Harness) -> F,
) -> T
where
    F: std::future::Future<Output = T>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = runtime.block_on(async {
        let mut setup = Setup::new(script);
        setup.store = Some(Arc::new(FileStore::open(dir).unwrap()));
        act(setup.start().await).await
    });
    drop(runtime);
    out
}

fn count(history: &[String], line: &str) -> usize {
    history.iter().filter(|l| l.as_str() == line).count()
}

/// Accepted means durable: a message whose door answered is kept before its slice commits, so a
/// crash while the model is still answering loses nothing (for a new thread and an existing
/// one), and it is processed once when the runtime starts again, also when the crash came after
/// its commit but before the inbox let it go.
#[test]
fn a_message_accepted_before_a_crash_is_processed_once_after_it() {
    let dir = tempfile::tempdir().unwrap();
    life(dir.path(), FAST, |mut h| async move {
        h.system
            .send_user_message(&tid("old"), "hello")
            .await
            .unwrap();
        h.settle().await;
    });
    let kept = life(dir.path(), SLOW, |h| async move {
        h.system
            .send_user_message(&tid("old"), "again")
            .await
            .unwrap();
        let kept = h
            .system
            .send_user_message(&tid("new"), "keep me")
            .await
            .unwrap();
        // Both slices are waiting for the model when the process dies.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(h.system.record(&tid("new")).await.unwrap().is_none());
        kept
    });
    let check = |mut h: crate::behaviour::harness::Harness| async move {
        h.settle().await;
        for (thread, message) in [("old", "again"), ("new", "keep me")] {
            let history = h.history(thread).await;
            assert_eq!(
                count(&history, &format!("message: {message}")),
                1,
                "{history:?}"
            );
            assert_in_order(
                &history,
                &[&format!("message: {message}"), "assistant: heard"],
            );
        }
        assert_eq!(count(&h.history("old").await, "message: hello"), 1);
        assert!(h.system.store().inbox().await.unwrap().is_empty());
    };
    life(dir.path(), FAST, check);
    // As if the process died after the thread committed the message, before the inbox let it go.
    life(dir.path(), FAST, |h| async move {
        let mut again = Input::user_message(tid("new"), "keep me");
        again.id = kept;
        h.system.store().accept(&again).await.unwrap();
    });
    life(dir.path(), FAST, check);
}
