//! Benchmarks of the core runtime. Run with `make bench` (or `cargo bench -p infinity-agent-core`);
//! results and how to read them are in docs/benchmarks.md.
//!
//! 1. Engine overhead per slice (scripted model) at history lengths 10, 1,000 and 100,000
//!    (criterion).
//! 2. Bytes a slice writes to the file store at those lengths (printed table).
//! 3. Memory of 100,000 idle sleeping threads on the embedded runtime (printed).
//! 4. Slices per second with 10,000 concurrent threads on the embedded runtime (printed).
//! 5. `peer`: the workload of benchmarks/langgraph/bench.py on this engine, as JSON lines with the
//!    same keys, for `make bench-peer` (benchmarks/langgraph/run.sh), which sets the two side by
//!    side.

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
use infinity_agent_core::runtime::{AgentSystem, AgentSystemBuilder, WaitOutcome};
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::state::ThreadRecord;
use infinity_agent_core::store::{FileStore, MemoryStore, ThreadStore};
use infinity_agent_core::tools::ToolRegistry;
use jiff::Timestamp;

use infinity_agent_core::testing::{bench_runtime, rss_bytes};

fn runtime() -> tokio::runtime::Runtime {
    bench_runtime().expect("runtime")
}

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

/// `n` history entries of alternating user messages and replies.
fn entries(n: u64) -> impl Iterator<Item = HistoryEntry> {
    (0..n).map(|seq| {
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
        HistoryEntry {
            seq,
            at: Timestamp::UNIX_EPOCH,
            input_id: None,
            item,
        }
    })
}

/// The record of a root thread `id` of the bench agent that has `n` entries.
fn record_with(id: ThreadId, n: u64) -> ThreadRecord {
    let mut record = ThreadRecord::new(id, "bench", None, Timestamp::UNIX_EPOCH);
    record.history_len = n;
    record.version = 1;
    record
}

/// A thread with `n` entries of alternating user messages and replies.
fn thread(n: u64) -> (ThreadRecord, Vec<Arc<HistoryEntry>>) {
    let id = ThreadId::new("bench").expect("valid id");
    (record_with(id, n), entries(n).map(Arc::new).collect())
}

