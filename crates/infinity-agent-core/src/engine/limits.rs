//! The limits that hold across slices: per thread and per conversation, completions and tokens
//! in the current hour, and threads a conversation starts. A thread that reaches a completion or
//! token limit is suspended: the error is recorded for the user (and reported to a child's
//! parent), inputs go on being recorded, and no completion runs until a person writes to it (or
//! its parent does), which starts its hour afresh.

use crate::effect::Effect;
use crate::ids::InputId;
use crate::input::{Input, InputBody};
use crate::state::{HourlyUsage, Suspension};

use super::timeline::Draft;

impl Draft<'_> {
    /// The conversation's usage this hour as this slice sees it: the root's own, or for a child
    /// the root's as the slice began plus what the slice counted.
    fn conversation_seen(&self) -> HourlyUsage {
        let mut seen = self.conversation.hourly;
        seen.add(&self.usage_to_report);
        seen
    }

    /// Counts a completion against the thread's and the conversation's hour.
    pub(super) fn count_completion(&mut self, tokens: u64) {
        let used = HourlyUsage {
            hour: Some(HourlyUsage::hour_of(self.now)),
            completions: 1,
            tokens,
            threads: 0,
        };
        self.count(used);
    }

    /// Counts threads started (children, event threads, delegations) against the conversation.
    pub(super) fn count_threads(&mut self, threads: u32) {
        if threads == 0 {
            return;
        }
        let used = HourlyUsage {
            hour: Some(HourlyUsage::hour_of(self.now)),
            threads,
            ..HourlyUsage::default()
        };
        self.count(used);
    }

    fn count(&mut self, used: HourlyUsage) {
        self.record.hourly.roll(self.now);
        self.record.hourly.add(&used);
        if self.record.is_root() {
            self.conversation.hourly.roll(self.now);
            self.conversation.hourly.add(&used);
        } else {
            self.usage_to_report.roll(self.now);
            self.usage_to_report.add(&used);
        }
    }

    /// How many more threads the conversation may start this hour.
    pub(super) fn threads_left(&self) -> u32 {
        let mut seen = self.conversation_seen();
        seen.roll(self.now);
        self.agent
            .limits
            .conversation_threads_per_hour
            .saturating_sub(seen.threads)
    }

    /// True when the thread may not run a completion now: it is suspended, or it just reached
    /// an hourly limit (then it is suspended here, and says so).
    pub(super) fn held_by_limits(&mut self) -> bool {
        if self.record.suspended.is_some() {
            return true;
        }
        let limits = self.agent.limits;
        let mut own = self.record.hourly;
        own.roll(self.now);
        let mut all = self.conversation_seen();
        all.roll(self.now);
        let reason = if own.completions >= limits.completions_per_hour {
            format!(
                "this thread ran {} completions this hour (limits.completions_per_hour)",
                own.completions
            )
        } else if own.tokens >= limits.tokens_per_hour {
            format!(
                "this thread used {} tokens this hour (limits.tokens_per_hour)",
                own.tokens
            )
        } else if all.completions >= limits.conversation_completions_per_hour {
            format!(
                "this conversation's threads ran {} completions this hour \
                 (limits.conversation_completions_per_hour)",
                all.completions
            )
        } else if all.tokens >= limits.conversation_tokens_per_hour {
            format!(
                "this conversation's threads used {} tokens this hour \
                 (limits.conversation_tokens_per_hour)",
                all.tokens
            )
        } else {
            return false;
        };
        self.suspend(reason);
        true
    }

    fn suspend(&mut self, reason: String) {
        let resume = if self.record.is_root() {
            "a person writes to it"
        } else {
            "a person or its parent writes to it"
        };
        self.notice_error(format!(
            "Stopped: {reason}. It runs no completion until {resume}; what arrives meanwhile is \
             kept."
        ));
        if let Some(parent) = self.record.parent.clone() {
            let base = match self.processed.first() {
                Some(input) => format!("{}-{input}", self.record.id),
                None => self.record.id.to_string(),
            };
            self.effects.push(Effect::Send {
                input: Input {
                    id: InputId::derived(&base, "suspended"),
                    thread_id: parent.thread_id,
                    body: InputBody::ChildReport {
                        child_id: self.record.id.clone(),
                        call_id: parent.call_id,
                        report: format!("[stopped by a limit] {reason}"),
                        closed: false,
                    },
                },
            });
        }
        self.record.suspended = Some(Suspension {
            reason,
            since: self.now,
        });
    }

    /// A person (`by_person`) or the parent wrote: a suspended thread runs again, with a fresh
    /// hour of its own (and, when a person writes to the root, of its conversation).
    pub(super) fn lift_suspension(&mut self, by_person: bool) {
        if self.record.suspended.take().is_none() {
            return;
        }
        let fresh = HourlyUsage {
            hour: Some(HourlyUsage::hour_of(self.now)),
            ..HourlyUsage::default()
        };
        self.record.hourly = fresh;
        if by_person && self.record.is_root() {
            self.conversation.hourly = fresh;
        }
        tracing::info!(thread = %self.record.id, "suspension lifted");
    }

    /// A child's counts this slice go to its conversation's root.
    pub(super) fn report_usage_to_root(&mut self) {
        if self.record.is_root() || self.usage_to_report.is_empty() {
            return;
        }
        let base = match self.processed.first() {
            Some(input) => format!("{}-{input}", self.record.id),
            None => self.record.id.to_string(),
        };
        let usage = std::mem::take(&mut self.usage_to_report);
        self.effects.push(Effect::Send {
            input: Input {
                id: InputId::derived(&base, "usage"),
                thread_id: self.record.root().clone(),
                body: InputBody::ConversationUsage { usage },
            },
        });
    }
}
