//! [`DynamoAgentCatalog`]: a deployment's stored agents, in its table.
//!
//! | `pk` | `sk` | holds |
//! |---|---|---|
//! | `A` | `<name>` | the newest version of the agent (`body`, JSON) and its number `v` |
//! | `A#<name>` | `V#<version, 10 digits>` | one version (`body`), never rewritten |
//!
//! A save writes the new version and moves the newest-version item in one transaction,
//! conditioned on the version it read, so two saves never take one number and a listing never
//! names a version that is not there. Listing the agents is one query of `pk = A`; running a
//! thread pinned to a version reads that version's item once per warm instance.

use async_trait::async_trait;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use infinity_agent_core::catalog::{AgentCatalog, CatalogError, StoredAgent};
use jiff::Timestamp;

use crate::item::{s, Item};

/// The largest stored version (its JSON: the file and its skill files). Two copies go into one
/// transaction and each item stays under DynamoDB's 400 KB.
pub const MAX_AGENT_BYTES: usize = 180_000;
/// How many version numbers a save tries before giving up to other savers.
const SAVE_ATTEMPTS: u32 = 8;

/// The agents stored in a deployment's table.
#[derive(Debug, Clone)]
pub struct DynamoAgentCatalog {
    client: Client,
    table: String,
}

fn unavailable<E: ProvideErrorMetadata + std::fmt::Debug>(
    what: &str,
    err: aws_sdk_dynamodb::error::SdkError<E>,
) -> CatalogError {
    CatalogError::Unavailable(format!("{what}: {}", crate::item::sdk_detail(&err)))
}

fn version_sk(version: u32) -> String {
    format!("V#{version:010}")
}

fn body_of(item: &Item) -> Result<StoredAgent, CatalogError> {
    let body = item
        .get("body")
        .and_then(|b| b.as_s().ok())
        .ok_or_else(|| CatalogError::Corrupt("a stored agent has no body".to_owned()))?;
    serde_json::from_str(body).map_err(|e| CatalogError::Corrupt(format!("a stored agent: {e}")))
}

impl DynamoAgentCatalog {
    /// The catalog in `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    async fn newest(&self, name: &str) -> Result<Option<StoredAgent>, CatalogError> {
        let item = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s("A"))
            .key("sk", s(name))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable("reading an agent", e))?;
        item.item().map(body_of).transpose()
    }
}

#[async_trait]
impl AgentCatalog for DynamoAgentCatalog {
    async fn save(
        &self,
        mut agent: StoredAgent,
        now: Timestamp,
    ) -> Result<StoredAgent, CatalogError> {
        agent.saved_at = now;
        for _ in 0..SAVE_ATTEMPTS {
            let previous = self.newest(&agent.name).await?.map(|a| a.version);
            agent.version = previous.map_or(1, |v| v + 1);
            let body =
                serde_json::to_string(&agent).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
            if body.len() > MAX_AGENT_BYTES {
                return Err(CatalogError::Unavailable(format!(
                    "agent `{}` is {} bytes with its skill files; a stored agent holds at most \
                     {MAX_AGENT_BYTES}: move long skills to a `url`",
                    agent.name,
                    body.len()
                )));
            }
            let version = u32_value(agent.version);
            let put = |pk: String, sk: String| {
                Put::builder()
                    .table_name(&self.table)
                    .item("pk", s(pk))
                    .item("sk", s(sk))
                    .item("v", version.clone())
                    .item("body", s(body.clone()))
            };
            let version_item = put(format!("A#{}", agent.name), version_sk(agent.version))
                .condition_expression("attribute_not_exists(pk)")
                .build()
                .map_err(|e| CatalogError::Unavailable(e.to_string()))?;
            let newest = put("A".to_owned(), agent.name.clone());
            let newest = match previous {
                Some(v) => newest
                    .condition_expression("v = :previous")
                    .expression_attribute_values(":previous", u32_value(v)),
                None => newest.condition_expression("attribute_not_exists(pk)"),
            }
            .build()
            .map_err(|e| CatalogError::Unavailable(e.to_string()))?;
            let written = self
                .client
                .transact_write_items()
                .transact_items(TransactWriteItem::builder().put(version_item).build())
                .transact_items(TransactWriteItem::builder().put(newest).build())
                .send()
                .await;
            match written {
                Ok(_) => return Ok(agent),
                Err(err)
                    if err
                        .as_service_error()
                        .is_some_and(|e| e.is_transaction_canceled_exception()) =>
                {
                    // Another save took the number first: read the newest again.
                    continue;
                }
                Err(err) => return Err(unavailable("saving an agent", err)),
            }
        }
        Err(CatalogError::Contended(agent.name))
    }

    async fn get(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<Option<StoredAgent>, CatalogError> {
        let Some(version) = version else {
            return self.newest(name).await;
        };
        let item = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(format!("A#{name}")))
            .key("sk", s(version_sk(version)))
            .send()
            .await
            .map_err(|e| unavailable("reading an agent's version", e))?;
        item.item().map(body_of).transpose()
    }

    async fn list(&self) -> Result<Vec<StoredAgent>, CatalogError> {
        let items = self.query_all("A", None, "listing agents").await?;
        items.iter().map(body_of).collect()
    }

    async fn versions(&self, name: &str) -> Result<Vec<u32>, CatalogError> {
        let items = self
            .query_all(
                &format!("A#{name}"),
                Some("sk"),
                "listing an agent's versions",
            )
            .await?;
        Ok(items
            .iter()
            .filter_map(|item| {
                item.get("sk")?
                    .as_s()
                    .ok()?
                    .strip_prefix("V#")?
                    .parse()
                    .ok()
            })
            .collect())
    }
}

impl DynamoAgentCatalog {
    /// Every item of a partition.
    async fn query_all(
        &self,
        pk: &str,
        projection: Option<&str>,
        what: &str,
    ) -> Result<Vec<Item>, CatalogError> {
        crate::store::query_partition(&self.client, &self.table, pk, projection)
            .await
            .map_err(|e| unavailable(what, e))
    }
}

fn u32_value(v: u32) -> AttributeValue {
    AttributeValue::N(v.to_string())
}
