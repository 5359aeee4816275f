//! Moving a conversation between two stores: what moves, what is armed again, what stays behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;

use super::*;
use crate::history::Item;
use crate::ids::{CallId, SeededIds};
use crate::model::ToolSpec;
use crate::state::{ChildLink, Deadline, DiscoveredTool, ParentLink, PendingCall, Toolset};
use crate::store::MemoryStore;

const NOW: &str = "2026-03-07T17:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

fn id(s: &str) -> ThreadId {
    ThreadId::new(s).unwrap()
}

fn call(s: &str) -> CallId {
    CallId::new(s).unwrap()
}

fn entries(n: u64) -> Vec<HistoryEntry> {
    (0..n)
        .map(|seq| HistoryEntry {
            seq,
            at: now(),
            input_id: None,
            item: Item::user(format!("message {seq}")),
        })
        .collect()
}

async fn put(store: &MemoryStore, mut record: ThreadRecord, history: u64) {
    record.history_len = history;
    record.version = 3;
    store
        .import_thread(&record, &entries(history), &[], None)
        .await
        .unwrap();
}

/// A root with a daily schedule and a dispatched call (its server has a 2 h deadline), and a
/// child sleeping until 18:00, in `store`.
async fn conversation(store: &MemoryStore) {
    let mut root = ThreadRecord::new(id("root"), "a", None, now());
    root.conversation.toolset = Some(Toolset {
        tools: vec![DiscoveredTool {
            server: "http://tools.here:1".into(),
            endpoint: "http://tools.here:1/invoke".into(),
            spec: ToolSpec::new("lookup", "Looks up.", json!({"type": "object"})),
            deadline: Some(Deadline::try_from("2h".to_owned()).unwrap()),
        }],
        problems: vec![],
    });
    root.pending_calls.push(PendingCall {
        call_id: call("c-lookup"),
        tool: "lookup".into(),
        args: json!({}),
        kind: PendingKind::Dispatched,
        issued_at: now(),
        moved_on: false,
        due: None,
        authorizing: false,
        delegated: false,
        trace: None,
        client: None,
        approval: None,
    });
    root.schedules.push(crate::state::Schedule {
        id: "sch-daily".into(),
        message: "good morning".into(),
        rrule: Some("FREQ=DAILY;BYHOUR=9;BYMINUTE=0".into()),
        cron: None,
        timezone: "UTC".into(),
        start: "2026-03-01T00:00".parse().unwrap(),
        until: None,
        count: None,
        fired: 6,
        next: "2026-03-08T09:00:00Z".parse().unwrap(),
    });
    root.children.push(ChildLink {
        thread_id: id("child"),
        call_id: call("c-spawn"),
        tool: "spawn_thread".into(),
        args: json!({}),
        closed: false,
    });
    let link = ParentLink {
        thread_id: id("root"),
        call_id: call("c-spawn"),
        tool: "spawn_thread".into(),
        args: json!({}),
        fork_at: 2,
        summary: None,
    };
    let mut child = ThreadRecord::new(id("child"), "a", Some((link, vec![id("root")])), now());
    child.pending_calls.push(PendingCall {
        call_id: call("c-sleep"),
        tool: "sleep".into(),
        args: json!({}),
        kind: PendingKind::Passive,
        issued_at: now(),
        moved_on: false,
        due: Some("2026-03-07T18:00:00Z".parse().unwrap()),
        authorizing: false,
        delegated: false,
        trace: None,
        client: None,
        approval: None,
    });
    put(store, root, 150).await;
    put(store, child, 4).await;
}

