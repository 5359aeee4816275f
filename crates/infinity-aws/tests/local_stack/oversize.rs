//! What does not fit a message: inputs stored in the table and carried by reference, output
//! events truncated with a pointer to the whole, effects that never go through set aside, and
//! value parts deleted with what owns them.

use std::time::Duration;

use infinity_agent_core::ids::InputId;
use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::json::json_len;
use infinity_agent_core::store::{load_view, ThreadStore};
use infinity_aws::handler::EFFECT_ATTEMPTS;

use crate::harness::{stack, stack_with, tid, Options, Stack};

/// One MiB: the most SQS puts in a message.
const MIB: usize = 1_048_576;

fn script() -> String {
    format!(
        r#"
rules:
  - thread: child
    reply: {{text: "child here"}}
  - when: "^spawn ([\\s\\S]*)$"
    reply:
      tool_calls: [{{name: spawn_thread, args: {{instructions: "$1", child_of: "${{stack}}"}}}}]
  - when: "^shout$"
    reply: {{text: "{}"}}
  - reply: {{text: "ok"}}
"#,
        "A".repeat(MIB + MIB / 10)
    )
}

/// How many parts the thread's history entries own (those over the inline limit).
async fn entry_parts(s: &Stack, thread: &str) -> usize {
    let record = s.record(thread).await.unwrap();
    let limit = infinity_aws::store::INLINE_LIMIT;
    s.store()
        .load_entries(&tid(thread), record.history_len)
        .await
        .unwrap()
        .iter()
        .map(|e| serde_json::to_string(&**e).unwrap().len())
        .filter(|&len| len > limit)
        .map(|len| len.div_ceil(limit))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_mib_message_is_stored_carried_by_reference_and_answered() {
    let Some(s) = stack(&script()).await else {
        return;
    };
    let text = "x".repeat(MIB);
    let input = s.enqueue_message("big", &text).await;
    s.run_until(Duration::from_secs(60), "the answer", || {
        s.stored_history_has("big", "assistant: ok")
    })
    .await;
    let history = s.stored_history("big").await;
    assert_eq!(history[0], format!("message: {text}"), "the message, whole");
    s.dlq_is_empty().await;
    // The output event of the message is cut to fit and says where the whole is.
    let events = s.drain_output().await;
    let shown = events
        .iter()
        .find(|e| e["type"] == "user_message")
        .expect("the message's event");
    assert_eq!(shown["truncated"], true);
    let shown_text = shown["text"].as_str().unwrap();
    assert!(shown_text.starts_with("xxxx"), "{}", &shown_text[..50]);
    assert!(
        shown_text.ends_with("`infinity thread show big` has all of it]"),
        "{}",
        &shown_text[shown_text.len() - 120..]
    );
    assert!(events
        .iter()
        .any(|e| e["type"] == "assistant_text" && e["text"] == "ok"));
    // A copy of the reference, once the input is processed, changes nothing.
    s.sender
        .send_carried(&infinity_aws::wire::Carried::StoredInput(
            infinity_aws::wire::StoredInput {
                thread_id: tid("big"),
                id: input.id.clone(),
            },
        ))
        .await
        .unwrap();
    for _ in 0..3 {
        s.round().await;
    }
    assert_eq!(s.stored_history("big").await.len(), history.len());
    // Parts: the entry's are kept; the outbox's went with it; the stored input's expire.
    let (kept, expiring) = s.parts("big").await;
    assert_eq!(kept, entry_parts(&s, "big").await, "kept parts");
    assert!(kept > 0);
    assert!(expiring > 0, "the stored input's parts expire");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_bigger_than_a_message_goes_out_truncated_and_the_thread_goes_on() {
    let Some(s) = stack(&script()).await else {
        return;
    };
    s.enqueue_message("loud", "shout").await;
    s.run_until(Duration::from_secs(60), "the long reply", || async {
        s.stored_history("loud").await.len() >= 2
    })
    .await;
    s.enqueue_message("loud", "and now?").await;
    s.run_until(Duration::from_secs(60), "the next answer", || {
        s.stored_history_has("loud", "assistant: ok")
    })
    .await;
    let history = s.stored_history("loud").await;
    assert_eq!(
        history[1].trim_end().len(),
        "assistant: ".len() + MIB + MIB / 10
    );
    let events = s.drain_output().await;
    let long: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "assistant_text" && e["truncated"] == true)
        .collect();
    assert_eq!(long.len(), 1, "{}", events.len());
    assert!(long[0]["text"]
        .as_str()
        .unwrap()
        .contains("more bytes; `infinity thread show loud` has all of it"));
    assert!(events
        .iter()
        .any(|e| e["type"] == "assistant_text" && e["text"] == "ok"));
    s.dlq_is_empty().await;
    let (kept, _) = s.parts("loud").await;
    assert_eq!(kept, entry_parts(&s, "loud").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_with_instructions_bigger_than_a_message_starts_and_the_records_stay_small() {
    let Some(s) = stack(&script()).await else {
        return;
    };
    let instructions = "i".repeat(MIB + MIB / 10);
    s.enqueue_message("parent", &format!("spawn {instructions}"))
        .await;
    s.run_until(Duration::from_secs(60), "the child's answer", || async {
        let Some(record) = s.record("parent").await else {
            return false;
        };
        match record.children.first() {
            Some(child) => {
                s.stored_history_has(child.thread_id.as_str(), "assistant: child here")
                    .await
            }
            None => false,
        }
    })
    .await;
    let parent = s.record("parent").await.unwrap();
    let child_id = parent.children[0].thread_id.clone();
    let child = s.record(child_id.as_str()).await.unwrap();
    // The records keep a preview of the arguments; the history has them whole.
    for record in [&parent, &child] {
        let size = json_len(&serde_json::to_value(record).unwrap());
        assert!(size < 20_000, "{} is {size} bytes", record.id);
    }
    let view = load_view(s.store(), &child).await.unwrap();
    assert!(
        view.iter()
            .any(|e| format!("{:?}", e.item).contains(&instructions)),
        "the child sees its instructions whole"
    );
    s.dlq_is_empty().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effect_that_never_goes_through_is_set_aside_and_the_thread_goes_on() {
    let Some(s) = stack_with(
        "rules:\n  - reply: {text: ok}\n",
        Options {
            broken_output: true,
            ..Options::default()
        },
    )
    .await
    else {
        return;
    };
    s.enqueue_message("stuck", "hello").await;
    s.run_until(Duration::from_secs(60), "the effects set aside", || async {
        !s.store()
            .failed_effects(&tid("stuck"))
            .await
            .unwrap()
            .is_empty()
    })
    .await;
    let failed = s.store().failed_effects(&tid("stuck")).await.unwrap();
    assert!(failed.iter().all(|f| f.attempts == EFFECT_ATTEMPTS));
    assert!(failed.iter().all(|f| f.effect.effect.kind() == "output"));
    assert!(
        failed[0].reason.contains("NonExistentQueue") || failed[0].reason.contains("queue"),
        "{}",
        failed[0].reason
    );
    assert!(s
        .store()
        .thread_outbox(&tid("stuck"))
        .await
        .unwrap()
        .is_empty());
    // The next message is handled as usual.
    s.enqueue_message("stuck", "still there?").await;
    s.run_until(Duration::from_secs(60), "the second answer", || async {
        s.stored_history("stuck").await.len() == 4
    })
    .await;
    for _ in 0..5 {
        s.round().await;
    }
    s.dlq_is_empty().await;
    assert_eq!(
        s.stored_history("stuck")
            .await
            .iter()
            .map(|l| l.trim_end())
            .collect::<Vec<_>>(),
        [
            "message: hello",
            "assistant: ok",
            "message: still there?",
            "assistant: ok"
        ]
    );

    // An operator puts the effects back once the queue works (here: a handler whose output
    // queue exists) and nudges the thread.
    let ids: Vec<_> = s
        .store()
        .failed_effects(&tid("stuck"))
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.effect.id)
        .collect();
    assert_eq!(ids.len(), 4, "two messages and two replies");
    assert_eq!(
        s.store().retry_failed(&tid("stuck"), &ids).await.unwrap(),
        4
    );
    let fixed = std::sync::Arc::new(infinity_aws::handler::AgentHandler::new(
        &s.clients,
        &s.config,
        s.handler.agent("tester").unwrap(),
    ));
    let mut runner = infinity_aws::local::LocalRunner::new(
        s.clients.clone(),
        s.config.clone(),
        std::sync::Arc::clone(&fixed),
    );
    runner.retry_after = Duration::from_secs(0);
    s.send(&Input {
        id: InputId::new("nudge-1").unwrap(),
        thread_id: tid("stuck"),
        body: InputBody::Nudge {},
    })
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while runner
        .poll_agent_once(Duration::from_millis(0))
        .await
        .unwrap()
        == 0
    {
        assert!(std::time::Instant::now() < deadline, "the nudge never came");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let events = s.drain_output().await;
    let texts: Vec<&str> = events.iter().filter_map(|e| e["text"].as_str()).collect();
    assert_eq!(texts, ["hello", "ok", "still there?", "ok"], "{events:?}");
    assert!(s
        .store()
        .failed_effects(&tid("stuck"))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        s.stored_history("stuck").await.len(),
        4,
        "the nudge added nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_still_at_the_old_256_kib_limit_gets_references_for_bigger_inputs() {
    let Some(s) = stack(&script()).await else {
        return;
    };
    s.clients
        .sqs
        .set_queue_attributes()
        .queue_url(&s.config.input_queue_url)
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::MaximumMessageSize,
            "262144",
        )
        .send()
        .await
        .unwrap();
    // 256 KiB of text: more than the queue takes once the rest of the input is around it.
    let input = s.enqueue_message("old", &"y".repeat(262_144)).await;
    s.run_until(Duration::from_secs(60), "the answer", || {
        s.stored_history_has("old", "assistant: ok")
    })
    .await;
    let stored = s
        .clients
        .dynamodb
        .get_item()
        .table_name(&s.config.table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S("T#old".into()),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("I#{}", input.id)),
        )
        .send()
        .await
        .unwrap();
    assert!(stored.item().is_some(), "the input went by reference");
    s.dlq_is_empty().await;
}
