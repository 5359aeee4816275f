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
    let Some(s) = stack_with(
        SCRIPT,
        Options {
            tool_servers: vec![clock.base_url().to_owned(), ticker.base_url().to_owned()],
            ..Options::default()
        },
    )
    .await
    else {
        return;
    };
    s.enqueue_message("rap", "time and ticks").await;
    s.run_until(Duration::from_secs(60), "both ticks handled", || async {
        s.stored_history_has("rap", "assistant: all ticks in").await
    })
    .await;
    let history = s.stored_history("rap").await;
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
    let toolset = record.conversation.toolset.unwrap();
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
    assert!(!s.stored_history_has("rap", "forged").await);
}

/// A tool server whose `pick` asks the user to choose, then answers with the pick.
async fn picker() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
) {
    use axum::extract::State;
    use axum::routing::{get, post};
    use axum::Json;
    use infinity_test_support::post_json;
    use serde_json::Value;
    use std::sync::{Arc, Mutex};
    #[derive(Default)]
    struct Shared {
        base: Mutex<String>,
        call: Mutex<Option<(String, String, String)>>,
        answers: Arc<Mutex<Vec<Value>>>,
    }
    let shared = Arc::new(Shared::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    *shared.base.lock().unwrap() = base.clone();
    let app = axum::Router::new()
        .route(
            "/.well-known/rap-toolset",
            get(|State(s): State<Arc<Shared>>| async move {
                let base = s.base.lock().unwrap().clone();
                Json(json!({"name": "picker", "endpoint": format!("{base}/invoke"), "tools": [
                    {"name": "pick", "description": "Asks the user.", "inputSchema": {"type": "object"}}]}))
            }),
        )
        .route(
            "/invoke",
            post(|State(s): State<Arc<Shared>>, Json(body): Json<Value>| async move {
                let url = body["callback_url"].as_str().unwrap().to_owned();
                let (group, id) = (body["group_id"].as_str().unwrap().to_owned(), body["id"].as_str().unwrap().to_owned());
                *s.call.lock().unwrap() = Some((url.clone(), group.clone(), id.clone()));
                let answer_url = format!("{}/answer", s.base.lock().unwrap());
                let question = json!({"type": "user_choice", "group_id": group, "id": id,
                    "prompt": "Which?", "choices": ["red", "blue"], "default": 0, "response_url": answer_url});
                tokio::spawn(async move { post_json(&url, &question).await });
                "ok"
            }),
        )
        .route(
            "/answer",
            post(|State(s): State<Arc<Shared>>, Json(body): Json<Value>| async move {
                s.answers.lock().unwrap().push(body.clone());
                let (url, group, id) = s.call.lock().unwrap().clone().unwrap();
                let colour = ["red", "blue"][body["selected"].as_u64().unwrap() as usize];
                let result = json!({"type": "tool_result", "group_id": group, "id": id,
                    "text": format!("picked {colour}")});
                tokio::spawn(async move { post_json(&url, &result).await });
                "ok"
            }),
        )
        .route("/close_thread", post(|| async { "ok" }))
        .route("/cancel_tool_call", post(|| async { "ok" }))
        .with_state(Arc::clone(&shared));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, Arc::clone(&shared.answers))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_answered_on_the_stack_like_infinity_choose_does() {
    let (base, answers) = picker().await;
    let Some(s) = stack_with(
        "rules:\n  - when: \"^pick$\"\n    reply:\n      tool_calls: [{name: pick, args: {}}]\n  - when: \"picked (\\\\w+)\"\n    reply: {text: \"you picked $1\"}\n  - reply: {text: \"ok\"}\n",
        Options {
            tool_servers: vec![base],
            ..Options::default()
        },
    )
    .await else {
        return;
    };
    s.enqueue_message("ask", "pick").await;
    s.run_until(Duration::from_secs(60), "the open question", || async {
        s.record("ask")
            .await
            .is_some_and(|r| !r.open_choices.is_empty())
    })
    .await;
    let record = s.record("ask").await.unwrap();
    let call = record.open_choices[0].call_id.to_string();
    let thread = crate::harness::tid("ask");
    // Out of range: refused before anything is sent.
    let err =
        infinity_aws::tool_servers::answer_choice(s.store(), &s.sender, &thread, &call, Some(2))
            .await
            .unwrap_err()
            .to_string();
    assert!(err.contains("out of range"), "{err}");
    assert!(answers.lock().unwrap().is_empty());
    let chosen =
        infinity_aws::tool_servers::answer_choice(s.store(), &s.sender, &thread, &call, Some(1))
            .await
            .unwrap();
    assert_eq!((chosen.choice(), chosen.selected), ("blue", 1));
    // The first answer stands: another is refused naming it, and nothing more is sent.
    let err =
        infinity_aws::tool_servers::answer_choice(s.store(), &s.sender, &thread, &call, Some(0))
            .await
            .unwrap_err()
            .to_string();
    assert!(
        err.contains("\"blue\" (option 1)") && err.contains("not taken"),
        "{err}"
    );
    s.run_until(Duration::from_secs(60), "the tool's result", || async {
        s.stored_history_has("ask", "assistant: you picked blue")
            .await
    })
    .await;
    assert_eq!(
        answers.lock().unwrap().clone(),
        [json!({"id": call, "selected": 1})]
    );
    let record = s.record("ask").await.unwrap();
    assert!(record.open_choices.is_empty() && record.pending_calls.is_empty());
}

/// A tool server whose `slow_lookup` acknowledges and never answers; it records each call's
/// callback URL and every `/cancel_tool_call` with its signature header.
async fn slow_server() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    std::sync::Arc<std::sync::Mutex<Vec<(Option<String>, serde_json::Value)>>>,
) {
    use axum::extract::State;
    use axum::http::HeaderMap;
    use axum::routing::{get, post};
    use axum::Json;
    use serde_json::Value;
    use std::sync::{Arc, Mutex};
    type Cancels = Arc<Mutex<Vec<(Option<String>, Value)>>>;
    let callbacks: Arc<Mutex<Vec<String>>> = Arc::default();
    let cancels: Cancels = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let manifest = json!({"name": "slow", "endpoint": format!("{base}/invoke"), "tools": [
        {"name": "slow_lookup", "description": "Takes hours.", "inputSchema": {"type": "object"}}]});
    let app = axum::Router::new()
        .route(
            "/.well-known/rap-toolset",
            get(move || async move { Json(manifest) }),
        )
        .route(
            "/invoke",
            post(
                |State((callbacks, _)): State<(Arc<Mutex<Vec<String>>>, Cancels)>,
                 Json(body): Json<Value>| async move {
                    let url = body["callback_url"].as_str().unwrap().to_owned();
                    callbacks.lock().unwrap().push(url);
                    "ok"
                },
            ),
        )
        .route(
            "/cancel_tool_call",
            post(
                |State((_, cancels)): State<(Arc<Mutex<Vec<String>>>, Cancels)>,
                 headers: HeaderMap,
                 Json(body): Json<Value>| async move {
                    let signature = headers
                        .get("x-infinity-signature")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    cancels.lock().unwrap().push((signature, body));
                    "ok"
                },
            ),
        )
        .route("/close_thread", post(|| async { "ok" }))
        .with_state((Arc::clone(&callbacks), Arc::clone(&cancels)));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, callbacks, cancels)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_stack_a_message_passes_a_slow_call_and_an_interrupt_cancels_it() {
    let (base, callbacks, cancels) = slow_server().await;
    let Some(s) = stack_with(
        "rules:\n  - when: \"^look$\"\n    reply:\n      tool_calls: [{name: slow_lookup, args: {}}]\n  - when: \"hello\"\n    reply: {text: \"still looking\"}\n  - reply: {text: \"ok\"}\n",
        Options {
            tool_servers: vec![base],
            ..Options::default()
        },
    )
    .await else {
        return;
    };
    s.enqueue_message("slow", "look").await;
    s.run_until(Duration::from_secs(60), "the call", || async {
        !callbacks.lock().unwrap().is_empty()
    })
    .await;
    // A message while the call runs is answered, not held behind it.
    s.enqueue_message("slow", "hello?").await;
    s.run_until(Duration::from_secs(60), "the answer", || async {
        s.stored_history_has("slow", "assistant: still looking")
            .await
    })
    .await;
    assert!(s.stored_history_has("slow", "Still running").await);

    // `infinity interrupt`: the call is cancelled, the server told (signed).
    s.send(&infinity_agent_core::input::Input::new(
        crate::harness::tid("slow"),
        infinity_agent_core::input::InputBody::Interrupt { tree: false },
    ))
    .await;
    s.run_until(Duration::from_secs(60), "the cancellation", || async {
        !cancels.lock().unwrap().is_empty()
    })
    .await;
    let (signature, body) = cancels.lock().unwrap()[0].clone();
    assert!(signature.is_some_and(|s| s.starts_with("t=") && s.contains(",v1=")));
    assert_eq!(body["thread_id"], "slow");
    assert!(s.record("slow").await.unwrap().pending_calls.is_empty());
    assert!(
        s.stored_history_has("slow", "Interrupted by the user.")
            .await
    );

    // The tool answers anyway, through the callback function: accepted, and dropped.
    let url = callbacks.lock().unwrap()[0].clone();
    let id = url
        .split('?')
        .next()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let late = reqwest::Client::new()
        .post(&url)
        .json(&json!({"type": "tool_result", "group_id": "slow", "id": id, "text": "too late"}))
        .send()
        .await
        .unwrap();
    assert_eq!(late.status().as_u16(), 200);
    for _ in 0..3 {
        s.round().await;
    }
    assert!(!s.stored_history_has("slow", "too late").await);

    // A new call, and a callback the function refuses: the call gets an error result.
    s.enqueue_message("slow", "look").await;
    s.run_until(Duration::from_secs(60), "the second call", || async {
        callbacks.lock().unwrap().len() == 2
    })
    .await;
    let url = callbacks.lock().unwrap()[1].clone();
    let id = url
        .split('?')
        .next()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let refused = reqwest::Client::new()
        .post(&url)
        .json(&json!({"type": "tool_result", "group_id": "slow", "id": id}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 400);
    s.run_until(Duration::from_secs(60), "the error result", || async {
        s.stored_history_has("slow", "cannot accept").await
    })
    .await;
    assert!(s.record("slow").await.unwrap().pending_calls.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_that_do_not_match_wake_if_wake_nothing_on_the_stack() {
    const FILTERED: &str = r#"
rules:
  - when: "^filtered ticks$"
    reply:
      tool_calls:
        - {name: ticker, args: {count: 6, interval_seconds: 0.1, associative: true, wake_if: "tick == 3"}}
  - reply: {text: "ok"}
"#;
    let ticker = LocalServer::start(ticker_server()).await.unwrap();
    let Some(s) = stack_with(
        FILTERED,
        Options {
            tool_servers: vec![ticker.base_url().to_owned()],
            ..Options::default()
        },
    )
    .await
    else {
        return;
    };
    s.enqueue_message("feed", "filtered ticks").await;
    s.run_until(Duration::from_secs(60), "the final tick", || async {
        s.stored_history_has("feed", "final event").await
    })
    .await;
    for _ in 0..3 {
        s.round().await;
    }
    let history = s.stored_history("feed").await;
    let woke: Vec<&String> = history
        .iter()
        .filter(|l| l.starts_with("result receive_event__injected"))
        .collect();
    assert_eq!(woke.len(), 2, "tick 3 and the final tick 6: {history:#?}");
    assert!(woke[0].contains("\"tick\":3") && woke[1].contains("\"tick\":6"));
    let notices: Vec<&String> = history
        .iter()
        .filter(|l| l.contains("did not match wake_if `tick == 3`"))
        .collect();
    // Ticks 1, 2, 4 and 5, counted in one notice or two (ticks that arrive in the same batch
    // as a matching one are summarized with it).
    let counted: u64 = notices
        .iter()
        .map(|n| {
            n.trim_start_matches("notice: ")
                .split(' ')
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(counted, 4, "{notices:#?}");
}
