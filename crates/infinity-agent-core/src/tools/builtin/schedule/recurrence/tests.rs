//! Occurrences across daylight-saving switches in two zones, and rules refused by name.

use super::*;

fn local(zone: &str, times: &[Timestamp]) -> Vec<String> {
    let tz = TimeZone::get(zone).unwrap();
    times
        .iter()
        .map(|t| {
            t.to_zoned_datetime(tz.clone())
                .strftime("%Y-%m-%d %H:%M %:z")
                .to_string()
        })
        .collect()
}

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn rrule(text: &str, zone: &str, start: &str) -> Recurrence {
    Recurrence::rrule(text, TimeZone::get(zone).unwrap(), start.parse().unwrap())
        .unwrap()
        .0
}

#[test]
fn berlin_half_past_eight_stays_half_past_eight_across_both_switches() {
    let r = rrule(
        "FREQ=DAILY;BYHOUR=8;BYMINUTE=30",
        "Europe/Berlin",
        "2026-03-27T00:00",
    );
    let next = r.next_after(at("2026-03-27T00:00Z"), 4);
    assert_eq!(
        local("Europe/Berlin", &next),
        [
            "2026-03-27 08:30 +01:00",
            "2026-03-28 08:30 +01:00",
            "2026-03-29 08:30 +02:00",
            "2026-03-30 08:30 +02:00"
        ]
    );
    let next = r.next_after(at("2026-10-24T00:00Z"), 2);
    assert_eq!(
        local("Europe/Berlin", &next),
        ["2026-10-24 08:30 +02:00", "2026-10-25 08:30 +01:00"]
    );
}

#[test]
fn a_skipped_time_fires_at_the_first_valid_time_after_it_and_a_repeated_one_once() {
    // Berlin skips 02:00-03:00 on 2026-03-29 and repeats 02:00-03:00 on 2026-10-25.
    let r = rrule(
        "FREQ=DAILY;BYHOUR=2;BYMINUTE=30",
        "Europe/Berlin",
        "2026-03-28T00:00",
    );
    let next = r.next_after(at("2026-03-28T00:00Z"), 3);
    assert_eq!(
        local("Europe/Berlin", &next),
        [
            "2026-03-28 02:30 +01:00",
            "2026-03-29 03:00 +02:00",
            "2026-03-30 02:30 +02:00"
        ]
    );
    let next = r.next_after(at("2026-10-24T00:00Z"), 3);
    assert_eq!(
        local("Europe/Berlin", &next),
        [
            "2026-10-24 02:30 +02:00",
            "2026-10-25 02:30 +02:00",
            "2026-10-26 02:30 +01:00"
        ]
    );
    // New York: 02:00-03:00 skipped on 2026-03-08, 01:00-02:00 repeated on 2026-11-01.
    let r = Recurrence::cron(
        "30 2 * * *",
        TimeZone::get("America/New_York").unwrap(),
        "2026-03-07T00:00".parse().unwrap(),
    )
    .unwrap();
    assert_eq!(
        local(
            "America/New_York",
            &r.next_after(at("2026-03-07T12:00Z"), 2)
        ),
        ["2026-03-08 03:00 -04:00", "2026-03-09 02:30 -04:00"]
    );
    let r = Recurrence::cron(
        "30 1 * * *",
        TimeZone::get("America/New_York").unwrap(),
        "2026-10-31T00:00".parse().unwrap(),
    )
    .unwrap();
    assert_eq!(
        local(
            "America/New_York",
            &r.next_after(at("2026-10-31T12:00Z"), 2)
        ),
        ["2026-11-01 01:30 -04:00", "2026-11-02 01:30 -05:00"]
    );
}

