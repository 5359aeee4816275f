//! The `memory` internal tools: notes shared by a conversation's threads.

use crate::behaviour::harness::{assert_in_order, start, tid};

const SCRIPT: &str = r#"
rules:
  - thread: child
    when: "Your thread ID is"
    reply:
      tool_calls:
        - {name: memory_get, args: {key: venue}}
        - {name: memory_set, args: {key: cake, value: chocolate}}
  - thread: child
    when: "memory_set"
    reply: {text: "child noted"}
  - thread: root
    when: "^start$"
    reply:
      tool_calls:
        - {name: memory_set, args: {key: venue, value: boathouse}}
        - {name: memory_get, args: {key: nothing-here}}
        - {name: spawn_thread, args: {instructions: "help", child_of: "${stack}"}}
  - thread: root
    when: "^all$"
    reply:
      tool_calls: [{name: memory_getall}]
  - thread: root
    when: "^huge$"
    reply:
      tool_calls: [{name: memory_set, args: {key: big, value: "$HUGE"}}]
  - reply: {text: "ok"}
"#;

#[tokio::test(start_paused = true)]
async fn root_and_children_share_notes() {
    let script = SCRIPT.replace("$HUGE", &"x".repeat(10_001));
    let mut h = start(&script).await;
    h.say("main", "start").await;
    assert_in_order(
        &h.lines("main"),
        &[
            "result memory_set: Stored `venue`.",
            "result memory_get: There is no note under `nothing-here`.",
        ],
    );
    let child = h.children("main").pop().unwrap();
    // The child reads the root's note and writes one of its own.
    assert_in_order(
        &h.lines(&child),
        &[
            "result memory_get: boathouse",
            "result memory_set: Stored `cake`.",
            "assistant: child noted",
        ],
    );
    // The child's note reached the root's record, durably.
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(
        record.conversation.memory.get("cake").map(String::as_str),
        Some("chocolate")
    );
    h.say("main", "all").await;
    let lines = h.lines("main");
    let all = lines
        .iter()
        .find(|l| l.starts_with("result memory_getall"))
        .unwrap();
    assert!(
        all.contains("\"cake\": \"chocolate\"") && all.contains("\"venue\": \"boathouse\""),
        "{all}"
    );
    // Sizes are bounded, with a clear message.
    h.say("main", "huge").await;
    assert_in_order(&h.lines("main"), &["error memory_set: Error: the value is 10001 characters; the most a note holds is 10000."]);
}
