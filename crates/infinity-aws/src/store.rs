//! [`DynamoThreadStore`]: threads in one DynamoDB table.
//!
//! Items, all under the partition key `pk = "T#<thread id>"`:
//!
//! | sort key `sk` | holds |
//! |---|---|
//! | `R` | the record (JSON in `body`) and its version `v`, checked on every commit; its place in lists (the `ByActivity` index, `store/list.rs`) |
//! | `E#<seq, 20 digits>` | one history entry (JSON in `body`) |
//! | `O#<version, 20 digits>` | the effects of the commit that made that version, until performed |
//! | `O#retry#<time>#<n>` | an effect an operator put back (`infinity thread outbox --retry`) |
//! | `F#<time>#<n>` | an effect set aside after its attempts failed, for an operator |
//! | `P#<input id>` | a processed-input marker, expiring through the table's `ttl` |
//! | `A#<call id>#<question or result>` | the answer that stands for a call people or an application answer (`store/answers.rs`) |
//! | `L#<seq, 20 digits>` | the output events of one commit, the last numbered `seq` (JSON list in `body`), expiring through `ttl` after the event retention (`store/events.rs`) |
//! | `I#<input id>` | an input too big for a message, stored for it (expires after [`STASH_TTL`]) |
//! | `U#<message id>` | an input-queue message no slice can use, kept aside (expires after [`STASH_TTL`]) |
//! | `X#<blob id>#<part>` | a part of a value too big for one item (written before the commit) |
//!
//! A commit is one `TransactWriteItems`: the record (conditioned on the version the slice read),
//! the new entries, the outbox item and the markers. Entries are visible only up to the record's
//! `history_len`, so nothing of a failed commit is ever read. A value larger than
//! [`INLINE_LIMIT`] is stored as parts under a fresh blob id before the transaction and referenced
//! from its item, so no item reaches the 400 KB limit and a thread has no size ceiling. Bytes and
//! requests per commit depend on what the slice wrote, never on the history's length.
//!
//! **Parts live and die with what owns them.** They are written with a `ttl` a day ahead, so the
//! parts of a commit that never happened (a conflict, a crash) expire; the commit's transaction
//! removes that `ttl` from the parts it adopts, and deletes the parts of the record version it
//! replaces. Deleting an outbox item (its effects performed, or set aside) deletes its parts.
//! Entries are never deleted, nor their parts. A stored input's parts expire with it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use infinity_agent_core::commit::Commit;
use infinity_agent_core::effect::PendingEffect;
use infinity_agent_core::history::HistoryEntry;
use infinity_agent_core::ids::{CallId, EffectId, InputId, ThreadId};
use infinity_agent_core::input::{Answer, AnswerTo};
use infinity_agent_core::state::ThreadRecord;
use infinity_agent_core::store::{SliceState, StoreError, ThreadStore};
use serde::Serialize;

mod answers;
mod aside;
mod blob;
mod commit;
mod events;
mod import;
mod list;
mod warm;

use blob::{Blob, Parts};
pub use events::EVENT_RETENTION;
pub use list::LIST_INDEX;

/// Values whose JSON is longer than this are split into parts.
pub const INLINE_LIMIT: usize = 300_000;
/// How long a stored input (and its parts) stays: longer than a message can wait in the input
/// queue (4 days) or its dead-letter queue (14 days), so a redriven message still finds it.
pub const STASH_TTL: std::time::Duration = std::time::Duration::from_secs(15 * 86_400);
/// How long parts written for a commit wait to be adopted by it before they expire.
const PENDING_PARTS_TTL: std::time::Duration = std::time::Duration::from_secs(86_400);
/// DynamoDB's limit on requests in one `BatchWriteItem`.
const MAX_BATCH_WRITE: usize = 25;
/// The most inline bytes one transaction carries (DynamoDB allows 4 MB).
const TRANSACTION_BUDGET: usize = 3_000_000;
/// DynamoDB's limit on items in one transaction.
const MAX_TRANSACTION_ITEMS: usize = 100;