/// The commit that writes a thread's record and its whole history at once.
fn history_commit(record: &ThreadRecord, entries: Vec<HistoryEntry>) -> Commit {
    Commit {
        thread_id: record.id.clone(),
        expected_version: None,
        record: record.clone(),
        new_entries: entries,
        processed_inputs: Vec::new(),
        effects: Vec::new(),
        events: Vec::new(),
    }
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
        let (record, view) = thread(n);
        // Write the existing history in one commit.
        let setup = history_commit(&record, view.iter().map(|e| (**e).clone()).collect());
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

async fn system() -> AgentSystem {
    system_on(Arc::new(MemoryStore::new())).await
}

async fn system_on(store: Arc<dyn ThreadStore>) -> AgentSystem {
    AgentSystemBuilder::new()
        .with_store(store)
        .with_agent(AgentSpec::new("bench", "You are benchmarked.", model()))
        .with_tokio_sleep_tools()
        .build()
        .await
        .expect("system builds")
}

/// Resident memory of 100,000 threads that each called `sleep(3600)` and now wait.
fn idle_memory() {
    let rt = runtime();
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
    let rt = runtime();
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

/// History lengths of the side-by-side run with LangGraph.
const PEER_LENGTHS: [u64; 3] = [10, 1_000, 10_000];
/// Untimed turns before the timed ones.
const PEER_WARM_UP: u64 = 2;

/// Turns timed per length: each has a thread of its own (10,000 entries each is enough).
fn peer_turns(n: u64) -> u64 {
    if n >= 10_000 {
        40
    } else {
        200
    }
}

/// Idle conversations kept per length: as many as bench.py keeps.
fn peer_conversations(n: u64) -> u64 {
    match n {
        10 => 10_000,
        1_000 => 200,
        _ => 20,
    }
}

/// One JSON line with the keys bench.py prints (`extra` adds more).
fn emit(system: &str, metric: &str, size: u64, value: f64, unit: &str, extra: serde_json::Value) {
    let mut line = serde_json::json!({
        "system": system, "metric": metric, "size": size, "value": value, "unit": unit,
    });
    if let (Some(line), serde_json::Value::Object(extra)) = (line.as_object_mut(), extra) {
        line.extend(extra);
    }
    println!("{line}");
}

/// The middle value (the mean of the two middle ones for an even count), as Python's
/// `statistics.median`.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

/// Bytes this process has handed to write(2) so far (`wchar` in /proc/self/io).
fn written_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|line| line.strip_prefix("wchar:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .expect("/proc/self/io has a wchar line")
}

/// The engine alone: a turn of a thread of `n` entries, its view already loaded (no store).
/// Every turn starts from the same `n` entries, as the engine_slice part.
fn peer_engine(n: u64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let agents = agents();
    let (record, view) = thread(n);
    let turns = peer_turns(n);
    let mut times = Vec::new();
    for turn in 0..PEER_WARM_UP + turns {
        let record = record.clone();
        let start = Instant::now();
        let commit = black_box(rt.block_on(one_slice(&agents, record, &view)));
        let took = start.elapsed();
        assert_eq!(commit.record.history_len, n + 2);
        if turn >= PEER_WARM_UP {
            times.push(took.as_secs_f64() * 1e6);
        }
    }
    emit(
        "infinity-engine",
        "turn_us",
        n,
        median(times),
        "us",
        serde_json::json!({ "turns": turns }),
    );
}

/// Whole turns on the embedded runtime: a user message sent, the slice (load, engine, scripted
/// completion, commit, output effects), until the system is idle again. Each turn has a thread
/// of its own whose `n` entries were committed before, untimed, so that every turn starts from
/// `n` entries (as in bench.py). On the file store, also the bytes each turn writes.
fn peer_runtime(n: u64, on_file: bool) {
    let rt = runtime();
    let folder = tempfile::tempdir().expect("tempdir");
    let store: Arc<dyn ThreadStore> = if on_file {
        Arc::new(FileStore::open(folder.path()).expect("store"))
    } else {
        Arc::new(MemoryStore::new())
    };
    let turns = peer_turns(n);
    let (mut times, mut payload, mut written) = (Vec::new(), Vec::new(), Vec::new());
    rt.block_on(async {
        let system = system_on(store).await;
        // Every conversation is written first, untimed: writing 10,000 entries just before a
        // timed turn leaves the allocator a heap of freed blocks to sort out in that turn.
        let threads: Vec<ThreadId> = (0..PEER_WARM_UP + turns)
            .map(|turn| ThreadId::new(format!("peer-{n}-{turn}")).expect("id"))
            .collect();
        for thread_id in &threads {
            let record = record_with(thread_id.clone(), n);
            let setup = history_commit(&record, entries(n).collect());
            system.store().commit(&setup).await.expect("history commit");
        }
        for (turn, thread_id) in threads.iter().enumerate() {
            let dir = folder.path().join("threads").join(thread_id.as_str());
            let state_bytes = || {
                std::fs::metadata(dir.join("state.json"))
                    .map(|m| m.len())
                    .unwrap_or(0)
            };
            let appended_before = dir_bytes(&dir) - state_bytes();
            let written_before = written_bytes();
            let start = Instant::now();
            system.send(Input::user_message(thread_id.clone(), "hello again"));
            system.wait_idle(None).await;
            let took = start.elapsed();
            let written_now = written_bytes() - written_before;
            let state = state_bytes();
            let appended = dir_bytes(&dir) - state - appended_before;
            let record = system.record(thread_id).await.expect("record");
            assert_eq!(record.map(|r| r.history_len), Some(n + 2));
            if turn as u64 >= PEER_WARM_UP {
                times.push(took.as_secs_f64() * 1e6);
                // state.json is replaced whole by each commit: all of it is written.
                payload.push((appended + state) as f64);
                written.push(written_now as f64);
            }
        }
    });
    let system = if on_file {
        "infinity-file"
    } else {
        "infinity-memory"
    };
    let turns = serde_json::json!({ "turns": turns });
    emit(system, "turn_us", n, median(times), "us", turns);
    if on_file {
        let none = serde_json::Value::Null;
        emit(
            system,
            "bytes_payload",
            n,
            median(payload),
            "B",
            none.clone(),
        );
        emit(system, "bytes_written", n, median(written), "B", none);
    }
}

/// Resident memory per idle conversation: conversations of `n` entries that each took one turn,
/// in the in-memory store of the embedded runtime. Run in a process of its own (`peer` starts
/// the bench again with `--peer-idle=N`).
fn peer_idle(n: u64) {
    let rt = runtime();
    let count = peer_conversations(n);
    rt.block_on(async {
        let system = system().await;
        let conversation = |name: String| async {
            let record = record_with(ThreadId::new(name).expect("id"), n);
            let setup = history_commit(&record, entries(n).collect());
            system.store().commit(&setup).await.expect("history commit");
            system.send(Input::user_message(record.id, "hello"));
        };
        // One conversation first, so that what the first turn sets up once is not counted.
        conversation("warm-up".to_owned()).await;
        system.wait_idle(None).await;
        let before = rss_bytes();
        for i in 0..count {
            conversation(format!("idle-{i}")).await;
            if i % 1000 == 999 {
                system.wait_idle(None).await;
            }
        }
        system.wait_idle(None).await;
        let after = rss_bytes();
        emit(
            "infinity-memory",
            "idle_rss_bytes",
            n,
            after.saturating_sub(before) as f64 / count as f64,
            "B",
            serde_json::json!({ "conversations": count }),
        );
    });
}

/// The workload of benchmarks/langgraph/bench.py, on this engine.
fn peer() {
    for n in PEER_LENGTHS {
        peer_engine(n);
        peer_runtime(n, false);
        peer_runtime(n, true);
    }
    // Each in a process of its own: memory freed by the parts before would be reused and hide
    // the growth.
    let exe = std::env::current_exe().expect("the bench's own path");
    for n in PEER_LENGTHS {
        let status = std::process::Command::new(&exe)
            .arg(format!("--peer-idle={n}"))
            .status()
            .expect("the idle-memory process starts");
        assert!(status.success(), "idle memory at {n} entries: {status}");
    }
}

fn main() {
    let idle_at = std::env::args().find_map(|a| {
        a.strip_prefix("--peer-idle=")
            .and_then(|n| n.parse::<u64>().ok())
    });
    if let Some(n) = idle_at {
        peer_idle(n);
        return;
    }
    // One part of `peer` alone, to profile it: `--peer-runtime=N` (in-memory store) or
    // `--peer-runtime=N:file`.
    let runtime_at =
        std::env::args().find_map(|a| a.strip_prefix("--peer-runtime=").map(str::to_owned));
    if let Some(spec) = runtime_at {
        let (n, file) = spec
            .split_once(':')
            .map_or((spec.as_str(), false), |(n, s)| (n, s == "file"));
        peer_runtime(n.parse().expect("--peer-runtime=N[:file]"), file);
        return;
    }
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
    if wants("peer") {
        peer();
    }
}
