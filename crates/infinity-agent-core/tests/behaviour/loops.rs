//! Hallucinated calls cost one extra completion; runaway loops are bounded.

use crate::behaviour::harness::{assert_in_order, count, start, Setup};
use infinity_agent_core::agent::Limits;

#[tokio::test(start_paused = true)]
async fn unknown_tool_and_bad_arguments_loop_back_with_errors() {
    let script = r#"
rules:
  - when: "^go$"
    reply:
      tool_calls:
        - {name: teleport, args: {to: mars}}
        - {name: sleep, args: {seconds: "soon"}}
        - {name: receive_event__injected, args: {}}
  - when: "teleport"
    reply: {text: "I see my mistakes."}
"#;
    let mut h = start(script).await;
    h.say("main", "go").await;
    let lines = h.lines("main");
    assert_in_order(
        &lines,
        &[
            "error teleport: Error: there is no tool named `teleport`. Available tools: sleep, sleep_until",
            "error sleep: Error: invalid arguments for `sleep`:",
            "error receive_event__injected: Error: `receive_event__injected` is reserved",
            "assistant: I see my mistakes.",
        ],
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("error sleep:") && l.contains("\"soon\"")),
        "{lines:#?}"
    );
    let record = h
        .system
        .record(&crate::behaviour::harness::tid("main"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.usage.completions, 2);
    assert!(record.pending_calls.is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_loop_bound_ends_a_runaway_loop_with_a_recorded_error() {
    let script = r#"
rules:
  - reply:
      tool_calls: [{name: set_title, args: {title: "again"}}]
"#;
    let mut setup = Setup::new(script);
    setup.limits = Limits {
        max_completions_per_slice: 3,
        ..Limits::default()
    };
    let mut h = setup.start().await;
    h.say("main", "go").await;
    let lines = h.lines("main");
    assert_eq!(count(&lines, "call set_title"), 3);
    assert_in_order(&lines, &["ERROR Stopped after 3 completions in one slice"]);
    let history = h.history("main").await;
    assert!(
        history
            .last()
            .unwrap()
            .starts_with("notice: Stopped after 3 completions"),
        "{history:#?}"
    );
    // The thread is not stuck: the next input runs again (and stops again at the bound).
    h.say("main", "go on").await;
    assert_eq!(count(&h.lines("main"), "call set_title"), 6);
}

#[tokio::test(start_paused = true)]
async fn no_matching_script_rule_is_a_clear_recorded_error() {
    let mut h = start("rules:\n  - when: '^only this$'\n    reply: {text: x}\n").await;
    h.say("main", "something else").await;
    assert_in_order(&h.lines("main"), &["ERROR Model error (script:test.script.yaml): script:test.script.yaml: no rule matched the text \"something else\""]);
}
