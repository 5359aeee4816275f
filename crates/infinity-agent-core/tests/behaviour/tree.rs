//! Whole-tree control: a person closes or interrupts a thread and every thread below it follows;
//! nothing under a closed thread keeps running, and a crash in the middle of the cascade does
//! not stop it.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use crate::behaviour::harness::{assert_in_order, start, tid, Setup};
use infinity_agent_core::agent::Agent;
use infinity_agent_core::effect::Notification;
use infinity_agent_core::host::{run_slice, HostContext, MODEL_RETRY};
use infinity_agent_core::ids::{SeededIds, ThreadId};
use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::runtime::Front;
use infinity_agent_core::runtime::PostError;
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::state::ThreadStatus;
use infinity_agent_core::store::{MemoryStore, ThreadStore};
use infinity_agent_core::testing::DeadHost;
use infinity_agent_core::tools::ToolRegistry;

const SCRIPT: &str = r#"
rules:
  - thread: child
    when: "Your task: middle"
    reply:
      tool_calls:
        - {name: spawn_thread, args: {instructions: "bottom", child_of: "${stack}"}}
        - {name: lookup, args: {q: "middle"}}
  - thread: child
    when: "Your task: bottom"
    reply:
      tool_calls:
        - {name: watch, args: {q: "bottom"}}
        - {name: sleep, args: {seconds: 3600}}
  - thread: root
    when: "^family$"
    reply:
      tool_calls:
        - {name: spawn_thread, args: {instructions: "middle", child_of: "${stack}"}}
        - {name: lookup, args: {q: "top"}}
  - reply: {text: "ok"}
"#;

/// Every thread of the tree under `root`, root first.
async fn tree(store: &dyn ThreadStore, root: &str) -> Vec<ThreadId> {
    let mut ids = vec![tid(root)];
    let mut at = 0;
    while at < ids.len() {
        let record = store.load_record(&ids[at]).await.unwrap().unwrap();
        ids.extend(record.children.iter().map(|c| c.thread_id.clone()));
        at += 1;
    }
    ids
}

/// Builds the three-level tree (each thread with a call in flight, the bottom one also a
/// sleep) and returns its thread ids, root first.
async fn family(h: &mut crate::behaviour::harness::Harness) -> Vec<ThreadId> {
    h.system
        .send_user_message(&tid("top"), "family")
        .await
        .unwrap();
    h.run_for(60).await;
    let ids = tree(h.system.store().as_ref(), "top").await;
    assert_eq!(ids.len(), 3, "{ids:?}");
    for id in &ids {
        let record = h.system.record(id).await.unwrap().unwrap();
        assert!(
            !record.pending_calls.is_empty(),
            "{id} has nothing in flight"
        );
    }
    ids
}

