//! When a recurring schedule fires: an RFC 5545 `RRULE` (the common part of it) or a five-field
//! cron expression, read in an IANA time zone.
//!
//! Occurrences are local times: `08:30` stays 08:30 on the wall clock across a daylight-saving
//! switch. A local time that does not exist that day (skipped by the switch) fires at the first
//! valid time after it; one that occurs twice fires once, at the first.
//!
//! RRULE parts read: `FREQ` (`MINUTELY`, `HOURLY`, `DAILY`, `WEEKLY`, `MONTHLY`, `YEARLY`),
//! `INTERVAL`, `BYMONTH`, `BYMONTHDAY` (negative from the month's end), `BYDAY` (`MO`..`SU`,
//! with an ordinal such as `1MO` or `-1FR` for `MONTHLY` and `YEARLY`), `BYHOUR`, `BYMINUTE`,
//! `BYSECOND`, `COUNT`, `UNTIL`, `WKST` (accepted, weeks start on Monday). Anything else is
//! refused by name. Cron: `minute hour day-of-month month day-of-week` with `*`, lists, ranges
//! and steps (`*/15`, `1-5`, `MON-FRI`, `JAN`); when both day fields are restricted, a day
//! matching either fires (as cron does).
//!
//! An RRULE without `BYSECOND` fires at second 0, and one with `BYHOUR` but without `BYMINUTE`
//! at minute 0 (`FREQ=DAILY;BYHOUR=9` is 09:00:00); other unset parts take the start's (RFC
//! 5545 takes them all from the start, which made `BYHOUR=9` fire at 09 and whatever minute and
//! second the schedule was made at).

use jiff::civil::{Date, DateTime, Weekday};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{Timestamp, ToSpan};

/// How far ahead the next occurrence is looked for.
const HORIZON_DAYS: i64 = 5 * 366;

/// Why a rule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RuleError(pub String);

