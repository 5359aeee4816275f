//! A person's message that arrives while the thread is busy (a dispatched call has no result
//! yet) does what the agent's `while_busy:` says, or what the message says: `move_on` (stand-in
//! results, answered now), `queue` (answered once the turn ends, also when a call's deadline
//! ends it), `interrupt` (the calls cancelled, then answered) or `reject` (refused, saying why).

use infinity_agent_core::input::InputBody;
use infinity_agent_core::runtime::{Front, PostError};
use infinity_agent_core::state::{waits::Waits, WhileBusy};

use crate::behaviour::harness::{assert_in_order, tid, Harness, Setup};

/// `look` calls the dispatched `lookup` tool; its result and each later message are answered.
/// (A rule sees every entry since the model last spoke, one per line: `(?m)`.)
const SCRIPT: &str = r#"
rules:
  - when: "(?m)^also (\\w+)$"
    reply: {text: "noted $1"}
  - when: "(?m)^look$"
    reply:
      tool_calls: [{name: lookup, args: {q: "tides"}}]
  - when: "-> high tide at 6"
    reply: {text: "the tide is high at 6"}
  - reply: {text: "ok"}
"#;

async fn busy(while_busy: WhileBusy) -> Harness {
    let mut setup = Setup::new(SCRIPT);
    setup.while_busy = while_busy;
    let mut h = setup.start().await;
    h.say("main", "look").await;
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(record.is_busy(), "{:?}", record.pending_calls);
    h
}

fn message(text: &str, while_busy: Option<WhileBusy>) -> InputBody {
    InputBody::UserMessage {
        text: text.to_owned(),
        agent: None,
        while_busy,
    }
}

/// The result of the one `lookup` call made so far.
fn lookup_result(h: &Harness, text: &str) -> InputBody {
    let invocations = h.dispatcher.invocations.lock().unwrap().clone();
    assert_eq!(invocations.len(), 1, "{invocations:?}");
    InputBody::ToolResult {
        call_id: invocations[0].call_id.clone(),
        text: text.to_owned(),
        is_error: false,
        subscription: false,
        images: Vec::new(),
        display_as: Vec::new(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_queued_message_waits_for_the_turn_to_end_then_is_answered() {
    let mut h = busy(WhileBusy::Queue).await;
    h.send("main", message("also boats", None)).await;
    // Kept, not answered, not in the model's history yet; the waits say so.
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(record.queued.len(), 1);
    assert_eq!(record.while_busy, Some(WhileBusy::Queue));
    assert_eq!(Waits::of(&record).queued, 1);
    assert!(!h.history("main").await.iter().any(|l| l.contains("boats")));
    assert!(!h.lines("main").iter().any(|l| l.contains("noted")));
    // The call's result ends the turn: its answer first, then the queued message's.
    let result = lookup_result(&h, "high tide at 6");
    h.send("main", result).await;
    let history = h.history("main").await;
    assert_in_order(
        &history,
        &[
            "result lookup: high tide at 6",
            "assistant: the tide is high at 6",
            "message: also boats",
            "assistant: noted boats",
        ],
    );
    assert!(
        !history.iter().any(|l| l.contains("still running")),
        "no stand-in result: {history:?}"
    );
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(record.queued.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_call_deadline_ends_the_turn_and_the_queued_message_is_answered() {
    let mut h = busy(WhileBusy::MoveOn).await;
    // The message's own policy wins over the agent's.
    h.send("main", message("also nets", Some(WhileBusy::Queue)))
        .await;
    assert!(!h.lines("main").iter().any(|l| l.contains("noted")));
    let call_id = h.dispatcher.invocations.lock().unwrap()[0].call_id.clone();
    h.send(
        "main",
        InputBody::CallDeadline {
            call_id,
            after: "60s".to_owned(),
            result: None,
        },
    )
    .await;
    let history = h.history("main").await;
    assert_in_order(
        &history,
        &[
            "error lookup:",
            "message: also nets",
            "assistant: noted nets",
        ],
    );
}

#[tokio::test(start_paused = true)]
async fn an_interrupting_message_cancels_the_call_then_is_answered() {
    let mut h = busy(WhileBusy::Interrupt).await;
    h.send("main", message("also crabs", None)).await;
    assert_in_order(
        &h.lines("main"),
        &["interrupted 1", "assistant: noted crabs"],
    );
    let history = h.history("main").await;
    assert_in_order(
        &history,
        &[
            "error lookup: Interrupted by the user",
            "message: also crabs",
            "assistant: noted crabs",
        ],
    );
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(record.pending_calls.is_empty());
    // A result that comes after the cancellation is not the thread's any more.
    let result = lookup_result(&h, "high tide at 6");
    h.send("main", result).await;
    assert!(!h
        .history("main")
        .await
        .iter()
        .any(|l| l.contains("high tide")));
}

#[tokio::test(start_paused = true)]
async fn a_rejected_message_is_refused_saying_why_and_the_turn_goes_on() {
    let mut h = busy(WhileBusy::Reject).await;
    // The host refuses it at once, reading the agent's policy from the record.
    let refused = Front::post_message(&h.system, &tid("main"), "also gulls".into(), None).await;
    assert!(matches!(refused, Err(PostError::Busy(_))), "{refused:?}");
    let why = refused.unwrap_err().to_string();
    assert!(
        why.contains("busy") && why.contains("while_busy: reject"),
        "{why}"
    );
    // One that reaches the thread anyway (sent around the check) is refused there, in words.
    h.send("main", message("also gulls", None)).await;
    assert_in_order(
        &h.lines("main"),
        &["ERROR A message arrived while the thread was busy"],
    );
    assert!(!h.history("main").await.iter().any(|l| l.contains("gulls")));
    // Another policy gets through; the turn goes on and ends as it would have.
    h.send("main", message("also terns", Some(WhileBusy::Queue)))
        .await;
    let result = lookup_result(&h, "high tide at 6");
    h.send("main", result).await;
    assert_in_order(
        &h.history("main").await,
        &["assistant: the tide is high at 6", "assistant: noted terns"],
    );
    // Not busy: a message goes through whatever the policy.
    h.say("main", "also ducks").await;
    assert_in_order(&h.lines("main"), &["assistant: noted ducks"]);
}

#[tokio::test(start_paused = true)]
async fn moving_on_is_the_default_the_call_gets_a_stand_in_result() {
    let mut h = busy(WhileBusy::default()).await;
    h.say("main", "also fish").await;
    assert_in_order(
        &h.history("main").await,
        &[
            "result lookup: ",
            "message: also fish",
            "assistant: noted fish",
        ],
    );
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(record.while_busy, None, "move_on is not written");
}
