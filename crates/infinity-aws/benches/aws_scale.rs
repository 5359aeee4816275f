//! The local stack under load: slices per second for 200 threads x 5 messages, handed to the
//! real agent handler in SQS batches of 10 with 1, 4 or 10 invocations at once (`handler`: the
//! handler against DynamoDB Local and the output queue), and the same through the input queue
//! and `LocalRunner`, which polls it as Lambda's event source does (`queue`); and one parent with
//! 1,000 children through the queue (`fan_out`). `cargo bench -p infinity-aws --bench aws_scale
//! [-- PART]` (the fan-out takes about an hour on the emulators: give it
//! `INFINITY_BENCH_LIMIT_SECS=5400`); results in docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a bench: a failed step should stop it

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use infinity_agent_core::agent::AgentFile;
use infinity_agent_core::host::InputSender;
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::input::Input;
use infinity_agent_core::store::ThreadStore;
use infinity_aws::config::{AwsConfig, Clients};
use infinity_aws::handler::{build_agent, AgentHandler};
use infinity_aws::local::LocalRunner;
use infinity_aws::queue::SqsInputSender;

mod common;

const CHILDREN: usize = 1_000;

fn script() -> String {
    let spawns: Vec<String> = (0..CHILDREN)
        .map(|i| {
            format!("        - {{name: spawn_thread, args: {{instructions: \"job {i}\", child_of: \"${{stack}}\"}}}}")
        })
        .collect();
    format!(
        r#"rules:
  - thread: child
    when: "report_to_parent .* -> Report delivered"
    reply: {{text: "reported"}}
  - thread: child
    reply:
      tool_calls: [{{name: report_to_parent, args: {{report: "done"}}}}]
  - thread: root
    when: "^fan$"
    reply:
      tool_calls:
{}
  - reply: {{text: 'Noted.'}}
"#,
        spawns.join("\n")
    )
}

async fn handler(
    clients: &Clients,
    config: &AwsConfig,
    dir: &std::path::Path,
) -> Arc<AgentHandler> {
    std::fs::write(dir.join("s.yaml"), script()).unwrap();
    std::fs::write(
        dir.join("agent.yaml"),
        "name: bench\nmodel: script:s.yaml\nlimits:\n  completions_per_hour: 100000\n  conversation_completions_per_hour: 100000\n  conversation_threads_per_hour: 100000\n  tokens_per_hour: 100000000000\n  conversation_tokens_per_hour: 100000000000\n",
    )
    .unwrap();
    let agent = build_agent(&AgentFile::load(&dir.join("agent.yaml")).unwrap())
        .await
        .unwrap();
    Arc::new(AgentHandler::new(clients, config, agent))
}