#[test]
fn weekly_monthly_and_cron_rules() {
    let r = rrule(
        "FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=8;BYMINUTE=30",
        "UTC",
        "2026-12-01T00:00",
    );
    assert_eq!(
        local("UTC", &r.next_after(at("2026-12-01T00:00Z"), 3)),
        [
            "2026-12-02 08:30 +00:00",
            "2026-12-07 08:30 +00:00",
            "2026-12-09 08:30 +00:00"
        ]
    );
    let r = rrule(
        "FREQ=WEEKLY;INTERVAL=2;BYDAY=FR;BYHOUR=17;BYMINUTE=0",
        "UTC",
        "2026-12-01T00:00",
    );
    assert_eq!(
        local("UTC", &r.next_after(at("2026-12-01T00:00Z"), 2)),
        ["2026-12-04 17:00 +00:00", "2026-12-18 17:00 +00:00"]
    );
    let r = rrule(
        "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=9;BYMINUTE=0",
        "UTC",
        "2026-12-01T00:00",
    );
    assert_eq!(
        local("UTC", &r.next_after(at("2026-12-01T00:00Z"), 2)),
        ["2026-12-25 09:00 +00:00", "2027-01-29 09:00 +00:00"]
    );
    let r = rrule(
        "FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=23;BYMINUTE=0",
        "UTC",
        "2027-01-01T00:00",
    );
    assert_eq!(
        local("UTC", &r.next_after(at("2027-01-01T00:00Z"), 2)),
        ["2027-01-31 23:00 +00:00", "2027-02-28 23:00 +00:00"]
    );
    let r = rrule(
        "FREQ=HOURLY;INTERVAL=6;BYMINUTE=15",
        "UTC",
        "2026-12-01T00:00",
    );
    assert_eq!(
        local("UTC", &r.next_after(at("2026-12-01T01:00Z"), 2)),
        ["2026-12-01 06:15 +00:00", "2026-12-01 12:15 +00:00"]
    );
    let (r, count) = Recurrence::rrule(
        "FREQ=DAILY;UNTIL=20261203;COUNT=9",
        TimeZone::UTC,
        "2026-12-01T10:00".parse().unwrap(),
    )
    .unwrap();
    assert_eq!(count, Some(9));
    assert_eq!(
        r.next_after(at("2026-12-01T00:00Z"), 5).len(),
        3,
        "UNTIL ends it"
    );
    let r = Recurrence::cron(
        "*/15 9-10 * * MON-FRI",
        TimeZone::UTC,
        "2026-12-04T00:00".parse().unwrap(),
    )
    .unwrap();
    assert_eq!(
        local("UTC", &r.next_after(at("2026-12-04T10:40Z"), 3)),
        [
            "2026-12-04 10:45 +00:00",
            "2026-12-07 09:00 +00:00",
            "2026-12-07 09:15 +00:00"
        ]
    );
    // Both day fields restricted: either matches.
    let r = Recurrence::cron(
        "0 12 1 * SUN",
        TimeZone::UTC,
        "2026-12-01T00:00".parse().unwrap(),
    )
    .unwrap();
    assert_eq!(
        local("UTC", &r.next_after(at("2026-12-01T00:00Z"), 3)),
        [
            "2026-12-01 12:00 +00:00",
            "2026-12-06 12:00 +00:00",
            "2026-12-13 12:00 +00:00"
        ]
    );
}

#[test]
fn bad_rules_are_refused_by_name() {
    let start: DateTime = "2026-12-01T00:00".parse().unwrap();
    let rrule_err = |t: &str| {
        Recurrence::rrule(t, TimeZone::UTC, start)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        rrule_err("BYHOUR=8"),
        "rrule: FREQ is missing (e.g. FREQ=DAILY)"
    );
    assert!(rrule_err("FREQ=FORTNIGHTLY").contains("FREQ=FORTNIGHTLY is not supported"));
    assert!(rrule_err("FREQ=DAILY;BYHOUR=25").contains("BYHOUR value `25` is out of range"));
    assert!(rrule_err("FREQ=DAILY;BYDAY=XX").contains("BYDAY `XX` is not a day"));
    assert!(rrule_err("FREQ=WEEKLY;BYDAY=1MO").contains("needs FREQ=MONTHLY"));
    assert!(rrule_err("FREQ=DAILY;BYEASTER=1").contains("BYEASTER is not supported"));
    assert!(rrule_err("FREQ=DAILY;UNTIL=tomorrow").contains("UNTIL=tomorrow is not a date"));
    let cron_err = |t: &str| {
        Recurrence::cron(t, TimeZone::UTC, start)
            .unwrap_err()
            .to_string()
    };
    assert!(cron_err("0 8 * *").contains("has 4 field(s); it needs 5"));
    assert!(cron_err("61 8 * * *").contains("minute `61` is out of range"));
    assert!(cron_err("0 8 * * FUNDAY").contains("day-of-week `FUNDAY` is out of range"));
    assert!(cron_err("0 8 5-1 * *").contains("goes backwards"));
}

#[test]
fn an_unset_minute_and_second_are_zero_where_people_expect_them() {
    let fmt = |times: Vec<Timestamp>| -> Vec<String> {
        times
            .iter()
            .map(|t| {
                t.to_zoned_datetime(TimeZone::UTC)
                    .strftime("%d %H:%M:%S")
                    .to_string()
            })
            .collect()
    };
    // Made at 10:17:42: `BYHOUR=9` is 09:00:00, not 09:17:42.
    let daily = rrule("FREQ=DAILY;BYHOUR=9", "UTC", "2026-05-01T10:17:42");
    assert_eq!(
        fmt(daily.next_after(at("2026-05-01T10:17:42Z"), 2)),
        ["02 09:00:00", "03 09:00:00"]
    );
    // Without BYHOUR the start's hour and minute stay, at second 0.
    let plain = rrule("FREQ=DAILY", "UTC", "2026-05-01T10:17:42");
    assert_eq!(
        fmt(plain.next_after(at("2026-05-01T10:17:42Z"), 1)),
        ["02 10:17:00"]
    );
    // Hourly keeps the start's minute unless BYMINUTE names one; seconds are 0.
    let hourly = rrule("FREQ=HOURLY", "UTC", "2026-05-01T10:17:42");
    assert_eq!(
        fmt(hourly.next_after(at("2026-05-01T10:17:42Z"), 1)),
        ["01 11:17:00"]
    );
    let named = rrule(
        "FREQ=DAILY;BYHOUR=9;BYMINUTE=30;BYSECOND=5",
        "UTC",
        "2026-05-01T10:17:42",
    );
    assert_eq!(
        fmt(named.next_after(at("2026-05-01T10:17:42Z"), 1)),
        ["02 09:30:05"]
    );
}
