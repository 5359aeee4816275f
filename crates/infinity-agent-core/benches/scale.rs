//! Many threads on the embedded runtime: time and memory of 100,000 sleeping threads on the file
//! store (and on the in-memory store, for comparison), of one parent with 1,000 children, and of
//! the web app's conversation list over 100 and 10,000 conversations.
//! `cargo bench -p infinity-agent-core --bench scale [-- PART]` (parts: `idle_file`, `idle_memory`,
//! `fan_out`, `list`); results in docs/benchmarks.md. Memory is the growth of the process's resident set,
//! so run one part per process (`make bench` does).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a bench: a failed step should stop it

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use infinity_agent_core::agent::{AgentSpec, Limits};
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::input::Input;
use infinity_agent_core::runtime::{AgentSystem, AgentSystemBuilder, WaitOutcome};
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::store::{FileStore, MemoryStore, ThreadStore};

use infinity_agent_core::testing::{bench_runtime, rss_bytes};

fn runtime() -> tokio::runtime::Runtime {
    bench_runtime().expect("runtime")
}

/// Children of the fan-out part.
const CHILDREN: usize = 1_000;

fn script() -> String {
    let spawns: Vec<String> = (0..CHILDREN)
        .map(|i| {
            format!("        - {{name: spawn_thread, args: {{instructions: \"job {i}\", child_of: \"${{stack}}\"}}}}")
        })
        .collect();
    format!(
        r#"rules:
  - when: '^nap$'
    reply: {{tool_calls: [{{name: sleep, args: {{seconds: 3600}}}}]}}
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

async fn system(store: Arc<dyn ThreadStore>) -> AgentSystem {
    let model = ScriptedModel::parse(&script(), Path::new("scale.yaml")).expect("script parses");
    let mut agent = AgentSpec::new("bench", "You are benchmarked.", Arc::new(model));
    // The parent hears from a thousand children within the hour.
    agent.limits = Limits {
        completions_per_hour: 100_000,
        conversation_completions_per_hour: 100_000,
        conversation_threads_per_hour: 100_000,
        tokens_per_hour: u64::MAX,
        conversation_tokens_per_hour: u64::MAX,
        ..Limits::default()
    };
    AgentSystemBuilder::new()
        .with_store(store)
        .with_agent(agent)
        .with_tokio_sleep_tools()
        .build()
        .await
        .expect("system builds")
}

/// 100,000 root threads each told to `sleep(3600)`, a thousand at a time (as threads accumulate
/// over a day); the resident set's growth per thread.
fn idle(store: Arc<dyn ThreadStore>, what: &str) {
    runtime().block_on(async {
        let system = system(store).await;
        let before = rss_bytes();
        let n = 100_000u64;
        let started = Instant::now();
        for batch in 0..n / 1000 {
            for i in 0..1000 {
                let id = ThreadId::new(format!("idle-{batch}-{i}")).expect("id");
                system.send(Input::user_message(id, "nap"));
            }
            let outcome = system
                .wait_idle(Some(tokio::time::Instant::now() + Duration::from_secs(600)))
                .await;
            assert!(
                matches!(outcome, WaitOutcome::Idle { next_timer: Some(_) }),
                "{outcome:?}"
            );
        }
        let took = started.elapsed();
        let timers = system.timers().map_or(0, |t| t.pending());
        assert_eq!(timers as u64, n, "every thread sleeps");
        let after = rss_bytes();
        println!(
            "idle sleeping threads, {what}: {n} threads asleep in {:.1} s ({:.0} slices/s); RSS {:.1} MiB -> {:.1} MiB: {} bytes per thread",
            took.as_secs_f64(),
            n as f64 / took.as_secs_f64(),
            before as f64 / 1048576.0,
            after as f64 / 1048576.0,
            after.saturating_sub(before) / n
        );
    });
}

/// One parent spawns 1,000 children in one turn; each reports back; the parent takes each
/// report. Time until everything is idle, and the resident set's growth.
fn fan_out(store: Arc<dyn ThreadStore>, what: &str) {
    runtime().block_on(async {
        let system = system(store.clone()).await;
        let before = rss_bytes();
        let started = Instant::now();
        let parent = ThreadId::new("parent").expect("id");
        system.send(Input::user_message(parent.clone(), "fan"));
        let outcome = system
            .wait_idle(Some(tokio::time::Instant::now() + Duration::from_secs(1800)))
            .await;
        let took = started.elapsed();
        assert!(matches!(outcome, WaitOutcome::Idle { .. }), "{outcome:?}");
        let record = system.record(&parent).await.unwrap().unwrap();
        assert_eq!(record.children.len(), CHILDREN);
        let reports = system
            .view(&parent)
            .await
            .unwrap()
            .iter()
            .filter(|e| format!("{:?}", e.item).contains("done"))
            .count();
        assert_eq!(reports, CHILDREN, "every child reported");
        let threads = store.thread_ids().await.unwrap().len();
        let after = rss_bytes();
        println!(
            "fan-out, {what}: 1 parent, {CHILDREN} children, {threads} threads, {} parent slices, done in {:.2} s; RSS {:.1} MiB -> {:.1} MiB ({} bytes per child)",
            record.usage.completions,
            took.as_secs_f64(),
            before as f64 / 1048576.0,
            after as f64 / 1048576.0,
            after.saturating_sub(before) / CHILDREN as u64
        );
    });
}

fn file_store() -> (tempfile::TempDir, Arc<dyn ThreadStore>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = FileStore::open(dir.path()).expect("store");
    (dir, Arc::new(store))
}

/// Writes `n` conversations, each with 4 children, one commit each, a second apart.
async fn seed_conversations(store: &dyn ThreadStore, n: usize) {
    use infinity_agent_core::commit::Commit;
    use infinity_agent_core::state::ThreadRecord;
    let at = |k: usize| jiff::Timestamp::from_second(1_000_000 + k as i64).unwrap();
    for k in 0..n {
        let id = ThreadId::new(format!("c-{k:05}")).unwrap();
        let mut record = ThreadRecord::new(id.clone(), "bench", None, at(k));
        record.version = 1;
        record.title = Some(format!("Conversation number {k}"));
        let commit = Commit {
            thread_id: id,
            expected_version: None,
            record,
            new_entries: Vec::new(),
            processed_inputs: Vec::new(),
            effects: Vec::new(),
            events: Vec::new(),
        };
        store.commit(&commit).await.unwrap();
    }
}

/// The conversation list's first page (the web app's sidebar), and a title search, over 100 and
/// 10,000 conversations: the median time of each, and the ratio.
fn list(make: fn() -> (Option<tempfile::TempDir>, Arc<dyn ThreadStore>), label: &str) {
    use infinity_agent_core::state::{ThreadKind, ThreadQuery};
    let rt = runtime();
    let mut medians = Vec::new();
    for n in [100, 10_000] {
        let (_dir, store) = make();
        rt.block_on(seed_conversations(store.as_ref(), n));
        let time = |query: &ThreadQuery| {
            let mut runs: Vec<Duration> = (0..51)
                .map(|_| {
                    let started = Instant::now();
                    let page = rt.block_on(store.list_threads(query)).unwrap();
                    assert!(!page.threads.is_empty());
                    started.elapsed()
                })
                .collect();
            runs.sort();
            runs[runs.len() / 2]
        };
        let sidebar = ThreadQuery {
            kind: Some(ThreadKind::Conversation),
            limit: 50,
            ..ThreadQuery::default()
        };
        let search = ThreadQuery {
            title: Some("number 7".into()),
            ..sidebar.clone()
        };
        let (first, found) = (time(&sidebar), time(&search));
        println!(
            "list ({label}): {n:>6} conversations: first page of 50 {:>8.3} ms, title search {:>8.3} ms",
            first.as_secs_f64() * 1e3,
            found.as_secs_f64() * 1e3
        );
        medians.push(first);
    }
    println!(
        "list ({label}): 10,000 / 100 conversations: {:.1}x the time for the first page",
        medians[1].as_secs_f64() / medians[0].as_secs_f64()
    );
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let run = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    if run("idle_file") {
        let (_dir, store) = file_store();
        idle(store, "file store");
    }
    if run("idle_memory") {
        idle(Arc::new(MemoryStore::new()), "in-memory store");
    }
    if run("list") {
        list(
            || {
                let (dir, store) = file_store();
                (Some(dir), store)
            },
            "file store",
        );
        list(|| (None, Arc::new(MemoryStore::new())), "in-memory store");
    }
    if run("fan_out") {
        fan_out(Arc::new(MemoryStore::new()), "in-memory store");
        let (_dir, store) = file_store();
        fan_out(store, "file store");
    }
}
