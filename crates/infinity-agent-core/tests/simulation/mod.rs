//! Deterministic simulation of the runtime: many threads of two agents over the real engine,
//! the real host driver and effect performer, and the real memory store, with a fake clock and a
//! seeded scheduler that injects faults (duplicate deliveries, reordering across threads, crashes
//! after a commit and between effects, version conflicts and racing slices, model errors, tool
//! servers that refuse, answer twice or never). The invariants in `invariants.rs` are checked
//! after every step and once the run has settled.
//!
//! `make test` runs [`DEFAULT_SEEDS`] seeds. More: `INFINITY_SIM_SEEDS=100000`; from another
//! start: `INFINITY_SIM_FIRST_SEED=5000`. A failing seed prints itself and its trace; run it
//! alone with `INFINITY_SIM_SEED=N cargo test -p infinity-agent-core --test integration
//! simulation::` (it replays exactly: same seed, same run).

mod invariants;
mod model;
mod rng;
mod world;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use infinity_agent_core::agent::{Agent, AgentSpec, Limits};
use infinity_agent_core::effect::{Effect, PendingEffect};
use infinity_agent_core::host::{perform_effects, run_slice, HostContext, RetryPolicy};
use infinity_agent_core::ids::{InputId, SeededIds, ThreadId};
use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::store::{MemoryStore, ThreadStore};
use infinity_agent_core::testing::DispatchedTool;
use infinity_agent_core::tools::internal::InternalTools;
use infinity_agent_core::tools::Tool;
use jiff::{SignedDuration, Timestamp};

use model::{ModelFaults, SimModel};
use rng::Rng;
use world::{server_input, Answer, Net, NetFaults, ServerSub, Shared, SimStore};

/// Seeds `make test` runs.
const DEFAULT_SEEDS: u64 = 3_000;

/// The faults of a run, drawn from its seed.
fn faults(rng: &mut Rng) -> (NetFaults, ModelFaults) {
    (
        NetFaults {
            duplicate: rng.below(300),
            refuse_dispatch: rng.below(100),
            conflict: rng.below(80),
        },
        ModelFaults {
            retryable: rng.below(150),
            terminal: rng.below(30),
        },
    )
}

struct Sim {
    rng: Rng,
    net: Shared,
    store: SimStore,
    agents: HashMap<String, Arc<Agent>>,
    models: Vec<Arc<SimModel>>,
    /// Root threads people started, with their agent.
    roots: BTreeMap<ThreadId, &'static str>,
    messages: u32,
}

