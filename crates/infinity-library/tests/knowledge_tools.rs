//! The `knowledge` category on the embedded runtime: saving an entry in one conversation and
//! finding it from another, loading it whole, the type filter, and the errors that name what was
//! wrong. The registry is the host's (here a store in memory), not a conversation's.

use std::sync::Arc;

use infinity_agent_core::library::Library;
use infinity_agent_core::tools::internal::InternalTools;
use infinity_library::knowledge::{KnowledgeStore, MemoryKnowledgeStore};
use infinity_library::LibraryExt;

use infinity_agent_core::testing::harness::{assert_in_order, Setup};

const SCRIPT: &str = r#"
rules:
  - when: "^remember (.+)$"
    reply:
      tool_calls:
        - name: knowledge_save
          args: {name: "Tide tables", type: reference, description: "Where the tide times are.",
                 content: "$1", tags: [sea, tides]}
  - when: "^note (.+)$"
    reply:
      tool_calls: [{name: knowledge_save, args: {name: "$1", content: "Noted: $1"}}]
  - when: "^find (.+) of type (.+)$"
    reply:
      tool_calls: [{name: knowledge_search, args: {query: "$1", type: "$2"}}]
  - when: "^find (.+)$"
    reply:
      tool_calls: [{name: knowledge_search, args: {query: "$1"}}]
  - when: "^load (.+)$"
    reply:
      tool_calls: [{name: knowledge_get, args: {name: "$1"}}]
  - when: "^bad files$"
    reply:
      tool_calls: [{name: knowledge_save, args: {name: "x", content: "y", files: ["a.md"]}}]
  - reply: {text: "ok"}
"#;

async fn start(store: Arc<MemoryKnowledgeStore>) -> infinity_agent_core::testing::harness::Harness {
    let mut setup = Setup::new(SCRIPT);
    setup.categories = infinity_library::categories();
    setup.internal_tools = InternalTools::builder().flag("knowledge", true).build();
    setup.library = Some(Library::new().with_knowledge(store as Arc<dyn KnowledgeStore>, None));
    setup.start().await
}

#[tokio::test(start_paused = true)]
async fn saved_knowledge_is_found_from_another_conversation() {
    let store = Arc::new(MemoryKnowledgeStore::new());
    let mut h = start(Arc::clone(&store)).await;
    h.say("one", "remember the harbour office posts tide times daily")
        .await;
    assert_in_order(
        &h.lines("one"),
        &[
            "call knowledge_save",
            "result knowledge_save: Saved reference `Tide tables`",
        ],
    );
    // Stored, not only held in memory.
    let stored = store.get("tide TABLES").await.unwrap().unwrap();
    assert_eq!(stored.content, "the harbour office posts tide times daily");
    assert_eq!(stored.tags, vec!["sea", "tides"]);
    h.say("two", "note parking is free on sundays").await;
    h.say("two", "find harbour tides").await;
    let lines = h.lines("two");
    let found = lines
        .iter()
        .find(|l| l.starts_with("result knowledge_search"))
        .unwrap();
    assert!(found.contains("\"name\":\"Tide tables\""), "{found}");
    assert!(!found.contains("parking"), "only what matches: {found}");
    h.say("two", "load tide tables").await;
    assert_in_order(
        &h.lines("two"),
        &["result knowledge_get: {\"allowed_tools\":[],\"content\":\"the harbour office posts tide times daily\""],
    );
    // The type filter: the parking note is an observation, not a reference.
    h.say("two", "find parking of type reference").await;
    assert_in_order(
        &h.lines("two"),
        &["result knowledge_search: No knowledge entry matches `parking` (2 entries in all)."],
    );
    h.say("two", "find parking of type observation").await;
    assert_in_order(
        &h.lines("two"),
        &["\"name\":\"parking is free on sundays\""],
    );
}

#[tokio::test(start_paused = true)]
async fn bad_requests_are_errors_that_name_what_was_wrong() {
    let mut h = start(Arc::new(MemoryKnowledgeStore::new())).await;
    h.say("main", "bad files").await;
    h.say("main", "find x of type gossip").await;
    h.say("main", "load nothing here").await;
    let lines = h.lines("main");
    assert_in_order(
        &lines,
        &[
            "error knowledge_save: Error: not saved: files",
            "error knowledge_search: Error: invalid arguments",
            "error knowledge_get: Error: there is no knowledge entry named `nothing here`",
        ],
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_registry_the_tools_say_so() {
    let mut setup = Setup::new(SCRIPT);
    setup.categories = infinity_library::categories();
    setup.internal_tools = InternalTools::builder().flag("knowledge", true).build();
    let mut h = setup.start().await;
    h.say("main", "find tides").await;
    assert_in_order(
        &h.lines("main"),
        &["error knowledge_search: Error: the knowledge registry is not available on this host"],
    );
}
