//! Recurring schedules: `schedule_create`, `schedule_list`, `schedule_delete`. A schedule
//! belongs to its thread (closing the thread deletes it); each occurrence reaches the thread as
//! a `schedule` input, and each firing arms only the next one, through the same timers as
//! sleeps, so nothing depends on a long-lived process.

pub(crate) mod recurrence;

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::Timestamp;
use serde_json::{json, Value};

use super::str_arg;
use crate::effect::Effect;
use crate::input::{Input, InputBody};
use crate::model::ToolSpec;
use crate::state::{Schedule, ThreadRecord};
use crate::tools::{Tool, ToolContext, ToolOutcome};
use recurrence::Recurrence;

/// The most schedules one thread keeps.
pub const MAX_SCHEDULES: usize = 20;

/// The longest `message` a schedule keeps (it is on the record and repeated at each occurrence).
pub const MAX_MESSAGE_CHARS: usize = 4_000;

/// The least time between two occurrences: a schedule wakes an agent, at most once a minute.
pub const MIN_SPACING_SECONDS: i64 = 60;

/// A schedule's rule, read again from what the record keeps.
pub(crate) fn recurrence_of(schedule: &Schedule) -> Result<Recurrence, String> {
    let tz = TimeZone::get(&schedule.timezone)
        .map_err(|_| format!("unknown time zone `{}`", schedule.timezone))?;
    match (&schedule.rrule, &schedule.cron) {
        (Some(rule), _) => Recurrence::rrule(rule, tz, schedule.start)
            .map(|(r, _)| r)
            .map_err(|e| e.to_string()),
        (None, Some(cron)) => Recurrence::cron(cron, tz, schedule.start).map_err(|e| e.to_string()),
        (None, None) => Err("no rule".to_owned()),
    }
}

/// The next occurrences of `schedule` strictly after `after` (at most `n`), within its `until`
/// and `count`.
pub(crate) fn upcoming(schedule: &Schedule, after: Timestamp, n: usize) -> Vec<Timestamp> {
    let Ok(rule) = recurrence_of(schedule) else {
        return Vec::new();
    };
    let left = schedule.count.map_or(n, |c| {
        c.saturating_sub(schedule.fired).min(n as u64) as usize
    });
    rule.next_after(after, left)
        .into_iter()
        .filter(|t| schedule.until.is_none_or(|u| *t <= u))
        .collect()
}

/// The timer of one occurrence.
pub(crate) fn arm(record: &ThreadRecord, schedule: &Schedule) -> Effect {
    let at = schedule.next;
    Effect::SendAt {
        input: Input {
            id: schedule.next_input_id(),
            thread_id: record.id.clone(),
            body: InputBody::Schedule {
                schedule_id: schedule.id.clone(),
                at,
            },
        },
        due: at,
    }
}

/// An occurrence as the model reads it: local time, zone, and UTC.
pub(crate) fn show(at: Timestamp, zone: &str) -> String {
    match TimeZone::get(zone) {
        Ok(tz) => format!(
            "{} {zone} ({} UTC)",
            at.to_zoned_datetime(tz).strftime("%Y-%m-%d %H:%M:%S"),
            at.to_zoned_datetime(TimeZone::UTC)
                .strftime("%Y-%m-%d %H:%M:%S")
        ),
        Err(_) => format!("{at}"),
    }
}

fn local_time(text: &str, what: &str, tz: &TimeZone, zone: &str) -> Result<Timestamp, String> {
    if let Ok(t) = text.parse::<Timestamp>() {
        return Ok(t);
    }
    let civil: DateTime = text.parse().map_err(|_| {
        format!("`{what}` must be a local date and time such as 2026-12-07T08:30 (in {zone}) or an RFC 3339 time; got `{text}`")
    })?;
    tz.to_timestamp(civil)
        .map_err(|e| format!("`{what}` {text} cannot be placed in {zone}: {e}"))
}

