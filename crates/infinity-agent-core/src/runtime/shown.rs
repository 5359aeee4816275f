//! The embedded runtime's live output: every subscriber's channel, and what the slices running
//! now have shown but not committed yet, so that a client attaching mid-slice sees the same as
//! one that was there ([`Following`]). A slice that fails withdraws what it showed
//! ([`OutputKind::Withdrawn`]); one that commits says so ([`Live::Committed`]), so a follower
//! knows which numbers it was shown may still change (a process killed before the commit runs
//! the slice again, and its events may come out otherwise under the same numbers).

use std::collections::HashMap;

use tokio::sync::mpsc;

use crate::effect::{OutputEvent, OutputKind};
use crate::ids::ThreadId;

/// A thread's output from now on, with what its running slice showed before (see
/// [`crate::runtime::Front::follow`]).
#[derive(Debug)]
pub struct Following {
    /// Every thread's output from now on (filter by thread).
    pub live: mpsc::UnboundedReceiver<Live>,
    /// The numbered events the thread's running slice has shown and not committed yet, oldest
    /// first (the store has the committed ones).
    pub shown: Vec<OutputEvent>,
    /// The text of the reply the model is streaming now, so far (empty when none is).
    pub partial: String,
}

/// What a follower is handed, as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum Live {
    /// An event a running slice showed: a numbered one is not committed yet (its slice may
    /// still withdraw it, or die, and its number be given again).
    Shown(OutputEvent),
    /// An event that was committed before it was shown (a stack's, or one a slice shows after
    /// its commit): its number holds.
    Kept(OutputEvent),
    /// The thread's running slice committed every event it showed.
    Committed(ThreadId),
}

impl Live {
    /// The thread it is about.
    pub fn thread_id(&self) -> &ThreadId {
        match self {
            Live::Shown(event) | Live::Kept(event) => &event.thread_id,
            Live::Committed(thread_id) => thread_id,
        }
    }
}

/// What one thread's running slice has shown.
#[derive(Debug, Default)]
struct Shown {
    events: Vec<OutputEvent>,
    partial: String,
}

/// The subscribers and the running slices' output, under one lock: a subscriber gets each
/// event either in its snapshot or on its channel, never both and never neither.
#[derive(Debug, Default)]
pub(super) struct Outlet {
    senders: Vec<mpsc::UnboundedSender<OutputEvent>>,
    followers: Vec<mpsc::UnboundedSender<Live>>,
    shown: HashMap<ThreadId, Shown>,
}

