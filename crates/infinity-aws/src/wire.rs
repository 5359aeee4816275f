//! Inputs on the wire: SQS message bodies, and the relay queue's envelope.
//!
//! A user message sent with `aws sqs send-message` looks like
//! `{"type": "user_message", "thread_id": "t1", "text": "hello"}` with `MessageGroupId` = the
//! thread id. The optional `"id"` is the input id, the deduplication key for good (not only for
//! SQS's five-minute window); without it the message's SQS deduplication id is used.

use infinity_agent_core::ids::InputId;
use infinity_agent_core::input::Input;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// Why a message body is not an input. Terminal: retrying the same bytes cannot help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Not a JSON object.
    #[error("body is not a JSON object: {0}")]
    NotJson(String),
    /// A JSON object, but not a valid input.
    #[error("body is not a valid input: {0}")]
    Invalid(String),
    /// No `id` in the body and no deduplication id on the message.
    #[error("body has no \"id\" and the message has no deduplication id")]
    NoId,
    /// The body's thread is not the message group.
    #[error("body's thread_id `{body}` disagrees with the message group `{group}`")]
    GroupMismatch {
        /// The body's thread id.
        body: String,
        /// The group.
        group: String,
    },
}

/// Parses an input-queue message. `group_id` and `dedup_id` are the message's
/// `MessageGroupId` and `MessageDeduplicationId` attributes, when it has them.
pub fn parse_input(
    body: &str,
    group_id: Option<&str>,
    dedup_id: Option<&str>,
) -> Result<Input, WireError> {
    let mut value: serde_json::Value =
        serde_json::from_str(body).map_err(|e| WireError::NotJson(e.to_string()))?;
    let Some(object) = value.as_object_mut() else {
        return Err(WireError::NotJson(
            "the body is JSON but not an object".into(),
        ));
    };
    if !object.contains_key("id") {
        let id = dedup_id.ok_or(WireError::NoId)?;
        // Content-based deduplication ids are 64 hex digits: valid input ids as they are.
        let id = InputId::new(id).map_err(|e| WireError::Invalid(e.to_string()))?;
        object.insert("id".into(), serde_json::Value::String(id.to_string()));
    }
    let input: Input =
        serde_json::from_value(value).map_err(|e| WireError::Invalid(e.to_string()))?;
    if let Some(group) = group_id {
        if input.thread_id.as_str() != group {
            return Err(WireError::GroupMismatch {
                body: input.thread_id.to_string(),
                group: group.to_owned(),
            });
        }
    }
    Ok(input)
}

/// A timer on its way through the relay queue (and EventBridge Scheduler).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayEnvelope {
    /// When the input is due on the input queue.
    pub due: Timestamp,
    /// The input.
    pub input: Input,
}

#[cfg(test)]
mod tests {
    use super::*;
    use infinity_agent_core::input::InputBody;

    #[test]
    fn a_user_message_with_and_without_id() {
        let i = parse_input(
            r#"{"type":"user_message","thread_id":"t1","text":"hi","id":"m1"}"#,
            Some("t1"),
            None,
        )
        .unwrap();
        assert_eq!(i.id.as_str(), "m1");
        assert_eq!(i.body, InputBody::UserMessage { text: "hi".into() });
        let i = parse_input(
            r#"{"type":"user_message","thread_id":"t1","text":"hi"}"#,
            Some("t1"),
            Some("abc123"),
        )
        .unwrap();
        assert_eq!(i.id.as_str(), "abc123");
    }

    #[test]
    fn bad_bodies_say_what_is_wrong() {
        assert!(matches!(
            parse_input("hello", None, None),
            Err(WireError::NotJson(_))
        ));
        assert!(matches!(
            parse_input("[1]", None, None),
            Err(WireError::NotJson(_))
        ));
        let err = parse_input(
            r#"{"type":"user_message","thread_id":"t1"}"#,
            Some("t1"),
            Some("d"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("text"), "{err}");
        let err = parse_input(
            r#"{"type":"user_message","thread_id":"t1","text":"x"}"#,
            Some("t2"),
            Some("d"),
        )
        .unwrap_err();
        assert_eq!(
            err,
            WireError::GroupMismatch {
                body: "t1".into(),
                group: "t2".into()
            }
        );
        assert_eq!(
            parse_input(
                r#"{"type":"user_message","thread_id":"t1","text":"x"}"#,
                Some("t1"),
                None
            )
            .unwrap_err(),
            WireError::NoId
        );
        let err = parse_input(
            r#"{"type":"launch_rockets","thread_id":"t1","id":"x"}"#,
            None,
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("launch_rockets"), "{err}");
    }
}

#[cfg(test)]
mod fuzz {
    //! Input-queue bodies, damaged and arbitrary: parsed or refused with a reason, never a
    //! panic; a body that parses is for the group it came in (or names no group).
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;
    use infinity_agent_core::testing::{cases, mutated, noise};
    use proptest::prelude::*;

    const BODIES: &[&str] = &[
        r#"{"type":"user_message","thread_id":"t1","text":"hi","id":"m1"}"#,
        r#"{"type":"timer_wake_up","thread_id":"t1","call_id":"c-1","id":"c-1-wake"}"#,
        r#"{"type":"tool_result","thread_id":"t1","id":"r","call_id":"c","text":"x","subscription":true}"#,
        r#"{"due":"2026-03-07T17:00:00Z","input":{"type":"user_message","thread_id":"t1","text":"hi","id":"m1"}}"#,
    ];

    proptest! {
        #![proptest_config(cases(2000))]

        #[test]
        fn bodies(bytes in prop_oneof![mutated(BODIES), noise(300)], dedup in any::<bool>()) {
            let body = String::from_utf8_lossy(&bytes);
            match parse_input(&body, Some("t1"), dedup.then_some("dedup-1")) {
                Ok(input) => prop_assert_eq!(input.thread_id.as_str(), "t1"),
                Err(err) => prop_assert!(!err.to_string().is_empty()),
            }
            let _ = serde_json::from_str::<RelayEnvelope>(&body);
        }
    }
}
