//! Recurring schedules on the embedded runtime: created by the model, fired at local times across
//! a daylight-saving switch, each firing arming only the next; deleted by a person; gone with
//! their thread.

use crate::behaviour::harness::{tid, Setup};
use infinity_agent_core::input::InputBody;
use infinity_agent_core::runtime::Front;

const SCRIPT: &str = r#"
rules:
  - when: "^every morning$"
    reply:
      tool_calls:
        - {name: schedule_create, args: {message: "standup time", rrule: "FREQ=DAILY;BYHOUR=8;BYMINUTE=30", timezone: "Europe/Berlin"}}
  - when: "^bad zone$"
    reply:
      tool_calls:
        - {name: schedule_create, args: {message: "x", cron: "0 8 * * *", timezone: "Mars/Olympus"}}
  - when: "^both$"
    reply:
      tool_calls:
        - {name: schedule_create, args: {message: "x", cron: "0 8 * * *", rrule: "FREQ=DAILY"}}
  - when: "^too often$"
    reply:
      tool_calls:
        - {name: schedule_create, args: {message: "x", rrule: "FREQ=MINUTELY;BYSECOND=0,30"}}
  - when: "^list$"
    reply:
      tool_calls: [{name: schedule_list, args: {}}]
  - when: "Scheduled message"
    reply: {text: "on it"}
  - reply: {text: "ok"}
"#;

