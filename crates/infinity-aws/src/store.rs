//! [`DynamoThreadStore`]: threads in one DynamoDB table.
//!
//! Items, all under the partition key `pk = "T#<thread id>"`:
//!
//! | sort key `sk` | holds |
//! |---|---|
//! | `R` | the record (JSON in `body`) and its version `v`, checked on every commit |
//! | `E#<seq, 20 digits>` | one history entry (JSON in `body`) |
//! | `O#<version, 20 digits>` | the effects of the commit that made that version, until performed |
//! | `P#<input id>` | a processed-input marker, expiring through the table's `ttl` |
//! | `X#<blob id>#<part>` | a part of a value too big for one item (written before the commit) |
//!
//! A commit is one `TransactWriteItems`: the record (conditioned on the version the slice read),
//! the new entries, the outbox item and the markers. Entries are visible only up to the record's
//! `history_len`, so nothing of a failed commit is ever read. A value larger than
//! [`INLINE_LIMIT`] is stored as parts under a fresh blob id before the transaction and referenced
//! from its item, so no item reaches the 400 KB limit and a thread has no size ceiling. Bytes and
//! requests per commit depend on what the slice wrote, never on the history's length.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, Put, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use infinity_agent_core::commit::Commit;
use infinity_agent_core::effect::PendingEffect;
use infinity_agent_core::history::HistoryEntry;
use infinity_agent_core::ids::{EffectId, InputId, ThreadId};
use infinity_agent_core::state::ThreadRecord;
use infinity_agent_core::store::{StoreError, ThreadStore};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Values whose JSON is longer than this are split into parts.
pub const INLINE_LIMIT: usize = 300_000;
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
    let detail = match err.as_service_error() {
        Some(service) => format!(
            "{}: {}",
            service.code().unwrap_or("error"),
            service.message().unwrap_or("")
        ),
        None => format!("{err}"),
    };
    StoreError::Unavailable(format!("{what}: {detail}"))
}

fn corrupt(what: &str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {err}"))
}

/// A JSON value on its way into an item: inline, or split into parts.
struct Blob {
    json: String,
    parts_id: Option<String>,
}

impl Blob {
    fn new<T: Serialize>(value: &T, what: &str) -> Result<Self, StoreError> {
        let json = serde_json::to_string(value).map_err(|e| corrupt(what, e))?;
        Ok(Self {
            json,
            parts_id: None,
        })
    }

    fn inline_len(&self) -> usize {
        if self.parts_id.is_some() {
            0
        } else {
            self.json.len()
        }
    }

    /// The attributes that stand for this value in its item.
    fn attributes(&self, item: &mut HashMap<String, AttributeValue>) {
        match &self.parts_id {
            None => {
                item.insert("body".into(), AttributeValue::S(self.json.clone()));
            }
            Some(id) => {
                item.insert("parts_id".into(), AttributeValue::S(id.clone()));
                item.insert(
                    "parts".into(),
                    AttributeValue::N(split(&self.json).len().to_string()),
                );
            }
        }
    }
}

/// Splits `s` into pieces of at most [`INLINE_LIMIT`] bytes, on character boundaries.
fn split(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let mut cut = rest.len().min(INLINE_LIMIT);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (head, tail) = rest.split_at(cut);
        parts.push(head);
        rest = tail;
    }
    parts
}

/// A [`ThreadStore`] on one DynamoDB table. See the module docs for the layout.
#[derive(Debug, Clone)]
pub struct DynamoThreadStore {
    client: Client,
    table: Arc<str>,
    dedup_ttl: std::time::Duration,
}

impl DynamoThreadStore {
    /// A store on `table`; processed-input markers expire after `dedup_ttl`.
    pub fn new(client: Client, table: impl Into<Arc<str>>, dedup_ttl: std::time::Duration) -> Self {
        Self {
            client,
            table: table.into(),
            dedup_ttl,
        }
    }