fn err<T>(why: impl Into<String>) -> Result<T, RuleError> {
    Err(RuleError(why.into()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Freq {
    Minutely,
    Hourly,
    Daily,
    Weekly,
    Monthly,
    Yearly,
}

/// A parsed rule, anchored at a local start.
#[derive(Debug, Clone)]
pub struct Recurrence {
    tz: TimeZone,
    start: DateTime,
    rule: Rule,
}

#[derive(Debug, Clone)]
enum Rule {
    Rrule {
        freq: Freq,
        interval: i64,
        months: Vec<i8>,
        month_days: Vec<i8>,
        days: Vec<(Option<i8>, Weekday)>,
        hours: Vec<i8>,
        minutes: Vec<i8>,
        seconds: Vec<i8>,
        until: Option<Timestamp>,
    },
    Cron {
        minutes: Vec<i8>,
        hours: Vec<i8>,
        month_days: Option<Vec<i8>>,
        months: Vec<i8>,
        weekdays: Option<Vec<Weekday>>,
    },
}

impl Recurrence {
    /// An RRULE (with or without the `RRULE:` prefix) from `start` (local, in `tz`). Returns the
    /// rule and its `COUNT`, if any.
    pub fn rrule(
        text: &str,
        tz: TimeZone,
        start: DateTime,
    ) -> Result<(Self, Option<u64>), RuleError> {
        let text = text.trim();
        let text = text.strip_prefix("RRULE:").unwrap_or(text);
        let mut freq = None;
        let mut interval = 1;
        let (mut months, mut month_days, mut days) = (Vec::new(), Vec::new(), Vec::new());
        let (mut hours, mut minutes, mut seconds) = (Vec::new(), Vec::new(), Vec::new());
        let (mut count, mut until) = (None, None);
        for part in text.split(';').filter(|p| !p.is_empty()) {
            let Some((name, value)) = part.split_once('=') else {
                return err(format!("rrule: `{part}` is not NAME=VALUE"));
            };
            match name.to_ascii_uppercase().as_str() {
                "FREQ" => {
                    freq = Some(match value.to_ascii_uppercase().as_str() {
                        "MINUTELY" => Freq::Minutely,
                        "HOURLY" => Freq::Hourly,
                        "DAILY" => Freq::Daily,
                        "WEEKLY" => Freq::Weekly,
                        "MONTHLY" => Freq::Monthly,
                        "YEARLY" => Freq::Yearly,
                        other => return err(format!("rrule: FREQ={other} is not supported (MINUTELY, HOURLY, DAILY, WEEKLY, MONTHLY or YEARLY)")),
                    })
                }
                "INTERVAL" => {
                    interval = value
                        .parse::<i64>()
                        .ok()
                        .filter(|n| (1..=1000).contains(n))
                        .ok_or_else(|| RuleError(format!("rrule: INTERVAL={value} is not a number from 1 to 1000")))?
                }
                "BYMONTH" => months = numbers(value, "BYMONTH", 1, 12, false)?,
                "BYMONTHDAY" => month_days = numbers(value, "BYMONTHDAY", 1, 31, true)?,
                "BYHOUR" => hours = numbers(value, "BYHOUR", 0, 23, false)?,
                "BYMINUTE" => minutes = numbers(value, "BYMINUTE", 0, 59, false)?,
                "BYSECOND" => seconds = numbers(value, "BYSECOND", 0, 59, false)?,
                "BYDAY" => {
                    for item in value.split(',') {
                        let item = item.trim().to_ascii_uppercase();
                        if item.len() < 2 {
                            return err(format!("rrule: BYDAY `{item}` is not a day (MO..SU, optionally with an ordinal such as 1MO or -1FR)"));
                        }
                        let (ordinal, day) = item.split_at(item.len() - 2);
                        let day = weekday(day).ok_or_else(|| RuleError(format!("rrule: BYDAY `{item}` is not a day (MO, TU, WE, TH, FR, SA, SU)")))?;
                        let ordinal = if ordinal.is_empty() {
                            None
                        } else {
                            Some(
                                ordinal
                                    .trim_start_matches('+')
                                    .parse::<i8>()
                                    .ok()
                                    .filter(|n| *n != 0 && (-5..=5).contains(n))
                                    .ok_or_else(|| RuleError(format!("rrule: BYDAY `{item}`: the ordinal must be 1 to 5 or -1 to -5")))?,
                            )
                        };
                        days.push((ordinal, day));
                    }
                }
                "COUNT" => {
                    count = Some(value.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                        RuleError(format!("rrule: COUNT={value} is not a positive number"))
                    })?)
                }
                "UNTIL" => until = Some(parse_until(value, &tz)?),
                "WKST" => {}
                other => return err(format!("rrule: {other} is not supported (FREQ, INTERVAL, BYMONTH, BYMONTHDAY, BYDAY, BYHOUR, BYMINUTE, BYSECOND, COUNT, UNTIL)")),
            }
        }
        let Some(freq) = freq else {
            return err("rrule: FREQ is missing (e.g. FREQ=DAILY)");
        };
        if days.iter().any(|(o, _)| o.is_some()) && !matches!(freq, Freq::Monthly | Freq::Yearly) {
            return err(
                "rrule: an ordinal in BYDAY (such as 1MO) needs FREQ=MONTHLY or FREQ=YEARLY",
            );
        }
        let rule = Rule::Rrule {
            freq,
            interval,
            months,
            month_days,
            days,
            hours,
            minutes,
            seconds,
            until,
        };
        Ok((Self { tz, start, rule }, count))
    }

    /// A five-field cron expression from `start` (local, in `tz`).
    pub fn cron(text: &str, tz: TimeZone, start: DateTime) -> Result<Self, RuleError> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() != 5 {
            return err(format!(
                "cron: `{text}` has {} field(s); it needs 5 (minute hour day-of-month month day-of-week)",
                fields.len()
            ));
        }
        let minutes = cron_field(fields[0], "minute", 0, 59, &[])?;
        let hours = cron_field(fields[1], "hour", 0, 23, &[])?;
        let month_days = (fields[2] != "*")
            .then(|| cron_field(fields[2], "day-of-month", 1, 31, &[]))
            .transpose()?;
        const MONTHS: &[&str] = &[
            "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
        ];
        let months = cron_field(fields[3], "month", 1, 12, MONTHS)?;
        const DAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
        let weekdays = (fields[4] != "*")
            .then(|| cron_field(fields[4], "day-of-week", 0, 7, DAYS))
            .transpose()?
            .map(|days| {
                days.into_iter()
                    .map(|d| Weekday::from_sunday_zero_offset(d % 7).unwrap_or(Weekday::Sunday))
                    .collect()
            });
        let rule = Rule::Cron {
            minutes,
            hours,
            month_days,
            months,
            weekdays,
        };
        Ok(Self { tz, start, rule })
    }

    /// The first occurrences strictly after `after`, at most `n`, in order.
    pub fn next_after(&self, after: Timestamp, n: usize) -> Vec<Timestamp> {
        let mut out = Vec::new();
        let from = after
            .to_zoned_datetime(self.tz.clone())
            .date()
            .max(self.start.date());
        let mut day = from;
        let mut checked = 0;
        while out.len() < n && checked < HORIZON_DAYS {
            if self.day_matches(day) {
                for time in self.times(day) {
                    let local = day.to_datetime(time);
                    if local < self.start {
                        continue;
                    }
                    let instant = self.instant(local);
                    if instant <= after || out.contains(&instant) {
                        continue;
                    }
                    if let Rule::Rrule {
                        until: Some(until), ..
                    } = &self.rule
                    {
                        if instant > *until {
                            return out;
                        }
                    }
                    out.push(instant);
                    if out.len() == n {
                        return out;
                    }
                }
            }
            match day.checked_add(1.day()) {
                Ok(next) => day = next,
                Err(_) => break,
            }
            checked += 1;
        }
        out
    }

    /// The instant of a local time: the first valid time after it when it falls in a gap, the
    /// first of the two when it occurs twice.
    fn instant(&self, local: DateTime) -> Timestamp {
        let ambiguous = self.tz.to_ambiguous_timestamp(local);
        if let AmbiguousOffset::Gap { .. } = ambiguous.offset() {
            let mut probe = local;
            for _ in 0..(26 * 60) {
                let Ok(next) = probe.checked_add(1.minute()) else {
                    break;
                };
                probe = next
                    .with()
                    .second(0)
                    .subsec_nanosecond(0)
                    .build()
                    .unwrap_or(next);
                let candidate = self.tz.to_ambiguous_timestamp(probe);
                if let AmbiguousOffset::Unambiguous { .. } = candidate.offset() {
                    return candidate.compatible().unwrap_or(Timestamp::MAX);
                }
            }
        }
        ambiguous.earlier().unwrap_or(Timestamp::MAX)
    }

    fn day_matches(&self, day: Date) -> bool {
        let start = self.start.date();
        match &self.rule {
            Rule::Cron {
                month_days,
                months,
                weekdays,
                ..
            } => {
                if !months.contains(&day.month()) {
                    return false;
                }
                let by_day = |wd: &Vec<Weekday>| wd.contains(&day.weekday());
                let by_month_day = |md: &Vec<i8>| md.contains(&day.day());
                match (month_days, weekdays) {
                    (None, None) => true,
                    (Some(md), None) => by_month_day(md),
                    (None, Some(wd)) => by_day(wd),
                    (Some(md), Some(wd)) => by_month_day(md) || by_day(wd),
                }
            }
            Rule::Rrule {
                freq,
                interval,
                months,
                month_days,
                days,
                ..
            } => {
                if !months.is_empty() && !months.contains(&day.month()) {
                    return false;
                }
                let days_since = start.until(day).map(|s| s.get_days() as i64).unwrap_or(0);
                let months_since = (day.year() as i64 - start.year() as i64) * 12
                    + (day.month() as i64 - start.month() as i64);
                let in_step = match freq {
                    Freq::Minutely | Freq::Hourly => true,
                    Freq::Daily => days_since % interval == 0,
                    Freq::Weekly => {
                        let monday = |d: Date| {
                            d.checked_sub((d.weekday().to_monday_zero_offset() as i64).days())
                                .unwrap_or(d)
                        };
                        let weeks = monday(start)
                            .until(monday(day))
                            .map(|s| s.get_days() as i64 / 7)
                            .unwrap_or(0);
                        weeks % interval == 0
                    }
                    Freq::Monthly => months_since % interval == 0,
                    Freq::Yearly => (day.year() as i64 - start.year() as i64) % interval == 0,
                };
                if !in_step {
                    return false;
                }
                let month_day_ok = |md: &[i8]| {
                    let last = day.days_in_month();
                    md.iter().any(|&m| {
                        if m > 0 {
                            m == day.day()
                        } else {
                            last + 1 + m == day.day()
                        }
                    })
                };
                let weekday_ok = |list: &[(Option<i8>, Weekday)]| {
                    list.iter().any(|(ordinal, wd)| match ordinal {
                        None => *wd == day.weekday(),
                        Some(n) => day.nth_weekday_of_month(*n, *wd).ok() == Some(day),
                    })
                };
                match freq {
                    Freq::Weekly => {
                        if days.is_empty() {
                            day.weekday() == start.weekday()
                        } else {
                            weekday_ok(days)
                        }
                    }
                    Freq::Monthly | Freq::Yearly => {
                        if *freq == Freq::Yearly
                            && months.is_empty()
                            && day.month() != start.month()
                        {
                            return false;
                        }
                        match (month_days.is_empty(), days.is_empty()) {
                            (true, true) => day.day() == start.day(),
                            (false, true) => month_day_ok(month_days),
                            (true, false) => weekday_ok(days),
                            (false, false) => month_day_ok(month_days) && weekday_ok(days),
                        }
                    }
                    _ => {
                        (month_days.is_empty() || month_day_ok(month_days))
                            && (days.is_empty() || weekday_ok(days))
                    }
                }
            }
        }
    }

    /// The local times of a matching day, in order.
    fn times(&self, day: Date) -> Vec<jiff::civil::Time> {
        let start = self.start;
        let (hours, minutes, seconds): (Vec<i8>, Vec<i8>, Vec<i8>) = match &self.rule {
            Rule::Cron { minutes, hours, .. } => (hours.clone(), minutes.clone(), vec![0]),
            Rule::Rrule {
                freq,
                interval,
                hours,
                minutes,
                seconds,
                ..
            } => {
                let or = |list: &Vec<i8>, default: i8| {
                    if list.is_empty() {
                        vec![default]
                    } else {
                        list.clone()
                    }
                };
                // What a person means: an unset BYSECOND is second 0, and with BYHOUR an unset
                // BYMINUTE is minute 0 (`FREQ=DAILY;BYHOUR=9` is 09:00:00, not 09 and the
                // minute and second the schedule was made at). Otherwise the start's, as in
                // RFC 5545.
                let start_minute = match hours.is_empty() {
                    true => start.minute(),
                    false => 0,
                };
                let days_since = start
                    .date()
                    .until(day)
                    .map(|s| s.get_days() as i64)
                    .unwrap_or(0);
                match freq {
                    Freq::Hourly => {
                        let all: Vec<i8> = (0..24)
                            .filter(|h| {
                                let since = days_since * 24 + *h as i64 - start.hour() as i64;
                                since.rem_euclid(*interval) == 0
                            })
                            .filter(|h| hours.is_empty() || hours.contains(h))
                            .collect();
                        (all, or(minutes, start_minute), or(seconds, 0))
                    }
                    Freq::Minutely => {
                        let hours_all: Vec<i8> = (0..24)
                            .filter(|h| hours.is_empty() || hours.contains(h))
                            .collect();
                        let mut times = Vec::new();
                        for h in hours_all {
                            for m in 0..60i8 {
                                let since = (days_since * 24 + h as i64) * 60 + m as i64
                                    - (start.hour() as i64 * 60 + start.minute() as i64);
                                if since.rem_euclid(*interval) == 0
                                    && (minutes.is_empty() || minutes.contains(&m))
                                {
                                    for s in or(seconds, 0) {
                                        if let Ok(t) = jiff::civil::Time::new(h, m, s, 0) {
                                            times.push(t);
                                        }
                                    }
                                }
                            }
                        }
                        return times;
                    }
                    _ => (
                        or(hours, start.hour()),
                        or(minutes, start_minute),
                        or(seconds, 0),
                    ),
                }
            }
        };
        let mut times = Vec::new();
        for h in &hours {
            for m in &minutes {
                for s in &seconds {
                    if let Ok(t) = jiff::civil::Time::new(*h, *m, *s, 0) {
                        times.push(t);
                    }
                }
            }
        }
        times.sort();
        times
    }
}

