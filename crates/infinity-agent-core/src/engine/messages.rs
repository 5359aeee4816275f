//! People's and parents' messages: answered now, or, when a person's message finds the thread
//! busy, queued, preceded by an interruption or refused, as its policy says
//! ([`WhileBusy`]).

use crate::effect::OutputKind;
use crate::history::{Item, MessageSource};
use crate::ids::InputId;
use crate::state::{Deferred, WhileBusy};

use super::draft::Draft;
use super::inputs::{Applied, DropReason};

impl Draft<'_> {
    pub(super) fn user_message(&mut self, text: String, while_busy: Option<WhileBusy>) -> Applied {
        if crate::text::is_blank(&text) {
            self.notice_error(
                "A message with no text (empty, or only whitespace) was not passed on to the \
                 model."
                    .to_owned(),
            );
            return Err(DropReason::EmptyMessage);
        }
        let policy = while_busy.unwrap_or(self.equipment.agent().while_busy);
        if self.record.is_busy() {
            match policy {
                WhileBusy::MoveOn => {}
                WhileBusy::Queue => {
                    // Kept, and answered once the turn ends (see `Draft::next`).
                    let input_id = self
                        .intake
                        .current()
                        .cloned()
                        .unwrap_or_else(|| InputId::derived(self.record.id.as_str(), "queued"));
                    self.record.queued.push(Deferred {
                        input_id,
                        items: vec![Item::user(text)],
                    });
                    self.lift_suspension(true);
                    return Ok(());
                }
                WhileBusy::Interrupt => {
                    // As `POST .../interrupt` would (an `interrupted` event, the calls
                    // cancelled), then the message.
                    self.interrupt(false)?;
                }
                WhileBusy::Reject => {
                    // Shown to people, not to the model: its turn goes on as if nothing came.
                    let text = format!(
                        "A message arrived while the thread was busy (a call it made has no \
                         result yet) and was refused (while_busy: reject): \"{}\". Send it \
                         again once the thread is done, or with another policy.",
                        text.chars().take(200).collect::<String>()
                    );
                    self.output(OutputKind::Error { text });
                    return Err(DropReason::Busy);
                }
            }
        }
        self.accounting.new_turn();
        self.actionable(vec![Item::user(text)]);
        self.lift_suspension(true);
        Ok(())
    }

    pub(super) fn message_from_parent(&mut self, text: String) -> Applied {
        let Some(parent) = self.record.parent.as_ref().map(|p| p.thread_id.clone()) else {
            return Err(DropReason::NoParent);
        };
        if crate::text::is_blank(&text) {
            return Err(DropReason::EmptyMessage);
        }
        self.actionable(vec![Item::Message {
            text,
            from: MessageSource::Parent { thread_id: parent },
        }]);
        self.lift_suspension(false);
        Ok(())
    }
}
