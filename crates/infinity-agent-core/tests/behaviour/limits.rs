//! Limits that hold across slices: a loop that ends a slice at every turn (a child reporting to
//! its parent for ever) is stopped by its hourly completions, visibly, and resumes when written
//! to; a conversation that starts too many threads is refused more.

use crate::behaviour::harness::{assert_in_order, count, tid, Setup};
use infinity_agent_core::agent::Limits;

const SCRIPT: &str = r#"
rules:
  - thread: child
    reply:
      tool_calls: [{name: report_to_parent, args: {report: "still going"}}]
  - when: "^start$"
    reply:
      tool_calls: [{name: spawn_thread, args: {instructions: "report for ever", child_of: "${stack}"}}]
  - when: "^spawn (\\d+)$"
    reply:
      tool_calls:
        - {name: spawn_thread, args: {instructions: "one", child_of: "${stack}"}}
        - {name: spawn_thread, args: {instructions: "two", child_of: "${stack}"}}
        - {name: spawn_thread, args: {instructions: "three", child_of: "${stack}"}}
  - reply: {text: "noted"}
"#;

/// The script with ten completions per thread and hour.
async fn ten_an_hour() -> crate::behaviour::harness::Harness {
    let mut setup = Setup::new(SCRIPT);
    setup.limits = Limits {
        completions_per_hour: 10,
        ..Limits::default()
    };
    setup.start().await
}

#[tokio::test(start_paused = true)]
async fn a_child_reporting_in_a_loop_is_stopped_and_everyone_sees_why() {
    let mut h = ten_an_hour().await;
    h.say("main", "start").await;
    let child = h.children("main").pop().unwrap();
    let record = h.system.record(&tid(&child)).await.unwrap().unwrap();
    // It ran its ten completions of the hour and stopped, though no slice ran more than one.
    assert_eq!(record.usage.completions, 10);
    let suspended = record.suspended.clone().expect("the child is suspended");
    assert!(
        suspended.reason.contains("limits.completions_per_hour"),
        "{suspended:?}"
    );
    // The user sees the error, and the parent is told.
    let child_lines = h.lines(&child);
    assert_in_order(
        &child_lines,
        &["ERROR Stopped: this thread ran 10 completions this hour"],
    );
    let main_lines = h.lines("main");
    assert!(
        count(&main_lines, "Report from child thread") >= 1,
        "{main_lines:#?}"
    );
    assert_in_order(
        &main_lines,
        &["[stopped by a limit] this thread ran 10 completions"],
    );
    // Inputs still arrive and are kept; nothing runs. A message from a person resumes it with
    // a fresh hour.
    h.say(&child, "you may go on").await;
    let record = h.system.record(&tid(&child)).await.unwrap().unwrap();
    assert_eq!(record.usage.completions, 20, "ten more, then stopped again");
    assert!(record.suspended.is_some());
}

#[tokio::test(start_paused = true)]
async fn the_limits_hold_per_hour_on_the_clock() {
    let mut h = ten_an_hour().await;
    h.say("main", "start").await;
    let child = h.children("main").pop().unwrap();
    let before = h.system.record(&tid(&child)).await.unwrap().unwrap();
    assert!(before.suspended.is_some());
    // A later hour does not lift a suspension by itself: a person decides.
    tokio::time::advance(std::time::Duration::from_secs(2 * 3600)).await;
    h.settle().await;
    let after = h.system.record(&tid(&child)).await.unwrap().unwrap();
    assert_eq!(after.usage.completions, before.usage.completions);
}

#[tokio::test(start_paused = true)]
async fn a_conversation_starts_only_so_many_threads_an_hour() {
    let quiet_children = SCRIPT.replace(
        "tool_calls: [{name: report_to_parent, args: {report: \"still going\"}}]",
        "text: done",
    );
    let mut setup = Setup::new(&quiet_children);
    setup.limits = Limits {
        conversation_threads_per_hour: 4,
        ..Limits::default()
    };
    let mut h = setup.start().await;
    h.say("main", "spawn 1").await;
    h.say("main", "spawn 2").await;
    assert_eq!(h.children("main").len(), 4);
    assert_in_order(
        &h.lines("main"),
        &["error spawn_thread: Error: this conversation has started as many threads this hour"],
    );
    let root = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(root.conversation.hourly.threads, 4);
}