#[tokio::test(start_paused = true)]
async fn a_daily_schedule_fires_at_half_past_eight_berlin_time_across_the_switch() {
    let mut setup = Setup::new(SCRIPT);
    setup.clock_start = "2026-03-27T12:00:00Z".parse().unwrap();
    let mut h = setup.start().await;
    h.system
        .send_user_message(&tid("team"), "every morning")
        .await
        .unwrap();
    h.run_for(60).await;
    let history = h.history("team").await;
    let created = history
        .iter()
        .find(|l| l.contains("Schedule sch-"))
        .unwrap_or_else(|| panic!("{history:#?}"));
    assert!(
        created.contains(
            "Next occurrences: 2026-03-28 08:30:00 Europe/Berlin (2026-03-28 07:30:00 UTC); \
             2026-03-29 08:30:00 Europe/Berlin (2026-03-29 06:30:00 UTC); \
             2026-03-30 08:30:00 Europe/Berlin (2026-03-30 06:30:00 UTC)."
        ),
        "{created}"
    );

    // Three days pass: three messages, each at 08:30 local (07:30 UTC, then 06:30 UTC).
    h.run_for(3 * 86_400).await;
    let history = h.history("team").await;
    let fired: Vec<&String> = history
        .iter()
        .filter(|l| l.contains("[Scheduled message"))
        .collect();
    assert_eq!(fired.len(), 3, "{history:#?}");
    assert!(fired[0].contains("2026-03-28 08:30:00 Europe/Berlin (2026-03-28 07:30:00 UTC)"));
    assert!(fired[1].contains("2026-03-29 08:30:00 Europe/Berlin (2026-03-29 06:30:00 UTC)"));
    assert!(fired[2].contains("2026-03-30 08:30:00 Europe/Berlin (2026-03-30 06:30:00 UTC)"));
    assert!(fired
        .iter()
        .all(|l| l.ends_with("standup time") && !l.contains("late")));
    let record = h.system.record(&tid("team")).await.unwrap().unwrap();
    let schedule = &record.schedules[0];
    assert_eq!(schedule.fired, 3);
    assert_eq!(schedule.next, "2026-03-31T06:30:00Z".parse().unwrap());

    // A person deletes it: nothing fires any more.
    let id = schedule.id.clone();
    h.system.send(infinity_agent_core::input::Input::new(
        tid("team"),
        InputBody::ScheduleDelete { schedule_id: id },
    ));
    h.run_for(3 * 86_400).await;
    let record = h.system.record(&tid("team")).await.unwrap().unwrap();
    assert!(record.schedules.is_empty());
    let after: usize = h
        .history("team")
        .await
        .iter()
        .filter(|l| l.contains("[Scheduled message"))
        .count();
    assert_eq!(after, 3);

    // Closing the thread deletes its schedules.
    h.system
        .send_user_message(&tid("team"), "every morning")
        .await
        .unwrap();
    h.run_for(60).await;
    assert_eq!(
        h.system
            .record(&tid("team"))
            .await
            .unwrap()
            .unwrap()
            .schedules
            .len(),
        1
    );
    h.system.close(&tid("team"), false).await.unwrap();
    h.run_for(2 * 86_400).await;
    let record = h.system.record(&tid("team")).await.unwrap().unwrap();
    assert!(record.schedules.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_bad_rule_or_zone_is_an_error_that_names_it() {
    let mut h = Setup::new(SCRIPT).start().await;
    h.system
        .send_user_message(&tid("bad"), "bad zone")
        .await
        .unwrap();
    h.run_for(60).await;
    h.system
        .send_user_message(&tid("bad"), "both")
        .await
        .unwrap();
    h.run_for(60).await;
    h.system
        .send_user_message(&tid("bad"), "too often")
        .await
        .unwrap();
    h.run_for(60).await;
    let history = h.history("bad").await;
    assert!(
        history
            .iter()
            .any(|l| l.contains("Error: unknown time zone `Mars/Olympus`")),
        "{history:#?}"
    );
    assert!(history
        .iter()
        .any(|l| l.contains("Error: give exactly one of `rrule` and `cron`")));
    assert!(
        history
            .iter()
            .any(|l| l.contains("occurrences 30 s apart") && l.contains("at most once a minute")),
        "{history:#?}"
    );
    assert!(h
        .system
        .record(&tid("bad"))
        .await
        .unwrap()
        .unwrap()
        .schedules
        .is_empty());
}

#[tokio::test(start_paused = true)]
async fn occurrences_missed_while_stopped_fire_once_late_after_a_restart() {
    use std::sync::Arc;

    use infinity_agent_core::store::FileStore;
    let dir = tempfile::tempdir().unwrap();
    {
        let mut setup = Setup::new(SCRIPT);
        setup.store = Some(Arc::new(FileStore::open(dir.path()).unwrap()));
        setup.clock_start = "2026-03-27T12:00:00Z".parse().unwrap();
        let mut h = setup.start().await;
        h.system
            .send_user_message(&tid("team"), "every morning")
            .await
            .unwrap();
        h.run_for(60).await;
        assert_eq!(
            h.system
                .record(&tid("team"))
                .await
                .unwrap()
                .unwrap()
                .schedules
                .len(),
            1
        );
        // The process stops here, before the first occurrence.
    }

    // Three days and a bit later: three occurrences were missed.
    let mut setup = Setup::new(SCRIPT);
    setup.store = Some(Arc::new(FileStore::open(dir.path()).unwrap()));
    setup.clock_start = "2026-03-30T12:00:00Z".parse().unwrap();
    let mut h = setup.start().await;
    h.run_for(60).await;
    let history = h.history("team").await;
    let fired: Vec<&String> = history
        .iter()
        .filter(|l| l.contains("[Scheduled message"))
        .collect();
    assert_eq!(fired.len(), 1, "once, not a burst: {history:#?}");
    assert!(
        fired[0].contains("2026-03-28 08:30:00 Europe/Berlin"),
        "{}",
        fired[0]
    );
    assert!(
        fired[0].contains("late: delivered at 2026-03-30 14:00:00 Europe/Berlin"),
        "{}",
        fired[0]
    );
    let schedule = &h
        .system
        .record(&tid("team"))
        .await
        .unwrap()
        .unwrap()
        .schedules[0];
    assert_eq!(schedule.fired, 1);
    assert_eq!(schedule.next, "2026-03-31T06:30:00Z".parse().unwrap());
}
