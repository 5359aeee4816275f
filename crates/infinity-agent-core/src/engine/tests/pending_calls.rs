//! Calls in flight: new input moves the conversation on, interruptions cancel, authorization
//! detours stay invisible to the model, deadlines end a call.

use super::*;

/// A thread whose model called `lookup` (a dispatched tool), and that call.
pub(super) fn looking_up() -> (Thread, CallId) {
    let mut thread = Thread::new();
    thread.slice(
        vec![user("m1", "look it up")],
        vec![Ok(calls(&[("lookup", json!({"q": "x"}))]))],
    );
    let call = thread.record().pending_calls[0].call_id.clone();
    (thread, call)
}

#[test]
fn a_message_does_not_wait_for_a_dispatched_call() {
    let mut thread = Thread::new();
    let run = thread.slice(
        vec![user("m1", "look it up")],
        vec![Ok(calls(&[("lookup", json!({"q": "x"}))]))],
    );
    assert!(run
        .effects()
        .iter()
        .any(|e| matches!(e, Effect::Dispatch { invocation } if invocation.tool == "lookup")));
    assert_eq!(
        thread.record().pending_calls[0].kind,
        PendingKind::Dispatched
    );
    let call = thread.record().pending_calls[0].call_id.clone();

    // A message while the call runs is answered at once; the call gets a stand-in result (a
    // tool call is always directly followed by its result) and stays pending.
    let run = thread.slice(
        vec![user("m2", "still there?")],
        vec![Ok(text("yes, the lookup is still running"))],
    );
    assert_eq!(run.asked.len(), 1);
    assert!(thread.record().deferred.is_empty());
    let history = thread.history();
    assert!(
        history[2].starts_with("lookup: Still running: new input arrived"),
        "{history:#?}"
    );
    assert_eq!(history[3], "message: still there?");
    assert!(thread.record().pending_calls[0].moved_on);

    // The late result arrives as an event, and the model answers it.
    let run = thread.slice(
        vec![input("r1", InputBody::tool_result(call.clone(), "found"))],
        vec![Ok(text("it is found"))],
    );
    assert_eq!(run.asked.len(), 1);
    let history = thread.history();
    assert_eq!(history[5], "synthetic: receive_event__injected");
    assert_eq!(history[6], "receive_event__injected: found");
    assert_eq!(history[7], "assistant: it is found");
    assert!(thread.record().pending_calls.is_empty());

    // A repeat of the result finds no pending call and is dropped.
    let run = thread.slice(
        vec![input("r1b", InputBody::tool_result(call.clone(), "found"))],
        vec![],
    );
    assert_eq!(run.dropped(), [DropReason::NoPendingCall(call)]);
}

#[test]
fn input_held_back_by_an_older_version_is_appended_at_the_next_input() {
    let mut thread = Thread::new();
    thread.slice(
        vec![user("m1", "look it up")],
        vec![Ok(calls(&[("lookup", json!({"q": "x"}))]))],
    );
    // A record written when messages waited for dispatched calls.
    let mut record = thread.record().clone();
    record.deferred.push(crate::state::Deferred {
        input_id: InputId::new("m2").unwrap(),
        items: vec![Item::user("held back")],
    });
    thread.record = Some(record);
    let call = thread.record().pending_calls[0].call_id.clone();
    let run = thread.slice(
        vec![input("r1", InputBody::tool_result(call, "found"))],
        vec![Ok(text("found, and hello"))],
    );
    assert_eq!(run.asked.len(), 1);
    assert_eq!(
        thread.history(),
        [
            "message: look it up",
            "assistant: lookup",
            "lookup: found",
            "message: held back",
            "assistant: found, and hello",
        ]
    );
    assert!(thread.record().deferred.is_empty());
}