#[derive(Debug)]
pub(crate) struct ScheduleCreate;

impl Tool for ScheduleCreate {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "schedule_create",
            "Create a recurring schedule: at each occurrence this thread receives `message`. Give \
             exactly one of `rrule` (RFC 5545, e.g. FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=8;BYMINUTE=30) \
             or `cron` (5 fields: minute hour day-of-month month day-of-week), read in \
             `timezone` (IANA, default UTC): 08:30 stays 08:30 local across daylight-saving \
             switches. In an rrule an unset BYSECOND is 0, and with BYHOUR an unset BYMINUTE is \
             0 (BYHOUR=9 fires at 09:00:00). Returns the schedule's id and its next three occurrences, to check.",
            json!({
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "What the thread receives each time."},
                    "rrule": {"type": "string"},
                    "cron": {"type": "string"},
                    "timezone": {"type": "string", "description": "IANA zone, e.g. Europe/Berlin (default UTC)."},
                    "start": {"type": "string", "description": "Local date and time of the first possible occurrence (default now)."},
                    "until": {"type": "string", "description": "Local date and time after which it stops."},
                    "count": {"type": "integer", "minimum": 1, "description": "Stop after this many occurrences."}
                },
                "required": ["message"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        match create(ctx.record, ctx.now, ctx.ids, ctx.effects, args, None) {
            Ok(text) => ToolOutcome::ok(text),
            Err(why) => ToolOutcome::error(format!("Error: {why}")),
        }
    }
}

/// Creates a schedule on `record` from `schedule_create`'s arguments (the tool, or a person's
/// `schedule_create` input, which names the id it gets): the schedule, and its first
/// occurrence's timer in `effects`. Returns what the tool answers, or what is wrong.
pub fn create(
    record: &mut ThreadRecord,
    now: Timestamp,
    ids: &mut dyn crate::ids::IdSource,
    effects: &mut Vec<Effect>,
    args: &Value,
    id: Option<String>,
) -> Result<String, String> {
    if !args.is_object() {
        return Err("the schedule's arguments must be an object".to_owned());
    }
    let message = args
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if message.is_empty() {
        return Err("`message` (what the thread receives each time) is missing".to_owned());
    }
    let chars = message.chars().count();
    if chars > MAX_MESSAGE_CHARS {
        return Err(format!(
            "`message` has {chars} characters, more than a schedule keeps ({MAX_MESSAGE_CHARS}); \
             keep the details elsewhere (a note, a file) and say where"
        ));
    }
    if let Some(id) = &id {
        if record.schedules.iter().any(|s| &s.id == id) {
            return Err(format!("the thread already has a schedule {id}"));
        }
    }
    if record.schedules.len() >= MAX_SCHEDULES {
        return Err(format!(
            "this thread has {MAX_SCHEDULES} schedules, the most it may keep; delete one first"
        ));
    }
    let zone = args
        .get("timezone")
        .and_then(Value::as_str)
        .unwrap_or("UTC")
        .to_owned();
    let tz = TimeZone::get(&zone).map_err(|_| {
        format!("unknown time zone `{zone}` (use an IANA name such as Europe/Berlin)")
    })?;
    let rrule = args.get("rrule").and_then(Value::as_str).map(str::to_owned);
    let cron = args.get("cron").and_then(Value::as_str).map(str::to_owned);
    if rrule.is_some() == cron.is_some() {
        return Err("give exactly one of `rrule` and `cron`".to_owned());
    }
    let start = match args.get("start").and_then(Value::as_str) {
        Some(text) => local_time(text, "start", &tz, &zone)?,
        None => now,
    };
    let until = args
        .get("until")
        .and_then(Value::as_str)
        .map(|text| local_time(text, "until", &tz, &zone))
        .transpose()?;
    let mut count = args.get("count").and_then(Value::as_u64);
    let start_local = start.to_zoned_datetime(tz.clone()).datetime();
    match (&rrule, &cron) {
        (Some(rule), _) => {
            let (_, rule_count) =
                Recurrence::rrule(rule, tz.clone(), start_local).map_err(|e| e.to_string())?;
            count = count.or(rule_count);
        }
        (None, Some(expr)) => {
            Recurrence::cron(expr, tz.clone(), start_local).map_err(|e| e.to_string())?;
        }
        (None, None) => {}
    }
    let mut schedule = Schedule {
        id: id.unwrap_or_else(|| format!("sch-{:012x}", ids.next_bits() & 0xffff_ffff_ffff)),
        message: str_arg(args, "message").to_owned(),
        rrule,
        cron,
        timezone: zone.clone(),
        start: start_local,
        until,
        count,
        fired: 0,
        next: now,
    };
    let first_possible = now.max(start);
    let after = first_possible
        .checked_sub(jiff::SignedDuration::from_nanos(1))
        .unwrap_or(first_possible);
    // Enough occurrences to check their spacing; the first three are shown.
    let next = upcoming(&schedule, after, 24);
    let Some(first) = next.first() else {
        return Err(
            "the rule has no occurrence in the next five years (within `until`)".to_owned(),
        );
    };
    if let Some(pair) = next
        .windows(2)
        .find(|w| w[1].duration_since(w[0]).as_secs() < MIN_SPACING_SECONDS)
    {
        return Err(format!(
            "occurrences {} s apart ({} and {}); a schedule fires at most once a minute",
            pair[1].duration_since(pair[0]).as_secs(),
            show(pair[0], &zone),
            show(pair[1], &zone)
        ));
    }
    schedule.next = *first;
    let shown: Vec<String> = next.iter().take(3).map(|t| show(*t, &zone)).collect();
    let text = format!(
        "Schedule {} created. Next occurrences: {}.",
        schedule.id,
        shown.join("; ")
    );
    effects.push(arm(record, &schedule));
    record.schedules.push(schedule);
    Ok(text)
}

