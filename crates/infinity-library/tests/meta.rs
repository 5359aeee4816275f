//! The `meta` category on the embedded runtime: `search_tools`, `list_tools` and `execute_tool`
//! over the catalog the host keeps (stored agents, their skills, their tool servers as items of
//! the kind `app`, and the knowledge registry): results per kind with a cap, a multi-tool server
//! once, the reference forms, the order `execute_tool` resolves names in, tool servers' functions
//! run as calls to their server, agents delegated to under the `agent` limits, unknown kinds named.

use std::sync::Arc;

use infinity_agent_core::catalog::AgentCatalog;
use infinity_agent_core::input::InputBody;
use infinity_agent_core::library::Library;
use infinity_agent_core::tools::internal::InternalTools;
use infinity_library::knowledge::{
    EntryType, KnowledgeEntry, KnowledgeStore, MemoryKnowledgeStore,
};
use infinity_library::meta::{StoredDirectory, DIRECTORY_REFRESH};
use infinity_library::LibraryExt;
use serde_json::{json, Value};

use infinity_agent_core::testing::harness::Stored;
use infinity_agent_core::testing::harness::{assert_in_order, count, tid, Harness, Servers};

const MAIN: &str = r#"
rules:
  - when: "^find-(\\S+) (.+)$"
    reply:
      tool_calls: [{name: search_tools, args: {query: "$2", kind: "$1"}}]
  - when: "^find (.+)$"
    reply:
      tool_calls: [{name: search_tools, args: {query: "$1", limit: 1}}]
  - when: "^list (.+)$"
    reply:
      tool_calls: [{name: list_tools, args: {names: ["$1"]}}]
  - when: "^run (\\S+) (\\S+) (.+)$"
    reply:
      tool_calls: [{name: execute_tool, args: {name: "$2", kind: "$1", arguments: {timezone: "$3"}}}]
  - when: "^run (\\S+)$"
    reply:
      tool_calls: [{name: execute_tool, args: {name: "$1", arguments: {q: "Brest"}}}]
  - when: "^delegate (\\S+)$"
    reply:
      tool_calls: [{name: execute_tool, args: {name: "$1", arguments: {task: "tides at Brest"}}}]
  - when: "^own (\\S+)$"
    reply:
      tool_calls: [{name: execute_tool, args: {name: "$1"}}]
  - when: "^crowd$"
    reply:
      tool_calls:
        - {name: execute_tool, args: {name: "agents/napper", arguments: {task: "nap"}}}
        - {name: execute_tool, args: {name: "napper", kind: agent, arguments: {task: "nap"}}}
        - {name: execute_tool, args: {name: "agents/napper", arguments: {task: "nap"}}}
  - reply: {text: "ok"}
"#;

const RESEARCHER: &str = r#"
rules:
  - when: "^Task: (.+)"
    reply:
      tool_calls: [{name: finish, args: {status: succeeded, result: "researched $1"}}]
  - reply: {text: "idle"}
"#;

/// A library with the directory of `stored`'s agents and the two servers, as a host keeps it.
fn directory(stored: &Stored) -> Library {
    let source = StoredDirectory::new(
        Arc::clone(&stored.catalog) as Arc<dyn AgentCatalog>,
        Some(Arc::new(Servers)),
    );
    Library::new().with_directory(Arc::new(source), DIRECTORY_REFRESH)
}

async fn start() -> (Harness, Stored) {
    let stored = Stored::with_categories(infinity_library::categories());
    stored
        .save(
            "researcher",
            "tool_servers: ['http://clock.test', 'http://harbours.test']\nskills:\n  - {name: tide-tables, description: Reading tide tables for a harbour, content: 'High water is twice a day.'}\n",
            RESEARCHER,
        )
        .await;
    stored
        .save(
            "napper",
            "tool_servers: ['http://clock.test']\n",
            "rules:\n  - when: \"^Task\"\n    reply:\n      tool_calls: [{name: sleep, args: {seconds: 60}}]\n  - reply: {text: rested}\n",
        )
        .await;
    let knowledge = Arc::new(MemoryKnowledgeStore::new());
    let now = jiff::Timestamp::now();
    let mut units = KnowledgeEntry::new("units", EntryType::Preference, now);
    units.description = "Metric units for tide heights".to_owned();
    units.content = "Give tide heights in metres.".to_owned();
    let mut pilotage = KnowledgeEntry::new("harbour-pilotage", EntryType::Skill, now);
    pilotage.description = "Entering a harbour at low tide".to_owned();
    pilotage.content = "Wait for half tide.".to_owned();
    for entry in [units, pilotage] {
        knowledge.put(&entry, None).await.unwrap();
    }
    let mut setup = stored.setup(MAIN);
    setup.internal_tools = InternalTools::builder().flag("meta", true).build();
    setup.discovery = Some(Arc::new(Servers));
    setup.library = Some(directory(&stored).with_knowledge(knowledge, None));
    (setup.start().await, stored)
}

