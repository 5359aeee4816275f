//! Compaction: a thread that outgrows its model's context gets a summary; later completions see
//! the summary and the recent entries; a child spawned earlier keeps what it inherited.

use crate::behaviour::harness::{start, tid};
use infinity_agent_core::history::Item;

const SCRIPT: &str = r#"
context_window: 400
rules:
  - when: "(?m)^Summarize the conversation above"
    reply: {text: "SUMMARY: the user talked about many fruits."}
  - thread: child
    reply: {text: "child ok"}
  - when: "^spawn$"
    reply:
      tool_calls: [{name: spawn_thread, args: {instructions: "wait", child_of: "${stack}"}}]
  - when: "\\A(.*)\\n[\\s\\S]*\\ncheck\\z"
    scope: all
    reply: {text: "first line: $1"}
  - reply: {text: "noted"}
"#;

#[tokio::test(start_paused = true)]
async fn a_long_thread_is_summarized_and_children_keep_their_history() {
    let mut h = start(SCRIPT).await;
    h.say("main", "spawn").await;
    let child = h.children("main").pop().unwrap();
    let child_view_before = h.system.view(&tid(&child)).await.unwrap();

    let fruit = "apples and pears and plums and cherries and quinces, ".repeat(6);
    for i in 0..12 {
        h.say("main", &format!("message {i}: {fruit}")).await;
    }
    let view = h.system.view(&tid("main")).await.unwrap();
    let summaries: Vec<(usize, u64)> = view
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.item {
            Item::Summary { covers, text } => {
                assert_eq!(text, "SUMMARY: the user talked about many fruits.");
                Some((i, *covers))
            }
            _ => None,
        })
        .collect();
    assert!(!summaries.is_empty(), "no summary was made");
    // Each summary covers more than the one before, and never reaches past itself.
    for pair in summaries.windows(2) {
        assert!(pair[1].1 > pair[0].1);
    }
    for (index, covers) in &summaries {
        assert!((*covers as usize) < *index);
    }
    // The prompt stays bounded: the last one is under the window, where without compaction the
    // history alone would be several times larger.
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    let total_chars: usize = view
        .iter()
        .map(|e| match &e.item {
            Item::Message { text, .. } => text.len(),
            _ => 0,
        })
        .sum();
    assert!(
        total_chars / 4 > 400 * 2,
        "the test history is too short to need compaction"
    );
    assert!(
        record.last_prompt_tokens < 400,
        "last prompt {} tokens",
        record.last_prompt_tokens
    );

    // The model sees the summary first.
    h.say("main", "check").await;
    let lines = h.lines("main");
    let reply = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("assistant: first line: "))
        .unwrap();
    assert!(
        reply.starts_with("assistant: first line: [Summary of the earlier conversation"),
        "{reply}"
    );
    // The child spawned before compaction still sees exactly what it inherited.
    let child_view_after = h.system.view(&tid(&child)).await.unwrap();
    assert_eq!(child_view_after, child_view_before);
}
