//! Wake filters: a subscribing call's `wake_if` keeps events that do not match from waking the
//! model; they are counted, and the model hears of them at its next completion. A bad
//! expression is an error result at once, and no call is made.

use std::sync::Arc;

use async_trait::async_trait;
use infinity_agent_core::input::InputBody;
use infinity_agent_core::model::ToolSpec;
use infinity_agent_core::tools::servers::{Discovered, ToolDiscovery, ToolServerConfig};
use serde_json::json;

use crate::behaviour::harness::{assert_in_order, tid, Harness, Setup};

/// Offers `quotes`, whose own schema refuses unknown arguments.
#[derive(Debug)]
struct Quotes;

#[async_trait]
impl ToolDiscovery for Quotes {
    async fn discover(&self, servers: &[ToolServerConfig]) -> Vec<Discovered> {
        servers
            .iter()
            .map(|s| Discovered {
                server: s.url.clone(),
                about: None,
                result: Ok((
                    format!("{}/invoke", s.url),
                    vec![ToolSpec {
                        name: "quotes".to_owned(),
                        description: "Streams a symbol's quotes.".to_owned(),
                        input_schema: json!({
                            "type": "object",
                            "properties": {"symbol": {"type": "string"}},
                            "required": ["symbol"],
                            "additionalProperties": false
                        }),
                    }],
                )),
            })
            .collect()
    }
}

// A context window makes the scripted model count whole prompts, as a real model bills them.
const SCRIPT: &str = r#"
context_window: 1000000
rules:
  - when: "^watch cheap$"
    reply:
      tool_calls: [{name: quotes, args: {symbol: "ACME", wake_if: "price < 100 && symbol == 'ACME'"}}]
  - when: "^watch all$"
    reply:
      tool_calls: [{name: quotes, args: {symbol: "ACME"}}]
  - when: "^watch broken$"
    reply:
      tool_calls: [{name: quotes, args: {symbol: "ACME", wake_if: "price <"}}]
  - reply: {text: "ok"}
"#;

async fn start() -> Harness {
    let mut setup = Setup::new(SCRIPT);
    setup.tool_servers = vec![serde_json::from_value(json!("http://quotes.test")).unwrap()];
    setup.discovery = Some(Arc::new(Quotes));
    // Room for the unfiltered stream's thousand completions within the (paused) hour.
    setup.limits.completions_per_hour = 10_000;
    setup.limits.conversation_completions_per_hour = 10_000;
    setup.limits.tokens_per_hour = 1_000_000_000;
    setup.limits.conversation_tokens_per_hour = 1_000_000_000;
    setup.start().await
}

/// Subscribes on `thread` with `message`, then sends 1,000 quotes of which 10 are under 100.
/// Returns the completions the events cost.
async fn subscribe_and_stream(h: &mut Harness, thread: &str, message: &str) -> u64 {
    h.say(thread, message).await;
    let invocation = h
        .dispatcher
        .invocations
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|i| i.thread_id.as_str() == thread)
        .cloned()
        .unwrap();
    assert_eq!(
        invocation.args,
        json!({"symbol": "ACME"}),
        "wake_if is not sent to the server"
    );
    let call = invocation.call_id.clone();
    h.send(
        thread,
        InputBody::ToolResult {
            call_id: call.clone(),
            text: "Subscribed to ACME.".into(),
            is_error: false,
            subscription: true,
            images: vec![],
            display_as: vec![],
        },
    )
    .await;
    let before = h
        .system
        .record(&tid(thread))
        .await
        .unwrap()
        .unwrap()
        .usage
        .completions;
    for n in 0..1_000u32 {
        let price = if n % 100 == 99 { 95 } else { 100 + n % 7 };
        // One at a time, as a feed spaced in time delivers them.
        h.send(
            thread,
            InputBody::SubscriptionEvent {
                call_id: call.clone(),
                text: json!({"symbol": "ACME", "price": price, "n": n}).to_string(),
                associative: true,
                is_final: false,
            },
        )
        .await;
    }
    let after = h
        .system
        .record(&tid(thread))
        .await
        .unwrap()
        .unwrap()
        .usage
        .completions;
    after - before
}

