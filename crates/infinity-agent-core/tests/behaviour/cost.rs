//! What a conversation cost: every completion priced at its model's prices, totals per thread
//! and per conversation (the root and every thread below it, delegations included), and the
//! lifetime budget that stops the whole tree until a person raises it.

use crate::behaviour::harness::{assert_in_order, count, tid, Harness, Setup};
use infinity_agent_core::agent::Limits;
use infinity_agent_core::cost::{Budget, BudgetError, Prices, Usd};
use infinity_agent_core::history::Item;
use infinity_agent_core::model::Usage;
use infinity_agent_core::runtime::{Front, PostError};
use infinity_agent_core::state::ThreadRecord;
use infinity_agent_core::tools::internal::InternalTools;

const SCRIPT: &str = r#"
rules:
  - thread: child
    when: "small task"
    reply: {text: "child done with its small task"}
  - thread: child
    reply:
      tool_calls: [{name: report_to_parent, args: {report: "still going, with a report long enough to cost"}}]
  - when: "^Task: count sheep"
    reply:
      tool_calls: [{name: finish, args: {status: succeeded, result: {sheep: 3}}}]
  - when: "^loop$"
    reply:
      tool_calls: [{name: spawn_thread, args: {instructions: "report for ever", child_of: "${stack}"}}]
  - when: "^fan out$"
    reply:
      tool_calls:
        - {name: spawn_thread, args: {instructions: "one small task of the fan", child_of: "${stack}"}}
        - {name: spawn_thread, args: {instructions: "another small task of the fan", child_of: "${stack}"}}
  - when: "^delegate$"
    reply:
      tool_calls: [{name: agent, args: {task: "count sheep in the big field"}}]
  - reply: {text: "noted, and this answer is long enough to cost a little"}
"#;

/// A dollar a token, so that a thread's cost in dollars is its tokens.
fn dollar_a_token() -> Prices {
    Prices::per_million(1_000_000.0, 1_000_000.0)
}

async fn start(limits: Limits) -> Harness {
    let mut setup = Setup::new(SCRIPT);
    setup.prices = Some(dollar_a_token());
    setup.limits = limits;
    setup.internal_tools = InternalTools::builder().agent(true).build();
    setup.start().await
}

async fn record(h: &Harness, thread: &str) -> ThreadRecord {
    h.system.record(&tid(thread)).await.unwrap().unwrap()
}

/// Every thread's own usage, added up.
async fn sum_of_threads(h: &Harness) -> Usage {
    let mut sum = Usage::default();
    for id in h.system.threads().thread_ids().await.unwrap() {
        sum.add(&h.system.record(&id).await.unwrap().unwrap().usage);
    }
    sum
}

#[tokio::test(start_paused = true)]
async fn a_conversation_adds_up_what_every_thread_below_it_spent() {
    let mut h = start(Limits::default()).await;
    h.say("main", "fan out").await;
    h.say("main", "delegate").await;
    let root = record(&h, "main").await;
    let all = sum_of_threads(&h).await;
    // Two children and a delegation besides the root, each priced.
    assert_eq!(h.children("main").len(), 3);
    assert!(all.completions >= 6, "{all:?}");
    assert_eq!(
        root.conversation.total, all,
        "the root's totals are every thread's"
    );
    assert!(root.usage.completions < all.completions);
    assert_eq!(all.unpriced, 0);
    assert!(all.cost > Usd::ZERO);
    assert_eq!(all.cost.dollars(), all.tokens() as f64, "a dollar a token");
    // A child's own record keeps its own usage only.
    let child = record(&h, &h.children("main")[0]).await;
    assert!(child.conversation.total == Usage::default());
    assert_eq!(child.usage.cost.dollars(), child.usage.tokens() as f64);
}

#[tokio::test(start_paused = true)]
async fn a_model_without_prices_counts_its_completions_as_unpriced() {
    let mut setup = Setup::new(SCRIPT);
    setup.prices = None;
    let mut h = setup.start().await;
    h.say("main", "hello").await;
    let root = record(&h, "main").await;
    assert_eq!(root.usage.unpriced, root.usage.completions);
    assert_eq!(root.usage.cost, Usd::ZERO);
    assert_eq!(root.usage.cost_text(), "unpriced");
    assert_eq!(root.conversation.total.unpriced, 1);
}

