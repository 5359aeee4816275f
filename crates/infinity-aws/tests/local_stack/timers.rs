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
    let Some(s) = stack(SCRIPT).await else {
        return;
    };
    let started = std::time::Instant::now();
    s.enqueue_message("relay", "nap 3").await;
    s.run_until(Duration::from_secs(30), "the thread wakes", || {
        s.stored_history_has("relay", "assistant: awake")
    })
    .await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(3),
        "woke after {took:?}, before the sleep ended"
    );
    let history = s.stored_history("relay").await;
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
    let Some(s) = stack_with(
        SCRIPT,
        Options {
            relay_threshold: 2,
            schedule_early: 1,
            ..Options::default()
        },
    )
    .await
    else {
        return;
    };
    let started = std::time::Instant::now();
    s.enqueue_message("sched", "long nap").await;
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
        s.stored_history_has("sched", "assistant: awake")
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
    let Some(s) = stack(SCRIPT).await else {
        return;
    };
    s.enqueue_message("intr", "nap long").await;
    s.run_until(Duration::from_secs(20), "the thread sleeps", || async {
        s.record("intr")
            .await
            .is_some_and(|r| r.next_due().is_some())
    })
    .await;
    s.enqueue_message("intr", "wake up!").await;
    s.run_until(Duration::from_secs(20), "the thread answers", || {
        s.stored_history_has("intr", "assistant: woken by: wake up!")
    })
    .await;
    let history = s.stored_history("intr").await;
    let interrupted = history
        .iter()
        .position(|l| l.starts_with("result sleep: Sleep interrupted"))
        .unwrap();
    assert_eq!(history[interrupted + 1], "message: wake up!");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedule_pump_reads_every_page() {
    use infinity_agent_core::host::Timers;
    use infinity_agent_core::input::Input;
    let Some(s) = stack_with(
        SCRIPT,
        Options {
            relay_threshold: 1,
            schedule_early: 0,
            ..Options::default()
        },
    )
    .await
    else {
        return;
    };
    let timers = infinity_aws::queue::AwsTimers::new(
        s.clients.sqs.clone(),
        s.clients.scheduler.clone(),
        s.config.clone(),
    );
    // One due in two seconds, created first: the emulator lists newest first, so it ends up on
    // the last page...
    let soon = Input::user_message(crate::harness::tid("soon"), "now");
    let due = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(2);
    timers.schedule(soon, due).await.unwrap();
    // ...behind more schedules than one page lists (the emulator pages by 50), due tomorrow.
    let tomorrow = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24);
    for i in 0..110 {
        let input = Input::user_message(crate::harness::tid(&format!("later-{i}")), "later");
        timers.schedule(input, tomorrow).await.unwrap();
    }
    let mut pages = 0;
    let mut token: Option<String> = None;
    loop {
        let page = s
            .clients
            .scheduler
            .list_schedules()
            .group_name(&s.config.schedule_group)
            .set_next_token(token.take())
            .send()
            .await
            .unwrap();
        pages += 1;
        match page.next_token() {
            Some(t) => token = Some(t.to_owned()),
            None => break,
        }
    }
    assert!(pages > 1, "the group spans several pages ({pages})");
    let wait =
        due.duration_since(jiff::Timestamp::now()) + jiff::SignedDuration::from_millis(1_100);
    tokio::time::sleep(Duration::try_from(wait).unwrap_or_default()).await;
    assert_eq!(
        s.runner.pump_schedules_once().await.unwrap(),
        1,
        "the due schedule fires wherever it is listed"
    );
    assert_eq!(
        s.runner.pump_schedules_once().await.unwrap(),
        0,
        "and fires once"
    );
}

/// A provider that gives every tool call the same id: each sleep still gets its own wake-up
/// (the runtime mints call ids; input ids, deduplication ids and schedule names derive from
/// those), within one thread and across threads.
async fn wake_ups_with_repeated_provider_ids(options: Options) {
    const REPEATING: &str = r#"
rules:
  - scope: all
    when: "Slept until[\\s\\S]*Slept until"
    reply: {text: "awake twice"}
  - when: "^nap$|-> Slept until"
    reply:
      tool_calls: [{name: sleep, args: {seconds: 1}, id: toolu_same}]
"#;
    let Some(s) = stack_with(REPEATING, options).await else {
        return;
    };
    s.enqueue_message("first", "nap").await;
    s.enqueue_message("second", "nap").await;
    s.run_until(
        Duration::from_secs(60),
        "both threads wake twice",
        || async {
            s.stored_history_has("first", "assistant: awake twice")
                .await
                && s.stored_history_has("second", "assistant: awake twice")
                    .await
        },
    )
    .await;
    for thread in ["first", "second"] {
        let history = s.stored_history(thread).await;
        let woken = history
            .iter()
            .filter(|l| l.starts_with("result sleep: Slept until"))
            .count();
        assert_eq!(woken, 2, "{thread}: {history:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_provider_call_ids_lose_no_relayed_wake_up() {
    wake_ups_with_repeated_provider_ids(Options::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_provider_call_ids_lose_no_scheduled_wake_up() {
    wake_ups_with_repeated_provider_ids(Options {
        relay_threshold: 0,
        schedule_early: 0,
        ..Options::default()
    })
    .await;
}