fn pk(thread_id: &ThreadId) -> String {
    format!("T#{thread_id}")
}

fn entry_sk(seq: u64) -> String {
    format!("E#{seq:020}")
}

fn unavailable(what: &str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("{what}: {err}"))
}

fn sdk_error<E: ProvideErrorMetadata + std::fmt::Debug>(
    what: &str,
    err: aws_sdk_dynamodb::error::SdkError<E>,
) -> StoreError {
    StoreError::Unavailable(format!("{what}: {}", sdk_detail(&err)))
}

/// Every item of the partition `pk` (only the `projection` attributes, when given), page by
/// page, strongly consistent.
pub(crate) async fn query_partition(
    client: &Client,
    table: &str,
    pk: &str,
    projection: Option<&str>,
) -> Result<
    Vec<HashMap<String, AttributeValue>>,
    aws_sdk_dynamodb::error::SdkError<aws_sdk_dynamodb::operation::query::QueryError>,
> {
    let mut items = Vec::new();
    let mut start: Option<HashMap<String, AttributeValue>> = None;
    loop {
        let page = client
            .query()
            .table_name(table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(pk.to_owned()))
            .set_projection_expression(projection.map(str::to_owned))
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await?;
        items.extend(page.items().iter().cloned());
        start = page.last_evaluated_key().cloned();
        if start.is_none() {
            return Ok(items);
        }
    }
}

use crate::item::sdk_detail;

/// The record item a creating slice that writes entries ahead puts first (version 0, no body,
/// its lock): the thread does not exist until the commit replaces it.
pub(crate) fn is_placeholder(item: &HashMap<String, AttributeValue>) -> bool {
    matches!(item.get("v"), Some(AttributeValue::N(v)) if v == "0")
}

fn corrupt(what: &str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {err}"))
}

/// A [`ThreadStore`] on one DynamoDB table. See the module docs for the layout.
///
/// The agent Lambda makes its own; an embedded process can keep its threads here too (one
/// process driving a thread at a time):
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// use infinity_agent_core::runtime::AgentSystemBuilder;
/// use infinity_aws::config::Clients;
/// use infinity_aws::store::DynamoThreadStore;
///
/// # async fn run() {
/// let clients = Clients::from_env().await;
/// // Processed-input markers are kept 30 days (duplicates older than that are not expected).
/// let store = DynamoThreadStore::new(clients.dynamodb, "infinity-threads", Duration::from_secs(30 * 86_400));
/// let builder = AgentSystemBuilder::new().with_store(Arc::new(store));
/// # let _ = builder;
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct DynamoThreadStore {
    client: Client,
    table: Arc<str>,
    dedup_ttl: std::time::Duration,
    /// How long the events threads show are kept for clients that resume a stream.
    event_retention: std::time::Duration,
    /// The parts of each split record this store read, by thread: `(version, parts)`. A commit over
    /// that version deletes those parts in its transaction. (A slice always reads the record it
    /// replaces through the same store, so the commit knows what the record it replaces owns
    /// without reading it again.)
    record_parts: Arc<Mutex<RecordParts>>,
    /// What this store keeps of the threads it ran, and outbox deletes held back (`warm.rs`).
    warm: Arc<Mutex<warm::Warm>>,
}

/// Per thread, the version of the record a store read and the parts it had.
type RecordParts = HashMap<ThreadId, (u64, Option<Parts>)>;

/// At most this many threads' record parts are remembered between a read and a commit.
const RECORD_PARTS_REMEMBERED: usize = 10_000;

/// An effect set aside after its attempts failed (`F#<time>#<n>`), until an operator retries
/// or drops it (`infinity thread outbox`).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct FailedEffect {
    /// The effect, as it was in the outbox.
    pub effect: PendingEffect,
    /// Why its last attempt failed.
    pub reason: String,
    /// How many times it was tried.
    pub attempts: u32,
    /// When it was set aside.
    pub failed_at: jiff::Timestamp,
}

