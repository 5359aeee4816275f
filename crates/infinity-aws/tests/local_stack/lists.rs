//! Lists of a table's threads (`GET /threads`) come from the `ByActivity` index: pages newest
//! first with every thread once, filters, and reads that depend on the page, not on how many
//! threads the table holds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::config::interceptors::BeforeDeserializationInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::types::AttributeValue;
use infinity_agent_core::commit::Commit;
use infinity_agent_core::ids::CallId;
use infinity_agent_core::state::{
    DelegatedBy, ParentLink, ThreadKind, ThreadQuery, ThreadRecord, ThreadStatus,
};
use infinity_agent_core::store::ThreadStore;
use infinity_aws::store::DynamoThreadStore;
use jiff::Timestamp;

use crate::harness::{stack, tid};

/// Counts the items DynamoDB read for the queries it answered (`ScannedCount`).
#[derive(Debug, Default, Clone)]
struct Scanned(Arc<AtomicU64>);

impl Intercept for Scanned {
    fn name(&self) -> &'static str {
        "scanned"
    }

    fn read_before_deserialization(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let body = context.response().body().bytes().unwrap_or_default();
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) {
            let scanned = value["ScannedCount"].as_u64().unwrap_or(0);
            self.0.fetch_add(scanned, Ordering::SeqCst);
        }
        Ok(())
    }
}

impl Scanned {
    fn take(&self) -> u64 {
        self.0.swap(0, Ordering::SeqCst)
    }
}

/// A thread's first commit: `kind` of thread, changed at second `at`.
fn created(id: &str, kind: ThreadKind, at: i64, title: Option<&str>) -> Commit {
    let mut record =
        ThreadRecord::new(tid(id), "tester", None, Timestamp::from_second(at).unwrap());
    record.version = 1;
    record.title = title.map(str::to_owned);
    match kind {
        ThreadKind::Conversation => {}
        ThreadKind::Delegation => {
            record.delegated_by = Some(DelegatedBy {
                thread_id: tid("someone"),
                call_id: CallId::new("agent-1").unwrap(),
                conversation: tid("someone"),
                returned: false,
            });
        }
        ThreadKind::Child => {
            record.parent = Some(ParentLink {
                thread_id: tid("c-000"),
                call_id: CallId::new(format!("spawn-{id}")).unwrap(),
                tool: "spawn_thread".into(),
                args: serde_json::json!({}),
                fork_at: 0,
                summary: None,
            });
            record.lineage = vec![tid("c-000"), tid(id)];
        }
    }
    Commit {
        thread_id: tid(id),
        expected_version: None,
        record,
        new_entries: Vec::new(),
        processed_inputs: Vec::new(),
        effects: Vec::new(),
        events: Vec::new(),
    }
}