#[test]
fn an_interrupt_cancels_every_call_in_flight_and_asks_the_model_nothing() {
    let mut thread = Thread::new();
    thread.slice(
        vec![user("m1", "two things")],
        vec![Ok(calls(&[
            ("lookup", json!({"q": "a"})),
            ("sleep", json!({"seconds": 600})),
        ]))],
    );
    let pending: Vec<CallId> = thread
        .record()
        .pending_calls
        .iter()
        .map(|p| p.call_id.clone())
        .collect();
    assert_eq!(pending.len(), 2);
    let run = thread.slice(
        vec![input("i1", InputBody::Interrupt { tree: false })],
        vec![],
    );
    assert!(run.asked.is_empty(), "the model is not asked to go on");
    assert!(thread.record().pending_calls.is_empty());
    let history = thread.history();
    assert!(
        history[2].starts_with("error lookup: Interrupted by the user"),
        "{history:#?}"
    );
    assert!(history[3].starts_with("error sleep: Interrupted by the user"));
    assert_eq!(history[4], "notice: Interrupted by the user.");
    assert!(run.effects().iter().any(|e| matches!(e,
        Effect::Output { event } if event.kind == OutputKind::Interrupted { calls: 2, nothing_in_flight: false })));
    // The tool server is told; the sleep's timer needs nothing.
    let cancels: Vec<&str> = run
        .effects()
        .iter()
        .filter_map(|e| match e {
            Effect::Notify {
                notification: crate::effect::Notification::CancelToolCall { tool, .. },
            } => Some(tool.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(cancels, ["lookup"]);
    // A result or a wake-up that comes after the interruption is dropped.
    let run = thread.slice(
        vec![
            input("r1", InputBody::tool_result(pending[0].clone(), "late")),
            input(
                "w1",
                InputBody::TimerWakeUp {
                    call_id: pending[1].clone(),
                },
            ),
        ],
        vec![],
    );
    assert_eq!(
        run.dropped(),
        [
            DropReason::NoPendingCall(pending[0].clone()),
            DropReason::NoPendingSleep(pending[1].clone())
        ]
    );
    assert_eq!(thread.history().len(), 5);
    // The next message is answered as usual, also when it comes in the interruption's batch.
    let run = thread.slice(vec![user("m2", "go on")], vec![Ok(text("going on"))]);
    assert_eq!(run.asked.len(), 1);
    let run = thread.slice(
        vec![
            input("i2", InputBody::Interrupt { tree: false }),
            user("m3", "and now?"),
        ],
        vec![Ok(text("now this"))],
    );
    assert_eq!(run.asked.len(), 1);
}

#[test]
fn an_interrupt_with_nothing_in_flight_says_so_and_still_ends_the_turn() {
    // The result came, the model failed on it: nothing runs, the result is unanswered.
    let (mut thread, call) = looking_up();
    thread.slice(
        vec![input("r1", InputBody::tool_result(call, "found"))],
        vec![Err(ModelError::terminal(
            crate::model::ModelErrorKind::Refused,
            "bad request",
        ))],
    );
    assert!(thread.record().pending_calls.is_empty());
    let before = thread.history().len();
    let run = thread.slice(
        vec![input("i1", InputBody::Interrupt { tree: true })],
        vec![],
    );
    assert!(run.asked.is_empty(), "the model is not asked to go on");
    assert_eq!(
        thread.history()[before..],
        [format!(
            "notice: {}",
            crate::history::INTERRUPTED_IDLE_NOTICE
        )]
    );
    assert!(run.effects().iter().any(|e| matches!(e,
        Effect::Output { event } if event.kind == OutputKind::Interrupted { calls: 0, nothing_in_flight: true })));
    // Like the other notice, it ends the turn: a nudge asks the model nothing (the result
    // before it stays unanswered), a message is answered.
    let run = thread.slice(vec![input("n1", InputBody::Nudge {})], vec![]);
    assert!(run.asked.is_empty(), "{:#?}", thread.history());
    let run = thread.slice(vec![user("m2", "go on")], vec![Ok(text("going on"))]);
    assert_eq!(run.asked.len(), 1);

    // A call in flight is something to interrupt.
    let (mut thread, _) = looking_up();
    let run = thread.slice(
        vec![input("i2", InputBody::Interrupt { tree: false })],
        vec![],
    );
    assert!(run.effects().iter().any(|e| matches!(e,
        Effect::Output { event } if event.kind == OutputKind::Interrupted { calls: 1, nothing_in_flight: false })));
    assert_eq!(
        thread.history().last().map(String::as_str),
        Some("notice: Interrupted by the user.")
    );
}

#[test]
fn an_interrupt_after_the_conversation_moved_on_adds_no_second_result() {
    let mut thread = Thread::new();
    thread.slice(
        vec![user("m1", "look it up")],
        vec![Ok(calls(&[("lookup", json!({"q": "x"}))]))],
    );
    thread.slice(vec![user("m2", "hello?")], vec![Ok(text("hi"))]);
    let before = thread.history().len();
    thread.slice(
        vec![input("i1", InputBody::Interrupt { tree: false })],
        vec![],
    );
    assert_eq!(
        thread.history()[before..],
        ["notice: Interrupted by the user."]
    );
    assert!(thread.record().pending_calls.is_empty());
}

#[test]
fn an_authorization_request_keeps_the_call_pending_without_telling_the_model() {
    let (mut thread, call) = looking_up();
    let run = thread.slice(
        vec![input(
            "o1",
            InputBody::ToolAuthorization {
                call_id: call.clone(),
                auth_url: "https://auth.example/authorize".into(),
            },
        )],
        vec![],
    );
    assert!(run.asked.is_empty());
    assert_eq!(thread.history().len(), 2, "nothing the model would see");
    assert!(run.effects().iter().any(|e| matches!(e,
        Effect::Output { event } if matches!(&event.kind,
            OutputKind::AuthorizationRequested { auth_url, .. } if auth_url == "https://auth.example/authorize"))));
    assert!(thread.record().pending_calls[0].authorizing);
    // With no other input, the tool's result is the call's own result.
    thread.slice(
        vec![input("r1", InputBody::tool_result(call, "the repo list"))],
        vec![Ok(text("here it is"))],
    );
    assert_eq!(
        thread.history()[2..],
        ["lookup: the repo list", "assistant: here it is"]
    );
}

#[test]
fn a_message_during_an_authorization_says_what_the_call_waits_for() {
    let (mut thread, call) = looking_up();
    thread.slice(
        vec![
            input(
                "o1",
                InputBody::ToolAuthorization {
                    call_id: call,
                    auth_url: "https://auth.example/a".into(),
                },
            ),
            user("m2", "what is taking so long?"),
        ],
        vec![Ok(text("waiting for your authorization"))],
    );
    let history = thread.history();
    assert!(
        history[2].starts_with("lookup: Still waiting: the user was asked to authorize"),
        "{history:#?}"
    );
}

#[test]
fn a_call_past_its_deadline_gets_an_error_result_and_is_cancelled() {
    let (mut thread, call) = looking_up();
    let run = thread.slice(
        vec![input(
            "d1",
            InputBody::CallDeadline {
                call_id: call.clone(),
                after: "2h".into(),
                result: None,
            },
        )],
        vec![Ok(text("the lookup timed out"))],
    );
    assert_eq!(run.asked.len(), 1);
    assert!(
        thread.history()[2]
            .starts_with("error lookup: Error: no result from the tool server within 2h"),
        "{:#?}",
        thread.history()
    );
    // The result that comes after is dropped.
    let run = thread.slice(
        vec![input("r1", InputBody::tool_result(call.clone(), "late"))],
        vec![],
    );
    assert_eq!(run.dropped(), [DropReason::NoPendingCall(call)]);
}
