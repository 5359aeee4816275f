//! What the slice counted: the completions the model's turn ran (in this slice, and in the
//! earlier slices of the same turn), and what a child or a delegation owes its conversation's
//! root for the hour and for the conversation's lifetime totals.

use jiff::Timestamp;

use crate::model::Usage;
use crate::state::HourlyUsage;

/// What the slice counted.
#[derive(Debug, Default)]
pub(in crate::engine) struct Accounting {
    /// Completions this slice ran.
    completions: u32,
    /// Completions the turn ran in earlier slices, handed over by a `continue` input (they
    /// count against `limits.max_completions_per_slice` too); a new message starts a turn
    /// afresh.
    carried: u32,
    /// For a child: what this slice counted against the conversation's hour, sent to the root
    /// with the commit.
    hour_to_report: HourlyUsage,
    /// What this slice spent, for the conversation's lifetime totals: a child's goes to its
    /// root, a delegation's root's (and its tree's) to the conversation it works for.
    total_to_report: Usage,
}

impl Accounting {
    /// Counts a completion this slice ran.
    pub(in crate::engine) fn completed(&mut self) {
        self.completions += 1;
    }

    /// The completions this slice ran.
    pub(in crate::engine) fn completions(&self) -> u32 {
        self.completions
    }

    /// The completions the turn ran: in this slice, and in the earlier ones it carried on from.
    pub(in crate::engine) fn turn_completions(&self) -> u32 {
        self.completions + self.carried
    }

    /// The turn carries on from a slice that handed off after `completions`.
    pub(in crate::engine) fn carry(&mut self, completions: u32) {
        self.carried = self.carried.max(completions);
    }

    /// A new turn starts: the completions of earlier slices count no more.
    pub(in crate::engine) fn new_turn(&mut self) {
        self.carried = 0;
    }

    /// Counts `used` against the conversation's hour, to report to the root.
    pub(in crate::engine) fn report_hour(&mut self, used: &HourlyUsage, now: Timestamp) {
        self.hour_to_report.roll(now);
        self.hour_to_report.add(used);
    }

    /// Adds `usage` to what goes to the conversation's lifetime totals.
    pub(in crate::engine) fn report_total(&mut self, usage: &Usage) {
        self.total_to_report.add(usage);
    }

    /// What this slice counted against the conversation's hour so far, to report.
    pub(in crate::engine) fn hour_reported(&self) -> &HourlyUsage {
        &self.hour_to_report
    }

    /// What this slice spent so far, to report.
    pub(in crate::engine) fn total_reported(&self) -> &Usage {
        &self.total_to_report
    }

    /// What to report, taken: the hour's counts and the spending.
    pub(in crate::engine) fn take_reports(&mut self) -> (HourlyUsage, Usage) {
        (
            std::mem::take(&mut self.hour_to_report),
            std::mem::take(&mut self.total_to_report),
        )
    }
}
