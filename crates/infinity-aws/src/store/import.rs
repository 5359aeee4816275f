//! Importing a thread moved here from another host: a history longer than one transaction
//! holds is written in several, the record last.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use infinity_agent_core::commit::Commit;
use infinity_agent_core::effect::PendingEffect;
use infinity_agent_core::history::HistoryEntry;
use infinity_agent_core::state::ThreadRecord;
use infinity_agent_core::store::{StoreError, ThreadStore};

use super::blob::Blob;
use super::{entry_sk, pk, sdk_error, unavailable, DynamoThreadStore, MAX_TRANSACTION_ITEMS};

/// Entries per transaction when importing (room left for the parts they adopt).
const ENTRIES_PER_WRITE: usize = MAX_TRANSACTION_ITEMS / 4;

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
        let pk = pk(&record.id);
        for chunk in entries.chunks(ENTRIES_PER_WRITE) {
            let mut blobs = chunk
                .iter()
                .map(|e| Blob::new(e, "history entry"))
                .collect::<Result<Vec<_>, _>>()?;
            {
                let mut refs: Vec<&mut Blob> = blobs.iter_mut().collect();
                // Parts are written for good: the entries that name them are written next.
                self.write_parts(&pk, &mut refs, None).await?;
            }
            let mut writes = Vec::with_capacity(chunk.len());
            for (entry, blob) in chunk.iter().zip(&blobs) {
                let mut item = HashMap::from([
                    ("pk".to_owned(), AttributeValue::S(pk.clone())),
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
            self.client
                .transact_write_items()
                .set_transact_items(Some(writes))
                .send()
                .await
                .map_err(|e| sdk_error("importing history entries", e))?;
        }
        self.commit(&Commit {
            thread_id: record.id.clone(),
            expected_version,
            record: record.clone(),
            new_entries: Vec::new(),
            processed_inputs: Vec::new(),
            effects: effects.to_vec(),
        })
        .await
    }
}
