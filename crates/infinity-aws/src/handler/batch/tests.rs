use std::collections::HashMap;

use aws_lambda_events::event::sqs::SqsMessage;
use serde_json::json;

use super::*;

/// An SQS record as Lambda hands it over: `group` its `MessageGroupId`, delivered `count` times.
fn record(id: &str, group: Option<&str>, body: &str, count: u32) -> SqsMessage {
    let mut attributes = HashMap::new();
    if let Some(group) = group {
        attributes.insert("MessageGroupId".to_owned(), group.to_owned());
    }
    attributes.insert("ApproximateReceiveCount".to_owned(), count.to_string());
    let mut message = SqsMessage::default();
    message.message_id = Some(id.to_owned());
    message.receipt_handle = Some(format!("receipt-{id}"));
    message.body = Some(body.to_owned());
    message.attributes = attributes;
    message
}

fn message(thread: &str, input: &str) -> String {
    json!({"type": "user_message", "id": input, "thread_id": thread, "text": "hi"}).to_string()
}

fn ids(messages: &[Message]) -> Vec<&str> {
    messages.iter().map(|m| m.message_id.as_str()).collect()
}

#[test]
fn messages_group_by_thread_in_order_and_an_unparsable_one_stands_alone() {
    let batch = Batch::of(vec![
        record("m1", Some("a"), &message("a", "i1"), 1),
        record("m2", Some("b"), &message("b", "i2"), 1),
        record("m3", Some("a"), &message("a", "i3"), 2),
        // No group: grouped by the thread its body names.
        record("m4", None, &message("b", "i4"), 1),
        // No group and no thread to read: on its own.
        record("m5", None, "not json", 1),
        record("m6", None, "{}", 1),
    ]);
    let threads: Vec<Vec<&str>> = batch.threads.iter().map(|t| ids(t)).collect();
    assert_eq!(
        threads,
        [vec!["m1", "m3"], vec!["m2", "m4"], vec!["m5"], vec!["m6"]]
    );
    assert_eq!(batch.threads[0][1].receive_count, 2);
    assert!(batch.threads[2][0].input.is_err());
}

#[test]
fn a_failed_message_is_a_batch_item_failure_retried_with_its_receipt_and_noted() {
    let batch = Batch::of(vec![
        record("m1", Some("a"), &message("a", "i1"), 3),
        record("m2", Some("a"), &message("a", "i2"), 1),
    ]);
    let at = jiff::Timestamp::UNIX_EPOCH;
    let verdict = batch.deliveries.verdict(
        [
            Failed {
                message_id: "m1".into(),
                thread: Some("a".into()),
                reason: "the slice did not finish: throttled".into(),
            },
            // A message the batch did not have (no receipt): reported and noted, not retried.
            Failed {
                message_id: "m9".into(),
                thread: None,
                reason: "lost".into(),
            },
        ],
        at,
    );
    let reported: Vec<&str> = verdict
        .response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(reported, ["m1", "m9"]);
    assert_eq!(verdict.retry, [("receipt-m1".to_owned(), 3)]);
    let notes: Vec<(&str, Option<&str>, u32, &str)> = verdict
        .notes
        .iter()
        .map(|n| {
            (
                n.message_id.as_str(),
                n.thread.as_deref(),
                n.receive_count,
                n.queue.as_str(),
            )
        })
        .collect();
    assert_eq!(
        notes,
        [("m1", Some("a"), 3, "input"), ("m9", None, 1, "input")]
    );
    assert_eq!(
        verdict.notes[0].reason,
        "the slice did not finish: throttled"
    );
    assert_eq!(verdict.notes[0].at, at);
    // Nothing failed: nothing reported.
    let none = batch.deliveries.verdict([], at);
    assert!(none.response.batch_item_failures.is_empty() && none.retry.is_empty());
}

#[test]
fn a_threads_failure_takes_the_messages_behind_it_but_never_one_kept_aside() {
    let batch = Batch::of(
        ["m1", "m2", "m3", "m4"]
            .iter()
            .map(|id| record(id, Some("a"), &message("a", id), 1))
            .collect(),
    );
    let messages = &batch.threads[0];
    let mut thread = ThreadMessages::new(messages);
    thread.keep_aside(1);
    let all = thread.all("the slice did not finish: x");
    let failed: Vec<&str> = all.iter().map(|f| f.message_id.as_str()).collect();
    assert_eq!(failed, ["m1", "m3", "m4"]);
    assert!(all
        .iter()
        .all(|f| f.reason == "the slice did not finish: x" && f.thread.as_deref() == Some("a")));

    let from = thread.from(2, "unusable");
    let failed: Vec<(&str, &str)> = from
        .iter()
        .map(|f| (f.message_id.as_str(), f.reason.as_str()))
        .collect();
    assert_eq!(
        failed,
        [
            ("m3", "unusable"),
            ("m4", "behind the unusable message m3 of its thread"),
        ]
    );
}
