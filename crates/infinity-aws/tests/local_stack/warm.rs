//! What a slice reads on DynamoDB: the record and markers in one request, and on a warm
//! instance nothing else it already has; never anything stale.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use infinity_agent_core::commit::Commit;
use infinity_agent_core::effect::{Effect, OutputKind, PendingEffect};
use infinity_agent_core::history::{HistoryEntry, Item};
use infinity_agent_core::ids::{EffectId, InputId};
use infinity_agent_core::state::{SummaryRef, ThreadRecord};
use infinity_agent_core::store::{SliceState, ThreadStore};
use infinity_aws::store::DynamoThreadStore;
use jiff::Timestamp;

use crate::harness::{stack, tid};

/// Counts requests by operation (`Query`, `BatchGetItem`, ...).
#[derive(Debug, Clone, Default)]
struct Requests(Arc<std::sync::Mutex<Vec<String>>>, Arc<AtomicU64>);

impl Intercept for Requests {
    fn name(&self) -> &'static str {
        "requests"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let target = context
            .request()
            .headers()
            .get("x-amz-target")
            .unwrap_or("")
            .rsplit('.')
            .next()
            .unwrap_or("")
            .to_owned();
        self.0.lock().unwrap().push(target);
        self.1.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

impl Requests {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

fn texts(state: &SliceState) -> Vec<String> {
    state
        .view
        .iter()
        .map(|e| match &e.item {
            Item::Message { text, .. } => text.clone(),
            other => format!("{other:?}"),
        })
        .collect()
}

fn next(record: &ThreadRecord, texts: &[&str], effects: Vec<PendingEffect>) -> Commit {
    let mut next = record.clone();
    next.version += 1;
    let new_entries: Vec<HistoryEntry> = texts
        .iter()
        .enumerate()
        .map(|(i, text)| HistoryEntry {
            seq: record.history_len + i as u64,
            at: Timestamp::UNIX_EPOCH,
            input_id: None,
            item: Item::user(*text),
        })
        .collect();
    next.history_len += new_entries.len() as u64;
    Commit {
        thread_id: record.id.clone(),
        expected_version: Some(record.version),
        record: next,
        new_entries,
        processed_inputs: Vec::new(),
        effects,
        events: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_store_reads_only_what_is_new_and_never_anything_stale() {
    let Some(s) = stack("rules:\n  - reply: {text: ok}\n").await else {
        return;
    };
    let counted = Requests::default();
    let client = aws_sdk_dynamodb::Client::from_conf(
        s.clients
            .dynamodb
            .config()
            .to_builder()
            .interceptor(counted.clone())
            .build(),
    );
    let ttl = Duration::from_secs(86_400);
    let warm = DynamoThreadStore::new(client, s.config.table.clone(), ttl)
        .keeping_views(1 << 20)
        .deferring_outbox_deletes();
    let elsewhere = s.store();
    let id = tid("warm");

    // A compacted thread of 300 entries whose newest summary covers the first 280.
    let mut record = ThreadRecord::new(id.clone(), "tester", None, Timestamp::UNIX_EPOCH);
    let mut expected = None;
    for chunk in 0..4u64 {
        let mut c = next(&record, &[], Vec::new());
        c.expected_version = expected;
        c.record.version = expected.map_or(1, |v| v + 1);
        c.new_entries = (chunk * 75..chunk * 75 + 75)
            .map(|seq| HistoryEntry {
                seq,
                at: Timestamp::UNIX_EPOCH,
                input_id: None,
                item: Item::user(format!("entry {seq}")),
            })
            .collect();
        c.record.history_len += 75;
        if chunk == 3 {
            c.record.latest_summary = Some(SummaryRef {
                index: 290,
                covers: 280,
            });
        }
        elsewhere.commit(&c).await.unwrap();
        record = c.record;
        expected = Some(record.version);
    }
    let input = [InputId::new("in-1").unwrap()];

    // Cold: the record and the marker in one request, then the outbox and the window.
    let cold = warm.load_slice(&id, &input, true).await.unwrap();
    assert_eq!(counted.take(), ["BatchGetItem", "Query", "Query"]);
    assert_eq!(cold.view_start, 280);
    assert_eq!(texts(&cold)[0], "entry 280");
    assert_eq!(cold.view.len(), 20);
    assert_eq!(cold.outbox.as_deref(), Some(&[][..]));

    // This instance commits, with an effect, and performs it: the delete waits for the flush.
    let effect = PendingEffect {
        id: EffectId::generate(),
        effect: Effect::output(&id, Timestamp::UNIX_EPOCH, OutputKind::ThreadClosed {}),
    };
    let mine = next(
        cold.record.as_ref().unwrap(),
        &["mine 1", "mine 2"],
        vec![effect.clone()],
    );
    warm.commit(&mine).await.unwrap();
    assert_eq!(counted.take(), ["TransactWriteItems"]);
    warm.complete_commit_effects(&id, mine.record.version, std::slice::from_ref(&effect.id))
        .await
        .unwrap();
    assert!(counted.take().is_empty(), "the outbox delete was held back");

    // Warm: one request, and the view has the new entries.
    let hit = warm.load_slice(&id, &input, true).await.unwrap();
    assert_eq!(counted.take(), ["BatchGetItem"]);
    assert_eq!(hit.view.len(), 22);
    assert_eq!(texts(&hit)[21], "mine 2");
    assert_eq!(hit.outbox.as_deref(), Some(&[][..]));

    // The held-back delete goes out in one batch, and the item is gone.
    warm.flush_outbox_deletes().await.unwrap();
    assert_eq!(counted.take(), ["BatchWriteItem"]);
    assert!(elsewhere.thread_outbox(&id).await.unwrap().is_empty());

    // Another instance commits (with an effect it did not perform yet): this one reads the
    // outbox and only the entries past the ones it has.
    let theirs_effect = PendingEffect {
        id: EffectId::generate(),
        effect: Effect::output(&id, Timestamp::UNIX_EPOCH, OutputKind::ThreadClosed {}),
    };
    let theirs = next(
        hit.record.as_ref().unwrap(),
        &["theirs 1", "theirs 2", "theirs 3"],
        vec![theirs_effect.clone()],
    );
    elsewhere.commit(&theirs).await.unwrap();
    let after = warm.load_slice(&id, &input, true).await.unwrap();
    assert_eq!(counted.take(), ["BatchGetItem", "Query", "Query"]);
    assert_eq!(
        after.record.as_ref().unwrap().version,
        theirs.record.version
    );
    assert_eq!(after.view.len(), 25);
    assert_eq!(texts(&after)[22..], ["theirs 1", "theirs 2", "theirs 3"]);
    assert_eq!(after.outbox.as_ref().unwrap()[0].id, theirs_effect.id);

    // A newer summary moves the window on: what is older is dropped, nothing is read for it.
    let mut compacted = next(
        after.record.as_ref().unwrap(),
        &["after the cut"],
        Vec::new(),
    );
    compacted.record.latest_summary = Some(SummaryRef {
        index: 305,
        covers: 304,
    });
    warm.commit(&compacted).await.unwrap();
    counted.take();
    let moved = warm.load_slice(&id, &input, false).await.unwrap();
    assert_eq!(counted.take(), ["BatchGetItem"]);
    assert_eq!(moved.view_start, 304);
    assert_eq!(texts(&moved), ["theirs 3", "after the cut"]);

    // Forgetting (an operator's nudge) reads everything again.
    warm.forget(&id);
    let again = warm.load_slice(&id, &input, true).await.unwrap();
    assert_eq!(counted.take(), ["BatchGetItem", "Query", "Query"]);
    assert_eq!(texts(&again), texts(&moved));
}
