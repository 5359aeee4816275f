//! A schedule's occurrences as inputs: one missed while the host was down fires once, late, and
//! the next one armed is the first still ahead; a timer the schedule no longer waits for is
//! dropped.

use super::*;

#[test]
fn a_missed_occurrence_fires_once_late_and_never_as_a_burst() {
    let mut thread = Thread::new();
    let args = json!({"message": "water the plants", "rrule": "FREQ=DAILY;BYHOUR=8;BYMINUTE=30",
                      "start": "2026-03-01T08:30"});
    let run = thread.slice(
        vec![user("m1", "every day")],
        vec![Ok(calls(&[("schedule_create", args)])), Ok(text("set"))],
    );
    let armed: Vec<Timestamp> = run
        .effects()
        .iter()
        .filter_map(|e| match e {
            Effect::SendAt { due, .. } => Some(*due),
            _ => None,
        })
        .collect();
    let first: Timestamp = "2026-03-08T08:30:00Z".parse().unwrap();
    assert_eq!(armed, [first]);

    // As if the host had been down since an occurrence three days before now (17:00 on the 7th).
    let missed: Timestamp = "2026-03-04T08:30:00Z".parse().unwrap();
    let mut record = thread.record().clone();
    record.schedules[0].next = missed;
    let id = record.schedules[0].id.clone();
    thread.record = Some(record);
    let fire = |at: Timestamp| {
        input(
            &format!("fire-{}", at.as_second()),
            InputBody::Schedule {
                schedule_id: id.clone(),
                at,
            },
        )
    };
    let run = thread.slice(vec![fire(missed)], vec![Ok(text("watered"))]);
    assert_eq!(run.asked.len(), 1, "one occurrence, one completion");
    let history = thread.history();
    let message = history
        .iter()
        .find(|l| l.contains("[Scheduled message"))
        .unwrap();
    assert!(
        message.contains("late: delivered at 2026-03-07 17:00:00"),
        "{message}"
    );
    // The next is the first still ahead, not the three missed in between.
    let armed: Vec<Timestamp> = run
        .effects()
        .iter()
        .filter_map(|e| match e {
            Effect::SendAt { due, .. } => Some(*due),
            _ => None,
        })
        .collect();
    assert_eq!(armed, [first]);
    assert_eq!(thread.record().schedules[0].next, first);
    assert_eq!(thread.record().schedules[0].fired, 1);

    // A timer for an occurrence the schedule no longer waits for is dropped.
    let stale: Timestamp = "2026-03-05T08:30:00Z".parse().unwrap();
    let run = thread.slice(vec![fire(stale)], vec![]);
    assert_eq!(run.dropped(), [DropReason::StaleOccurrence(id)]);
}
