//! What the slice hands on: the effects its commit puts in the thread's outbox, and, with live
//! output, the events shown as they happen. Output events are numbered on the record here and
//! nowhere else: shown live in the order they happened, or with the commit.

use crate::effect::{Effect, OutputEvent, PendingEffect};
use crate::ids::IdSource;
use crate::state::ThreadRecord;

/// The effects the slice made and the events it shows.
pub(in crate::engine) struct Outbox {
    effects: Vec<Effect>,
    /// True: output events are handed out as they happen; false: they stay effects, performed
    /// after the commit.
    live: bool,
    /// Live output events waiting to be handed out.
    outputs: Vec<OutputEvent>,
    /// The live output events shown so far, numbered, for the commit to keep.
    shown: Vec<OutputEvent>,
}

impl Outbox {
    /// An empty outbox; `live`: output events are handed out as they happen.
    pub(in crate::engine) fn new(live: bool) -> Self {
        Self {
            effects: Vec::new(),
            live,
            outputs: Vec::new(),
            shown: Vec::new(),
        }
    }

    /// Adds an effect (an output event is shown live at the next [`Outbox::flush_live`]).
    pub(in crate::engine) fn push(&mut self, effect: Effect) {
        self.effects.push(effect);
    }

    /// The effects so far, in order.
    pub(in crate::engine) fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// The effects, for a tool or a helper that adds its own (what it adds is shown at the next
    /// [`Outbox::flush_live`], like anything pushed).
    pub(in crate::engine) fn effects_mut(&mut self) -> &mut Vec<Effect> {
        &mut self.effects
    }

    /// Takes back the first effect that `is` picks, if any.
    pub(in crate::engine) fn take_first(&mut self, is: impl Fn(&Effect) -> bool) -> Option<Effect> {
        let at = self.effects.iter().position(is)?;
        Some(self.effects.remove(at))
    }

    /// With live output, moves the output effects produced so far to the events handed out at
    /// once, numbered on `record` (events that await an answer stay effects).
    pub(in crate::engine) fn flush_live(&mut self, record: &mut ThreadRecord) {
        if !self.live
            || !self
                .effects
                .iter()
                .any(|e| matches!(e, Effect::Output { .. }))
        {
            return;
        }
        let mut kept = Vec::with_capacity(self.effects.len());
        for effect in std::mem::take(&mut self.effects) {
            match effect {
                // Shown after the commit, like a host without live output shows every event.
                Effect::Output { event } if event.kind.awaits_answer() => {
                    kept.push(Effect::Output { event });
                }
                Effect::Output { mut event } => {
                    crate::commit::number(record, &mut event);
                    self.shown.push(event.clone());
                    self.outputs.push(event);
                }
                other => kept.push(other),
            }
        }
        self.effects = kept;
    }

    /// The live output events waiting to be handed out.
    pub(in crate::engine) fn take_live(&mut self) -> Vec<OutputEvent> {
        std::mem::take(&mut self.outputs)
    }

    /// What the commit keeps: the effects, each with its outbox id from `ids`, and the output
    /// events (those shown live, then the rest, numbered on `record` now).
    pub(in crate::engine) fn into_commit(
        mut self,
        record: &mut ThreadRecord,
        ids: &mut dyn IdSource,
    ) -> (Vec<PendingEffect>, Vec<OutputEvent>) {
        let mut events = self.shown;
        events.extend(crate::commit::number_outputs(record, &mut self.effects));
        (crate::engine::with_ids(self.effects, ids), events)
    }
}