/// The most bytes of an unusable message's body kept in its [`UnusableInput`].
pub const UNUSABLE_BODY_BYTES: usize = 16_384;

/// An input-queue message the agent function could not use (not an input, a reference to a
/// stored input that is gone, or a body for another thread than its group), kept aside under
/// its thread (`U#<message id>`) so that the messages behind it in its FIFO group go on
/// (`infinity thread outbox` lists them).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct UnusableInput {
    /// The SQS message id.
    pub message_id: String,
    /// The body, or its first [`UNUSABLE_BODY_BYTES`] bytes.
    pub body: String,
    /// The whole body's length in bytes (more than `body`'s when it was cut).
    pub body_bytes: usize,
    /// Why no slice can use it.
    pub reason: String,
    /// When it was kept aside.
    pub kept_at: jiff::Timestamp,
}

impl DynamoThreadStore {
    /// A store on `table`; processed-input markers expire after `dedup_ttl`.
    pub fn new(client: Client, table: impl Into<Arc<str>>, dedup_ttl: std::time::Duration) -> Self {
        Self {
            client,
            table: table.into(),
            dedup_ttl,
            event_retention: EVENT_RETENTION,
            record_parts: Arc::default(),
            warm: Arc::default(),
        }
    }

    fn remember_record_parts(&self, thread_id: &ThreadId, version: u64, parts: Option<Parts>) {
        let mut known = self
            .record_parts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if parts.is_none() {
            known.remove(thread_id);
            return;
        }
        if known.len() >= RECORD_PARTS_REMEMBERED {
            // Slices that read and never committed; forgetting costs at most a leak of parts.
            known.clear();
        }
        known.insert(thread_id.clone(), (version, parts));
    }

    /// The parts of the record at `version`, if this store read that version.
    fn take_record_parts(&self, thread_id: &ThreadId, version: u64) -> Option<Parts> {
        let mut known = self
            .record_parts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match known.remove(thread_id) {
            Some((v, parts)) if v == version => parts,
            _ => None,
        }
    }

    async fn query_all(
        &self,
        pk: &str,
        from: &str,
        to: &str,
    ) -> Result<Vec<HashMap<String, AttributeValue>>, StoreError> {
        let mut items = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&*self.table)
                .key_condition_expression("pk = :pk AND sk BETWEEN :from AND :to")
                .expression_attribute_values(":pk", AttributeValue::S(pk.to_owned()))
                .expression_attribute_values(":from", AttributeValue::S(from.to_owned()))
                .expression_attribute_values(":to", AttributeValue::S(to.to_owned()))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| sdk_error("querying the thread", e))?;
            items.extend(page.items().iter().cloned());
            start = page.last_evaluated_key().cloned();
            if start.is_none() {
                return Ok(items);
            }
        }
    }

    async fn outbox_items(&self, thread_id: &ThreadId) -> Result<Vec<OutboxItem>, StoreError> {
        let pk = pk(thread_id);
        let mut out = Vec::new();
        for item in self.query_all(&pk, "O#", "O#~").await? {
            let Some(AttributeValue::S(sk)) = item.get("sk") else {
                continue;
            };
            let effects: Vec<PendingEffect> = self.read_body(&pk, &item, "outbox").await?;
            out.push(OutboxItem {
                sk: sk.clone(),
                parts: Parts::of(&item),
                effects,
            });
        }
        Ok(out)
    }

    /// Deletes the outbox item of the commit that made `version` (all its effects performed),
    /// and its parts: one request when it has none, where [`ThreadStore::complete_effects`]
    /// first has to find the item.
    pub async fn clear_outbox(&self, thread_id: &ThreadId, version: u64) -> Result<(), StoreError> {
        self.delete_with_parts(
            &pk(thread_id),
            &format!("O#{version:020}"),
            "clearing the outbox",
        )
        .await
    }
}

/// One outbox item: its sort key, its parts, its effects.
struct OutboxItem {
    sk: String,
    parts: Option<Parts>,
    effects: Vec<PendingEffect>,
}

