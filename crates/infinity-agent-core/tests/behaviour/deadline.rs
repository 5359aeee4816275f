//! Slices that fit their deadline: a slice with no time left for its next completion commits
//! what it has and hands itself on with a `continue` input; the next slice (a fresh Lambda
//! invocation, here a fresh budget) goes on, with no completion lost or run twice and the
//! completion limit counted across the hand-offs. Time is tokio's paused clock: the scripted
//! model's `delay_ms` is the completion's time.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::behaviour::harness::{item_line, start_time, tid, Setup};
use infinity_agent_core::agent::{Agent, Limits};
use infinity_agent_core::effect::Effect;
use infinity_agent_core::host::{run_slice, HostContext, SliceBudget, MODEL_RETRY};
use infinity_agent_core::ids::SeededIds;
use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::store::{load_view_prefix, MemoryStore, ThreadStore};
use infinity_agent_core::testing::DeadHost;
use infinity_agent_core::tools::{SetTitle, ToolRegistry};

/// Four completions of a second each: three titles, then the answer.
const CHAIN: &str = r#"
rules:
  - when: "^go$"
    reply: {delay_ms: 1000, tool_calls: [{name: set_title, args: {title: "one"}}]}
  - when: "Title set to \"one\""
    reply: {delay_ms: 1000, tool_calls: [{name: set_title, args: {title: "two"}}]}
  - when: "Title set to \"two\""
    reply: {delay_ms: 1000, tool_calls: [{name: set_title, args: {title: "three"}}]}
  - when: "Title set to \"three\""
    reply: {delay_ms: 1000, text: "done"}
"#;

/// A model that never stops calling tools.
const RUNAWAY: &str = r#"
rules:
  - reply: {delay_ms: 1000, tool_calls: [{name: set_title, args: {title: "again"}}]}
"#;

fn agents(script: &str, limits: Limits) -> HashMap<String, Arc<Agent>> {
    let model = ScriptedModel::parse(script, Path::new("s.yaml")).unwrap();
    let mut tools = ToolRegistry::with_builtins();
    tools.register(Arc::new(SetTitle)).unwrap();
    let mut agent = Agent::new("tester", "", Arc::new(model), tools);
    agent.limits = limits;
    [("tester".to_owned(), Arc::new(agent))].into()
}

/// One "invocation": a slice of `inputs` with `seconds` of time from now, a completion
/// allowed 1.5 s and 1 s kept back for the commit. Its effects stay in the outbox (DeadHost).
async fn invocation(
    store: &MemoryStore,
    agents: &HashMap<String, Arc<Agent>>,
    inputs: Vec<Input>,
    seconds: f64,
    seed: u64,
) -> u32 {
    let host = HostContext {
        store,
        agents,
        default_agent: Some("tester"),
        discovery: None,
        effects: &DeadHost,
        live: None,
        model_retry: MODEL_RETRY,
        budget: Some(SliceBudget {
            deadline: tokio::time::Instant::now() + Duration::from_secs_f64(seconds),
            completion: Duration::from_millis(1500),
            reserve: Duration::from_secs(1),
        }),
        library: None,
    };
    let now = start_time();
    let report = run_slice(&host, &tid("main"), inputs, now, &mut SeededIds::new(seed))
        .await
        .unwrap();
    report.outcome.completions
}

/// The `continue` inputs the thread sent itself (still in the outbox: the host is dead).
async fn continuations(store: &MemoryStore) -> Vec<Input> {
    store
        .outbox()
        .await
        .unwrap()
        .into_iter()
        .filter_map(|(_, e)| match e.effect {
            Effect::Send { input } if matches!(input.body, InputBody::Continue { .. }) => {
                Some(input)
            }
            _ => None,
        })
        .collect()
}

