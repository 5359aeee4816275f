//! People and applications in the loop: client tools (the calling application runs them and
//! posts their results) and approvals (any tool may wait for a person's yes, with a deadline
//! that answers for them).

use infinity_agent_core::effect::OutputKind;
use infinity_agent_core::ids::{CallId, InputId};
use infinity_agent_core::input::{Answer, Answered};
use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::runtime::{ClientCallRefusal, Front, PostError};
use infinity_agent_core::state::waits::Waits;
use infinity_agent_core::tools::approval::ApprovalRule;
use infinity_agent_core::tools::client::ClientToolFile;

use crate::behaviour::harness::{assert_in_order, count, tid, Harness, Setup};

const SCRIPT: &str = r#"
rules:
  - when: "(?m)^paint$"
    reply:
      tool_calls: [{name: pick_color, args: {for: "the fence"}}]
  - when: "(?m)^look$"
    reply:
      tool_calls: [{name: lookup, args: {q: "tides"}}]
  - when: "(?m)^name it$"
    reply:
      tool_calls: [{name: set_title, args: {title: "Tides"}}]
  - when: "-> (.*)$"
    reply: {text: "got: $1"}
  - reply: {text: "ok"}
"#;

fn pick_color(deadline: Option<&str>) -> ClientToolFile {
    let mut yaml = "name: pick_color\ndescription: Asks the user for a color.\n\
                    input_schema: {type: object, properties: {for: {type: string}}, required: [for]}\n"
        .to_owned();
    if let Some(deadline) = deadline {
        yaml.push_str(&format!("deadline: {deadline}\n"));
    }
    serde_yaml_ng::from_str(&yaml).unwrap()
}

fn rule(yaml: &str) -> ApprovalRule {
    serde_yaml_ng::from_str(yaml).unwrap()
}

