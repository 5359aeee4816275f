use serde_json::json;

use super::*;
use crate::state::ParentLink;

fn tid(id: &str) -> ThreadId {
    ThreadId::new(id).unwrap()
}

fn input(thread: &str, body: serde_json::Value) -> Input {
    let mut value = body;
    value["id"] = json!(format!("in-{}", value["type"].as_str().unwrap()));
    value["thread_id"] = json!(thread);
    serde_json::from_value(value).unwrap()
}

fn message(thread: &str, agent: Option<&str>) -> Input {
    let mut body = json!({"type": "user_message", "text": "hi"});
    if let Some(agent) = agent {
        body["agent"] = json!(agent);
    }
    input(thread, body)
}

fn seed(thread: &str, parent: &str, lineage: &[&str]) -> Input {
    input(
        thread,
        json!({
            "type": "child_seed",
            "agent": "helper",
            "parent": {"thread_id": parent, "call_id": "c1", "tool": "spawn_thread", "args": {}, "fork_at": 3},
            "parent_stack": lineage,
            "seed": [],
            "depth": 0,
        }),
    )
}

fn record(id: &str, agent: &str, parent: Option<(&str, &[&str])>) -> ThreadRecord {
    let parent = parent.map(|(p, lineage)| {
        (
            ParentLink {
                thread_id: tid(p),
                call_id: crate::ids::CallId::new("c1").unwrap(),
                tool: "spawn_thread".into(),
                args: json!({}),
                fork_at: 3,
                summary: None,
            },
            lineage.iter().map(|t| tid(t)).collect(),
        )
    });
    ThreadRecord::new(tid(id), agent, parent, jiff::Timestamp::UNIX_EPOCH)
}

#[test]
fn a_first_message_creates_a_root_with_the_agent_it_names_or_the_hosts() {
    let named = [message("main", Some("writer@2"))];
    let plan = SlicePlan::of(None, &named, Some("helper"));
    assert_eq!(plan.agent, Some("writer@2"));
    assert_eq!(plan.starts_conversation, Some("writer@2"));
    assert!(!plan.delegated);
    assert_eq!((plan.root, plan.fork, plan.move_to), (None, None, None));

    let unnamed = [message("main", None)];
    let plan = SlicePlan::of(None, &unnamed, Some("helper"));
    assert_eq!(plan.starts_conversation, Some("helper"));
    // Without a default agent nothing creates the thread (the engine says why).
    let plan = SlicePlan::of(None, &unnamed, None);
    assert_eq!((plan.agent, plan.starts_conversation), (None, None));
}

#[test]
fn a_delegated_task_starts_a_conversation_and_a_child_seed_shares_its_roots() {
    let task = [input(
        "d-1",
        json!({
            "type": "delegated_task",
            "agent": "researcher",
            "delegated_by": {"thread_id": "main", "call_id": "c9", "conversation": "main"},
            "depth": 1,
            "text": "look it up",
        }),
    )];
    let plan = SlicePlan::of(None, &task, Some("helper"));
    assert!(plan.delegated);
    assert_eq!(plan.agent, Some("researcher"));
    assert_eq!(plan.starts_conversation, Some("researcher"));

    let child = [seed("main-1", "main", &["main"])];
    let plan = SlicePlan::of(None, &child, Some("helper"));
    assert_eq!(plan.agent, Some("helper"));
    assert_eq!(plan.starts_conversation, None);
    assert_eq!(plan.root, Some(&tid("main")));
    assert_eq!(
        plan.fork.map(|p| (p.thread_id.as_str(), p.fork_at)),
        Some(("main", 3))
    );
}

#[test]
fn a_threads_record_wins_over_what_the_inputs_name() {
    let root = record("main", "writer@1", None);
    let batch = [message("main", Some("other")), seed("main", "x", &["x"])];
    let plan = SlicePlan::of(Some(&root), &batch, Some("helper"));
    assert_eq!(plan.agent, Some("writer@1"));
    assert_eq!(plan.starts_conversation, None);
    assert_eq!((plan.root, plan.fork), (None, None));

    let child = record("main-1", "writer@1", Some(("main", &["main"])));
    let plan = SlicePlan::of(Some(&child), &[], None);
    assert_eq!(plan.root, Some(&tid("main")));
}

#[test]
fn the_models_to_make_ready_are_the_switched_one_and_the_ones_switched_to() {
    let mut root = record("main", "writer", None);
    root.model = Some("openai:gpt-4.1".into());
    let batch = [
        input(
            "main",
            json!({"type": "use_model", "model": "anthropic:claude"}),
        ),
        input("main", json!({"type": "use_model"})),
    ];
    let plan = SlicePlan::of(Some(&root), &batch, None);
    assert_eq!(plan.models, ["openai:gpt-4.1", "anthropic:claude"]);
}

#[test]
fn a_move_is_made_only_to_a_ready_version_of_the_threads_own_agent() {
    let root = record("main", "writer@1", None);
    let batch = [
        input("main", json!({"type": "use_agent", "agent": "writer@2"})),
        input("main", json!({"type": "use_agent", "agent": "writer@3"})),
    ];
    let plan = SlicePlan::of(Some(&root), &batch, None);
    // The batch's last move is the one asked for.
    assert_eq!(plan.move_to, Some("writer@3"));
    let settled = plan.settle(Some(&root), |_| true);
    assert_eq!(
        settled,
        Settled {
            agent: Some("writer@3"),
            moved_to: Some("writer@3"),
            discovers: Some("writer@3"),
        }
    );
    // A version the host could not make ready: the thread keeps its own.
    let settled = plan.settle(Some(&root), |_| false);
    assert_eq!((settled.agent, settled.moved_to), (Some("writer@1"), None));
    assert_eq!(settled.discovers, None);

    // Another agent's name is refused by the engine; nothing is made ready for it.
    let other = [input(
        "main",
        json!({"type": "use_agent", "agent": "reader@1"}),
    )];
    let plan = SlicePlan::of(Some(&root), &other, None);
    let settled = plan.settle(Some(&root), |_| true);
    assert_eq!((settled.agent, settled.moved_to), (Some("writer@1"), None));

    // A child moves, but the conversation's tools stay its root's.
    let child = record("main-1", "writer@1", Some(("main", &["main"])));
    let plan = SlicePlan::of(Some(&child), &batch, None);
    let settled = plan.settle(Some(&child), |_| true);
    assert_eq!(settled.moved_to, Some("writer@3"));
    assert_eq!(settled.discovers, None);
}
