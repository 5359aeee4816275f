//! `ticker`: a subscription that sends a fixed number of events at an interval.

use std::time::Duration;

use infinity_rap::kit::{tool_definition, Call, CallbackError, ToolServer};
use serde_json::{json, Map, Value};
use tokio::time::{Instant, MissedTickBehavior};

/// The most ticks one subscription may ask for.
const MAX_COUNT: u32 = 100;
/// The longest interval between two ticks, in seconds (one hour).
const MAX_INTERVAL_SECONDS: f64 = 3600.0;

/// A server with one tool, `ticker(count, interval_seconds, label?, associative?)`.
///
/// It confirms with a subscribing result (`Subscribed: 3 ticks every 0.5 s`), then sends `count`
/// events, one every `interval_seconds`, each a JSON text `{"label": ..., "of": N, "tick": i}`
/// (`label` only when given), the last one final. Cancelling the call or closing its thread
/// stops it at once: nothing more is sent.
pub fn ticker_server() -> ToolServer {
    let schema = json!({
        "type": "object",
        "properties": {
            "count": {
                "type": "integer", "minimum": 1, "maximum": MAX_COUNT,
                "description": "How many ticks to send"
            },
            "interval_seconds": {
                "type": "number", "exclusiveMinimum": 0, "maximum": MAX_INTERVAL_SECONDS,
                "description": "Seconds between two ticks"
            },
            "label": {"type": "string", "description": "A name to tell tickers apart"},
            "associative": {
                "type": "boolean",
                "description": "Deliver ticks into this thread (true) or each to a new child \
                                thread (false, the default)"
            }
        },
        "required": ["count", "interval_seconds"],
        "additionalProperties": false
    });
    ToolServer::new(
        "ticker-tools",
        "Timed subscription events, for trying subscriptions",
    )
    .tool(
        tool_definition(
            "ticker",
            "Subscribes to `count` ticks, one every `interval_seconds`; the last tick ends the \
             subscription.",
            schema,
        ),
        ticker,
    )
}

/// The arguments `ticker` takes.
const ARGUMENTS: [&str; 4] = ["count", "interval_seconds", "label", "associative"];

/// A checked ticker subscription.
#[derive(Debug, PartialEq)]
struct Ticker {
    count: u32,
    interval: Duration,
    label: Option<String>,
    associative: bool,
}

impl Ticker {
    /// Checks the arguments, with a message naming the argument at fault for the model.
    fn from_args(args: &Map<String, Value>) -> Result<Self, String> {
        if let Some(unknown) = args.keys().find(|name| !ARGUMENTS.contains(&name.as_str())) {
            return Err(format!(
                "unknown argument `{unknown}`; ticker takes {}",
                ARGUMENTS.join(", ")
            ));
        }
        let count = match args.get("count") {
            None => return Err("`count` is required".to_owned()),
            Some(count) => count
                .as_u64()
                .and_then(|count| u32::try_from(count).ok())
                .filter(|count| (1..=MAX_COUNT).contains(count))
                .ok_or_else(|| {
                    format!("`count` must be an integer from 1 to {MAX_COUNT}, got {count}")
                })?,
        };
        let interval = match args.get("interval_seconds") {
            None => return Err("`interval_seconds` is required".to_owned()),
            Some(seconds) => seconds
                .as_f64()
                .filter(|seconds| *seconds <= MAX_INTERVAL_SECONDS)
                .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
                .filter(|interval| !interval.is_zero())
                .ok_or_else(|| {
                    format!(
                        "`interval_seconds` must be a number above 0 and at most \
                         {MAX_INTERVAL_SECONDS}, got {seconds}"
                    )
                })?,
        };
        let label = match args.get("label") {
            None | Some(Value::Null) => None,
            Some(Value::String(label)) => Some(label.clone()),
            Some(other) => return Err(format!("`label` must be a string, got {other}")),
        };
        let associative = match args.get("associative") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(associative)) => *associative,
            Some(other) => return Err(format!("`associative` must be a boolean, got {other}")),
        };
        Ok(Ticker {
            count,
            interval,
            label,
            associative,
        })
    }

    fn confirmation(&self) -> String {
        let plural = if self.count == 1 { "" } else { "s" };
        format!(
            "Subscribed: {} tick{plural} every {} s",
            self.count,
            self.interval.as_secs_f64()
        )
    }

    fn event_text(&self, tick: u32) -> String {
        let mut event = Map::new();
        if let Some(label) = &self.label {
            event.insert("label".to_owned(), Value::from(label.as_str()));
        }
        event.insert("tick".to_owned(), Value::from(tick));
        event.insert("of".to_owned(), Value::from(self.count));
        Value::Object(event).to_string()
    }
}

