//! Stored agents in the deployment's table: versions numbered once each under concurrent saves,
//! and a deployment whose default agent is a stored one, its threads keeping their version
//! until a person moves one to another.

use std::sync::Arc;
use std::time::Duration;

use infinity_agent_core::catalog::{AgentCatalog, StoredAgent};
use infinity_aws::catalog::{DynamoAgentCatalog, MAX_AGENT_BYTES};
use infinity_aws::handler::AgentHandler;
use infinity_aws::local::LocalRunner;
use jiff::Timestamp;

use crate::harness::stack;

fn version(dir: &std::path::Path, name: &str, reply: &str) -> StoredAgent {
    let script = format!("{name}-{reply}.script.yaml");
    std::fs::write(
        dir.join(&script),
        format!("rules:\n  - reply: {{text: \"{reply}\"}}\n"),
    )
    .unwrap();
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!("name: {name}\nmodel: script:{script}\ndescription: Says {reply}.\n"),
    )
    .unwrap();
    StoredAgent::read(&path).unwrap()
}

#[tokio::test]
async fn versions_are_numbered_once_each_and_listed_newest() {
    let Some(s) = stack("rules: []").await else {
        return;
    };
    let catalog = Arc::new(DynamoAgentCatalog::new(
        s.clients.dynamodb.clone(),
        s.config.table.clone(),
    ));
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(catalog.get("writer", None).await.unwrap(), None);
    let saves = (0..6).map(|i| {
        let catalog = Arc::clone(&catalog);
        let mut v = version(dir.path(), "writer", "hello");
        v.text.push_str(&format!("# save {i}\n"));
        tokio::spawn(async move { catalog.save(v, Timestamp::now()).await.unwrap().version })
    });
    let mut numbers: Vec<u32> = futures_util::future::join_all(saves)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    numbers.sort_unstable();
    assert_eq!(numbers, vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(
        catalog.versions("writer").await.unwrap(),
        vec![1, 2, 3, 4, 5, 6]
    );
    let newest = catalog.get("writer", None).await.unwrap().unwrap();
    assert_eq!(newest.version, 6);
    let third = catalog.get("writer", Some(3)).await.unwrap().unwrap();
    assert_eq!(third.version, 3);
    assert!(third.text.contains("# save "));
    catalog
        .save(version(dir.path(), "reader", "hi"), Timestamp::now())
        .await
        .unwrap();
    let listed: Vec<String> = catalog
        .list()
        .await
        .unwrap()
        .iter()
        .map(StoredAgent::reference)
        .collect();
    assert_eq!(listed, vec!["reader@1", "writer@6"]);
    // Too big for an item: refused, naming the limit, and nothing stored.
    let mut huge = version(dir.path(), "huge", "x");
    huge.text.push_str(&"#".repeat(MAX_AGENT_BYTES));
    let err = catalog.save(huge, Timestamp::now()).await.unwrap_err();
    assert!(
        err.to_string().contains(&MAX_AGENT_BYTES.to_string()),
        "{err}"
    );
    assert!(catalog.versions("huge").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_deployment_of_stored_agents_keeps_each_thread_on_its_version() {
    let Some(s) = stack("rules: []").await else {
        return;
    };
    let catalog = DynamoAgentCatalog::new(s.clients.dynamodb.clone(), s.config.table.clone());
    let dir = tempfile::tempdir().unwrap();
    catalog
        .save(version(dir.path(), "helper", "v1 here"), Timestamp::now())
        .await
        .unwrap();
    let handler = Arc::new(
        AgentHandler::for_stored(&s.clients, &s.config, "helper".to_owned())
            .with_stored_agents(&[], &infinity_models::CustomProviders::new()),
    );
    let runner = LocalRunner::new(s.clients.clone(), s.config.clone(), handler);
    let replies = |thread: &'static str| {
        let s = &s;
        async move {
            s.stored_history(thread)
                .await
                .into_iter()
                .filter(|l| l.starts_with("assistant"))
                .count()
        }
    };
    let run_until = |thread: &'static str, n: usize| {
        let runner = &runner;
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            while replies(thread).await < n {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "no reply on {thread}"
                );
                if runner.poll_agent_once(Duration::ZERO).await.unwrap() == 0 {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    };
    s.enqueue_message("early", "hello").await;
    run_until("early", 1).await;
    catalog
        .save(version(dir.path(), "helper", "v2 here"), Timestamp::now())
        .await
        .unwrap();
    s.enqueue_message("early", "hello again").await;
    run_until("early", 2).await;
    s.enqueue_message("late", "hello").await;
    run_until("late", 1).await;
    let early = s.stored_history("early").await;
    assert_eq!(
        early.iter().filter(|l| l.contains("v1 here")).count(),
        2,
        "{early:#?}"
    );
    assert!(s.stored_history_has("late", "v2 here").await);
    assert_eq!(s.record("early").await.unwrap().agent, "helper@1");
    assert_eq!(s.record("late").await.unwrap().agent, "helper@2");
    // A person moves the early conversation to the newest version (`infinity use-agent`).
    let use_agent = infinity_agent_core::input::Input::new(
        infinity_agent_core::ids::ThreadId::new("early").unwrap(),
        infinity_agent_core::input::InputBody::UseAgent {
            agent: "helper@2".to_owned(),
        },
    );
    s.send(&use_agent).await;
    s.enqueue_message("early", "and now?").await;
    run_until("early", 3).await;
    assert_eq!(s.record("early").await.unwrap().agent, "helper@2");
    let early = s.stored_history("early").await;
    assert!(
        early
            .iter()
            .any(|l| l.contains("now runs the agent helper@2 (it ran helper@1)")),
        "{early:#?}"
    );
    assert!(early.last().unwrap().contains("v2 here"), "{early:#?}");
}

#[tokio::test]
async fn knowledge_is_kept_in_the_table_and_found_by_agents() {
    use infinity_aws::knowledge::DynamoKnowledgeStore;
    use infinity_library::knowledge::{
        EntryType, KnowledgeEntry, KnowledgeStore, KnowledgeStoreError,
    };

    let Some(s) = stack("rules: []").await else {
        return;
    };
    let store = DynamoKnowledgeStore::new(s.clients.dynamodb.clone(), s.config.table.clone());
    let mut entry = KnowledgeEntry::new("Ferry Times", EntryType::Reference, Timestamp::now());
    entry.content = "The ferry leaves at 7 and 19.".to_owned();
    assert_eq!(store.put(&entry, None).await.unwrap(), 1);
    assert_eq!(store.put(&entry, Some(1)).await.unwrap(), 2);
    // A write that expects an older version is a conflict naming both versions.
    let err = store.put(&entry, Some(1)).await.unwrap_err();
    assert!(
        matches!(
            err,
            KnowledgeStoreError::Conflict {
                expected: 1,
                found: Some(2),
                ..
            }
        ),
        "{err}"
    );
    let read = store.get("ferry times").await.unwrap().unwrap();
    assert_eq!((read.name.as_str(), read.version), ("Ferry Times", 2));
    assert_eq!(store.load_all().await.unwrap().len(), 1);

    // An agent with the knowledge category saves, and another conversation finds what it saved.
    let catalog = DynamoAgentCatalog::new(s.clients.dynamodb.clone(), s.config.table.clone());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("keeper.script.yaml"),
        r#"rules:
  - when: "^remember (.+)$"
    reply:
      tool_calls: [{name: knowledge_save, args: {name: "$1", content: "The user said: $1"}}]
  - when: "^find (.+)$"
    reply:
      tool_calls: [{name: knowledge_search, args: {query: "$1"}}]
  - when: "^catalog (.+)$"
    reply:
      tool_calls: [{name: search_tools, args: {query: "$1"}}]
  - reply: {text: "ok"}
"#,
    )
    .unwrap();
    let path = dir.path().join("keeper.yaml");
    std::fs::write(
        &path,
        "name: keeper\nmodel: script:keeper.script.yaml\ndescription: Keeps notes.\ninternal_tools: {knowledge: true, meta: true}\n",
    )
    .unwrap();
    catalog
        .save(StoredAgent::read(&path).unwrap(), Timestamp::now())
        .await
        .unwrap();
    let handler = Arc::new(
        AgentHandler::for_stored(&s.clients, &s.config, "keeper".to_owned())
            .with_stored_agents(&[], &infinity_models::CustomProviders::new()),
    );
    let runner = LocalRunner::new(s.clients.clone(), s.config.clone(), handler);
    let drive = |thread: &'static str| {
        let (s, runner) = (&s, &runner);
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            while !s.stored_history_has(thread, "assistant: ok").await {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "no reply on {thread}"
                );
                if runner.poll_agent_once(Duration::ZERO).await.unwrap() == 0 {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    };
    s.enqueue_message("saver", "remember the lighthouse opens at dawn")
        .await;
    drive("saver").await;
    let saved = store.get("the lighthouse opens at dawn").await.unwrap();
    assert_eq!(
        saved.map(|e| e.content),
        Some("The user said: the lighthouse opens at dawn".to_owned())
    );
    s.enqueue_message("finder", "find lighthouse").await;
    drive("finder").await;
    let history = s.stored_history("finder").await;
    assert!(
        history
            .iter()
            .any(|l| l.contains("knowledge_search") && l.contains("the lighthouse opens at dawn")),
        "{history:#?}"
    );
    // The meta catalog of the deployment holds its stored agents and its knowledge.
    s.enqueue_message("browser", "catalog lighthouse notes")
        .await;
    drive("browser").await;
    let history = s.stored_history("browser").await;
    let found = history
        .iter()
        .find(|l| l.contains("search_tools") && l.contains("results"))
        .unwrap_or_else(|| panic!("{history:#?}"));
    assert!(
        found.contains("agents/keeper") && found.contains("knowledge/the lighthouse opens at dawn"),
        "{found}"
    );
}
