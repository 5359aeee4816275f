//! Subscriptions: bookkeeping, associative and threaded events, final events, cancellation.

use crate::behaviour::harness::{assert_in_order, start, tid, Harness};
use infinity_agent_core::effect::Notification;
use infinity_agent_core::ids::CallId;
use infinity_agent_core::input::InputBody;

const SCRIPT: &str = r#"
rules:
  - thread: child
    when: "Price tick: (\\S+)[\\s\\S]*Your thread ID is ([A-Za-z0-9_-]+)\\."
    reply:
      text: "Handling tick $1"
      tool_calls: [{name: close_thread, args: {thread_id: "$2", report_to_parent: "tick $1 handled"}}]
  - thread: root
    when: "^watch$"
    reply:
      tool_calls: [{name: watch, args: {q: "prices"}}]
  - thread: root
    when: "^stop (\\S+)$"
    reply:
      tool_calls: [{name: cancel_subscription, args: {tool_call_id: "$1"}}]
  - thread: root
    when: "cancel_subscription .* -> Subscription \\S+ cancelled"
    reply: {text: "Stopped."}
  - thread: root
    when: "(?i)cancel_subscription .* -> Error"
    reply: {text: "Cancel failed."}
  - thread: root
    when: "watch .* -> subscribed"
    reply: {text: "Watching."}
  - thread: root
    when: "Price alert: (.*)"
    reply: {text: "Noted alert $1"}
  - thread: root
    when: "Final report from child thread ([A-Za-z0-9_-]+).*: (.*)"
    reply: {text: "Child said: $2"}
"#;

/// Starts a subscription and returns its call id.
async fn subscribe(h: &mut Harness) -> CallId {
    h.say("main", "watch").await;
    let call = h.dispatcher.invocations.lock().unwrap()[0].call_id.clone();
    h.send(
        "main",
        InputBody::ToolResult {
            call_id: call.clone(),
            text: "subscribed".into(),
            is_error: false,
            subscription: true,
            images: Vec::new(),
            display_as: Vec::new(),
        },
    )
    .await;
    call
}

fn event(call: &CallId, text: &str, associative: bool, is_final: bool) -> InputBody {
    InputBody::SubscriptionEvent {
        call_id: call.clone(),
        text: text.into(),
        associative,
        is_final,
    }
}

#[tokio::test(start_paused = true)]
async fn subscription_is_recorded_and_cancel_removes_it_and_notifies() {
    let mut h = start(SCRIPT).await;
    let call = subscribe(&mut h).await;
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(record.subscriptions.len(), 1);
    assert_eq!(record.subscriptions[0].call_id, call);
    assert_in_order(
        &h.lines("main"),
        &["result watch: subscribed", "assistant: Watching."],
    );

    h.say("main", &format!("stop {call}")).await;
    assert_in_order(
        &h.lines("main"),
        &[
            &format!("result cancel_subscription: Subscription {call} cancelled."),
            "assistant: Stopped.",
        ],
    );
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(record.subscriptions.is_empty());
    let notes = h.dispatcher.notifications.lock().unwrap().clone();
    assert!(
        notes.iter().any(|n| matches!(n, Notification::CancelToolCall { call_id, tool, .. } if *call_id == call && tool == "watch")),
        "{notes:?}"
    );
    // Events for the cancelled subscription are dropped.
    let before = h.history("main").await;
    h.send("main", event(&call, "Price alert: late", true, false))
        .await;
    assert_eq!(h.history("main").await, before);
    // Cancelling it again is an error result naming what is active.
    h.say("main", &format!("stop {call}")).await;
    assert_in_order(
        &h.lines("main"),
        &[
            "error cancel_subscription: Error:",
            "is not an active subscription of this thread; active: none",
            "assistant: Cancel failed.",
        ],
    );
}

#[tokio::test(start_paused = true)]
async fn associative_events_are_injected_inline() {
    let mut h = start(SCRIPT).await;
    let call = subscribe(&mut h).await;
    h.send("main", event(&call, "Price alert: 42", true, false))
        .await;
    let history = h.history("main").await;
    assert_in_order(
        &history,
        &[
            &format!("synthetic:  receive_event__injected {{\"original_args\":{{\"q\":\"prices\"}},\"original_tool_call_id\":\"{call}\",\"original_tool_name\":\"watch\"}}"),
            "result receive_event__injected: Price alert: 42",
            "assistant: Noted alert 42",
        ],
    );
    assert!(h.children("main").is_empty());
}

#[tokio::test(start_paused = true)]
async fn threaded_events_run_in_a_spawned_child_and_final_removes_the_subscription() {
    let mut h = start(SCRIPT).await;
    let call = subscribe(&mut h).await;
    h.send("main", event(&call, "Price tick: 7", false, true))
        .await;
    let children = h.children("main");
    assert_eq!(children.len(), 1);
    let child = &children[0];
    let child_history = h.history(child).await;
    assert_in_order(
        &child_history,
        &[
            "result receive_event__injected: Price tick: 7",
            "This was the subscription's final event",
            &format!("Your thread ID is {child}."),
            "assistant: Handling tick 7",
        ],
    );
    assert_in_order(
        &h.lines("main"),
        &[
            &format!("spawned {child}"),
            "assistant: Child said: tick 7 handled",
        ],
    );
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(
        record.subscriptions.is_empty(),
        "final event removes the subscription"
    );
    // The parent's own history has no entry for the threaded event itself.
    assert!(!h
        .history("main")
        .await
        .iter()
        .any(|l| l.contains("Price tick")));
}
