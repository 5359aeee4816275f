//! What the runtime POSTs to a tool server's base URL besides invocations: the best-effort
//! notifications, the status check and the migration request.

use serde::{Deserialize, Serialize};

use super::WireMessage;

/// The body of `POST /close_thread`: the thread will get no more invocations.
///
/// Best effort: sent once to every configured server, never retried; the server answers 200
/// whatever it does, also for threads it never saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloseThread {
    /// The closed thread (the `group_id` of its invocations).
    pub thread_id: String,
}

impl WireMessage for CloseThread {
    const NAME: &'static str = "close_thread notification";
}

/// The body of `POST /cancel_tool_call`: a call (or the subscription it started) was cancelled.
///
/// Best effort, like [`CloseThread`]; a result may still arrive afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelToolCall {
    /// The thread of the call (its `group_id`).
    pub thread_id: String,
    /// The call (its invocation `id`).
    pub tool_call_id: String,
}

impl WireMessage for CancelToolCall {
    const NAME: &'static str = "cancel_tool_call notification";
}

/// The body of `POST /tool_call_status`: does the server still track this call or subscription?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallStatusRequest {
    /// The thread of the call (its `group_id`).
    pub thread_id: String,
    /// The call (its invocation `id`; for a subscription, the call that started it).
    pub tool_call_id: String,
}

impl WireMessage for ToolCallStatusRequest {
    const NAME: &'static str = "tool_call_status request";
}

/// The answer to a [`ToolCallStatusRequest`], with HTTP 200.
///
/// A 4xx answer or an unreadable body means the same as `alive: false`; a 5xx or no answer means
/// the status is unknown and the call must stay pending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallStatusResponse {
    /// `true` while a result is still to come or the subscription is active; `false` for calls
    /// the server does not know (lost, finished, cancelled).
    pub alive: bool,
}

impl WireMessage for ToolCallStatusResponse {
    const NAME: &'static str = "tool_call_status response";
}

/// The body of `POST /migrate`, sent to servers whose manifest has `needsMigration: true`. The
/// server answers 200 only once the session's state is on the destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrateRequest {
    /// The session being moved (in Infinity, a conversation): its root thread's id.
    pub session_id: String,
    /// The base URL of the same tool server on the destination host.
    pub destination_url: String,
}

impl WireMessage for MigrateRequest {
    const NAME: &'static str = "migrate request";
}
