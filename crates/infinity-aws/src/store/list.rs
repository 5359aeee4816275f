//! Lists of a table's threads without a scan: every record item carries its place in the
//! `ByActivity` index (`template.yaml`), written by the commit that writes the record:
//!
//! | attribute | holds |
//! |---|---|
//! | `lk` | the index's partition: the thread's kind (`conversation`, `delegation` or `child`) |
//! | `lsk` | the index's sort key: the update time in nanoseconds (22 digits), `#`, the thread id |
//! | `summary` | the thread as a list shows it (JSON of a [`ThreadSummary`]) |
//! | `st`, `ag`, `tl` | its status, agent and search text (title or id, lower case), for filters |
//!
//! A page is one query of a partition (of each, merged, when the list takes several kinds),
//! newest first, reading the index's items only: what a page costs depends on the page and on
//! how much the filters leave out, never on how many threads the table holds. The index is eventually
//! consistent: a thread's newest change reaches a list within a second or so.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use infinity_agent_core::state::thread_list::{cursor_of, read_cursor};
use infinity_agent_core::state::{
    ThreadKind, ThreadPage, ThreadQuery, ThreadRecord, ThreadStatus, ThreadSummary,
};
use infinity_agent_core::store::StoreError;
use jiff::Timestamp;

use super::{corrupt, sdk_error, DynamoThreadStore};

/// The index lists are read from.
pub const LIST_INDEX: &str = "ByActivity";

/// The index sort key of a thread that changed at `at`.
fn sort_key(at: Timestamp, id: &str) -> String {
    let nanos = at.as_nanosecond().max(0);
    format!("{nanos:022}#{id}")
}

fn kind_name(kind: ThreadKind) -> &'static str {
    match kind {
        ThreadKind::Conversation => "conversation",
        ThreadKind::Delegation => "delegation",
        ThreadKind::Child => "child",
    }
}

/// The attributes of `record`'s item that place it in lists.
pub(super) fn list_attributes(
    record: &ThreadRecord,
    item: &mut HashMap<String, AttributeValue>,
) -> Result<(), StoreError> {
    let summary = ThreadSummary::of(record);
    let s = |v: &str| AttributeValue::S(v.to_owned());
    item.insert("lk".into(), s(kind_name(summary.kind)));
    item.insert(
        "lsk".into(),
        AttributeValue::S(sort_key(summary.updated_at, summary.id.as_str())),
    );
    item.insert(
        "st".into(),
        s(match summary.status {
            ThreadStatus::Open => "open",
            ThreadStatus::Closed => "closed",
        }),
    );
    item.insert("ag".into(), s(&summary.agent));
    item.insert("tl".into(), AttributeValue::S(summary.search_text()));
    let json = serde_json::to_string(&summary).map_err(|e| corrupt("thread summary", e))?;
    item.insert("summary".into(), AttributeValue::S(json));
    Ok(())
}

