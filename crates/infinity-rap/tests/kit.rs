//! The tool server kit over real HTTP: a kit server and a callback sink, both on `127.0.0.1`,
//! and the requests a runtime would send.
#![cfg(feature = "kit")]

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use infinity_rap::kit::testing::{invocation, CallbackSink, LocalServer};
use infinity_rap::kit::{tool_definition, Call, CallbackError, ToolServer};
use infinity_rap::wire::{
    parse_manifest, Callback, ContentItem, DiffContent, DisplaySegment, ImageData,
    SubscriptionEvent, ToolResult, UserChoiceRequest,
};
use infinity_test_support::post_json;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

/// Long enough for anything that should happen to happen.
const PATIENCE: Duration = Duration::from_secs(5);
/// How long to watch for something that should not happen.
const QUIET: Duration = Duration::from_millis(300);

/// What the handlers of the test tools report back to the test.
type Reports<T> = mpsc::UnboundedSender<T>;

fn any_object() -> Value {
    json!({"type": "object"})
}

/// `echo` answers its `text` argument and reports how the delivery went.
fn echo_server(delivered: Reports<Result<(), CallbackError>>) -> ToolServer {
    ToolServer::new("test-tools", "Tools for the kit tests").tool(
        tool_definition("echo", "Returns `text`", any_object()),
        move |call: Call| {
            let delivered = delivered.clone();
            async move {
                let text = call.args()["text"].as_str().unwrap_or("?").to_owned();
                delivered.send(call.result_text(text).await).unwrap();
            }
        },
    )
}

/// `stream` subscribes, then sends an event every 30 ms until a send fails, which it reports.
fn streaming_server(stopped: Reports<CallbackError>) -> ToolServer {
    ToolServer::new("stream-tools", "Endless subscriptions").tool(
        tool_definition("stream", "Counts forever", any_object()),
        move |call: Call| {
            let stopped = stopped.clone();
            async move {
                call.subscribed("Subscribed").await.unwrap();
                for tick in 1.. {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    if let Err(error) = call
                        .event(json!({"tick": tick}).to_string(), false, false)
                        .await
                    {
                        stopped.send(error).unwrap();
                        return;
                    }
                }
            }
        },
    )
}

/// `wait` subscribes, then waits for its cancellation and reports its call id.
fn waiting_server(cancelled: Reports<String>) -> ToolServer {
    ToolServer::new("wait-tools", "Waits").tool(
        tool_definition("wait", "Waits to be cancelled", any_object()),
        move |call: Call| {
            let cancelled = cancelled.clone();
            async move {
                call.subscribed("waiting").await.unwrap();
                call.cancelled().await;
                assert!(call.is_cancelled());
                cancelled.send(call.id().to_owned()).unwrap();
            }
        },
    )
}

/// `gate` answers `done` once the test opens the gate.
fn gated_server(gate: Arc<Notify>) -> ToolServer {
    ToolServer::new("gate-tools", "Waits for the test").tool(
        tool_definition("gate", "Answers when told", any_object()),
        move |call: Call| {
            let gate = Arc::clone(&gate);
            async move {
                gate.notified().await;
                call.result_text("done").await
            }
        },
    )
}

async fn next<T>(reports: &mut mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(PATIENCE, reports.recv())
        .await
        .expect("a report in time")
        .expect("the reporting tool server is alive")
}

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

/// The error text of the one callback the sink gets, after checking it is an error result for
/// the call.
async fn single_error_result(sink: &CallbackSink, thread_id: &str, id: &str) -> String {
    let callbacks = sink.wait_for(1, PATIENCE).await;
    assert_eq!(callbacks.len(), 1, "{callbacks:?}");
    let result = tool_result(&callbacks[0]);
    assert_eq!(
        (result.group_id.as_str(), result.id.as_str()),
        (thread_id, id)
    );
    let text = result.text.clone().unwrap();
    assert!(text.starts_with("Error: "), "{text}");
    text
}

