//! Sleeps through the relay queue and through EventBridge Scheduler; interrupted sleeps.

use std::time::Duration;

use crate::harness::{stack, stack_with, Options};

const SCRIPT: &str = r#"
rules:
  - when: "^nap (\\d+)$"
    reply:
      tool_calls: [{name: sleep, args: {seconds: 3}}]
  - when: "^long nap$"
    reply:
      tool_calls: [{name: sleep, args: {seconds: 6}}]
  - when: "^nap long$"
    reply:
      tool_calls: [{name: sleep, args: {seconds: 600}}]
  - when: "-> Slept until"
    reply: {text: "awake"}
  - when: "Sleep interrupted[\\s\\S]*\\n(.*)$"
    reply: {text: "woken by: $1"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_sleep_goes_through_the_relay_queue() {
    let s = stack(SCRIPT).await;
    let started = std::time::Instant::now();
    s.say("relay", "nap 3").await;
    s.run_until(Duration::from_secs(30), "the thread wakes", || {
        s.history_has("relay", "assistant: awake")
    })
    .await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(3),
        "woke after {took:?}, before the sleep ended"
    );
    let history = s.history("relay").await;
    assert!(
        history
            .iter()
            .any(|l| l.starts_with("result sleep: Slept until")),
        "{history:#?}"
    );
    // Nothing was scheduled with Scheduler for a short sleep.
    let schedules = s
        .clients
        .scheduler
        .list_schedules()
        .group_name(&s.config.schedule_group)
        .send()
        .await
        .unwrap();
    assert!(schedules.schedules().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_sleep_goes_through_a_scheduler_schedule() {
    // Thresholds lowered by configuration: more than 2 s is "long"; the schedule fires 1 s early.
    let s = stack_with(
        SCRIPT,
        Options {
            relay_threshold: 2,
            schedule_early: 1,
            ..Options::default()
        },
    )
    .await;
    let started = std::time::Instant::now();
    s.say("sched", "long nap").await;
    // First the slice runs and creates a one-time schedule.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let name = loop {
        // Only the agent queue: the schedule must not be pumped before we look at it.
        s.runner
            .poll_agent_once(Duration::from_millis(0))
            .await
            .unwrap();
        let list = s
            .clients
            .scheduler
            .list_schedules()
            .group_name(&s.config.schedule_group)
            .send()
            .await
            .unwrap();
        if let Some(name) = list.schedules().first().and_then(|x| x.name()) {
            break name.to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no schedule was created"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let schedule = s
        .clients
        .scheduler
        .get_schedule()
        .name(&name)
        .group_name(&s.config.schedule_group)
        .send()
        .await
        .unwrap();
    assert!(schedule.schedule_expression().unwrap().starts_with("at("));
    assert_eq!(schedule.schedule_expression_timezone(), Some("UTC"));
    assert_eq!(schedule.target().unwrap().arn(), s.config.relay_queue_arn);
    s.run_until(Duration::from_secs(40), "the thread wakes", || {
        s.history_has("sched", "assistant: awake")
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(6),
        "woke early: {:?}",
        started.elapsed()
    );
    // The pump deleted the fired schedule.
    let list = s
        .clients
        .scheduler
        .list_schedules()
        .group_name(&s.config.schedule_group)
        .send()
        .await
        .unwrap();
    assert!(list.schedules().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_interrupts_a_sleep() {
    let s = stack(SCRIPT).await;
    s.say("intr", "nap long").await;
    s.run_until(Duration::from_secs(20), "the thread sleeps", || async {
        s.record("intr")
            .await
            .is_some_and(|r| r.next_due().is_some())
    })
    .await;
    s.say("intr", "wake up!").await;
    s.run_until(Duration::from_secs(20), "the thread answers", || {
        s.history_has("intr", "assistant: woken by: wake up!")
    })
    .await;
    let history = s.history("intr").await;
    let interrupted = history
        .iter()
        .position(|l| l.starts_with("result sleep: Sleep interrupted"))
        .unwrap();
    assert_eq!(history[interrupted + 1], "message: wake up!");
}