impl DynamoThreadStore {
    /// A page of the threads `query` asks for, from the index.
    pub(super) async fn list_page(&self, query: &ThreadQuery) -> Result<ThreadPage, StoreError> {
        let before = match &query.cursor {
            Some(cursor) => Some(read_cursor(cursor).ok_or_else(|| {
                StoreError::Corrupt(format!("`{cursor}` is not a cursor of this list"))
            })?),
            None => None,
        };
        let limit = query.limit.clamp(1, ThreadQuery::MAX_LIMIT);
        let partitions: Vec<&str> = match (query.kind, query.roots) {
            (Some(kind), _) => vec![kind_name(kind)],
            (None, true) => vec!["conversation", "delegation"],
            (None, false) => vec!["conversation", "delegation", "child"],
        };
        let upper = before.as_ref().map(|(at, id)| sort_key(*at, id.as_str()));
        let mut found = Vec::new();
        for lk in partitions {
            found.extend(
                self.list_partition(lk, query, upper.as_deref(), limit + 1)
                    .await?,
            );
        }
        found.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| b.id.as_str().cmp(a.id.as_str()))
        });
        let more = found.len() > limit;
        found.truncate(limit);
        Ok(ThreadPage {
            next: if more {
                found.last().map(cursor_of)
            } else {
                None
            },
            threads: found,
        })
    }

    /// Up to `want` threads of one index partition that `query` admits, newest first, before
    /// `upper` (a sort key) when given.
    async fn list_partition(
        &self,
        lk: &str,
        query: &ThreadQuery,
        upper: Option<&str>,
        want: usize,
    ) -> Result<Vec<ThreadSummary>, StoreError> {
        let mut key = "lk = :lk".to_owned();
        let mut values = HashMap::from([(":lk".to_owned(), AttributeValue::S(lk.to_owned()))]);
        let since = query.updated_since.map(|t| sort_key(t, ""));
        match (&since, upper) {
            (Some(since), Some(upper)) => {
                key.push_str(" AND lsk BETWEEN :since AND :upper");
                values.insert(":since".into(), AttributeValue::S(since.clone()));
                values.insert(":upper".into(), AttributeValue::S(upper.to_owned()));
            }
            (Some(since), None) => {
                key.push_str(" AND lsk >= :since");
                values.insert(":since".into(), AttributeValue::S(since.clone()));
            }
            (None, Some(upper)) => {
                key.push_str(" AND lsk < :upper");
                values.insert(":upper".into(), AttributeValue::S(upper.to_owned()));
            }
            (None, None) => {}
        }
        let mut filters = Vec::new();
        if let Some(status) = query.status {
            filters.push("st = :st");
            let status = match status {
                ThreadStatus::Open => "open",
                ThreadStatus::Closed => "closed",
            };
            values.insert(":st".into(), AttributeValue::S(status.to_owned()));
        }
        if let Some(agent) = &query.agent {
            filters.push("ag = :ag");
            values.insert(":ag".into(), AttributeValue::S(agent.clone()));
        }
        if let Some(title) = query.title.as_ref().filter(|t| !t.is_empty()) {
            filters.push("contains(tl, :tl)");
            values.insert(":tl".into(), AttributeValue::S(title.to_lowercase()));
        }
        // Filters leave items out after they are read: ask for a few more per request then (what
        // is read is paid for, so not many more: more requests rather than more reads).
        let per_request = if filters.is_empty() {
            want
        } else {
            (want * 2).min(1_000)
        };
        let mut found = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            let mut request = self
                .client
                .query()
                .table_name(&*self.table)
                .index_name(LIST_INDEX)
                .key_condition_expression(&key)
                .set_expression_attribute_values(Some(values.clone()))
                .scan_index_forward(false)
                .limit(i32::try_from(per_request).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start);
            if !filters.is_empty() {
                request = request.filter_expression(filters.join(" AND "));
            }
            let page = request
                .send()
                .await
                .map_err(|e| sdk_error("listing threads", e))?;
            for item in page.items() {
                // (BETWEEN includes the cursor's own item.)
                if let (Some(upper), Some(AttributeValue::S(lsk))) = (upper, item.get("lsk")) {
                    if lsk.as_str() >= upper {
                        continue;
                    }
                }
                let Some(AttributeValue::S(json)) = item.get("summary") else {
                    continue;
                };
                found.push(
                    serde_json::from_str::<ThreadSummary>(json)
                        .map_err(|e| corrupt("thread summary", e))?,
                );
                if found.len() == want {
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

impl DynamoThreadStore {
    /// Puts in lists the threads whose records were written before lists were indexed (a
    /// stack upgraded from an earlier version; `infinity thread index`): a scan of the table
    /// for record items without a place in the index, each given its place unless it changed
    /// meanwhile (then its commit gave it one). Returns how many it placed. Run once; running
    /// it again finds none.
    pub async fn index_for_lists(&self) -> Result<usize, StoreError> {
        let mut placed = 0;
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&*self.table)
                .filter_expression("sk = :r AND attribute_not_exists(lk) AND v > :placeholder")
                .expression_attribute_values(":r", AttributeValue::S("R".into()))
                .expression_attribute_values(":placeholder", AttributeValue::N("0".into()))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| sdk_error("finding threads outside lists", e))?;
            for item in page.items() {
                let (Some(AttributeValue::S(pk)), Some(AttributeValue::N(version))) =
                    (item.get("pk"), item.get("v"))
                else {
                    continue;
                };
                let record: ThreadRecord = self.read_body(pk, item, "thread record").await?;
                let mut attributes = HashMap::new();
                list_attributes(&record, &mut attributes)?;
                let mut update = self
                    .client
                    .update_item()
                    .table_name(&*self.table)
                    .key("pk", AttributeValue::S(pk.clone()))
                    .key("sk", AttributeValue::S("R".into()))
                    .condition_expression("v = :v")
                    .expression_attribute_values(":v", AttributeValue::N(version.clone()));
                let mut sets = Vec::new();
                for (n, (name, value)) in attributes.into_iter().enumerate() {
                    sets.push(format!("#a{n} = :a{n}"));
                    update = update
                        .expression_attribute_names(format!("#a{n}"), name)
                        .expression_attribute_values(format!(":a{n}"), value);
                }
                match update
                    .update_expression(format!("SET {}", sets.join(", ")))
                    .send()
                    .await
                {
                    Ok(_) => placed += 1,
                    Err(err)
                        if err
                            .as_service_error()
                            .is_some_and(|e| e.is_conditional_check_failed_exception()) => {}
                    Err(err) => return Err(sdk_error("placing a thread in lists", err)),
                }
            }
            start = page.last_evaluated_key().cloned();
            if start.is_none() {
                return Ok(placed);
            }
        }
    }
}