#[tokio::test]
async fn the_manifest_is_served_and_valid() {
    let (delivered, _) = mpsc::unbounded_channel();
    let server = LocalServer::start(echo_server(delivered)).await.unwrap();

    let manifest = parse_manifest(&server.discover().await.unwrap()).unwrap();

    assert_eq!(manifest.name, "test-tools");
    assert_eq!(
        manifest.description.as_deref(),
        Some("Tools for the kit tests")
    );
    assert_eq!(manifest.endpoint, format!("{}/invoke", server.base_url()));
    assert_eq!(manifest.tools.len(), 1);
    assert_eq!(manifest.tools[0].name, "echo");
}

#[tokio::test]
async fn an_invocation_is_acknowledged_then_answered() {
    let (delivered, mut deliveries) = mpsc::unbounded_channel();
    let server = LocalServer::start(echo_server(delivered)).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();
    let mut body = invocation(
        "echo",
        json!({"text": "hi"}),
        "thread_1",
        "call_1",
        sink.url(),
    );
    body["call_id"] = json!("model_call_7");

    assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);

    next(&mut deliveries).await.unwrap();
    let callbacks = sink.accepted();
    assert_eq!(callbacks.len(), 1, "{callbacks:?}");
    let result = tool_result(&callbacks[0]);
    assert_eq!(result.group_id, "thread_1");
    assert_eq!(result.id, "call_1");
    assert_eq!(result.call_id.as_deref(), Some("model_call_7"));
    assert_eq!(result.text.as_deref(), Some("hi"));
    assert!(!result.starts_subscription());
}

#[tokio::test]
async fn an_unknown_operation_is_acknowledged_with_an_error_result() {
    let (delivered, _) = mpsc::unbounded_channel();
    let server = LocalServer::start(echo_server(delivered)).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();

    let body = invocation("deploy", json!({}), "thread_1", "call_1", sink.url());
    assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);

    let text = single_error_result(&sink, "thread_1", "call_1").await;
    assert!(text.contains("`deploy`") && text.contains("echo"), "{text}");
}

#[tokio::test]
async fn arguments_that_are_not_an_object_get_an_error_result() {
    let (delivered, _) = mpsc::unbounded_channel();
    let server = LocalServer::start(echo_server(delivered)).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();

    let body = invocation("echo", json!("hi"), "thread_1", "call_1", sink.url());
    assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);

    let text = single_error_result(&sink, "thread_1", "call_1").await;
    assert!(text.contains("invocation"), "{text}");
}

#[tokio::test]
async fn a_body_that_cannot_be_answered_is_refused() {
    let (delivered, _) = mpsc::unbounded_channel();
    let server = LocalServer::start(echo_server(delivered)).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();

    let no_callback_url = json!({"operation": "echo", "arguments": {}, "id": "c", "group_id": "t"});
    let not_http = invocation(
        "echo",
        json!({}),
        "thread_1",
        "call_1",
        "ftp://agent/callback",
    );
    for body in [json!("hello"), no_callback_url, not_http] {
        assert_eq!(
            server.invoke(&body).await.unwrap(),
            StatusCode::BAD_REQUEST,
            "{body}"
        );
    }

    let client = reqwest::Client::new();
    let response = client
        .post(format!("{}/invoke", server.base_url()))
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(response.text().await.unwrap().contains("invocation"));

    tokio::time::sleep(QUIET).await;
    assert_eq!(sink.requests(), 0);
}

#[tokio::test]
async fn a_callback_answered_with_5xx_is_retried() {
    let (delivered, mut deliveries) = mpsc::unbounded_channel();
    let server = LocalServer::start(echo_server(delivered)).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();
    sink.answer_next(StatusCode::INTERNAL_SERVER_ERROR);
    sink.answer_next(StatusCode::SERVICE_UNAVAILABLE);

    let body = invocation(
        "echo",
        json!({"text": "hi"}),
        "thread_1",
        "call_1",
        sink.url(),
    );
    assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);

    next(&mut deliveries).await.unwrap();
    assert_eq!(sink.requests(), 3);
    tokio::time::sleep(QUIET).await;
    assert_eq!(sink.requests(), 3);
    let callbacks = sink.accepted();
    assert_eq!(callbacks.len(), 1);
    assert_eq!(tool_result(&callbacks[0]).text.as_deref(), Some("hi"));
}

