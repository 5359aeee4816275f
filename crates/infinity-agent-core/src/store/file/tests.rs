use super::*;
use crate::effect::{Effect, OutputEvent, OutputKind};
use crate::history::Item;
use crate::ids::{CallId, ThreadId};
use jiff::Timestamp;
use std::fs::OpenOptions;
use std::io::Write;

fn id(s: &str) -> ThreadId {
    ThreadId::new(s).unwrap()
}

fn record(thread: &str, version: u64, history_len: u64) -> ThreadRecord {
    let mut record = ThreadRecord::new(id(thread), "a", None, Timestamp::UNIX_EPOCH);
    record.version = version;
    record.history_len = history_len;
    record
}

fn commit(version: Option<u64>, seq: u64, text: &str) -> Commit {
    Commit {
        thread_id: id("t1"),
        expected_version: version,
        record: record("t1", version.map_or(1, |v| v + 1), seq + 1),
        new_entries: vec![HistoryEntry {
            seq,
            at: Timestamp::UNIX_EPOCH,
            input_id: None,
            item: Item::user(text),
        }],
        processed_inputs: vec![InputId::new(format!("in{seq}")).unwrap()],
        effects: Vec::new(),
        events: Vec::new(),
    }
}

fn output(n: u32) -> PendingEffect {
    PendingEffect {
        id: EffectId::new(format!("fx-{n}")).unwrap(),
        effect: Effect::Output {
            event: OutputEvent {
                thread_id: id("t1"),
                seq: None,
                at: Timestamp::UNIX_EPOCH,
                kind: OutputKind::Error {
                    text: format!("event {n}"),
                },
            },
        },
    }
}

fn child(n: u32, closed: bool) -> ChildLink {
    ChildLink {
        thread_id: id(&format!("child-{n}")),
        call_id: CallId::new(format!("spawn-{n}")).unwrap(),
        tool: "spawn_thread".into(),
        args: serde_json::json!({"instructions": "x".repeat(200)}),
        closed,
    }
}

#[tokio::test]
async fn leftovers_of_an_unfinished_commit_are_ignored_and_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    store.commit(&commit(None, 0, "first")).await.unwrap();
    // A crash after appending an entry but before replacing state.json.
    let entries = dir.path().join("threads/t1/entries.jsonl");
    let mut f = OpenOptions::new().append(true).open(&entries).unwrap();
    f.write_all(b"{\"half\": tr").unwrap();
    drop(store);

    let store = FileStore::open(dir.path()).unwrap();
    assert_eq!(store.load_entries(&id("t1"), 10).await.unwrap().len(), 1);
    store.commit(&commit(Some(1), 1, "second")).await.unwrap();
    drop(store);
    let store = FileStore::open(dir.path()).unwrap();
    let texts: Vec<String> = store
        .load_entries(&id("t1"), 10)
        .await
        .unwrap()
        .iter()
        .map(|e| format!("{:?}", e.item))
        .collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts[1].contains("second"));
    let seen = store
        .processed(
            &id("t1"),
            &[InputId::new("in0").unwrap(), InputId::new("in9").unwrap()],
        )
        .await
        .unwrap();
    assert_eq!(seen.len(), 1);
}

#[tokio::test]
async fn a_stale_version_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    store.commit(&commit(None, 0, "first")).await.unwrap();
    let err = store.commit(&commit(None, 0, "again")).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    assert!(err.to_string().contains("version conflict"));
}

#[tokio::test]
async fn one_process_at_a_time_and_the_second_is_told_who_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let first = FileStore::open(dir.path()).unwrap();
    let err = FileStore::open(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("process {}", std::process::id())),
        "{text}"
    );
    // Looking is allowed; writing is not.
    first.commit(&commit(None, 0, "first")).await.unwrap();
    let reader = FileStore::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.thread_ids().await.unwrap(), [id("t1")]);
    assert!(reader.commit(&commit(Some(1), 1, "no")).await.is_err());
    // A waiting opener gets the store once the first lets go.
    let path = dir.path().to_owned();
    let told = Arc::new(Mutex::new(String::new()));
    let note = Arc::clone(&told);
    let waiter = std::thread::spawn(move || {
        FileStore::open_waiting(path, |holder| *note.lock().unwrap() = holder.to_owned())
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        !waiter.is_finished(),
        "it must wait while the store is held"
    );
    drop(first);
    let second = waiter.join().unwrap().unwrap();
    assert!(
        told.lock().unwrap().contains("process"),
        "{}",
        told.lock().unwrap()
    );
    assert_eq!(second.load_entries(&id("t1"), 9).await.unwrap().len(), 1);
}