fn now_epoch() -> i64 {
    jiff::Timestamp::now().as_second()
}

#[async_trait]
impl ThreadStore for DynamoThreadStore {
    /// One query of the thread's outbox items (performed at the start of every slice, so a
    /// crash between a commit and its effects loses nothing).
    async fn thread_outbox(&self, thread_id: &ThreadId) -> Result<Vec<PendingEffect>, StoreError> {
        Ok(self
            .outbox_items(thread_id)
            .await?
            .into_iter()
            .flat_map(|item| item.effects)
            .collect())
    }

    async fn claim_answer(
        &self,
        thread_id: &ThreadId,
        answer: &Answer,
    ) -> Result<Option<Answer>, StoreError> {
        self.claim(thread_id, answer).await
    }

    async fn standing_answer(
        &self,
        thread_id: &ThreadId,
        call_id: &CallId,
        to: AnswerTo,
    ) -> Result<Option<Answer>, StoreError> {
        self.standing(thread_id, call_id, to).await
    }

    async fn withdraw_answer(
        &self,
        thread_id: &ThreadId,
        answer: &Answer,
    ) -> Result<(), StoreError> {
        self.withdraw(thread_id, answer).await
    }

    async fn import_thread(
        &self,
        record: &ThreadRecord,
        entries: &[HistoryEntry],
        effects: &[PendingEffect],
        expected_version: Option<u64>,
    ) -> Result<(), StoreError> {
        self.import(record, entries, effects, expected_version)
            .await
    }

    async fn load_record(&self, thread_id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
        let pk = pk(thread_id);
        let out = self
            .client
            .get_item()
            .table_name(&*self.table)
            .key("pk", AttributeValue::S(pk.clone()))
            .key("sk", AttributeValue::S("R".into()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("reading the thread record", e))?;
        let Some(item) = out.item().filter(|item| !is_placeholder(item)) else {
            return Ok(None);
        };
        let record: ThreadRecord = self.read_body(&pk, item, "thread record").await?;
        self.remember_record_parts(thread_id, record.version, Parts::of(item));
        Ok(Some(record))
    }

    async fn load_entries(
        &self,
        thread_id: &ThreadId,
        upto: u64,
    ) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
        self.load_entries_between(thread_id, 0, upto).await
    }

