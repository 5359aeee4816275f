//! Values on their way into items: inline when small, split into `X#` parts when bigger than
//! an item holds.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, ReturnValue, WriteRequest};
use infinity_agent_core::store::StoreError;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{
    corrupt, sdk_error, unavailable, DynamoThreadStore, INLINE_LIMIT, MAX_BATCH_WRITE,
    TRANSACTION_BUDGET,
};

/// A JSON value on its way into an item: inline, or split into parts.
pub(super) struct Blob {
    pub(super) json: String,
    pub(super) parts_id: Option<String>,
}

/// The parts an item refers to: `X#<id>#00000` and on, `count` of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Parts {
    pub(super) id: String,
    pub(super) count: usize,
}

impl Parts {
    /// The parts an item refers to, if it refers to any.
    pub(super) fn of(item: &HashMap<String, AttributeValue>) -> Option<Self> {
        let Some(AttributeValue::S(id)) = item.get("parts_id") else {
            return None;
        };
        let count = match item.get("parts") {
            Some(AttributeValue::N(n)) => n.parse().ok()?,
            _ => return None,
        };
        Some(Self {
            id: id.clone(),
            count,
        })
    }

    pub(super) fn sort_keys(&self) -> impl Iterator<Item = String> + '_ {
        (0..self.count).map(|n| format!("X#{}#{n:05}", self.id))
    }
}

impl Blob {
    pub(super) fn new<T: Serialize>(value: &T, what: &str) -> Result<Self, StoreError> {
        let json = serde_json::to_string(value).map_err(|e| corrupt(what, e))?;
        Ok(Self {
            json,
            parts_id: None,
        })
    }

    /// The parts this value was split into, once written.
    pub(super) fn parts(&self) -> Option<Parts> {
        self.parts_id.as_ref().map(|id| Parts {
            id: id.clone(),
            count: split(&self.json).len(),
        })
    }

    pub(super) fn inline_len(&self) -> usize {
        if self.parts_id.is_some() {
            0
        } else {
            self.json.len()
        }
    }

    /// The attributes that stand for this value in its item.
    pub(super) fn attributes(&self, item: &mut HashMap<String, AttributeValue>) {
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
pub(super) fn split(s: &str) -> Vec<&str> {
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

/// Parts in the table: written, read back, deleted with what owned them.
impl DynamoThreadStore {
    /// Reads a value stored by [`Blob`] from an item.
    pub(super) async fn read_body<T: DeserializeOwned>(
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

    /// Writes the parts of the blobs that are too big to sit inline, under fresh ids, expiring at
    /// `ttl` (seconds since the epoch) unless something adopts them first.
    pub(super) async fn write_parts(
        &self,
        pk: &str,
        blobs: &mut [&mut Blob],
        ttl: Option<i64>,
    ) -> Result<(), StoreError> {
        let mut inline: usize = blobs.iter().map(|b| b.inline_len()).sum();
        let mut order: Vec<usize> = (0..blobs.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(blobs[i].json.len()));
        for i in order {
            let blob = &mut blobs[i];
            if blob.json.len() <= INLINE_LIMIT && inline <= TRANSACTION_BUDGET {
                continue;
            }
            inline -= blob.json.len();
            self.write_blob_parts(pk, blob, ttl).await?;
        }
        Ok(())
    }

    /// Writes `blob` as parts under a fresh id, expiring at `ttl` unless adopted.
    pub(super) async fn write_blob_parts(
        &self,
        pk: &str,
        blob: &mut Blob,
        ttl: Option<i64>,
    ) -> Result<(), StoreError> {
        let id = infinity_agent_core::ids::EffectId::generate().to_string();
        for (n, part) in split(&blob.json).iter().enumerate() {
            let mut item = HashMap::from([
                ("pk".to_owned(), AttributeValue::S(pk.to_owned())),
                ("sk".to_owned(), AttributeValue::S(format!("X#{id}#{n:05}"))),
                ("d".to_owned(), AttributeValue::S((*part).to_owned())),
            ]);
            if let Some(ttl) = ttl {
                item.insert("ttl".to_owned(), AttributeValue::N(ttl.to_string()));
            }
            self.client
                .put_item()
                .table_name(&*self.table)
                .set_item(Some(item))
                .send()
                .await
                .map_err(|e| sdk_error("writing value parts", e))?;
        }
        blob.parts_id = Some(id);
        Ok(())
    }

    /// Deletes parts (after what owned them is gone).
    pub(super) async fn delete_parts(&self, pk: &str, parts: &Parts) -> Result<(), StoreError> {
        let keys: Vec<(String, String)> = parts.sort_keys().map(|sk| (pk.to_owned(), sk)).collect();
        self.delete_keys(&keys, "deleting value parts").await
    }

    /// Deletes items by `(pk, sk)` in `BatchWriteItem`s of 25, until none is left unprocessed.
    pub(super) async fn delete_keys(
        &self,
        keys: &[(String, String)],
        what: &str,
    ) -> Result<(), StoreError> {
        for chunk in keys.chunks(MAX_BATCH_WRITE) {
            let mut requests: Vec<WriteRequest> = Vec::with_capacity(chunk.len());
            for (pk, sk) in chunk {
                let delete = DeleteRequest::builder()
                    .key("pk", AttributeValue::S(pk.clone()))
                    .key("sk", AttributeValue::S(sk.clone()))
                    .build()
                    .map_err(|e| unavailable("building a delete", e))?;
                requests.push(WriteRequest::builder().delete_request(delete).build());
            }
            while !requests.is_empty() {
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&*self.table, std::mem::take(&mut requests))
                    .send()
                    .await
                    .map_err(|e| sdk_error(what, e))?;
                requests = out
                    .unprocessed_items()
                    .and_then(|u| u.get(&*self.table))
                    .cloned()
                    .unwrap_or_default();
            }
        }
        Ok(())
    }

    /// Deletes one item and the parts it referred to.
    pub(super) async fn delete_with_parts(
        &self,
        pk: &str,
        sk: &str,
        what: &str,
    ) -> Result<(), StoreError> {
        let out = self
            .client
            .delete_item()
            .table_name(&*self.table)
            .key("pk", AttributeValue::S(pk.to_owned()))
            .key("sk", AttributeValue::S(sk.to_owned()))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| sdk_error(what, e))?;
        if let Some(parts) = out.attributes().and_then(Parts::of) {
            self.delete_parts(pk, &parts).await?;
        }
        Ok(())
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
}