#[test]
fn a_missing_store_is_not_created_by_looking() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("typo");
    let err = FileStore::open_read_only(&missing).unwrap_err();
    assert!(err.to_string().contains("no store here"), "{err}");
    assert!(!missing.exists());
}

#[tokio::test]
async fn writes_per_commit_do_not_grow_with_children_or_the_outbox() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    let thread = dir.path().join("threads/t1");
    let size = |name: &str| fs::metadata(thread.join(name)).map_or(0, |m| m.len());
    let mut sizes = Vec::new();
    let mut version = None;
    for n in 0..300u32 {
        let mut c = commit(version, n as u64, "spawning");
        c.record.children = (0..=n).map(|i| child(i, false)).collect();
        // Each commit adds one child and one pending effect.
        c.effects = vec![output(n)];
        let before = (size("children.jsonl"), size("outbox.jsonl"));
        store.commit(&c).await.unwrap();
        version = Some(c.record.version);
        sizes.push((
            size("state.json"),
            size("children.jsonl") - before.0,
            size("outbox.jsonl") - before.1,
        ));
    }
    // state.json stays the same size (up to the digits of its counters); each commit appends
    // one child line and one outbox line, whatever came before.
    let (first, last) = (sizes[1], sizes[299]);
    assert!(
        last.0 < first.0 + 40,
        "state.json grew: {first:?} -> {last:?}"
    );
    // (child-1 against child-299: two more digits in its thread and call ids)
    assert!(
        last.1 <= first.1 + 4,
        "one child line per new child: {first:?} -> {last:?}"
    );
    assert!(
        last.2 <= first.2 + 4,
        "one outbox line per commit: {first:?} -> {last:?}"
    );
    // Marking one effect done appends one short line.
    let before = size("outbox.jsonl");
    store
        .complete_effects(&id("t1"), &[EffectId::new("fx-7").unwrap()])
        .await
        .unwrap();
    assert!(size("outbox.jsonl") - before < 40);
    // A change of one child (closed) is one line too.
    let mut c = commit(version, 300, "closing one");
    c.record.children = (0..300).map(|i| child(i, i == 5)).collect();
    let before = size("children.jsonl");
    store.commit(&c).await.unwrap();
    let line = size("children.jsonl") - before;
    assert!(line > first.1 && line < first.1 + 20, "one line: {line} B"); // + `,"closed":true`
    drop(store);

    // Everything reads back: the children with their latest state, the outbox minus the done.
    let store = FileStore::open(dir.path()).unwrap();
    let record = store.load_record(&id("t1")).await.unwrap().unwrap();
    assert_eq!(record.children.len(), 300);
    assert!(record.children[5].closed && !record.children[6].closed);
    let outbox = store.outbox().await.unwrap();
    assert_eq!(outbox.len(), 299);
    assert!(!outbox.iter().any(|(_, e)| e.id.as_str() == "fx-7"));
}

