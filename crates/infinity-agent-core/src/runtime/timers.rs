//! Tokio timers for the embedded runtime: one task drives every pending timer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use async_trait::async_trait;
use jiff::Timestamp;
use tokio::sync::Notify;

use serde::{Deserialize, Serialize};

use super::clock::Clock;
use crate::host::{SendError, Timers};
use crate::ids::{EffectId, InputId, ThreadId};
use crate::input::Input;

/// Where due inputs go: the runtime's queues. Called with the timer wheel locked, so an input is
/// always either on the wheel or in a queue, never between (see [`TokioTimers::idle_snapshot`]).
pub(crate) trait Deliver: Send + Sync {
    /// Puts `input` on its thread's queue; `ack`: the outbox effect (thread, effect) to mark
    /// done once the receiver handled it.
    fn deliver(&self, input: Input, ack: Option<(ThreadId, EffectId)>);
}

/// A pending timer as the wheel keeps it: its input and the effect that armed it, serialized.
/// An idle sleeping thread costs this entry and nothing else in memory, so it is kept small:
/// ~200 bytes of JSON where the structures would take three times that (an `Input` is 264 bytes
/// before its strings, and map nodes hold their values inline).
#[derive(Serialize, Deserialize)]
struct Pending {
    input: Input,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ack: Option<(ThreadId, EffectId)>,
}

#[derive(Debug, Default)]
struct Wheel {
    due: BTreeMap<(Timestamp, InputId), Box<[u8]>>,
}

/// [`Timers`] on tokio: a sorted map of due inputs and one task that sleeps until the first.
/// Idle sleeping threads cost one map entry each and hold no task.
pub struct TokioTimers {
    clock: Clock,
    wheel: Mutex<Wheel>,
    changed: Notify,
    target: OnceLock<Weak<dyn Deliver>>,
}

impl std::fmt::Debug for TokioTimers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokioTimers")
            .field("pending", &self.lock().due.len())
            .finish()
    }
}

impl TokioTimers {
    pub(crate) fn new(clock: Clock) -> Arc<Self> {
        Arc::new(Self {
            clock,
            wheel: Mutex::new(Wheel::default()),
            changed: Notify::new(),
            target: OnceLock::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Wheel> {
        self.wheel
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts the driver task; due inputs go to `target`.
    pub(crate) fn start(self: &Arc<Self>, target: Weak<dyn Deliver>) {
        if self.target.set(target).is_err() {
            return;
        }
        let timers = Arc::clone(self);
        tokio::spawn(async move { timers.drive().await });
    }

    /// The earliest pending due time.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.lock().due.keys().next().map(|(t, _)| *t)
    }

    /// `busy()` (read with the wheel locked) and the earliest pending due time. Due inputs move
    /// from the wheel to the queues under the same lock, so the two readings agree: work is never
    /// missed in transit.
    pub(crate) fn idle_snapshot<T>(&self, busy: impl FnOnce() -> T) -> (T, Option<Timestamp>) {
        let wheel = self.lock();
        (busy(), wheel.due.keys().next().map(|(t, _)| *t))
    }

    /// How many timers are pending.
    pub fn pending(&self) -> usize {
        self.lock().due.len()
    }

    async fn drive(self: Arc<Self>) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let Some(target) = self.target.get().and_then(Weak::upgrade) else {
                return; // the runtime is gone
            };
            let now = self.clock.now();
            let next = {
                let mut wheel = self.lock();
                while let Some(first) = wheel.due.first_entry() {
                    if first.key().0 > now {
                        break;
                    }
                    let ((_, id), bytes) = first.remove_entry();
                    match serde_json::from_slice::<Pending>(&bytes) {
                        Ok(pending) => target.deliver(pending.input, pending.ack),
                        // It was serialized here; this cannot happen short of memory corruption.
                        Err(err) => {
                            tracing::error!(input = %id, %err, "a timer's input could not be read back; dropped")
                        }
                    }
                }
                wheel.due.keys().next().map(|(t, _)| *t)
            };
            drop(target);
            match next {
                Some(due) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(self.clock.instant_at(due)) => {}
                        _ = &mut changed => {}
                    }
                }
                None => changed.await,
            }
        }
    }
}

impl TokioTimers {
    /// Arms a timer that delivers `input` at `due` and then has `ack` marked done once the
    /// receiver handled the input.
    pub(crate) fn schedule_acked(
        &self,
        input: Input,
        due: Timestamp,
        ack: Option<(ThreadId, EffectId)>,
    ) -> Result<(), SendError> {
        let key = (due, input.id.clone());
        let thread_id = input.thread_id.clone();
        let bytes = serde_json::to_vec(&Pending { input, ack }).map_err(|e| SendError {
            input_id: key.1.clone(),
            thread_id,
            reason: format!("the timer's input could not be kept: {e}"),
        })?;
        self.lock().due.insert(key, bytes.into_boxed_slice());
        self.changed.notify_waiters();
        Ok(())
    }
}

#[async_trait]
impl Timers for TokioTimers {
    async fn schedule(&self, input: Input, due: Timestamp) -> Result<(), SendError> {
        self.schedule_acked(input, due, None)
    }
}
