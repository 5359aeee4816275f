//! A thread that moves to another host: it holds its inputs while moving, forwards them once
//! moved, and applies what it held if the move is abandoned.

use super::*;
use crate::state::{Migration, MigrationState};

fn moving(thread: &mut Thread) {
    let mut record = thread.record().clone();
    record.migration = Some(Migration {
        to: "aws".into(),
        since: NOW.parse().unwrap(),
        state: MigrationState::Moving,
    });
    thread.record = Some(record);
}

#[test]
fn a_moving_thread_holds_its_inputs_and_runs_nothing() {
    let mut thread = Thread::new();
    thread.slice(vec![user("m1", "hi")], vec![Ok(text("hello"))]);
    moving(&mut thread);
    let before = thread.history();

    let run = thread.slice(vec![user("m2", "are you there?")], vec![]);
    assert!(run.asked.is_empty(), "a moving thread asked the model");
    assert_eq!(thread.history(), before);
    let held: Vec<&str> = thread
        .record()
        .held
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(held, ["m2"]);
    // The input is marked processed: a repeat is not held twice.
    let run = thread.slice(vec![user("m2", "are you there?")], vec![]);
    assert_eq!(run.dropped(), [DropReason::AlreadyProcessed]);
    assert_eq!(thread.record().held.len(), 1);
    // A nudge (perform your outbox) is not held.
    thread.slice(vec![input("n1", InputBody::Nudge {})], vec![]);
    assert_eq!(thread.record().held.len(), 1);
}

#[test]
fn a_moved_thread_forwards_every_input_and_runs_nothing() {
    let (mut thread, call) = super::pending_calls::looking_up();
    let mut record = thread.record().clone();
    record.migration = Some(Migration {
        to: "aws".into(),
        since: NOW.parse().unwrap(),
        state: MigrationState::Moved {
            forward_url: "https://dest/rap/forward/t?sig=00".into(),
        },
    });
    thread.record = Some(record);
    let before = thread.history();

    let result = input("r1", InputBody::tool_result(call.clone(), "found"));
    let run = thread.slice(
        vec![result.clone(), input("n1", InputBody::Nudge {})],
        vec![],
    );
    assert!(run.asked.is_empty());
    assert_eq!(thread.history(), before);
    let forwarded: Vec<&Input> = run
        .effects()
        .iter()
        .filter_map(|e| match e {
            Effect::Forward { url, input } => {
                assert_eq!(url, "https://dest/rap/forward/t?sig=00");
                Some(input)
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        forwarded,
        [&result],
        "the result is forwarded as it came, the nudge is not"
    );
    // The call is still pending here: the destination has it now.
    assert_eq!(thread.record().pending_calls[0].call_id, call);
}

#[test]
fn an_abandoned_move_applies_the_held_inputs_in_order_first() {
    let mut thread = Thread::new();
    thread.slice(vec![user("m1", "hi")], vec![Ok(text("hello"))]);
    moving(&mut thread);
    thread.slice(vec![user("m2", "first")], vec![]);
    thread.slice(vec![user("m3", "second")], vec![]);
    let mut record = thread.record().clone();
    record.migration = None;
    thread.record = Some(record);

    let run = thread.slice(vec![user("m4", "third")], vec![Ok(text("all three"))]);
    assert_eq!(run.asked.len(), 1);
    let history = thread.history();
    assert_eq!(
        history[2..],
        [
            "message: first",
            "message: second",
            "message: third",
            "assistant: all three"
        ]
    );
    assert!(thread.record().held.is_empty());
    // The held inputs were marked when held; this slice marks only its own.
    let Ok(SliceOutcome {
        commit: Some(commit),
        ..
    }) = &run.outcome
    else {
        panic!("no commit");
    };
    let marked: Vec<&str> = commit.processed_inputs.iter().map(|i| i.as_str()).collect();
    assert_eq!(marked, ["m4"]);
}