    /// Reads a value stored by [`Blob`] from an item.
    async fn read_body<T: DeserializeOwned>(
        &self,
        pk: &str,
        item: &HashMap<String, AttributeValue>,
        what: &str,
    ) -> Result<T, StoreError> {
        if let Some(AttributeValue::S(body)) = item.get("body") {
            return serde_json::from_str(body).map_err(|e| corrupt(what, e));
        }
        let Some(AttributeValue::S(id)) = item.get("parts_id") else {
            return Err(corrupt(what, "item has neither body nor parts"));
        };
        let mut json = String::new();
        for part in self
            .query_all(pk, &format!("X#{id}#"), &format!("X#{id}#~"))
            .await?
        {
            if let Some(AttributeValue::S(d)) = part.get("d") {
                json.push_str(d);
            }
        }
        serde_json::from_str(&json).map_err(|e| corrupt(what, e))
    }

    /// Writes the parts of the blobs that are too big to sit inline, under fresh ids.
    async fn write_parts(&self, pk: &str, blobs: &mut [&mut Blob]) -> Result<(), StoreError> {
        let mut inline: usize = blobs.iter().map(|b| b.inline_len()).sum();
        let mut order: Vec<usize> = (0..blobs.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(blobs[i].json.len()));
        for i in order {
            let blob = &mut blobs[i];
            if blob.json.len() <= INLINE_LIMIT && inline <= TRANSACTION_BUDGET {
                continue;
            }
            inline -= blob.json.len();
            let id = infinity_agent_core::ids::EffectId::generate().to_string();
            for (n, part) in split(&blob.json).iter().enumerate() {
                self.client
                    .put_item()
                    .table_name(&*self.table)
                    .item("pk", AttributeValue::S(pk.to_owned()))
                    .item("sk", AttributeValue::S(format!("X#{id}#{n:05}")))
                    .item("d", AttributeValue::S((*part).to_owned()))
                    .send()
                    .await
                    .map_err(|e| sdk_error("writing value parts", e))?;
            }
            blob.parts_id = Some(id);
        }
        Ok(())
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

    async fn outbox_items(
        &self,
        thread_id: &ThreadId,
    ) -> Result<Vec<(String, Vec<PendingEffect>)>, StoreError> {
        let pk = pk(thread_id);
        let mut out = Vec::new();
        for item in self.query_all(&pk, "O#", "O#~").await? {
            let Some(AttributeValue::S(sk)) = item.get("sk") else {
                continue;
            };
            let effects: Vec<PendingEffect> = self.read_body(&pk, &item, "outbox").await?;
            out.push((sk.clone(), effects));
        }
        Ok(out)
    }

    /// Deletes the outbox item of the commit that made `version` (all its effects performed):
    /// one request, where [`ThreadStore::complete_effects`] first has to find the item.
    pub async fn clear_outbox(&self, thread_id: &ThreadId, version: u64) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&*self.table)
            .key("pk", AttributeValue::S(pk(thread_id)))
            .key("sk", AttributeValue::S(format!("O#{version:020}")))
            .send()
            .await
            .map_err(|e| sdk_error("clearing the outbox", e))?;
        Ok(())
    }

    /// The effects still in one thread's outbox (performed at the start of every slice, so a
    /// crash between a commit and its effects loses nothing).
    pub async fn thread_outbox(
        &self,
        thread_id: &ThreadId,
    ) -> Result<Vec<PendingEffect>, StoreError> {
        Ok(self
            .outbox_items(thread_id)
            .await?
            .into_iter()
            .flat_map(|(_, effects)| effects)
            .collect())
    }
}

fn now_epoch() -> i64 {
    jiff::Timestamp::now().as_second()
}