#[tokio::test]
async fn a_conversation_moves_whole_with_its_timers_and_deadlines_armed_again() {
    let here = MemoryStore::new();
    let there = MemoryStore::new();
    conversation(&here).await;

    let ids = begin(&here, &id("root"), "there", now()).await.unwrap();
    assert_eq!(ids, [id("root"), id("child")]);
    for thread in &ids {
        let record = here.load_record(thread).await.unwrap().unwrap();
        assert_eq!(record.migration.unwrap().state, MigrationState::Moving);
    }
    assert_eq!(effects_in_flight(&here, &ids).await.unwrap(), 0);

    let mut bundle = export(&here, &id("root"), &ids).await.unwrap();
    move_servers(
        &mut bundle,
        &BTreeMap::from([("http://tools.here:1".into(), "http://tools.there:2".into())]),
    );
    // Through JSON, as it travels.
    let bundle: Bundle = serde_json::from_slice(&serde_json::to_vec(&bundle).unwrap()).unwrap();
    let err = import(&there, &bundle, &|name| name == "b", &mut SeededIds::new(9))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the destination runs no agent named `a` (thread root uses it); start it with that agent"
    );
    assert!(there.load_record(&id("root")).await.unwrap().is_none());
    let imported = import(&there, &bundle, &|_| true, &mut SeededIds::new(1))
        .await
        .unwrap();

    let root = there.load_record(&id("root")).await.unwrap().unwrap();
    assert!(root.migration.is_none());
    assert_eq!(root.pending_calls.len(), 1);
    let tool = &root.conversation.toolset.as_ref().unwrap().tools[0];
    assert_eq!(tool.server, "http://tools.there:2");
    assert_eq!(tool.endpoint, "http://tools.there:2/invoke");
    assert_eq!(
        there.load_entries(&id("root"), 150).await.unwrap().len(),
        150
    );
    let child = there.load_record(&id("child")).await.unwrap().unwrap();
    assert_eq!(child.parent.as_ref().unwrap().thread_id, id("root"));

    let armed: Vec<(String, String, Timestamp)> = imported
        .iter()
        .flat_map(|(thread, effects)| effects.iter().map(move |e| (thread, e)))
        .map(|(thread, e)| match &e.effect {
            Effect::SendAt { input, due } => (thread.to_string(), input.id.to_string(), *due),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    let occurrence: Timestamp = "2026-03-08T09:00:00Z".parse().unwrap();
    assert_eq!(
        armed,
        [
            (
                "root".to_owned(),
                InputId::derived("sch-daily", &occurrence.as_second().to_string()).to_string(),
                occurrence
            ),
            (
                "root".to_owned(),
                InputId::derived("c-lookup", "deadline").to_string(),
                "2026-03-07T19:00:00Z".parse().unwrap()
            ),
            (
                "child".to_owned(),
                InputId::derived("c-sleep", "wake").to_string(),
                "2026-03-07T18:00:00Z".parse().unwrap()
            ),
        ]
    );
    // The timers are in the destination's outbox, so a crash before they are armed arms
    // them at the next start.
    assert_eq!(there.outbox().await.unwrap().len(), 3);

    // The same bundle again imports nothing; a different thread by that id is refused.
    assert!(import(&there, &bundle, &|_| true, &mut SeededIds::new(2))
        .await
        .unwrap()
        .is_empty());
    let mut other = bundle.clone();
    other.threads[0].record.title = Some("another conversation".into());
    let err = import(&there, &other, &|_| true, &mut SeededIds::new(3))
        .await
        .unwrap_err();
    assert!(matches!(err, MigrationError::Exists(t) if t == id("root")));
}

#[tokio::test]
async fn finishing_forwards_what_was_held_and_leaves_tombstones() {
    let here = MemoryStore::new();
    conversation(&here).await;
    let ids = begin(&here, &id("root"), "there", now()).await.unwrap();
    // An input held while moving (as a slice holds it).
    let mut root = here.load_record(&id("root")).await.unwrap().unwrap();
    let held = Input::new(
        id("root"),
        InputBody::tool_result(call("c-lookup"), "found"),
    );
    root.held.push(serde_json::to_value(&held).unwrap());
    let version = root.version;
    root.version += 1;
    here.commit(&Commit {
        thread_id: id("root"),
        expected_version: Some(version),
        record: root,
        new_entries: vec![],
        processed_inputs: vec![held.id.clone()],
        effects: vec![],
        events: Vec::new(),
    })
    .await
    .unwrap();

    let forward: BTreeMap<ThreadId, String> = ids
        .iter()
        .map(|t| (t.clone(), format!("http://there/rap/forward/{t}?sig=00")))
        .collect();
    let commits = finish(&here, &ids, &forward).await.unwrap();
    let root_commit = &commits[0];
    let forwarded: Vec<&Effect> = root_commit.effects.iter().map(|e| &e.effect).collect();
    assert_eq!(
        forwarded,
        [&Effect::Forward {
            url: "http://there/rap/forward/root?sig=00".into(),
            input: held
        }]
    );
    let root = here.load_record(&id("root")).await.unwrap().unwrap();
    assert!(root.held.is_empty());
    assert_eq!(
        root.migration.as_ref().unwrap().forward_url(),
        Some("http://there/rap/forward/root?sig=00")
    );
    // A moved conversation cannot start moving again.
    let err = begin(&here, &id("root"), "elsewhere", now())
        .await
        .unwrap_err();
    assert!(
        matches!(err, MigrationError::AlreadyMoving { state: "moved", .. }),
        "{err}"
    );
}

#[tokio::test]
async fn only_a_whole_open_conversation_moves() {
    let here = MemoryStore::new();
    conversation(&here).await;
    let err = begin(&here, &id("child"), "there", now())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "thread child cannot move on its own: it is a child of root; move the root thread of its conversation"
    );
    let err = begin(&here, &id("nobody"), "there", now())
        .await
        .unwrap_err();
    assert!(matches!(err, MigrationError::UnknownThread(_)));

    // A move that cannot begin (a child is moving already) leaves no thread moving.
    let mut child = here.load_record(&id("child")).await.unwrap().unwrap();
    child.migration = Some(Migration {
        to: "elsewhere".into(),
        since: now(),
        state: MigrationState::Moving,
    });
    let version = child.version;
    child.version += 1;
    here.commit(&Commit {
        thread_id: id("child"),
        expected_version: Some(version),
        record: child.clone(),
        new_entries: vec![],
        processed_inputs: vec![],
        effects: vec![],
        events: Vec::new(),
    })
    .await
    .unwrap();
    let err = begin(&here, &id("root"), "there", now()).await.unwrap_err();
    assert!(
        matches!(
            err,
            MigrationError::AlreadyMoving {
                state: "moving",
                ..
            }
        ),
        "{err}"
    );
    let root = here.load_record(&id("root")).await.unwrap().unwrap();
    assert!(root.migration.is_none(), "the root was left moving");
    child.migration = None;
    child.version += 1;
    here.commit(&Commit {
        thread_id: id("child"),
        expected_version: Some(child.version - 1),
        record: child,
        new_entries: vec![],
        processed_inputs: vec![],
        effects: vec![],
        events: Vec::new(),
    })
    .await
    .unwrap();

    // An abandoned move leaves the conversation as it was, and a nudge for what it held.
    let ids = begin(&here, &id("root"), "there", now()).await.unwrap();
    let commits = abort(&here, &ids, &mut SeededIds::new(1)).await.unwrap();
    assert!(
        commits.iter().all(|c| c.effects.is_empty()),
        "nothing was held"
    );
    for thread in &ids {
        assert!(here
            .load_record(thread)
            .await
            .unwrap()
            .unwrap()
            .migration
            .is_none());
    }
    assert!(begin(&here, &id("root"), "there", now()).await.is_ok());
}