#[tokio::test]
async fn a_callback_answered_with_400_or_429_is_not_retried() {
    // 429 too: the spec forbids retrying any 4xx.
    for refusal in [StatusCode::BAD_REQUEST, StatusCode::TOO_MANY_REQUESTS] {
        let (delivered, mut deliveries) = mpsc::unbounded_channel();
        let server = LocalServer::start(echo_server(delivered)).await.unwrap();
        let sink = CallbackSink::start().await.unwrap();
        sink.answer_next(refusal);

        let body = invocation(
            "echo",
            json!({"text": "hi"}),
            "thread_1",
            "call_1",
            sink.url(),
        );
        assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);

        let outcome = next(&mut deliveries).await;
        let refused_with = |status| status == refusal.as_u16();
        assert!(
            matches!(outcome, Err(CallbackError::Rejected { status, .. }) if refused_with(status)),
            "{refusal}: {outcome:?}"
        );
        // Longer than the first backoff delay (200 ms): a retry would have come by now.
        tokio::time::sleep(QUIET * 2).await;
        assert_eq!(sink.requests(), 1, "{refusal}");
        assert!(sink.accepted().is_empty(), "{refusal}");
    }
}

#[tokio::test]
async fn every_kind_of_callback_reaches_the_runtime_valid() {
    let (refused, mut refusals) = mpsc::unbounded_channel();
    let server = ToolServer::new("chatty-tools", "Sends one of everything").tool(
        tool_definition(
            "chatty",
            "Asks for authorization, updates a view, answers",
            any_object(),
        ),
        move |call: Call| {
            let refused = refused.clone();
            async move {
                refused
                    .send(call.oauth("http://insecure.example.com/authorize").await)
                    .unwrap();
                call.oauth("https://auth.example.com/authorize?client_id=abc")
                    .await?;
                let mut view = serde_json::Map::new();
                view.insert("patch".to_owned(), json!("--- a\n+++ b\n"));
                call.view_update("diff", view).await?;
                let content = vec![ContentItem::Text {
                    text: "authorized".to_owned(),
                }];
                call.result_content(content).await?;
                call.view_update("diff", serde_json::Map::new()).await
            }
        },
    );
    let server = LocalServer::start(server).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();
    let mut body = invocation("chatty", json!({}), "thread_1", "call_1", sink.url());
    body["call_id"] = json!("model_call_7");

    assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);

    let outcome = next(&mut refusals).await;
    assert!(
        matches!(outcome, Err(CallbackError::Invalid(_))),
        "{outcome:?}"
    );
    let callbacks = sink.wait_for(4, PATIENCE).await;
    assert!(sink.invalid().is_empty(), "{:?}", sink.invalid());
    let kinds: Vec<&str> = callbacks.iter().map(Callback::type_name).collect();
    assert_eq!(
        kinds,
        ["oauth", "view_update", "tool_result", "view_update"]
    );
    let Callback::OAuth(oauth) = &callbacks[0] else {
        unreachable!()
    };
    assert_eq!(oauth.call_id.as_deref(), Some("model_call_7"));
    assert!(oauth.auth_url.starts_with("https://auth.example.com/"));
    let result = tool_result(&callbacks[2]);
    let expected = [ContentItem::Text {
        text: "authorized".to_owned(),
    }];
    assert_eq!(result.content.as_deref(), Some(&expected[..]));
    assert_eq!(result.text, None);
    assert!(callbacks
        .iter()
        .all(|callback| callback.group_id() == "thread_1"));
}

