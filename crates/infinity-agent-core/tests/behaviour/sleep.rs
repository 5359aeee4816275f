//! `sleep`, interrupted sleeps and `sleep_until_event_or_input`.

use crate::behaviour::harness::{assert_in_order, count, start};

const SCRIPT: &str = r#"
rules:
  - when: "^nap (\\d+)$"
    reply:
      text: "Napping."
      tool_calls: [{name: sleep, args: {seconds: $1}}]
  - when: "^wait$"
    reply:
      tool_calls: [{name: sleep_until_event_or_input}]
  - when: "-> Slept until"
    reply: {text: "Awake."}
  - when: "interrupted earlier has ended"
    reply: {text: "The old nap is over."}
  - when: "Sleep interrupted[\\s\\S]*\\n(.*)$"
    reply: {text: "Woken early by: $1"}
  - when: "Woke up: new input arrived.\\n(.*)$"
    reply: {text: "Woken by: $1"}
"#;

#[tokio::test(start_paused = true)]
async fn sleep_wakes_after_its_time() {
    let mut h = start(SCRIPT.replace("seconds: $1", "seconds: 90").as_str()).await;
    let before = h.now();
    h.say("main", "nap 90").await;
    let lines = h.lines("main");
    assert_in_order(
        &lines,
        &[
            "user: nap 90",
            "call sleep {\"seconds\":90}",
            "sleeping until",
            "result sleep: Slept until",
            "assistant: Awake.",
        ],
    );
    let slept = h.now().duration_since(before).as_secs();
    assert!((90..92).contains(&slept), "slept {slept}s");
    // The effect that armed the timer is marked done once the wake-up was handled.
    assert!(h.system.store().outbox().await.unwrap().is_empty());
    let record = h
        .system
        .record(&crate::behaviour::harness::tid("main"))
        .await
        .unwrap()
        .unwrap();
    assert!(
        record.pending_calls.is_empty(),
        "{:?}",
        record.pending_calls
    );
}

#[tokio::test(start_paused = true)]
async fn input_interrupts_a_sleep_and_the_late_result_is_appended() {
    let mut h = start(SCRIPT.replace("seconds: $1", "seconds: 600").as_str()).await;
    h.system
        .send_user_message(&crate::behaviour::harness::tid("main"), "nap 600")
        .await
        .unwrap();
    // Ten minutes of sleep; after one minute the user writes again.
    let outcome = h.run_for(60).await;
    assert!(
        matches!(
            outcome,
            infinity_agent_core::runtime::WaitOutcome::Idle {
                next_timer: Some(_)
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(count(&h.lines("main"), "assistant: Awake."), 0);
    h.say("main", "are you there?").await;
    let lines = h.lines("main");
    assert_in_order(
        &lines,
        &[
            "call sleep {\"seconds\":600}",
            // The sleep gets a stand-in result first, so the call stays answered in place.
            "result sleep: Sleep interrupted",
            "user: are you there?",
            "assistant: Woken early by: are you there?",
            // Nine minutes later the sleep's own result arrives as an injected event.
            "call receive_event__injected",
            "result receive_event__injected: The sleep that was interrupted earlier has ended",
            "assistant: The old nap is over.",
        ],
    );
    // The model's view keeps every call answered right after its turn.
    let history = h.history("main").await;
    assert_in_order(
        &history,
        &[
            "assistant: Napping. sleep {\"seconds\":600}",
            "result sleep: Sleep interrupted",
            "message: are you there?",
            "assistant: Woken early by",
            "synthetic:  receive_event__injected {\"original_args\":{\"seconds\":600}",
            "result receive_event__injected",
        ],
    );
}

#[tokio::test(start_paused = true)]
async fn sleep_until_event_or_input_wakes_on_input() {
    let mut h = start(SCRIPT).await;
    h.say("main", "wait").await;
    assert_in_order(
        &h.lines("main"),
        &["call sleep_until_event_or_input", "sleeping until None"],
    );
    // Nothing is scheduled: the system is idle with no timer.
    assert_eq!(h.system.timers().unwrap().pending(), 0);
    h.say("main", "hello").await;
    assert_in_order(
        &h.lines("main"),
        &[
            "result sleep_until_event_or_input: Woke up: new input arrived.",
            "user: hello",
            "assistant: Woken by: hello",
        ],
    );
    let record = h
        .system
        .record(&crate::behaviour::harness::tid("main"))
        .await
        .unwrap()
        .unwrap();
    assert!(record.pending_calls.is_empty());
}
