//! Slices that fit the function's timeout: the handler gets the invocation's deadline, a slice
//! with no time left for a whole completion commits and hands itself on (a `continue` input on
//! the FIFO queue), and the local runner stops an invocation at its timeout the way Lambda
//! does (its messages come back, nothing is lost).

use std::sync::atomic::Ordering;
use std::time::Duration;

use infinity_agent_core::ids::InputId;
use infinity_agent_core::store::ThreadStore;

use crate::harness::{stack_with, tid, Options};

/// Five completions of a second each.
const CHAIN: &str = r#"
rules:
  - when: "^go$"
    reply: {delay_ms: 1000, tool_calls: [{name: set_title, args: {title: "t1"}}]}
  - when: "Title set to \"t1\""
    reply: {delay_ms: 1000, tool_calls: [{name: set_title, args: {title: "t2"}}]}
  - when: "Title set to \"t2\""
    reply: {delay_ms: 1000, tool_calls: [{name: set_title, args: {title: "t3"}}]}
  - when: "Title set to \"t3\""
    reply: {delay_ms: 1000, tool_calls: [{name: set_title, args: {title: "t4"}}]}
  - when: "Title set to \"t4\""
    reply: {delay_ms: 1000, text: "all done"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slice_hands_itself_on_before_the_function_timeout() {
    let Some(mut s) = stack_with(
        CHAIN,
        Options {
            completion_timeout: Some(2),
            ..Options::default()
        },
    )
    .await
    else {
        return;
    };
    // 14 s an invocation, 10 s of it kept for the commit: completions start while 2 s are
    // left of the other 4, so the first slice runs three and hands the rest on.
    s.runner.function_timeout = Duration::from_secs(14);
    s.enqueue_message("deadline", "go").await;
    s.run_until(Duration::from_secs(60), "the answer", || {
        s.stored_history_has("deadline", "assistant: all done")
    })
    .await;
    let history = s.stored_history("deadline").await;
    for title in ["t1", "t2", "t3", "t4"] {
        let calls = history
            .iter()
            .filter(|l| l.contains(&format!("{{\"title\":\"{title}\"}}")))
            .count();
        assert_eq!(calls, 1, "{title} was asked for once: {history:#?}");
    }
    let record = s.record("deadline").await.unwrap();
    assert_eq!(record.usage.completions, 5);
    // The first slice committed version 1 and handed itself on with this input.
    let handed = InputId::derived("deadline", "continue-1");
    let processed = s
        .store()
        .processed(&tid("deadline"), std::slice::from_ref(&handed))
        .await
        .unwrap();
    assert!(processed.contains(&handed), "the hand-off was processed");
    assert_eq!(
        s.runner.timeouts.load(Ordering::SeqCst),
        0,
        "no invocation ran out of time"
    );
    s.dlq_is_empty().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_past_the_function_timeout_is_stopped_and_its_messages_come_back() {
    // A tool server that takes connections and never answers: the conversation's tool discovery
    // hangs past the function's timeout.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let Some(mut s) = stack_with(
        "rules:\n  - reply: {text: ok}\n",
        Options {
            tool_servers: vec![url],
            ..Options::default()
        },
    )
    .await
    else {
        return;
    };
    s.runner.function_timeout = Duration::from_secs(2);
    s.enqueue_message("stuck", "hello").await;
    let started = tokio::time::Instant::now();
    let received = s
        .runner
        .poll_agent_once(Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(received, 1);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the invocation was stopped at its timeout ({:?})",
        started.elapsed()
    );
    assert_eq!(s.runner.timeouts.load(Ordering::SeqCst), 1);
    assert!(s.record("stuck").await.is_none(), "nothing was committed");
    // The message is back on the queue for the next invocation, not lost.
    let back = s
        .clients
        .sqs
        .receive_message()
        .queue_url(&s.config.input_queue_url)
        .wait_time_seconds(2)
        .send()
        .await
        .unwrap();
    assert_eq!(back.messages().len(), 1, "the message came back");
    held.abort();
}