#[tokio::test]
async fn a_call_that_ends_without_a_result_gets_an_error_result() {
    let server = ToolServer::new("careless-tools", "Tools that forget to answer")
        .tool(
            tool_definition("forget", "Returns without a result", any_object()),
            |_call: Call| async {},
        )
        .tool(
            tool_definition("fail", "Returns an error", any_object()),
            |_call: Call| async { Err::<(), _>("the disk is full") },
        )
        .tool(
            tool_definition("crash", "Panics", any_object()),
            |_call: Call| async {
                if true {
                    panic!("boom");
                }
            },
        );
    let server = LocalServer::start(server).await.unwrap();

    for (tool, expected) in [
        (
            "forget",
            "Error: the tool `forget` finished without sending a result",
        ),
        ("fail", "Error: the disk is full"),
        ("crash", "Error: the tool `crash` failed unexpectedly"),
    ] {
        let sink = CallbackSink::start().await.unwrap();
        let body = invocation(tool, json!({}), "thread_1", tool, sink.url());
        assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);
        assert_eq!(single_error_result(&sink, "thread_1", tool).await, expected);
    }
}

#[tokio::test]
async fn cancel_tool_call_stops_a_subscription() {
    let (stopped, mut stops) = mpsc::unbounded_channel();
    let server = LocalServer::start(streaming_server(stopped)).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();
    let body = invocation("stream", json!({}), "thread_1", "call_1", sink.url());
    assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);

    let callbacks = sink.wait_for(3, PATIENCE).await;
    assert!(tool_result(&callbacks[0]).starts_subscription());
    assert_eq!(event(&callbacks[1]).tool_call_id, "call_1");
    assert!(server.tool_call_status("thread_1", "call_1").await.unwrap());

    let status = server.cancel_tool_call("thread_1", "call_1").await.unwrap();
    assert_eq!(status, StatusCode::OK);

    let error = next(&mut stops).await;
    assert!(matches!(error, CallbackError::Cancelled), "{error:?}");
    let seen = sink.requests();
    tokio::time::sleep(QUIET).await;
    assert_eq!(sink.requests(), seen, "callbacks after the cancellation");
    assert!(sink.accepted()[1..].iter().all(|c| !event(c).is_final()));
    assert!(!server.tool_call_status("thread_1", "call_1").await.unwrap());
}

#[tokio::test]
async fn close_thread_cancels_every_call_of_the_thread() {
    let (cancelled, mut cancellations) = mpsc::unbounded_channel();
    let server = LocalServer::start(waiting_server(cancelled)).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();
    for (thread_id, id) in [("thread_a", "a1"), ("thread_a", "a2"), ("thread_b", "b1")] {
        let body = invocation("wait", json!({}), thread_id, id, sink.url());
        assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);
    }
    assert_eq!(sink.wait_for(3, PATIENCE).await.len(), 3);

    assert_eq!(
        server.close_thread("thread_a").await.unwrap(),
        StatusCode::OK
    );

    let mut ids = [
        next(&mut cancellations).await,
        next(&mut cancellations).await,
    ];
    ids.sort();
    assert_eq!(ids, ["a1", "a2"]);
    assert!(!server.tool_call_status("thread_a", "a1").await.unwrap());
    assert!(!server.tool_call_status("thread_a", "a2").await.unwrap());
    assert!(server.tool_call_status("thread_b", "b1").await.unwrap());
    tokio::time::sleep(QUIET).await;
    assert!(
        cancellations.try_recv().is_err(),
        "thread_b's call was cancelled too"
    );
}

#[tokio::test]
async fn tool_call_status_is_alive_until_the_result() {
    let gate = Arc::new(Notify::new());
    let server = LocalServer::start(gated_server(Arc::clone(&gate)))
        .await
        .unwrap();
    let sink = CallbackSink::start().await.unwrap();
    let body = invocation("gate", json!({}), "thread_1", "call_1", sink.url());
    assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);

    assert!(server.tool_call_status("thread_1", "call_1").await.unwrap());
    assert!(!server.tool_call_status("thread_2", "call_1").await.unwrap());
    assert!(!server.tool_call_status("thread_1", "call_9").await.unwrap());

    gate.notify_one();
    let callbacks = sink.wait_for(1, PATIENCE).await;
    assert_eq!(tool_result(&callbacks[0]).text.as_deref(), Some("done"));
    assert!(!server.tool_call_status("thread_1", "call_1").await.unwrap());
}

