//! The `agent` internal tool: delegating a side task to a copy of the agent, with a fresh
//! context, its result returned through the input queue; the depth and fan-out limits; closing
//! the caller closes its delegations.

use crate::behaviour::harness::{assert_in_order, count, tid, Harness, Setup};
use infinity_agent_core::state::ThreadStatus;
use infinity_agent_core::tools::internal::InternalTools;

const SCRIPT: &str = r#"
rules:
  # The delegated copies.
  - when: "^Task: count sheep"
    reply:
      tool_calls: [{name: finish, args: {status: succeeded, result: {sheep: 3}}}]
  - when: "^Task: just talk"
    reply: {text: "I only talked."}
  - when: "^Task: wait for news"
    reply:
      text: "Waiting for news."
      tool_calls: [{name: sleep_until_event_or_input, args: {}}]
  - when: "^Task: dive"
    reply:
      tool_calls: [{name: agent, args: {task: "dive"}}]
  - when: "not available here"
    reply:
      tool_calls: [{name: finish, args: {status: failed, result: "too deep"}}]
  - when: "^Task: nap"
    reply:
      tool_calls: [{name: sleep, args: {seconds: 60}}]
  - when: "^sleep .* -> Slept"
    reply:
      tool_calls: [{name: finish, args: {status: succeeded, result: "rested"}}]
  # A child thread of the conversation.
  - thread: child
    when: "Your task: delegate too"
    reply:
      tool_calls: [{name: agent, args: {task: "count sheep"}}]
  - thread: child
    when: "Your task: nap by proxy"
    reply:
      tool_calls: [{name: agent, args: {task: "nap"}}]
  - thread: child
    reply: {text: "child idle"}
  # The conversation a person started.
  - when: "^delegate$"
    reply:
      tool_calls: [{name: agent, args: {task: "count sheep", context: "the field is small"}}]
  - when: "^talk$"
    reply:
      tool_calls: [{name: agent, args: {task: "just talk"}}]
  - when: "^wait$"
    reply:
      tool_calls: [{name: agent, args: {task: "wait for news"}}]
  - when: "^dive$"
    reply:
      tool_calls: [{name: agent, args: {task: "dive"}}]
  - when: "^three at once$"
    reply:
      tool_calls:
        - {name: agent, args: {task: "nap"}}
        - {name: agent, args: {task: "nap"}}
        - {name: agent, args: {task: "nap"}}
  - when: "^crowd$"
    reply:
      tool_calls:
        - {name: spawn_thread, args: {instructions: "delegate too", child_of: "${stack}"}}
        - {name: agent, args: {task: "nap"}}
        - {name: agent, args: {task: "nap"}}
  - when: "^proxy$"
    reply:
      tool_calls:
        - {name: spawn_thread, args: {instructions: "nap by proxy", child_of: "${stack}"}}
  - when: "^close (.+)$"
    reply:
      tool_calls: [{name: close_thread, args: {thread_id: "$1"}}]
  - reply: {text: "noted"}
"#;

async fn start() -> Harness {
    let mut setup = Setup::new(SCRIPT);
    setup.internal_tools = InternalTools::builder().agent(true).build();
    setup.start().await
}

#[tokio::test(start_paused = true)]
async fn the_finish_result_of_a_fresh_copy_comes_back_as_the_tool_result() {
    let mut h = start().await;
    h.say("main", "delegate").await;
    let delegated = h.children("main");
    assert_eq!(delegated.len(), 1, "{:#?}", h.lines("main"));
    assert_in_order(
        &h.lines("main"),
        &[
            "call agent",
            "result agent: The delegated agent finished (succeeded). Result: {\"sheep\":3}",
            "assistant: noted",
        ],
    );
    // A fresh context: the copy saw the task and its context, none of the caller's conversation.
    let history = h.history(&delegated[0]).await;
    assert!(
        history[0].starts_with("message: Task: count sheep\n\nContext:\nthe field is small"),
        "{history:#?}"
    );
    assert_eq!(count(&history, "delegate"), 1, "{history:#?}"); // the framing text only
    assert!(!history.iter().any(|l| l.contains("message: delegate")));
    let record = h.system.record(&tid(&delegated[0])).await.unwrap().unwrap();
    assert_eq!(record.depth, 1);
    assert_eq!(record.status, ThreadStatus::Closed);
    assert!(record.is_root() && !record.is_top_level());
    let main = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(
        main.conversation.delegations.is_empty(),
        "{:?}",
        main.conversation.delegations
    );
    assert!(main.pending_calls.is_empty());
}

#[tokio::test(start_paused = true)]
async fn without_finish_the_last_text_comes_back() {
    let mut h = start().await;
    h.say("main", "talk").await;
    assert_in_order(
        &h.lines("main"),
        &[
            "result agent: The delegated agent ended without calling finish. Its last message: I only talked.",
            "assistant: noted",
        ],
    );
}

