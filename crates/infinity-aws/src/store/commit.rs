//! A commit's transaction: the record conditioned on the version the slice read, the new
//! entries, the outbox item and the processed markers, with the parts written ahead and adopted
//! (see the module [`super`] for the layout).

use super::*;

impl DynamoThreadStore {
    /// A commit's transaction; `lock`: the write-ahead lock this commit holds on the record
    /// (its entries written ahead), checked with the version and released by the new record.
    pub(super) async fn commit_holding(
        &self,
        commit: &Commit,
        lock: Option<&str>,
    ) -> Result<(), StoreError> {
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
        let mut events = self.events_blob(&commit.events)?;
        let items = 1
            + entries.len()
            + usize::from(outbox.is_some())
            + usize::from(events.is_some())
            + commit.processed_inputs.len();
        if items > MAX_TRANSACTION_ITEMS {
            return Err(StoreError::Unavailable(format!(
                "thread {}: one slice marked {} inputs processed, more than a DynamoDB transaction holds with its record ({MAX_TRANSACTION_ITEMS} items); hand the thread fewer inputs at once",
                commit.thread_id,
                commit.processed_inputs.len()
            )));
        }
        let replaced_parts = commit
            .expected_version
            .and_then(|v| self.take_record_parts(&commit.thread_id, v));
        {
            let mut blobs: Vec<&mut Blob> = vec![&mut record];
            blobs.extend(entries.iter_mut());
            if let Some(o) = outbox.as_mut() {
                blobs.push(o);
            }
            // Parts wait a day for this commit to adopt them, then expire.
            let pending = now_epoch() + PENDING_PARTS_TTL.as_secs() as i64;
            self.write_parts(&pk, &mut blobs, Some(pending)).await?;
        }
        if let Some((blob, _, expires)) = events.as_mut() {
            // The events' parts are never adopted: they expire with the events.
            let inline: usize = std::iter::once(&record)
                .chain(&entries)
                .chain(&outbox)
                .map(Blob::inline_len)
                .sum();
            let room = TRANSACTION_BUDGET.saturating_sub(inline).min(INLINE_LIMIT);
            if blob.json.len() > room {
                self.write_blob_parts(&pk, blob, Some(*expires)).await?;
            }
        }
        let adopted: Vec<Parts> = std::iter::once(&record)
            .chain(&entries)
            .chain(&outbox)
            .filter_map(Blob::parts)
            .collect();
        let part_writes: usize = adopted.iter().map(|p| p.count).sum::<usize>()
            + replaced_parts.as_ref().map_or(0, |p| p.count);
        // Adopting parts and deleting the replaced record's takes an item each in the
        // transaction; in the rare commit where that does not fit, they are done right after it.
        let parts_in_transaction = items + part_writes <= MAX_TRANSACTION_ITEMS;

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
        list::list_attributes(&commit.record, &mut record_item)?;
        let mut record_put = Put::builder()
            .table_name(&*self.table)
            .set_item(Some(record_item));
        record_put = match (commit.expected_version, lock) {
            // A new thread: no record yet, or only the placeholder a crashed creating slice left
            // (see `store/import.rs`), taken over once its lock is stale.
            (None, None) => record_put
                .condition_expression(
                    "attribute_not_exists(pk) OR (v = :placeholder AND wlock_at < :stale)",
                )
                .expression_attribute_values(":placeholder", AttributeValue::N("0".into()))
                .expression_attribute_values(":stale", AttributeValue::N(import::stale_before())),
            (None, Some(lock)) => record_put
                .condition_expression("v = :placeholder AND wlock = :lock")
                .expression_attribute_values(":placeholder", AttributeValue::N("0".into()))
                .expression_attribute_values(":lock", AttributeValue::S(lock.to_owned())),
            (Some(v), None) => record_put
                .condition_expression("v = :expected")
                .expression_attribute_values(":expected", AttributeValue::N(v.to_string())),
            (Some(v), Some(lock)) => record_put
                .condition_expression("v = :expected AND wlock = :lock")
                .expression_attribute_values(":expected", AttributeValue::N(v.to_string()))
                .expression_attribute_values(":lock", AttributeValue::S(lock.to_owned())),
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
        if let Some((blob, last, expires)) = &events {
            let mut item = key(events::events_sk(*last));
            blob.attributes(&mut item);
            item.insert("ttl".into(), AttributeValue::N(expires.to_string()));
            writes.push(TransactWriteItem::builder().put(put(item)?).build());
        }
        let expires = now_epoch() + self.dedup_ttl.as_secs() as i64;
        for id in &commit.processed_inputs {
            let mut item = key(format!("P#{id}"));
            item.insert("ttl".into(), AttributeValue::N(expires.to_string()));
            writes.push(TransactWriteItem::builder().put(put(item)?).build());
        }
        if parts_in_transaction {
            for sk in adopted.iter().flat_map(Parts::sort_keys) {
                writes.push(
                    TransactWriteItem::builder()
                        .update(adopt(&self.table, &pk, sk)?)
                        .build(),
                );
            }
            for sk in replaced_parts.iter().flat_map(Parts::sort_keys) {
                let delete = Delete::builder()
                    .table_name(&*self.table)
                    .set_key(Some(key(sk)))
                    .build()
                    .map_err(|e| unavailable("building a delete", e))?;
                writes.push(TransactWriteItem::builder().delete(delete).build());
            }
        }
        match self
            .client
            .transact_write_items()
            .set_transact_items(Some(writes))
            .send()
            .await
        {
            Ok(_) => {
                let sizes: Vec<usize> = entries.iter().map(|b| b.json.len()).collect();
                self.committed(commit, &sizes, outbox.as_ref().map(|o| o.parts().is_some()));
                if !parts_in_transaction {
                    for sk in adopted.iter().flat_map(Parts::sort_keys) {
                        self.client
                            .update_item()
                            .table_name(&*self.table)
                            .key("pk", AttributeValue::S(pk.clone()))
                            .key("sk", AttributeValue::S(sk))
                            .update_expression("REMOVE #ttl")
                            .expression_attribute_names("#ttl", "ttl")
                            .send()
                            .await
                            .map_err(|e| sdk_error("adopting value parts", e))?;
                    }
                    if let Some(parts) = &replaced_parts {
                        self.delete_parts(&pk, parts).await?;
                    }
                }
                Ok(())
            }
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
}

/// The transaction write that makes a part written for a commit permanent: its `ttl` removed,
/// on the condition that it is still there.
fn adopt(table: &str, pk: &str, sk: String) -> Result<Update, StoreError> {
    Update::builder()
        .table_name(table)
        .key("pk", AttributeValue::S(pk.to_owned()))
        .key("sk", AttributeValue::S(sk))
        .update_expression("REMOVE #ttl")
        .condition_expression("attribute_exists(d)")
        .expression_attribute_names("#ttl", "ttl")
        .build()
        .map_err(|e| unavailable("building a write", e))
}
