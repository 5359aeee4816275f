//! What a slice costs on the AWS host, measured on the local stack (moto server + DynamoDB
//! Local, started through infra/local/): requests and bytes sent to and read from DynamoDB and
//! SQS per slice at history lengths 10, 1,000 and 10,000, and the slice latency; for a thread
//! never compacted and for a compacted one, on a warm instance (the same handler slice after
//! slice) and a cold one (a new handler each slice). `make bench-aws`; results in
//! docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a bench: a failed step should stop it

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use infinity_agent_core::agent::AgentFile;
use infinity_agent_core::commit::Commit;
use infinity_agent_core::history::{HistoryEntry, Item};
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::input::Input;
use infinity_agent_core::state::{SummaryRef, ThreadRecord};
use infinity_agent_core::store::ThreadStore;
use infinity_aws::config::{AwsConfig, Clients};
use infinity_aws::handler::{build_agent, AgentHandler};

mod common;

#[derive(Debug, Default)]
struct Counter {
    requests: AtomicU64,
    bytes: AtomicU64,
    /// DynamoDB writes (TransactWriteItems, PutItem, UpdateItem, DeleteItem, BatchWriteItem).
    write_requests: AtomicU64,
    write_bytes: AtomicU64,
    /// Response bytes, and read units estimated from them: a strongly consistent read is a unit
    /// per 4 KB, at least one per request (per item for a `BatchGetItem`).
    read_bytes: AtomicU64,
    read_units: AtomicU64,
}

#[derive(Debug, Clone)]
struct Counting(Arc<Counter>);

impl Intercept for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request();
        let len = request.body().bytes().map_or(0, <[u8]>::len) as u64;
        self.0.requests.fetch_add(1, Ordering::SeqCst);
        self.0.bytes.fetch_add(len, Ordering::SeqCst);
        let target = request.headers().get("x-amz-target").unwrap_or("");
        if [
            "TransactWriteItems",
            "PutItem",
            "UpdateItem",
            "DeleteItem",
            "BatchWriteItem",
        ]
        .iter()
        .any(|op| target.ends_with(op))
        {
            self.0.write_requests.fetch_add(1, Ordering::SeqCst);
            self.0.write_bytes.fetch_add(len, Ordering::SeqCst);
        }
        Ok(())
    }

    fn read_before_deserialization(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let body = context.response().body().bytes().unwrap_or_default();
        let len = body.len() as u64;
        self.0.read_bytes.fetch_add(len, Ordering::SeqCst);
        let text = String::from_utf8_lossy(body);
        let units = if text.contains("\"Responses\"") {
            // BatchGetItem: one unit per key asked for, found or not (the record and markers).
            2
        } else if text.contains("\"Items\"") {
            len.div_ceil(4096).max(1)
        } else {
            0
        };
        self.0.read_units.fetch_add(units, Ordering::SeqCst);
        Ok(())
    }
}

impl Counter {
    /// (requests, bytes, write requests, write bytes, read bytes, read units) since the last
    /// call.
    fn take(&self) -> [u64; 6] {
        [
            self.requests.swap(0, Ordering::SeqCst),
            self.bytes.swap(0, Ordering::SeqCst),
            self.write_requests.swap(0, Ordering::SeqCst),
            self.write_bytes.swap(0, Ordering::SeqCst),
            self.read_bytes.swap(0, Ordering::SeqCst),
            self.read_units.swap(0, Ordering::SeqCst),
        ]
    }
}

fn event(input: &Input) -> SqsEvent {
    let mut m = SqsMessage::default();
    m.message_id = Some(input.id.to_string());
    m.body = Some(serde_json::to_string(input).unwrap());
    m.attributes
        .insert("MessageGroupId".into(), input.thread_id.to_string());
    let mut e = SqsEvent::default();
    e.records.push(m);
    e
}

/// Seeds a thread of `n` entries; `compacted`: its newest summary covers all but the last 20.
async fn seed(store: &dyn ThreadStore, id: &ThreadId, n: u64, compacted: bool) {
    let mut record = ThreadRecord::new(id.clone(), "bench", None, jiff::Timestamp::now());
    let mut expected = None;
    let mut seq = 0;
    while seq < n {
        let take = 90.min(n - seq);
        let entries: Vec<HistoryEntry> = (seq..seq + take)
            .map(|s| HistoryEntry {
                seq: s,
                at: jiff::Timestamp::now(),
                input_id: None,
                item: if s % 2 == 0 {
                    Item::user(format!("message {s} of an ordinary conversation"))
                } else {
                    Item::Assistant {
                        text: Some(format!("reply {s}, also ordinary")),
                        tool_calls: vec![],
                        synthetic: false,
                    }
                },
            })
            .collect();
        let mut next = record.clone();
        next.version = expected.map_or(1, |v: u64| v + 1);
        next.history_len += take;
        if compacted && seq + take == n && n > 20 {
            next.latest_summary = Some(SummaryRef {
                index: n - 1,
                covers: n - 20,
            });
        }
        store
            .commit(&Commit {
                thread_id: id.clone(),
                expected_version: expected,
                record: next.clone(),
                new_entries: entries,
                processed_inputs: vec![],
                effects: vec![],
                events: vec![],
            })
            .await
            .unwrap();
        record = next;
        expected = Some(record.version);
        seq += take;
    }
}

