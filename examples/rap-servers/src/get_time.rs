//! `get_time`: the current time in an IANA time zone.

use infinity_rap::kit::{tool_definition, Call, CallbackError, ToolServer};
use jiff::tz::TimeZone;
use jiff::Timestamp;
use serde_json::{json, Map, Value};

/// The zone used when the call names none.
const DEFAULT_ZONE: &str = "UTC";

/// A server with one tool, `get_time(timezone?)`.
///
/// It answers with the current time in the zone as RFC 3339 with the offset, followed by the
/// zone name in brackets (RFC 9557), e.g. `2025-06-01T14:03:07+02:00[Europe/Paris]`; an unknown
/// zone gets an error result naming it. Zones come from the tz database bundled with `jiff`, so
/// the answer does not depend on the host.
pub fn get_time_server() -> ToolServer {
    let schema = json!({
        "type": "object",
        "properties": {
            "timezone": {
                "type": "string",
                "description": "An IANA time zone name such as Europe/Paris; default UTC"
            }
        },
        "additionalProperties": false
    });
    ToolServer::new("time-tools", "The current date and time anywhere").tool(
        tool_definition(
            "get_time",
            "Returns the current time in an IANA time zone (default UTC) as RFC 3339 with the \
             zone name, e.g. 2025-06-01T14:03:07+02:00[Europe/Paris].",
            schema,
        ),
        get_time,
    )
}

async fn get_time(call: Call) -> Result<(), CallbackError> {
    match zone_argument(call.args()).and_then(|zone| time_in(zone, Timestamp::now())) {
        Ok(time) => call.result_text(time).await,
        Err(message) => call.result_error(message).await,
    }
}

/// The `timezone` argument, if given; an error naming the argument at fault otherwise.
fn zone_argument(args: &Map<String, Value>) -> Result<Option<&str>, String> {
    if let Some(unknown) = args.keys().find(|name| *name != "timezone") {
        return Err(format!(
            "unknown argument `{unknown}`; get_time takes only `timezone`"
        ));
    }
    match args.get("timezone") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(zone)) => Ok(Some(zone)),
        Some(other) => Err(format!(
            "`timezone` must be a string such as Europe/Paris, got {other}"
        )),
    }
}

/// `now` in the zone called `zone` (UTC when `None`), to the second.
fn time_in(zone: Option<&str>, now: Timestamp) -> Result<String, String> {
    let name = zone.unwrap_or(DEFAULT_ZONE);
    let zone = TimeZone::get(name).map_err(|_| {
        format!("unknown time zone `{name}`; use an IANA name such as Europe/Paris or UTC")
    })?;
    Ok(format!("{:.0}", now.to_zoned_datetime(zone)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noon_utc() -> Timestamp {
        "2025-06-01T12:00:00.25Z".parse().unwrap()
    }

    #[test]
    fn times_carry_the_offset_and_the_zone_name() {
        assert_eq!(
            time_in(Some("Europe/Paris"), noon_utc()).unwrap(),
            "2025-06-01T14:00:00+02:00[Europe/Paris]"
        );
        assert_eq!(
            time_in(Some("America/New_York"), noon_utc()).unwrap(),
            "2025-06-01T08:00:00-04:00[America/New_York]"
        );
        assert_eq!(
            time_in(None, noon_utc()).unwrap(),
            "2025-06-01T12:00:00+00:00[UTC]"
        );
    }

    #[test]
    fn the_zone_argument_is_optional_and_a_string() {
        let zone =
            |args: Value| zone_argument(args.as_object().unwrap()).map(|z| z.map(str::to_owned));
        assert_eq!(zone(json!({})).unwrap(), None);
        assert_eq!(zone(json!({"timezone": null})).unwrap(), None);
        assert_eq!(
            zone(json!({"timezone": "Asia/Tokyo"})).unwrap().as_deref(),
            Some("Asia/Tokyo")
        );
        assert!(zone(json!({"timezone": 9}))
            .unwrap_err()
            .contains("`timezone`"));
        assert!(zone(json!({"tz": "UTC"})).unwrap_err().contains("`tz`"));
    }

    #[test]
    fn an_unknown_zone_is_named() {
        let error = time_in(Some("Mars/Olympus_Mons"), noon_utc()).unwrap_err();
        assert!(error.contains("`Mars/Olympus_Mons`"), "{error}");
    }
}
