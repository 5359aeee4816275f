//! Benchmarks of the core runtime. Run with `make bench` (or `cargo bench -p infinity-agent-core`);
//! results and how to read them are in docs/benchmarks.md.
//!
//! 1. Engine overhead per slice (scripted model) at history lengths 10, 1,000 and 100,000
//!    (criterion).
//! 2. Bytes a slice writes to the file store at those lengths (printed table).
//! 3. Memory of 100,000 idle sleeping threads on the embedded runtime (printed).
//! 4. Slices per second with 10,000 concurrent threads on the embedded runtime (printed).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed step should stop the test

use std::collections::HashMap;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion};
use infinity_agent_core::agent::{Agent, AgentSpec};
use infinity_agent_core::commit::Commit;
use infinity_agent_core::engine::{Slice, SliceRequest, Step};
use infinity_agent_core::history::{HistoryEntry, Item};
use infinity_agent_core::ids::{InputId, SeededIds, ThreadId};
use infinity_agent_core::input::Input;
use infinity_agent_core::runtime::{AgentSystemBuilder, WaitOutcome};
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::state::ThreadRecord;
use infinity_agent_core::store::{FileStore, ThreadStore};
use infinity_agent_core::tools::ToolRegistry;
use jiff::Timestamp;

const LENGTHS: [u64; 3] = [10, 1_000, 100_000];

fn model() -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::parse(
            "rules:\n  - when: '^nap$'\n    reply: {tool_calls: [{name: sleep, args: {seconds: 3600}}]}\n  - reply: {text: 'Noted.'}\n",
            Path::new("bench.yaml"),
        )
        .expect("bench script parses"),
    )
}

fn agents() -> HashMap<String, Arc<Agent>> {
    let agent = Agent::new(
        "bench",
        "You are benchmarked.",
        model(),
        ToolRegistry::with_builtins(),
    );
    [("bench".to_owned(), Arc::new(agent))].into()
}

/// A thread with `n` entries of alternating user messages and replies.
fn thread(n: u64) -> (ThreadRecord, Vec<Arc<HistoryEntry>>) {
    let id = ThreadId::new("bench").expect("valid id");
    let mut record = ThreadRecord::new(id, "bench", None, Timestamp::UNIX_EPOCH);
    let view: Vec<Arc<HistoryEntry>> = (0..n)
        .map(|seq| {
            let item = if seq % 2 == 0 {
                Item::user(format!(
                    "message number {seq} with some ordinary text in it"
                ))
            } else {
                Item::Assistant {
                    text: Some(format!("reply number {seq}, also of an ordinary length")),
                    tool_calls: Vec::new(),
                    synthetic: false,
                }
            };
            Arc::new(HistoryEntry {
                seq,
                at: Timestamp::UNIX_EPOCH,
                input_id: None,
                item,
            })
        })
        .collect();
    record.history_len = n;
    record.version = 1;
    (record, view)
}

/// One slice driven as a host drives it: the engine's steps, the scripted model's completion.
async fn one_slice(
    agents: &HashMap<String, Arc<Agent>>,
    record: ThreadRecord,
    view: &[Arc<HistoryEntry>],
) -> Commit {
    let input = Input::user_message(record.id.clone(), "hello again");
    let mut ids = SeededIds::new(1);
    let mut slice = Slice::start(SliceRequest {
        inputs: vec![input],
        ..SliceRequest::new(
            record.id.clone(),
            Some(record),
            view,
            agents,
            Timestamp::UNIX_EPOCH,
            &mut ids,
        )
    });
    let model = slice.model().expect("the thread's agent");
    loop {
        let result = match slice.poll() {
            Step::Complete(request) => model.complete(request).await,
            Step::Done(outcome) => return outcome.commit.expect("slice commits"),
            other => panic!("unexpected step {other:?}"),
        };
        slice.on_completion(result);
    }
}