#[tokio::test]
async fn done_lines_after_the_commit_count_and_a_torn_one_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    let mut c = commit(None, 0, "x");
    c.effects = vec![output(1), output(2), output(3)];
    store.commit(&c).await.unwrap();
    store
        .complete_effects(&id("t1"), &[EffectId::new("fx-1").unwrap()])
        .await
        .unwrap();
    drop(store);
    let outbox = dir.path().join("threads/t1/outbox.jsonl");
    let mut f = OpenOptions::new().append(true).open(&outbox).unwrap();
    f.write_all(b"{\"done\":[\"fx-2\"").unwrap(); // torn by a crash
    drop(f);
    let store = FileStore::open(dir.path()).unwrap();
    let left: Vec<String> = store
        .outbox()
        .await
        .unwrap()
        .iter()
        .map(|(_, e)| e.id.to_string())
        .collect();
    assert_eq!(left, ["fx-2", "fx-3"]);
    // Once nothing is pending, the file starts afresh.
    store
        .complete_effects(
            &id("t1"),
            &[
                EffectId::new("fx-2").unwrap(),
                EffectId::new("fx-3").unwrap(),
            ],
        )
        .await
        .unwrap();
    assert_eq!(fs::metadata(&outbox).unwrap().len(), 0);
    drop(store);
    assert!(FileStore::open(dir.path())
        .unwrap()
        .outbox()
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_broken_thread_is_named_and_the_others_load() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    store.commit(&commit(None, 0, "fine")).await.unwrap();
    let mut other = commit(None, 0, "soon broken");
    other.thread_id = id("t2");
    other.record = record("t2", 1, 1);
    store.commit(&other).await.unwrap();
    drop(store);
    fs::write(
        dir.path().join("threads/t2/entries.jsonl"),
        b"\0\0\0\0\0\0\0\0",
    )
    .unwrap();

    let store = FileStore::open(dir.path()).unwrap();
    assert_eq!(store.thread_ids().await.unwrap(), [id("t1")]);
    let broken = store.broken();
    assert_eq!(broken.len(), 1);
    assert_eq!(broken[0].0, "t2");
    // It refuses to run rather than be created afresh over its files.
    let err = store.load_record(&id("t2")).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err}");
    assert!(store.load_record(&id("t1")).await.unwrap().is_some());
}

#[tokio::test]
async fn a_thread_in_the_first_layout_loads_and_moves_to_the_current_one() {
    let dir = tempfile::tempdir().unwrap();
    let thread = dir.path().join("threads/t1");
    fs::create_dir_all(&thread).unwrap();
    let mut old = record("t1", 1, 1);
    old.children = vec![child(0, false)];
    let entry = serde_json::to_string(&HistoryEntry {
        seq: 0,
        at: Timestamp::UNIX_EPOCH,
        input_id: None,
        item: Item::user("from before"),
    })
    .unwrap()
        + "\n";
    fs::write(thread.join("entries.jsonl"), &entry).unwrap();
    let state = serde_json::json!({
        "record": old,
        "outbox": [output(1)],
        "entries_bytes": entry.len(),
        "processed_bytes": 0,
    });
    fs::write(thread.join("state.json"), state.to_string()).unwrap();

    let store = FileStore::open(dir.path()).unwrap();
    let loaded = store.load_record(&id("t1")).await.unwrap().unwrap();
    assert_eq!(loaded.children.len(), 1);
    assert_eq!(store.outbox().await.unwrap().len(), 1);
    let mut next = commit(Some(1), 1, "after");
    next.record.children = vec![child(0, true), child(1, false)];
    next.effects = vec![output(2)];
    store.commit(&next).await.unwrap();
    drop(store);

    let store = FileStore::open(dir.path()).unwrap();
    let record = store.load_record(&id("t1")).await.unwrap().unwrap();
    assert_eq!(record.children.len(), 2);
    assert!(record.children[0].closed);
    let ids: Vec<String> = store
        .outbox()
        .await
        .unwrap()
        .iter()
        .map(|(_, e)| e.id.to_string())
        .collect();
    assert_eq!(ids, ["fx-1", "fx-2"]);
    assert_eq!(store.load_entries(&id("t1"), 9).await.unwrap().len(), 2);
}

