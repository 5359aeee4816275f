//! Tools from tool servers in the core: discovered once per conversation and kept on the root's
//! record, offered to the model next to the agent's own, arguments checked against their
//! schema, calls dispatched to the server that offered them; clashes refused and shown. (The
//! HTTP side is tested in `infinity-rap`.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use infinity_agent_core::effect::ServerTarget;
use infinity_agent_core::input::InputBody;
use infinity_agent_core::model::ToolSpec;
use infinity_agent_core::tools::servers::{Discovered, ToolDiscovery, ToolServerConfig};
use serde_json::json;

use crate::behaviour::harness::{assert_in_order, tid, Harness, Setup};

/// Answers discovery from a fixed list (the real client fetches manifests over HTTP).
#[derive(Debug, Default)]
struct FixedDiscovery {
    calls: AtomicUsize,
}

#[async_trait]
impl ToolDiscovery for FixedDiscovery {
    async fn discover(&self, servers: &[ToolServerConfig]) -> Vec<Discovered> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        servers
            .iter()
            .map(|s| Discovered {
                server: s.url.clone(),
                about: None,
                result: if s.url.contains("broken") {
                    Err(
                        infinity_agent_core::tools::servers::DiscoveryError::Refused(
                            "HTTP 500 from the manifest".to_owned(),
                        ),
                    )
                } else {
                    Ok((
                        format!("{}/invoke", s.url),
                        vec![
                            ToolSpec {
                                name: "get_time".to_owned(),
                                description: "The time in a zone.".to_owned(),
                                input_schema: json!({
                                    "type": "object",
                                    "properties": {"timezone": {"type": "string"}},
                                    "required": ["timezone"]
                                }),
                            },
                            ToolSpec {
                                name: "sleep".to_owned(),
                                description: "A clash with the built-in.".to_owned(),
                                input_schema: json!({"type": "object"}),
                            },
                        ],
                    ))
                },
            })
            .collect()
    }
}

const SCRIPT: &str = r#"
rules:
  - when: "^time$"
    reply:
      tool_calls: [{name: get_time, args: {timezone: "Europe/Paris"}}]
  - when: "^bad time$"
    reply:
      tool_calls: [{name: get_time, args: {zone: 3}}]
  - when: "^spawn$"
    reply:
      tool_calls: [{name: spawn_thread, args: {instructions: "ask the time", child_of: "${stack}"}}]
  - thread: child
    when: "Your task: ask the time"
    reply:
      tool_calls: [{name: get_time, args: {timezone: "UTC"}}]
  - reply: {text: "ok"}
"#;

async fn start(discovery: Arc<FixedDiscovery>) -> Harness {
    let mut setup = Setup::new(SCRIPT);
    setup.tool_servers = vec![
        serde_yaml_ng::from_str("http://clock.test").unwrap(),
        serde_yaml_ng::from_str("http://broken.test").unwrap(),
    ];
    setup.discovery = Some(discovery);
    setup.start().await
}

#[tokio::test(start_paused = true)]
async fn a_conversation_discovers_once_and_dispatches_to_the_server() {
    let discovery = Arc::new(FixedDiscovery::default());
    let mut h = start(Arc::clone(&discovery)).await;
    h.say("main", "time").await;
    let lines = h.lines("main");
    // Problems are shown when the conversation starts: the broken server, the clash with `sleep`.
    assert_in_order(
        &lines,
        &["ERROR tool server http://broken.test: no tools loaded: HTTP 500"],
    );
    assert_in_order(
        &lines,
        &["ERROR tool `sleep` of http://clock.test has the name of the built-in tool `sleep`"],
    );
    let invocations = h.dispatcher.invocations.lock().unwrap().clone();
    assert_eq!(invocations.len(), 1, "{invocations:?}");
    assert_eq!(invocations[0].tool, "get_time");
    assert_eq!(invocations[0].args, json!({"timezone": "Europe/Paris"}));
    assert_eq!(
        invocations[0].server,
        Some(ServerTarget {
            base_url: "http://clock.test".to_owned(),
            endpoint: "http://clock.test/invoke".to_owned(),
        })
    );
    // The result comes back through the input queue.
    h.send(
        "main",
        InputBody::ToolResult {
            call_id: invocations[0].call_id.clone(),
            text: "12:00".to_owned(),
            is_error: false,
            subscription: false,
            images: Vec::new(),
            display_as: Vec::new(),
        },
    )
    .await;
    assert_in_order(
        &h.lines("main"),
        &["result get_time: 12:00", "assistant: ok"],
    );
    // A child of the conversation uses the root's toolset; nothing is discovered again.
    h.say("main", "spawn").await;
    let invocations = h.dispatcher.invocations.lock().unwrap().clone();
    assert_eq!(invocations.len(), 2, "{invocations:?}");
    assert_eq!(invocations[1].args, json!({"timezone": "UTC"}));
    assert_eq!(discovery.calls.load(Ordering::SeqCst), 1);
    // The toolset is on the root's record; a new conversation discovers afresh.
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    let toolset = record.conversation.toolset.unwrap();
    assert_eq!(toolset.tools.len(), 1);
    assert_eq!(toolset.problems.len(), 2);
    h.say("other", "hello").await;
    assert_eq!(discovery.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn arguments_are_checked_against_the_input_schema_before_dispatch() {
    let mut h = start(Arc::new(FixedDiscovery::default())).await;
    h.say("main", "bad time").await;
    assert!(h.dispatcher.invocations.lock().unwrap().is_empty());
    assert_in_order(
        &h.lines("main"),
        &[
            "error get_time: Error: invalid arguments for `get_time`: \"timezone\" is a required property",
            "assistant: ok",
        ],
    );
}
