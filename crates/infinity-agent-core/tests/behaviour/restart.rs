//! The file store carries threads, children and pending timers across a restart.

use std::sync::Arc;

use crate::behaviour::harness::{assert_in_order, start_time, tid, Setup};
use infinity_agent_core::runtime::WaitOutcome;
use infinity_agent_core::state::ThreadStatus;
use infinity_agent_core::store::FileStore;
use jiff::{SignedDuration, ToSpan};

const SCRIPT: &str = r#"
rules:
  - thread: child
    when: "Your task: nap long"
    reply:
      tool_calls: [{name: sleep, args: {seconds: 7200}}]
  - thread: child
    scope: all
    when: "Your thread ID is ([A-Za-z0-9_-]+)\\.[\\s\\S]*-> Slept until"
    reply:
      tool_calls: [{name: close_thread, args: {thread_id: "$1", report_to_parent: "child woke"}}]
  - thread: root
    when: "^nap$"
    reply:
      tool_calls:
        - {name: spawn_thread, args: {instructions: "nap long", child_of: "${stack}"}}
        - {name: sleep, args: {seconds: 3600}}
  - thread: root
    when: "Final report from child thread .*: (.*)"
    reply: {text: "Child says: $1"}
  - thread: root
    when: "-> Slept until"
    reply: {text: "root woke"}
"#;

#[tokio::test(start_paused = true)]
async fn restart_mid_sleep_resumes_threads_children_and_timers() {
    let dir = tempfile::tempdir().unwrap();
    let child;
    {
        let mut setup = Setup::new(SCRIPT);
        setup.store = Some(Arc::new(FileStore::open(dir.path()).unwrap()));
        let mut h = setup.start().await;
        h.system
            .send_user_message(&tid("main"), "nap")
            .await
            .unwrap();
        let outcome = h.run_for(60).await;
        assert!(
            matches!(
                outcome,
                WaitOutcome::Idle {
                    next_timer: Some(_)
                }
            ),
            "{outcome:?}"
        );
        child = h.children("main").pop().unwrap();
        let root = h.system.record(&tid("main")).await.unwrap().unwrap();
        assert_eq!(root.pending_calls.len(), 1);
        assert_eq!(h.system.timers().unwrap().pending(), 2);
        // The process stops here: everything in memory is dropped.
    }

    // 90 minutes later: the root's 1 h sleep fell due while stopped, the child's 2 h has not.
    let mut setup = Setup::new(SCRIPT);
    setup.store = Some(Arc::new(FileStore::open(dir.path()).unwrap()));
    let restart_at = start_time()
        .checked_add(SignedDuration::from_mins(90))
        .unwrap();
    setup.clock_start = restart_at;
    let mut h = setup.start().await;
    let outcome = h.run_for(60).await;
    assert!(
        matches!(
            outcome,
            WaitOutcome::Idle {
                next_timer: Some(_)
            }
        ),
        "{outcome:?}"
    );
    assert_in_order(
        &h.lines("main"),
        &["result sleep: Slept until", "assistant: root woke"],
    );
    assert!(
        h.lines(&child).is_empty(),
        "the child's timer is not due yet"
    );

    h.settle().await;
    assert_in_order(
        &h.lines(&child),
        &["result sleep: Slept until", "call close_thread", "closed"],
    );
    assert_in_order(&h.lines("main"), &["assistant: Child says: child woke"]);
    // It woke at its due time (2 h after the first start), not at the restart.
    let child_view = h.system.view(&tid(&child)).await.unwrap();
    let woke = child_view
        .iter()
        .rev()
        .find(|e| crate::behaviour::harness::item_line(&e.item).starts_with("result sleep"))
        .unwrap()
        .at;
    let due = start_time().checked_add(2.hours()).unwrap();
    assert!(
        woke.duration_since(due).as_secs().abs() < 60,
        "woke at {woke}, due {due}"
    );
    let record = h.system.record(&tid(&child)).await.unwrap().unwrap();
    assert_eq!(record.status, ThreadStatus::Closed);
    // Nothing is left in any outbox.
    assert!(h.system.store().outbox().await.unwrap().is_empty());

    // And a third start finds the same state and nothing to do.
    drop(h);
    let store = FileStore::open(dir.path()).unwrap();
    let again = infinity_agent_core::store::ThreadStore::load_record(&store, &tid(&child))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again, record);
}
