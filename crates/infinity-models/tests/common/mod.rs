//! A history with every kind of entry an adapter converts, and the comparison of a request body
//! with one written out in `tests/bodies/`; shared by the tests that check the whole body each
//! provider receives.

pub mod validate;

use infinity_agent_core::history::{Image, Item, MessageSource, ToolCall, INJECTED_TOOL};
use infinity_agent_core::ids::{CallId, ThreadId};
use serde_json::{json, Value};

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: CallId::new(id).unwrap(),
        name: name.into(),
        args,
    }
}

fn turn(text: Option<&str>, tool_calls: Vec<ToolCall>, synthetic: bool) -> Item {
    Item::Assistant {
        text: text.map(str::to_owned),
        tool_calls,
        synthetic,
    }
}

fn result(call_id: &str, name: &str, text: &str, is_error: bool, images: Vec<Image>) -> Item {
    Item::ToolResult {
        call_id: CallId::new(call_id).unwrap(),
        name: name.into(),
        text: text.into(),
        is_error,
        images,
        display_as: vec![json!({"kind": "markdown", "text": "SHOWN TO PEOPLE ONLY"})],
    }
}

fn image(media_type: &str, data: &str) -> Image {
    Image {
        media_type: media_type.into(),
        data: data.into(),
    }
}

/// A compacted thread's view: a summary, messages from a person and from the parent (one with
/// characters JSON must escape, one empty), a notice the model must not see, a turn with text
/// and three calls (one whose arguments are not an object), results that succeed, fail and
/// carry images, arriving around a message, an empty turn, a turn with blank text and a call,
/// and an event the runtime injected, whose result ends the conversation.
pub fn varied_history() -> Vec<Item> {
    vec![
        Item::Summary {
            text: "The user wants the weather in three cities.".into(),
            covers: 12,
        },
        Item::user("Weather in \"Oslo\" and Zürich?\n\tAnd a control char: \u{1}, a slash: \\"),
        Item::Message {
            text: "Also check Rome.".into(),
            from: MessageSource::Parent {
                thread_id: ThreadId::new("parent-1").unwrap(),
            },
        },
        Item::Notice {
            text: "NOTICE FOR THE USER ONLY".into(),
            is_error: true,
        },
        turn(
            Some("Let me check all three."),
            vec![
                call(
                    "call_oslo",
                    "get_weather",
                    json!({"city": "Oslo", "unit": "celsius"}),
                ),
                call("call_zurich", "get_weather", json!("Zürich")),
                call(
                    "call_rome",
                    "search",
                    json!({"query": "Rome weather", "limit": 2.5, "deep": {"n": [1, -2, null, true]}}),
                ),
            ],
            false,
        ),
        result("call_oslo", "get_weather", "4°C, snow", false, vec![]),
        Item::user(""),
        result("call_zurich", "get_weather", "unknown city", true, vec![]),
        result(
            "call_rome",
            "search",
            "Two charts.",
            false,
            vec![
                image("image/png", "iVBORw0KGgo="),
                image("image/jpeg", "/9j/4AAQSkZJRg=="),
            ],
        ),
        turn(None, vec![], false),
        turn(
            Some("  \n"),
            vec![call("call_chart", "chart", json!({}))],
            false,
        ),
        result(
            "call_chart",
            "chart",
            "the renderer crashed",
            true,
            vec![image("image/gif", "R0lGODlh")],
        ),
        turn(
            Some("Oslo: 4°C and snow. Rome: see the charts."),
            vec![],
            false,
        ),
        turn(
            None,
            vec![call(
                "call_event",
                INJECTED_TOOL,
                json!({"kind": "report", "from": "child-2"}),
            )],
            true,
        ),
        result(
            "call_event",
            INJECTED_TOOL,
            "Child child-2 reported: done.",
            false,
            vec![],
        ),
    ]
}

/// Fails, printing the body in full, unless `sent` is the JSON of `expected`.
pub fn assert_body(sent: &Value, expected: &str) {
    let expected: Value = serde_json::from_str(expected).unwrap();
    assert!(
        *sent == expected,
        "the body sent differs from the expected one; sent:\n{}",
        serde_json::to_string_pretty(sent).unwrap()
    );
}