#[tokio::test]
async fn a_repeated_invocation_runs_once() {
    let gate = Arc::new(Notify::new());
    let server = LocalServer::start(gated_server(Arc::clone(&gate)))
        .await
        .unwrap();
    let sink = CallbackSink::start().await.unwrap();
    let body = invocation("gate", json!({}), "thread_1", "call_1", sink.url());
    assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);
    assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);

    gate.notify_one();
    assert_eq!(sink.wait_for(1, PATIENCE).await.len(), 1);
    gate.notify_one();
    tokio::time::sleep(QUIET).await;
    assert_eq!(sink.requests(), 1);
}

#[tokio::test]
async fn notifications_are_always_acknowledged() {
    let gate = Arc::new(Notify::new());
    let server = LocalServer::start(gated_server(gate)).await.unwrap();

    assert_eq!(
        server.cancel_tool_call("thread_x", "call_x").await.unwrap(),
        StatusCode::OK
    );
    assert_eq!(
        server.close_thread("thread_x").await.unwrap(),
        StatusCode::OK
    );
    let client = reqwest::Client::new();
    for path in ["/cancel_tool_call", "/close_thread"] {
        let url = format!("{}{path}", server.base_url());
        let response = client.post(url).body("not json").send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
    }
    let url = format!("{}/tool_call_status", server.base_url());
    let response = client.post(url).body("{}").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_result_carries_its_display_segments() {
    let display = vec![
        DisplaySegment::Diff(DiffContent {
            path: "src/main.rs".to_owned(),
            patch: "--- src/main.rs\n+++ src/main.rs\n@@ -1 +1,2 @@\n fn main() {\n+    run();\n"
                .to_owned(),
        }),
        DisplaySegment::Image(ImageData {
            data: "iVBORw0KGgo=".to_owned(),
            media_type: "image/png".to_owned(),
        }),
        DisplaySegment::Text("edit_file src/main.rs: 1 insertion".to_owned()),
    ];
    let sent = display.clone();
    let server = ToolServer::new("edit-tools", "Edits files").tool(
        tool_definition("edit", "Edits a file", any_object()),
        move |call: Call| {
            let display = sent.clone();
            async move {
                call.result_displayed("Replaced text in src/main.rs", display)
                    .await
            }
        },
    );
    let server = LocalServer::start(server).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();
    let body = invocation("edit", json!({}), "thread_1", "call_1", sink.url());

    assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);

    let callbacks = sink.wait_for(1, PATIENCE).await;
    let result = tool_result(&callbacks[0]);
    assert_eq!(result.text.as_deref(), Some("Replaced text in src/main.rs"));
    assert_eq!(result.display_as.as_ref(), Some(&display));
    assert_eq!(result.content, None);
}

/// `deploy` asks where to deploy (first, a question with no choices, which the kit refuses),
/// reports the outcome of each question, and answers with the pick.
fn asking_server(outcomes: Reports<Result<usize, CallbackError>>) -> ToolServer {
    const ZONES: [&str; 3] = ["eu-west-1", "us-east-1", "nowhere"];
    ToolServer::new("deploy-tools", "Deploys after asking").tool(
        tool_definition("deploy", "Deploys where the user says", any_object()),
        move |call: Call| {
            let outcomes = outcomes.clone();
            async move {
                let empty = call.user_choice("Deploy where?", Vec::<String>::new(), 0);
                outcomes.send(empty.await).unwrap();
                match call.user_choice("Deploy where?", ZONES, 2).await {
                    Ok(picked) => {
                        outcomes.send(Ok(picked)).unwrap();
                        call.result_text(format!("deployed to {}", ZONES[picked]))
                            .await
                    }
                    Err(error) => {
                        outcomes.send(Err(error)).unwrap();
                        Ok(())
                    }
                }
            }
        },
    )
}

