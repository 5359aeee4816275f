//! `get_time` over real HTTP: the server in-process, a callback sink as the runtime.

use std::time::Duration;

use axum::http::StatusCode;
use infinity_rap::kit::testing::{invocation, CallbackSink, LocalServer};
use infinity_rap::wire::{parse_manifest, Callback, ToolResult};
use jiff::{Timestamp, ZonedDateTime};
use rap_example_servers::get_time_server;
use serde_json::{json, Value};

/// Asks `get_time` with `arguments` and returns the one `tool_result` it sends.
async fn ask(arguments: Value) -> ToolResult {
    let server = LocalServer::start(get_time_server()).await.unwrap();
    let sink = CallbackSink::start().await.unwrap();
    let body = invocation("get_time", arguments, "thread_1", "call_1", sink.url());
    assert_eq!(server.invoke(&body).await.unwrap(), StatusCode::OK);

    let callbacks = sink.wait_for(1, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(sink.requests(), 1, "exactly one callback");
    match &callbacks[..] {
        [Callback::ToolResult(result)] => {
            assert_eq!(
                (result.group_id.as_str(), result.id.as_str()),
                ("thread_1", "call_1")
            );
            assert!(!result.starts_subscription());
            result.clone()
        }
        other => panic!("expected one tool_result, got {other:?}"),
    }
}

/// Parses a `get_time` answer and checks it is the current time, give or take a few seconds.
fn assert_now(text: &str) -> ZonedDateTime {
    let time: ZonedDateTime = text.parse().unwrap();
    let lag = Timestamp::now().duration_since(time.timestamp()).abs();
    assert!(lag.as_secs() < 5, "{text} is {lag:?} away from now");
    time
}

#[tokio::test]
async fn get_time_answers_in_the_zone_asked_for() {
    let result = ask(json!({"timezone": "Asia/Tokyo"})).await;
    let text = result.text.unwrap();

    assert!(text.ends_with("+09:00[Asia/Tokyo]"), "{text}");
    assert_eq!(
        assert_now(&text).time_zone().iana_name(),
        Some("Asia/Tokyo")
    );
}

#[tokio::test]
async fn get_time_answers_in_utc_by_default() {
    let text = ask(json!({})).await.text.unwrap();

    assert!(text.ends_with("+00:00[UTC]"), "{text}");
    assert_now(&text);
}

#[tokio::test]
async fn an_unknown_zone_gets_an_error_result_naming_it() {
    let text = ask(json!({"timezone": "Mars/Olympus_Mons"}))
        .await
        .text
        .unwrap();

    assert!(text.starts_with("Error: "), "{text}");
    assert!(text.contains("`Mars/Olympus_Mons`"), "{text}");
}

#[tokio::test]
async fn the_manifest_offers_get_time() {
    let server = LocalServer::start(get_time_server()).await.unwrap();

    let manifest = parse_manifest(&server.discover().await.unwrap()).unwrap();

    assert_eq!(manifest.endpoint, format!("{}/invoke", server.base_url()));
    let tool = manifest.tool("get_time").unwrap();
    assert_eq!(
        tool.input_schema["properties"]["timezone"]["type"],
        "string"
    );
}
