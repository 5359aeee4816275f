//! Entries written ahead of their commit: a thread moved here from another host, or a slice
//! that appended more entries than one transaction holds (a turn that spawned a thousand
//! children has a thousand results). Entries are read only up to the record's `history_len`, so
//! entries written ahead are invisible until the commit that counts them; if it fails, the next
//! commit overwrites them.
//!
//! **A slice's entries written ahead hold a lock.** Two slices racing on one thread (a message
//! redelivered while a slow slice still runs) both start from the same version; had both written
//! ahead, the loser could overwrite entries the winner committed. So the first write-ahead
//! transaction takes a lock on the record (`wlock`, with the version checked), every later one
//! checks it, and the commit's own transaction requires it and releases it (the new record has
//! none). A racing slice that writes ahead finds the lock and gets a conflict; one that commits
//! without writing ahead replaces the record, which fails every later step of the locked one. A
//! lock left by a crashed slice is taken over after [`LOCK_STALE`].
//!
//! **A new thread's first slice** has no record to lock yet: its first write-ahead transaction
//! puts a placeholder record (version 0, no body, the lock), which readers take for no thread,
//! and its commit replaces it (conditioned on the lock). A creating slice that needs no
//! write-ahead takes over a placeholder whose lock is stale, so a crash never blocks a thread
//! from being created.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, TransactWriteItem, Update};
use infinity_agent_core::commit::Commit;
use infinity_agent_core::effect::PendingEffect;
use infinity_agent_core::history::HistoryEntry;
use infinity_agent_core::ids::EffectId;
use infinity_agent_core::state::ThreadRecord;
use infinity_agent_core::store::{StoreError, ThreadStore};

use super::blob::Blob;
use super::{entry_sk, pk, sdk_error, unavailable, DynamoThreadStore, MAX_TRANSACTION_ITEMS};

/// Entries per transaction written ahead, and the most a commit's own transaction carries (room
/// left for the parts they adopt).
pub(super) const ENTRIES_PER_WRITE: usize = MAX_TRANSACTION_ITEMS / 4;
/// After this long a write-ahead lock is taken to be a crashed slice's (a slice on Lambda ends
/// within the function's 15-minute timeout).
const LOCK_STALE: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Lock times before this (seconds since the epoch, as a DynamoDB number) are stale.
pub(super) fn stale_before() -> String {
    (jiff::Timestamp::now().as_second() - LOCK_STALE.as_secs() as i64).to_string()
}

impl DynamoThreadStore {
    /// Writes `record`'s thread with `entries` and `effects`: entries first, in transactions of
    /// [`ENTRIES_PER_WRITE`] (nothing reads them before the record that counts them is written; a
    /// failed import leaves them to be overwritten by the next attempt), then the record and
    /// the effects in one commit, checked against `expected_version`.
    pub(super) async fn import(
        &self,
        record: &ThreadRecord,
        entries: &[HistoryEntry],
        effects: &[PendingEffect],
        expected_version: Option<u64>,
    ) -> Result<(), StoreError> {
        self.write_entries_ahead(&pk(&record.id), entries).await?;
        self.commit(&Commit {
            thread_id: record.id.clone(),
            expected_version,
            record: record.clone(),
            new_entries: Vec::new(),
            processed_inputs: Vec::new(),
            effects: effects.to_vec(),
            events: Vec::new(),
        })
        .await
    }