fn cancelled(h: &crate::behaviour::harness::Harness) -> BTreeSet<String> {
    h.dispatcher
        .notifications
        .lock()
        .unwrap()
        .iter()
        .filter_map(|n| match n {
            Notification::CancelToolCall {
                thread_id, tool, ..
            } => Some(format!("{thread_id} {tool}")),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn closing_a_thread_closes_everything_below_it() {
    let mut h = start(SCRIPT).await;
    let ids = family(&mut h).await;

    // Not by accident: a thread with open children is closed only when asked for the tree.
    let err = h.system.close(&tid("top"), false).await.unwrap_err();
    assert!(matches!(&err, PostError::OpenChildren { children, .. } if children == &ids[1..2]));
    assert!(
        err.to_string().contains("closing it closes them too"),
        "{err}"
    );

    h.system.close(&tid("top"), true).await.unwrap();
    h.run_for(60).await;
    for id in &ids {
        let record = h.system.record(id).await.unwrap().unwrap();
        assert_eq!(record.status, ThreadStatus::Closed, "{id} is still open");
        assert!(
            record.pending_calls.is_empty(),
            "{id}: {:?}",
            record.pending_calls
        );
        assert!(record.subscriptions.is_empty());
    }
    // Every call in flight was cancelled at its server, and every thread's servers were told
    // it closed.
    assert_eq!(
        cancelled(&h),
        BTreeSet::from([
            format!("{} lookup", ids[0]),
            format!("{} lookup", ids[1]),
            format!("{} watch", ids[2]),
        ])
    );
    let closed: BTreeSet<String> = h
        .dispatcher
        .notifications
        .lock()
        .unwrap()
        .iter()
        .filter_map(|n| match n {
            Notification::CloseThread { thread_id, .. } => Some(thread_id.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(closed, ids.iter().map(ToString::to_string).collect());
    // The bottom thread's hour-long sleep comes to nothing: it is dropped, not run.
    h.run_for(7_200).await;
    let bottom = h.lines(ids[2].as_str());
    assert!(
        !bottom.iter().any(|l| l.contains("Slept until")),
        "{bottom:#?}"
    );
    // Closed means closed.
    assert!(matches!(
        h.system.close(&tid("top"), true).await,
        Err(PostError::Closed(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn closing_a_middle_thread_reports_to_its_parent_and_interrupting_reaches_the_bottom() {
    let mut h = start(SCRIPT).await;
    let ids = family(&mut h).await;

    // Interrupting the tree cancels every call in flight and leaves every thread open.
    h.system.interrupt(&tid("top"), true).await.unwrap();
    h.run_for(60).await;
    assert_eq!(cancelled(&h).len(), 3, "{:?}", cancelled(&h));
    for id in &ids {
        let record = h.system.record(id).await.unwrap().unwrap();
        assert_eq!(record.status, ThreadStatus::Open);
        assert!(
            record.pending_calls.is_empty(),
            "{id}: {:?}",
            record.pending_calls
        );
    }

    // Closing the middle thread closes the bottom one; the top one hears of it and stays open.
    h.system.close(&ids[1], true).await.unwrap();
    h.run_for(60).await;
    let status = |id: &ThreadId| {
        let system = h.system.clone();
        let id = id.clone();
        async move { system.record(&id).await.unwrap().unwrap().status }
    };
    assert_eq!(status(&ids[0]).await, ThreadStatus::Open);
    assert_eq!(status(&ids[1]).await, ThreadStatus::Closed);
    assert_eq!(status(&ids[2]).await, ThreadStatus::Closed);
    let top = h.system.record(&ids[0]).await.unwrap().unwrap();
    assert!(top.children.iter().all(|c| c.closed));
    assert_in_order(
        &h.history("top").await,
        &[&format!(
            "Final report from child thread {} (the child has shut down): A person closed this thread.",
            ids[1]
        )],
    );
}

#[tokio::test(start_paused = true)]
async fn a_cascade_cut_short_by_a_crash_finishes_after_the_restart() {
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let mut setup = Setup::new(SCRIPT);
    setup.store = Some(Arc::clone(&store));
    let mut h = setup.start().await;
    let ids = family(&mut h).await;

    // A host closes the root and dies right after its commit: the children's close requests
    // are in the root's outbox, never sent.
    let model = ScriptedModel::parse(SCRIPT, Path::new("s.yaml")).unwrap();
    let agent = Agent::new("tester", "", Arc::new(model), ToolRegistry::with_builtins());
    let agents: HashMap<String, Arc<Agent>> = [("tester".to_owned(), Arc::new(agent))].into();
    let host = HostContext {
        store: store.as_ref(),
        agents: &agents,
        default_agent: Some("tester"),
        discovery: None,
        effects: &DeadHost,
        live: None,
        model_retry: MODEL_RETRY,
        budget: None,
        library: None,
    };
    let close = Input::new(tid("top"), InputBody::Close {});
    let report = run_slice(
        &host,
        &tid("top"),
        vec![close],
        h.now(),
        &mut SeededIds::new(7),
    )
    .await
    .unwrap();
    assert!(report.effects.is_err());
    assert_eq!(
        store.load_record(&ids[1]).await.unwrap().unwrap().status,
        ThreadStatus::Open
    );

    // The next start performs the outbox: the cascade goes on to the bottom.
    let mut setup = Setup::new(SCRIPT);
    setup.store = Some(Arc::clone(&store));
    let mut h = setup.start().await;
    h.run_for(60).await;
    for id in &ids {
        let record = store.load_record(id).await.unwrap().unwrap();
        assert_eq!(record.status, ThreadStatus::Closed, "{id} is still open");
        assert!(record.pending_calls.is_empty());
    }
}