fn user_choice(callback: &Callback) -> &UserChoiceRequest {
    match callback {
        Callback::UserChoice(question) => question,
        other => panic!("expected a user_choice, got {other:?}"),
    }
}

#[tokio::test]
async fn a_user_choice_is_answered_at_the_kits_response_url() {
    let (outcome, mut outcomes) = mpsc::unbounded_channel();
    let server = LocalServer::start(asking_server(outcome)).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();
    let mut body = invocation("deploy", json!({}), "thread_1", "call_1", sink.url());
    body["call_id"] = json!("model_call_7");

    assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);

    let refused = next(&mut outcomes).await;
    assert!(
        matches!(refused, Err(CallbackError::Invalid(_))),
        "{refused:?}"
    );
    let callbacks = sink.wait_for(1, PATIENCE).await;
    assert_eq!(callbacks.len(), 1, "only the valid question: {callbacks:?}");
    let question = user_choice(&callbacks[0]);
    assert_eq!(
        (question.group_id.as_str(), question.id.as_str()),
        ("thread_1", "call_1")
    );
    assert_eq!(question.call_id.as_deref(), Some("model_call_7"));
    assert_eq!(question.prompt, "Deploy where?");
    assert_eq!(question.choices, ["eu-west-1", "us-east-1", "nowhere"]);
    assert_eq!(question.default_choice, 2);
    let prefix = format!("{}/user_choice/", server.base_url());
    assert!(
        question.response_url.starts_with(&prefix),
        "{}",
        question.response_url
    );
    assert!(server.tool_call_status("thread_1", "call_1").await.unwrap());

    // Wrong answers are refused with a reason, and leave the question open.
    let url = question.response_url.as_str();
    let (status, why) = post_json(url, &json!({"id": "call_9", "selected": 0})).await;
    assert_eq!(status, 400);
    assert!(why.to_string().contains("call_9"), "{why}");
    let (status, why) = post_json(url, &json!({"id": "call_1", "selected": 3})).await;
    assert_eq!(status, 400);
    assert!(why.to_string().contains("0 to 2"), "{why}");
    let (status, why) = post_json(url, &json!({"id": "call_1"})).await;
    assert_eq!(status, 400);
    assert!(why.to_string().contains("selected"), "{why}");
    let guessed = format!("{prefix}00000000000000000000000000000000");
    let (status, _) = post_json(&guessed, &json!({"id": "call_1", "selected": 0})).await;
    assert_eq!(status, 404);

    let (status, _) = post_json(url, &json!({"id": "call_1", "selected": 1})).await;
    assert_eq!(status, 200);

    assert_eq!(next(&mut outcomes).await.unwrap(), 1);
    let callbacks = sink.wait_for(2, PATIENCE).await;
    assert_eq!(
        tool_result(&callbacks[1]).text.as_deref(),
        Some("deployed to us-east-1")
    );
    // An answer counts once.
    let (status, _) = post_json(url, &json!({"id": "call_1", "selected": 0})).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_cancelled_call_stops_waiting_for_its_answer() {
    let (outcome, mut outcomes) = mpsc::unbounded_channel();
    let server = LocalServer::start(asking_server(outcome)).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();
    let body = invocation("deploy", json!({}), "thread_1", "call_1", sink.url());
    assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);
    next(&mut outcomes).await.unwrap_err();
    let callbacks = sink.wait_for(1, PATIENCE).await;
    let url = user_choice(&callbacks[0]).response_url.clone();

    let status = server.cancel_tool_call("thread_1", "call_1").await.unwrap();
    assert_eq!(status, StatusCode::OK);

    let outcome = next(&mut outcomes).await;
    assert!(
        matches!(outcome, Err(CallbackError::Cancelled)),
        "{outcome:?}"
    );
    let (status, _) = post_json(&url, &json!({"id": "call_1", "selected": 0})).await;
    assert_eq!(status, 404);
    tokio::time::sleep(QUIET).await;
    assert_eq!(sink.requests(), 1, "nothing after the cancellation");
}
