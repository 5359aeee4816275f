//! What the providers refuse, and how the adapters keep clear of it: every body here is judged by
//! the providers' own definitions on the way in ([`crate::replay::server`]), and the tests check what
//! the adapters send in its place (a blank text, an image-only result, an image type the
//! provider does not read, a tool name or call id longer than it takes) and what they read
//! back (our tool names, cumulative usage).

use std::path::Path;

use infinity_agent_core::history::{Image, Item};
use infinity_agent_core::ids::CallId;
use infinity_agent_core::model::ToolSpec;
use infinity_test_support::{ready_or_skip, Tools};
use serde_json::{json, Value};

use crate::common::validate::{assert_valid, Provider};
use crate::replay::fixtures::{
    anthropic, assistant, call, complete, openai, quick_retries, weather_tool, Conversation,
};
use crate::replay::recordings::{
    ANTHROPIC_TEXT, ANTHROPIC_TOOL_CALL, OPENAI_TEXT, OPENAI_TOOL_CALL,
};
use crate::replay::server::{Reply, Server};

#[test]
fn the_golden_bodies_pass_the_providers_definitions() {
    if !ready_or_skip(Tools::Venv) {
        return;
    }
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bodies");
    let mut checked = 0;
    for entry in std::fs::read_dir(&folder).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let provider = Provider::of_file(&name)
            .unwrap_or_else(|| panic!("{name}: a golden body's name starts with its provider"));
        let body: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_valid(provider, &body, &name);
        checked += 1;
    }
    assert!(
        checked >= 6,
        "only {checked} golden bodies in {}",
        folder.display()
    );
}

/// A call to the weather tool whose result is `text` with `images`.
fn result_with(text: &str, images: Vec<Image>) -> Conversation {
    Conversation::new(vec![
        Item::user("Show me the chart."),
        assistant(
            None,
            vec![call("toolu_1", "get_weather", json!({"city": "Paris"}))],
        ),
        Item::ToolResult {
            call_id: CallId::new("toolu_1").unwrap(),
            name: "get_weather".into(),
            text: text.into(),
            is_error: false,
            images,
            display_as: vec![],
        },
    ])
}

fn image(media_type: &str) -> Image {
    Image {
        media_type: media_type.into(),
        data: "iVBORw0KGgo=".into(),
    }
}

/// The body the Anthropic adapter sends for `conversation` to `model`.
async fn sent_to_anthropic(model: &str, conversation: &Conversation) -> Value {
    let server = Server::start(vec![Reply::sse(ANTHROPIC_TEXT)]).await;
    let mut adapter = anthropic(&server, quick_retries(0));
    if model != "claude-sonnet-4-5" {
        adapter = infinity_models::anthropic::AnthropicModel::new(
            model,
            infinity_models::anthropic::AnthropicConfig {
                base_url: server.url.clone(),
                api_key: crate::replay::fixtures::API_KEY.to_owned(),
                request: quick_retries(0),
            },
        );
    }
    complete(&adapter, conversation).await.unwrap();
    server.received().remove(0).body
}

async fn sent_to_openai(conversation: &Conversation) -> Value {
    let server = Server::start(vec![Reply::sse(OPENAI_TEXT)]).await;
    complete(&openai(&server, quick_retries(0)), conversation)
        .await
        .unwrap();
    server.received().remove(0).body
}

/// The content of the tool result in the last user message of an Anthropic body.
fn anthropic_result(body: &Value) -> &Value {
    let last = body["messages"].as_array().unwrap().last().unwrap();
    &last["content"][0]["content"]
}

#[tokio::test]
async fn a_result_with_only_an_image_sends_the_image_alone() {
    let conversation = result_with("", vec![image("image/png")]);

    let anthropic = sent_to_anthropic("claude-sonnet-4-5", &conversation).await;
    let openai = sent_to_openai(&conversation).await;

    // No blank text block beside the image (Anthropic refuses one).
    let content = anthropic_result(&anthropic);
    assert_eq!(content.as_array().unwrap().len(), 1, "{content}");
    assert_eq!(content[0]["type"], "image", "{content}");
    assert_eq!(content[0]["source"]["media_type"], "image/png");
    // OpenAI reads the note alone, without an empty line before it.
    let tool = &openai["messages"][3];
    assert_eq!(tool["role"], "tool");
    let text = tool["content"].as_str().unwrap();
    assert!(text.starts_with("[image: image/png"), "{text}");
}

