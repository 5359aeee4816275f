//! Wake filters: a subscription's `wake_if` keeps events that do not match from the model; they
//! are counted on the subscription and summarized at its next completion.

use crate::history::{model_time, Item};
use crate::state::Subscription;

use super::draft::Draft;

impl Draft<'_> {
    /// True when an event of subscription `index` wakes the thread: it has no `wake_if`, or the
    /// event matches it. One that does not is folded into the subscription's count (the model
    /// hears of it at its next completion) and costs no completion.
    pub(super) fn wakes(&mut self, index: usize, text: &str) -> bool {
        let now = self.now;
        let sub = &mut self.record.subscriptions[index];
        let Some(expr) = &sub.wake_if else {
            return true;
        };
        match crate::tools::wake_if::WakeIf::parse(expr) {
            Ok(filter) if !filter.matches(text) => {}
            // Checked when the call was made; a record from elsewhere that no longer parses
            // filters nothing.
            _ => return true,
        }
        let last: String = text.chars().take(300).collect();
        match &mut sub.filtered {
            Some(f) => {
                f.count += 1;
                f.last = last;
            }
            None => {
                sub.filtered = Some(crate::state::Filtered {
                    count: 1,
                    since: now,
                    last,
                })
            }
        }
        tracing::debug!(thread = %self.record.id, call = %sub.call_id, "event did not match wake_if");
        false
    }

    /// Before a completion: a notice for each subscription whose `wake_if` kept events from
    /// the model since it last heard, and the counts start again.
    pub(super) fn summarize_filtered(&mut self) {
        let mut notices = Vec::new();
        for sub in &mut self.record.subscriptions {
            let Some(f) = sub.filtered.take() else {
                continue;
            };
            notices.push(filtered_notice(sub, &f));
        }
        for text in notices {
            self.append(Item::Notice {
                text,
                is_error: false,
            });
        }
    }
}

/// What the model reads of the events a subscription's `wake_if` kept from it.
pub(super) fn filtered_notice(sub: &Subscription, f: &crate::state::Filtered) -> String {
    format!(
        "{} event(s) of the subscription {} ({}) did not match wake_if `{}` since {} and did not wake you. The newest: {}",
        f.count,
        sub.call_id,
        sub.tool,
        sub.wake_if.as_deref().unwrap_or_default(),
        model_time(f.since),
        f.last
    )
}
