//! The invocation: what the runtime POSTs to a toolset's `endpoint`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Nullable, WireMessage};

/// A tool invocation, POSTed by the runtime to the `endpoint` of the tool's [`super::Manifest`].
///
/// The tool answers HTTP 200 at once, before any work, and later POSTs a [`super::Callback`] to
/// `callback_url` carrying `group_id` and `id`. Bad arguments or an unknown operation still get
/// 200 and an error `tool_result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invocation {
    /// The tool's `name` in the manifest.
    pub operation: String,
    /// The arguments, which should match the tool's `inputSchema`.
    pub arguments: Map<String, Value>,
    /// The tool call id, unique; every callback about this call echoes it (as `tool_call_id` in
    /// subscription events).
    pub id: String,
    /// An optional secondary, model-specific call id; echoed in callbacks when present.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub call_id: Nullable<String>,
    /// Where the tool POSTs its callbacks. Opaque to the tool; kept durably by subscription tools.
    pub callback_url: String,
    /// The conversation thread's id; every callback carries it for routing.
    pub group_id: String,
    /// The ancestor threads' ids, root first, up to the parent; left out for a root thread.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub thread_ancestors: Nullable<Vec<String>>,
    /// The end user, for authorization, personalization and audit; OAuth tokens are kept per
    /// user.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub user_id: Nullable<String>,
}

impl WireMessage for Invocation {
    const NAME: &'static str = "invocation";
}
