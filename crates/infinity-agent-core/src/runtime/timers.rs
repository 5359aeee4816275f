//! Tokio timers for the embedded runtime: one task drives every pending timer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use async_trait::async_trait;
use jiff::Timestamp;
use tokio::sync::Notify;

use super::clock::Clock;
use crate::host::{InputSender, SendError, Timers};
use crate::ids::InputId;
use crate::input::Input;

#[derive(Debug, Default)]
struct Wheel {
    due: BTreeMap<(Timestamp, InputId), Input>,
}

/// [`Timers`] on tokio: a sorted map of due inputs and one task that sleeps until the first.
/// Idle sleeping threads cost one map entry each and hold no task.
pub struct TokioTimers {
    clock: Clock,
    wheel: Mutex<Wheel>,
    /// Inputs taken off the wheel and not yet handed to the queue.
    delivering: std::sync::atomic::AtomicUsize,
    changed: Notify,
    target: OnceLock<Weak<dyn InputSender>>,
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
            delivering: std::sync::atomic::AtomicUsize::new(0),
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
    pub(crate) fn start(self: &Arc<Self>, target: Weak<dyn InputSender>) {
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

    /// True while due inputs are being handed to the queue.
    pub fn delivering(&self) -> bool {
        self.delivering.load(std::sync::atomic::Ordering::SeqCst) > 0
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
            let now = self.clock.now();
            let (ready, next) = {
                let mut wheel = self.lock();
                let mut ready = Vec::new();
                while let Some(first) = wheel.due.first_entry() {
                    if first.key().0 > now {
                        break;
                    }
                    ready.push(first.remove());
                }
                self.delivering
                    .fetch_add(ready.len(), std::sync::atomic::Ordering::SeqCst);
                (ready, wheel.due.keys().next().map(|(t, _)| *t))
            };
            if !ready.is_empty() {
                let Some(target) = self.target.get().and_then(Weak::upgrade) else {
                    return; // the runtime is gone
                };
                let ready: Vec<Input> = ready;
                for input in ready {
                    if let Err(err) = target
                        .send_to_input_queue(&input, &input.thread_id, &input.id)
                        .await
                    {
                        tracing::error!(%err, "timer could not deliver its input");
                    }
                    self.delivering
                        .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                }
                continue;
            }
            match next {
                Some(due) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(self.clock.instant_at(due)) => {}
                        _ = &mut changed => {}
                    }
                }
                None => changed.await,
            }
            if self.target.get().is_some_and(|t| t.strong_count() == 0) {
                return;
            }
        }
    }
}

#[async_trait]
impl Timers for TokioTimers {
    async fn schedule(&self, input: Input, due: Timestamp) -> Result<(), SendError> {
        self.lock().due.insert((due, input.id.clone()), input);
        self.changed.notify_waiters();
        Ok(())
    }
}
