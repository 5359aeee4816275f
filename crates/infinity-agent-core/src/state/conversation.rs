//! What the threads of one conversation share.

use serde::{Deserialize, Serialize};

use crate::cost::Budget;
use crate::model::Usage;

use super::{Delegation, HourlyUsage, Memory, ThreadRecord, Toolset};

/// What the threads of one conversation share. The root thread's record keeps it
/// ([`ThreadRecord::conversation`], written as the record's own fields); a child's slice sees it
/// as the root had it when the slice began, and sends its changes to the root as inputs.
///
/// The doc comments are the record's fields' (the API's document shows them there).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Conversation {
    /// The conversation's notes (the `memory` tools); kept on the root thread only.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub memory: Memory,
    /// The conversation's running delegations; kept on the root thread only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegations: Vec<Delegation>,
    /// The session's tools from tool servers, discovered when it started; kept on the root
    /// thread only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolset: Option<Toolset>,
    /// What the conversation's threads used in the current hour; kept on the root thread only.
    #[serde(
        default,
        rename = "conversation_hourly",
        skip_serializing_if = "HourlyUsage::is_empty"
    )]
    pub hourly: HourlyUsage,
    /// What the conversation's threads (this root and every thread below it, and the
    /// delegations it started) used and cost over its whole life; kept on the root thread only.
    #[serde(
        default,
        rename = "conversation_usage",
        skip_serializing_if = "super::is_default"
    )]
    pub total: Usage,
    /// The conversation's lifetime budget in force as its root's last slice saw it: what a
    /// person set, else its agent's `limits.conversation_budget_*`; kept on the root thread
    /// only, for people to read.
    #[serde(
        default,
        rename = "conversation_budget",
        skip_serializing_if = "Budget::is_empty"
    )]
    pub budget: Budget,
    /// What a person set of the budget (`infinity budget`, `POST /threads/{id}/budget`), which
    /// holds over the agent's limits; kept on the root thread only.
    #[serde(
        default,
        rename = "conversation_budget_set",
        skip_serializing_if = "Budget::is_empty"
    )]
    pub budget_set: Budget,
}

impl Conversation {
    /// The shared part of a root thread's record, copied (for a child's slice).
    pub fn of_root(record: &ThreadRecord) -> Self {
        record.conversation.clone()
    }

    /// The shared part of a root thread's record, moved out for the root's own slice; see
    /// [`Conversation::put_back`].
    pub fn take_from(record: &mut ThreadRecord) -> Self {
        std::mem::take(&mut record.conversation)
    }

    /// Returns what [`Conversation::take_from`] moved out, with the slice's changes.
    pub fn put_back(self, record: &mut ThreadRecord) {
        record.conversation = self;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ThreadId;

    /// A record keeps what its conversation shares as its own fields, under the names records
    /// had before [`Conversation`] was one field: a record written by an older version reads the
    /// same, and one written now reads the same there.
    #[test]
    fn a_root_record_writes_its_conversation_as_its_own_fields() {
        let mut record = ThreadRecord::new(
            ThreadId::new("main").unwrap(),
            "helper",
            None,
            jiff::Timestamp::UNIX_EPOCH,
        );
        record
            .conversation
            .memory
            .insert("cake".into(), "lemon".into());
        record.conversation.total.input_tokens = 7;
        record.conversation.budget_set.tokens = Some(1000);
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(json["memory"]["cake"], "lemon", "{json}");
        assert_eq!(json["conversation_usage"]["input_tokens"], 7, "{json}");
        assert_eq!(json["conversation_budget_set"]["tokens"], 1000, "{json}");
        assert!(json.get("conversation").is_none(), "{json}");
        assert!(json.get("conversation_budget").is_none(), "{json}");
        let back: ThreadRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, record);
    }
}