#[tokio::test]
async fn threads_not_used_lately_are_put_away_and_come_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    let total = resident::RESIDENT_THREADS + 88;
    let name = |n: usize| format!("idle-{n:04}");
    for n in 0..total {
        let mut c = commit(None, 0, &format!("hello {n}"));
        c.thread_id = id(&name(n));
        c.record.id = id(&name(n));
        c.record.children = vec![child(n as u32, false)];
        if n % 100 == 0 {
            c.effects = vec![output(n as u32)];
        }
        store.commit(&c).await.unwrap();
    }
    let resident = store.lock_inner().threads.by_id.len();
    assert_eq!(resident, resident::RESIDENT_THREADS);
    // Lists hold every thread, put away or not, without reading a folder.
    let listed = |store: FileStore| async move {
        let mut query = crate::state::ThreadQuery {
            limit: 500,
            ..Default::default()
        };
        let mut all = Vec::new();
        loop {
            let page = store.list_threads(&query).await.unwrap();
            all.extend(page.threads.into_iter().map(|s| s.id.to_string()));
            match page.next {
                Some(next) => query.cursor = Some(next),
                None => return all,
            }
        }
    };
    let mut all = listed(store.clone()).await;
    assert_eq!(all.len(), total);
    all.sort();
    assert_eq!(all, (0..total).map(name).collect::<Vec<_>>());
    assert_eq!(
        listed(FileStore::open_read_only(dir.path()).unwrap())
            .await
            .len(),
        total
    );

    // The oldest is put away; its record, history and outbox read back from its folder.
    let first = id(&name(0));
    assert!(store.lock_inner().disk[&first].put_away);
    let pending: Vec<String> = store
        .outbox()
        .await
        .unwrap()
        .iter()
        .map(|(t, e)| format!("{t} {}", e.id))
        .collect();
    let expected: Vec<String> = (0..total)
        .step_by(100)
        .map(|n| format!("{} fx-{n}", name(n)))
        .collect();
    assert_eq!(pending, expected);
    assert_eq!(store.thread_outbox(&first).await.unwrap().len(), 1);
    let record = store.load_record(&first).await.unwrap().unwrap();
    assert_eq!(record.children, vec![child(0, false)]);
    assert!(!store.lock_inner().disk[&first].put_away);

    // A commit on a thread that was put away continues it.
    for n in [1, 2] {
        assert!(store.lock_inner().disk[&id(&name(n))].put_away);
    }
    let mut next = commit(Some(1), 1, "again");
    next.thread_id = id(&name(1));
    next.record.id = id(&name(1));
    next.record.children = vec![child(1, true)];
    store.commit(&next).await.unwrap();
    let stale = {
        let mut c = commit(Some(1), 1, "stale");
        c.thread_id = id(&name(2));
        c.record.id = id(&name(2));
        c.expected_version = Some(7);
        c
    };
    assert!(matches!(
        store.commit(&stale).await,
        Err(StoreError::Conflict { found: Some(1), .. })
    ));
    store
        .complete_effects(&first, &[EffectId::new("fx-0").unwrap()])
        .await
        .unwrap();
    drop(store);

    let store = FileStore::open(dir.path()).unwrap();
    let texts: Vec<String> = store
        .load_entries(&id(&name(1)), 10)
        .await
        .unwrap()
        .iter()
        .map(|e| format!("{:?}", e.item))
        .collect();
    assert_eq!(texts.len(), 2);
    assert!(texts[1].contains("again"), "{texts:?}");
    let record = store.load_record(&id(&name(1))).await.unwrap().unwrap();
    assert_eq!(record.children, vec![child(1, true)]);
    assert_eq!(store.outbox().await.unwrap().len(), expected.len() - 1);
    assert_eq!(store.thread_ids().await.unwrap().len(), total);
}

/// The lock's file, shared with a child process (as every child shares its parent's open files
/// while it starts, before it runs its program): the store is dropped, the child still holds
/// the lock for a moment, and opening the folder again waits for it instead of refusing.
#[tokio::test]
async fn a_lock_held_only_by_a_starting_child_process_is_waited_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    let shared = store.lock.as_ref().unwrap().file.try_clone().unwrap();
    let mut child = std::process::Command::new("sleep")
        .arg("0.5")
        .stdin(std::process::Stdio::from(shared))
        .spawn()
        .unwrap();
    drop(store);
    let again = FileStore::open(dir.path());
    assert!(again.is_ok(), "{:?}", again.err());
    assert!(
        child.try_wait().unwrap().is_some(),
        "the open must have waited for the child to let go"
    );
    child.wait().unwrap();
    // Held by a live store of this process: refused at once, as before.
    let err = FileStore::open(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err}");
}

fn accepted(n: u32) -> Input {
    let mut input = Input::user_message(id("t1"), format!("message {n}"));
    input.id = InputId::new(format!("in-accepted-{n}")).unwrap();
    input
}