impl Sim {
    fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let (net_faults, model_faults) = faults(&mut rng);
        let start: Timestamp = "2026-03-07T17:00:00Z".parse().unwrap();
        let net = Shared::new(Net::new(rng.next(), start, net_faults));
        let store = SimStore {
            inner: MemoryStore::new(),
            net: net.clone(),
        };
        let alpha_model = Arc::new(SimModel::new("alpha", rng.next(), 100_000, model_faults));
        let beta_model = Arc::new(SimModel::new("beta", rng.next(), 400, model_faults));
        let lookup: Arc<dyn Tool> = Arc::new(DispatchedTool("lookup"));
        let mut alpha = AgentSpec::new("alpha", "You are alpha.", alpha_model.clone());
        alpha.internal_tools = InternalTools::builder().agent(true).build();
        // Alpha's lookups wait for a person's approval (the deadline runs them), and it has a
        // tool its application runs; beta's sleeps wait for approval too (the deadline declines).
        alpha.client_tools = vec![serde_yaml_ng::from_str(
            "{name: pick, description: Asks the application., input_schema: {type: object}, deadline: 30m}",
        )
        .unwrap()];
        alpha.approvals =
            vec![
                serde_yaml_ng::from_str("{tools: [lookup], deadline: 20m, default: approve}")
                    .unwrap(),
            ];
        let mut beta = AgentSpec::new("beta", "You are beta.", beta_model.clone());
        beta.approvals = vec![serde_yaml_ng::from_str("{tools: [sleep], deadline: 10m}").unwrap()];
        // Tight hourly limits, so runs suspend threads, lift them and refuse spawns.
        beta.limits = Limits {
            max_completions_per_slice: 4,
            completions_per_hour: 6,
            conversation_completions_per_hour: 20,
            conversation_threads_per_hour: 4,
            ..Limits::default()
        };
        let agents = [alpha, beta]
            .into_iter()
            .map(|spec| {
                let agent =
                    Agent::from_spec(spec, &Default::default(), std::slice::from_ref(&lookup))
                        .unwrap();
                (agent.name.clone(), Arc::new(agent))
            })
            .collect();
        Self {
            rng,
            net,
            store,
            agents,
            models: vec![alpha_model, beta_model],
            roots: BTreeMap::new(),
            messages: 0,
        }
    }

    fn trace(&self, line: String) {
        self.net.lock().trace.push(line);
    }

    fn now(&self) -> Timestamp {
        self.net.lock().now
    }

    fn advance(&self, to: Timestamp) {
        let mut net = self.net.lock();
        if to > net.now {
            net.now = to;
        }
    }

    /// One slice of `thread` over `batch`, as a Lambda handler runs it: first what an earlier
    /// slice left in the outbox, then the slice. A failure puts the batch back at the front of
    /// the thread's queue (the queue delivers it again).
    async fn slice(&mut self, thread: &ThreadId, batch: Vec<Input>) {
        let ids: Vec<&str> = batch.iter().map(|i| i.id.as_str()).collect();
        let line = format!("slice {thread} [{}]", ids.join(" "));
        self.trace(line);
        let ok = self.flush_leftover(thread).await && self.run_one(thread, batch.clone()).await;
        if !ok {
            self.requeue(thread, batch);
        }
        self.restart_if_crashed().await;
    }

    /// Performs what earlier slices of `thread` left in the outbox, as every delivery to the
    /// thread does before its slice; false when that failed (the delivery fails with it).
    async fn flush_leftover(&self, thread: &ThreadId) -> bool {
        let leftover: Vec<PendingEffect> = self
            .store
            .inner
            .outbox()
            .await
            .unwrap()
            .into_iter()
            .filter(|(t, _)| t == thread)
            .map(|(_, e)| e)
            .collect();
        leftover.is_empty()
            || perform_effects(&self.net, &self.store, thread, &leftover, None)
                .await
                .is_ok()
    }

    /// Runs one slice; false when the queue must deliver the batch again.
    async fn run_one(&self, thread: &ThreadId, batch: Vec<Input>) -> bool {
        let host = HostContext {
            store: &self.store,
            agents: &self.agents,
            default_agent: self.roots.get(thread).copied(),
            discovery: None,
            effects: &self.net,
            live: None,
            budget: None,
            model_retry: RetryPolicy::new(3, Duration::from_millis(100), Duration::from_secs(1)),
            library: None,
        };
        let (now, seed) = {
            let mut net = self.net.lock();
            (net.now, net.rng.next())
        };
        match run_slice(&host, thread, batch, now, &mut SeededIds::new(seed)).await {
            Ok(report) => {
                let mut net = self.net.lock();
                for d in &report.outcome.dropped {
                    net.dropped
                        .insert((thread.clone(), d.input_id.clone()), d.reason.to_string());
                }
                let sends: Vec<String> = report
                    .outcome
                    .commit
                    .iter()
                    .flat_map(|c| &c.effects)
                    .filter_map(|e| match &e.effect {
                        Effect::Send { input } | Effect::SendAt { input, .. } => {
                            Some(format!("{}->{}", input.id, input.thread_id))
                        }
                        _ => None,
                    })
                    .collect();
                let drops: Vec<String> = report
                    .outcome
                    .dropped
                    .iter()
                    .map(|d| format!("{} ({})", d.input_id, d.reason))
                    .collect();
                let line = format!(
                    "  committed {} completion(s), effects {}; sends [{}]; dropped [{}]",
                    report.outcome.completions,
                    if report.effects.is_ok() {
                        "done"
                    } else {
                        "failed"
                    },
                    sends.join(" "),
                    drops.join(", ")
                );
                net.trace.push(line);
                report.effects.is_ok()
            }
            Err(err) => {
                let mut net = self.net.lock();
                net.trace.push(format!("  failed: {err}"));
                if !err.is_retryable() {
                    net.violations
                        .push(format!("{thread}: a slice failed for good: {err}"));
                }
                false
            }
        }
    }

    fn requeue(&self, thread: &ThreadId, batch: Vec<Input>) {
        let mut net = self.net.lock();
        let queue = net.queues.entry(thread.clone()).or_default();
        for input in batch.into_iter().rev() {
            queue.push_front(input);
        }
    }

    /// A crashed host comes back: its state is what the store holds.
    async fn restart_if_crashed(&mut self) {
        let crashed = {
            let mut net = self.net.lock();
            let crashed = net.crashed;
            net.crashed = false;
            net.effects_left = None;
            crashed
        };
        if crashed {
            self.trace("  host crashed and restarted".to_owned());
            if self.rng.chance(500) {
                self.recover().await;
            }
        }
    }

    /// Performs every outbox, as the embedded runtime does when it starts. An armed crash may
    /// strike here too; the host then comes back with what the store holds.
    async fn recover(&self) {
        let mut by_thread: BTreeMap<ThreadId, Vec<PendingEffect>> = BTreeMap::new();
        for (t, e) in self.store.inner.outbox().await.unwrap() {
            by_thread.entry(t).or_default().push(e);
        }
        for (t, effects) in by_thread {
            let _ = perform_effects(&self.net, &self.store, &t, &effects, None).await;
        }
        let mut net = self.net.lock();
        if net.crashed {
            net.crashed = false;
            net.effects_left = None;
            net.trace
                .push("  host crashed while recovering, and restarted".to_owned());
        }
    }

    /// Takes up to three inputs from the front of a thread's queue.
    fn take_batch(&mut self, thread: &ThreadId) -> Vec<Input> {
        let n = 1 + self.rng.below(3) as usize;
        let mut net = self.net.lock();
        let queue = net.queues.entry(thread.clone()).or_default();
        let n = n.min(queue.len());
        queue.drain(..n).collect()
    }

    fn busy_threads(&self, at_least: usize) -> Vec<ThreadId> {
        self.net
            .lock()
            .queues
            .iter()
            .filter(|(_, q)| q.len() >= at_least)
            .map(|(t, _)| t.clone())
            .collect()
    }

    async fn deliver(&mut self) -> bool {
        let busy = self.busy_threads(1);
        if busy.is_empty() {
            return false;
        }
        let thread = busy[self.rng.below(busy.len() as u64) as usize].clone();
        let batch = self.take_batch(&thread);
        self.slice(&thread, batch).await;
        true
    }

    /// Two slices of one thread at once, as when a slow slice outlives the queue's visibility
    /// timeout and the group's messages are delivered again (from the same front message, maybe
    /// with more behind it): both load the same version, the second to commit gets a conflict.
    async fn race(&mut self) -> bool {
        let busy = self.busy_threads(2);
        if busy.is_empty() {
            return false;
        }
        let thread = busy[self.rng.below(busy.len() as u64) as usize].clone();
        let b = self.take_batch(&thread);
        let a: Vec<Input> = b[..1 + self.rng.below(b.len() as u64) as usize].to_vec();
        self.trace(format!(
            "race on {thread}: {} input(s) vs {} from the same front",
            a.len(),
            b.len()
        ));
        // Each delivery performs the thread's leftover outbox first; the first to do it stands
        // for both.
        if !self.flush_leftover(&thread).await {
            self.requeue(&thread, b);
            self.restart_if_crashed().await;
            return true;
        }
        let (ok_a, ok_b) = tokio::join!(
            self.run_one(&thread, a.clone()),
            self.run_one(&thread, b.clone())
        );
        if !ok_b {
            self.requeue(&thread, b);
        }
        if !ok_a {
            self.requeue(&thread, a);
        }
        self.restart_if_crashed().await;
        true
    }

    fn fire_timer(&mut self) -> bool {
        let mut net = self.net.lock();
        let Some(index) = (0..net.timers.len()).min_by_key(|&i| (net.timers[i].0, i)) else {
            return false;
        };
        let (due, input) = net.timers.remove(index);
        if due > net.now {
            net.now = due;
        }
        net.trace.push(format!("timer {} fires", input.id));
        net.deliver(input);
        true
    }

    /// A tool server answers one of its calls (the first due, else the earliest).
    fn answer(&mut self) -> bool {
        let mut net = self.net.lock();
        let Some(index) = (0..net.server.len())
            .filter(|&i| net.server[i].answer != Answer::Never)
            .min_by_key(|&i| (net.server[i].due, i))
        else {
            return false;
        };
        let mut call = net.server[index].clone();
        if call.due > net.now {
            net.now = call.due;
        }
        let (t, c) = (call.thread_id.clone(), call.call_id.clone());
        let result = |suffix: &str, text: String| {
            server_input(&t, &c, suffix, InputBody::tool_result(c.clone(), text))
        };
        net.trace
            .push(format!("server answers {c} ({:?})", call.answer));
        match call.answer {
            Answer::Once => net.deliver(result("result", format!("found for {c}"))),
            Answer::Twice => {
                net.deliver(result("result", format!("found for {c}")));
                net.deliver(result("result", format!("found for {c}")));
            }
            Answer::TwiceDifferent => {
                net.deliver(result("result", format!("found for {c}")));
                net.deliver(result("result-again", format!("found again for {c}")));
            }
            Answer::Subscribe {
                associative,
                events,
            } => {
                let mut input = result("result", format!("subscribed {c}"));
                if let InputBody::ToolResult { subscription, .. } = &mut input.body {
                    *subscription = true;
                }
                net.deliver(input);
                net.subs.push(ServerSub {
                    thread_id: t.clone(),
                    call_id: c.clone(),
                    associative,
                    events_left: events,
                    sent: 0,
                });
            }
            Answer::Oauth if !call.authorized => {
                net.deliver(server_input(
                    &t,
                    &c,
                    "oauth",
                    InputBody::ToolAuthorization {
                        call_id: c.clone(),
                        auth_url: "https://auth.example/authorize".into(),
                    },
                ));
                call.authorized = true;
                call.due = net.now + SignedDuration::from_secs(60);
                net.server[index] = call;
                return true;
            }
            Answer::Oauth => net.deliver(result("result", format!("authorized and found for {c}"))),
            Answer::Never => {}
        }
        net.server.remove(index);
        true
    }

    fn event(&mut self) -> bool {
        let mut net = self.net.lock();
        if net.subs.is_empty() {
            return false;
        }
        let count = net.subs.len() as u64;
        let index = net.rng.below(count) as usize;
        let sub = &mut net.subs[index];
        sub.sent += 1;
        let last = sub.sent >= sub.events_left;
        let (t, c, associative, n) = (
            sub.thread_id.clone(),
            sub.call_id.clone(),
            sub.associative,
            sub.sent,
        );
        if last {
            net.subs.remove(index);
        }
        net.trace.push(format!("event {n} of {c}"));
        net.deliver(server_input(
            &t,
            &c,
            &format!("event-{n}"),
            InputBody::SubscriptionEvent {
                call_id: c.clone(),
                text: format!("event {n}"),
                associative,
                is_final: last,
            },
        ));
        true
    }

    fn user_message(&mut self) -> bool {
        if self.messages >= 8 {
            return false;
        }
        self.messages += 1;
        let thread = if self.roots.is_empty() || (self.roots.len() < 3 && self.rng.chance(400)) {
            let id = ThreadId::new(format!("root{}", self.roots.len())).unwrap();
            let agent = if self.rng.chance(500) {
                "alpha"
            } else {
                "beta"
            };
            self.roots.insert(id.clone(), agent);
            id
        } else {
            let roots: Vec<&ThreadId> = self.roots.keys().collect();
            roots[self.rng.below(roots.len() as u64) as usize].clone()
        };
        // Now and then the person interrupts instead (cancelling the calls in flight).
        let interrupt = self.rng.chance(150);
        let input = Input {
            id: InputId::new(format!(
                "{}{}",
                if interrupt { "interrupt" } else { "user" },
                self.messages
            ))
            .unwrap(),
            thread_id: thread.clone(),
            body: if interrupt {
                InputBody::Interrupt { tree: false }
            } else {
                InputBody::UserMessage {
                    text: format!("request {}", self.messages),
                    agent: None,
                    while_busy: None,
                }
            },
        };
        let mut net = self.net.lock();
        net.trace.push(format!(
            "user {} {thread}",
            if interrupt { "interrupts" } else { "writes to" }
        ));
        net.deliver(input);
        true
    }

    fn crash_next(&mut self) -> bool {
        let left = self.rng.below(4) as u32;
        let mut net = self.net.lock();
        net.effects_left = Some(left);
        net.trace
            .push(format!("the host will crash after {left} effect(s)"));
        true
    }

    async fn check(&self, settled: bool) -> Result<(), String> {
        let snapshot = invariants::Snapshot::load(&self.store).await?;
        snapshot.check(&self.net.lock(), settled)
    }

    /// One step of the chaos phase.
    async fn step(&mut self) -> bool {
        match self.rng.below(100) {
            0..=44 => self.deliver().await,
            45..=49 => self.race().await,
            50..=62 => self.fire_timer(),
            63..=75 => self.answer(),
            76..=80 => self.event(),
            81..=88 => self.user_message(),
            89..=92 => self.crash_next(),
            93..=95 => {
                self.recover().await;
                true
            }
            _ => {
                let by = SignedDuration::from_secs(1 + self.rng.below(120) as i64);
                self.advance(self.now() + by);
                true
            }
        }
    }

    /// No more faults; everything in flight is delivered until nothing is left to do.
    async fn settle(&mut self) -> Result<(), String> {
        {
            let mut net = self.net.lock();
            net.faults = NetFaults::NONE;
            net.effects_left = None;
        }
        for model in &self.models {
            model.heal();
        }
        for _ in 0..20_000 {
            let progressed =
                self.deliver().await || self.fire_timer() || self.answer() || self.event() || {
                    let pending = !self.store.inner.outbox().await.unwrap().is_empty();
                    if pending {
                        self.recover().await;
                    }
                    pending
                };
            if !progressed {
                return Ok(());
            }
        }
        Err("the run did not settle within 20,000 steps".to_owned())
    }

    async fn run(mut self, steps: u32) -> Result<Run, (String, Vec<String>)> {
        let result = self.run_steps(steps).await;
        if result.is_err() && env_u64("INFINITY_SIM_SEED").is_some() {
            println!(
                "threads at the failure:\n{}",
                invariants::describe(&self.store).await
            );
        }
        result
    }

    async fn run_steps(&mut self, steps: u32) -> Result<Run, (String, Vec<String>)> {
        let fail = |sim: &Sim, why: String| (why, sim.net.lock().trace.clone());
        self.user_message();
        for _ in 0..steps {
            self.step().await;
            if let Err(why) = self.check(false).await {
                return Err(fail(self, why));
            }
        }
        if let Err(why) = self.settle().await {
            return Err(fail(self, why));
        }
        if let Err(why) = self.check(true).await {
            return Err(fail(self, why));
        }
        let snapshot = invariants::Snapshot::load(&self.store)
            .await
            .map_err(|why| fail(self, why))?;
        let net = self.net.lock();
        let mut coverage = snapshot.coverage();
        coverage.insert(
            "crashes",
            net.trace
                .iter()
                .filter(|l| l.contains("host crashed"))
                .count(),
        );
        coverage.insert(
            "conflicts",
            net.trace
                .iter()
                .filter(|l| l.contains("version conflict"))
                .count(),
        );
        coverage.insert("outputs truncated", net.outputs_truncated);
        coverage.insert("authorization detours", net.authorizations_shown);
        coverage.insert("approvals asked", net.approvals_asked);
        coverage.insert("client calls shown", net.client_calls_shown);
        coverage.insert(
            "duplicates dropped",
            net.dropped
                .values()
                .filter(|w| *w == "already processed")
                .count(),
        );
        Ok(Run {
            trace: net.trace.clone(),
            coverage,
        })
    }
}