fn weekday(code: &str) -> Option<Weekday> {
    Some(match code {
        "MO" => Weekday::Monday,
        "TU" => Weekday::Tuesday,
        "WE" => Weekday::Wednesday,
        "TH" => Weekday::Thursday,
        "FR" => Weekday::Friday,
        "SA" => Weekday::Saturday,
        "SU" => Weekday::Sunday,
        _ => return None,
    })
}

fn numbers(
    value: &str,
    name: &str,
    min: i8,
    max: i8,
    negative: bool,
) -> Result<Vec<i8>, RuleError> {
    value
        .split(',')
        .map(|v| {
            let n = v
                .trim()
                .parse::<i8>()
                .ok()
                .filter(|n| (min..=max).contains(n) || (negative && (-max..=-1).contains(n)));
            n.ok_or_else(|| {
                RuleError(format!(
                    "rrule: {name} value `{v}` is out of range ({min} to {max}{})",
                    if negative {
                        ", or negative from the end"
                    } else {
                        ""
                    }
                ))
            })
        })
        .collect()
}

fn parse_until(value: &str, tz: &TimeZone) -> Result<Timestamp, RuleError> {
    let bad = || {
        RuleError(format!("rrule: UNTIL={value} is not a date (YYYYMMDD) or time (YYYYMMDDTHHMMSS, with Z for UTC)"))
    };
    let digits: String = value.chars().filter(char::is_ascii_alphanumeric).collect();
    let (date, time, utc) = match digits.len() {
        8 => (&digits[..8], "235959", false),
        15 => (&digits[..8], &digits[9..15], false),
        16 if digits.ends_with('Z') => (&digits[..8], &digits[9..15], true),
        _ => return Err(bad()),
    };
    let text = format!(
        "{}-{}-{}T{}:{}:{}",
        &date[..4],
        &date[4..6],
        &date[6..8],
        &time[..2],
        &time[2..4],
        &time[4..6]
    );
    let local: DateTime = text.parse().map_err(|_| bad())?;
    if utc {
        local
            .to_zoned_datetime(TimeZone::UTC)
            .map(|z| z.timestamp())
            .map_err(|_| bad())
    } else {
        tz.to_timestamp(local).map_err(|_| bad())
    }
}