#[tokio::test]
async fn accepted_inputs_outlive_the_process_until_released() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    for n in 0..3 {
        store.accept(&accepted(n)).await.unwrap();
    }
    // A sender that tried again: kept once.
    store.accept(&accepted(1)).await.unwrap();
    store.release(&[accepted(0).id]).await.unwrap();
    drop(store);

    // A crash here: the inbox has what was accepted and not released, in order.
    let store = FileStore::open(dir.path()).unwrap();
    let pending: Vec<String> = store
        .inbox()
        .await
        .unwrap()
        .iter()
        .map(|i| i.id.to_string())
        .collect();
    assert_eq!(pending, ["in-accepted-1", "in-accepted-2"]);
    // A reader sees the same without writing.
    let reader = FileStore::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.inbox().await.unwrap().len(), 2);
    assert!(reader.accept(&accepted(9)).await.is_err());

    store
        .release(&[
            accepted(1).id,
            accepted(2).id,
            InputId::new("never-accepted").unwrap(),
        ])
        .await
        .unwrap();
    // Nothing pending: the file is emptied, not grown.
    assert_eq!(
        fs::metadata(dir.path().join("inbox.jsonl")).unwrap().len(),
        0
    );
    drop(store);
    let store = FileStore::open(dir.path()).unwrap();
    assert!(store.inbox().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_torn_last_inbox_line_is_dropped_and_the_rest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    store.accept(&accepted(0)).await.unwrap();
    drop(store);
    // A crash in the middle of appending the next one: its door never answered.
    let mut file = OpenOptions::new()
        .append(true)
        .open(dir.path().join("inbox.jsonl"))
        .unwrap();
    file.write_all(br#"{"add":{"thread_id":"t1","id":"in-torn""#)
        .unwrap();
    drop(file);
    let store = FileStore::open(dir.path()).unwrap();
    let pending = store.inbox().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0], accepted(0));
    // The next input is appended after the whole lines only.
    store.accept(&accepted(1)).await.unwrap();
    drop(store);
    let store = FileStore::open(dir.path()).unwrap();
    assert_eq!(store.inbox().await.unwrap().len(), 2);
}

/// `commit(version, seq, text)` showing `count` events numbered from `first`.
fn showing(version: Option<u64>, seq: u64, first: u64, count: u64) -> Commit {
    let mut c = commit(version, seq, "shown");
    c.events = (first..first + count)
        .map(|n| OutputEvent {
            seq: Some(n),
            ..OutputEvent::new(
                id("t1"),
                Timestamp::UNIX_EPOCH,
                OutputKind::Error {
                    text: format!("event {n}"),
                },
            )
        })
        .collect();
    c.record.last_event_seq = first + count - 1;
    c
}

#[tokio::test]
async fn the_events_shown_are_kept_and_an_unfinished_commits_are_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    store.commit(&showing(None, 0, 1, 2)).await.unwrap();
    store.commit(&showing(Some(1), 1, 3, 3)).await.unwrap();
    let numbers =
        |events: Vec<OutputEvent>| events.iter().map(|e| e.seq.unwrap()).collect::<Vec<_>>();
    assert_eq!(
        numbers(store.events_after(&id("t1"), 0, 100).await.unwrap()),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(
        numbers(store.events_after(&id("t1"), 2, 2).await.unwrap()),
        [3, 4]
    );
    // A crash after appending events but before replacing state.json: they are not read, and
    // the next commit writes over them.
    let events = dir.path().join("threads/t1/events.jsonl");
    let mut f = OpenOptions::new().append(true).open(&events).unwrap();
    f.write_all(b"{\"thread_id\":\"t1\",\"seq\":6,\"at\":\"1970-01-01T00:00:00Z\",\"type\":\"error\",\"text\":\"never\"}\n{\"half").unwrap();
    drop(store);
    let store = FileStore::open(dir.path()).unwrap();
    assert_eq!(
        numbers(store.events_after(&id("t1"), 4, 100).await.unwrap()),
        [5]
    );
    store.commit(&showing(Some(2), 2, 6, 1)).await.unwrap();
    drop(store);
    let store = FileStore::open(dir.path()).unwrap();
    let tail = store.events_after(&id("t1"), 4, 100).await.unwrap();
    assert_eq!(numbers(tail.clone()), [5, 6]);
    assert_eq!(
        tail[1].kind,
        OutputKind::Error {
            text: "event 6".into()
        }
    );
    // Another thread's, or none: nothing.
    assert!(store
        .events_after(&id("nobody"), 0, 100)
        .await
        .unwrap()
        .is_empty());
}