#[tokio::test]
async fn a_conversation_comes_back_to_the_host_it_left() {
    let here = MemoryStore::new();
    let there = MemoryStore::new();
    conversation(&here).await;
    let forward = |host: &str| -> BTreeMap<ThreadId, String> {
        ["root", "child"]
            .iter()
            .map(|t| (id(t), format!("http://{host}/rap/forward/{t}?sig=00")))
            .collect()
    };

    let ids = begin(&here, &id("root"), "there", now()).await.unwrap();
    let bundle = export(&here, &id("root"), &ids).await.unwrap();
    import(&there, &bundle, &|_| true, &mut SeededIds::new(1))
        .await
        .unwrap();
    finish(&here, &ids, &forward("there")).await.unwrap();
    let tombstone = here.load_record(&id("root")).await.unwrap().unwrap();

    // The conversation goes on there: two more entries.
    let mut root = there.load_record(&id("root")).await.unwrap().unwrap();
    let more: Vec<HistoryEntry> = entries(152).split_off(150);
    root.history_len = 152;
    let version = root.version;
    root.version += 1;
    there
        .commit(&Commit {
            thread_id: id("root"),
            expected_version: Some(version),
            record: root,
            new_entries: more,
            processed_inputs: vec![],
            effects: vec![],
            events: Vec::new(),
        })
        .await
        .unwrap();

    // And back.
    let ids = begin(&there, &id("root"), "here", now()).await.unwrap();
    let bundle = export(&there, &id("root"), &ids).await.unwrap();
    let imported = import(&here, &bundle, &|_| true, &mut SeededIds::new(2))
        .await
        .unwrap();
    assert_eq!(imported.len(), 2);
    let root = here.load_record(&id("root")).await.unwrap().unwrap();
    assert!(
        root.migration.is_none(),
        "the tombstone took the conversation back"
    );
    assert_eq!(root.history_len, 152);
    assert!(root.version > tombstone.version && root.version > bundle.threads[0].record.version);
    let history = here.load_entries(&id("root"), 152).await.unwrap();
    assert_eq!(history.len(), 152);
    assert_eq!(history[151].item, Item::user("message 151"));
    // The same bundle again changes nothing.
    assert!(import(&here, &bundle, &|_| true, &mut SeededIds::new(3))
        .await
        .unwrap()
        .is_empty());
}