#[tokio::main]
async fn main() {
    let prefix = format!("bench{}", std::process::id());
    let (config, base) = common::local_stack(&prefix).await;
    let ddb_counter = Arc::new(Counter::default());
    let sqs_counter = Arc::new(Counter::default());
    let clients = Clients {
        dynamodb: aws_sdk_dynamodb::Client::from_conf(
            base.dynamodb
                .config()
                .to_builder()
                .interceptor(Counting(ddb_counter.clone()))
                .build(),
        ),
        sqs: aws_sdk_sqs::Client::from_conf(
            base.sqs
                .config()
                .to_builder()
                .interceptor(Counting(sqs_counter.clone()))
                .build(),
        ),
        scheduler: base.scheduler.clone(),
        s3: base.s3.clone(),
    };
    let dir = std::env::temp_dir().join(&prefix);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("s.yaml"), "rules:\n  - reply: {text: 'Noted.'}\n").unwrap();
    std::fs::write(
        dir.join("agent.yaml"),
        "name: bench\nmodel: script:s.yaml\n",
    )
    .unwrap();
    let agent = build_agent(&AgentFile::load(&dir.join("agent.yaml")).unwrap())
        .await
        .unwrap();
    let warm = Arc::new(AgentHandler::new(&clients, &config, agent.clone()));
    let cold_config = AwsConfig {
        view_cache_bytes: 0,
        ..config.clone()
    };

    println!("per slice: one user message to a thread of N entries, one scripted completion, commit, effects (mean of 5)");
    for (compacted, cold) in [(false, false), (true, false), (true, true)] {
        println!(
            "\n{} thread, {} instance",
            if compacted {
                "compacted"
            } else {
                "never compacted"
            },
            if cold {
                "cold (a new handler per slice)"
            } else {
                "warm"
            }
        );
        println!(
            "{:>8} {:>9} {:>13} {:>10} {:>12} {:>11} {:>9} {:>9} {:>11} {:>10}",
            "history",
            "ddb reqs",
            "ddb bytes out",
            "ddb writes",
            "write bytes",
            "bytes read",
            "read RU",
            "sqs reqs",
            "sqs bytes",
            "median ms"
        );
        for n in [10u64, 1_000, 10_000] {
            let id = ThreadId::new(format!("bench-{n}-{compacted}-{cold}")).unwrap();
            seed(warm.store(), &id, n, compacted).await;
            // A first slice, so a warm instance has seen the thread.
            let first = Input::user_message(id.clone(), "hello");
            assert!(warm
                .handle(event(&first))
                .await
                .batch_item_failures
                .is_empty());
            ddb_counter.take();
            sqs_counter.take();
            let rounds = 5;
            let mut times = Vec::new();
            let mut ddb = [0u64; 6];
            let mut sqs = [0u64; 6];
            for i in 0..rounds {
                let handler = match cold {
                    true => Arc::new(AgentHandler::new(&clients, &cold_config, agent.clone())),
                    false => warm.clone(),
                };
                let input = Input::user_message(id.clone(), format!("hello {i}"));
                let started = Instant::now();
                let response = handler.handle(event(&input)).await;
                times.push(started.elapsed());
                assert!(response.batch_item_failures.is_empty());
                for (total, x) in ddb.iter_mut().zip(ddb_counter.take()) {
                    *total += x;
                }
                for (total, x) in sqs.iter_mut().zip(sqs_counter.take()) {
                    *total += x;
                }
            }
            times.sort();
            let median: Duration = times[rounds / 2];
            let r = rounds as f64;
            println!(
                "{n:>8} {:>9.1} {:>13.0} {:>10.1} {:>12.0} {:>11.0} {:>9.1} {:>9.1} {:>11.0} {:>10.1}",
                ddb[0] as f64 / r,
                ddb[1] as f64 / r,
                ddb[2] as f64 / r,
                ddb[3] as f64 / r,
                ddb[4] as f64 / r,
                ddb[5] as f64 / r,
                sqs[0] as f64 / r,
                sqs[1] as f64 / r,
                median.as_secs_f64() * 1000.0
            );
        }
    }
}