/// A run that kept every invariant: its trace, and what it exercised.
struct Run {
    trace: Vec<String>,
    coverage: BTreeMap<&'static str, usize>,
}

/// Runs one seed to the end; the run, or why it failed and the trace up to then.
fn simulate(seed: u64) -> Result<Run, (String, Vec<String>)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let steps = 40 + Rng::new(seed ^ 0xA5A5).below(80) as u32;
    runtime.block_on(Sim::new(seed).run(steps))
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[test]
fn every_seed_keeps_every_invariant() {
    let seeds: Vec<u64> = match env_u64("INFINITY_SIM_SEED") {
        Some(seed) => vec![seed],
        None => {
            let first = env_u64("INFINITY_SIM_FIRST_SEED").unwrap_or(0);
            let count = env_u64("INFINITY_SIM_SEEDS").unwrap_or(DEFAULT_SEEDS);
            (first..first + count).collect()
        }
    };
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4);
    let chunks: Vec<Vec<u64>> = (0..workers)
        .map(|w| seeds.iter().copied().skip(w).step_by(workers).collect())
        .collect();
    type Outcome = Result<BTreeMap<&'static str, usize>, (u64, String, Vec<String>)>;
    let outcomes: Vec<Outcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || {
                    let mut total: BTreeMap<&'static str, usize> = BTreeMap::new();
                    for seed in chunk {
                        match simulate(seed) {
                            Ok(run) => {
                                for (what, n) in run.coverage {
                                    *total.entry(what).or_default() += n;
                                }
                            }
                            Err((why, trace)) => return Err((seed, why, trace)),
                        }
                    }
                    Ok(total)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut coverage: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for outcome in outcomes {
        match outcome {
            Ok(total) => {
                for (what, n) in total {
                    *coverage.entry(what).or_default() += n;
                }
            }
            Err(failure) => failures.push(failure),
        }
    }
    if let Some((seed, why, trace)) = failures.into_iter().min_by_key(|f| f.0) {
        let tail: Vec<String> = trace.iter().rev().take(40).rev().cloned().collect();
        panic!(
            "simulation seed {seed} failed: {why}\n\
             replay it: INFINITY_SIM_SEED={seed} cargo test -p infinity-agent-core --test integration simulation::\n\
             the last steps:\n  {}",
            tail.join("\n  ")
        );
    }
    println!(
        "{} seeds kept every invariant; they exercised {coverage:#?}",
        seeds.len()
    );
    if seeds.len() >= 1000 {
        // A path no run reaches is a gap the simulator would hide: a change that stops the model
        // or the faults from reaching it must be noticed.
        for path in [
            "child threads",
            "delegated threads",
            "closed threads",
            "suspensions",
            "model errors recorded",
            "compactions",
            "thread starts refused",
            "sleeps interrupted",
            "calls still running at a message",
            "authorization detours",
            "approvals asked",
            "approvals declined",
            "client calls shown",
            "client calls past their deadline",
            "interruptions",
            "undeliverable calls",
            "calls cut by a close",
            "events injected",
            "crashes",
            "conflicts",
            "duplicates dropped",
            "outputs truncated",
        ] {
            assert!(
                coverage.get(path).is_some_and(|n| *n > 0),
                "no run exercised {path}: {coverage:#?}"
            );
        }
    }
}

#[test]
fn a_seed_replays_exactly() {
    for seed in [3, 17, 4242] {
        let first = simulate(seed).map(|r| r.trace).map_err(|(why, _)| why);
        let again = simulate(seed).map(|r| r.trace).map_err(|(why, _)| why);
        assert_eq!(first, again, "seed {seed} ran differently twice");
        assert!(
            first.as_ref().is_ok_and(|t| t.len() > 40),
            "seed {seed}: {first:?}"
        );
    }
}