#[derive(Debug)]
pub(crate) struct ScheduleList;

impl Tool for ScheduleList {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "schedule_list",
            "List this thread's recurring schedules with their next occurrence.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
    }

    fn call(&self, _: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        if ctx.record.schedules.is_empty() {
            return ToolOutcome::ok("This thread has no schedules.");
        }
        let lines: Vec<String> = ctx
            .record
            .schedules
            .iter()
            .map(|s| {
                format!(
                    "{}: {} ({}), next {}, fired {} time(s): {}",
                    s.id,
                    s.rrule.as_deref().or(s.cron.as_deref()).unwrap_or_default(),
                    s.timezone,
                    show(s.next, &s.timezone),
                    s.fired,
                    s.message
                )
            })
            .collect();
        ToolOutcome::ok(lines.join("\n"))
    }
}

#[derive(Debug)]
pub(crate) struct ScheduleDelete;

impl Tool for ScheduleDelete {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "schedule_delete",
            "Delete one of this thread's recurring schedules.",
            json!({
                "type": "object",
                "properties": {"schedule_id": {"type": "string"}},
                "required": ["schedule_id"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let id = str_arg(args, "schedule_id");
        match delete(ctx.record, id) {
            Ok(()) => ToolOutcome::ok(format!("Schedule {id} deleted.")),
            Err(why) => ToolOutcome::error(format!("Error: {why}")),
        }
    }
}

/// Removes a schedule (its armed timer, when it fires, finds nothing and is dropped).
pub(crate) fn delete(record: &mut ThreadRecord, id: &str) -> Result<(), String> {
    let Some(index) = record.schedules.iter().position(|s| s.id == id) else {
        let ids: Vec<&str> = record.schedules.iter().map(|s| s.id.as_str()).collect();
        return Err(format!(
            "no schedule `{id}` on this thread (it has: {})",
            if ids.is_empty() {
                "none".to_owned()
            } else {
                ids.join(", ")
            }
        ));
    };
    record.schedules.remove(index);
    Ok(())
}
