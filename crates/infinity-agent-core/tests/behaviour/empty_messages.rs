//! A message with no text never reaches the model: the front doors refuse it with an error
//! naming the problem, and one that comes another way (a raw input on a queue) is dropped with
//! an error on the thread.

use crate::behaviour::harness::{start, tid};
use infinity_agent_core::input::InputBody;
use infinity_agent_core::runtime::PostError;

const SCRIPT: &str = "rules:\n  - reply: {text: \"answered\"}\n";

#[tokio::test(start_paused = true)]
async fn a_blank_message_is_refused_at_the_door_and_dropped_past_it() {
    let mut h = start(SCRIPT).await;
    for blank in ["", "   ", "\n\t \u{200B}"] {
        let refused = h.system.send_user_message(&tid("main"), blank).await;
        assert!(
            matches!(refused, Err(PostError::EmptyMessage(ref t)) if *t == tid("main")),
            "{blank:?}: {refused:?}"
        );
    }
    h.settle().await;
    assert!(h.system.record(&tid("main")).await.unwrap().is_none());

    // Past the door (a raw input, as `aws sqs send-message` would put it on the queue).
    h.say("main", "hello").await;
    h.send(
        "main",
        InputBody::UserMessage {
            text: " \n ".into(),
            agent: None,
            while_busy: None,
        },
    )
    .await;
    let lines = h.lines("main");
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("assistant:")).count(),
        1,
        "the blank message got no answer: {lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("A message with no text")),
        "{lines:#?}"
    );
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(record.usage.completions, 1);
}