fn engine_overhead(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let agents = agents();
    let mut group = c.benchmark_group("engine_slice");
    for n in LENGTHS {
        let (record, view) = thread(n);
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_batched(
                || record.clone(),
                |record| black_box(rt.block_on(one_slice(&agents, record, &view))),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Bytes written to the file store by one slice at each history length.
fn store_writes() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let agents = agents();
    println!("\nstore writes per slice (file store; appended bytes + the replaced state file)");
    println!(
        "{:>10} {:>14} {:>14} {:>12}",
        "history", "appended B", "state.json B", "entries"
    );
    for n in LENGTHS {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = FileStore::open(tmp.path()).expect("store");
        let (mut record, view) = thread(n);
        // Write the existing history in one commit.
        record.version = 1;
        let setup = Commit {
            thread_id: record.id.clone(),
            expected_version: None,
            record: record.clone(),
            new_entries: view.iter().map(|e| (**e).clone()).collect(),
            processed_inputs: Vec::new(),
            effects: Vec::new(),
        };
        rt.block_on(store.commit(&setup)).expect("setup commit");
        let dir = tmp.path().join("threads/bench");
        let appended_before = dir_bytes(&dir)
            - std::fs::metadata(dir.join("state.json"))
                .map(|m| m.len())
                .unwrap_or(0);
        let commit = rt.block_on(one_slice(&agents, record, &view));
        rt.block_on(store.commit(&commit)).expect("slice commit");
        let state = std::fs::metadata(dir.join("state.json"))
            .map(|m| m.len())
            .unwrap_or(0);
        let appended = dir_bytes(&dir) - state - appended_before;
        println!(
            "{n:>10} {appended:>14} {state:>14} {:>12}",
            commit.new_entries.len()
        );
    }
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

async fn system() -> infinity_agent_core::runtime::AgentSystem {
    AgentSystemBuilder::new()
        .with_agent(AgentSpec::new("bench", "You are benchmarked.", model()))
        .with_tokio_sleep_tools()
        .build()
        .await
        .expect("system builds")
}

/// Resident memory of 100,000 threads that each called `sleep(3600)` and now wait.
fn idle_memory() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let system = system().await;
        let before = rss_bytes();
        let n = 100_000u64;
        // Threads go to sleep a thousand at a time, as they would over a day.
        for batch in 0..n / 1000 {
            for i in 0..1000 {
                let id = ThreadId::new(format!("idle-{batch}-{i}")).expect("id");
                system.send(Input::user_message(id, "nap"));
            }
            let outcome = system
                .wait_idle(Some(tokio::time::Instant::now() + Duration::from_secs(600)))
                .await;
            assert!(matches!(outcome, WaitOutcome::Idle { next_timer: Some(_) }), "{outcome:?}");
        }
        let timers = system.timers().map_or(0, |t| t.pending());
        let after = rss_bytes();
        let per = (after.saturating_sub(before)) / n;
        println!(
            "\nidle sleeping threads: {n} threads, {timers} pending timers, RSS {:.1} MiB -> {:.1} MiB, {per} bytes per thread (in-memory store, history included)",
            before as f64 / 1048576.0,
            after as f64 / 1048576.0
        );
    });
}

/// Slices per second: 10,000 threads, each sent one message per round, 5 rounds.
fn throughput() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let system = system().await;
        let threads = 10_000u64;
        let rounds = 5u64;
        let ids: Vec<ThreadId> = (0..threads)
            .map(|i| ThreadId::new(format!("busy-{i}")).expect("id"))
            .collect();
        let start = Instant::now();
        for round in 0..rounds {
            for id in &ids {
                system.send(Input {
                    id: InputId::new(format!("r{round}-{id}")).expect("id"),
                    ..Input::user_message(id.clone(), "hello")
                });
            }
            system.wait_idle(None).await;
        }
        let took = start.elapsed();
        let slices = threads * rounds;
        let mut completions = 0;
        for id in ids.iter().take(10) {
            completions += system.record(id).await.ok().flatten().map_or(0, |r| r.usage.completions);
        }
        assert_eq!(completions, 10 * rounds, "every message got its own slice");
        println!(
            "\nthroughput: {slices} slices over {threads} concurrent threads in {:.2} s = {:.0} slices/s (2 worker threads, in-memory store)",
            took.as_secs_f64(),
            slices as f64 / took.as_secs_f64()
        );
    });
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    if wants("engine_slice") {
        let mut c = Criterion::default().configure_from_args();
        engine_overhead(&mut c);
        c.final_summary();
    }
    if wants("store_writes") {
        store_writes();
    }
    if wants("idle_memory") {
        idle_memory();
    }
    if wants("throughput") {
        throughput();
    }
}
