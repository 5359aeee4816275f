//! A recurring schedule on the stack: its occurrences come through the relay queue, each firing
//! arms the next, and a person's delete stops it. (Once a minute: the most a schedule fires.)

use std::time::Duration;

use crate::harness::{stack, stack_with, tid, Options};
use infinity_agent_core::input::{Input, InputBody};

const SCRIPT: &str = r#"
rules:
  - when: "^every minute$"
    reply:
      tool_calls:
        - {name: schedule_create, args: {message: "tock", rrule: "FREQ=MINUTELY", timezone: "Europe/Berlin"}}
  - when: "Scheduled message"
    reply: {text: "heard"}
  - reply: {text: "ok"}
"#;

async fn fired(s: &crate::harness::Stack) -> usize {
    s.stored_history("clock")
        .await
        .iter()
        .filter(|l| l.contains("[Scheduled message"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_fires_through_the_relay_until_it_is_deleted() {
    let Some(s) = stack(SCRIPT).await else {
        return;
    };
    s.enqueue_message("clock", "every minute").await;
    s.run_until(Duration::from_secs(90), "an occurrence", || async {
        fired(&s).await >= 1
    })
    .await;
    let history = s.stored_history("clock").await;
    let occurrences: Vec<&String> = history
        .iter()
        .filter(|l| l.contains("[Scheduled message"))
        .collect();
    assert!(
        occurrences
            .iter()
            .all(|l| l.ends_with("tock") && !l.contains("late")),
        "{occurrences:#?}"
    );
    let record = s.record("clock").await.unwrap();
    let schedule = record.schedules[0].clone();
    assert!(schedule.fired >= 1);
    // The next one is armed a minute after each that fired, to the second.
    let occurrence: jiff::Timestamp = occurrences[0]
        .split(" UTC)")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .map(|t| format!("{}Z", t.replace(' ', "T")))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        schedule.next.duration_since(occurrence).as_secs(),
        60 * schedule.fired as i64
    );

    let delete = Input::new(
        tid("clock"),
        InputBody::ScheduleDelete {
            schedule_id: schedule.id.clone(),
        },
    );
    s.send(&delete).await;
    s.run_until(Duration::from_secs(30), "the schedule is gone", || async {
        s.record("clock").await.unwrap().schedules.is_empty()
    })
    .await;
    let before = fired(&s).await;
    let until = tokio::time::Instant::now() + Duration::from_secs(70);
    while tokio::time::Instant::now() < until {
        s.round().await;
    }
    assert_eq!(fired(&s).await, before, "a deleted schedule fired again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_schedules_next_occurrence_leaves_no_scheduler_schedule() {
    // More than 2 s ahead is "long": the next occurrence waits in a Scheduler schedule.
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
    s.enqueue_message("clock", "every minute").await;
    let scheduler = &s.clients.scheduler;
    let group = &s.config.schedule_group;
    let get = |name: String| scheduler.get_schedule().name(name).group_name(group).send();
    // The record shows the schedule once the slice commits; its timer is made when the commit's
    // effects are performed, a moment later (and an occurrence due within the relay threshold
    // goes round the relay instead, its successor to the Scheduler).
    let waiting = std::sync::Mutex::new(None);
    s.run_until(
        Duration::from_secs(60),
        "the next occurrence waits in a Scheduler schedule",
        || async {
            let Some(schedule) = s
                .record("clock")
                .await
                .and_then(|r| r.schedules.first().cloned())
            else {
                return false;
            };
            let name = infinity_aws::queue::schedule_name(&schedule.next_input_id());
            let made = get(name).await.is_ok();
            if made {
                *waiting.lock().unwrap() = Some(schedule);
            }
            made
        },
    )
    .await;
    let schedule = waiting.into_inner().unwrap().unwrap();
    let name = infinity_aws::queue::schedule_name(&schedule.next_input_id());
    // What `infinity schedules rm` does once the delete is queued.
    let id = schedule.next_input_id();
    assert!(
        infinity_aws::queue::delete_timer_schedule(scheduler, group, &id)
            .await
            .unwrap()
    );
    assert!(get(name).await.is_err(), "the schedule is gone");
    assert!(
        !infinity_aws::queue::delete_timer_schedule(scheduler, group, &id)
            .await
            .unwrap(),
        "none the second time"
    );
}
