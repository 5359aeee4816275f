//! spawn_thread, report_to_parent, close_thread, send_message_to_child.

use crate::behaviour::harness::{assert_in_order, count, start, tid};
use infinity_agent_core::state::ThreadStatus;

const SCRIPT: &str = r#"
rules:
  # children
  - thread: child
    when: "Your task: nap ([0-9]+)[\\s\\S]*Your thread ID is"
    reply:
      tool_calls: [{name: sleep, args: {seconds: 30}}]
  - thread: child
    when: "Your task: quick[\\s\\S]*Your thread ID is ([A-Za-z0-9_-]+)\\."
    reply:
      text: "quick child $1"
  - thread: child
    when: "report_to_parent .* -> Report delivered"
    reply:
      text: "reported"
  - thread: child
    scope: all
    when: "Your task: nap[\\s\\S]*Your thread ID is ([A-Za-z0-9_-]+)\\.[\\s\\S]*-> Slept until"
    reply:
      tool_calls:
        - {name: report_to_parent, args: {report: "report from $1"}}
  - thread: child
    scope: all
    when: "Your thread ID is ([A-Za-z0-9_-]+)\\.[\\s\\S]*please close"
    reply:
      tool_calls: [{name: close_thread, args: {thread_id: "$1", report_to_parent: "closing with a final word"}}]
  - thread: child
    when: "hello child"
    reply: {text: "child got the message"}
  # root
  - thread: root
    when: "^two$"
    reply:
      tool_calls:
        - {name: spawn_thread, args: {instructions: "nap 30 then report", child_of: "${stack}"}}
        - {name: spawn_thread, args: {instructions: "nap 30 then report", child_of: "${stack}"}}
  - thread: root
    when: "^one$"
    reply:
      tool_calls:
        - {name: spawn_thread, args: {instructions: "quick job", child_of: "${stack}"}}
  - thread: root
    when: "^wrong$"
    reply:
      tool_calls:
        - {name: spawn_thread, args: {instructions: "quick job", child_of: ["someone-else", "${thread_id}"]}}
  - thread: root
    when: "^tell (\\S+)$"
    reply:
      tool_calls: [{name: send_message_to_child, args: {thread_id: "$1", message: "hello child"}}]
  - thread: root
    when: "^close (\\S+)$"
    reply:
      tool_calls: [{name: close_thread, args: {thread_id: "$1"}}]
  - thread: root
    when: "(Report|report) from child thread"
    reply: {text: "noted"}
  - thread: root
    reply: {text: "ok"}
"#;

#[tokio::test(start_paused = true)]
async fn spawn_with_a_wrong_child_of_is_rejected() {
    let mut h = start(SCRIPT).await;
    h.say("main", "wrong").await;
    let lines = h.lines("main");
    assert_in_order(
        &lines,
        &[
            "call spawn_thread",
            "error spawn_thread: Error: child_of must be your full thread stack",
            "focus on your own task",
            "assistant: ok",
        ],
    );
    assert!(h.children("main").is_empty());
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(record.children.is_empty());
}

