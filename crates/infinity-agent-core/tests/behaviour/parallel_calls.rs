//! Several dispatched calls in one completion: all go out at once; the next completion runs
//! when every one of them has a result; a message arriving meanwhile is answered at once, the
//! calls' results arriving later as events.

use crate::behaviour::harness::{assert_in_order, count, start, tid};
use infinity_agent_core::input::InputBody;

const SCRIPT: &str = r#"
rules:
  - when: "still there\\?"
    reply: {text: "Yes; the lookup is still running."}
  - when: "^look$"
    reply:
      text: "Looking up two things."
      tool_calls:
        - {name: lookup, args: {q: "a"}}
        - {name: fetch, args: {q: "b"}}
        - {name: set_title, args: {title: "busy"}}
  - scope: newest
    when: "lookup \\{\"q\":\"a\"\\} -> (.*)\\n(?:[\\s\\S]*\\n)?fetch \\{\"q\":\"b\"\\} -> (.*)"
    reply: {text: "Got $1 and $2."}
  - when: "fetch \\{\"q\":\"b\"\\} -> (.*)\\n(?:[\\s\\S]*\\n)?lookup \\{\"q\":\"a\"\\} -> (.*)"
    reply: {text: "Got $2 and $1 (out of order)."}
  - scope: newest
    when: "-> (A)$"
    reply: {text: "The lookup came back: $1."}
"#;

#[tokio::test(start_paused = true)]
async fn parallel_calls_wait_for_every_result() {
    let mut h = start(SCRIPT).await;
    h.say("main", "look").await;
    let calls = h.dispatcher.invocations.lock().unwrap().clone();
    assert_eq!(
        calls.iter().map(|c| c.tool.as_str()).collect::<Vec<_>>(),
        ["lookup", "fetch"]
    );
    assert_eq!(calls[0].lineage, vec![tid("main")]);
    // The synchronous call ran inline; no completion yet.
    assert_eq!(count(&h.lines("main"), "assistant:"), 1);

    // The second result first; still no completion.
    h.send(
        "main",
        InputBody::ToolResult {
            call_id: calls[1].call_id.clone(),
            text: "B".into(),
            is_error: false,
            subscription: false,
            images: Vec::new(),
            display_as: Vec::new(),
        },
    )
    .await;
    assert_eq!(count(&h.lines("main"), "assistant:"), 1);

    h.send(
        "main",
        InputBody::ToolResult {
            call_id: calls[0].call_id.clone(),
            text: "A".into(),
            is_error: false,
            subscription: false,
            images: Vec::new(),
            display_as: Vec::new(),
        },
    )
    .await;
    let lines = h.lines("main");
    assert_eq!(count(&lines, "assistant:"), 2, "{lines:#?}");
    // The model sees both results, in arrival order.
    let history = h.history("main").await;
    assert_in_order(
        &history,
        &[
            "assistant: Looking up two things.",
            "result set_title",
            "result fetch: B",
            "result lookup: A",
            "assistant: Got A and B (out of order).",
        ],
    );
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(record.pending_calls.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_message_is_answered_while_calls_run_and_their_results_come_as_events() {
    let mut h = start(SCRIPT).await;
    h.say("main", "look").await;
    let calls = h.dispatcher.invocations.lock().unwrap().clone();
    h.send(
        "main",
        InputBody::ToolResult {
            call_id: calls[1].call_id.clone(),
            text: "B".into(),
            is_error: false,
            subscription: false,
            images: Vec::new(),
            display_as: Vec::new(),
        },
    )
    .await;
    // A message while `lookup` runs: answered now, not held behind the call.
    h.say("main", "still there?").await;
    let lines = h.lines("main");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Yes; the lookup is still running.")),
        "{lines:#?}"
    );
    // The late result arrives as an event, and is answered.
    h.send(
        "main",
        InputBody::tool_result(calls[0].call_id.clone(), "A"),
    )
    .await;
    let history = h.history("main").await;
    assert_in_order(
        &history,
        &[
            "result fetch: B",
            "result lookup: Still running: new input arrived",
            "message: still there?",
            "assistant: Yes; the lookup is still running.",
            "result receive_event__injected: A",
            "assistant: The lookup came back: A.",
        ],
    );
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(record.deferred.is_empty() && record.pending_calls.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_call_without_a_dispatcher_gets_an_error_result() {
    use infinity_agent_core::agent::AgentSpec;
    use infinity_agent_core::runtime::AgentSystemBuilder;
    use infinity_agent_core::scripted::ScriptedModel;
    use std::sync::Arc;
    let model = ScriptedModel::parse(
        "rules:\n  - when: '^go$'\n    reply: {tool_calls: [{name: lookup, args: {q: x}}]}\n  - reply: {text: recovered}\n",
        std::path::Path::new("s.yaml"),
    )
    .unwrap();
    let system = AgentSystemBuilder::new()
        .with_agent(AgentSpec::new("a", "", Arc::new(model)))
        .with_tool(Arc::new(infinity_agent_core::testing::DispatchedTool(
            "lookup",
        )))
        .with_tokio_sleep_tools()
        .build()
        .await
        .unwrap();
    system.send_user_message(&tid("main"), "go").await.unwrap();
    system.wait_idle(None).await;
    let history: Vec<String> = system
        .view(&tid("main"))
        .await
        .unwrap()
        .iter()
        .map(|e| crate::behaviour::harness::item_line(&e.item))
        .collect();
    assert_in_order(&history, &["error lookup: Error: the call could not be delivered: no tool server is configured to run `lookup`", "assistant: recovered"]);
}

#[tokio::test(start_paused = true)]
async fn images_in_a_result_are_kept_with_it() {
    use infinity_agent_core::history::{Image, Item};
    let mut h = start(SCRIPT).await;
    h.say("main", "look").await;
    let calls = h.dispatcher.invocations.lock().unwrap().clone();
    let image = Image {
        media_type: "image/png".into(),
        data: "iVBORw0KGgo=".into(),
    };
    for (call, text) in calls.iter().zip(["A", "B"]) {
        h.send(
            "main",
            InputBody::ToolResult {
                call_id: call.call_id.clone(),
                text: text.into(),
                is_error: false,
                subscription: false,
                images: vec![image.clone()],
                display_as: Vec::new(),
            },
        )
        .await;
    }
    let view = h.system.view(&tid("main")).await.unwrap();
    let with_images = view
        .iter()
        .filter(|e| matches!(&e.item, Item::ToolResult { images, .. } if images == &vec![image.clone()]))
        .count();
    assert_eq!(with_images, 2);
}