/// The call id and args of the one `client_tool_call` event so far.
fn client_call(h: &Harness) -> (CallId, serde_json::Value) {
    let calls: Vec<_> = h
        .log
        .iter()
        .filter_map(|e| match &e.kind {
            OutputKind::ClientToolCall { call_id, args, .. } => {
                Some((call_id.clone(), args.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    calls[0].clone()
}

/// The call id and prompt of the thread's one open question.
async fn question(h: &Harness) -> (CallId, String) {
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(record.open_choices.len(), 1, "{:?}", record.open_choices);
    let choice = &record.open_choices[0];
    assert_eq!(choice.choices, ["Run it", "Do not run it"]);
    assert!(choice.response_url.is_empty());
    (choice.call_id.clone(), choice.prompt.clone())
}

fn answer(call_id: &CallId, selected: usize) -> InputBody {
    InputBody::UserChoiceAnswered {
        call_id: call_id.clone(),
        selected,
        unattended: false,
    }
}

#[tokio::test(start_paused = true)]
async fn a_client_tool_call_waits_for_the_application_which_answers_once() {
    let mut setup = Setup::new(SCRIPT);
    setup.client_tools = vec![pick_color(None)];
    let mut h = setup.start().await;
    h.say("main", "paint").await;
    let (call, args) = client_call(&h);
    assert_eq!(args, serde_json::json!({"for": "the fence"}));
    // The thread waits for it like for a tool server's call; nothing was dispatched.
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(record.is_busy());
    assert!(h.dispatcher.invocations.lock().unwrap().is_empty());
    let waits = Waits::of(&record);
    assert!(
        waits.calls.iter().any(|c| c.call_id == call && c.client),
        "{waits:?}"
    );
    // The application answers; a second answer (a retry, a crash before the first one's 202)
    // is refused, naming the one that stands.
    h.system
        .post_tool_result(&tid("main"), &call, "teal".to_owned(), false)
        .await
        .unwrap();
    h.settle().await;
    for (text, same) in [("red", false), ("teal", true)] {
        let again = h
            .system
            .post_tool_result(&tid("main"), &call, text.to_owned(), false)
            .await;
        let Err(refused @ PostError::Answered { same: said, .. }) = &again else {
            panic!("{again:?}");
        };
        assert_eq!(*said, same, "{refused}");
        let why = refused.to_string();
        assert!(
            why.contains(call.as_str()) && why.contains("a result of 4 bytes"),
            "{why}"
        );
    }
    let history = h.history("main").await;
    assert_in_order(
        &history,
        &["result pick_color: teal", "assistant: got: teal "],
    );
    assert_eq!(count(&history, "result pick_color"), 1);
}

#[tokio::test(start_paused = true)]
async fn of_two_results_posted_before_the_thread_runs_the_first_stands() {
    let mut setup = Setup::new(SCRIPT);
    setup.client_tools = vec![pick_color(None)];
    let mut h = setup.start().await;
    h.say("main", "paint").await;
    let (call, _) = client_call(&h);
    // Both find the call waiting; the first is taken, the second refused naming it.
    h.system
        .post_tool_result(&tid("main"), &call, "teal".to_owned(), false)
        .await
        .unwrap();
    let second = h
        .system
        .post_tool_result(&tid("main"), &call, "red".to_owned(), false)
        .await;
    assert!(
        matches!(second, Err(PostError::Answered { same: false, .. })),
        "{second:?}"
    );
    h.settle().await;
    let history = h.history("main").await;
    assert_eq!(count(&history, "result pick_color"), 1, "{history:?}");
    assert!(
        history.iter().any(|l| l == "result pick_color: teal"),
        "{history:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_result_for_a_call_that_is_not_a_client_tools_is_refused() {
    let mut setup = Setup::new(SCRIPT);
    setup.client_tools = vec![pick_color(None)];
    let mut h = setup.start().await;
    h.say("main", "look").await;
    let lookup = h.dispatcher.invocations.lock().unwrap()[0].call_id.clone();
    let forged = h
        .system
        .post_tool_result(&tid("main"), &lookup, "forged".to_owned(), false)
        .await;
    let Err(PostError::NoClientCall {
        reason: ClientCallRefusal::NotClientTool,
        text: why,
    }) = forged
    else {
        panic!("{forged:?}");
    };
    assert!(why.contains("`lookup`, not of a client tool"), "{why}");
    let unknown = h
        .system
        .post_tool_result(&tid("nobody"), &lookup, "x".to_owned(), false)
        .await;
    assert!(matches!(unknown, Err(PostError::Unknown(_))), "{unknown:?}");
}

#[tokio::test(start_paused = true)]
async fn a_client_call_past_its_deadline_gets_an_error_and_a_late_answer_is_refused() {
    let mut setup = Setup::new(SCRIPT);
    setup.client_tools = vec![pick_color(Some("10m"))];
    let mut h = setup.start().await;
    h.say("main", "paint").await;
    let (at, deadline) = h
        .log
        .iter()
        .find_map(|e| match &e.kind {
            OutputKind::ClientToolCall { deadline, .. } => Some((e.at, *deadline)),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        deadline,
        Some(at.checked_add(jiff::SignedDuration::from_mins(10)).unwrap())
    );
    let (call, _) = client_call(&h);
    h.run_for(601).await;
    let history = h.history("main").await;
    assert!(
        history.iter().any(
            |l| l.starts_with("error pick_color: Error: the application")
                && l.contains("within 10m")
        ),
        "{history:?}"
    );
    let late = h
        .system
        .post_tool_result(&tid("main"), &call, "teal".to_owned(), false)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        late.contains("no result came within its deadline (10m)"),
        "{late}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_approved_call_runs_and_a_declined_one_does_not() {
    let mut setup = Setup::new(SCRIPT);
    setup.approvals = vec![rule("{tools: [\"look*\"]}")];
    let mut h = setup.start().await;
    h.say("main", "look").await;
    // Asked first, with the arguments shown; nothing dispatched yet; the thread is busy.
    let (call, prompt) = question(&h).await;
    assert!(
        prompt.contains("`lookup`") && prompt.contains("\"q\": \"tides\""),
        "{prompt}"
    );
    assert!(prompt.contains("approval for `look*`"), "{prompt}");
    assert!(h.dispatcher.invocations.lock().unwrap().is_empty());
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(record.is_busy());
    assert!(Waits::of(&record).calls.iter().any(|c| c.approval));
    h.send("main", answer(&call, 0)).await;
    let invocations = h.dispatcher.invocations.lock().unwrap().clone();
    assert_eq!(invocations.len(), 1);
    assert_eq!(invocations[0].call_id, call);
    assert!(h.lines("main").iter().any(|l| l == "chosen Run it"));
    h.send(
        "main",
        InputBody::tool_result(call.clone(), "high tide at 6"),
    )
    .await;
    let history = h.history("main").await;
    assert!(
        history
            .iter()
            .any(|l| l.starts_with("assistant: got: high tide at 6")),
        "{history:#?} {:#?}",
        h.lines("main")
    );
    // Declined: not run, and the model is told.
    h.say("main", "look").await;
    let (second, _) = question(&h).await;
    h.send("main", answer(&second, 1)).await;
    assert_eq!(h.dispatcher.invocations.lock().unwrap().len(), 1);
    let history = h.history("main").await;
    assert!(
        history
            .iter()
            .any(|l| l.starts_with("error lookup: Not run: the person asked did not approve")),
        "{history:?}"
    );
    // A second answer to a settled question changes nothing.
    h.send("main", answer(&second, 0)).await;
    assert_eq!(h.dispatcher.invocations.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_answers_an_approval_with_its_rules_default() {
    let mut setup = Setup::new(SCRIPT);
    setup.approvals = vec![
        rule("{tools: [lookup], deadline: 1h}"),
        rule("{tools: [set_title], deadline: 2h, default: approve}"),
    ];
    let mut h = setup.start().await;
    // (`say` would run until every timer fired, the deadline's too.)
    h.system
        .send_user_message(&tid("main"), "look")
        .await
        .unwrap();
    h.run_for(60).await;
    let (_, prompt) = question(&h).await;
    assert!(
        prompt.contains("(1h after the call), it is declined"),
        "{prompt}"
    );
    h.run_for(3_700).await;
    assert!(h.dispatcher.invocations.lock().unwrap().is_empty());
    let history = h.history("main").await;
    assert!(
        history
            .iter()
            .any(|l| l.contains("Not run: nobody approved this call within 1h")),
        "{history:?}"
    );
    assert!(h
        .lines("main")
        .iter()
        .any(|l| l == "chosen Do not run it (deadline)"));
    // `default: approve`: the deadline runs it.
    h.system
        .send_user_message(&tid("main"), "name it")
        .await
        .unwrap();
    h.run_for(60).await;
    let (_, prompt) = question(&h).await;
    assert!(prompt.contains("it runs"), "{prompt}");
    h.run_for(7_300).await;
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(record.title.as_deref(), Some("Tides"));
    assert!(record.open_choices.is_empty() && record.pending_calls.is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_approved_client_tool_call_goes_to_the_application_and_an_interrupt_withdraws_a_question(
) {
    let mut setup = Setup::new(SCRIPT);
    setup.client_tools = vec![pick_color(None)];
    setup.approvals = vec![rule("{tools: [\"*\"]}")];
    let mut h = setup.start().await;
    h.say("main", "paint").await;
    let (call, _) = question(&h).await;
    assert!(!h.lines("main").iter().any(|l| l.starts_with("client call")));
    let early = h
        .system
        .post_tool_result(&tid("main"), &call, "too soon".to_owned(), false)
        .await;
    let Err(PostError::NoClientCall {
        reason: ClientCallRefusal::AwaitsApproval,
        text: why,
    }) = early
    else {
        panic!("{early:?}");
    };
    assert!(why.contains("waits for a person's approval"), "{why}");
    h.send("main", answer(&call, 0)).await;
    let (client, _) = client_call(&h);
    assert_eq!(client, call);
    h.system
        .post_tool_result(&tid("main"), &call, "teal".to_owned(), false)
        .await
        .unwrap();
    h.settle().await;
    assert!(h
        .history("main")
        .await
        .iter()
        .any(|l| l.starts_with("assistant: got: teal")));
    // An interrupt withdraws an open question: the call is cancelled, never run.
    h.say("main", "look").await;
    let (asked, _) = question(&h).await;
    h.send("main", InputBody::Interrupt { tree: false }).await;
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(record.open_choices.is_empty() && record.pending_calls.is_empty());
    h.send("main", answer(&asked, 0)).await;
    assert!(h.dispatcher.invocations.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_call_approved_after_the_conversation_moved_on_arrives_as_an_event() {
    let mut setup = Setup::new(SCRIPT);
    setup.approvals = vec![rule("{tools: [set_title]}")];
    let mut h = setup.start().await;
    h.say("main", "name it").await;
    let (call, _) = question(&h).await;
    h.say("main", "hello").await;
    let history = h.history("main").await;
    assert!(
        history
            .iter()
            .any(|l| l.contains("Still waiting: a person was asked to approve this call")),
        "{history:?}"
    );
    h.send("main", answer(&call, 0)).await;
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(record.title.as_deref(), Some("Tides"));
    assert!(record.pending_calls.is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_approvals_deadline_and_the_approved_tools_own_deadline_are_kept_apart() {
    let mut setup = Setup::new(SCRIPT);
    setup.client_tools = vec![pick_color(Some("10m"))];
    setup.approvals = vec![rule("{tools: [pick_color], deadline: 1h}")];
    let mut h = setup.start().await;
    h.system
        .send_user_message(&tid("main"), "paint")
        .await
        .unwrap();
    h.run_for(60).await;
    let (call, _) = question(&h).await;
    // Approved after 55 minutes: the tool's own 10 minutes count from then, and the approval's
    // timer (due at one hour) finds nothing to answer. (`run_for` stops early when no timer is
    // due within its time; a sleep moves the paused clock on, timers firing on the way.)
    let minutes = |n: u64| tokio::time::sleep(std::time::Duration::from_secs(n * 60));
    minutes(54).await;
    h.system.send(infinity_agent_core::input::Input::new(
        tid("main"),
        answer(&call, 0),
    ));
    minutes(1).await;
    h.drain();
    let (client, _) = client_call(&h);
    assert_eq!(client, call);
    minutes(7).await;
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(
        record.pending(&call).is_some_and(|p| p.client.is_some()),
        "the call still waits for the application past the approval's hour: {:?}",
        record.pending_calls
    );
    minutes(4).await;
    let history = h.history("main").await;
    assert!(
        history.iter().any(
            |l| l.starts_with("error pick_color: Error: the application")
                && l.contains("within 10m")
        ),
        "{history:?}"
    );
    assert!(
        !history.iter().any(|l| l.contains("Not run")),
        "{history:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn nothing_but_its_answer_ends_a_call_that_waits_for_approval() {
    let mut setup = Setup::new(SCRIPT);
    setup.approvals = vec![rule("{tools: [lookup]}")];
    let mut h = setup.start().await;
    h.say("main", "look").await;
    let (call, _) = question(&h).await;
    // A result (from a tool server that never got the call, or a forged input) and a deadline
    // timer are dropped: the call has not run.
    h.send("main", InputBody::tool_result(call.clone(), "forged"))
        .await;
    h.send(
        "main",
        InputBody::CallDeadline {
            call_id: call.clone(),
            after: "1s".to_owned(),
            result: None,
        },
    )
    .await;
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(record.pending(&call).is_some_and(|p| p.approval.is_some()));
    assert_eq!(record.open_choices.len(), 1);
    assert!(!h.history("main").await.iter().any(|l| l.contains("forged")));
    h.send("main", answer(&call, 0)).await;
    assert_eq!(h.dispatcher.invocations.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn arguments_too_big_to_hold_are_refused_with_an_error_the_model_reads() {
    let big = "x".repeat(40_000);
    let script = format!(
        "rules:\n  - when: \"^paint$\"\n    reply:\n      tool_calls: [{{name: pick_color, args: {{for: \"{big}\"}}}}]\n  - when: \"^look$\"\n    reply:\n      tool_calls: [{{name: lookup, args: {{q: \"{big}\"}}}}]\n  - reply: {{text: \"ok\"}}\n"
    );
    let mut setup = Setup::new(&script);
    setup.client_tools = vec![pick_color(None)];
    setup.approvals = vec![rule("{tools: [lookup]}")];
    let mut h = setup.start().await;
    h.say("main", "paint").await;
    h.say("main", "look").await;
    let history = h.history("main").await;
    assert!(
        history
            .iter()
            .any(|l| l.starts_with("error pick_color: Not sent")
                && l.contains("more than a client tool's call holds")),
        "{history:?}"
    );
    assert!(
        history
            .iter()
            .any(|l| l.starts_with("error lookup: Not run")
                && l.contains("more than an approval holds")),
        "{history:?}"
    );
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(record.pending_calls.is_empty() && record.open_choices.is_empty());
    assert!(h.dispatcher.invocations.lock().unwrap().is_empty());
}

/// Keeps a person's answer to `call` as a front does before queueing it (see `give_answer`),
/// and checks it is the first, so it stands.
async fn keep_first(h: &Harness, call: &CallId, selected: usize) {
    let standing = h
        .system
        .store()
        .claim_answer(&tid("main"), &kept(call, selected))
        .await
        .unwrap();
    assert!(standing.is_none(), "{standing:?}");
}

/// A person's answer as a front keeps it.
fn kept(call: &CallId, selected: usize) -> Answer {
    let input = Input {
        id: InputId::derived(call.as_str(), "answered"),
        thread_id: tid("main"),
        body: answer(call, selected),
    };
    let choice = ["Run it", "Do not run it"][selected].to_owned();
    Answer::new(
        call.clone(),
        Answered::Choice { selected, choice },
        &input,
        jiff::Timestamp::now(),
    )
}

/// A front kept a person's "Run it" and died before queueing it: the answer stands all the
/// same. The deadline that comes later applies it instead of the rule's default (decline), and
/// another answer is refused naming it.
#[tokio::test(start_paused = true)]
async fn an_answer_kept_but_never_queued_stands_over_the_deadline() {
    let mut setup = Setup::new(SCRIPT);
    setup.approvals = vec![rule("{tools: [lookup], deadline: 1h}")];
    let mut h = setup.start().await;
    h.system
        .send_user_message(&tid("main"), "look")
        .await
        .unwrap();
    h.run_for(60).await;
    let (call, _) = question(&h).await;
    keep_first(&h, &call, 0).await;
    h.run_for(3_700).await;
    assert_eq!(h.dispatcher.invocations.lock().unwrap().len(), 1);
    let lines = h.lines("main");
    assert!(lines.iter().any(|l| l == "chosen Run it"), "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("(deadline)")), "{lines:?}");
    let history = h.history("main").await;
    assert!(
        !history.iter().any(|l| l.contains("Not run")),
        "{history:?}"
    );
}

/// An answer that reaches the thread after another stands (put on its queue directly, not
/// through a front) is dropped, and the one that stands is applied in its place.
#[tokio::test(start_paused = true)]
async fn an_answer_that_lost_is_dropped_however_it_reaches_the_thread() {
    let mut setup = Setup::new(SCRIPT);
    setup.approvals = vec![rule("{tools: [lookup]}")];
    let mut h = setup.start().await;
    h.say("main", "look").await;
    let (call, _) = question(&h).await;
    keep_first(&h, &call, 1).await;
    h.send("main", answer(&call, 0)).await;
    assert!(h.dispatcher.invocations.lock().unwrap().is_empty());
    let history = h.history("main").await;
    assert!(
        history
            .iter()
            .any(|l| l.starts_with("error lookup: Not run: the person asked did not approve")),
        "{history:?}"
    );
}

/// An interrupt cancels what waits for an answer, and that stands: an answer that comes after
/// it is refused naming it. An answer kept before it is applied first.
#[tokio::test(start_paused = true)]
async fn an_interrupt_stands_for_what_it_cancelled_and_an_answer_before_it_goes_first() {
    let mut setup = Setup::new(SCRIPT);
    setup.client_tools = vec![pick_color(None)];
    setup.approvals = vec![rule("{tools: [lookup]}")];
    let mut h = setup.start().await;
    h.say("main", "paint").await;
    let (call, _) = client_call(&h);
    h.send("main", InputBody::Interrupt { tree: false }).await;
    let late = h
        .system
        .post_tool_result(&tid("main"), &call, "teal".to_owned(), false)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        late.contains(&format!("call {call} was cancelled by an interrupt")),
        "{late}"
    );
    // "Run it" kept, then an interrupt before it was queued: the call ran, then was cancelled.
    h.say("main", "look").await;
    let (asked, _) = question(&h).await;
    keep_first(&h, &asked, 0).await;
    h.send("main", InputBody::Interrupt { tree: false }).await;
    assert_eq!(h.dispatcher.invocations.lock().unwrap().len(), 1);
    assert!(h.lines("main").iter().any(|l| l == "chosen Run it"));
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(record.open_choices.is_empty() && record.pending_calls.is_empty());
}

/// A person's message under `while_busy: interrupt` cancels what waits as an interrupt does, and
/// takes the same turn: an answer kept just before it is applied first, and one sent after it
/// is refused naming the cancel.
#[tokio::test(start_paused = true)]
async fn an_interrupting_message_takes_its_turn_like_an_interrupt() {
    let mut setup = Setup::new(SCRIPT);
    setup.client_tools = vec![pick_color(None)];
    setup.approvals = vec![rule("{tools: [lookup]}")];
    let mut h = setup.start().await;
    let interrupting = |text: &str| InputBody::UserMessage {
        text: text.to_owned(),
        agent: None,
        while_busy: Some(infinity_agent_core::state::WhileBusy::Interrupt),
    };
    h.say("main", "look").await;
    let (asked, _) = question(&h).await;
    keep_first(&h, &asked, 0).await;
    h.send("main", interrupting("never mind")).await;
    assert_eq!(h.dispatcher.invocations.lock().unwrap().len(), 1);
    assert!(h.lines("main").iter().any(|l| l == "chosen Run it"));
    h.say("main", "paint").await;
    let (call, _) = client_call(&h);
    h.send("main", interrupting("stop")).await;
    let late = h
        .system
        .post_tool_result(&tid("main"), &call, "teal".to_owned(), false)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        late.contains(&format!(
            "call {call} was cancelled by an interrupting message"
        )),
        "{late}"
    );
}