/// Every page of `query`, gathered: the ids in order.
async fn all_pages(store: &DynamoThreadStore, mut query: ThreadQuery) -> Vec<String> {
    let mut ids = Vec::new();
    loop {
        let page = store.list_threads(&query).await.unwrap();
        ids.extend(page.threads.iter().map(|s| s.id.to_string()));
        match page.next {
            Some(next) => query.cursor = Some(next),
            None => return ids,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_conversations_reads_about_a_page_whatever_the_table_holds() {
    let Some(s) = stack("rules:\n  - reply: {text: ok}\n").await else {
        return;
    };
    let scanned = Scanned::default();
    let client = aws_sdk_dynamodb::Client::from_conf(
        s.clients
            .dynamodb
            .config()
            .to_builder()
            .interceptor(scanned.clone())
            .build(),
    );
    let store = DynamoThreadStore::new(client, s.config.table.clone(), Duration::from_secs(60));

    // 40 conversations (one a second), 4 delegations and 160 children.
    for n in 0..40 {
        let title = if n % 10 == 0 {
            Some("Launch party")
        } else {
            None
        };
        store
            .commit(&created(
                &format!("c-{n:03}"),
                ThreadKind::Conversation,
                1_000 + n,
                title,
            ))
            .await
            .unwrap();
    }
    for n in 0..4 {
        store
            .commit(&created(
                &format!("d-{n:03}"),
                ThreadKind::Delegation,
                2_000 + n,
                None,
            ))
            .await
            .unwrap();
    }
    for n in 0..160 {
        store
            .commit(&created(
                &format!("k-{n:03}"),
                ThreadKind::Child,
                3_000 + n,
                None,
            ))
            .await
            .unwrap();
    }
    scanned.take();

    // The sidebar's page: the newest 10 conversations, reading 11 items of 204.
    let query = ThreadQuery {
        kind: Some(ThreadKind::Conversation),
        limit: 10,
        ..ThreadQuery::default()
    };
    let page = store.list_threads(&query).await.unwrap();
    let reads = scanned.take();
    let ids: Vec<String> = page.threads.iter().map(|t| t.id.to_string()).collect();
    assert_eq!(
        ids,
        (30..40)
            .rev()
            .map(|n| format!("c-{n:03}"))
            .collect::<Vec<_>>()
    );
    assert!(reads <= 11, "a page of 10 read {reads} items");
    assert!(page.threads.iter().all(|t| t.activity.state == "idle"));

    // Page after page: every conversation once, newest first.
    let every = all_pages(&store, query.clone()).await;
    assert_eq!(
        every,
        (0..40)
            .rev()
            .map(|n| format!("c-{n:03}"))
            .collect::<Vec<_>>()
    );
    // Roots are conversations and delegations, merged in time order.
    let roots = all_pages(
        &store,
        ThreadQuery {
            roots: true,
            limit: 7,
            ..ThreadQuery::default()
        },
    )
    .await;
    assert_eq!(roots.len(), 44);
    assert_eq!(&roots[..4], ["d-003", "d-002", "d-001", "d-000"]);
    let everything = all_pages(
        &store,
        ThreadQuery {
            limit: 50,
            ..ThreadQuery::default()
        },
    )
    .await;
    assert_eq!(everything.len(), 204);
    assert_eq!(everything[0], "k-159");

    // Filters: a title search, a time, a status.
    let launch = all_pages(
        &store,
        ThreadQuery {
            kind: Some(ThreadKind::Conversation),
            title: Some("launch".into()),
            limit: 10,
            ..ThreadQuery::default()
        },
    )
    .await;
    assert_eq!(launch, ["c-030", "c-020", "c-010", "c-000"]);
    let recent = all_pages(
        &store,
        ThreadQuery {
            roots: true,
            updated_since: Some(Timestamp::from_second(1_035).unwrap()),
            limit: 3,
            ..ThreadQuery::default()
        },
    )
    .await;
    assert_eq!(recent.len(), 9, "{recent:?}");

    // A thread that changes moves to the top, once; closed, it is in the closed list.
    let before = store.load_record(&tid("c-005")).await.unwrap().unwrap();
    let mut changed = before.clone();
    changed.version = 2;
    changed.updated_at = Timestamp::from_second(5_000).unwrap();
    changed.status = ThreadStatus::Closed;
    store
        .commit(&Commit {
            thread_id: tid("c-005"),
            expected_version: Some(1),
            record: changed,
            new_entries: Vec::new(),
            processed_inputs: Vec::new(),
            effects: Vec::new(),
            events: Vec::new(),
        })
        .await
        .unwrap();
    let every = all_pages(&store, query.clone()).await;
    assert_eq!(every.len(), 40);
    assert_eq!(every[0], "c-005");
    let closed = all_pages(
        &store,
        ThreadQuery {
            status: Some(ThreadStatus::Closed),
            limit: 10,
            ..ThreadQuery::default()
        },
    )
    .await;
    assert_eq!(closed, ["c-005"]);

    // A record written before lists were indexed (its place removed here, as such a record has
    // none) is left out until `infinity thread index` places it, once.
    s.clients
        .dynamodb
        .update_item()
        .table_name(&s.config.table)
        .key("pk", AttributeValue::S("T#c-007".into()))
        .key("sk", AttributeValue::S("R".into()))
        .update_expression("REMOVE lk, lsk, summary, st, ag, tl")
        .send()
        .await
        .unwrap();
    assert_eq!(all_pages(&store, query.clone()).await.len(), 39);
    assert_eq!(store.index_for_lists().await.unwrap(), 1);
    assert_eq!(store.index_for_lists().await.unwrap(), 0);
    let every = all_pages(&store, query.clone()).await;
    assert_eq!(every.len(), 40);
    assert!(every.contains(&"c-007".to_owned()));

    // A cursor the store did not make is refused, naming it.
    let err = store
        .list_threads(&ThreadQuery {
            cursor: Some("nonsense".into()),
            limit: 10,
            ..ThreadQuery::default()
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nonsense"), "{err}");
}
