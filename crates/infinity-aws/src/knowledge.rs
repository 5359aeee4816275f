//! [`DynamoKnowledgeStore`]: the deployment's knowledge registry, in its table.
//!
//! One item per entry under the partition `K`, sort key the entry's key (its name lowercased),
//! the entry as JSON in `body` and its version in `v`. A write is one `PutItem` conditioned on
//! the version it expects (or on nothing, for an overwrite that still counts the version up);
//! loading the registry is one query of the partition, page by page. Entries hold at most 64 KiB
//! of content, well under an item's 400 KB.

use async_trait::async_trait;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use infinity_library::knowledge::{key_of, KnowledgeEntry, KnowledgeStore, KnowledgeStoreError};

use crate::item::{s, Item};

const PARTITION: &str = "K";
/// How many times an unconditional write retries after another writer moved the version.
const OVERWRITE_ATTEMPTS: u32 = 8;

/// The knowledge registry in a deployment's table.
#[derive(Debug, Clone)]
pub struct DynamoKnowledgeStore {
    client: Client,
    table: String,
}

fn unavailable<E: ProvideErrorMetadata + std::fmt::Debug>(
    what: &str,
    err: &aws_sdk_dynamodb::error::SdkError<E>,
) -> KnowledgeStoreError {
    KnowledgeStoreError::Unavailable(format!("{what}: {}", crate::item::sdk_detail(err)))
}

fn entry_of(item: &Item) -> Result<KnowledgeEntry, KnowledgeStoreError> {
    let key = item
        .get("sk")
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default();
    let body = item
        .get("body")
        .and_then(|b| b.as_s().ok())
        .ok_or_else(|| KnowledgeStoreError::Corrupt(format!("entry `{key}` has no body")))?;
    serde_json::from_str(body)
        .map_err(|e| KnowledgeStoreError::Corrupt(format!("entry `{key}`: {e}")))
}

impl DynamoKnowledgeStore {
    /// The registry in `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }
}

#[async_trait]
impl KnowledgeStore for DynamoKnowledgeStore {
    async fn load_all(&self) -> Result<Vec<KnowledgeEntry>, KnowledgeStoreError> {
        let items = crate::store::query_partition(&self.client, &self.table, PARTITION, None)
            .await
            .map_err(|e| unavailable("loading knowledge", &e))?;
        let mut entries = Vec::with_capacity(items.len());
        for item in &items {
            match entry_of(item) {
                Ok(entry) => entries.push(entry),
                // One unreadable entry does not hide the others; it is logged.
                Err(err) => tracing::error!(%err, "knowledge entry left out"),
            }
        }
        Ok(entries)
    }

    async fn get(&self, name: &str) -> Result<Option<KnowledgeEntry>, KnowledgeStoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(PARTITION))
            .key("sk", s(key_of(name)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable("reading knowledge", &e))?;
        out.item().map(entry_of).transpose()
    }

    async fn put(
        &self,
        entry: &KnowledgeEntry,
        expected_version: Option<u64>,
    ) -> Result<u64, KnowledgeStoreError> {
        entry.validate()?;
        for _ in 0..OVERWRITE_ATTEMPTS {
            let stored = match expected_version {
                Some(v) => Some(v),
                None => self.get(&entry.name).await?.map(|e| e.version),
            };
            let version = stored.map_or(1, |v| v + 1);
            let mut written = entry.clone();
            written.version = version;
            let body = serde_json::to_string(&written)
                .map_err(|e| KnowledgeStoreError::Corrupt(e.to_string()))?;
            let put = self
                .client
                .put_item()
                .table_name(&self.table)
                .item("pk", s(PARTITION))
                .item("sk", s(entry.key()))
                .item("v", AttributeValue::N(version.to_string()))
                .item("body", s(body));
            let put = match stored {
                Some(v) => put
                    .condition_expression("v = :stored")
                    .expression_attribute_values(":stored", AttributeValue::N(v.to_string())),
                None => put.condition_expression("attribute_not_exists(pk)"),
            };
            match put.send().await {
                Ok(_) => return Ok(version),
                Err(err)
                    if err
                        .as_service_error()
                        .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
                {
                    if let Some(expected) = expected_version {
                        let found = self.get(&entry.name).await?.map(|e| e.version);
                        return Err(KnowledgeStoreError::Conflict {
                            name: entry.name.clone(),
                            expected,
                            found,
                        });
                    }
                    // An overwrite raced another writer: read the version again.
                }
                Err(err) => return Err(unavailable("writing knowledge", &err)),
            }
        }
        Err(KnowledgeStoreError::Unavailable(format!(
            "writing knowledge `{}`: other writers kept changing it",
            entry.name
        )))
    }

    async fn remove(&self, name: &str) -> Result<bool, KnowledgeStoreError> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(PARTITION))
            .key("sk", s(key_of(name)))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| unavailable("removing knowledge", &e))?;
        Ok(out.attributes().is_some_and(|a| !a.is_empty()))
    }
}