/// The JSON of the newest result of `tool` in `thread`.
fn result_of(h: &Harness, thread: &str, tool: &str) -> Value {
    let prefix = format!("result {tool}: ");
    let line = h
        .lines(thread)
        .into_iter()
        .rev()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no result of {tool}: {:#?}", h.lines(thread)));
    serde_json::from_str(&line[prefix.len()..]).unwrap()
}

fn names(results: &Value, key: &str) -> Vec<String> {
    results[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn search_ranks_every_kind_with_a_cap_and_shows_a_server_once() {
    let (mut h, _stored) = start().await;
    // One result per kind at most: the tide skill beats the knowledge skill on "tide".
    h.say("main", "find tide harbour researcher time").await;
    let found = result_of(&h, "main", "search_tools");
    let sources: Vec<&str> = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["source"].as_str().unwrap())
        .collect();
    for kind in ["app", "agent", "skill", "knowledge"] {
        assert_eq!(sources.iter().filter(|s| **s == kind).count(), 1, "{found}");
    }
    // Tool servers: each once (its toolset's name), whatever matched among its tools.
    h.say("main", "find-app time").await;
    let servers = names(&result_of(&h, "main", "search_tools"), "results");
    assert_eq!(servers, ["clock.test/world-clock"]);
    h.say("main", "find-skill tide harbour").await;
    let skills = names(&result_of(&h, "main", "search_tools"), "results");
    assert_eq!(
        skills,
        ["researcher/tide-tables", "knowledge/harbour-pilotage"]
    );
    h.say("main", "find-agent harbour").await;
    assert_in_order(
        &h.lines("main"),
        &["Nothing in the directory matches `harbour` among its agent items"],
    );
    h.say("main", "find-flow tides").await;
    assert_in_order(
        &h.lines("main"),
        &[
            "error search_tools: Error: unknown kind `flow` (this runtime has no flows",
            "the kinds are app, agent, skill, knowledge",
        ],
    );
}

#[tokio::test(start_paused = true)]
async fn list_tools_gives_functions_delegation_arguments_and_texts() {
    let (mut h, _stored) = start().await;
    h.say("main", "list clock.test/world-clock").await;
    let tools = result_of(&h, "main", "list_tools");
    assert_eq!(
        names(&tools, "tools"),
        [
            "clock.test/world-clock",
            "clock.test/world-clock:convert_time"
        ]
    );
    assert_eq!(tools["tools"][0]["function"], "get_time");
    assert_eq!(tools["tools"][0]["default"], true);
    assert_eq!(
        tools["tools"][1]["input_schema"]["required"],
        json!(["time"])
    );
    h.say("main", "list agents/researcher").await;
    let agent = &result_of(&h, "main", "list_tools")["tools"][0];
    assert_eq!(agent["source"], "agent");
    assert_eq!(agent["input_schema"]["required"], json!(["task"]));
    assert!(agent["input_schema"]["properties"]["images"].is_object());
    h.say("main", "list tide-tables").await;
    let skill = &result_of(&h, "main", "list_tools")["tools"][0];
    assert_eq!(skill["content"], "High water is twice a day.");
    h.say("main", "list units").await;
    let entry = &result_of(&h, "main", "list_tools")["tools"][0];
    assert_eq!(
        (entry["source"].as_str(), entry["type"].as_str()),
        (Some("knowledge"), Some("preference"))
    );
    // Its own tools too, and a name nothing has is an error entry.
    h.say("main", "list plan_create").await;
    assert_eq!(
        result_of(&h, "main", "list_tools")["tools"][0]["source"],
        "tool"
    );
    h.say("main", "list nowhere").await;
    let missing = result_of(&h, "main", "list_tools");
    assert!(
        missing["tools"][0]["error"]
            .as_str()
            .unwrap()
            .contains("nothing named `nowhere` in the directory"),
        "{missing}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_app_runs_as_a_call_to_its_server_and_waits_for_the_result() {
    let (mut h, _stored) = start().await;
    h.say("main", "run app clock.test/world-clock:convert_time UTC")
        .await;
    // The function's own schema is checked: convert_time needs `time`.
    assert_in_order(
        &h.lines("main"),
        &["error execute_tool: Error: invalid arguments for `clock.test/world-clock:convert_time`"],
    );
    assert!(h.dispatcher.invocations.lock().unwrap().is_empty());
    h.say("main", "run app world-clock Europe/Paris").await;
    let invocation = h.dispatcher.invocations.lock().unwrap()[0].clone();
    assert_eq!(invocation.tool, "get_time");
    assert_eq!(invocation.args, json!({"timezone": "Europe/Paris"}));
    let target = invocation.server.clone().unwrap();
    assert_eq!(
        (target.base_url.as_str(), target.endpoint.as_str()),
        ("http://clock.test", "http://clock.test/invoke")
    );
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(
        record.pending_calls.len(),
        1,
        "the thread waits for the server"
    );
    h.send(
        "main",
        InputBody::tool_result(invocation.call_id.clone(), "14:05"),
    )
    .await;
    assert_in_order(
        &h.lines("main"),
        &["result execute_tool: 14:05", "assistant: ok"],
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_kind_the_first_kind_with_the_name_wins() {
    let (mut h, _stored) = start().await;
    // `researcher` is a tool server (the harbours server's toolset) and an agent: the server's
    // function runs (the kind `app` comes first).
    h.say("main", "run researcher").await;
    let invocations = h.dispatcher.invocations.lock().unwrap().clone();
    assert_eq!(invocations.len(), 1);
    assert_eq!(invocations[0].tool, "lookup");
    assert_eq!(invocations[0].args["q"], "Brest");
    // Named as an agent it is delegated to; its result comes back through the input queue.
    h.say("other", "delegate agents/researcher").await;
    assert_in_order(
        &h.lines("other"),
        &[
            "result execute_tool: The delegated agent finished (succeeded). Result: researched tides at Brest",
            "assistant: ok",
        ],
    );
    let child = h.children("other").pop().unwrap();
    assert_eq!(
        h.system.record(&tid(&child)).await.unwrap().unwrap().agent,
        "researcher@1"
    );
    // A tool the agent has comes before the catalog, and a skill loads as text.
    h.say("third", "own memory_getall").await;
    assert_in_order(&h.lines("third"), &["result execute_tool: "]);
    assert_eq!(count(&h.lines("third"), "error execute_tool"), 0);
    h.say("fourth", "run harbour-pilotage").await;
    assert_in_order(
        &h.lines("fourth"),
        &["result execute_tool: skill knowledge/harbour-pilotage:\n\nWait for half tide."],
    );
}

#[tokio::test(start_paused = true)]
async fn agents_run_through_execute_tool_share_the_fan_out_limit() {
    let (mut h, _stored) = start().await;
    h.say("main", "crowd").await;
    let lines = h.lines("main");
    assert_eq!(h.children("main").len(), 2, "{lines:#?}");
    assert_eq!(
        count(
            &lines,
            "error execute_tool: Error: this conversation already has 2 delegations running"
        ),
        1,
        "{lines:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn agents_run_through_execute_tool_stop_at_depth_three() {
    let (_, stored) = start().await;
    // The diver delegates to itself through the catalog: each delegation goes one deeper.
    stored
        .save(
            "diver",
            "internal_tools: {meta: true}\n",
            r#"
rules:
  - when: "^Task: "
    reply:
      tool_calls: [{name: execute_tool, args: {name: "agents/diver", arguments: {task: "dive"}}}]
  - when: "depth 3"
    reply:
      tool_calls: [{name: finish, args: {status: failed, result: "too deep"}}]
  - reply: {text: "surfaced"}
"#,
        )
        .await;
    let mut setup = stored.setup(MAIN);
    setup.internal_tools = InternalTools::builder().flag("meta", true).build();
    setup.library = Some(directory(&stored));
    let mut h = setup.start().await;
    h.say("main", "delegate agents/diver").await;
    let d1 = h.children("main").pop().unwrap();
    let d2 = h.children(&d1).pop().unwrap();
    let d3 = h.children(&d2).pop().unwrap();
    assert!(h.children(&d3).is_empty(), "depth 3 must not delegate");
    assert_in_order(
        &h.lines(&d3),
        &["error execute_tool: Error: delegation is not available here: this thread is at delegation depth 3"],
    );
    assert_in_order(
        &h.lines("main"),
        &["result execute_tool: ", "assistant: ok"],
    );
}