#[async_trait]
impl ThreadStore for DynamoThreadStore {
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
        match out.item() {
            None => Ok(None),
            Some(item) => Ok(Some(self.read_body(&pk, item, "thread record").await?)),
        }
    }

    async fn load_entries(
        &self,
        thread_id: &ThreadId,
        upto: u64,
    ) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
        if upto == 0 {
            return Ok(Vec::new());
        }
        let pk = pk(thread_id);
        let items = self
            .query_all(&pk, &entry_sk(0), &entry_sk(upto - 1))
            .await?;
        let mut entries = Vec::with_capacity(items.len());
        for item in &items {
            let entry: HistoryEntry = self.read_body(&pk, item, "history entry").await?;
            entries.push(Arc::new(entry));
        }
        if entries.len() as u64 != upto {
            return Err(corrupt(
                "history",
                format!(
                    "thread {thread_id} has {} entries, expected {upto}",
                    entries.len()
                ),
            ));
        }
        Ok(entries)
    }

    async fn processed(
        &self,
        thread_id: &ThreadId,
        input_ids: &[InputId],
    ) -> Result<HashSet<InputId>, StoreError> {
        let pk = pk(thread_id);
        let mut found = HashSet::new();
        let unique: Vec<&InputId> = input_ids
            .iter()
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        for batch in unique.chunks(100) {
            let mut keys = Vec::new();
            for id in batch {
                keys.push(HashMap::from([
                    ("pk".to_owned(), AttributeValue::S(pk.clone())),
                    ("sk".to_owned(), AttributeValue::S(format!("P#{id}"))),
                ]));
            }
            let mut request = Some(
                KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .consistent_read(true)
                    .build()
                    .map_err(|e| unavailable("building a read", e))?,
            );
            while let Some(keys) = request.take() {
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&*self.table, keys)
                    .send()
                    .await
                    .map_err(|e| sdk_error("reading processed markers", e))?;
                for item in out
                    .responses()
                    .and_then(|r| r.get(&*self.table))
                    .into_iter()
                    .flatten()
                {
                    if let Some(AttributeValue::S(sk)) = item.get("sk") {
                        if let Some(id) = sk.strip_prefix("P#").and_then(|s| InputId::new(s).ok()) {
                            found.insert(id);
                        }
                    }
                }
                request = out
                    .unprocessed_keys()
                    .and_then(|u| u.get(&*self.table))
                    .filter(|k| !k.keys().is_empty())
                    .cloned();
            }
        }
        Ok(found)
    }

    async fn commit(&self, commit: &Commit) -> Result<(), StoreError> {
        let pk = pk(&commit.thread_id);
        let mut record = Blob::new(&commit.record, "thread record")?;
        let mut entries = commit
            .new_entries
            .iter()
            .map(|e| Blob::new(e, "history entry"))
            .collect::<Result<Vec<_>, _>>()?;
        let mut outbox = if commit.effects.is_empty() {
            None
        } else {
            Some(Blob::new(&commit.effects, "outbox")?)
        };
        let items =
            1 + entries.len() + usize::from(outbox.is_some()) + commit.processed_inputs.len();
        if items > MAX_TRANSACTION_ITEMS {
            return Err(StoreError::Unavailable(format!(
                "thread {}: one slice wrote {items} items, more than a DynamoDB transaction holds ({MAX_TRANSACTION_ITEMS}); lower the agent's limits.max_completions_per_slice",
                commit.thread_id
            )));
        }
        {
            let mut blobs: Vec<&mut Blob> = vec![&mut record];
            blobs.extend(entries.iter_mut());
            if let Some(o) = outbox.as_mut() {
                blobs.push(o);
            }
            self.write_parts(&pk, &mut blobs).await?;
        }

        let put = |item: HashMap<String, AttributeValue>| {
            Put::builder()
                .table_name(&*self.table)
                .set_item(Some(item))
                .build()
                .map_err(|e| unavailable("building a write", e))
        };
        let key = |sk: String| {
            HashMap::from([
                ("pk".to_owned(), AttributeValue::S(pk.clone())),
                ("sk".to_owned(), AttributeValue::S(sk)),
            ])
        };
        let mut writes = Vec::with_capacity(items);
        let mut record_item = key("R".to_owned());
        record_item.insert(
            "v".into(),
            AttributeValue::N(commit.record.version.to_string()),
        );
        record.attributes(&mut record_item);
        let mut record_put = Put::builder()
            .table_name(&*self.table)
            .set_item(Some(record_item));
        record_put = match commit.expected_version {
            None => record_put.condition_expression("attribute_not_exists(pk)"),
            Some(v) => record_put
                .condition_expression("v = :expected")
                .expression_attribute_values(":expected", AttributeValue::N(v.to_string())),
        };
        writes.push(
            TransactWriteItem::builder()
                .put(
                    record_put
                        .build()
                        .map_err(|e| unavailable("building a write", e))?,
                )
                .build(),
        );
        for (entry, blob) in commit.new_entries.iter().zip(&entries) {
            let mut item = key(entry_sk(entry.seq));
            blob.attributes(&mut item);
            writes.push(TransactWriteItem::builder().put(put(item)?).build());
        }
        if let Some(blob) = &outbox {
            let mut item = key(format!("O#{:020}", commit.record.version));
            blob.attributes(&mut item);
            writes.push(TransactWriteItem::builder().put(put(item)?).build());
        }
        let expires = now_epoch() + self.dedup_ttl.as_secs() as i64;
        for id in &commit.processed_inputs {
            let mut item = key(format!("P#{id}"));
            item.insert("ttl".into(), AttributeValue::N(expires.to_string()));
            writes.push(TransactWriteItem::builder().put(put(item)?).build());
        }
        match self
            .client
            .transact_write_items()
            .set_transact_items(Some(writes))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(err) => {
                let conflict = err
                    .as_service_error()
                    .map(|e| {
                        e.is_transaction_canceled_exception()
                            && format!("{e:?}").contains("ConditionalCheckFailed")
                    })
                    .unwrap_or(false);
                if conflict {
                    Err(StoreError::Conflict {
                        thread_id: commit.thread_id.clone(),
                        expected: commit.expected_version,
                        found: None,
                    })
                } else {
                    Err(sdk_error("committing the slice", err))
                }
            }
        }
    }

    async fn complete_commit_effects(
        &self,
        thread_id: &ThreadId,
        version: u64,
        _effect_ids: &[EffectId],
    ) -> Result<(), StoreError> {
        // A commit's effects are one outbox item: one delete, no read.
        self.clear_outbox(thread_id, version).await
    }

    async fn complete_effects(
        &self,
        thread_id: &ThreadId,
        effect_ids: &[EffectId],
    ) -> Result<(), StoreError> {
        let pk = pk(thread_id);
        for (sk, effects) in self.outbox_items(thread_id).await? {
            let left: Vec<PendingEffect> = effects
                .iter()
                .filter(|e| !effect_ids.contains(&e.id))
                .cloned()
                .collect();
            if left.len() == effects.len() {
                continue;
            }
            if left.is_empty() {
                self.client
                    .delete_item()
                    .table_name(&*self.table)
                    .key("pk", AttributeValue::S(pk.clone()))
                    .key("sk", AttributeValue::S(sk))
                    .send()
                    .await
                    .map_err(|e| sdk_error("clearing the outbox", e))?;
            } else {
                let mut blob = Blob::new(&left, "outbox")?;
                self.write_parts(&pk, &mut [&mut blob]).await?;
                let mut item = HashMap::from([
                    ("pk".to_owned(), AttributeValue::S(pk.clone())),
                    ("sk".to_owned(), AttributeValue::S(sk)),
                ]);
                blob.attributes(&mut item);
                self.client
                    .put_item()
                    .table_name(&*self.table)
                    .set_item(Some(item))
                    .send()
                    .await
                    .map_err(|e| sdk_error("updating the outbox", e))?;
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
    fn split_respects_char_boundaries_and_limit() {
        let s = "é".repeat(INLINE_LIMIT); // 2 bytes each
        let parts = split(&s);
        assert_eq!(parts.concat(), s);
        assert!(parts.iter().all(|p| p.len() <= INLINE_LIMIT));
        assert_eq!(parts.len(), 2);
    }

    #[test]
    fn entry_keys_sort_by_sequence() {
        assert!(entry_sk(9) < entry_sk(10));
        assert!(entry_sk(99_999) < entry_sk(100_000));
    }
}
