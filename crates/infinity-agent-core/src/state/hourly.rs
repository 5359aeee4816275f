//! Usage counted per hour on the clock, for the limits that hold across slices; and what a
//! thread that reached one of them records.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// What a thread (or a conversation) used in the current hour.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct HourlyUsage {
    /// The start of the hour these count (`None`: nothing counted yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<crate::schema::Rfc3339>")]
    pub hour: Option<Timestamp>,
    /// Completions run.
    #[serde(default)]
    pub completions: u32,
    /// Tokens used: prompt, cache reads and writes, output.
    #[serde(default)]
    pub tokens: u64,
    /// Threads started.
    #[serde(default)]
    pub threads: u32,
}

impl HourlyUsage {
    /// The start of the hour `now` falls in.
    pub fn hour_of(now: Timestamp) -> Timestamp {
        let seconds = now.as_second();
        Timestamp::from_second(seconds - seconds.rem_euclid(3600)).unwrap_or(now)
    }

    /// Starts counting afresh when `now` is in a later hour than the one counted.
    pub fn roll(&mut self, now: Timestamp) {
        let hour = Self::hour_of(now);
        if self.hour != Some(hour) {
            *self = Self {
                hour: Some(hour),
                ..Self::default()
            };
        }
    }

    /// Adds `other`'s counts (of the same hour; counts of an earlier hour are dropped).
    pub fn add(&mut self, other: &HourlyUsage) {
        if other.hour.is_some() && other.hour != self.hour {
            return;
        }
        self.completions = self.completions.saturating_add(other.completions);
        self.tokens = self.tokens.saturating_add(other.tokens);
        self.threads = self.threads.saturating_add(other.threads);
    }

    /// True when nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.completions == 0 && self.tokens == 0 && self.threads == 0
    }
}

/// Why a thread runs no completion until a person writes to it (or, for a child, its parent),
/// or, at its conversation's budget, until a person raises the budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Suspension {
    /// The limit it reached, in words.
    pub reason: String,
    /// When.
    #[schemars(with = "crate::schema::Rfc3339")]
    pub since: Timestamp,
    /// True when the limit is the conversation's lifetime budget: a message does not lift it,
    /// raising the budget does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budget: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_start_afresh_each_hour() {
        let at = |s: &str| s.parse::<Timestamp>().unwrap();
        let mut usage = HourlyUsage::default();
        usage.roll(at("2026-03-07T17:10:00Z"));
        usage.completions = 5;
        usage.roll(at("2026-03-07T17:59:59Z"));
        assert_eq!(usage.completions, 5);
        usage.roll(at("2026-03-07T18:00:00Z"));
        assert_eq!(usage.completions, 0);
        assert_eq!(usage.hour, Some(at("2026-03-07T18:00:00Z")));
        // Counts of an earlier hour are not added to this one.
        let stale = HourlyUsage {
            hour: Some(at("2026-03-07T17:00:00Z")),
            completions: 9,
            ..HourlyUsage::default()
        };
        usage.add(&stale);
        assert_eq!(usage.completions, 0);
    }
}