fn cron_field(
    text: &str,
    name: &str,
    min: i8,
    max: i8,
    names: &[&str],
) -> Result<Vec<i8>, RuleError> {
    let value = |v: &str| -> Result<i8, RuleError> {
        let upper = v.to_ascii_uppercase();
        if let Some(i) = names.iter().position(|n| *n == upper) {
            // Months count from 1 (JAN), days from 0 (SUN): the field's minimum.
            return Ok(i as i8 + min);
        }
        v.parse::<i8>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| {
                RuleError(format!(
                    "cron: {name} `{v}` is out of range ({min} to {max})"
                ))
            })
    };
    let mut out = Vec::new();
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (
                r,
                s.parse::<i8>().ok().filter(|s| *s > 0).ok_or_else(|| {
                    RuleError(format!("cron: {name} step `{s}` is not a positive number"))
                })?,
            ),
            None => (part, 1),
        };
        let (lo, hi) = if range == "*" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a)?, value(b)?)
        } else {
            let v = value(range)?;
            (v, if part.contains('/') { max } else { v })
        };
        if lo > hi {
            return err(format!("cron: {name} range `{range}` goes backwards"));
        }
        let mut v = lo;
        while v <= hi {
            if !out.contains(&v) {
                out.push(v);
            }
            v = match v.checked_add(step) {
                Some(n) => n,
                None => break,
            };
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests;