    async fn load_entries_between(
        &self,
        thread_id: &ThreadId,
        from: u64,
        upto: u64,
    ) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
        let entries = self.entries_between(thread_id, from, upto).await?;
        Ok(entries.into_iter().map(|(entry, _)| entry).collect())
    }

    /// The record and the markers in one `BatchGetItem`; the entries and the outbox only as far
    /// as this store did not keep them from the thread's last slice (`warm.rs`).
    async fn load_slice(
        &self,
        thread_id: &ThreadId,
        input_ids: &[InputId],
        with_outbox: bool,
    ) -> Result<SliceState, StoreError> {
        self.read_slice(thread_id, input_ids, with_outbox).await
    }

    async fn processed(
        &self,
        thread_id: &ThreadId,
        input_ids: &[InputId],
    ) -> Result<HashSet<InputId>, StoreError> {
        let pk = pk(thread_id);
        let unique: HashSet<&InputId> = input_ids.iter().collect();
        let keys = unique
            .into_iter()
            .map(|id| {
                HashMap::from([
                    ("pk".to_owned(), AttributeValue::S(pk.clone())),
                    ("sk".to_owned(), AttributeValue::S(format!("P#{id}"))),
                ])
            })
            .collect();
        let found = self.get_keys(keys, "reading processed markers").await?;
        Ok(found
            .iter()
            .filter_map(|item| match item.get("sk") {
                Some(AttributeValue::S(sk)) => {
                    sk.strip_prefix("P#").and_then(|s| InputId::new(s).ok())
                }
                _ => None,
            })
            .collect())
    }

    async fn commit(&self, commit: &Commit) -> Result<(), StoreError> {
        // The record, the entries, the outbox and events items, the markers: one transaction
        // when they fit.
        let items = commit.new_entries.len() + commit.processed_inputs.len() + 3;
        if items > MAX_TRANSACTION_ITEMS && commit.new_entries.len() > import::ENTRIES_PER_WRITE {
            // More entries than one transaction holds: written ahead under a lock (`import.rs`);
            // a new thread's under a placeholder record.
            return self.commit_wide(commit).await;
        }
        self.commit_holding(commit, None).await
    }

    /// From the `ByActivity` index (`store/list.rs`), never a scan.
    async fn list_threads(
        &self,
        query: &infinity_agent_core::state::ThreadQuery,
    ) -> Result<infinity_agent_core::state::ThreadPage, StoreError> {
        self.list_page(query).await
    }

    /// The events of the last [`EVENT_RETENTION`] (or as set with
    /// [`DynamoThreadStore::keeping_events_for`]).
    async fn events_after(
        &self,
        thread_id: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<infinity_agent_core::effect::OutputEvent>, StoreError> {
        self.read_events_after(thread_id, after, limit).await
    }

    async fn complete_commit_effects(
        &self,
        thread_id: &ThreadId,
        version: u64,
        _effect_ids: &[EffectId],
    ) -> Result<(), StoreError> {
        // A commit's effects are one outbox item: one delete, no read; or none now, when the
        // delete waits for the end of the Lambda batch.
        if self.performed(thread_id, version) {
            return Ok(());
        }
        self.clear_outbox(thread_id, version).await
    }

    async fn complete_effects(
        &self,
        thread_id: &ThreadId,
        effect_ids: &[EffectId],
    ) -> Result<(), StoreError> {
        let pk = pk(thread_id);
        for item in self.outbox_items(thread_id).await? {
            let left: Vec<PendingEffect> = item
                .effects
                .iter()
                .filter(|e| !effect_ids.contains(&e.id))
                .cloned()
                .collect();
            if left.len() == item.effects.len() {
                continue;
            }
            if left.is_empty() {
                self.delete_with_parts(&pk, &item.sk, "clearing the outbox")
                    .await?;
                continue;
            }
            let mut blob = Blob::new(&left, "outbox")?;
            if blob.json.len() > INLINE_LIMIT {
                self.write_parts(&pk, &mut [&mut blob], None).await?;
            }
            let mut replacement = HashMap::from([
                ("pk".to_owned(), AttributeValue::S(pk.clone())),
                ("sk".to_owned(), AttributeValue::S(item.sk)),
            ]);
            blob.attributes(&mut replacement);
            self.client
                .put_item()
                .table_name(&*self.table)
                .set_item(Some(replacement))
                .send()
                .await
                .map_err(|e| sdk_error("updating the outbox", e))?;
            if let Some(parts) = &item.parts {
                self.delete_parts(&pk, parts).await?;
            }
        }
        Ok(())
    }

    async fn outbox(&self) -> Result<Vec<(ThreadId, PendingEffect)>, StoreError> {
        let mut out = Vec::new();
        for thread_id in self.thread_ids().await? {
            for effect in self.thread_outbox(&thread_id).await? {
                out.push((thread_id.clone(), effect));
            }
        }
        Ok(out)
    }

    async fn thread_ids(&self) -> Result<Vec<ThreadId>, StoreError> {
        let mut ids = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&*self.table)
                .filter_expression("sk = :r")
                .expression_attribute_values(":r", AttributeValue::S("R".into()))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| sdk_error("listing threads", e))?;
            for item in page.items() {
                if let Some(AttributeValue::S(pk)) = item.get("pk") {
                    if let Some(id) = pk.strip_prefix("T#").and_then(|s| ThreadId::new(s).ok()) {
                        ids.push(id);
                    }
                }
            }
            start = page.last_evaluated_key().cloned();
            if start.is_none() {
                return Ok(ids);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_keys_sort_by_sequence() {
        assert!(entry_sk(9) < entry_sk(10));
        assert!(entry_sk(99_999) < entry_sk(100_000));
    }
}