#[tokio::test(start_paused = true)]
async fn events_that_do_not_match_wake_nothing_and_are_summarized() {
    let mut h = start().await;
    let filtered = subscribe_and_stream(&mut h, "cheap", "watch cheap").await;
    let unfiltered = subscribe_and_stream(&mut h, "all", "watch all").await;
    let tokens = |thread: &'static str| {
        let system = h.system.clone();
        async move {
            let usage = system.record(&tid(thread)).await.unwrap().unwrap().usage;
            usage.input_tokens + usage.output_tokens
        }
    };
    eprintln!(
        "wake_if: 1,000 events, 10 matching: {filtered} completions and {} tokens with the filter, {unfiltered} completions and {} tokens without",
        tokens("cheap").await,
        tokens("all").await
    );
    // Each of the 10 matching events woke the model once; without a filter every event did.
    assert_eq!(filtered, 10);
    assert_eq!(unfiltered, 1_000);

    let history = h.history("cheap").await;
    let injected = history
        .iter()
        .filter(|l| l.contains("\"price\":95"))
        .count();
    assert_eq!(injected, 10, "{history:#?}");
    // (Only the summaries quote one that did not match, as the newest of those they count.)
    assert!(!history
        .iter()
        .any(|l| l.contains("\"price\":100") && !l.contains("did not match")));
    // The first matching event comes after 99 that did not match, and the model hears of them.
    assert_in_order(
        &history,
        &[
            "did not match wake_if `price < 100 && symbol == 'ACME'`",
            "\"price\":95",
            "assistant: ok",
        ],
    );
    let summary = history
        .iter()
        .find(|l| l.contains("did not match wake_if"))
        .unwrap();
    assert!(
        summary.contains("99 event(s) of the subscription"),
        "{summary}"
    );
    // The last event matched: nothing is left waiting in the count.
    let record = h.system.record(&tid("cheap")).await.unwrap().unwrap();
    let sub = &record.subscriptions[0];
    assert_eq!(
        sub.wake_if.as_deref(),
        Some("price < 100 && symbol == 'ACME'")
    );
    assert!(sub.filtered.is_none());

    // Three more that do not match are counted; the subscription's final event wakes the
    // model anyway, and the count ends with the subscription, told before it.
    let call = sub.call_id.clone();
    for (n, last) in [(1, false), (2, false), (3, false), (4, true)] {
        h.send(
            "cheap",
            InputBody::SubscriptionEvent {
                call_id: call.clone(),
                text: json!({"symbol": "ACME", "price": 150, "n": 1_000 + n}).to_string(),
                associative: true,
                is_final: last,
            },
        )
        .await;
        let record = h.system.record(&tid("cheap")).await.unwrap().unwrap();
        if !last {
            let count = record.subscriptions[0].filtered.as_ref().unwrap().count;
            assert_eq!(count, n);
        } else {
            assert!(record.subscriptions.is_empty());
        }
    }
    let history = h.history("cheap").await;
    let tail: Vec<&str> = history.iter().rev().take(4).map(String::as_str).collect();
    assert!(
        tail[3].starts_with("notice: 3 event(s) of the subscription"),
        "{tail:#?}"
    );
    assert!(
        tail[1].contains("\"n\":1004") && tail[1].contains("final event"),
        "{tail:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_bad_expression_is_an_error_result_and_no_call() {
    let mut h = start().await;
    h.say("broken", "watch broken").await;
    assert!(h.dispatcher.invocations.lock().unwrap().is_empty());
    assert_in_order(
        &h.history("broken").await,
        &["error quotes: Error: wake_if: expected a value, a path or `(`, found the end at position 7 of `price <`. The call was not made"],
    );
}
