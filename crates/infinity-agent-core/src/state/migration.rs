//! A thread's move to another host (RAP session migration), as its record keeps it.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// Where a thread that is moving, or has moved, to another host stands. While it is set, the
/// thread runs no completion here: a moving thread holds its inputs
/// ([`super::ThreadRecord::held`]), a moved one forwards them to its destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Migration {
    /// The destination, as the user named it (a URL, or `aws`).
    pub to: String,
    /// When the move began.
    #[schemars(with = "crate::schema::Rfc3339")]
    pub since: Timestamp,
    /// How far it got.
    #[serde(flatten)]
    pub state: MigrationState,
}

/// How far a move got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum MigrationState {
    /// The session's loop is stopped while its state is copied: inputs are held on the record.
    Moving,
    /// The session lives at the destination: every input that still arrives here (a tool's
    /// late callback, a timer armed here) is forwarded to `forward_url`, which the destination
    /// signed for this thread.
    Moved {
        /// Where this thread's inputs go now.
        forward_url: String,
    },
}

impl Migration {
    /// The forwarding URL once the thread has moved.
    pub fn forward_url(&self) -> Option<&str> {
        match &self.state {
            MigrationState::Moved { forward_url } => Some(forward_url),
            MigrationState::Moving => None,
        }
    }
}
