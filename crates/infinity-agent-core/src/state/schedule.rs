//! Recurring schedules a thread keeps (the `schedule_*` tools): what each sends, its rule, and
//! its next occurrence.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// One recurring schedule of a thread. Each firing arms only the next occurrence (a timer, like
/// a sleep's); the rule is read again from these fields each time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Schedule {
    /// Its id (`sch-...`).
    pub id: String,
    /// What the thread receives at each occurrence.
    pub message: String,
    /// An RFC 5545 RRULE, or else `cron`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rrule: Option<String>,
    /// A five-field cron expression, or else `rrule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// The IANA zone the rule is read in.
    pub timezone: String,
    /// The local start (`YYYY-MM-DDTHH:MM:SS` in `timezone`).
    #[schemars(with = "crate::schema::LocalDateTime")]
    pub start: jiff::civil::DateTime,
    /// No occurrence after this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<crate::schema::Rfc3339>")]
    pub until: Option<Timestamp>,
    /// At most this many firings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Firings so far.
    #[serde(default)]
    pub fired: u64,
    /// The occurrence armed now.
    #[schemars(with = "crate::schema::Rfc3339")]
    pub next: Timestamp,
}

impl Schedule {
    /// The id of the timer input of the occurrence armed now: derived from the schedule and
    /// the occurrence, so a host can find (and cancel) the timer it holds for it.
    pub fn next_input_id(&self) -> crate::ids::InputId {
        crate::ids::InputId::derived(&self.id, &self.next.as_second().to_string())
    }
}
