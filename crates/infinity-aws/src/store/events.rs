//! The output events each commit showed, kept for clients that resume a stream
//! ([`ThreadStore::events_after`](infinity_agent_core::store::ThreadStore::events_after)): one
//! `L#<last seq>` item per commit, written in its transaction, expiring through the table's
//! `ttl` after the store's event retention ([`EVENT_RETENTION`] by default). An item past its
//! `ttl` is not read even before DynamoDB deletes it, so what a client can resume is exactly
//! the retention.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use infinity_agent_core::effect::OutputEvent;
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::store::StoreError;

use super::{now_epoch, pk, sdk_error, Blob, DynamoThreadStore};

/// How long a stack keeps the events its threads showed, unless set otherwise
/// ([`DynamoThreadStore::keeping_events_for`], `INFINITY_EVENT_RETENTION_DAYS`).
pub const EVENT_RETENTION: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// The sort key of the item holding a commit's events, the last numbered `last`.
pub(super) fn events_sk(last: u64) -> String {
    format!("L#{last:020}")
}

/// How many items one read of a thread's events asks for at a time.
const PAGE_ITEMS: i32 = 50;

impl DynamoThreadStore {
    /// Keeps the events threads show for `retention` (for clients that resume a stream; the
    /// default is [`EVENT_RETENTION`]).
    pub fn keeping_events_for(mut self, retention: std::time::Duration) -> Self {
        self.event_retention = retention;
        self
    }

    /// The commit's events on their way into its transaction, with the epoch second they
    /// expire at; `None` when it showed none.
    pub(super) fn events_blob(
        &self,
        events: &[OutputEvent],
    ) -> Result<Option<(Blob, u64, i64)>, StoreError> {
        let Some(last) = events.last().and_then(|e| e.seq) else {
            return Ok(None);
        };
        let expires =
            now_epoch() + i64::try_from(self.event_retention.as_secs()).unwrap_or(i64::MAX / 2);
        Ok(Some((Blob::new(&events, "output events")?, last, expires)))
    }

    /// The kept events of `thread_id` numbered after `after`, at most `limit`.
    pub(super) async fn read_events_after(
        &self,
        thread_id: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<OutputEvent>, StoreError> {
        let pk = pk(thread_id);
        let now = now_epoch();
        let mut found: Vec<OutputEvent> = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            // An item is keyed by its last event: the first one ending past `after` holds the
            // event after it.
            let page = self
                .client
                .query()
                .table_name(&*self.table)
                .key_condition_expression("pk = :pk AND sk BETWEEN :from AND :to")
                .expression_attribute_values(":pk", AttributeValue::S(pk.clone()))
                .expression_attribute_values(
                    ":from",
                    AttributeValue::S(events_sk(after.saturating_add(1))),
                )
                .expression_attribute_values(":to", AttributeValue::S("L#~".to_owned()))
                .consistent_read(true)
                .limit(PAGE_ITEMS)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| sdk_error("reading the thread's events", e))?;
            for item in page.items() {
                let expired = match item.get("ttl") {
                    Some(AttributeValue::N(ttl)) => ttl.parse::<i64>().is_ok_and(|t| t <= now),
                    _ => false,
                };
                if expired {
                    continue;
                }
                let events: Vec<OutputEvent> = self.read_body(&pk, item, "output events").await?;
                found.extend(
                    events
                        .into_iter()
                        .filter(|e| e.seq.is_some_and(|s| s > after)),
                );
                if found.len() >= limit {
                    found.truncate(limit);
                    return Ok(found);
                }
            }
            start = page.last_evaluated_key().cloned();
            if start.is_none() {
                return Ok(found);
            }
        }
    }
}
