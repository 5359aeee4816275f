//! Spawn, report and close across threads; parallel dispatched calls.

use std::time::Duration;

use crate::harness::stack;
use infinity_agent_core::state::ThreadStatus;

const SCRIPT: &str = r#"
rules:
  - thread: child
    when: "Your task: nap"
    reply:
      tool_calls: [{name: sleep, args: {seconds: 3600}}]
  - thread: child
    when: "Your task: (\\w+)[\\s\\S]*Your thread ID is ([A-Za-z0-9_-]+)\\."
    reply:
      tool_calls:
        - {name: report_to_parent, args: {report: "$1 done"}}
  - thread: child
    when: "report_to_parent .* -> Report delivered"
    reply: {text: "reported"}
  - thread: child
    scope: all
    when: "Your thread ID is ([A-Za-z0-9_-]+)\\.[\\s\\S]*time to stop"
    reply:
      tool_calls: [{name: close_thread, args: {thread_id: "$1", report_to_parent: "stopped"}}]
  - thread: root
    when: "^nappers$"
    reply:
      tool_calls:
        - {name: spawn_thread, args: {instructions: "nap", child_of: "${stack}"}}
        - {name: spawn_thread, args: {instructions: "nap", child_of: "${stack}"}}
  - thread: root
    when: "^go$"
    reply:
      tool_calls:
        - {name: spawn_thread, args: {instructions: "alpha", child_of: "${stack}"}}
        - {name: spawn_thread, args: {instructions: "beta", child_of: "${stack}"}}
  - thread: root
    when: "^stop (\\S+) (\\S+)$"
    reply:
      tool_calls:
        - {name: send_message_to_child, args: {thread_id: "$1", message: "time to stop"}}
        - {name: send_message_to_child, args: {thread_id: "$2", message: "time to stop"}}
  - thread: root
    when: "send_message_to_child .* -> Message delivered[\\s\\S]*send_message_to_child .* -> Message delivered"
    reply: {text: "both told"}
  - thread: root
    when: "Final report"
    reply: {text: "a child stopped"}
  - thread: root
    when: "Report from child thread"
    reply: {text: "noted"}
  - thread: root
    reply: {text: "ok"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_report_and_close_across_threads() {
    let Some(s) = stack(SCRIPT).await else {
        return;
    };
    s.enqueue_message("boss", "go").await;
    s.run_until(Duration::from_secs(60), "both reports arrive", || async {
        let h = s.stored_history("boss").await;
        h.iter()
            .filter(|l| l.contains("Report from child thread"))
            .count()
            == 2
    })
    .await;
    let record = s.record("boss").await.unwrap();
    assert_eq!(record.children.len(), 2);
    let a = record.children[0].thread_id.to_string();
    let b = record.children[1].thread_id.to_string();
    let history = s.stored_history("boss").await;
    assert!(
        history.iter().any(|l| l.contains("alpha done"))
            && history.iter().any(|l| l.contains("beta done"))
    );

    // Two dispatched calls in one turn: the next completion waits for both results.
    s.enqueue_message("boss", &format!("stop {a} {b}")).await;
    s.run_until(Duration::from_secs(60), "both children closed", || async {
        let (ra, rb) = (s.record(&a).await.unwrap(), s.record(&b).await.unwrap());
        ra.status == ThreadStatus::Closed && rb.status == ThreadStatus::Closed
    })
    .await;
    s.run_until(Duration::from_secs(30), "the parent heard", || {
        s.stored_history_has("boss", "Final report from child thread")
    })
    .await;
    let history = s.stored_history("boss").await;
    let told = history
        .iter()
        .filter(|l| l.contains("assistant: both told"))
        .count();
    assert_eq!(told, 1, "{history:#?}");
    let last_call = history
        .iter()
        .rposition(|l| l.contains("send_message_to_child {"))
        .unwrap();
    let answer = history
        .iter()
        .position(|l| l.contains("assistant: both told"))
        .unwrap();
    let results_between = history[last_call..answer]
        .iter()
        .filter(|l| l.starts_with("result send_message_to_child"))
        .count();
    assert_eq!(results_between, 2, "{history:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_root_closes_its_whole_tree() {
    let Some(s) = stack(SCRIPT).await else {
        return;
    };
    s.enqueue_message("den", "nappers").await;
    s.run_until(Duration::from_secs(60), "both children sleep", || async {
        let Some(root) = s.record("den").await else {
            return false;
        };
        let mut sleeping = 0;
        for c in &root.children {
            let child = s.record(c.thread_id.as_str()).await;
            if child.is_some_and(|r| r.next_due().is_some()) {
                sleeping += 1;
            }
        }
        sleeping == 2
    })
    .await;
    let children: Vec<String> = s
        .record("den")
        .await
        .unwrap()
        .children
        .iter()
        .map(|c| c.thread_id.to_string())
        .collect();

    let close = infinity_agent_core::input::Input::new(
        crate::harness::tid("den"),
        infinity_agent_core::input::InputBody::Close {},
    );
    s.send(&close).await;
    s.run_until(Duration::from_secs(60), "the whole tree closed", || async {
        let mut all = vec!["den".to_owned()];
        all.extend(children.iter().cloned());
        for id in &all {
            let record = s.record(id).await.unwrap();
            if record.status != ThreadStatus::Closed || !record.pending_calls.is_empty() {
                return false;
            }
        }
        true
    })
    .await;
}
