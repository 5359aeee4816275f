//! At-least-once delivery, exactly-once effect: duplicates, a crash between commit and sends,
//! racing slices, and a poison message.

use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use infinity_agent_core::host::{run_slice, HostContext, MODEL_RETRY};
use infinity_agent_core::ids::RandomIds;
use infinity_agent_core::input::Input;
use infinity_agent_core::store::ThreadStore;
use infinity_agent_core::testing::DeadHost;

use crate::harness::{stack, tid};

const SCRIPT: &str = r#"
rules:
  - thread: child
    reply: {text: "child here"}
  - when: "^spawn$"
    reply:
      tool_calls: [{name: spawn_thread, args: {instructions: "say hi", child_of: "${stack}"}}]
  - reply: {text: "ok"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_input_delivered_twice_changes_nothing() {
    let Some(s) = stack(SCRIPT).await else {
        return;
    };
    let input = s.enqueue_message("twice", "hello").await;
    s.run_until(Duration::from_secs(20), "the answer", || {
        s.stored_history_has("twice", "assistant: ok")
    })
    .await;
    let before = (
        s.stored_history("twice").await,
        s.record("twice").await.unwrap().version,
    );
    // The same input again: a different SQS deduplication id, as after SQS's 5-minute window.
    let body = serde_json::to_string(&input).unwrap();
    s.clients
        .sqs
        .send_message()
        .queue_url(&s.config.input_queue_url)
        .message_group_id("twice")
        .message_deduplication_id("another-dedup-id")
        .message_body(body)
        .send()
        .await
        .unwrap();
    for _ in 0..5 {
        s.round().await;
    }
    assert_eq!(
        (
            s.stored_history("twice").await,
            s.record("twice").await.unwrap().version
        ),
        before
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slice_killed_after_its_commit_loses_nothing() {
    let Some(s) = stack(SCRIPT).await else {
        return;
    };
    let input = Input::user_message(tid("crash"), "spawn");
    // Run and commit the slice as the handler would, and "die" before performing its effects.
    let agents: std::collections::HashMap<
        String,
        std::sync::Arc<infinity_agent_core::agent::Agent>,
    > = [("tester".to_owned(), crate::harness::test_agent().await)].into();
    let host = HostContext {
        store: s.store(),
        agents: &agents,
        default_agent: Some("tester"),
        discovery: None,
        effects: &DeadHost,
        live: None,
        model_retry: MODEL_RETRY,
        budget: None,
        library: None,
    };
    let report = run_slice(
        &host,
        &tid("crash"),
        vec![input.clone()],
        jiff::Timestamp::now(),
        &mut RandomIds,
    )
    .await
    .unwrap();
    assert!(report.effects.is_err());
    assert!(!s
        .store()
        .thread_outbox(&tid("crash"))
        .await
        .unwrap()
        .is_empty());
    // SQS redelivers the input: a duplicate, which flushes the outbox (the child seed).
    s.send(&input).await;
    s.run_until(Duration::from_secs(30), "the child runs", || async {
        match s.record("crash").await.unwrap().children.first() {
            Some(child) => {
                s.stored_history_has(child.thread_id.as_str(), "assistant: child here")
                    .await
            }
            None => false,
        }
    })
    .await;
    assert!(s
        .store()
        .thread_outbox(&tid("crash"))
        .await
        .unwrap()
        .is_empty());
    let history = s.stored_history("crash").await;
    assert_eq!(
        history.iter().filter(|l| *l == "message: spawn").count(),
        1,
        "{history:#?}"
    );
}

fn event(inputs: &[&Input]) -> SqsEvent {
    let mut event = SqsEvent::default();
    for (i, input) in inputs.iter().enumerate() {
        let mut m = SqsMessage::default();
        m.message_id = Some(format!("m{i}-{}", input.id));
        m.body = Some(serde_json::to_string(input).unwrap());
        m.attributes
            .insert("MessageGroupId".into(), input.thread_id.to_string());
        event.records.push(m);
    }
    event
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_slices_racing_on_one_thread_leave_it_consistent() {
    let Some(s) = stack(SCRIPT).await else {
        return;
    };
    let first = s.enqueue_message("race", "first").await;
    s.run_until(Duration::from_secs(20), "the thread exists", || {
        s.stored_history_has("race", "assistant: ok")
    })
    .await;
    // Two deliveries of different inputs for one thread handled at the same time (as if the
    // FIFO group's ordering were broken): at most one commit per version wins.
    let a = Input::user_message(tid("race"), "from a");
    let b = Input::user_message(tid("race"), "from b");
    let (ra, rb) = tokio::join!(
        s.handler.handle(event(&[&a])),
        s.handler.handle(event(&[&b]))
    );
    let failed = ra.batch_item_failures.len() + rb.batch_item_failures.len();
    // Redeliver whatever was reported as failed.
    if !ra.batch_item_failures.is_empty() {
        assert!(s
            .handler
            .handle(event(&[&a]))
            .await
            .batch_item_failures
            .is_empty());
    }
    if !rb.batch_item_failures.is_empty() {
        assert!(s
            .handler
            .handle(event(&[&b]))
            .await
            .batch_item_failures
            .is_empty());
    }
    assert!(failed <= 1);
    let history = s.stored_history("race").await;
    for text in ["message: first", "message: from a", "message: from b"] {
        assert_eq!(
            history.iter().filter(|l| *l == text).count(),
            1,
            "{text} in {history:#?}"
        );
    }
    let record = s.record("race").await.unwrap();
    assert_eq!(record.history_len as usize, history.len());
    let _ = first;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_message_is_kept_aside_and_its_thread_goes_on() {
    let Some(s) = stack(SCRIPT).await else {
        return;
    };
    s.clients
        .sqs
        .send_message()
        .queue_url(&s.config.input_queue_url)
        .message_group_id("poison")
        .message_deduplication_id("poison-1")
        .message_body("this is not json")
        .send()
        .await
        .unwrap();
    // Behind it in its group: a valid message, which must not follow it anywhere.
    s.enqueue_message("poison", "after the bad one").await;
    s.enqueue_message("healthy", "hello").await;
    s.run_until(Duration::from_secs(30), "both threads answer", || async {
        s.stored_history_has("healthy", "assistant: ok").await
            && s.stored_history_has("poison", "assistant: ok").await
    })
    .await;
    let history = s.stored_history("poison").await;
    assert_eq!(
        history
            .iter()
            .filter(|l| *l == "message: after the bad one")
            .count(),
        1,
        "{history:#?}"
    );
    let kept = s.store().unusable_inputs(&tid("poison")).await.unwrap();
    assert_eq!(kept.len(), 1, "{kept:#?}");
    assert_eq!(kept[0].body, "this is not json");
    assert!(kept[0].reason.contains("not a JSON object"), "{kept:#?}");
    // Nothing went to the dead-letter queue: the bad message was acknowledged once kept.
    for _ in 0..6 {
        s.round().await;
    }
    s.dlq_is_empty().await;
    // The thread's readers were told once, with a stable id.
    let errors = s.error_events("poison").await;
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0]["text"].as_str().unwrap().contains("kept aside"),
        "{errors:#?}"
    );
    assert!(errors[0]["id"].as_str().unwrap().starts_with("unusable-"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_message_does_not_hold_the_rest_of_its_batch() {
    let Some(s) = stack(SCRIPT).await else {
        return;
    };
    let before = Input::user_message(tid("group"), "before");
    let after = Input::user_message(tid("group"), "after");
    // One delivery of the group as LocalStack's SQS makes it: all three in one batch.
    let mut batch = event(&[&before, &after]);
    let mut bad = SqsMessage::default();
    bad.message_id = Some("bad-1".into());
    bad.body = Some(r#"{"type":"launch_rockets","thread_id":"group","id":"x"}"#.into());
    bad.attributes
        .insert("MessageGroupId".into(), "group".into());
    batch.records.insert(1, bad);
    let response = s.handler.handle(batch.clone()).await;
    assert!(
        response.batch_item_failures.is_empty(),
        "{:?}",
        response.batch_item_failures
    );
    let history = s.stored_history("group").await;
    assert!(
        history.contains(&"message: before".to_owned())
            && history.contains(&"message: after".to_owned()),
        "{history:#?}"
    );
    // The same batch again (an acknowledgement lost): kept once, nothing applied twice.
    assert!(s.handler.handle(batch).await.batch_item_failures.is_empty());
    let kept = s.store().unusable_inputs(&tid("group")).await.unwrap();
    assert_eq!(kept.len(), 1, "{kept:#?}");
    assert_eq!(kept[0].message_id, "bad-1");
    assert!(kept[0].reason.contains("launch_rockets"), "{kept:#?}");
    assert_eq!(s.stored_history("group").await, history);
}

/// Runs rounds until a message reaches the input queue's dead-letter queue; its body.
async fn dead_letter(s: &crate::harness::Stack) -> Option<String> {
    let dlq = s.queue_url("InputDLQ").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let got = s
            .clients
            .sqs
            .receive_message()
            .queue_url(&dlq)
            .wait_time_seconds(0)
            .send()
            .await
            .unwrap();
        if let Some(m) = got.messages().first() {
            return m.body().map(str::to_owned);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing reached the dead-letter queue"
        );
        s.round().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_for_an_agent_the_deployment_no_longer_has_is_kept_in_the_dlq() {
    use infinity_agent_core::commit::Commit;
    use infinity_agent_core::state::ThreadRecord;
    let Some(s) = stack(SCRIPT).await else {
        return;
    };
    // A thread started by an agent this deployment has since dropped.
    let mut record = ThreadRecord::new(tid("orphan"), "retired", None, jiff::Timestamp::now());
    record.version = 1;
    s.store()
        .commit(&Commit {
            thread_id: tid("orphan"),
            expected_version: None,
            record,
            new_entries: Vec::new(),
            processed_inputs: Vec::new(),
            effects: Vec::new(),
            events: Vec::new(),
        })
        .await
        .unwrap();
    let input = s.enqueue_message("orphan", "are you there?").await;
    let body = dead_letter(&s).await.unwrap();
    assert!(body.contains(input.id.as_str()), "{body}");
    // Five deliveries, one error event.
    let errors = s.error_events("orphan").await;
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0]["text"].as_str().unwrap().contains("retired"),
        "{errors:#?}"
    );
    let record = s.record("orphan").await.unwrap();
    assert_eq!(
        (record.version, record.history_len),
        (1, 0),
        "nothing was applied"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_conversation_with_every_input_delivered_twice() {
    const TREE: &str = r#"
rules:
  - thread: child
    when: "Your task: nap[\\s\\S]*Your thread ID is"
    reply:
      tool_calls: [{name: sleep, args: {seconds: 1}}]
  - thread: child
    scope: all
    when: "Your thread ID is ([A-Za-z0-9_-]+)\\.[\\s\\S]*-> Slept until"
    reply:
      tool_calls: [{name: close_thread, args: {thread_id: "$1", report_to_parent: "child done"}}]
  - thread: root
    when: "^go$"
    reply:
      tool_calls:
        - {name: spawn_thread, args: {instructions: "nap", child_of: "${stack}"}}
        - {name: sleep, args: {seconds: 2}}
  # The child's report and the end of the root's sleep may reach the root in one batch (both
  # timers land on time), and then one completion answers both.
  - thread: root
    when: "Final report from child thread[\\s\\S]*has ended|has ended[\\s\\S]*Final report from child thread"
    reply: {text: "heard the child; slept"}
  - thread: root
    when: "Final report from child thread"
    reply: {text: "heard the child"}
  - thread: root
    when: "-> Slept until|has ended"
    reply: {text: "slept"}
"#;
    let Some(mut s) = stack(TREE).await else {
        return;
    };
    s.runner.duplicate_deliveries = true;
    s.enqueue_message("dup", "go").await;
    s.run_until(
        Duration::from_secs(60),
        "the child reports and the sleep ends",
        || async {
            let h = s.stored_history("dup").await;
            h.iter().any(|l| l.contains("heard the child"))
                && h.iter()
                    .any(|l| l.starts_with("assistant:") && l.contains("slept"))
        },
    )
    .await;
    // Let any remaining copies arrive.
    for _ in 0..10 {
        s.round().await;
    }
    let history = s.stored_history("dup").await;
    assert_eq!(
        history.iter().filter(|l| *l == "message: go").count(),
        1,
        "{history:#?}"
    );
    assert_eq!(
        history
            .iter()
            .filter(|l| l.contains("Final report from child thread"))
            .count(),
        1,
        "{history:#?}"
    );
    assert_eq!(
        history
            .iter()
            .filter(|l| l.contains("assistant: heard the child"))
            .count(),
        1,
        "{history:#?}"
    );
    assert_eq!(
        history
            .iter()
            .filter(|l| l.starts_with("assistant:") && l.contains("slept"))
            .count(),
        1,
        "{history:#?}"
    );
    let record = s.record("dup").await.unwrap();
    assert_eq!(record.children.len(), 1);
    let child = s
        .stored_history(record.children[0].thread_id.as_str())
        .await;
    assert_eq!(
        child
            .iter()
            .filter(|l| l.starts_with("result sleep: Slept until"))
            .count(),
        1,
        "{child:#?}"
    );
}

/// Like Lambda's event source, the local runner works on several message groups at once: a
/// thread whose model is slow does not hold up the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_thread_does_not_hold_up_the_others() {
    const SLOW: &str = r#"
rules:
  - when: "^think$"
    reply: {text: "thought", delay_ms: 6000}
  - reply: {text: "quick"}
"#;
    let Some(s) = stack(SLOW).await else {
        return;
    };
    let runner = tokio::spawn(s.runner.clone().run());
    s.enqueue_message("slow", "think").await;
    // Wait until the slow thread's message is taken (in flight, no longer visible).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let attributes = s
            .clients
            .sqs
            .get_queue_attributes()
            .queue_url(&s.config.input_queue_url)
            .attribute_names(
                aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
            )
            .send()
            .await
            .unwrap();
        let in_flight = attributes
            .attributes()
            .and_then(|a| {
                a.get(
                    &aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
                )
            })
            .is_some_and(|n| n != "0");
        if in_flight {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the slow message was never taken"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.enqueue_message("fast", "hello").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !s.stored_history_has("fast", "assistant: quick").await {
        assert!(
            std::time::Instant::now() < deadline,
            "the fast thread never answered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !s.stored_history_has("slow", "assistant: thought").await,
        "the fast thread answered only after the slow one"
    );
    runner.abort();
}

/// An outbox's inputs go to SQS ten to a request: two threads' messages, interleaved and one too
/// big for a message among them, arrive each in its order; without a table to store the big one
/// in, it alone is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_sent_in_batches_keep_each_threads_order() {
    let Some(s) = stack(SCRIPT).await else {
        return;
    };
    let big = "y".repeat(1_100_000);
    let mut inputs = Vec::new();
    for n in 0..12 {
        inputs.push(Input::user_message(tid("batch-a"), format!("a{n}")));
        inputs.push(Input::user_message(tid("batch-b"), format!("b{n}")));
        if n == 5 {
            inputs.push(Input::user_message(tid("batch-a"), big.clone()));
        }
    }
    let refs: Vec<&Input> = inputs.iter().collect();
    let no_table = infinity_aws::queue::SqsInputSender::new(
        s.clients.sqs.clone(),
        s.config.input_queue_url.clone(),
    );
    // Everything, with the table.
    let sent = s.sender.send_all(&refs).await;
    assert!(sent.iter().all(Result::is_ok), "{sent:?}");
    // Again without a table, a5, b5, the big one, a6, b6, a7: those are the same messages (SQS
    // drops them as duplicates of their deduplication ids), but the big one cannot be carried.
    let mixed = no_table.send_all(&refs[10..16]).await;
    let failed: Vec<usize> = (0..mixed.len()).filter(|&i| mixed[i].is_err()).collect();
    assert_eq!(failed, vec![2], "{mixed:?}");
    let why = mixed[2].as_ref().unwrap_err().to_string();
    assert!(why.contains("no table to store it in"), "{why}");
    let messages = |thread: &'static str| {
        let s = &s;
        async move {
            s.stored_history(thread)
                .await
                .into_iter()
                .filter_map(|l| l.strip_prefix("message: ").map(str::to_owned))
                .collect::<Vec<_>>()
        }
    };
    s.run_until(Duration::from_secs(120), "every message", || async {
        messages("batch-a").await.len() == 13 && messages("batch-b").await.len() == 12
    })
    .await;
    let mut want_a: Vec<String> = (0..12).map(|n| format!("a{n}")).collect();
    want_a.insert(6, big);
    assert_eq!(messages("batch-a").await, want_a);
    let want_b: Vec<String> = (0..12).map(|n| format!("b{n}")).collect();
    assert_eq!(messages("batch-b").await, want_b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_events_published_again_after_a_crash_keep_their_ids() {
    use infinity_agent_core::effect::{Effect, OutputKind, PendingEffect};
    use infinity_agent_core::ids::EffectId;
    let Some(s) = stack(SCRIPT).await else {
        return;
    };
    let thread = tid("copies");
    let effects: Vec<PendingEffect> = (0..5)
        .map(|i| PendingEffect {
            id: EffectId::generate(),
            effect: Effect::output(
                &thread,
                jiff::Timestamp::now(),
                OutputKind::AssistantText {
                    text: format!("part {i}"),
                },
            ),
        })
        .collect();
    // A slice's outbox performed, then (the crash came before it was marked done) again.
    for _ in 0..2 {
        infinity_agent_core::host::perform_effects(&*s.handler, s.store(), &thread, &effects, None)
            .await
            .unwrap();
    }
    let events = s.drain_output().await;
    assert_eq!(events.len(), 10, "{events:#?}");
    // Each event's id is its effect's: a reader keeps one of each.
    let mut ids: Vec<&str> = events.iter().map(|e| e["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut want: Vec<&str> = effects.iter().map(|e| e.id.as_str()).collect();
    want.sort_unstable();
    assert_eq!(ids, want);
}