#[tokio::test(start_paused = true)]
async fn a_copy_that_waits_for_news_nothing_can_send_returns() {
    // Nobody writes to a delegated thread, and this one has no children, calls, timers or
    // subscriptions: its wait could never end, so its turn is over.
    let mut h = start().await;
    h.say("main", "wait").await;
    assert_in_order(
        &h.lines("main"),
        &[
            "call agent",
            "result agent: The delegated agent ended without calling finish. Its last message: Waiting for news.",
            "assistant: noted",
        ],
    );
    let delegated = h.children("main").pop().unwrap();
    let record = h.system.record(&tid(&delegated)).await.unwrap().unwrap();
    assert_eq!(record.status, ThreadStatus::Closed);
}

#[tokio::test(start_paused = true)]
async fn delegation_stops_at_depth_three() {
    let mut h = start().await;
    h.say("main", "dive").await;
    let d1 = h.children("main").pop().unwrap();
    let d2 = h.children(&d1).pop().unwrap();
    let d3 = h.children(&d2).pop().unwrap();
    assert!(h.children(&d3).is_empty(), "depth 3 must not delegate");
    for (id, depth) in [(&d1, 1), (&d2, 2), (&d3, 3)] {
        let record = h.system.record(&tid(id)).await.unwrap().unwrap();
        assert_eq!(record.depth, depth, "{id}");
        assert_eq!(record.status, ThreadStatus::Closed, "{id}");
    }
    assert_in_order(
        &h.lines(&d3),
        &[
            "error agent: Error: `agent` is not available here: this thread is at delegation depth 3",
            "finished Failed \"too deep\"",
        ],
    );
    // The failure travels back up the chain as error results.
    assert_in_order(
        &h.lines(&d2),
        &["error agent: The delegated agent finished (failed). Result: too deep"],
    );
    assert_in_order(&h.lines("main"), &["result agent: ", "assistant: noted"]);
}

#[tokio::test(start_paused = true)]
async fn at_most_two_delegations_run_at_once() {
    let mut h = start().await;
    h.say("main", "three at once").await;
    let lines = h.lines("main");
    assert_eq!(h.children("main").len(), 2, "{lines:#?}");
    assert_eq!(
        count(
            &lines,
            "error agent: Error: this conversation already has 2 delegations running"
        ),
        1,
        "{lines:#?}"
    );
    assert_eq!(
        count(
            &lines,
            "result agent: The delegated agent finished (succeeded). Result: rested"
        ),
        2
    );
    // Both reported back: a new delegation runs.
    h.say("main", "delegate").await;
    assert_eq!(h.children("main").len(), 3);
    assert_in_order(&h.lines("main"), &["Result: {\"sheep\":3}"]);
}

#[tokio::test(start_paused = true)]
async fn the_limit_counts_every_thread_of_the_conversation() {
    let mut h = start().await;
    h.say("main", "crowd").await;
    let spawned = h.children("main");
    // The child thread (first) and two delegations.
    assert_eq!(spawned.len(), 3, "{spawned:?}");
    let child = &spawned[0];
    let child_lines = h.lines(child);
    assert_in_order(
        &child_lines,
        &["error agent: Error: this conversation already has 2 delegations running"],
    );
    assert!(h.children(child).is_empty(), "{child_lines:#?}");
    let main = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(
        main.conversation.delegations.is_empty(),
        "{:?}",
        main.conversation.delegations
    );
}

#[tokio::test(start_paused = true)]
async fn a_child_delegation_is_counted_on_the_root_until_it_returns() {
    let mut h = start().await;
    h.system
        .send_user_message(&tid("main"), "proxy")
        .await
        .unwrap();
    // Run a little: the child delegated a nap that lasts a minute.
    h.run_for(10).await;
    let child = h.children("main").pop().unwrap();
    let delegated = h.children(&child).pop().unwrap();
    let main = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(
        main.conversation.delegations.len(),
        1,
        "{:?}",
        main.conversation.delegations
    );
    assert_eq!(
        main.conversation.delegations[0].thread_id.as_str(),
        delegated
    );
    assert_eq!(main.conversation.delegations[0].caller.as_str(), child);
    // Closing the child closes its delegation, which stops counting.
    h.say("main", &format!("close {child}")).await;
    let record = h.system.record(&tid(&delegated)).await.unwrap().unwrap();
    assert_eq!(record.status, ThreadStatus::Closed);
    let main = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(
        main.conversation.delegations.is_empty(),
        "{:?}",
        main.conversation.delegations
    );
    assert_eq!(
        count(&h.lines(&delegated), "finished"),
        0,
        "closed before it finished"
    );
}

#[tokio::test(start_paused = true)]
async fn the_tool_is_off_unless_the_flag_is_set() {
    let mut h = Setup::new(SCRIPT).start().await;
    h.say("main", "delegate").await;
    assert_in_order(
        &h.lines("main"),
        &["error agent: Error: there is no tool named `agent`"],
    );
    assert!(h.children("main").is_empty());
}