async fn ticker(call: Call) -> Result<(), CallbackError> {
    let ticker = match Ticker::from_args(call.args()) {
        Ok(ticker) => ticker,
        Err(message) => return call.result_error(message).await,
    };
    call.subscribed(ticker.confirmation()).await?;

    let mut clock = tokio::time::interval_at(Instant::now() + ticker.interval, ticker.interval);
    clock.set_missed_tick_behavior(MissedTickBehavior::Delay);
    for tick in 1..=ticker.count {
        tokio::select! {
            biased;
            () = call.cancelled() => return Ok(()),
            _ = clock.tick() => {}
        }
        let is_final = tick == ticker.count;
        call.event(ticker.event_text(tick), ticker.associative, is_final)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(value: Value) -> Result<Ticker, String> {
        Ticker::from_args(value.as_object().unwrap())
    }

    #[test]
    fn arguments_are_checked() {
        let ticker = args(json!({"count": 3, "interval_seconds": 0.5, "label": "tea"})).unwrap();
        assert_eq!(ticker.interval, Duration::from_millis(500));
        assert!(!ticker.associative);
        assert_eq!(ticker.confirmation(), "Subscribed: 3 ticks every 0.5 s");

        for (bad, field) in [
            (json!({"count": 0, "interval_seconds": 1}), "count"),
            (json!({"count": 101, "interval_seconds": 1}), "count"),
            (json!({"count": 2.5, "interval_seconds": 1}), "count"),
            (
                json!({"count": 1, "interval_seconds": 0}),
                "interval_seconds",
            ),
            (
                json!({"count": 1, "interval_seconds": -1}),
                "interval_seconds",
            ),
            (
                json!({"count": 1, "interval_seconds": 3601}),
                "interval_seconds",
            ),
            (json!({"count": 1}), "interval_seconds"),
            (json!({"interval_seconds": 1}), "count"),
            (
                json!({"count": 1, "interval_seconds": 1, "label": 7}),
                "label",
            ),
            (
                json!({"count": 1, "interval_seconds": 1, "associative": "yes"}),
                "associative",
            ),
            (
                json!({"count": 1, "interval_seconds": 1, "colour": "red"}),
                "colour",
            ),
        ] {
            let error = args(bad.clone()).unwrap_err();
            assert!(error.contains(field), "{bad}: {error}");
        }
        assert!(args(json!({"count": 100, "interval_seconds": 3600})).is_ok());
    }

    #[test]
    fn events_are_json_with_the_label_when_given() {
        let labelled = args(json!({"count": 2, "interval_seconds": 1, "label": "tea"})).unwrap();
        let event: Value = serde_json::from_str(&labelled.event_text(1)).unwrap();
        assert_eq!(event, json!({"label": "tea", "tick": 1, "of": 2}));
        let plain = args(json!({"count": 1, "interval_seconds": 1})).unwrap();
        assert_eq!(plain.confirmation(), "Subscribed: 1 tick every 1 s");
        let event: Value = serde_json::from_str(&plain.event_text(1)).unwrap();
        assert_eq!(event, json!({"tick": 1, "of": 1}));
    }
}
