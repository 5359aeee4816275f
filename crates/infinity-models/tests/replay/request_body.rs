//! What the providers receive: headers, system prompt, tools and the history converted to their
//! message formats.

use infinity_agent_core::history::{Item, INJECTED_TOOL};
use serde_json::{json, Value};

use crate::replay::fixtures::{
    anthropic, assistant, call, complete, openai, quick_retries, search_tool, tool_result,
    weather_tool, Conversation, API_KEY, SYSTEM,
};
use crate::replay::recordings::{ANTHROPIC_TEXT, OPENAI_TEXT};
use crate::replay::server::{Received, Reply, Server};

/// A conversation with two tool calls, an error result, a notice the model must not see, and a
/// message that arrived while the tools ran (the runtime appends it after their results).
fn weather_conversation() -> Conversation {
    Conversation::new(vec![
        Item::user("What's the weather in Paris and Oslo?"),
        assistant(
            Some("Let me check both."),
            vec![
                call("call_paris", "get_weather", json!({"city": "Paris"})),
                call("call_oslo", "get_weather", json!({"city": "Oslo"})),
            ],
        ),
        tool_result("call_paris", "get_weather", "18°C, sunny", false),
        tool_result(
            "call_oslo",
            "get_weather",
            "weather service unavailable",
            true,
        ),
        Item::user("Also, is it windy?"),
        assistant(Some("Paris: 18°C and sunny. Oslo: no forecast."), vec![]),
        Item::Notice {
            text: "NOTICE FOR THE USER ONLY".into(),
            is_error: false,
        },
        Item::user("Thanks. And Rome?"),
    ])
}

async fn anthropic_request(conversation: &Conversation) -> Received {
    let server = Server::start(vec![Reply::sse(ANTHROPIC_TEXT)]).await;
    complete(&anthropic(&server, quick_retries(0)), conversation)
        .await
        .unwrap();
    server.received().remove(0)
}

async fn openai_request(conversation: &Conversation) -> Received {
    let server = Server::start(vec![Reply::sse(OPENAI_TEXT)]).await;
    complete(&openai(&server, quick_retries(0)), conversation)
        .await
        .unwrap();
    server.received().remove(0)
}

fn roles(messages: &Value) -> Vec<&str> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect()
}

fn block_types(message: &Value) -> Vec<&str> {
    message["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect()
}

/// Anthropic's rule: user first, then strictly alternating.
fn assert_alternating(messages: &Value) {
    let roles = roles(messages);
    assert_eq!(roles.first(), Some(&"user"), "{roles:?}");
    for pair in roles.windows(2) {
        assert_ne!(pair[0], pair[1], "{roles:?}");
    }
}

#[tokio::test]
async fn anthropic_request_headers_system_and_tools() {
    let received = anthropic_request(&weather_conversation()).await;
    let body = &received.body;

    assert_eq!(received.path, "/v1/messages");
    assert_eq!(received.header("x-api-key"), Some(API_KEY));
    assert_eq!(received.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(received.header("content-type"), Some("application/json"));
    assert_eq!(received.header("authorization"), None);

    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 16384);
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}])
    );

    let tools = body["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["get_weather", "search", INJECTED_TOOL]);
    let weather = weather_tool();
    assert_eq!(
        tools[0],
        json!({"name": weather.name, "description": weather.description, "input_schema": weather.input_schema})
    );
    assert_eq!(tools[1]["input_schema"], search_tool().input_schema);
    assert_eq!(tools[2]["input_schema"]["type"], "object");
    assert!(!tools[2]["description"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn anthropic_request_messages() {
    let received = anthropic_request(&weather_conversation()).await;
    let messages = &received.body["messages"];

    assert_alternating(messages);
    assert_eq!(
        *messages,
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "What's the weather in Paris and Oslo?"}
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me check both."},
                {"type": "tool_use", "id": "call_paris", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_oslo", "name": "get_weather", "input": {"city": "Oslo"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_paris", "content": "18°C, sunny"},
                {"type": "tool_result", "tool_use_id": "call_oslo", "content": "weather service unavailable", "is_error": true},
                {"type": "text", "text": "Also, is it windy?"}
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Paris: 18°C and sunny. Oslo: no forecast."}
            ]},
            {"role": "user", "content": [
                {"type": "text", "text": "Thanks. And Rome?", "cache_control": {"type": "ephemeral"}}
            ]}
        ])
    );
    // One breakpoint in the conversation (the system prompt has the other).
    assert_eq!(
        messages.to_string().matches("cache_control").count(),
        1,
        "{messages}"
    );
    assert!(!received
        .body
        .to_string()
        .contains("NOTICE FOR THE USER ONLY"));
}

