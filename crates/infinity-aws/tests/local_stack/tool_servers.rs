//! Tool servers through the AWS host: the agent handler discovers and invokes the example
//! servers over HTTP; their callbacks go through the callback function's handler (served over
//! HTTP as `infinity-local` does), the input queue and the agent handler again.

use std::time::Duration;

use infinity_rap::kit::testing::LocalServer;
use rap_example_servers::{get_time_server, ticker_server};
use serde_json::json;

use crate::harness::{stack_with, Options};

const SCRIPT: &str = r#"
rules:
  - when: "^time and ticks$"
    reply:
      tool_calls:
        - {name: get_time, args: {timezone: "Asia/Tokyo"}}
        - {name: ticker, args: {count: 2, interval_seconds: 0.2, associative: true}}
  - when: "final event"
    reply: {text: "all ticks in"}
  - reply: {text: "ok"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_and_events_come_back_through_the_callback_handler() {
    let clock = LocalServer::start(get_time_server()).await.unwrap();
    let ticker = LocalServer::start(ticker_server()).await.unwrap();
    let s = stack_with(
        SCRIPT,
        Options {
            tool_servers: vec![clock.base_url().to_owned(), ticker.base_url().to_owned()],
            ..Options::default()
        },
    )
    .await;
    s.say("rap", "time and ticks").await;
    s.run_until(Duration::from_secs(60), "both ticks handled", || async {
        s.history_has("rap", "assistant: all ticks in").await
    })
    .await;
    let history = s.history("rap").await;
    let time = history
        .iter()
        .find(|l| l.starts_with("result get_time"))
        .unwrap();
    assert!(time.contains("+09:00"), "{history:#?}");
    assert!(
        history
            .iter()
            .any(|l| l.starts_with("result ticker") && l.contains("Subscribed")),
        "{history:#?}"
    );
    // Two associative events, injected into the thread; the last one ended the subscription.
    let events = history
        .iter()
        .filter(|l| l.contains("receive_event__injected") && l.starts_with("result"))
        .count();
    assert_eq!(events, 2, "{history:#?}");
    let record = s.record("rap").await.unwrap();
    assert!(record.subscriptions.is_empty() && record.pending_calls.is_empty());
    let toolset = record.toolset.unwrap();
    assert_eq!(toolset.tools.len(), 2);

    // A forged callback is refused by the handler and never reaches the thread.
    let url = s.callback_url.clone().unwrap();
    let forged = reqwest::Client::new()
        .post(format!(
            "{url}/rap/callback/rap/call-x?exp=99999999999&sig=00"
        ))
        .json(&json!({"type": "tool_result", "group_id": "rap", "id": "call-x", "text": "forged"}))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status().as_u16(), 403);
    for _ in 0..3 {
        s.round().await;
    }
    assert!(!s.history_has("rap", "forged").await);
}