#[tokio::test(start_paused = true)]
async fn at_its_budget_the_whole_tree_stops_until_a_person_raises_it() {
    let budget = Usd::from_dollars(200.0).unwrap();
    let mut h = start(Limits {
        conversation_budget_usd: Some(budget),
        ..Limits::default()
    })
    .await;
    // A child that reports for ever, and a root that answers each report: both spend.
    h.say("main", "loop").await;
    let child = h.children("main").pop().unwrap();
    let root = record(&h, "main").await;
    let spent = root.conversation.total.cost;
    assert!(spent >= budget, "stopped at the budget: {spent}");
    // It stops before the next completion, so it overshoots by less than a few completions.
    assert!(spent.dollars() < budget.dollars() + 100.0, "{spent}");
    let child_record = record(&h, &child).await;
    let stopped = child_record
        .suspended
        .clone()
        .or(root.suspended.clone())
        .expect("a thread of the tree stopped");
    assert!(stopped.budget, "{stopped:?}");
    assert!(
        stopped.reason.contains("limits.conversation_budget_usd"),
        "{stopped:?}"
    );
    let all_lines = [h.lines("main"), h.lines(&child)].concat();
    assert!(
        count(&all_lines, "Stopped: this conversation has spent") >= 1,
        "{all_lines:#?}"
    );
    assert_eq!(
        root.conversation.budget.usd,
        Some(budget),
        "shown as in force"
    );
    // The tree stays stopped: nothing runs, however long it waits.
    tokio::time::advance(std::time::Duration::from_secs(3600)).await;
    h.settle().await;
    assert_eq!(
        record(&h, "main").await.conversation.total,
        root.conversation.total
    );

    // A person's message does not lift a budget stop; it says so and keeps the message.
    let (stopped_id, before) = match &child_record.suspended {
        Some(_) => (child.clone(), child_record.usage.completions),
        None => ("main".to_owned(), root.usage.completions),
    };
    h.say(&stopped_id, "please go on").await;
    let after = record(&h, &stopped_id).await;
    assert_eq!(after.usage.completions, before);
    assert!(after.suspended.is_some());
    assert_in_order(
        &h.lines(&stopped_id),
        &["ERROR Still stopped: this conversation has spent"],
    );

    // Refused: a budget of nothing, or of zero.
    let nothing = h.system.set_budget(&tid("main"), Budget::default()).await;
    assert!(
        matches!(nothing, Err(PostError::BadBudget(BudgetError::Empty))),
        "{nothing:?}"
    );
    let zero = Budget {
        usd: Some(Usd::ZERO),
        tokens: None,
    };
    let zero = h.system.set_budget(&tid("main"), zero).await;
    assert!(
        matches!(zero, Err(PostError::BadBudget(BudgetError::Zero))),
        "{zero:?}"
    );

    // A person raises it (naming the child: the root takes it): the tree goes on, and stops
    // again at the new budget.
    let raised = Usd::from_dollars(400.0).unwrap();
    let more = Budget {
        usd: Some(raised),
        tokens: None,
    };
    let (_, to) = h.system.set_budget(&tid(&child), more).await.unwrap();
    assert_eq!(to, tid("main"));
    h.settle().await;
    let root = record(&h, "main").await;
    assert_eq!(root.conversation.budget_set.usd, Some(raised));
    assert_eq!(root.conversation.budget.usd, Some(raised));
    assert!(
        root.conversation.total.cost >= raised,
        "{:?}",
        root.conversation.total
    );
    let child_after = record(&h, &child).await;
    assert!(
        child_after.usage.completions > child_record.usage.completions,
        "the child went on: {} then {}",
        child_record.usage.completions,
        child_after.usage.completions
    );
    let stopped = child_after.suspended.or(root.suspended).unwrap();
    assert!(stopped.reason.contains("as a person set it"), "{stopped:?}");
    let notices: Vec<String> = h
        .system
        .view(&tid("main"))
        .await
        .unwrap()
        .iter()
        .filter_map(|entry| match &entry.item {
            Item::Notice { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert!(
        notices
            .iter()
            .any(|n| n.starts_with("The conversation's budget is now $400.00 (spent: $")),
        "{notices:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_token_budget_stops_it_too() {
    let mut h = start(Limits {
        conversation_budget_tokens: Some(40),
        ..Limits::default()
    })
    .await;
    h.say("main", "loop").await;
    let root = record(&h, "main").await;
    assert!(root.conversation.total.tokens() >= 40);
    let all_lines = [h.lines("main"), h.lines(&h.children("main")[0])].concat();
    assert!(
        count(
            &all_lines,
            "tokens of its budget of 40 (limits.conversation_budget_tokens)"
        ) >= 1,
        "{all_lines:#?}"
    );
}
