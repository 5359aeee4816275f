//! A thread's recurring schedules as inputs: an occurrence, and a person's new schedule.

use crate::history::Item;

use super::draft::Draft;
use super::inputs::DropReason;

type Applied = Result<(), DropReason>;

impl Draft<'_> {
    /// An occurrence of a recurring schedule: the thread receives its message (marked late when
    /// the host was down at the time), and only the next occurrence is armed: occurrences
    /// missed meanwhile are skipped, never fired in a burst.
    pub(super) fn schedule(&mut self, schedule_id: String, at: jiff::Timestamp) -> Applied {
        use crate::tools::builtin::schedule::{arm, show, upcoming};
        let Some(index) = self
            .record
            .schedules
            .iter()
            .position(|s| s.id == schedule_id)
        else {
            return Err(DropReason::NoSchedule(schedule_id));
        };
        if self.record.schedules[index].next != at {
            return Err(DropReason::StaleOccurrence(schedule_id));
        }
        let late = self.now.duration_since(at) > jiff::SignedDuration::from_secs(60);
        let schedule = &mut self.record.schedules[index];
        schedule.fired += 1;
        let mut text = format!(
            "[Scheduled message, schedule {} at {}",
            schedule.id,
            show(at, &schedule.timezone)
        );
        if late {
            text.push_str(&format!(
                "; late: delivered at {} (occurrences missed meanwhile are skipped)",
                show(self.now, &schedule.timezone)
            ));
        }
        text.push_str(&format!("] {}", schedule.message));
        let after = if self.now > at { self.now } else { at };
        let next = upcoming(schedule, after, 1).first().copied();
        let ended = match next {
            Some(next) => {
                schedule.next = next;
                let effect = arm(&self.record, &self.record.schedules[index]);
                self.outbox.push(effect);
                None
            }
            None => Some(self.record.schedules.remove(index).id),
        };
        let mut items = vec![Item::user(text)];
        if let Some(id) = ended {
            items.push(Item::Notice {
                text: format!("Schedule {id} has no further occurrence and was removed."),
                is_error: false,
            });
        }
        self.actionable(items);
        Ok(())
    }

    /// A person creates a schedule: checked again here (the thread may have changed since the
    /// request was checked); one that is no longer valid is dropped with the reason logged.
    pub(super) fn schedule_create(
        &mut self,
        schedule_id: String,
        args: serde_json::Value,
    ) -> Applied {
        let created = crate::tools::create_schedule(
            &mut self.record,
            self.now,
            self.ids,
            self.outbox.effects_mut(),
            &args,
            Some(schedule_id.clone()),
        );
        match created {
            Ok(text) => {
                self.append(Item::Notice {
                    text: format!("A person created a schedule. {text}"),
                    is_error: false,
                });
                Ok(())
            }
            Err(why) => Err(DropReason::BadSchedule(schedule_id, why)),
        }
    }
}
