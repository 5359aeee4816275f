//! The sleep tools: `sleep`, `sleep_until`, `sleep_until_event_or_input`. All three are
//! passive: nothing waits for them, and new input wakes the thread at once.

use jiff::{civil::DateTime, tz::TimeZone, SignedDuration, Timestamp};
use serde_json::{json, Value};

use super::str_arg;
use crate::effect::OutputKind;
use crate::history::model_time;
use crate::model::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolOutcome};

/// The longest sleep accepted: ten years.
const MAX_SLEEP_SECONDS: u64 = 10 * 366 * 24 * 3600;

fn schedule_wake(ctx: &mut ToolContext<'_>, due: Timestamp) {
    ctx.wake_at(due);
}

#[derive(Debug)]
pub(super) struct Sleep;

impl Tool for Sleep {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "sleep",
            "Sleep for a number of seconds. The thread wakes early if a message, event or report \
             arrives; the sleep's own result is then delivered later as an event.",
            json!({
                "type": "object",
                "properties": {
                    "seconds": {"type": "number", "minimum": 0, "maximum": MAX_SLEEP_SECONDS,
                                "description": "How long to sleep, in seconds."}
                },
                "required": ["seconds"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let seconds = args.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
        let millis = (seconds * 1000.0).round() as i64;
        if millis <= 0 {
            return ToolOutcome::ok("Slept 0 seconds.");
        }
        let Ok(due) = ctx.now.checked_add(SignedDuration::from_millis(millis)) else {
            return ToolOutcome::error("Error: that sleep ends beyond the supported date range.");
        };
        schedule_wake(ctx, due);
        ToolOutcome::Passive { due: Some(due) }
    }
}

#[derive(Debug)]
pub(super) struct SleepUntil;

/// Why a local date and time could not be placed on the timeline.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LocalTimeError {
    #[error("date `{0}` must be YYYY-MM-DD")]
    DateFormat(String),
    #[error("time `{0}` must be HH:MM or HH:MM:SS")]
    TimeFormat(String),
    #[error("`{date} {time}` is not a valid date and time: {reason}")]
    Invalid {
        date: String,
        time: String,
        reason: String,
    },
    #[error("`{0}` is not a known IANA time zone (e.g. Europe/Paris)")]
    UnknownZone(String),
    #[error("cannot place `{date} {time}` in {zone}: {reason}")]
    Unplaceable {
        date: String,
        time: String,
        zone: String,
        reason: String,
    },
}

/// Resolves a local date and time in an IANA zone to an instant.
///
/// A local time that does not exist (skipped by a DST change) is moved forward by the length of
/// the gap (02:30 on a spring-forward night in New York is 03:30 EDT); a local time that occurs
/// twice (fall back) resolves to the earlier of the two instants.
pub(crate) fn resolve_local_time(
    date: &str,
    time: &str,
    zone: &str,
) -> Result<Timestamp, LocalTimeError> {
    let date_ok = date.len() == 10
        && date.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    if !date_ok {
        return Err(LocalTimeError::DateFormat(date.to_owned()));
    }
    let time_ok = (time.len() == 5 || time.len() == 8)
        && time.bytes().enumerate().all(|(i, b)| {
            if i == 2 || i == 5 {
                b == b':'
            } else {
                b.is_ascii_digit()
            }
        });
    if !time_ok {
        return Err(LocalTimeError::TimeFormat(time.to_owned()));
    }
    let civil: DateTime =
        format!("{date}T{time}")
            .parse()
            .map_err(|e: jiff::Error| LocalTimeError::Invalid {
                date: date.to_owned(),
                time: time.to_owned(),
                reason: e.to_string(),
            })?;
    let tz = TimeZone::get(zone).map_err(|_| LocalTimeError::UnknownZone(zone.to_owned()))?;
    tz.to_timestamp(civil)
        .map_err(|e| LocalTimeError::Unplaceable {
            date: date.to_owned(),
            time: time.to_owned(),
            zone: zone.to_owned(),
            reason: e.to_string(),
        })
}

impl Tool for SleepUntil {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "sleep_until",
            "Sleep until a local date and time in an IANA time zone. A time in the past returns at \
             once. Interrupted like `sleep` by new input.",
            json!({
                "type": "object",
                "properties": {
                    "date": {"type": "string", "description": "YYYY-MM-DD"},
                    "time": {"type": "string", "description": "HH:MM or HH:MM:SS, local time"},
                    "timezone": {"type": "string", "description": "IANA zone, e.g. Europe/Paris"}
                },
                "required": ["date", "time", "timezone"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let (date, time, zone) = (
            str_arg(args, "date"),
            str_arg(args, "time"),
            str_arg(args, "timezone"),
        );
        let due = match resolve_local_time(date, time, zone) {
            Ok(due) => due,
            Err(why) => return ToolOutcome::error(format!("Error: {why}.")),
        };
        if due <= ctx.now {
            return ToolOutcome::ok(format!(
                "{date} {time} {zone} ({}) is already past (now {}); not sleeping.",
                model_time(due),
                model_time(ctx.now)
            ));
        }
        schedule_wake(ctx, due);
        ToolOutcome::Passive { due: Some(due) }
    }
}

#[derive(Debug)]
pub(super) struct SleepUntilEventOrInput;

impl Tool for SleepUntilEventOrInput {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "sleep_until_event_or_input",
            "Wait, with no timer, until the next message, event or report arrives.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
    }

    fn call(&self, _args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        ctx.output(OutputKind::Sleeping {
            call_id: ctx.call.id.clone(),
            until: None,
        });
        ToolOutcome::Passive { due: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_time_in_a_named_zone() {
        let t = resolve_local_time("2026-07-01", "09:00", "Europe/Paris").unwrap();
        assert_eq!(t.to_string(), "2026-07-01T07:00:00Z");
    }

    #[test]
    fn nonexistent_local_time_moves_forward_by_the_gap() {
        // 2026-03-08 02:30 does not exist in New York (clocks jump 02:00 -> 03:00 EDT).
        let t = resolve_local_time("2026-03-08", "02:30", "America/New_York").unwrap();
        assert_eq!(t.to_string(), "2026-03-08T07:30:00Z"); // 03:30 EDT
    }

    #[test]
    fn ambiguous_local_time_takes_the_earlier_instant() {
        // 2026-11-01 01:30 happens twice in New York; the first is EDT (-04:00).
        let t = resolve_local_time("2026-11-01", "01:30:00", "America/New_York").unwrap();
        assert_eq!(t.to_string(), "2026-11-01T05:30:00Z");
    }

    #[test]
    fn bad_inputs_name_the_problem() {
        assert!(resolve_local_time("2026-7-1", "09:00", "UTC")
            .unwrap_err()
            .to_string()
            .contains("YYYY-MM-DD"));
        assert!(resolve_local_time("2026-07-01", "9am", "UTC")
            .unwrap_err()
            .to_string()
            .contains("HH:MM"));
        assert!(resolve_local_time("2026-07-01", "09:00", "Mars/Olympus")
            .unwrap_err()
            .to_string()
            .contains("Mars/Olympus"));
        assert!(resolve_local_time("2026-02-30", "09:00", "UTC")
            .unwrap_err()
            .to_string()
            .contains("not a valid date"));
    }
}
