//! The `widget` internal tool: validated UI, shown to the user, actions back as input.

use crate::behaviour::harness::{assert_in_order, start};
use infinity_agent_core::input::InputBody;

const SCRIPT: &str = r#"
rules:
  - thread: child
    when: "Your thread ID is"
    reply:
      tool_calls: [{name: widget, args: {ui: {type: ui, children: [{type: text, text: hi}]}}}]
  - when: "^show$"
    reply:
      tool_calls:
        - name: widget
          args:
            ui:
              type: ui
              title: Order
              children:
                - {type: select, name: flavour, options: [chocolate, lemon]}
                - {type: button, label: Order, action: order}
  - when: "^broken$"
    reply:
      tool_calls:
        - name: widget
          args: {ui: {type: ui, children: [{type: text, text: ok}, {type: button, label: Go}]}}
  - when: "^spawn$"
    reply:
      tool_calls: [{name: spawn_thread, args: {instructions: "x", child_of: "${stack}"}}]
  - when: "pressed `order` with (.*)\\."
    reply: {text: "Ordering $1"}
  - reply: {text: "ok"}
"#;

#[tokio::test(start_paused = true)]
async fn a_valid_widget_is_shown_and_its_action_comes_back() {
    let mut h = start(SCRIPT).await;
    h.say("main", "show").await;
    assert_in_order(
        &h.lines("main"),
        &[
            "widget {\"children\":",
            "\"action\":\"order\"",
            "result widget: The widget is shown to the user.",
        ],
    );
    let mut values = serde_json::Map::new();
    values.insert("flavour".into(), serde_json::json!("lemon"));
    h.send(
        "main",
        InputBody::WidgetAction {
            action: "order".into(),
            values,
        },
    )
    .await;
    assert_in_order(
        &h.lines("main"),
        &[
            "user: [widget] The user pressed `order` with {\"flavour\":\"lemon\"}.",
            "assistant: Ordering {\"flavour\":\"lemon\"}",
        ],
    );
}

#[tokio::test(start_paused = true)]
async fn an_invalid_widget_names_the_bad_node_and_children_are_not_offered_it() {
    let mut h = start(SCRIPT).await;
    h.say("main", "broken").await;
    let lines = h.lines("main");
    let error = lines
        .iter()
        .find(|l| l.starts_with("error widget:"))
        .unwrap();
    assert!(error.contains("/ui/children/1"), "{error}");
    assert!(!lines.iter().any(|l| l.starts_with("widget ")));
    h.say("main", "spawn").await;
    let child = h.children("main").pop().unwrap();
    assert_in_order(
        &h.lines(&child),
        &["error widget: Error: `widget` shows UI to a person, so only the top-level thread"],
    );
}
