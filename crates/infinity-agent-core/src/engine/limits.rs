//! The limits that hold across slices: per thread and per conversation, completions and tokens
//! in the current hour, and threads a conversation starts. A thread that reaches a completion or
//! token limit is suspended: the error is recorded for the user (and reported to a child's
//! parent), inputs go on being recorded, and no completion runs until a person writes to it (or
//! its parent does), which starts its hour afresh.
//!
//! And the conversation's lifetime totals: every completion is priced at its model's prices
//! and added to the thread's usage and its conversation's (children and delegations report
//! theirs to the root), and a conversation that reached its budget stops the same way, until a
//! person raises the budget.

use crate::cost::{Budget, Usd};
use crate::effect::Effect;
use crate::history::Item;
use crate::ids::InputId;
use crate::input::{Input, InputBody};
use crate::model::Usage;
use crate::state::{HourlyUsage, Suspension};

use super::draft::Draft;

impl Draft<'_> {
    /// The conversation's usage this hour as this slice sees it: the root's own, or for a child
    /// the root's as the slice began plus what the slice counted.
    fn conversation_seen(&self) -> HourlyUsage {
        let mut seen = self.conversation.hourly;
        seen.add(self.accounting.hour_reported());
        seen
    }

    /// Records a completion's usage: priced at the slice's model's prices, added to the
    /// thread's totals and its conversation's (a child's and a delegation's go to their
    /// conversation's root with the commit), and counted against the hour.
    pub(super) fn spend(&mut self, usage: Usage) {
        let usage = usage.priced(self.equipment.model().prices().as_ref());
        self.record.usage.add(&usage);
        if self.record.is_root() {
            self.conversation.total.add(&usage);
        }
        if !self.record.is_root() || self.record.delegated_by.is_some() {
            self.accounting.report_total(&usage);
        }
        self.count_completion(usage.tokens());
    }

    /// A child's (or a delegation's) report of what it used, at the conversation's root.
    pub(super) fn add_reported(&mut self, hourly: &HourlyUsage, total: &Usage) {
        self.conversation.hourly.roll(self.now);
        self.conversation.hourly.add(hourly);
        self.conversation.total.add(total);
        // A delegation's root passes on what its tree used to the conversation it works for.
        if self.record.delegated_by.is_some() {
            self.accounting.report_total(total);
        }
    }

    /// Counts a completion against the thread's and the conversation's hour.
    fn count_completion(&mut self, tokens: u64) {
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
            self.accounting.report_hour(&used, self.now);
        }
    }

    /// How many more threads the conversation may start this hour.
    pub(super) fn threads_left(&self) -> u32 {
        let mut seen = self.conversation_seen();
        seen.roll(self.now);
        self.equipment
            .agent()
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
        let limits = self.equipment.agent().limits;
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
        } else if let Some(reason) = self.budget_reached() {
            self.suspend(reason, true);
            return true;
        } else {
            return false;
        };
        self.suspend(reason, false);
        true
    }

    /// What the conversation's threads used and cost over its life, as this slice sees it: the
    /// root's totals, or for a child the root's as the slice began plus what the slice spent.
    fn conversation_total(&self) -> Usage {
        let mut total = self.conversation.total;
        if !self.record.is_root() {
            total.add(self.accounting.total_reported());
        }
        total
    }

    /// The conversation's lifetime budget: a person's, over the agent's limits.
    pub(super) fn budget(&self) -> Budget {
        self.conversation
            .budget_set
            .or(self.equipment.agent().limits.budget())
    }

    /// Why the conversation may run no more completions, when it reached its budget.
    fn budget_reached(&self) -> Option<String> {
        let budget = self.budget();
        let spent = self.conversation_total();
        let set = self.conversation.budget_set;
        let whose = |key: &str, by_person: bool| match by_person {
            true => "as a person set it".to_owned(),
            false => format!("limits.{key}"),
        };
        if let Some(usd) = budget.usd.filter(|usd| spent.cost >= *usd) {
            let unpriced = match spent.unpriced {
                0 => String::new(),
                n => format!(", besides {n} unpriced completion(s)"),
            };
            return Some(format!(
                "this conversation has spent {} of its {usd} budget{unpriced} ({})",
                spent.cost,
                whose("conversation_budget_usd", set.usd.is_some())
            ));
        }
        if let Some(tokens) = budget.tokens.filter(|tokens| spent.tokens() >= *tokens) {
            return Some(format!(
                "this conversation has used {} tokens of its budget of {tokens} ({})",
                spent.tokens(),
                whose("conversation_budget_tokens", set.tokens.is_some())
            ));
        }
        None
    }

    fn suspend(&mut self, reason: String, budget: bool) {
        let resume = match (budget, self.record.is_root()) {
            (true, _) => format!(
                "a person raises the budget of conversation {root} (the web app, `POST \
                 /threads/{root}/budget`, `infinity budget` on a stack, `infinity run \
                 --budget-usd`)",
                root = self.record.root()
            ),
            (false, true) => "a person writes to it".to_owned(),
            (false, false) => "a person or its parent writes to it".to_owned(),
        };
        self.notice_error(format!(
            "Stopped: {reason}. It runs no completion until {resume}; what arrives meanwhile is \
             kept."
        ));
        if let Some(parent) = self.record.parent.clone() {
            let base = self.intake.id_base(&self.record.id);
            self.outbox.push(Effect::Send {
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
            budget,
        });
    }

    /// A person (`by_person`) or the parent wrote: a suspended thread runs again, with a fresh
    /// hour of its own (and, when a person writes to the root, of its conversation).
    /// A thread stopped at its conversation's budget stays stopped, and says so.
    pub(super) fn lift_suspension(&mut self, by_person: bool) {
        if self.record.suspended.as_ref().is_some_and(|s| s.budget) {
            if let Some(reason) = self.budget_reached() {
                self.notice_error(format!(
                    "Still stopped: {reason}. It runs no completion until a person raises the \
                     budget; the message is kept."
                ));
                return;
            }
        }
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

    /// A child's counts this slice go to its conversation's root; a delegation's root passes
    /// on what its tree spent to the conversation that delegated to it.
    pub(super) fn report_usage_to_root(&mut self) {
        let to = match (&self.record.parent, &self.record.delegated_by) {
            (Some(_), _) => self.record.root().clone(),
            (None, Some(by)) => by.conversation.clone(),
            (None, None) => return,
        };
        let (usage, total) = self.accounting.take_reports();
        if usage.is_empty() && total == Usage::default() {
            return;
        }
        let base = self.intake.id_base(&self.record.id);
        self.outbox.push(Effect::Send {
            input: Input {
                id: InputId::derived(&base, "usage"),
                thread_id: to,
                body: InputBody::ConversationUsage { usage, total },
            },
        });
    }

    /// A person set the conversation's budget (at the root; what they left out stays). A
    /// thread stopped at the budget goes on once it is no longer reached, and passes the word
    /// to the open threads below it, which read the new budget from the root.
    pub(super) fn set_budget(&mut self, usd: Option<Usd>, tokens: Option<u64>) {
        if self.record.is_root() {
            let set = Budget { usd, tokens };
            self.conversation.budget_set = set.or(self.conversation.budget_set);
            let budget = self.budget();
            let spent = self.conversation_total();
            let mut parts = Vec::new();
            if let Some(usd) = budget.usd {
                parts.push(format!("{usd} (spent: {})", spent.cost));
            }
            if let Some(tokens) = budget.tokens {
                parts.push(format!("{tokens} tokens (used: {})", spent.tokens()));
            }
            let text = match parts.is_empty() {
                true => "The conversation has no budget.".to_owned(),
                false => format!("The conversation's budget is now {}.", parts.join(" and ")),
            };
            tracing::info!(thread = %self.record.id, %text, "budget set");
            self.append(Item::Notice {
                text,
                is_error: false,
            });
        }
        if self.record.suspended.as_ref().is_some_and(|s| s.budget)
            && self.budget_reached().is_none()
        {
            self.record.suspended = None;
            tracing::info!(thread = %self.record.id, "stopped at the budget; goes on");
        }
        let version = self.version_to_commit();
        let salt = format!("budget-{}-{version}", self.record.id);
        for child in self.record.children.iter().filter(|c| !c.closed) {
            self.outbox.push(Effect::Send {
                input: Input {
                    id: InputId::derived(child.thread_id.as_str(), &salt),
                    thread_id: child.thread_id.clone(),
                    body: InputBody::SetBudget { usd, tokens },
                },
            });
        }
    }
}
