//! Redelivered inputs change nothing; inputs for unknown threads are dropped.

use crate::behaviour::harness::{start, tid};
use infinity_agent_core::input::{Input, InputBody};

const SCRIPT: &str = "rules:\n  - reply: {text: 'hi'}\n";

#[tokio::test(start_paused = true)]
async fn a_duplicate_input_id_is_a_no_op() {
    let mut h = start(SCRIPT).await;
    let input = Input::user_message(tid("main"), "hello");
    h.system.send(input.clone());
    h.settle().await;
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    let history = h.history("main").await;
    assert_eq!(history, vec!["message: hello", "assistant: hi "]);
    // The same input again, twice, separately and in one batch.
    h.system.send(input.clone());
    h.settle().await;
    h.system.send(input.clone());
    h.system.send(input);
    h.settle().await;
    assert_eq!(h.history("main").await, history);
    let again = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(again.version, record.version);
    assert_eq!(again.usage.completions, 1);
}

#[tokio::test(start_paused = true)]
async fn inputs_for_unknown_threads_are_dropped_not_errors() {
    let mut h = start(SCRIPT).await;
    h.send(
        "ghost",
        InputBody::TimerWakeUp {
            call_id: infinity_agent_core::ids::CallId::new("c1").unwrap(),
        },
    )
    .await;
    assert!(h.system.record(&tid("ghost")).await.unwrap().is_none());
    assert!(h.log.iter().all(|e| !matches!(
        e.kind,
        infinity_agent_core::effect::OutputKind::Error { .. }
    )));
}

#[tokio::test(start_paused = true)]
async fn a_result_for_an_unknown_call_is_dropped() {
    let mut h = start(SCRIPT).await;
    h.say("main", "hello").await;
    let before = h.system.record(&tid("main")).await.unwrap().unwrap();
    h.send(
        "main",
        InputBody::ToolResult {
            call_id: infinity_agent_core::ids::CallId::new("never-issued").unwrap(),
            text: "surprise".into(),
            is_error: false,
            subscription: false,
            images: Vec::new(),
            display_as: Vec::new(),
        },
    )
    .await;
    let after = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(after.history_len, before.history_len);
    assert_eq!(after.usage, before.usage);
}