/// How long a run may take before the bench gives up: `INFINITY_BENCH_LIMIT_SECS`, 1,800 by
/// default (the fan-out needs about an hour on the emulators).
fn limit() -> Duration {
    let seconds = std::env::var("INFINITY_BENCH_LIMIT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1800);
    Duration::from_secs(seconds)
}

/// Runs the runner until `done` holds (checked every 250 ms), then stops it; how long it took.
async fn run_until<F, Fut>(runner: LocalRunner, mut done: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    let limit = limit();
    let task = tokio::spawn(runner.run());
    while !done().await {
        assert!(
            started.elapsed() < limit,
            "the stack did not finish within {} s (INFINITY_BENCH_LIMIT_SECS)",
            limit.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let took = started.elapsed();
    task.abort();
    took
}

/// 200 threads x 5 messages, all queued first, then drained with `concurrency` invocations at once.
async fn batch(
    clients: &Clients,
    config: &AwsConfig,
    handler: &Arc<AgentHandler>,
    concurrency: usize,
) {
    let sender = SqsInputSender::new(clients.sqs.clone(), config.input_queue_url.clone());
    let threads: Vec<ThreadId> = (0..200)
        .map(|i| ThreadId::new(format!("batch-c{concurrency}-{i}")).unwrap())
        .collect();
    for round in 0..5 {
        for id in &threads {
            let input = Input::user_message(id.clone(), format!("message {round}"));
            sender.send_to_input_queue(&input).await.unwrap();
        }
    }
    let mut runner = LocalRunner::new(clients.clone(), config.clone(), handler.clone());
    runner.concurrency = concurrency;
    let store = handler.store().clone();
    let check = threads.clone();
    let took = run_until(runner, || {
        let store = store.clone();
        let check = check.clone();
        async move {
            // Done when the last thread has all ten entries (threads finish in queue order).
            for id in check.iter().rev().take(3) {
                match store.load_record(id).await {
                    Ok(Some(r)) if r.history_len >= 10 => {}
                    _ => return false,
                }
            }
            true
        }
    })
    .await;
    let mut slices = 0;
    for id in &threads {
        let record = store.load_record(id).await.unwrap().unwrap();
        assert_eq!(record.history_len, 10, "{id}: every message answered");
        slices += record.version;
    }
    println!(
        "through the input queue and LocalRunner, {concurrency:>2} pollers: 1000 messages to 200 threads in {:.1} s: {:.0} messages/s, {slices} slices ({:.0} slices/s)",
        took.as_secs_f64(),
        1000.0 / took.as_secs_f64(),
        slices as f64 / took.as_secs_f64()
    );
}

/// This process's CPU time (user + system), from /proc/self/stat.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command.
    let ticks: u64 = fields
        .iter()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

fn event(inputs: &[Input]) -> SqsEvent {
    let mut event = SqsEvent::default();
    for input in inputs {
        let mut m = SqsMessage::default();
        m.message_id = Some(input.id.to_string());
        m.body = Some(serde_json::to_string(input).unwrap());
        m.attributes
            .insert("MessageGroupId".into(), input.thread_id.to_string());
        event.records.push(m);
    }
    event
}

/// 200 threads x 5 messages handed to the handler directly, in batches of 10 threads, with
/// `concurrency` batches at once; a thread's next message only after its last (FIFO).
async fn batch_handler(handler: &Arc<AgentHandler>, concurrency: usize) {
    let threads: Vec<ThreadId> = (0..200)
        .map(|i| ThreadId::new(format!("direct-c{concurrency}-{i}")).unwrap())
        .collect();
    let started = Instant::now();
    let cpu_before = cpu_time();
    for round in 0..5 {
        let batches: Vec<Vec<Input>> = threads
            .chunks(10)
            .map(|chunk| {
                chunk
                    .iter()
                    .map(|id| Input::user_message(id.clone(), format!("message {round}")))
                    .collect()
            })
            .collect();
        for wave in batches.chunks(concurrency) {
            let mut tasks = tokio::task::JoinSet::new();
            for batch in wave {
                let (handler, event) = (handler.clone(), event(batch));
                tasks.spawn(async move { handler.handle(event).await });
            }
            while let Some(response) = tasks.join_next().await {
                assert!(response.unwrap().batch_item_failures.is_empty());
            }
        }
    }
    let took = started.elapsed();
    let cpu = cpu_time().saturating_sub(cpu_before);
    for id in &threads {
        let record = handler.store().load_record(id).await.unwrap().unwrap();
        assert_eq!(record.history_len, 10, "{id}: every message answered");
    }
    println!(
        "batches to the handler, {concurrency:>2} at once: 1000 messages to 200 threads in {:.1} s: {:.0} slices/s; the handler's own CPU {:.2} ms per slice",
        took.as_secs_f64(),
        1000.0 / took.as_secs_f64(),
        cpu.as_secs_f64()
    );
}

/// One parent spawns 1,000 children, each reports back.
async fn fan_out(clients: &Clients, config: &AwsConfig, handler: &Arc<AgentHandler>) {
    let sender = SqsInputSender::new(clients.sqs.clone(), config.input_queue_url.clone());
    let parent = ThreadId::new("fan-parent").unwrap();
    let input = Input::user_message(parent.clone(), "fan");
    sender.send_to_input_queue(&input).await.unwrap();
    let mut runner = LocalRunner::new(clients.clone(), config.clone(), handler.clone());
    runner.concurrency = 10;
    let store = handler.store().clone();
    let reports = |store: infinity_aws::store::DynamoThreadStore, parent: ThreadId| async move {
        let Ok(Some(record)) = store.load_record(&parent).await else {
            return 0;
        };
        let Ok(view) = store.load_entries(&parent, record.history_len).await else {
            return 0;
        };
        view.iter()
            .filter(|e| format!("{:?}", e.item).contains("done"))
            .count()
    };
    let before = kib("VmRSS");
    let took = run_until(runner, || {
        let (store, parent) = (store.clone(), parent.clone());
        async move { reports(store, parent).await >= CHILDREN }
    })
    .await;
    let record = store.load_record(&parent).await.unwrap().unwrap();
    println!(
        "fan-out: 1 parent, {} children, all reported in {:.1} s ({} parent slices); handler \
         process resident {} KiB before, {} KiB after, peak {} KiB",
        record.children.len(),
        took.as_secs_f64(),
        record.version,
        before,
        kib("VmRSS"),
        kib("VmHWM"),
    );
}

/// A `/proc/self/status` figure in KiB (`VmRSS`: resident now; `VmHWM`: the peak), 0 where there
/// is none.
fn kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                line.strip_prefix(field)?
                    .trim_start_matches(':')
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
        })
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let run = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    let prefix = format!("scale{}", std::process::id());
    let (config, clients) = common::local_stack(&prefix).await;
    let dir = std::env::temp_dir().join(&prefix);
    std::fs::create_dir_all(&dir).unwrap();
    let handler = handler(&clients, &config, &dir).await;
    if run("handler") {
        for concurrency in [1, 4, 10] {
            batch_handler(&handler, concurrency).await;
        }
    }
    if run("queue") {
        batch(&clients, &config, &handler, 10).await;
    }
    if run("fan_out") {
        fan_out(&clients, &config, &handler).await;
    }
}