async fn history(store: &MemoryStore) -> Vec<String> {
    load_view_prefix(store, &tid("main"), u64::MAX)
        .await
        .unwrap()
        .iter()
        .map(|e| item_line(&e.item))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_slice_without_time_for_its_next_completion_hands_itself_on() {
    let store = MemoryStore::new();
    let agents = agents(CHAIN, Limits::default());
    // 4.5 s: completions at 0, 1 and 2 s fit (1.5 s each, 1 s kept back); the fourth does not.
    let go = Input::user_message(tid("main"), "go");
    let ran = invocation(&store, &agents, vec![go], 4.5, 1).await;
    assert_eq!(ran, 3, "three completions fit before the deadline");
    let handed = continuations(&store).await;
    assert_eq!(handed.len(), 1, "one hand-off: {handed:?}");
    assert_eq!(handed[0].thread_id, tid("main"));
    assert_eq!(
        handed[0].body,
        InputBody::Continue { completions: 3 },
        "the hand-off carries the turn's completions"
    );
    let committed = history(&store).await;
    assert_eq!(
        committed.iter().filter(|l| l.contains("set_title")).count(),
        6,
        "three calls and their results were committed before the hand-off: {committed:#?}"
    );
    assert!(
        !committed.iter().any(|l| l.contains("done")),
        "{committed:#?}"
    );

    // The next invocation goes on where the last stopped: one completion, the answer.
    let ran = invocation(&store, &agents, handed.clone(), 10.0, 2).await;
    assert_eq!(ran, 1);
    let after = history(&store).await;
    assert_eq!(after.last().map(|l| l.trim_end()), Some("assistant: done"));
    assert_eq!(
        after
            .iter()
            .filter(|l| l.contains("{\"title\":\"one\"}"))
            .count(),
        1,
        "no completion ran twice: {after:#?}"
    );
    let record = store.load_record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(record.usage.completions, 4);

    // The same hand-off delivered again (a queue's duplicate) changes nothing.
    let ran = invocation(&store, &agents, handed, 10.0, 3).await;
    assert_eq!(ran, 0);
    assert_eq!(history(&store).await, after);
}

#[tokio::test(start_paused = true)]
async fn the_completion_limit_counts_across_hand_offs() {
    let store = MemoryStore::new();
    let limits = Limits {
        max_completions_per_slice: 5,
        ..Limits::default()
    };
    let agents = agents(RUNAWAY, limits);
    // 3.5 s per invocation: two completions each, then a hand-off.
    let mut inputs = vec![Input::user_message(tid("main"), "go")];
    let mut total = 0;
    for seed in 1..=5 {
        total += invocation(&store, &agents, inputs, 3.5, seed).await;
        let handed = continuations(&store).await;
        // Each invocation's hand-off is the newest continue input (earlier ones stay in the
        // dead host's outbox).
        inputs = match handed.into_iter().max_by_key(|i| match i.body {
            InputBody::Continue { completions } => completions,
            _ => 0,
        }) {
            Some(next) => vec![next],
            None => break,
        };
    }
    assert_eq!(
        total, 5,
        "the limit stopped the loop after 5 completions in all"
    );
    let committed = history(&store).await;
    assert!(
        committed
            .last()
            .is_some_and(|l| l.contains("Stopped after 5 completions")),
        "{committed:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_past_its_deadline_keeps_what_it_did_and_stops_asking() {
    let mut setup = Setup::new(CHAIN);
    // The run ends in 3.5 s: two completions fit, the rest is cut at the deadline.
    setup.deadline = Some((
        tokio::time::Instant::now() + Duration::from_millis(3500),
        Duration::from_millis(1500),
    ));
    let mut h = setup.start().await;
    h.system
        .send_user_message(&tid("main"), "go")
        .await
        .unwrap();
    // Well past the deadline: the thread has stopped asking the model (no loop of hand-offs).
    h.run_for(120).await;
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(
        record.usage.completions, 2,
        "the two completions before the deadline were committed, and no more ran"
    );
    assert_eq!(record.title.as_deref(), Some("two"));
}
