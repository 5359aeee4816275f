//! The DynamoDB store: big entries, long threads, version conflicts.

use std::sync::Arc;

use infinity_agent_core::commit::Commit;
use infinity_agent_core::effect::{OutputEvent, OutputKind};
use infinity_agent_core::history::{HistoryEntry, Item};
use infinity_agent_core::ids::InputId;
use infinity_agent_core::state::ThreadRecord;
use infinity_agent_core::store::{StoreError, ThreadStore};
use jiff::Timestamp;

use crate::harness::{stack, tid};

fn entries(from: u64, n: u64, text: impl Fn(u64) -> String) -> Vec<HistoryEntry> {
    (from..from + n)
        .map(|seq| HistoryEntry {
            seq,
            at: Timestamp::UNIX_EPOCH,
            input_id: None,
            item: Item::user(text(seq)),
        })
        .collect()
}

fn commit(
    record: &ThreadRecord,
    expected: Option<u64>,
    new: Vec<HistoryEntry>,
    processed: Vec<InputId>,
) -> Commit {
    let mut record = record.clone();
    record.version = expected.map_or(1, |v| v + 1);
    record.history_len += new.len() as u64;
    Commit {
        thread_id: record.id.clone(),
        expected_version: expected,
        record,
        new_entries: new,
        processed_inputs: processed,
        effects: Vec::new(),
        events: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2_mb_entry_is_split_and_joined_transparently() {
    let Some(s) = stack("rules:\n  - reply: {text: ok}\n").await else {
        return;
    };
    let store = s.store();
    let record = ThreadRecord::new(tid("big"), "tester", None, Timestamp::UNIX_EPOCH);
    let big = "é and some text ".repeat(2 * 1024 * 1024 / 17);
    let c = commit(
        &record,
        None,
        entries(0, 1, |_| big.clone()),
        vec![InputId::new("i1").unwrap()],
    );
    store.commit(&c).await.unwrap();
    let loaded = store.load_entries(&tid("big"), 1).await.unwrap();
    assert_eq!(loaded[0].item, Item::user(big.clone()));
    assert_eq!(
        store.load_record(&tid("big")).await.unwrap().unwrap(),
        c.record
    );
    let seen = store
        .processed(
            &tid("big"),
            &[InputId::new("i1").unwrap(), InputId::new("i2").unwrap()],
        )
        .await
        .unwrap();
    assert_eq!(seen.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10000_entry_thread_loads_and_saves() {
    let Some(s) = stack("rules:\n  - reply: {text: ok}\n").await else {
        return;
    };
    let store = s.store();
    let mut record = ThreadRecord::new(tid("long"), "tester", None, Timestamp::UNIX_EPOCH);
    let mut version = None;
    let mut seq = 0;
    while seq < 10_000 {
        let c = commit(
            &record,
            version,
            entries(seq, 90.min(10_000 - seq), |i| format!("entry {i}")),
            Vec::new(),
        );
        store.commit(&c).await.unwrap();
        seq += c.new_entries.len() as u64;
        record = c.record;
        version = Some(record.version);
    }
    let loaded = store.load_entries(&tid("long"), 10_000).await.unwrap();
    assert_eq!(loaded.len(), 10_000);
    assert!(loaded
        .iter()
        .enumerate()
        .all(|(i, e)| e.seq == i as u64 && e.item == Item::user(format!("entry {i}"))));
    // And a slice runs on it through the handler.
    s.enqueue_message("long", "one more").await;
    s.run_until(std::time::Duration::from_secs(30), "the answer", || async {
        store
            .load_record(&tid("long"))
            .await
            .unwrap()
            .unwrap()
            .history_len
            == 10_002
    })
    .await;
    let _: Vec<Arc<HistoryEntry>> = loaded;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_commit_is_a_conflict_and_changes_nothing() {
    let Some(s) = stack("rules:\n  - reply: {text: ok}\n").await else {
        return;
    };
    let store = s.store();
    let record = ThreadRecord::new(tid("v"), "tester", None, Timestamp::UNIX_EPOCH);
    let first = commit(&record, None, entries(0, 1, |_| "a".into()), Vec::new());
    store.commit(&first).await.unwrap();
    let again = commit(&record, None, entries(0, 1, |_| "b".into()), Vec::new());
    assert!(matches!(
        store.commit(&again).await,
        Err(StoreError::Conflict { .. })
    ));
    let stale = commit(
        &first.record,
        Some(0),
        entries(1, 1, |_| "c".into()),
        Vec::new(),
    );
    assert!(matches!(
        store.commit(&stale).await,
        Err(StoreError::Conflict { .. })
    ));
    let loaded = store.load_entries(&tid("v"), 1).await.unwrap();
    assert_eq!(loaded[0].item, Item::user("a"));
    assert_eq!(
        store.load_record(&tid("v")).await.unwrap().unwrap().version,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_big_record_replaced_again_and_again_keeps_one_set_of_parts() {
    let Some(s) = stack("rules:\n  - reply: {text: ok}\n").await else {
        return;
    };
    let store = s.store();
    // A record over the inline limit (a memory full of notes would do the same).
    let mut record = ThreadRecord::new(tid("fat"), "tester", None, Timestamp::UNIX_EPOCH);
    record.title = Some("t".repeat(700_000));
    let first = commit(&record, None, Vec::new(), Vec::new());
    store.commit(&first).await.unwrap();
    let per_record = s.parts("fat").await;
    assert_eq!(per_record, (3, 0), "700 KB in three parts, adopted");
    for round in 0..3 {
        let current = store.load_record(&tid("fat")).await.unwrap().unwrap();
        let mut next = current.clone();
        next.title = Some(format!("{round}").repeat(700_000));
        let c = commit(&next, Some(current.version), Vec::new(), Vec::new());
        store.commit(&c).await.unwrap();
        assert_eq!(
            s.parts("fat").await,
            per_record,
            "after commit {round}: the replaced record's parts are gone"
        );
        let loaded = store.load_record(&tid("fat")).await.unwrap().unwrap();
        assert_eq!(loaded.title, next.title);
    }
    // A commit that loses the race adopts nothing: its parts expire.
    let current = store.load_record(&tid("fat")).await.unwrap().unwrap();
    let mut stale = current.clone();
    stale.title = Some("s".repeat(700_000));
    let c = commit(&stale, Some(current.version - 1), Vec::new(), Vec::new());
    assert!(matches!(
        store.commit(&c).await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(s.parts("fat").await, (3, 3));
    assert_eq!(
        store.load_record(&tid("fat")).await.unwrap().unwrap().title,
        current.title
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slice_with_more_entries_than_a_transaction_holds_commits_whole() {
    // A turn that spawned 150 children has 150 results: more items than one transaction (100).
    let Some(s) = stack("rules:\n  - reply: {text: ok}\n").await else {
        return;
    };
    let store = s.store();
    let record = ThreadRecord::new(tid("wide"), "tester", None, Timestamp::UNIX_EPOCH);
    let first = commit(
        &record,
        None,
        entries(0, 2, |i| format!("entry {i}")),
        Vec::new(),
    );
    store.commit(&first).await.unwrap();
    let wide = commit(
        &first.record,
        Some(1),
        entries(2, 150, |i| format!("result {i}")),
        vec![InputId::new("spawn-turn").unwrap()],
    );
    store.commit(&wide).await.unwrap();
    let loaded = store.load_entries(&tid("wide"), 152).await.unwrap();
    assert_eq!(loaded.len(), 152);
    assert_eq!(loaded[151].item, Item::user("result 151"));
    assert_eq!(
        store.load_record(&tid("wide")).await.unwrap().unwrap(),
        wide.record
    );
    // A slice that raced it and lost (it started from version 1) writes nothing ahead over the
    // entries the winner committed.
    let stale = commit(
        &first.record,
        Some(1),
        entries(2, 150, |i| format!("stale {i}")),
        Vec::new(),
    );
    assert!(matches!(
        store.commit(&stale).await,
        Err(StoreError::Conflict { .. })
    ));
    let loaded = store.load_entries(&tid("wide"), 152).await.unwrap();
    assert!(loaded[2..]
        .iter()
        .all(|e| format!("{:?}", e.item).contains("result")));
    // While another slice holds the write-ahead lock, a wide commit is a conflict; a slice
    // that commits without writing ahead goes through and releases it.
    s.clients
        .dynamodb
        .update_item()
        .table_name(&s.config.table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S("T#wide".into()),
        )
        .key("sk", aws_sdk_dynamodb::types::AttributeValue::S("R".into()))
        .update_expression("SET wlock = :l, wlock_at = :t")
        .expression_attribute_values(
            ":l",
            aws_sdk_dynamodb::types::AttributeValue::S("other".into()),
        )
        .expression_attribute_values(
            ":t",
            aws_sdk_dynamodb::types::AttributeValue::N(Timestamp::now().as_second().to_string()),
        )
        .send()
        .await
        .unwrap();
    let blocked = commit(
        &wide.record,
        Some(2),
        entries(152, 150, |i| format!("blocked {i}")),
        Vec::new(),
    );
    assert!(matches!(
        store.commit(&blocked).await,
        Err(StoreError::Conflict { .. })
    ));
    let next = commit(
        &wide.record,
        Some(2),
        entries(152, 1, |_| "after".into()),
        Vec::new(),
    );
    store.commit(&next).await.unwrap();
    let loaded = store.load_entries(&tid("wide"), 153).await.unwrap();
    assert_eq!(loaded[151].item, Item::user("result 151"));
    assert_eq!(loaded[152].item, Item::user("after"));
}

#[tokio::test]
async fn a_new_threads_first_slice_may_hold_more_than_a_transaction() {
    // A first message that spawns 1,000 children: the thread's creating commit has 1,000
    // results. Found by the fan-out bench, whose parent could never be created.
    use aws_sdk_dynamodb::types::AttributeValue;
    let Some(s) = stack("rules:\n  - reply: {text: ok}\n").await else {
        return;
    };
    let store = s.store();
    let record = ThreadRecord::new(tid("born-wide"), "tester", None, Timestamp::UNIX_EPOCH);
    let created = commit(
        &record,
        None,
        entries(0, 230, |i| format!("result {i}")),
        vec![InputId::new("fan").unwrap()],
    );
    store.commit(&created).await.unwrap();
    assert_eq!(
        store.load_record(&tid("born-wide")).await.unwrap().unwrap(),
        created.record
    );
    let loaded = store.load_entries(&tid("born-wide"), 230).await.unwrap();
    assert_eq!(loaded.len(), 230);
    assert_eq!(loaded[229].item, Item::user("result 229"));
    // Created once: a second creating commit (a redelivery that raced it) is a conflict.
    assert!(matches!(
        store.commit(&created).await,
        Err(StoreError::Conflict { .. })
    ));

    // A creating slice that crashed after writing ahead leaves a placeholder: no thread to
    // readers, and while its lock is fresh another creating commit waits (a conflict)...
    let placeholder = |at: i64| {
        s.clients
            .dynamodb
            .put_item()
            .table_name(&s.config.table)
            .item("pk", AttributeValue::S("T#orphan".into()))
            .item("sk", AttributeValue::S("R".into()))
            .item("v", AttributeValue::N("0".into()))
            .item("wlock", AttributeValue::S("crashed".into()))
            .item("wlock_at", AttributeValue::N(at.to_string()))
            .send()
    };
    placeholder(Timestamp::now().as_second()).await.unwrap();
    assert_eq!(store.load_record(&tid("orphan")).await.unwrap(), None);
    let state = store
        .load_slice(&tid("orphan"), &[InputId::new("hello").unwrap()], true)
        .await
        .unwrap();
    assert!(state.record.is_none(), "a placeholder is no thread");
    let orphan = ThreadRecord::new(tid("orphan"), "tester", None, Timestamp::UNIX_EPOCH);
    let narrow = commit(&orphan, None, entries(0, 1, |_| "hello".into()), Vec::new());
    assert!(matches!(
        store.commit(&narrow).await,
        Err(StoreError::Conflict { .. })
    ));
    let wide = commit(
        &orphan,
        None,
        entries(0, 150, |i| format!("w {i}")),
        Vec::new(),
    );
    assert!(matches!(
        store.commit(&wide).await,
        Err(StoreError::Conflict { .. })
    ));
    // ...and once it is stale, the thread is created over it, narrow or wide.
    placeholder(Timestamp::now().as_second() - 16 * 60)
        .await
        .unwrap();
    store.commit(&narrow).await.unwrap();
    assert_eq!(
        store.load_record(&tid("orphan")).await.unwrap().unwrap(),
        narrow.record
    );
}

/// `n` numbered events from `first`, each an answer of `text`.
fn numbered(thread: &str, first: u64, texts: &[String]) -> Vec<OutputEvent> {
    texts
        .iter()
        .enumerate()
        .map(|(i, text)| OutputEvent {
            seq: Some(first + i as u64),
            ..OutputEvent::new(
                tid(thread),
                Timestamp::UNIX_EPOCH,
                OutputKind::AssistantText { text: text.clone() },
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_commits_showed_are_read_back_after_any_position_until_they_expire() {
    let Some(s) = stack("rules:\n  - reply: {text: ok}\n").await else {
        return;
    };
    let store = s.store();
    let mut record = ThreadRecord::new(tid("shown"), "tester", None, Timestamp::UNIX_EPOCH);
    // Three commits: two small events, one of 1 MB (stored in parts), three more.
    let big = "x".repeat(1024 * 1024);
    let batches = [
        numbered("shown", 1, &["a".into(), "b".into()]),
        numbered("shown", 3, std::slice::from_ref(&big)),
        numbered("shown", 4, &["c".into(), "d".into(), "e".into()]),
    ];
    let mut version = None;
    for events in batches {
        let mut c = commit(&record, version, Vec::new(), Vec::new());
        c.record.last_event_seq = events.last().unwrap().seq.unwrap();
        c.events = events;
        store.commit(&c).await.unwrap();
        version = Some(c.record.version);
        record = c.record;
    }
    let texts = |events: Vec<OutputEvent>| -> Vec<(u64, usize)> {
        events
            .into_iter()
            .map(|e| match e.kind {
                OutputKind::AssistantText { text } => (e.seq.unwrap(), text.len()),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let all = store.events_after(&tid("shown"), 0, 100).await.unwrap();
    assert_eq!(
        texts(all),
        [(1, 1), (2, 1), (3, big.len()), (4, 1), (5, 1), (6, 1)]
    );
    // From the middle of a commit's events, and a page at a time.
    let tail = store.events_after(&tid("shown"), 4, 100).await.unwrap();
    assert_eq!(texts(tail), [(5, 1), (6, 1)]);
    let page = store.events_after(&tid("shown"), 1, 2).await.unwrap();
    assert_eq!(texts(page), [(2, 1), (3, big.len())]);
    assert!(store
        .events_after(&tid("shown"), 6, 100)
        .await
        .unwrap()
        .is_empty());

    // A store keeping events no time at all: what its commits showed has expired at once (before
    // DynamoDB's own sweep), and the reader leaves it out.
    let brief = s
        .store()
        .clone()
        .keeping_events_for(std::time::Duration::ZERO);
    let mut c = commit(&record, version, Vec::new(), Vec::new());
    c.record.last_event_seq = 7;
    c.events = numbered("shown", 7, &["gone".into()]);
    brief.commit(&c).await.unwrap();
    let after = store.events_after(&tid("shown"), 5, 100).await.unwrap();
    assert_eq!(texts(after), [(6, 1)], "the expired event is not read");
}
