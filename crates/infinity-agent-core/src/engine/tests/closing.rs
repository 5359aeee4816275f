//! Closed threads and inputs that change nothing: what is still answered, what is only marked
//! processed.

use super::*;

#[test]
fn a_closed_thread_takes_no_input() {
    let mut thread = Thread::new();
    thread.slice(
        vec![user("m1", "bye")],
        vec![Ok(calls(&[("close_thread", json!({"thread_id": "t"}))]))],
    );
    assert_eq!(thread.record().status, ThreadStatus::Closed);
    let run = thread.slice(vec![user("m2", "hello?")], vec![]);
    assert_eq!(run.dropped(), [DropReason::ThreadClosed]);
    assert!(run.asked.is_empty());
}

#[test]
fn closing_a_thread_answers_its_pending_calls_and_skips_the_rest_of_the_turn() {
    let mut thread = Thread::new();
    thread.slice(
        vec![user("m1", "wrap up")],
        vec![Ok(calls(&[
            ("lookup", json!({"q": "last thing"})),
            ("close_thread", json!({"thread_id": "t"})),
            ("sleep", json!({"seconds": 60})),
        ]))],
    );
    assert_eq!(thread.record().status, ThreadStatus::Closed);
    assert!(thread.record().pending_calls.is_empty());
    let history = thread.history();
    assert_eq!(
        &history[1..],
        [
            "assistant: lookup,close_thread,sleep",
            "close_thread: This thread is closed.",
            "error sleep: Error: not run: an earlier call of this turn closed the thread.",
            "error lookup: No result: the thread was closed before this call's result arrived.",
        ]
    );
}

#[test]
fn a_close_request_that_crosses_the_threads_own_closing_is_still_answered() {
    // A child that closed itself; its parent's close request arrives afterwards.
    let mut thread = Thread::new();
    thread.slice(
        vec![user("m1", "bye")],
        vec![Ok(calls(&[("close_thread", json!({"thread_id": "t"}))]))],
    );
    let mut record = thread.record().clone();
    record.parent = Some(crate::state::ParentLink {
        thread_id: ThreadId::new("parent").unwrap(),
        call_id: CallId::new("spawn").unwrap(),
        tool: "spawn_thread".into(),
        args: json!({}),
        fork_at: 0,
        summary: None,
    });
    thread.record = Some(record);
    let close = CallId::new("parents-close").unwrap();
    let run = thread.slice(
        vec![input(
            "close",
            InputBody::CloseRequest {
                call_id: close.clone(),
            },
        )],
        vec![],
    );
    let answered = run.effects().into_iter().any(|e| match e {
        Effect::Send { input } => {
            input.thread_id.as_str() == "parent"
                && matches!(&input.body, InputBody::ToolResult { call_id, .. } if *call_id == close)
        }
        _ => false,
    });
    assert!(answered, "{:?}", run.effects());
}

#[test]
fn a_no_op_input_is_still_marked_processed() {
    let mut thread = Thread::new();
    thread.slice(vec![user("m1", "hi")], vec![Ok(text("hello"))]);
    // A memory write that changes nothing (the note already says so)...
    let write = |id: &str| {
        input(
            id,
            InputBody::MemoryWrite {
                key: "k".into(),
                value: "v".into(),
            },
        )
    };
    thread.slice(vec![write("w1")], vec![]);
    let run = thread.slice(vec![write("w2")], vec![]);
    // ...leaves its marker, so a late duplicate of it is dropped, not applied again.
    let commit = run.outcome().commit.as_ref().unwrap();
    assert_eq!(commit.processed_inputs, [InputId::new("w2").unwrap()]);
    assert!(thread.processed.contains(&InputId::new("w2").unwrap()));
    let again = thread.slice(vec![write("w2")], vec![]);
    assert_eq!(again.dropped(), [DropReason::AlreadyProcessed]);
}

#[test]
fn inputs_that_change_nothing_only_mark_themselves_processed() {
    struct Case {
        name: &'static str,
        inputs: Vec<Input>,
        dropped: Vec<DropReason>,
    }
    let other = Input {
        thread_id: ThreadId::new("elsewhere").unwrap(),
        ..user("m9", "hi")
    };
    let cases = [
        Case {
            name: "a duplicate",
            inputs: vec![user("m1", "again")],
            dropped: vec![DropReason::AlreadyProcessed],
        },
        Case {
            name: "a duplicate within the batch after a fresh one",
            inputs: vec![
                input(
                    "r1",
                    InputBody::tool_result(CallId::new("nope").unwrap(), "x"),
                ),
                input(
                    "r1",
                    InputBody::tool_result(CallId::new("nope").unwrap(), "x"),
                ),
            ],
            dropped: vec![
                DropReason::AlreadyProcessed,
                DropReason::NoPendingCall(CallId::new("nope").unwrap()),
            ],
        },
        Case {
            name: "another thread's input",
            inputs: vec![other],
            dropped: vec![DropReason::OtherThread(ThreadId::new("elsewhere").unwrap())],
        },
        Case {
            name: "a wake-up for no sleep",
            inputs: vec![input(
                "w1",
                InputBody::TimerWakeUp {
                    call_id: CallId::new("gone").unwrap(),
                },
            )],
            dropped: vec![DropReason::NoPendingSleep(CallId::new("gone").unwrap())],
        },
        Case {
            name: "a report from a stranger",
            inputs: vec![input(
                "cr",
                InputBody::ChildReport {
                    child_id: ThreadId::new("stranger").unwrap(),
                    call_id: CallId::new("c").unwrap(),
                    report: "hi".into(),
                    closed: false,
                },
            )],
            dropped: vec![DropReason::NotAChild(ThreadId::new("stranger").unwrap())],
        },
    ];
    for case in cases {
        let mut thread = Thread::new();
        thread.slice(vec![user("m1", "hi")], vec![Ok(text("hello"))]);
        let before = thread.record().clone();
        let run = thread.slice(case.inputs, vec![]);
        let mut dropped = run.dropped();
        dropped.sort_by_key(|d| d.to_string());
        let mut want = case.dropped.clone();
        want.sort_by_key(|d| d.to_string());
        assert_eq!(dropped, want, "{}", case.name);
        // Dropped inputs that were fresh are still marked processed, so the commit may exist;
        // the thread's state must not change.
        assert_eq!(
            thread.record().pending_calls,
            before.pending_calls,
            "{}",
            case.name
        );
        assert_eq!(thread.history().len(), 2, "{}", case.name);
        assert!(run.asked.is_empty(), "{}", case.name);
    }
}