#[tokio::test]
async fn anthropic_tool_results_lead_their_user_turn() {
    // A message recorded between two results still follows them in the user turn.
    let conversation = Conversation::new(vec![
        Item::user("Weather in Paris and Oslo?"),
        assistant(
            None,
            vec![
                call("call_paris", "get_weather", json!({"city": "Paris"})),
                call("call_oslo", "get_weather", json!({"city": "Oslo"})),
            ],
        ),
        tool_result("call_paris", "get_weather", "18°C", false),
        Item::user("Hurry, please."),
        tool_result("call_oslo", "get_weather", "9°C", false),
    ]);
    let received = anthropic_request(&conversation).await;
    let messages = &received.body["messages"];

    assert_alternating(messages);
    assert_eq!(roles(messages), ["user", "assistant", "user"]);
    assert_eq!(block_types(&messages[1]), ["tool_use", "tool_use"]);
    let turn = &messages[2];
    assert_eq!(block_types(turn), ["tool_result", "tool_result", "text"]);
    assert_eq!(turn["content"][0]["tool_use_id"], "call_paris");
    assert_eq!(turn["content"][1]["tool_use_id"], "call_oslo");
    assert_eq!(turn["content"][2]["text"], "Hurry, please.");
    // The cache breakpoint goes on the last block, wherever the reordering put it.
    assert_eq!(
        turn["content"][2]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[tokio::test]
async fn anthropic_empty_assistant_turn_keeps_roles_alternating() {
    // The runtime records an empty completion as an assistant turn without text or calls.
    let conversation = Conversation::new(vec![
        Item::user("Hello?"),
        assistant(None, vec![]),
        Item::user("Are you there?"),
    ]);
    let received = anthropic_request(&conversation).await;
    let messages = &received.body["messages"];

    assert_alternating(messages);
    for message in messages.as_array().unwrap() {
        assert!(!block_types(message).is_empty(), "{messages}");
    }
}

/// The messages with every `arguments` string replaced by the JSON it holds (checking it is a
/// string holding JSON).
fn with_parsed_arguments(messages: &Value) -> Value {
    let mut messages = messages.clone();
    for message in messages.as_array_mut().unwrap() {
        let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) else {
            continue;
        };
        for call in calls {
            let arguments = &mut call["function"]["arguments"];
            let text = arguments.as_str().expect("arguments are a JSON string");
            *arguments = serde_json::from_str(text).unwrap();
        }
    }
    messages
}

#[tokio::test]
async fn openai_request_headers_system_and_tools() {
    let received = openai_request(&weather_conversation()).await;
    let body = &received.body;

    assert_eq!(received.path, "/v1/chat/completions");
    let bearer = format!("Bearer {API_KEY}");
    assert_eq!(received.header("authorization"), Some(bearer.as_str()));
    assert_eq!(received.header("content-type"), Some("application/json"));
    assert_eq!(received.header("x-api-key"), None);

    assert_eq!(body["model"], "gpt-4.1-mini");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_completion_tokens"], 16384);
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": SYSTEM})
    );

    let tools = body["tools"].as_array().unwrap();
    assert!(tools.iter().all(|t| t["type"] == "function"), "{tools:?}");
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["get_weather", "search", INJECTED_TOOL]);
    let weather = weather_tool();
    assert_eq!(
        tools[0]["function"],
        json!({"name": weather.name, "description": weather.description, "parameters": weather.input_schema})
    );
    assert_eq!(
        tools[1]["function"]["parameters"],
        search_tool().input_schema
    );
    assert_eq!(tools[2]["function"]["parameters"]["type"], "object");
}

#[tokio::test]
async fn openai_request_messages() {
    let received = openai_request(&weather_conversation()).await;
    let messages = &received.body["messages"];

    assert_eq!(
        with_parsed_arguments(messages),
        json!([
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "What's the weather in Paris and Oslo?"},
            {"role": "assistant", "content": "Let me check both.", "tool_calls": [
                {"id": "call_paris", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                {"id": "call_oslo", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
            ]},
            {"role": "tool", "tool_call_id": "call_paris", "content": "18°C, sunny"},
            {"role": "tool", "tool_call_id": "call_oslo", "content": "[error] weather service unavailable"},
            {"role": "user", "content": "Also, is it windy?"},
            {"role": "assistant", "content": "Paris: 18°C and sunny. Oslo: no forecast."},
            {"role": "user", "content": "Thanks. And Rome?"}
        ])
    );
    assert!(!received
        .body
        .to_string()
        .contains("NOTICE FOR THE USER ONLY"));
}

#[tokio::test]
async fn openai_empty_assistant_turn_is_not_sent_with_null_content() {
    // The runtime records an empty completion as an assistant turn without text or calls.
    // OpenAI rejects an assistant message whose content is null unless it has tool calls
    // ("Invalid value for 'content': expected a string, got null."), which would fail every
    // later completion of the thread.
    let conversation = Conversation::new(vec![
        Item::user("Hello?"),
        assistant(None, vec![]),
        Item::user("Are you there?"),
    ]);
    let received = openai_request(&conversation).await;
    let messages = received.body["messages"].as_array().unwrap();

    for message in messages.iter().filter(|m| m["role"] == "assistant") {
        let has_calls = message["tool_calls"]
            .as_array()
            .is_some_and(|calls| !calls.is_empty());
        assert!(
            message["content"].is_string() || has_calls,
            "an assistant message with neither content nor tool calls: {message}"
        );
    }
}