#[tokio::test]
async fn a_blank_result_says_it_had_no_output() {
    let conversation = result_with("  \n", vec![]);

    let anthropic = sent_to_anthropic("claude-sonnet-4-5", &conversation).await;
    let openai = sent_to_openai(&conversation).await;

    assert_eq!(anthropic_result(&anthropic), "(no output)");
    assert_eq!(openai["messages"][3]["content"], "(no output)");
}

#[tokio::test]
async fn an_image_type_the_provider_does_not_read_becomes_a_note() {
    let conversation = result_with(
        "Two drawings.",
        vec![image("image/svg+xml"), image("image/webp")],
    );

    let body = sent_to_anthropic("claude-sonnet-4-5", &conversation).await;

    let content = anthropic_result(&body);
    let kinds: Vec<&str> = content
        .as_array()
        .unwrap()
        .iter()
        .map(|block| block["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["text", "text", "image"], "{content}");
    let note = content[1]["text"].as_str().unwrap();
    assert!(
        note.contains("image/svg+xml") && note.contains("not shown"),
        "{note}"
    );
    assert_eq!(content[2]["source"]["media_type"], "image/webp");
}

#[tokio::test]
async fn a_conversation_that_starts_with_the_model_gets_a_user_turn_first() {
    let conversation = Conversation::new(vec![assistant(Some("Good morning."), vec![])]);

    let body = sent_to_anthropic("claude-sonnet-4-5", &conversation).await;

    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant"]);
}

/// A tool whose name no provider takes: 100 characters, a dot among them.
fn long_named_tool() -> ToolSpec {
    let name = format!("acme.inventory_{}_list_every_warehouse", "x".repeat(70));
    ToolSpec {
        name,
        ..weather_tool()
    }
}

#[tokio::test]
async fn a_long_tool_name_is_sent_as_one_the_provider_takes_and_read_back_as_ours() {
    let tool = long_named_tool();
    let conversation = Conversation::hello().with_tools(vec![tool.clone(), weather_tool()]);

    // What each adapter calls the tool on the wire (the servers check the names are valid).
    let anthropic_name = sent_to_anthropic("claude-sonnet-4-5", &conversation).await["tools"][0]
        ["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let openai_name = sent_to_openai(&conversation).await["tools"][0]["function"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        anthropic_name, openai_name,
        "one mapping for every provider"
    );
    let wire = anthropic_name;
    assert!(wire.len() <= 64 && wire != tool.name, "{wire}");
    assert!(wire.starts_with("acme_inventory_xxx"), "{wire}");

    // The model calls the tool by that name; the completion names our tool.
    let server = Server::start(vec![Reply::sse(
        &ANTHROPIC_TOOL_CALL.replace("\"get_weather\"", &format!("\"{wire}\"")),
    )])
    .await;
    let completion = complete(&anthropic(&server, quick_retries(0)), &conversation)
        .await
        .unwrap();
    assert_eq!(completion.tool_calls[0].name, tool.name);
    let server = Server::start(vec![Reply::sse(
        &OPENAI_TOOL_CALL.replace("\"get_weather\"", &format!("\"{wire}\"")),
    )])
    .await;
    let completion = complete(&openai(&server, quick_retries(0)), &conversation)
        .await
        .unwrap();
    assert_eq!(completion.tool_calls[0].name, tool.name);

    // Our name stays in the history; later requests send the same wire name for its calls.
    let id = "toolu_01T1x1fJ34qAmk2tNTrN7Up6";
    let later = Conversation::new(vec![
        Item::user("Where are the warehouses?"),
        assistant(None, vec![call(id, &tool.name, json!({"city": "Paris"}))]),
        crate::replay::fixtures::tool_result(id, &tool.name, "Oslo and Lyon.", false),
    ])
    .with_tools(vec![tool.clone()]);
    let body = sent_to_anthropic("claude-sonnet-4-5", &later).await;
    assert_eq!(body["messages"][1]["content"][0]["name"], wire.as_str());
    let body = sent_to_openai(&later).await;
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["name"],
        wire.as_str()
    );
}

#[tokio::test]
async fn a_call_id_longer_than_openai_takes_is_cut_the_same_in_call_and_result() {
    let id = format!("toolu_{}", "a1".repeat(40));
    let conversation = Conversation::new(vec![
        Item::user("Weather?"),
        assistant(
            None,
            vec![call(&id, "get_weather", json!({"city": "Oslo"}))],
        ),
        crate::replay::fixtures::tool_result(&id, "get_weather", "4°C", false),
    ]);

    let body = sent_to_openai(&conversation).await;

    let sent = body["messages"][2]["tool_calls"][0]["id"].as_str().unwrap();
    assert!(sent.len() <= 40, "{sent}");
    assert_eq!(body["messages"][3]["tool_call_id"], sent);
}

#[tokio::test]
async fn a_message_between_a_call_and_its_results_follows_the_results_for_openai() {
    let conversation = Conversation::new(vec![
        Item::user("Weather in Oslo and Rome?"),
        assistant(
            None,
            vec![
                call("call_oslo", "get_weather", json!({"city": "Oslo"})),
                call("call_rome", "get_weather", json!({"city": "Rome"})),
            ],
        ),
        crate::replay::fixtures::tool_result("call_oslo", "get_weather", "4°C", false),
        Item::user("And hurry."),
        crate::replay::fixtures::tool_result("call_rome", "get_weather", "18°C", false),
    ]);

    let body = sent_to_openai(&conversation).await;

    let order: Vec<String> = body["messages"].as_array().unwrap()[1..]
        .iter()
        .map(|m| match m["role"].as_str().unwrap() {
            "tool" => format!("tool {}", m["tool_call_id"].as_str().unwrap()),
            role => role.to_owned(),
        })
        .collect();
    assert_eq!(
        order,
        [
            "user",
            "assistant",
            "tool call_oslo",
            "tool call_rome",
            "user"
        ]
    );
}

#[tokio::test]
async fn anthropic_usage_is_the_last_cumulative_count() {
    // `message_delta` restates the input counts: the estimate at the start gives way to them.
    let reply = ANTHROPIC_TEXT.replace(
        r#""usage":{"output_tokens":15}"#,
        r#""usage":{"input_tokens":31,"cache_creation_input_tokens":1300,"cache_read_input_tokens":3500,"output_tokens":15}"#,
    );
    assert_ne!(reply, ANTHROPIC_TEXT);
    let server = Server::start(vec![Reply::sse(&reply)]).await;

    let completion = complete(
        &anthropic(&server, quick_retries(0)),
        &Conversation::hello(),
    )
    .await
    .unwrap();

    let usage = completion.usage;
    assert_eq!(
        (
            usage.input_tokens,
            usage.cache_write_tokens,
            usage.cache_read_tokens,
            usage.output_tokens
        ),
        (31, 1300, 3500, 15)
    );
}

/// The validator is only as good as what it refuses: each of these breaks one rule of its
/// provider, and each must come back with an error that names where.
#[test]
fn the_validator_refuses_what_the_providers_refuse() {
    if !ready_or_skip(Tools::Venv) {
        return;
    }
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bodies");
    let golden = |name: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(folder.join(name)).unwrap()).unwrap()
    };
    let anthropic = golden("anthropic_varied.json");
    let openai = golden("openai_varied.json");
    let bedrock = golden("bedrock_varied.json");
    let broken = |body: &Value, change: &dyn Fn(&mut Value)| {
        let mut body = body.clone();
        change(&mut body);
        body
    };
    let cases: Vec<(Provider, Value, &str)> = vec![
        (
            Provider::Anthropic,
            broken(&anthropic, &|b| b["temprature"] = json!(0.5)),
            "temprature",
        ),
        (
            Provider::Anthropic,
            broken(&anthropic, &|b| {
                b["messages"][0]["content"][0]["text"] = json!(" ")
            }),
            "messages[0].content[0].text",
        ),
        (
            Provider::Anthropic,
            broken(&anthropic, &|b| b["tools"][0]["name"] = json!("files.read")),
            "tools[0].name",
        ),
        (
            Provider::Anthropic,
            broken(&anthropic, &|b| b["max_tokens"] = json!("many")),
            "max_tokens",
        ),
        (
            Provider::OpenAi,
            broken(&openai, &|b| {
                b["tools"][0]["function"]["name"] = json!("x".repeat(65))
            }),
            "tools[0].function.name",
        ),
        (
            Provider::OpenAi,
            broken(&openai, &|b| b["messages"][1]["role"] = json!("person")),
            "messages[1]",
        ),
        (
            Provider::Bedrock,
            broken(&bedrock, &|b| b["messages"][0]["role"] = json!("assistant")),
            "messages[0].role",
        ),
        (
            Provider::Bedrock,
            broken(&bedrock, &|b| b["inferenceConfig"]["maxTokens"] = json!(0)),
            "inferenceConfig.maxTokens",
        ),
    ];
    for (provider, body, path) in cases {
        let errors = crate::common::validate::errors(provider, &body);
        assert!(
            errors.iter().any(|e| e.starts_with(path)),
            "{provider:?}: expected an error at {path}, got {errors:?}"
        );
    }
}