impl Outlet {
    /// Every event from now on.
    pub(super) fn subscribe(&mut self) -> mpsc::UnboundedReceiver<OutputEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.senders.push(tx);
        rx
    }

    /// Everything from now on, and what `thread_id`'s running slice showed before.
    pub(super) fn follow(&mut self, thread_id: &ThreadId) -> Following {
        let (tx, live) = mpsc::unbounded_channel();
        self.followers.push(tx);
        let (shown, partial) = self
            .shown
            .get(thread_id)
            .map(|s| (s.events.clone(), s.partial.clone()))
            .unwrap_or_default();
        Following {
            live,
            shown,
            partial,
        }
    }

    /// Hands `event` to every subscriber and notes it as its thread's running slice's.
    pub(super) fn publish(&mut self, event: OutputEvent) {
        match &event.kind {
            OutputKind::AssistantDelta { text } => self
                .shown
                .entry(event.thread_id.clone())
                .or_default()
                .partial
                .push_str(text),
            OutputKind::AssistantRestarted {} => {
                if let Some(shown) = self.shown.get_mut(&event.thread_id) {
                    shown.partial.clear();
                }
            }
            _ if event.seq.is_some() => {
                let shown = self.shown.entry(event.thread_id.clone()).or_default();
                // A streamed reply ends in its whole text, numbered.
                shown.partial.clear();
                shown.events.push(event.clone());
            }
            _ => {}
        }
        self.hand_out(event, Live::Shown);
    }

    /// Hands a committed event to every subscriber (one shown after its slice's commit: the
    /// store has it, so it is not noted as the running slice's).
    pub(super) fn publish_committed(&mut self, event: OutputEvent) {
        self.hand_out(event, Live::Kept);
    }

    fn hand_out(&mut self, event: OutputEvent, live: fn(OutputEvent) -> Live) {
        self.followers
            .retain(|tx| tx.send(live(event.clone())).is_ok());
        self.senders.retain(|tx| tx.send(event.clone()).is_ok());
    }

    /// The thread's slice ended: what it showed is committed (`committed`), or was not and is
    /// withdrawn. Returns the withdrawal to publish, if any.
    pub(super) fn slice_ended(
        &mut self,
        thread_id: &ThreadId,
        committed: bool,
        at: jiff::Timestamp,
    ) -> Option<OutputEvent> {
        let shown = self.shown.remove(thread_id)?;
        if committed {
            if shown.events.is_empty() {
                return None;
            }
            self.followers
                .retain(|tx| tx.send(Live::Committed(thread_id.clone())).is_ok());
            return None;
        }
        let first = shown.events.first()?.seq?;
        Some(OutputEvent {
            seq: None,
            ..OutputEvent::new(
                thread_id.clone(),
                at,
                OutputKind::Withdrawn { after: first - 1 },
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(thread: &str, seq: Option<u64>, kind: OutputKind) -> OutputEvent {
        OutputEvent {
            seq,
            ..OutputEvent::new(
                ThreadId::new(thread).unwrap(),
                jiff::Timestamp::UNIX_EPOCH,
                kind,
            )
        }
    }

    fn text(t: &str) -> OutputKind {
        OutputKind::AssistantText { text: t.into() }
    }

    fn delta(t: &str) -> OutputKind {
        OutputKind::AssistantDelta { text: t.into() }
    }

    #[test]
    fn a_follower_gets_each_event_once_in_its_snapshot_or_on_its_channel() {
        let mut outlet = Outlet::default();
        let t = ThreadId::new("t").unwrap();
        outlet.publish(event(
            "t",
            Some(4),
            OutputKind::UserMessage { text: "hi".into() },
        ));
        outlet.publish(event("t", None, delta("Hel")));
        outlet.publish(event("other", Some(9), text("elsewhere")));
        outlet.publish(event("t", None, delta("lo")));
        let mut following = outlet.follow(&t);
        assert_eq!(
            following.shown.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [Some(4)]
        );
        assert_eq!(following.partial, "Hello");
        outlet.publish(event("t", None, delta("!")));
        outlet.publish(event("t", Some(5), text("Hello!")));
        let got: Vec<_> = std::iter::from_fn(|| following.live.try_recv().ok()).collect();
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got.iter().all(|l| matches!(l, Live::Shown(_))), "{got:?}");
        // The whole text ends the streamed reply: a later follower sees no partial.
        let later = outlet.follow(&t);
        assert_eq!(later.partial, "");
        assert_eq!(later.shown.len(), 2);
    }

    #[test]
    fn a_restart_drops_the_partial_reply() {
        let mut outlet = Outlet::default();
        let t = ThreadId::new("t").unwrap();
        outlet.publish(event("t", None, delta("Hel")));
        outlet.publish(event("t", None, OutputKind::AssistantRestarted {}));
        outlet.publish(event("t", None, delta("Bye")));
        assert_eq!(outlet.follow(&t).partial, "Bye");
    }

    #[test]
    fn a_failed_slice_withdraws_what_it_showed_and_a_committed_one_does_not() {
        let mut outlet = Outlet::default();
        let t = ThreadId::new("t").unwrap();
        let at = jiff::Timestamp::UNIX_EPOCH;
        outlet.publish(event("t", Some(6), text("a")));
        outlet.publish(event("t", Some(7), text("b")));
        let withdrawn = outlet.slice_ended(&t, false, at).expect("a withdrawal");
        assert_eq!(withdrawn.kind, OutputKind::Withdrawn { after: 5 });
        assert!(outlet.follow(&t).shown.is_empty(), "forgotten");
        let mut following = outlet.follow(&t);
        outlet.publish(event("t", Some(6), text("a again")));
        assert_eq!(outlet.slice_ended(&t, true, at), None);
        let got: Vec<_> = std::iter::from_fn(|| following.live.try_recv().ok()).collect();
        assert_eq!(
            got.last(),
            Some(&Live::Committed(t.clone())),
            "a follower is told the numbers it was shown hold: {got:?}"
        );
        assert!(
            outlet.follow(&t).shown.is_empty(),
            "committed: the store has it"
        );
        // A slice that showed nothing numbered has nothing to withdraw.
        outlet.publish(event("t", None, delta("x")));
        assert_eq!(outlet.slice_ended(&t, false, at), None);
    }
}