#[tokio::test(start_paused = true)]
async fn child_history_is_the_parent_prefix_by_reference() {
    let mut h = start(SCRIPT).await;
    h.say("main", "one").await;
    let child = h.children("main").pop().expect("a child");
    let parent_view = h.system.view(&tid("main")).await.unwrap();
    let child_view = h.system.view(&tid(&child)).await.unwrap();
    let record = h.system.record(&tid(&child)).await.unwrap().unwrap();
    let link = record.parent.clone().unwrap();
    let fork = link.fork_at as usize;
    assert_eq!(link.thread_id.as_str(), "main");
    assert_eq!(record.lineage, vec![tid("main"), tid(&child)]);
    // Inherited: exactly the parent's entries before the spawning turn (its user message),
    // shared, not copied into the child's own history. The child's history starts with that
    // turn holding its own call only (so it never carries its siblings' calls).
    assert_eq!(fork, 1);
    for i in 0..fork {
        assert_eq!(child_view[i], parent_view[i], "entry {i}");
    }
    assert_eq!(record.history_len as usize, child_view.len() - fork);
    let own: Vec<String> = child_view[fork..]
        .iter()
        .map(|e| crate::behaviour::harness::item_line(&e.item))
        .collect();
    assert!(
        own[0].starts_with("assistant: ") && own[0].contains("spawn_thread"),
        "{own:?}"
    );
    assert!(
        own[1].starts_with("result spawn_thread: You are now inside the spawned thread"),
        "{own:?}"
    );
    assert!(
        own[1].ends_with(&format!("Your thread ID is {child}.")),
        "{own:?}"
    );
    assert!(
        own.iter()
            .any(|l| l == &format!("assistant: quick child {child} ")),
        "{own:?}"
    );
    // The parent got the id at once.
    assert_in_order(
        &h.lines("main"),
        &[&format!(
            "result spawn_thread: Child thread spawned with ID: {child}"
        )],
    );
    assert!(child
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
}

#[tokio::test(start_paused = true)]
async fn two_children_run_in_parallel_and_both_reports_reach_the_parent() {
    let mut h = start(SCRIPT).await;
    let before = h.now();
    h.say("main", "two").await;
    let children = h.children("main");
    assert_eq!(children.len(), 2);
    // Each child slept 30 s; in parallel the whole run takes 30 s, not 60 s.
    let took = h.now().duration_since(before).as_secs();
    assert!((30..40).contains(&took), "took {took}s");
    let history = h.history("main").await;
    let spawn_ids: Vec<String> = h
        .log
        .iter()
        .filter(|e| e.thread_id.as_str() == "main")
        .filter_map(|e| match &e.kind {
            infinity_agent_core::effect::OutputKind::ToolCall { name, call_id, .. }
                if name == "spawn_thread" =>
            {
                Some(call_id.to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(spawn_ids.len(), 2);
    for (child, spawn_id) in children.iter().zip(&spawn_ids) {
        // The report arrives as a synthetic call naming the original spawn call.
        let injected = history
            .iter()
            .position(|l| l.contains("receive_event__injected") && l.contains(spawn_id.as_str()))
            .unwrap_or_else(|| panic!("no injected report for {spawn_id}:\n{history:#?}"));
        assert!(history[injected].contains("\"original_tool_name\":\"spawn_thread\""));
        assert!(
            history[injected + 1].contains(&format!(
                "Report from child thread {child}: report from {child}"
            )),
            "{}",
            history[injected + 1]
        );
    }
    // Both children woke at the same instant, so the two reports may share one completion.
    assert!(count(&h.lines("main"), "assistant: noted") >= 1);
}

#[tokio::test(start_paused = true)]
async fn close_with_a_report_and_messages_to_a_closed_thread_are_dropped() {
    let mut h = start(SCRIPT).await;
    h.say("main", "one").await;
    let child = h.children("main").pop().unwrap();
    h.say(&child, "please close").await;
    assert_in_order(&h.lines(&child), &["call close_thread", "closed"]);
    assert_in_order(
        &h.lines("main"),
        &[&format!("result receive_event__injected: Final report from child thread {child} (the child has shut down): closing with a final word"), "assistant: noted"],
    );
    let record = h.system.record(&tid(&child)).await.unwrap().unwrap();
    assert_eq!(record.status, ThreadStatus::Closed);
    let parent = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(parent.children.iter().all(|c| c.closed));
    // A message to the closed thread changes nothing.
    let before = h.history(&child).await;
    let lines_before = h.lines(&child).len();
    h.say(&child, "are you still there?").await;
    assert_eq!(h.history(&child).await, before);
    assert_eq!(h.lines(&child).len(), lines_before);
}

#[tokio::test(start_paused = true)]
async fn parent_closes_a_child() {
    let mut h = start(SCRIPT).await;
    h.say("main", "one").await;
    let child = h.children("main").pop().unwrap();
    h.say("main", &format!("close {child}")).await;
    assert_in_order(&h.lines(&child), &["closed"]);
    assert_in_order(
        &h.lines("main"),
        &[
            "call close_thread",
            &format!("result close_thread: Thread {child} is closed."),
            "assistant: ok",
        ],
    );
}

#[tokio::test(start_paused = true)]
async fn send_message_to_child_reaches_children_only() {
    let mut h = start(SCRIPT).await;
    h.say("main", "one").await;
    let child = h.children("main").pop().unwrap();
    h.say("main", &format!("tell {child}")).await;
    assert_in_order(
        &h.lines(&child),
        &["user: hello child", "assistant: child got the message"],
    );
    assert_in_order(
        &h.lines("main"),
        &[&format!(
            "result send_message_to_child: Message delivered to thread {child}."
        )],
    );
    let history = h.history(&child).await;
    assert!(history.iter().any(|l| l == "message: hello child"));

    h.say("main", "tell not-my-child").await;
    assert_in_order(
        &h.lines("main"),
        &["error send_message_to_child: Error: `not-my-child` is not an open direct child of this thread", "assistant: ok"],
    );
}

#[tokio::test(start_paused = true)]
async fn report_to_parent_from_a_root_thread_is_an_error() {
    let mut h = start(
        "rules:\n  - when: '^go$'\n    reply: {tool_calls: [{name: report_to_parent, args: {report: x}}]}\n  - reply: {text: done}\n",
    )
    .await;
    h.say("main", "go").await;
    assert_in_order(
        &h.lines("main"),
        &[
            "error report_to_parent: Error: this is a root thread",
            "assistant: done",
        ],
    );
}

#[tokio::test(start_paused = true)]
async fn a_wide_fan_out_costs_each_child_only_its_own_call() {
    // One turn spawns forty children. Each child sees the parent's history before that turn,
    // then the turn with its own call only: no sibling calls, no placeholder results for them.
    let calls: Vec<String> = (0..40)
        .map(|i| {
            format!(
                "{{name: spawn_thread, args: {{instructions: \"quick {i}\", child_of: \"${{stack}}\"}}}}"
            )
        })
        .collect();
    let script = format!(
        "rules:\n  - thread: child\n    reply: {{text: done}}\n  - when: \"^fan out$\"\n    reply:\n      tool_calls: [{}]\n  - reply: {{text: ok}}\n",
        calls.join(", ")
    );
    let mut h = start(&script).await;
    h.say("main", "fan out").await;
    let children = h.children("main");
    assert_eq!(children.len(), 40);
    for child in &children {
        let view = h.system.view(&tid(child)).await.unwrap();
        let lines: Vec<String> = view
            .iter()
            .map(|e| crate::behaviour::harness::item_line(&e.item))
            .collect();
        // message, its own spawning turn, its spawn result, its answer
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert_eq!(view[1].item.tool_calls().len(), 1, "{lines:#?}");
        assert!(!lines.iter().any(|l| l.contains("belongs to the parent")));
    }
}
