//! The small traits a host implements to carry inputs: the input queue and timers.
//!
//! The embedded runtime implements both with tokio; the AWS host with SQS (FIFO input queue,
//! relay queue) and EventBridge Scheduler.

use async_trait::async_trait;
use jiff::Timestamp;

use crate::ids::{InputId, ThreadId};
use crate::input::Input;

/// Why an input could not be handed to the queue or the timers.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot send input {input_id} to thread {thread_id}: {reason}")]
pub struct SendError {
    /// The input.
    pub input_id: InputId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// Why.
    pub reason: String,
}

/// Puts inputs on a thread's input queue.
#[async_trait]
pub trait InputSender: Send + Sync {
    /// Enqueues `message` in the queue group `group_id` (the thread id) with deduplication key
    /// `dedup_id` (the input id).
    async fn send_to_input_queue(
        &self,
        message: &Input,
        group_id: &ThreadId,
        dedup_id: &InputId,
    ) -> Result<(), SendError>;
}

/// Delivers inputs later.
#[async_trait]
pub trait Timers: Send + Sync {
    /// Arranges for `input` to reach its thread's input queue at `due` (at once if it is past).
    async fn schedule(&self, input: Input, due: Timestamp) -> Result<(), SendError>;
}
