//! `ticker` over real HTTP: the server in-process, a callback sink as the runtime.

use std::time::Duration;

use axum::http::StatusCode;
use infinity_rap::kit::testing::{invocation, CallbackSink, LocalServer};
use infinity_rap::wire::{Callback, SubscriptionEvent, ToolResult};
use rap_example_servers::ticker_server;
use serde_json::{json, Value};

const PATIENCE: Duration = Duration::from_secs(5);

fn tool_result(callback: &Callback) -> &ToolResult {
    match callback {
        Callback::ToolResult(result) => result,
        other => panic!("expected a tool_result, got {other:?}"),
    }
}

fn event(callback: &Callback) -> &SubscriptionEvent {
    match callback {
        Callback::SubscriptionEvent(event) => event,
        other => panic!("expected a subscription_event, got {other:?}"),
    }
}

/// Starts a ticker server and a sink, and invokes `ticker` with `arguments` in `thread_1`.
async fn start_ticker(arguments: Value) -> (LocalServer, CallbackSink) {
    let server = LocalServer::start(ticker_server()).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();
    let body = invocation("ticker", arguments, "thread_1", "call_1", sink.url());
    assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);
    (server, sink)
}

#[tokio::test]
async fn ticker_subscribes_then_sends_count_events_the_last_final() {
    let arguments = json!({"count": 3, "interval_seconds": 0.05, "label": "tea"});
    let (server, sink) = start_ticker(arguments).await;

    let callbacks = sink.wait_for(4, PATIENCE).await;
    assert_eq!(callbacks.len(), 4, "{callbacks:?}");
    let subscribed = tool_result(&callbacks[0]);
    assert!(subscribed.starts_subscription());
    assert_eq!(subscribed.id, "call_1");
    assert_eq!(
        subscribed.text.as_deref(),
        Some("Subscribed: 3 ticks every 0.05 s")
    );
    for (tick, callback) in (1..=3).zip(&callbacks[1..]) {
        let event = event(callback);
        assert_eq!(
            (event.group_id.as_str(), event.tool_call_id.as_str()),
            ("thread_1", "call_1")
        );
        let text: Value = serde_json::from_str(&event.text).unwrap();
        assert_eq!(text, json!({"label": "tea", "tick": tick, "of": 3}));
        assert!(!event.is_associative());
        assert_eq!(event.is_final(), tick == 3, "tick {tick}");
    }

    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(sink.requests(), 4, "nothing after the final event");
    assert!(!server.tool_call_status("thread_1", "call_1").await.unwrap());
}

#[tokio::test]
async fn ticker_events_can_be_associative() {
    let arguments = json!({"count": 1, "interval_seconds": 0.01, "associative": true});
    let (_server, sink) = start_ticker(arguments).await;

    let callbacks = sink.wait_for(2, PATIENCE).await;
    let event = event(&callbacks[1]);
    assert!(event.is_associative() && event.is_final());
    assert_eq!(
        serde_json::from_str::<Value>(&event.text).unwrap(),
        json!({"tick": 1, "of": 1})
    );
}

/// Ticks far enough apart that a cancellation sent right after the first one always comes
/// before the second.
const SLOW_TICKS: f64 = 0.25;

#[tokio::test]
async fn a_cancelled_ticker_sends_nothing_more() {
    let arguments = json!({"count": 10, "interval_seconds": SLOW_TICKS});
    let (server, sink) = start_ticker(arguments).await;
    let callbacks = sink.wait_for(2, PATIENCE).await;
    assert_eq!(
        event(&callbacks[1]).text,
        json!({"tick": 1, "of": 10}).to_string()
    );
    assert!(server.tool_call_status("thread_1", "call_1").await.unwrap());

    let status = server.cancel_tool_call("thread_1", "call_1").await.unwrap();
    assert_eq!(status, StatusCode::OK);

    // Three intervals: a ticker that went on would have sent three more events by now.
    tokio::time::sleep(Duration::from_secs_f64(SLOW_TICKS * 3.0)).await;
    assert_eq!(
        sink.requests(),
        2,
        "callbacks after the cancellation: {:?}",
        sink.accepted()
    );
    assert!(!server.tool_call_status("thread_1", "call_1").await.unwrap());
}

#[tokio::test]
async fn closing_the_thread_stops_the_ticker() {
    let arguments = json!({"count": 10, "interval_seconds": SLOW_TICKS});
    let (server, sink) = start_ticker(arguments).await;
    assert_eq!(sink.wait_for(2, PATIENCE).await.len(), 2);

    assert_eq!(
        server.close_thread("thread_1").await.unwrap(),
        StatusCode::OK
    );

    tokio::time::sleep(Duration::from_secs_f64(SLOW_TICKS * 3.0)).await;
    assert_eq!(
        sink.requests(),
        2,
        "callbacks after the thread closed: {:?}",
        sink.accepted()
    );
    assert!(!server.tool_call_status("thread_1", "call_1").await.unwrap());
}

#[tokio::test]
async fn bad_arguments_get_an_error_result_and_no_subscription() {
    let (_server, sink) = start_ticker(json!({"count": 0, "interval_seconds": 1})).await;

    let callbacks = sink.wait_for(1, PATIENCE).await;
    let result = tool_result(&callbacks[0]);
    let text = result.text.as_deref().unwrap();
    assert!(
        text.starts_with("Error: ") && text.contains("`count`"),
        "{text}"
    );
    assert!(!result.starts_subscription());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(sink.requests(), 1);
}
