//! The dead-letter queues as an operator's tool: a failed message leaves a note of why under its
//! id, and a message in a dead-letter queue is listed with it, sent back to its thread with its
//! identity, or dropped.

use std::time::Duration;

use infinity_agent_core::input::Input;
use infinity_aws::dlq::{DeadLetters, FailureNote, FailureNotes};

use crate::harness::{stack, tid};

const SCRIPT: &str = r#"
rules:
  - reply: {text: "ok"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_says_why_and_goes_back_to_its_thread_once() {
    let Some(s) = stack(SCRIPT).await else {
        return;
    };
    let sqs = &s.clients.sqs;
    let notes = FailureNotes::new(s.clients.dynamodb.clone(), s.config.table.clone());

    // A message no slice can use, in a group that names no thread: nothing can keep it aside,
    // so it is reported as failed, and the handler notes why under its id.
    let sent = sqs
        .send_message()
        .queue_url(&s.config.input_queue_url)
        .message_group_id("no.thread!")
        .message_deduplication_id("poison-1")
        .message_body("this is not json")
        .send()
        .await
        .unwrap();
    let poison = sent.message_id().unwrap().to_owned();
    s.round().await;
    let note = notes
        .read(&poison)
        .await
        .unwrap()
        .expect("a note of why it failed");
    assert_eq!((note.queue.as_str(), note.receive_count), ("input", 1));
    assert_eq!(note.thread.as_deref(), Some("no.thread!"));
    assert!(
        note.reason.contains("not a JSON object") && note.reason.contains("names no thread"),
        "{note:?}"
    );

    // Two messages in the dead-letter queue, as SQS leaves them there: an input that took its
    // id from its deduplication id, and one to drop. Each with the note its failure left.
    let dead = DeadLetters::of(sqs.clone(), &s.config.input_queue_url)
        .await
        .unwrap();
    assert_eq!(dead.url, s.queue_url("InputDLQ").await);
    let mut input = serde_json::to_value(Input::user_message(tid("lost"), "hello again")).unwrap();
    input.as_object_mut().unwrap().remove("id");
    let mut ids = Vec::new();
    for (body, dedup) in [(input.to_string(), "a1b2c3"), ("{}".to_owned(), "drop-me")] {
        let sent = sqs
            .send_message()
            .queue_url(&dead.url)
            .message_group_id("lost")
            .message_deduplication_id(dedup)
            .message_body(body)
            .send()
            .await
            .unwrap();
        ids.push(sent.message_id().unwrap().to_owned());
    }
    notes
        .write(&[FailureNote {
            message_id: ids[0].clone(),
            queue: "input".into(),
            thread: Some("lost".into()),
            reason: "the slice did not finish: the model is down".into(),
            receive_count: 5,
            at: jiff::Timestamp::now(),
        }])
        .await;

    // Listed, and left in the queue: listing twice sees both twice.
    for _ in 0..2 {
        let listed = dead.list(100).await.unwrap();
        let mut seen: Vec<&str> = listed.iter().map(|m| m.message_id.as_str()).collect();
        seen.sort_unstable();
        let mut wanted: Vec<&str> = ids.iter().map(String::as_str).collect();
        wanted.sort_unstable();
        assert_eq!(seen, wanted);
        let first = listed.iter().find(|m| m.message_id == ids[0]).unwrap();
        assert_eq!(
            (first.group.as_deref(), first.dedup_id.as_deref()),
            (Some("lost"), Some("a1b2c3"))
        );
    }
    let why = notes.read(&ids[0]).await.unwrap().unwrap();
    assert!(why.reason.contains("the model is down") && why.receive_count == 5);

    // Dropped: gone, and its thread never gets it.
    let dropped = dead.drop_messages(&ids[1..]).await.unwrap();
    assert_eq!(dropped.len(), 1);
    assert!(dropped[0].1.is_ok(), "{dropped:?}");
    // Sent back: its thread gets it, with the id it had, and answers once; sent back again
    // (as if the redrive were repeated) it changes nothing.
    let sent_back = dead.redrive(Some(&ids[..1])).await.unwrap();
    assert!(
        sent_back.len() == 1 && sent_back[0].1.is_ok(),
        "{sent_back:?}"
    );
    assert!(dead.list(100).await.unwrap().is_empty());
    s.run_until(Duration::from_secs(20), "the thread answers", || {
        s.stored_history_has("lost", "assistant: ok")
    })
    .await;
    let history = s.stored_history("lost").await;
    assert_eq!(
        history
            .iter()
            .filter(|l| *l == "message: hello again")
            .count(),
        1,
        "{history:#?}"
    );
    // The input kept its identity: a copy under its dedup id is a duplicate.
    let again = serde_json::json!({"id": "a1b2c3", "thread_id": "lost",
                                   "body": {"type": "user_message", "text": "hello again"}});
    sqs.send_message()
        .queue_url(&s.config.input_queue_url)
        .message_group_id("lost")
        .message_deduplication_id("a-copy")
        .message_body(again.to_string())
        .send()
        .await
        .unwrap();
    for _ in 0..3 {
        s.round().await;
    }
    let history = s.stored_history("lost").await;
    assert_eq!(
        history
            .iter()
            .filter(|l| *l == "message: hello again")
            .count(),
        1,
        "{history:#?}"
    );
}