    /// A commit with more entries than one transaction holds: the older ones written ahead
    /// under the record's write-ahead lock, the newest with the record (see the module docs).
    pub(super) async fn commit_wide(&self, commit: &Commit) -> Result<(), StoreError> {
        // The slice that creates a thread locks a placeholder record (version 0) instead.
        let base = commit.expected_version.unwrap_or(0);
        let pk = pk(&commit.thread_id);
        let lock = EffectId::generate().to_string();
        let ahead = commit.new_entries.len() - ENTRIES_PER_WRITE;
        let record_key = HashMap::from([
            ("pk".to_owned(), AttributeValue::S(pk.clone())),
            ("sk".to_owned(), AttributeValue::S("R".to_owned())),
        ]);
        for (i, chunk) in commit.new_entries[..ahead]
            .chunks(ENTRIES_PER_WRITE)
            .enumerate()
        {
            let guard = if i == 0 && commit.expected_version.is_none() {
                let now = jiff::Timestamp::now().as_second();
                let mut placeholder = record_key.clone();
                placeholder.insert("v".to_owned(), AttributeValue::N("0".to_owned()));
                placeholder.insert("wlock".to_owned(), AttributeValue::S(lock.clone()));
                placeholder.insert("wlock_at".to_owned(), AttributeValue::N(now.to_string()));
                let put = Put::builder()
                    .table_name(&*self.table)
                    .set_item(Some(placeholder))
                    .condition_expression(
                        "attribute_not_exists(pk) OR (v = :zero AND wlock_at < :stale)",
                    )
                    .expression_attribute_values(":zero", AttributeValue::N("0".to_owned()))
                    .expression_attribute_values(":stale", AttributeValue::N(stale_before()))
                    .build()
                    .map_err(|e| unavailable("building a write", e))?;
                TransactWriteItem::builder().put(put).build()
            } else if i == 0 {
                let now = jiff::Timestamp::now().as_second();
                let update = Update::builder()
                    .table_name(&*self.table)
                    .set_key(Some(record_key.clone()))
                    .update_expression("SET wlock = :lock, wlock_at = :now")
                    .condition_expression(
                        "v = :base AND (attribute_not_exists(wlock) OR wlock_at < :stale)",
                    )
                    .expression_attribute_values(":lock", AttributeValue::S(lock.clone()))
                    .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
                    .expression_attribute_values(":base", AttributeValue::N(base.to_string()))
                    .expression_attribute_values(
                        ":stale",
                        AttributeValue::N((now - LOCK_STALE.as_secs() as i64).to_string()),
                    )
                    .build()
                    .map_err(|e| unavailable("building a write", e))?;
                TransactWriteItem::builder().update(update).build()
            } else {
                let check = ConditionCheck::builder()
                    .table_name(&*self.table)
                    .set_key(Some(record_key.clone()))
                    .condition_expression("v = :base AND wlock = :lock")
                    .expression_attribute_values(":lock", AttributeValue::S(lock.clone()))
                    .expression_attribute_values(":base", AttributeValue::N(base.to_string()))
                    .build()
                    .map_err(|e| unavailable("building a write", e))?;
                TransactWriteItem::builder().condition_check(check).build()
            };
            let mut writes = vec![guard];
            writes.extend(self.entry_writes(&pk, chunk).await?);
            if let Err(err) = self
                .client
                .transact_write_items()
                .set_transact_items(Some(writes))
                .send()
                .await
            {
                let conflict = err.as_service_error().is_some_and(|e| {
                    e.is_transaction_canceled_exception()
                        && format!("{e:?}").contains("ConditionalCheckFailed")
                });
                return Err(match conflict {
                    true => StoreError::Conflict {
                        thread_id: commit.thread_id.clone(),
                        expected: commit.expected_version,
                        found: None,
                    },
                    false => sdk_error("writing history entries ahead", err),
                });
            }
        }
        let rest = Commit {
            new_entries: commit.new_entries[ahead..].to_vec(),
            ..commit.clone()
        };
        self.commit_holding(&rest, Some(&lock)).await
    }

    /// Writes `entries` in transactions of [`ENTRIES_PER_WRITE`], ahead of the commit that
    /// counts them (an import: the thread is not running here).
    pub(super) async fn write_entries_ahead(
        &self,
        pk: &str,
        entries: &[HistoryEntry],
    ) -> Result<(), StoreError> {
        for chunk in entries.chunks(ENTRIES_PER_WRITE) {
            let writes = self.entry_writes(pk, chunk).await?;
            self.client
                .transact_write_items()
                .set_transact_items(Some(writes))
                .send()
                .await
                .map_err(|e| sdk_error("writing history entries", e))?;
        }
        Ok(())
    }

    /// The puts of `entries`, their parts written first. (Parts are written for good: a commit
    /// that fails after writing ahead leaks the parts of those entries, which only a value over
    /// 300 KB has.)
    async fn entry_writes(
        &self,
        pk: &str,
        chunk: &[HistoryEntry],
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let mut blobs = chunk
            .iter()
            .map(|e| Blob::new(e, "history entry"))
            .collect::<Result<Vec<_>, _>>()?;
        {
            let mut refs: Vec<&mut Blob> = blobs.iter_mut().collect();
            self.write_parts(pk, &mut refs, None).await?;
        }
        let mut writes = Vec::with_capacity(chunk.len() + 1);
        for (entry, blob) in chunk.iter().zip(&blobs) {
            let mut item = HashMap::from([
                ("pk".to_owned(), AttributeValue::S(pk.to_owned())),
                ("sk".to_owned(), AttributeValue::S(entry_sk(entry.seq))),
            ]);
            blob.attributes(&mut item);
            let put = Put::builder()
                .table_name(&*self.table)
                .set_item(Some(item))
                .build()
                .map_err(|e| unavailable("building a write", e))?;
            writes.push(TransactWriteItem::builder().put(put).build());
        }
        Ok(writes)
    }
}
